"""Moments of p columns from exact sums: the same bits for any partitioning of the same records.

Two passes over the data, each a tree reduction of per-partition exact sums (:mod:`sdc_tasks.stats.exact_sum`):
the first sums every column exactly (and takes its extremes), which fixes the mean (the exact sum divided by n,
rounded once); the second sums, exactly, the products of the deviations d = x - mean that the moments need, each
deviation scaled by a power of two (exact) so that no product overflows or underflows for extreme-but-finite
data. Every product is rounded once, the same way in any partition, and sums are exact, so no result depends on
how the records are split into partitions or in which order partial sums are merged.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd

from sdc_tasks.stats.exact_sum import ExactSums, exact_sums, product_sums
from sdc_tasks.task_graph import fold

CROSS_KEYS = ((1, 1), (3, 1), (1, 3), (2, 2))
SYMMETRIC_KEYS = ((1, 1), (2, 2))
FULL_KEYS = ((3, 1),)


@dataclass(frozen=True)
class Moments:
    """Count, mean vector and centred sums of p columns.

    ``scaled[(r, s)][j, k]`` = sum (d_j / 2^e_j)^r (d_k / 2^e_k)^s with d = x - mean and e = ``exponent`` (a
    power of two per column bringing every |d| below 1): (1, 1) always and, with ``order=4``, the co-moment sums
    of CROSS_KEYS that pil_measures.txt sec. 4.4 needs (mu_4, mu_22, mu_31, mu_13). The unscaled sums
    (``comoment``, ``power``, ``cross``) may overflow to inf for data near the float range; ``sd`` and
    ``corr`` are computed from the scaled sums and stay finite.
    """

    n: int
    mean: np.ndarray
    exponent: np.ndarray
    scaled: dict

    @property
    def order(self) -> int:
        """Highest moment order held (2 or 4)."""
        return 4 if (2, 2) in self.scaled else 2

    def _unscaled(self, r: int, s: int) -> np.ndarray:
        """sum d_j^r d_k^s for every pair (j, k), (p, p) (inf where beyond the float range)."""
        with np.errstate(over="ignore"):
            return np.ldexp(self.scaled[(r, s)], r * self.exponent[:, None] + s * self.exponent[None, :])

    @property
    def comoment(self) -> np.ndarray:
        """C = sum (x - mean)(x - mean)^T."""
        return self._unscaled(1, 1)

    @property
    def cross(self) -> dict:
        """The co-moment sums sum d_j^r d_k^s of CROSS_KEYS, (p, p) each (order 4 only)."""
        return {key: self._unscaled(*key) for key in CROSS_KEYS if key in self.scaled}

    @property
    def power(self) -> dict:
        """The centred power sum sum d_j^4 under key 4 (order 4 only)."""
        if self.order == 2:
            return {}
        return {4: np.diag(self._unscaled(2, 2)).copy()}

    @property
    def cov(self) -> np.ndarray:
        """Population covariance matrix V = C / n (pil_measures.txt sec. 4.2: moments divide by n)."""
        return self.comoment / self.n

    @property
    def sd(self) -> np.ndarray:
        """Population standard deviations, sqrt(diag V), finite whenever they are representable."""
        return np.ldexp(np.sqrt(np.diag(self.scaled[(1, 1)]) / self.n), self.exponent)

    def mu(self, r: int) -> np.ndarray:
        """Central moment mu_r(j) = sum (x_ij - mean_j)^r / n of each attribute (pil_measures.txt sec. 4.2)."""
        if r == 1:
            return np.zeros_like(self.mean)
        if r == 2:
            return np.diag(self.cov).copy()
        return self.power[r] / self.n

    def mu_rs(self, r: int, s: int) -> np.ndarray:
        """(r, s)-th central co-moment mu_rs(j, j') of every attribute pair, (p, p) (pil_measures.txt sec. 4.2)."""
        if (r, s) == (1, 1):
            return self.cov
        if s == 0:
            return np.repeat(self.mu(r)[:, None], len(self.mean), axis=1)
        if r == 0:
            return np.repeat(self.mu(s)[None, :], len(self.mean), axis=0)
        return self._unscaled(r, s) / self.n

    def subset(self, index: list[int]) -> "Moments":
        """The sketch of the columns at ``index`` only."""
        ix = np.asarray(index, dtype=np.int64)
        grid = np.ix_(ix, ix)
        return Moments(self.n, self.mean[ix], self.exponent[ix], {k: v[grid] for k, v in self.scaled.items()})

    def scaled_cov(self) -> np.ndarray:
        """V with entry (j, k) divided by 2^(e_j + e_k): finite, and gives the same correlations as V."""
        return self.scaled[(1, 1)] / self.n

    def corr(self) -> tuple[np.ndarray, np.ndarray]:
        """Correlation matrix R = V_ij / (s_i s_j) and a mask of the cells that are defined (s_i s_j > 0)."""
        v = self.scaled_cov()
        s = np.sqrt(np.diag(v))
        denom = np.outer(s, s)
        defined = denom > 0
        r = np.divide(v, denom, out=np.zeros_like(v), where=defined)
        return r, defined


@dataclass(frozen=True)
class ColumnSums:
    """First pass: count, exact column sums and extremes of p columns, mergeable with ``+``."""

    n: int
    total: ExactSums
    low: np.ndarray
    high: np.ndarray

    def __add__(self, other: "ColumnSums") -> "ColumnSums":
        """The sums of two disjoint blocks of records."""
        return ColumnSums(self.n + other.n, self.total + other.total, np.minimum(self.low, other.low),
                          np.maximum(self.high, other.high))

    def centre(self) -> tuple[np.ndarray, np.ndarray]:
        """(mean, exponent): the exact mean rounded once (NaN where a value was not finite) and, per column, the
        power of two e with |x - mean| < 2^e for every x (0 for a constant or empty column)."""
        if self.n == 0:
            return np.zeros(len(self.low)), np.zeros(len(self.low), dtype=np.int64)
        mean = np.array([np.nan if s is None else float(s / self.n) for s in self.total.fractions()])
        with np.errstate(invalid="ignore", over="ignore"):
            bound = np.maximum(self.high - mean, mean - self.low)
        usable = np.isfinite(bound) & (bound > 0)
        return mean, np.where(usable, np.frexp(np.where(usable, bound, 1.0))[1], 0).astype(np.int64)


def column_sums(x: np.ndarray) -> ColumnSums:
    """The first-pass sums of one block of records (rows of ``x``)."""
    x = np.asarray(x, dtype=np.float64)
    low = x.min(axis=0) if x.shape[0] else np.full(x.shape[1], np.inf)
    high = x.max(axis=0) if x.shape[0] else np.full(x.shape[1], -np.inf)
    return ColumnSums(x.shape[0], exact_sums(*x.T), low, high)


def _keys(order: int) -> list[tuple[int, int]]:
    """The (r, s) sums of an order: (1, 1), and for order 4 also (2, 2) and (3, 1)."""
    return [(1, 1)] if order == 2 else [*SYMMETRIC_KEYS, *FULL_KEYS]


def _pairs(p: int, key: tuple[int, int]) -> list[tuple[int, int]]:
    """The column pairs (j, k) summed for a key: j <= k for the symmetric keys, every pair for the others."""
    return [(j, k) for j in range(p) for k in range(j if key in SYMMETRIC_KEYS else 0, p)]


def _spec(p: int, order: int) -> np.ndarray:
    """Rows (r - 1, j, s - 1, k) of the products d_j^r d_k^s to sum (powers index r - 1)."""
    rows = [(r - 1, j, s - 1, k) for r, s in _keys(order) for j, k in _pairs(p, (r, s))]
    return np.array(rows, dtype=np.int64).reshape(-1, 4)


def deviation_sums(x: np.ndarray, mean: np.ndarray, exponent: np.ndarray, order: int) -> ExactSums:
    """The second-pass sums of one block: sum over its records of every product in :func:`_spec` of the scaled
    deviations (x - mean) / 2^exponent."""
    x = np.asarray(x, dtype=np.float64)
    d = np.ldexp(x - mean, -exponent)
    powers = [d] if order == 2 else [d, d * d, d * d * d]  # d^r at index r - 1
    return product_sums(np.stack(powers), _spec(x.shape[1], order))


def moments_from(first: ColumnSums, second: ExactSums, order: int) -> Moments:
    """The Moments of the records summed in both passes (``second`` in the order of :func:`_spec`)."""
    mean, exponent = first.centre()
    p = len(mean)
    values = iter(second.values().tolist())
    scaled = {}
    for key in _keys(order):
        m = np.zeros((p, p))
        for j, k in _pairs(p, key):
            m[j, k] = next(values)
            if key in SYMMETRIC_KEYS:
                m[k, j] = m[j, k]
        scaled[key] = m
    if order == 4:
        scaled[(1, 3)] = scaled[(3, 1)].T.copy()
    return Moments(first.n, mean, exponent, scaled)


def blocks_moments(blocks: list[np.ndarray], order: int = 2) -> Moments:
    """The Moments of the rows of in-memory blocks taken together (both passes): the same for any split."""
    first = fold([column_sums(b) for b in blocks], operator.add)
    centre = first.centre()
    return moments_from(first, fold([deviation_sums(b, *centre, order) for b in blocks], operator.add), order)


def moments_of(x: np.ndarray, order: int = 2) -> Moments:
    """The Moments of the rows of one in-memory array."""
    return blocks_moments([np.asarray(x, dtype=np.float64)], order)


def tree_merge(items: list, merge, split_every: int = 8):
    """Return delayed ``merge`` applied over ``items`` as a balanced tree (fan-in ``split_every``)."""
    level = list(items)
    if not level:
        raise ValueError("nothing to reduce")
    while len(level) > 1:
        level = [
            dask.delayed(fold)(level[i : i + split_every], merge)
            for i in range(0, len(level), split_every)
        ]
    return level[0]


def _partition_column_sums(df: pd.DataFrame, columns: list[str]) -> ColumnSums:
    """First-pass sums of one partition's columns."""
    return column_sums(df[columns].to_numpy(dtype=np.float64))


def _partition_deviation_sums(df: pd.DataFrame, columns: list[str], centre: tuple[np.ndarray, np.ndarray],
                              order: int) -> ExactSums:
    """Second-pass sums of one partition's columns about ``centre`` (the first pass's ``ColumnSums.centre``)."""
    return deviation_sums(df[columns].to_numpy(dtype=np.float64), *centre, order)


def _first_pass(frame: dd.DataFrame, columns: list[str]):
    """The first-pass sums of ``columns`` of a collection, as a delayed value."""
    return tree_merge([dask.delayed(_partition_column_sums)(part, columns) for part in frame[columns].to_delayed()],
                      operator.add)


def _passes(frames: list[dd.DataFrame], columns: list[str], second, args: list[tuple]) -> tuple[list, list]:
    """The first-pass sums of ``columns`` of each collection and, merged per collection, the second-pass sums
    ``second(partition, columns, centre, *args)`` about its first pass's centre (computed once per collection):
    two computations (one per pass, all collections at once), so that no partition is held in memory between the
    passes; one when each collection is one partition (a small file: its partition read once, the scheduler asked
    once instead of twice, the same sums)."""
    firsts = [_first_pass(f, columns) for f in frames]
    if not all(f.npartitions == 1 for f in frames):
        firsts = list(dask.compute(*firsts))
    centres = [dask.delayed(ColumnSums.centre, nout=2)(first) for first in firsts]
    return dask.compute(firsts, [tree_merge([dask.delayed(second)(part, columns, centre, *extra)
                                             for part in f[columns].to_delayed()], operator.add)
                                 for f, centre, extra in zip(frames, centres, args)])


def frames_moments(frames: list[dd.DataFrame], columns: list[str], orders: list[int]) -> list[Moments]:
    """The Moments of ``columns`` of each collection, to the order given for it, in two passes (:func:`_passes`)."""
    firsts, seconds = _passes(frames, columns, _partition_deviation_sums, [(order,) for order in orders])
    return [moments_from(*passes) for passes in zip(firsts, seconds, orders)]


def frame_moments(ddf: dd.DataFrame, columns: list[str], order: int = 2) -> Moments:
    """The Moments of ``columns`` over the whole collection (:func:`frames_moments`)."""
    return frames_moments([ddf], columns, [order])[0]


@dataclass(frozen=True)
class Spread:
    """Count, mean, population standard deviation and extremes of p columns."""

    n: int
    mean: np.ndarray
    sd: np.ndarray
    low: np.ndarray
    high: np.ndarray


def _partition_square_sums(df: pd.DataFrame, columns: list[str], centre: tuple[np.ndarray, np.ndarray]) -> ExactSums:
    """Second-pass sums of one partition's columns without their cross products, about ``centre`` (the first
    pass's ``ColumnSums.centre``): sum d_j^2 per column."""
    mean, exponent = centre
    x = df[columns].to_numpy(dtype=np.float64)
    squares = np.array([(0, j, 0, j) for j in range(x.shape[1])], dtype=np.int64).reshape(-1, 4)
    return product_sums(np.ldexp(x - mean, -exponent)[None], squares)


def frame_spread(ddf: dd.DataFrame, columns: list[str]) -> Spread:
    """Mean, sd (pil_measures.txt sec. 4.2: divided by n) and extremes of ``columns``: the mean and sd of
    :func:`frame_moments` to the bit (every sum is exact), without the p(p - 1)/2 cross products it also sums."""
    (first,), (second,) = _passes([ddf], columns, _partition_square_sums, [()])
    mean, exponent = first.centre()
    sd = np.ldexp(np.sqrt(np.array(second.values().tolist()) / first.n), exponent)
    return Spread(first.n, mean, sd, first.low, first.high)
