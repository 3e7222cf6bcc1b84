"""Information loss IL1..IL5 and IL (percent), from paired-record sums and moment sketches.

Source: sdc_methods_comparison_chapter.txt sec. 4 (Information Loss Metrics) and
statistical_databases_survey.txt, "Example" of Score construction; exact definitions in docs/metrics.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sdc_tasks.metrics.finite import finite_measure
from sdc_tasks.stats.exact_sum import ExactSums, exact_sums
from sdc_tasks.stats.moments import Moments


@dataclass(frozen=True)
class CellSums:
    """Mergeable per-cell sums over paired records: sum |x - x'| / |x| over nonzero x (exact, so the same for
    any partitioning), and the cell counts."""

    rel: ExactSums
    cells: int
    zero_cells: int

    @property
    def rel_abs_err(self) -> float:
        """sum |x - x'| / |x| over the nonzero x, rounded once."""
        return float(self.rel.values()[0])

    def __add__(self, other: "CellSums") -> "CellSums":
        """Sums of two disjoint blocks of paired records."""
        return CellSums(self.rel + other.rel, self.cells + other.cells, self.zero_cells + other.zero_cells)


def cell_sums(x: np.ndarray, xm: np.ndarray) -> CellSums:
    """Sums for IL1 over one block of paired records: |x_ij - x'_ij| / |x_ij| where x_ij != 0 (docs/metrics.md IL1)."""
    x = np.asarray(x, dtype=np.float64)
    xm = np.asarray(xm, dtype=np.float64)
    nonzero = x != 0
    with np.errstate(over="ignore", invalid="ignore"):
        ratio = np.abs(x - xm)[nonzero] / np.abs(x[nonzero])
    return CellSums(exact_sums(ratio), int(nonzero.sum()), int((~nonzero).sum()))


def _mean_variation(orig: np.ndarray, masked: np.ndarray) -> tuple[float | None, int]:
    """Mean of |a - a'| / |a| over the cells with a != 0 and a finite term (None if there is none), and the
    cells left out."""
    with np.errstate(over="ignore", invalid="ignore"):
        terms = np.abs(orig - masked) / np.abs(np.where(orig != 0, orig, 1.0))
    defined = (orig != 0) & np.isfinite(terms)
    if not defined.any():
        return None, int(orig.size)
    return float(np.mean(terms[defined])), int((~defined).sum())


def information_loss(cells: CellSums, mo: Moments, mm: Moments) -> dict[str, float]:
    """IL1..IL5 and IL in percent, with ``<key>_undefined_terms`` counts (docs/metrics.md; chapter 6 sec. 4).

    IL1 = 100 mean |x - x'| / |x|; IL2 = 100 mean_j |xbar_j - xbar'_j| / |xbar_j|;
    IL3 = 100 mean_{i<=j} |v_ij - v'_ij| / |v_ij|; IL4 = 100 mean_j |v_jj - v'_jj| / |v_jj|;
    IL5 = 100 mean_{i<j} |r_ij - r'_ij|; IL = mean of IL1..IL5.
    A term whose denominator is 0, or that is not finite, is left out and counted; a measure with no defined
    term is omitted (and counted in ``IL_missing_measures``), never reported as NaN; a measure whose value is
    not finite (an overflowed sum) is omitted and counted too, with ``<key>_not_finite``.
    """
    p = mo.mean.shape[0]
    upper = np.triu_indices(p)
    strict = np.triu_indices(p, k=1)
    ro, do = mo.corr()
    rm, dm = mm.corr()
    corr_defined = (do & dm)[strict]
    corr_diffs = np.abs(ro[strict] - rm[strict])[corr_defined]
    values: dict[str, float | None] = {
        "IL1": cells.rel_abs_err / cells.cells if cells.cells else None,
        "IL5": float(corr_diffs.mean()) if corr_diffs.size else None,
    }
    undefined = {"IL1": cells.zero_cells, "IL5": int((~corr_defined).sum())}
    values["IL2"], undefined["IL2"] = _mean_variation(mo.mean, mm.mean)
    values["IL3"], undefined["IL3"] = _mean_variation(mo.cov[upper], mm.cov[upper])
    values["IL4"], undefined["IL4"] = _mean_variation(np.diag(mo.cov), np.diag(mm.cov))
    out: dict[str, float] = {"IL1_zero_cells": float(cells.zero_cells)}
    present = []
    for key in ("IL1", "IL2", "IL3", "IL4", "IL5"):
        if undefined[key] and key != "IL1":
            out[f"{key}_undefined_terms"] = float(undefined[key])
        if values[key] is not None:
            out.update(finite_measure(key, 100.0 * values[key]))
        if key in out:
            present.append(out[key])
    out["IL_missing_measures"] = float(5 - len(present))
    if present:
        out["IL"] = float(np.mean(present))
    return out
