"""Bounded rank-based information loss brMAE and brMSE (bounded_rank_metrics.txt sec. 2, eq. 8 and 9).

For each attribute j, r_ij is the rank of the original value x_ij among the original column j and
r~_ij the rank of the masked value x~_ij among the masked column j (each file ranked on its own, 1..n),
record i of the two files paired by id. Ties are broken so that every rank is unique (the paper asks for
a method "that generates unique rank values"); docs/metrics.md settles it: by increasing record id.

    brMAE = sum_j sum_i |r_ij - r~_ij| / (p M1(n)),   M1(n) = 2 sum_{k=1}^{K} (n - 2k + 1)      (eq. 8)
    brMSE = sum_j sum_i (r_ij - r~_ij)^2 / (p M2(n)), M2(n) = 2 sum_{k=1}^{K} (n - 2k + 1)^2    (eq. 9)

with K = floor(n / 2); M1 and M2 are the total absolute and squared distances between (1..n) and its
reverse (eq. 1-3), the largest any two permutations of 1..n can be apart, so each attribute's share
lies in [0, 1] and the result is its average over the p attributes. Closed forms (summing the arithmetic
series): M1(n) = 2 K (n - K) = floor(n^2 / 2) and M2(n) = n (n^2 - 1) / 3 (the odd-n middle term is 0).
The reversed ranking attains both maxima; for brMSE it is the only one (rearrangement inequality), for
brMAE other permutations reach it as well (the paper's Tables 1 and 2).

Scale: :func:`ranks` ranks one whole column; :func:`rank_errors` sums the rank differences of any block
of paired records into a mergeable :class:`RankErrors`, exactly (Python integers).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numba
import numpy as np

from sdc_tasks.metrics.paired_blocks import paired_columns
from sdc_tasks.stats.order import value_order


def ranked_order(values: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """The row indices in rank order: by value, ties by increasing record id (docs/metrics.md brMAE/brMSE;
    bounded_rank_metrics.txt sec. 2 asks for unique ranks); :func:`ranks_in` turns it into ranks."""
    values = np.asarray(values, dtype=np.float64).reshape(-1)
    ids = np.asarray(ids).reshape(-1)
    if values.shape != ids.shape:
        raise ValueError(f"{values.shape[0]} values but {ids.shape[0]} ids")
    if np.isnan(values).any():
        raise ValueError("cannot rank NaN values")
    return value_order(values, ids)


def ranks_in(order: np.ndarray) -> np.ndarray:
    """Each row's rank 1..n given the rows in rank order (:func:`ranked_order`)."""
    out = np.empty(order.shape[0], dtype=np.int64)
    out[order] = np.arange(1, order.shape[0] + 1, dtype=np.int64)
    return out


