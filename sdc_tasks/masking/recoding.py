"""Recodes an agency writes itself: a recode map (many categories into one), interval breaks with labels (age
bands), truncation of hierarchical codes to a prefix (NACE, geography), and top and bottom coding of a
continuous variable at a threshold; one rule per variable, all the variables of a step at once.

Sources: statistical_databases_survey.txt, "Global recoding" (several categories combined into a new, less
specific one; for a continuous attribute, a discretized version of it, as mu-Argus does) and "Top and bottom
coding" (values above, or below, a threshold lumped together). The rules are the user's; these functions only
apply them, exactly: a categorical rule becomes a mapping of each observed category (planned once per scope from
the category counts, then applied per partition), a threshold rule is applied record by record.

Categories are matched by their text: a map written in YAML (keys 11, "11") matches an integer code 11 or a
text code "11", and an integer-valued number read as a float (11.0, a code column with missing values) matches
"11" too. Missing values stay missing.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from sdc_tasks.masking.params import category_text

TEXT_DTYPE = "string[pyarrow]"  # the dtype Dask reads text as; labels and text targets are written with it


def interval_labels(breaks: list[float], closed: str) -> list[str]:
    """Default labels of the len(breaks) + 1 intervals the breaks cut the line into: "< b0" (closed left) or
    "<= b0" (closed right), then "[a, b)" or "(a, b]", then ">= bn" or "> bn"."""
    b = [format(x, "g") for x in breaks]
    if closed == "left":
        middle = [f"[{lo}, {hi})" for lo, hi in zip(b, b[1:])]
        return [f"< {b[0]}", *middle, f">= {b[-1]}"]
    middle = [f"({lo}, {hi}]" for lo, hi in zip(b, b[1:])]
    return [f"<= {b[0]}", *middle, f"> {b[-1]}"]


def interval_index(values: np.ndarray, breaks: list[float], closed: str) -> np.ndarray:
    """The interval of each value, 0..len(breaks): intervals [b_i, b_i+1) when closed left (a value equal to a
    break opens the next interval), (b_i, b_i+1] when closed right (it closes the previous one)."""
    return np.searchsorted(np.asarray(breaks, dtype=np.float64), values, side="right" if closed == "left" else "left")


def truncated_code(value: Any, length: int, variable: str) -> Any:
    """A hierarchical code cut to its first ``length`` characters, of the code's own type: 4711 -> 47 (length 2),
    "C1012" -> "C1"; a code no longer than ``length`` stays as it is. ValueError naming the variable for a
    number that is not an integer code."""
    if isinstance(value, (float, np.floating)) and not float(value).is_integer():
        raise ValueError(f"recode rule of variable {variable!r}: prefix needs integer or text codes, and the "
                         "variable holds a number with decimals")
    text = category_text(value)[:length]
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        return text
    return type(value)(int(text)) if text.lstrip("-") else value


def category_mapping(categories: list, rule: dict, variable: str) -> dict:
    """{observed category: its recoded value} under one variable's rule (``map``, ``breaks`` with ``labels`` and
    ``closed``, left by default, or ``prefix``); ValueError naming the variable when a map leaves observed
    categories unmapped (how many, never which) or breaks meet text categories."""
    if rule.get("map") is not None:
        table = rule["map"]
        unmapped = sum(category_text(c) not in table for c in categories)
        if unmapped:
            raise ValueError(f"recode map of variable {variable!r} leaves {unmapped} of its {len(categories)} "
                             "observed categories unmapped: list every category (map it to itself to keep it)")
        return {c: table[category_text(c)] for c in categories}
    if rule.get("breaks") is not None:
        if any(isinstance(c, (str, bool, np.bool_)) for c in categories):
            raise ValueError(f"recode rule of variable {variable!r}: breaks need numbers, and the variable holds "
                             "text categories")
        closed = rule.get("closed") or "left"
        labels = rule.get("labels") or interval_labels(rule["breaks"], closed)
        index = interval_index(np.asarray(categories, dtype=np.float64), rule["breaks"], closed)
        return {c: labels[i] for c, i in zip(categories, index)}
    return {c: truncated_code(c, rule["prefix"], variable) for c in categories}


def recoded_dtype(dtype: Any, rule: dict) -> Any:
    """The dtype a variable takes under its rule: its own for a prefix, and for a map whose targets are numbers
    when the variable holds numbers (a text variable mapped to integers: nullable Int64, floats: float64); text
    for interval labels and text targets."""
    if rule.get("prefix") is not None:
        return dtype
    if rule.get("breaks") is not None:
        return pd.api.types.pandas_dtype(TEXT_DTYPE)
    targets = list(rule["map"].values())
    if all(isinstance(t, str) for t in targets):
        return pd.api.types.pandas_dtype(TEXT_DTYPE)
    integers = all(isinstance(t, (int, np.integer)) and not isinstance(t, bool) for t in targets)
    if pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype):
        return dtype if integers or pd.api.types.is_float_dtype(dtype) else np.dtype("float64")
    return pd.Int64Dtype() if integers else np.dtype("float64")


def threshold_coded(values: np.ndarray, rule: dict) -> np.ndarray:
    """Top and bottom coding at a value (statistical_databases_survey.txt, Top and bottom coding): values above
    ``top`` replaced by ``top_value`` (default: ``top`` itself), values below ``bottom`` by ``bottom_value``
    (default: ``bottom``); other values, and missing ones, unchanged."""
    out = np.array(values, dtype=np.float64)
    if rule.get("top") is not None:
        out[out > rule["top"]] = rule["top"] if rule.get("top_value") is None else rule["top_value"]
    if rule.get("bottom") is not None:
        out[out < rule["bottom"]] = rule["bottom"] if rule.get("bottom_value") is None else rule["bottom_value"]
    return out


def _checked_rules(rules: dict, variables, method: str) -> None:
    """ValueError naming a variable of the step without a rule, or a rule for a variable the step does not
    mask."""
    missing = [v for v in variables if v not in rules]
    if missing:
        raise ValueError(f"{method}: variable {missing[0]!r} of the step has no rule in parameter 'rules'")
    extra = [v for v in rules if v not in variables]
    if extra:
        raise ValueError(f"{method}: parameter 'rules' names variable {extra[0]!r}, which the step does not mask")


def recode_plan(counts: dict[str, pd.Series], params: dict, orders: dict) -> dict:
    """Per variable: {observed category: recoded category} under its rule."""
    _checked_rules(params["rules"], list(counts), "recode")
    return {v: category_mapping(list(c.index), params["rules"][v], v) for v, c in counts.items()}


def mapped(rows: pd.DataFrame, variables: list[str], plan: dict, keys: dict) -> pd.DataFrame:
    """Each variable's categories replaced by their planned ones (missing values stay missing)."""
    return pd.DataFrame({v: rows[v].map(plan[v]) for v in variables})


def recode_dtype(dtype: Any, variable: str, params: dict) -> Any:
    """The dtype a variable takes under the rule ``params`` gives it (:func:`recoded_dtype`)."""
    return recoded_dtype(dtype, params["rules"][variable])


def threshold_variables(variables: list[str], params: dict) -> list[str]:
    """The step's variables, each checked to have a threshold rule."""
    _checked_rules(params["rules"], variables, "top_bottom_coding")
    return variables
