"""The per-variable figures of a release report, computed over the paired records: each continuous variable's
distributions and its own share of the loss and risk measures (:mod:`sdc_tasks.metrics.variable_profile`), the
correlation matrices of both files, and each categorical variable's category counts in both files.

A continuous variable's order figures (quantiles, histogram, its rank errors and interval hits) come from the same
gathering or pair of sorts of the variable as the order-based measures of the ``il``, ``pil`` and ``id`` families
(order_measures.py), and its other parts are summed per partition. A release's evaluation computes the profiles
beside its measures (the ``profile`` unit of continuous.py), so each variable is sorted once for both;
:func:`release_profile` computes them itself when it is not given them.
"""

from __future__ import annotations

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd

from sdc_tasks.evaluation.categorical import add_frequency_tables
from sdc_tasks.evaluation.order_measures import OrderAsked, OrderMeasures, order_measures
from sdc_tasks.evaluation.pairing import paired, pairs_home, record_count
from sdc_tasks.metrics.categorical_loss import MISSING_TEXT, value_counts
from sdc_tasks.metrics.information_loss import CellSums, cell_sums
from sdc_tasks.metrics.variable_profile import VariableSummary, profile_of
from sdc_tasks.outputs import scratch_area
from sdc_tasks.reserved import MASKED_SUFFIX
from sdc_tasks.stats.moments import Moments, frames_moments, tree_merge

PROFILES_KEY = "variable_profiles"
"""The key under which an evaluation asked for the profiles returns them beside the metric keys."""

SHOWN_CATEGORIES = 30
"""The most categories of one variable a report lists (the most frequent in the original file; the others are
counted together)."""


def _partition_cells(part: pd.DataFrame, variables: list[str]) -> list[CellSums]:
    """Each variable's IL1 sums over one paired partition."""
    return [cell_sums(part[v].to_numpy(np.float64), part[v + MASKED_SUFFIX].to_numpy(np.float64)) for v in variables]


def _added_cells(a: list[CellSums], b: list[CellSums]) -> list[CellSums]:
    """Each variable's IL1 sums over two disjoint sets of paired records."""
    return [x + y for x, y in zip(a, b)]


def variable_cells(pair_parts: list, variables: list[str]):
    """Each variable's IL1 sums over the paired partitions, tree-merged (a Delayed list, one per variable)."""
    return tree_merge([dask.delayed(_partition_cells)(p, variables) for p in pair_parts], _added_cells)


def variable_profiles(variables: list[str], moments: tuple[Moments, Moments], cells: list[CellSums],
                      measures: dict[str, OrderMeasures]) -> list[dict]:
    """Each variable's report figures (:func:`~sdc_tasks.metrics.variable_profile.profile_of`) from the paired
    records' moments over ``variables`` (the original's to order 4), their IL1 sums and their order-based results
    with the figures (order_measures.py; hits: ID_1..ID_10 then SDID)."""
    mo, mm = moments
    return [profile_of(v, VariableSummary(mo.n, (mo.subset([j]), mm.subset([j])), cells[j], measures[v].rank_errors,
                                          measures[v].hits[:-1], measures[v].figures))
            for j, v in enumerate(variables)]


def _profiles(pairs: dd.DataFrame, id_col: str, variables: list[str]) -> list[dict]:
    """Each variable's profile from its records paired by id: one pass for the moments, one for the IL1 sums, and
    each variable gathered on one worker or sorted across the partitions (order_measures.py)."""
    masked = pairs[[v + MASKED_SUFFIX for v in variables]].rename(columns={v + MASKED_SUFFIX: v for v in variables})
    mo, mm = frames_moments([pairs, masked], variables, [4, 2])
    measures = order_measures(pairs, None, id_col, variables, dict(zip(variables, mo.sd)), mo.n,
                              OrderAsked(ranks=True, hits=True, figures=True))
    return variable_profiles(variables, (mo, mm), dask.compute(variable_cells(pairs.to_delayed(), variables))[0],
                             measures)


