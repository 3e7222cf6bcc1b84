"""One continuous variable's figures for a report, from its paired original and masked values: both
distributions (mean, sd, quantiles, a histogram on common bins), and the variable's own share of the information
loss and disclosure risk measures: IL1, PIL_Q, PIL_m1 and PIL_m2, the bounded rank error brMAE and interval
disclosure ID, each the measure of docs/metrics.md restricted to this one variable.

The histogram covers the original's 1st to 99th percentile (values outside are counted, not placed), so the
figure never shows where the extreme records lie. Every figure is computed from a :class:`VariableSummary`, whose
parts add over partitions or are read from sorted columns, so a variable held in memory and one sorted across the
partitions of a Dask frame (sdc_tasks/evaluation/profile.py) give the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sdc_tasks.metrics.information_loss import CellSums, cell_sums
from sdc_tasks.metrics.pil import moment_pils, quantile_pil
from sdc_tasks.metrics.rank_metrics import RankErrors, bounded_rank_metrics, rank_errors, ranked_order, ranks, ranks_in
from sdc_tasks.metrics.risk import interval_hits
from sdc_tasks.stats.moments import Moments, moments_of
from sdc_tasks.stats.order import SortedValues, linear_quantiles

QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
HISTOGRAM_BINS = 30
HISTOGRAM_RANGE = (0.01, 0.99)


@dataclass(frozen=True)
class OrderFigures:
    """What a variable's profile reads from its original and masked values sorted (:mod:`sdc_tasks.stats.order`
    columns: in memory, or sorted across partitions): the QUANTILES of each, the PIL_Q terms and undefined count
    of :func:`~sdc_tasks.metrics.pil.quantile_pil`, and the histogram ``edges`` (:func:`histogram_edges`) with each
    column's ``counts`` in them."""

    quantiles: tuple[np.ndarray, np.ndarray]
    quantile_terms: tuple[np.ndarray, int]
    edges: np.ndarray
    counts: tuple[np.ndarray, np.ndarray]


@dataclass(frozen=True)
class VariableSummary:
    """What one variable's profile is computed from, for n paired records: the Moments of the original values
    (order 4) and of the masked ones, the IL1 cell sums, the rank errors and the ID_1..ID_10 hits (exact, mergeable
    over partitions), and the figures read from both columns sorted (:class:`OrderFigures`)."""

    n: int
    moments: tuple[Moments, Moments]
    cells: CellSums
    rank_errors: RankErrors
    hits: np.ndarray
    figures: OrderFigures


def distribution(moments: Moments, quantiles: np.ndarray) -> dict:
    """Mean and population sd (from the column's Moments: exact sums) and the QUANTILES of one column:
    {"mean", "sd", "q05", ...}."""
    out = {"mean": float(moments.mean[0]), "sd": float(moments.sd[0])}
    out.update({f"q{round(q * 100):02d}": float(v) for q, v in zip(QUANTILES, quantiles)})
    return out


def histogram_edges(sorted_x, bins: int = HISTOGRAM_BINS) -> np.ndarray:
    """``bins`` equal bins over the original's HISTOGRAM_RANGE percentiles (one unit wide around a constant)."""
    low, high = linear_quantiles(sorted_x, HISTOGRAM_RANGE)
    if not high > low:
        low, high = low - 0.5, high + 0.5
    return np.linspace(low, high, bins + 1)


def sorted_bin_counts(column, edges: np.ndarray) -> np.ndarray:
    """``np.histogram(values, bins=edges)[0]`` of a sorted column from its counts below the edges: bin i holds
    e_i <= v < e_(i+1), the last bin its right edge too (numpy's bins)."""
    below = column.count_below(np.asarray(edges, dtype=np.float64), "left")
    counts = np.diff(below).astype(np.int64)
    counts[-1] += int(column.count_below(np.asarray(edges[-1:], dtype=np.float64), "right")[0] - below[-1])
    return counts


def order_figures(sorted_x, sorted_xm) -> OrderFigures:
    """The :class:`OrderFigures` of a variable's sorted original (``sorted_x``) and masked (``sorted_xm``)
    columns."""
    edges = histogram_edges(sorted_x)
    return OrderFigures((linear_quantiles(sorted_x, QUANTILES), linear_quantiles(sorted_xm, QUANTILES)),
                        quantile_pil(sorted_x, sorted_xm), edges,
                        (sorted_bin_counts(sorted_x, edges), sorted_bin_counts(sorted_xm, edges)))


def histogram(summary: VariableSummary) -> dict:
    """Counts of the original and masked values on the bins of :func:`histogram_edges`, and how many of each lie
    outside: {"edges", "original", "masked", "outside"}."""
    counts = summary.figures.counts
    return {"edges": summary.figures.edges.tolist(), "original": counts[0].tolist(), "masked": counts[1].tolist(),
            "outside": [int(summary.n - c.sum()) for c in counts]}


def _mean_or_none(values: np.ndarray) -> float | None:
    """The mean of the defined terms, None when there is none."""
    return float(values.mean()) if values.size else None


def variable_measures(summary: VariableSummary) -> dict:
    """The measures of docs/metrics.md restricted to one variable of n paired records (None where undefined):
    IL1 (percent; sdc_methods_comparison_chapter.txt sec. 4), PIL_Q, PIL_m1, PIL_m2 (fractions; pil_measures.txt
    sec. 4.3-4.4), brMAE (fraction; bounded_rank_metrics.txt eq. 8) and ID, the mean of ID_1..ID_10 (percent;
    chapter sec. 3)."""
    cells = summary.cells
    il1 = 100.0 * cells.rel_abs_err / cells.cells if cells.cells else None
    quantile_terms = summary.figures.quantile_terms[0]
    moments = moment_pils(*summary.moments)
    rank = bounded_rank_metrics(summary.rank_errors, summary.n)
    return {"IL1": il1, "PIL_Q": _mean_or_none(quantile_terms), "PIL_m1": _mean_or_none(moments["m1"][0]),
            "PIL_m2": _mean_or_none(moments["m2"][0]), "brMAE": rank.get("brMAE"),
            "ID": float(100.0 * summary.hits.mean() / summary.n)}


def profile_of(name: str, summary: VariableSummary) -> dict:
    """One variable's report figures: {"variable", "n", "original", "masked" (distributions), "measures",
    "histogram"}."""
    quantiles = summary.figures.quantiles
    return {"variable": name, "n": summary.n, "original": distribution(summary.moments[0], quantiles[0]),
            "masked": distribution(summary.moments[1], quantiles[1]), "measures": variable_measures(summary),
            "histogram": histogram(summary)}


def variable_profile(name: str, x: np.ndarray, xm: np.ndarray, ids: np.ndarray) -> dict:
    """One variable's report figures (:func:`profile_of`) from its paired original values ``x``, masked values
    ``xm`` and record ``ids`` held in memory."""
    x, xm = np.asarray(x, dtype=np.float64), np.asarray(xm, dtype=np.float64)
    sorted_xm = np.sort(xm)
    masked_order = ranked_order(xm, ids)  # serves the ranks and the hits
    summary = VariableSummary(int(x.size), (moments_of(x[:, None], order=4), moments_of(xm[:, None])),
                              cell_sums(x, xm), rank_errors(ranks(x, ids)[:, None], ranks_in(masked_order)[:, None]),
                              interval_hits(sorted_xm, x, xm, order=masked_order),
                              order_figures(SortedValues(np.sort(x)), SortedValues(sorted_xm)))
    return profile_of(name, summary)
