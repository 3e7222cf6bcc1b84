"""Graph builder for the categorical metric families ``cat_il`` and ``cat_risk`` (docs/categorical.md).

Every measure comes from count tables (original-by-masked tables, two-way tables, key-combination counts) that
per-partition kernels build and a tree reduction adds up in one Dask computation, so the totals are exact and
independent of the partitioning; the finishers in sdc_tasks.metrics.categorical_loss and categorical_risk work
on the merged tables, whose size is bounded by the numbers of categories, not of records.
"""

from __future__ import annotations

import operator

import dask
import dask.dataframe as dd
import pandas as pd

from sdc_tasks.errors import InputError
from sdc_tasks.evaluation.linkage import EM_MAX_ITER, MASKED_SUFFIX
from sdc_tasks.metrics.categorical_loss import add_counts, canonical, categorical_loss, loss_counts, value_counts
from sdc_tasks.metrics.categorical_risk import (
    add_combinations,
    categorical_linkage,
    combination_counts,
    kanonymity,
    risk_measures,
)
from sdc_tasks.stats.moments import tree_merge

CATEGORICAL_FAMILIES = ("cat_il", "cat_risk")
PLD_CAT_MAX_DISAGREEMENTS = 1


def text_kinds(frames: list[dd.DataFrame], variables: list[str]) -> dict[str, bool]:
    """Per variable, whether its categories compare as text (a non-numeric column in any file) or as codes."""
    return {v: not all(pd.api.types.is_numeric_dtype(f._meta[v].dtype) for f in frames) for v in variables}


def canonical_orders(ordinal: dict[str, list], text: dict[str, bool]) -> dict[str, list]:
    """The given category orders as canonical category values (sdc_tasks.metrics.categorical_loss.canonical); an
    order that is not numeric for a numeric-coded variable raises InputError naming the variable."""
    out = {}
    for v, order in ordinal.items():
        values = pd.Series(list(order))
        if not text[v]:
            values = pd.to_numeric(values, errors="coerce")
            if values.isna().any():
                raise InputError(f"the category order of ordinal variable {v!r} must hold its numeric codes")
        out[v] = list(canonical(values, text[v]))
    return out


def _add_dicts(a: dict, b: dict) -> dict:
    """Per-variable sum of two dicts of frequency tables."""
    return {v: add_counts(a[v], b[v]) for v in a}


def check_categorical(categorical: list[str], keys: list[str], ordinal: dict, families: tuple[str, ...]) -> None:
    """Raise InputError naming an ordinal variable that is not categorical, or a family without its variables."""
    stray = [v for v in ordinal if v not in categorical]
    if stray:
        raise InputError(f"ordinal variable {stray[0]!r} is not listed among the categorical variables")
    if "cat_il" in families and not categorical:
        raise InputError("metric family 'cat_il' needs categorical variables (--categorical)")
    if "cat_risk" in families and not keys:
        raise InputError("metric family 'cat_risk' needs categorical key variables (--categorical)")


def categorical_measures(pairs: dd.DataFrame, original: dd.DataFrame, masked: dd.DataFrame, id_col: str,
                         categorical: list[str], keys: list[str], ordinal: dict[str, list], weight: str | None,
                         reference: dd.DataFrame | None, families: tuple[str, ...], n_masked: int,
                         max_disagreements: int = PLD_CAT_MAX_DISAGREEMENTS) -> dict:
    """Metric keys of the categorical families asked for: ``cat_il`` over the ``categorical`` variables of the
    paired records ``pairs`` (categorical_loss.categorical_loss; ``reference``: the file whose category
    distribution gives the _RF keys, default the original), ``cat_risk`` on the key variables ``keys`` of the
    masked file (k-anonymity, sample uniques, PLD_cat and, with a ``weight`` column, individual risk)."""
    variables = list(dict.fromkeys([*categorical, *keys]))
    frames = [original, masked, *([reference] if reference is not None else [])]
    text = text_kinds(frames, variables)
    pair_parts = pairs.to_delayed()
    tasks: dict[str, object] = {}
    if "cat_il" in families:
        tasks["loss"] = tree_merge([dask.delayed(loss_counts)(p, categorical, text, MASKED_SUFFIX)
                                   for p in pair_parts], operator.add)
        if reference is not None:
            tasks["reference"] = tree_merge([dask.delayed(value_counts)(p, categorical, text)
                                             for p in reference[categorical].to_delayed()], _add_dicts)
    if "cat_risk" in families:
        cols = [*keys, *([weight] if weight else [])]
        tasks["combos"] = tree_merge([dask.delayed(combination_counts)(p, keys, text, weight)
                                      for p in masked[cols].to_delayed()], add_combinations)
        both = {**text, **{k + MASKED_SUFFIX: text[k] for k in keys}}
        tasks["joint"] = tree_merge([dask.delayed(combination_counts)(p, [*keys, *(k + MASKED_SUFFIX for k in keys)],
                                                                      both) for p in pair_parts], add_combinations)
        tasks["original"] = tree_merge([dask.delayed(combination_counts)(p, keys, text)
                                        for p in original[keys].to_delayed()], add_combinations)
    results = dict(zip(tasks, dask.compute(*tasks.values())))
    out: dict = {}
    if "loss" in results:
        out.update(categorical_loss(results["loss"], canonical_orders(ordinal, text), n_masked,
                                    results.get("reference")))
    if "combos" in results:
        out.update(kanonymity(results["combos"], keys))
        if weight:
            out.update(risk_measures(results["combos"], keys, weight))
        out.update(categorical_linkage(results["joint"], results["original"], keys,
                                       [k + MASKED_SUFFIX for k in keys], max_disagreements, EM_MAX_ITER))
    return out