def correlations(original: dd.DataFrame, masked: dd.DataFrame, variables: list[str]) -> dict:
    """The correlation matrices of ``variables`` in both files (population moments; an undefined cell, of a
    constant variable, is None): {"variables", "original", "masked"}."""
    out: dict = {"variables": list(variables)}
    for name, moments in zip(("original", "masked"), frames_moments([original, masked], variables, [2, 2])):
        r, defined = moments.corr()
        out[name] = [[float(v) if d else None for v, d in zip(row, ok)] for row, ok in zip(r, defined)]
    return out


def _frequency_tables(frame: dd.DataFrame, variables: list[str]):
    """Per variable, the frequency of each category of ``frame`` as text (codes written as whole numbers, missing
    values as MISSING_TEXT), tree-merged over the partitions (a Delayed)."""
    text = dict.fromkeys(variables, True)
    return tree_merge([dask.delayed(value_counts)(p, variables, text) for p in frame[variables].to_delayed()],
                      add_frequency_tables)


def _category_key(code: str) -> tuple:
    """Where a category sorts: numeric codes in numeric order, then text in text order."""
    try:
        return 0, float(code), ""
    except ValueError:
        return 1, 0.0, code


def category_profile(variable: str, original: pd.Series, masked: pd.Series,
                     shown: int = SHOWN_CATEGORIES) -> dict:
    """One categorical variable's counts in both files from their frequency tables (category text -> count):
    {"variable", "categories": [{"code", "original", "masked"}] for at most ``shown`` categories of the release
    (the most frequent in the original, then in the release) in code order, "other": {"categories", "original",
    "masked"} counting the rest together (None when none is left), "missing": [original, masked] records without
    a value (suppressed)}. Only a category the release holds is named: one that masking removed (a rare value
    recoded, swapped or suppressed away) is a confidential value and is only counted among the others."""
    counts = pd.DataFrame({"original": original, "masked": masked}).fillna(0.0)
    missing = counts.loc[MISSING_TEXT].tolist() if MISSING_TEXT in counts.index else [0.0, 0.0]
    counts = counts.drop(index=MISSING_TEXT, errors="ignore")
    released = [c for c in counts.index if counts.at[c, "masked"] > 0]
    named = sorted(released, key=lambda c: (-counts.at[c, "original"], -counts.at[c, "masked"],
                                            _category_key(str(c))))[:shown]
    rest = counts.drop(index=named)
    rows = [{"code": str(code), "original": float(counts.at[code, "original"]),
             "masked": float(counts.at[code, "masked"])} for code in sorted(named, key=lambda c: _category_key(str(c)))]
    other = {"categories": len(rest), "original": float(rest["original"].sum()),
             "masked": float(rest["masked"].sum())} if len(rest) else None
    return {"variable": variable, "categories": rows, "other": other, "missing": [float(m) for m in missing]}


def category_profiles(original: dd.DataFrame, masked: dd.DataFrame, variables: list[str]) -> list[dict]:
    """:func:`category_profile` of each categorical variable, both files' counts in one Dask computation."""
    a, b = dask.compute(_frequency_tables(original, variables), _frequency_tables(masked, variables))
    return [category_profile(v, a[v], b[v]) for v in variables]


def release_profile(original: dd.DataFrame, masked: dd.DataFrame, id_col: str, variables: list[str],
                    categorical: list[str] = (), profiles: list[dict] | None = None) -> dict:
    """The report figures of ``masked`` against ``original``: {"variables": one profile per continuous variable
    (records paired by id; ``profiles`` when the evaluation computed them, PROFILES_KEY), "correlation":
    :func:`correlations` (two or more variables), "categories": one :func:`category_profile` per ``categorical``
    variable}."""
    out: dict = {"variables": [], "correlation": None, "categories": []}
    if profiles is not None:
        out["variables"] = profiles
    elif variables:
        columns = [id_col, *variables]
        with scratch_area("profile") as work:
            held_at = pairs_home(work, original, columns, int(dask.compute(record_count(original))[0]))
            out["variables"] = _profiles(paired(original, masked, id_col, list(variables), held_at), id_col,
                                         list(variables))
    if len(variables) >= 2:
        out["correlation"] = correlations(original, masked, list(variables))
    if categorical:
        out["categories"] = category_profiles(original, masked, list(categorical))
    return out
