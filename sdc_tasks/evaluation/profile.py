"""The per-variable figures of a release report, computed over the paired records: each continuous variable's
distributions and its own share of the loss and risk measures (:mod:`sdc_tasks.metrics.variable_profile`), the
correlation matrices of both files, and each categorical variable's category counts in both files.

As for the order-based measures of the ``il``, ``pil`` and ``id`` families (continuous.py), each variable is
sorted across the partitions (order_measures.py) and its other parts are summed per partition, so no task holds
more than a few partitions; files of at most GATHER_ROWS records (order_measures.py) gather each variable on one
worker instead, with the same figures.
"""

from __future__ import annotations

import operator

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd

from sdc_tasks.evaluation.categorical import add_frequency_tables
from sdc_tasks.evaluation.linkage import gathered
from sdc_tasks.evaluation.order_measures import gathers, interval_hit_graph, paired_orders, rank_error_graph
from sdc_tasks.evaluation.pairing import paired
from sdc_tasks.metrics.categorical_loss import MISSING_TEXT, value_counts
from sdc_tasks.metrics.information_loss import CellSums, cell_sums
from sdc_tasks.metrics.variable_profile import VariableSummary, bin_counts, profile_of, variable_profile
from sdc_tasks.reserved import MASKED_SUFFIX
from sdc_tasks.stats.moments import Moments, frames_moments, tree_merge

SHOWN_CATEGORIES = 30
"""The most categories of one variable a report lists (the most frequent in the original file; the others are
counted together)."""


def _column_profile(parts: list[pd.DataFrame], var: str, id_col: str) -> dict:
    """The profile of one variable from the paired partitions, gathered on one worker."""
    return variable_profile(var, gathered(parts, var, np.float64), gathered(parts, var + MASKED_SUFFIX, np.float64),
                            gathered(parts, id_col))


def _part_cells(part: pd.DataFrame, var: str) -> CellSums:
    """IL1 sums of one variable of one paired partition."""
    return cell_sums(part[var].to_numpy(np.float64), part[var + MASKED_SUFFIX].to_numpy(np.float64))


def _part_bins(part: pd.DataFrame, var: str, edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Histogram counts of one variable of one paired partition."""
    return bin_counts(part[var].to_numpy(np.float64), part[var + MASKED_SUFFIX].to_numpy(np.float64), edges)


def _summed_bins(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Histogram counts of two disjoint blocks."""
    return a[0] + b[0], a[1] + b[1]


def _sorted_profile(pairs: dd.DataFrame, var: str, id_col: str, moments: tuple[Moments, Moments], n: int) -> dict:
    """The profile of one variable sorted across the partitions of the paired records (``moments``: of its
    original and masked values); the sorts are released on return."""
    a, b = paired_orders(pairs, id_col, var)
    parts = pairs.to_delayed()
    cells, errors, hits = dask.compute(tree_merge([dask.delayed(_part_cells)(p, var) for p in parts], operator.add),
                                       rank_error_graph(b), interval_hit_graph(b))

    def counts(edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The histogram counts, summed over the paired partitions."""
        return dask.compute(tree_merge([dask.delayed(_part_bins)(p, var, edges) for p in parts], _summed_bins))[0]

    return profile_of(var, VariableSummary(n, moments, (a, b), cells, errors, hits, counts))


def _profiles(pairs: dd.DataFrame, id_col: str, variables: list[str]) -> list[dict]:
    """Each variable's profile, sorted across the partitions one variable at a time, or gathered on one worker
    for at most GATHER_ROWS records (order_measures.py)."""
    masked = pairs[[v + MASKED_SUFFIX for v in variables]].rename(columns={v + MASKED_SUFFIX: v for v in variables})
    mo, mm = frames_moments([pairs, masked], variables, [4, 2])
    if gathers(mo.n):
        parts = pairs.to_delayed()
        return list(dask.compute(*[dask.delayed(_column_profile)(parts, v, id_col) for v in variables]))
    return [_sorted_profile(pairs, v, id_col, (mo.subset([j]), mm.subset([j])), mo.n) for j, v in enumerate(variables)]


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
                    categorical: list[str] = ()) -> dict:
    """The report figures of ``masked`` against ``original``: {"variables": one profile per continuous variable
    (records paired by id), "correlation": :func:`correlations` (two or more variables), "categories": one
    :func:`category_profile` per ``categorical`` variable}."""
    out: dict = {"variables": [], "correlation": None, "categories": []}
    if variables:
        out["variables"] = _profiles(paired(original, masked, id_col, list(variables)).persist(), id_col,
                                     list(variables))
    if len(variables) >= 2:
        out["correlation"] = correlations(original, masked, list(variables))
    if categorical:
        out["categories"] = category_profiles(original, masked, list(categorical))
    return out
