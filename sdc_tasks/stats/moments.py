"""Mergeable first and second moment sketches, combined by a numerically stable tree reduction."""

from __future__ import annotations

from dataclasses import dataclass, field
from math import comb

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd

from sdc_tasks.task_graph import fold


CROSS_KEYS = ((1, 1), (2, 1), (1, 2), (3, 1), (1, 3), (2, 2))
SETTLED_DIGITS = 12


def settled(x: np.ndarray, digits: int = SETTLED_DIGITS) -> np.ndarray:
    """``x`` rounded to ``digits`` significant digits, so that statistics merged in a different order (another
    partitioning) give bit-identical values before they steer sorting, standardization or eigenvectors."""
    x = np.asarray(x, dtype=np.float64)
    return np.array([float(f"{v:.{digits}g}") for v in x.ravel()]).reshape(x.shape)


@dataclass(frozen=True)
class Moments:
    """Count, mean vector and centred sums of p columns, mergeable exactly.

    ``comoment`` is C = sum (x - mean)(x - mean)^T. With ``order=4`` the sketch also holds, per attribute,
    the centred power sums sum (x_j - mean_j)^r for r = 3, 4 (``power``) and, per attribute pair, the
    co-moment sums sum (x_j - mean_j)^r (x_j' - mean_j')^s for (r, s) in CROSS_KEYS (``cross``), which
    pil_measures.txt sec. 4.4 needs (mu_4, mu_22, mu_31, mu_13).
    """

    n: int
    mean: np.ndarray
    comoment: np.ndarray
    power: dict = field(default_factory=dict)
    cross: dict = field(default_factory=dict)

    @property
    def order(self) -> int:
        """Highest moment order held (2 or 4)."""
        return 4 if self.cross else 2

    @property
    def cov(self) -> np.ndarray:
        """Population covariance matrix V = C / n (pil_measures.txt sec. 4.2: moments divide by n)."""
        return self.comoment / self.n

    @property
    def sd(self) -> np.ndarray:
        """Population standard deviations, sqrt(diag V)."""
        return np.sqrt(np.diag(self.cov))

    def mu(self, r: int) -> np.ndarray:
        """Central moment mu_r(j) = sum (x_ij - mean_j)^r / n of each attribute (pil_measures.txt sec. 4.2)."""
        if r == 1:
            return np.zeros_like(self.mean)
        if r == 2:
            return np.diag(self.comoment) / self.n
        return self.power[r] / self.n

    def mu_rs(self, r: int, s: int) -> np.ndarray:
        """(r, s)-th central co-moment mu_rs(j, j') of every attribute pair, (p, p) (pil_measures.txt sec. 4.2)."""
        if (r, s) == (1, 1):
            return self.comoment / self.n
        if s == 0:
            return np.repeat(self.mu(r)[:, None], len(self.mean), axis=1)
        if r == 0:
            return np.repeat(self.mu(s)[None, :], len(self.mean), axis=0)
        return self.cross[(r, s)] / self.n

    def subset(self, index: list[int]) -> "Moments":
        """The sketch of the columns at ``index`` only."""
        ix = np.asarray(index, dtype=np.int64)
        grid = np.ix_(ix, ix)
        return Moments(self.n, self.mean[ix], self.comoment[grid], {r: v[ix] for r, v in self.power.items()},
                       {k: v[grid] for k, v in self.cross.items()})

    def settled(self) -> "Moments":
        """The sketch with every sum rounded to SETTLED_DIGITS significant digits: the same for any partitioning
        of the same records (the merge order only moves the last bits), 1e-12 relative from the exact value."""
        return Moments(self.n, settled(self.mean), settled(self.comoment),
                       {r: settled(v) for r, v in self.power.items()},
                       {k: settled(v) for k, v in self.cross.items()})

    def corr(self) -> tuple[np.ndarray, np.ndarray]:
        """Correlation matrix R = V_ij / (s_i s_j) and a mask of the cells that are defined (s_i s_j > 0)."""
        s = self.sd
        denom = np.outer(s, s)
        defined = denom > 0
        r = np.divide(self.cov, denom, out=np.zeros_like(self.cov), where=defined)
        return r, defined


def empty_moments(p: int, order: int = 2) -> Moments:
    """The identity element of ``merge_moments`` for p columns."""
    if order == 2:
        return Moments(0, np.zeros(p), np.zeros((p, p)))
    return Moments(0, np.zeros(p), np.zeros((p, p)), {3: np.zeros(p), 4: np.zeros(p)},
                   {k: np.zeros((p, p)) for k in CROSS_KEYS})


