"""One continuous variable's figures for a report, from its paired original and masked values: both
distributions (mean, sd, quantiles, a histogram on common bins), and the variable's own share of the information
loss and disclosure risk measures: IL1, PIL_Q, PIL_m1 and PIL_m2, the bounded rank error brMAE and interval
disclosure ID, each the measure of docs/metrics.md restricted to this one variable.

The histogram covers the original's 1st to 99th percentile (values outside are counted, not placed), so the
figure never shows where the extreme records lie.
"""

from __future__ import annotations

import numpy as np

from sdc_tasks.metrics.information_loss import cell_sums
from sdc_tasks.metrics.pil import moment_pils, quantile_pil
from sdc_tasks.metrics.rank_metrics import bounded_rank_metrics, rank_errors, ranks
from sdc_tasks.metrics.risk import interval_hits
from sdc_tasks.stats.moments import moments_of

QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
HISTOGRAM_BINS = 30
HISTOGRAM_RANGE = (0.01, 0.99)


def distribution(values: np.ndarray) -> dict:
    """Mean, population sd and the QUANTILES (numpy's linear method) of one column: {"mean", "sd", "q05", ...}."""
    out = {"mean": float(values.mean()), "sd": float(values.std())}
    out.update({f"q{round(q * 100):02d}": float(v) for q, v in zip(QUANTILES, np.quantile(values, QUANTILES))})
    return out


def histogram(x: np.ndarray, xm: np.ndarray, bins: int = HISTOGRAM_BINS) -> dict:
    """Counts of the original and masked values on ``bins`` equal bins over the original's HISTOGRAM_RANGE
    percentiles, and how many of each lie outside: {"edges", "original", "masked", "outside"}."""
    low, high = np.quantile(x, HISTOGRAM_RANGE)
    if not high > low:
        low, high = low - 0.5, high + 0.5
    edges = np.linspace(low, high, bins + 1)
    counts = [np.histogram(v, bins=edges)[0] for v in (x, xm)]
    return {"edges": edges.tolist(), "original": counts[0].tolist(), "masked": counts[1].tolist(),
            "outside": [int(v.size - c.sum()) for v, c in zip((x, xm), counts)]}


def _mean_or_none(values: np.ndarray) -> float | None:
    """The mean of the defined terms, None when there is none."""
    return float(values.mean()) if values.size else None


def variable_measures(x: np.ndarray, xm: np.ndarray, ids: np.ndarray) -> dict:
    """The measures of docs/metrics.md restricted to one variable of n paired records (None where undefined):
    IL1 (percent; sdc_methods_comparison_chapter.txt sec. 4), PIL_Q, PIL_m1, PIL_m2 (fractions; pil_measures.txt
    sec. 4.3-4.4), brMAE (fraction; bounded_rank_metrics.txt eq. 8) and ID, the mean of ID_1..ID_10 (percent;
    chapter sec. 3)."""
    n = x.size
    cells = cell_sums(x, xm)
    il1 = 100.0 * cells.rel_abs_err / cells.cells if cells.cells else None
    sorted_x, sorted_xm = np.sort(x), np.sort(xm)
    quantile_terms, _ = quantile_pil(sorted_x, sorted_xm)
    moments = moment_pils(moments_of(x[:, None], order=4), moments_of(xm[:, None]))
    rank = bounded_rank_metrics(rank_errors(ranks(x, ids)[:, None], ranks(xm, ids)[:, None]), n)
    hits = interval_hits(sorted_x, x, xm)
    return {"IL1": il1, "PIL_Q": _mean_or_none(quantile_terms), "PIL_m1": _mean_or_none(moments["m1"][0]),
            "PIL_m2": _mean_or_none(moments["m2"][0]), "brMAE": rank.get("brMAE"),
            "ID": float(100.0 * hits.mean() / n)}


def variable_profile(name: str, x: np.ndarray, xm: np.ndarray, ids: np.ndarray) -> dict:
    """One variable's report figures from its paired original values ``x``, masked values ``xm`` and record
    ``ids``: {"variable", "n", "original", "masked" (distributions), "measures", "histogram"}."""
    x, xm = np.asarray(x, dtype=np.float64), np.asarray(xm, dtype=np.float64)
    return {"variable": name, "n": int(x.size), "original": distribution(x), "masked": distribution(xm),
            "measures": variable_measures(x, xm, ids), "histogram": histogram(x, xm)}