def ranks(values: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Ranks 1..n of one column, ties broken by increasing record id (docs/metrics.md brMAE/brMSE;
    bounded_rank_metrics.txt sec. 2 asks for unique ranks). Rank 1 is the smallest value."""
    return ranks_in(ranked_order(values, ids))


def max_abs_rank_distance(n: int) -> int:
    """M1(n) = 2 sum_{k=1}^{K} (n - 2k + 1), K = floor(n/2) (bounded_rank_metrics.txt eq. 1, 2, 7):
    the largest sum_i |r_i - r~_i| over permutations r, r~ of 1..n; closed form 2 K (n - K) = floor(n^2/2)."""
    k = n // 2
    return 2 * k * (n - k)


def max_sq_rank_distance(n: int) -> int:
    """M2(n) = 2 sum_{k=1}^{K} (n - 2k + 1)^2, K = floor(n/2) (bounded_rank_metrics.txt eq. 3):
    the largest sum_i (r_i - r~_i)^2 over permutations of 1..n; closed form n (n^2 - 1) / 3 = sum over
    i = 1..n of (2i - n - 1)^2."""
    return n * (n * n - 1) // 3


HALF_BITS = 31
"""Each difference and square is summed as its low HALF_BITS bits and the rest, each part in int64: no sum can
overflow below 2^32 rows (a square of ranks below 2^31 is below 2^62)."""


@numba.njit(cache=True, nogil=True)
def _add_difference(sums, j, d):
    """Add |d| and d^2 of one pair of ranks to column j of ``sums`` (rows: |d| low, |d| high, d^2 low, d^2 high
    parts of :data:`HALF_BITS`)."""
    d = abs(d)
    sq = d * d
    low = (1 << HALF_BITS) - 1
    sums[0, j] += d & low
    sums[1, j] += d >> HALF_BITS
    sums[2, j] += sq & low
    sums[3, j] += sq >> HALF_BITS


@numba.njit(cache=True, nogil=True)
def _difference_sums(r, rm):
    """The split sums (:func:`_add_difference`) of |r - rm| and (r - rm)^2 per column of two int64 matrices, in one
    pass without temporaries (bounded_rank_metrics.txt eq. 8 and 9 numerators; :func:`rank_errors` joins each
    pair of parts into a Python integer)."""
    sums = np.zeros((4, r.shape[1]), dtype=np.int64)
    for i in range(r.shape[0]):
        for j in range(r.shape[1]):
            _add_difference(sums, j, r[i, j] - rm[i, j])
    return sums


@dataclass(frozen=True)
class RankErrors:
    """Per-attribute sums over paired records, mergeable with ``+``: ``abs_sum[j]`` = sum_i |r_ij - r~_ij|,
    ``sq_sum[j]`` = sum_i (r_ij - r~_ij)^2 and ``count[j]`` the records summed (exact integers)."""

    abs_sum: tuple[int, ...]
    sq_sum: tuple[int, ...]
    count: tuple[int, ...]

    @classmethod
    def zero(cls, p: int) -> "RankErrors":
        """The identity of ``+`` for p attributes."""
        return cls((0,) * p, (0,) * p, (0,) * p)

    def __add__(self, other: "RankErrors") -> "RankErrors":
        """Sums of two disjoint blocks of paired records."""
        if not isinstance(other, RankErrors):
            return NotImplemented
        if len(self.count) != len(other.count):
            raise ValueError(f"{len(self.count)} vs {len(other.count)} attributes")
        return RankErrors(tuple(a + b for a, b in zip(self.abs_sum, other.abs_sum)),
                          tuple(a + b for a, b in zip(self.sq_sum, other.sq_sum)),
                          tuple(a + b for a, b in zip(self.count, other.count)))


def rank_errors(rank_orig: np.ndarray, rank_masked: np.ndarray) -> RankErrors:
    """Sums of one block of paired records: row i of ``rank_orig`` (ranks r_ij of the original values in
    their column) paired with row i of ``rank_masked`` (ranks r~_ij of the masked values in theirs).
    Shapes (b,) for one attribute or (b, p). Numerators of bounded_rank_metrics.txt eq. 8 and 9."""
    r, rm = paired_columns(rank_orig, rank_masked, np.int64)
    sums = _difference_sums(r, rm)

    def joined(low: np.ndarray, high: np.ndarray) -> tuple[int, ...]:
        return tuple((int(h) << HALF_BITS) + int(lo) for lo, h in zip(low, high))

    return RankErrors(joined(sums[0], sums[1]), joined(sums[2], sums[3]), (r.shape[0],) * r.shape[1])


def bounded_rank_metrics(errors: RankErrors, n: int) -> dict[str, float]:
    """``brMAE`` and ``brMSE`` (fractions in [0, 1]) from the merged sums of all n paired records.

    brMAE = (1/p) sum_j abs_sum_j / M1(n) (bounded_rank_metrics.txt eq. 8) and
    brMSE = (1/p) sum_j sq_sum_j / M2(n) (eq. 9), computed in exact rational arithmetic and rounded once.
    Every attribute must hold exactly n records (the paper compares two permutations of 1..n). With
    n < 2 the maxima are 0 and every term is undefined (docs/metrics.md): the two keys are left out and
    ``brMAE_undefined_terms`` / ``brMSE_undefined_terms`` count the p attributes.
    """
    p = len(errors.count)
    if any(c != n for c in errors.count):
        raise ValueError(f"rank errors hold {sorted(set(errors.count))} records per attribute, expected {n}")
    if p == 0:
        return {}
    if n < 2:
        return {"brMAE_undefined_terms": float(p), "brMSE_undefined_terms": float(p)}
    return {
        "brMAE": float(Fraction(sum(errors.abs_sum), p * max_abs_rank_distance(n))),
        "brMSE": float(Fraction(sum(errors.sq_sum), p * max_sq_rank_distance(n))),
    }