def moments_of(x: np.ndarray, order: int = 2) -> Moments:
    """Return the sketch of one block: sums of powers of deviations from the block's own mean (two passes),
    never raw power sums."""
    x = np.asarray(x, dtype=np.float64)
    n = x.shape[0]
    if n == 0:
        return empty_moments(x.shape[1], order)
    mean = x.mean(axis=0)
    d = x - mean
    if order == 2:
        return Moments(n, mean, d.T @ d)
    d2 = d * d
    d3 = d2 * d
    cross = {(2, 1): d2.T @ d, (3, 1): d3.T @ d, (2, 2): d2.T @ d2}
    cross[(1, 2)] = cross[(2, 1)].T
    cross[(1, 3)] = cross[(3, 1)].T
    cross[(1, 1)] = d.T @ d
    return Moments(n, mean, cross[(1, 1)], {3: d3.sum(axis=0), 4: (d2 * d2).sum(axis=0)}, cross)


def _power_sum(m: Moments, r: int) -> np.ndarray:
    """Centred power sum of order r per attribute (r = 0: the count; r = 1: zero)."""
    if r == 0:
        return np.full(len(m.mean), float(m.n))
    if r == 1:
        return np.zeros(len(m.mean))
    if r == 2:
        return np.diag(m.comoment).copy()
    return m.power[r]


def _cross_sum(m: Moments, r: int, s: int) -> np.ndarray:
    """Centred co-moment sum of order (r, s) for every pair, with the per-attribute and zero cases filled in."""
    p = len(m.mean)
    if r == 0:
        return np.repeat(_power_sum(m, s)[None, :], p, axis=0)
    if s == 0:
        return np.repeat(_power_sum(m, r)[:, None], p, axis=1)
    return m.comoment if (r, s) == (1, 1) else m.cross[(r, s)]


def _recentred(m: Moments, c: np.ndarray) -> Moments:
    """The same block's sums about a centre moved by -c (c = block mean - new mean): binomial expansion
    sum (d + c)^r (d' + c')^s = sum_i sum_k C(r,i) C(s,k) S_ik c^(r-i) c'^(s-k) (Pebay 2008, exact)."""
    def power(r: int) -> np.ndarray:
        return sum(comb(r, i) * _power_sum(m, i) * c ** (r - i) for i in range(r + 1))

    def cross(r: int, s: int) -> np.ndarray:
        total = np.zeros((len(c), len(c)))
        for i in range(r + 1):
            for k in range(s + 1):
                total = total + comb(r, i) * comb(s, k) * _cross_sum(m, i, k) * np.outer(c ** (r - i), c ** (s - k))
        return total

    comoment = cross(1, 1)
    if m.order == 2:
        return Moments(m.n, m.mean, comoment)
    return Moments(m.n, m.mean, comoment, {3: power(3), 4: power(4)}, {key: cross(*key) for key in CROSS_KEYS})


def merge_moments(a: Moments, b: Moments) -> Moments:
    """Combine two sketches exactly: each block's centred sums are re-centred on the pooled mean
    (Chan, Golub and LeVeque for order 2; Pebay's binomial update for the order-4 sums)."""
    if a.n == 0:
        return b
    if b.n == 0:
        return a
    n = a.n + b.n
    delta = b.mean - a.mean
    mean = a.mean + delta * (b.n / n)
    if a.order == 2 and b.order == 2:
        comoment = a.comoment + b.comoment + np.outer(delta, delta) * (a.n * b.n / n)
        return Moments(n, mean, comoment)
    ra = _recentred(a, -delta * (b.n / n))
    rb = _recentred(b, delta * (a.n / n))
    return Moments(n, mean, ra.comoment + rb.comoment, {r: ra.power[r] + rb.power[r] for r in (3, 4)},
                   {k: ra.cross[k] + rb.cross[k] for k in CROSS_KEYS})


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


def _partition_moments(df: pd.DataFrame, columns: list[str], order: int) -> Moments:
    """Sketch of one partition's columns."""
    return moments_of(df[columns].to_numpy(dtype=np.float64), order)


def moments_graph(ddf: dd.DataFrame, columns: list[str], order: int = 2):
    """Return a delayed Moments of ``columns`` over the whole collection (tree reduction over partitions)."""
    parts = ddf[columns].to_delayed()
    sketches = [dask.delayed(_partition_moments)(part, columns, order) for part in parts]
    return tree_merge(sketches, merge_moments)
