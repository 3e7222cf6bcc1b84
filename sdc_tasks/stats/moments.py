"""Mergeable first and second moment sketches, combined by a numerically stable tree reduction."""

from __future__ import annotations

from dataclasses import dataclass

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd


@dataclass(frozen=True)
class Moments:
    """Count, mean vector and centred co-moment matrix C = sum (x - mean)(x - mean)^T of p columns."""

    n: int
    mean: np.ndarray
    comoment: np.ndarray

    @property
    def cov(self) -> np.ndarray:
        """Population covariance matrix V = C / n (pil_measures.txt sec. 4.2: moments divide by n)."""
        return self.comoment / self.n

    @property
    def sd(self) -> np.ndarray:
        """Population standard deviations, sqrt(diag V)."""
        return np.sqrt(np.diag(self.cov))

    def subset(self, index: list[int]) -> "Moments":
        """The sketch of the columns at ``index`` only."""
        ix = np.asarray(index, dtype=np.int64)
        return Moments(self.n, self.mean[ix], self.comoment[np.ix_(ix, ix)])

    def corr(self) -> tuple[np.ndarray, np.ndarray]:
        """Correlation matrix R = V_ij / (s_i s_j) and a mask of the cells that are defined (s_i s_j > 0)."""
        s = self.sd
        denom = np.outer(s, s)
        defined = denom > 0
        r = np.divide(self.cov, denom, out=np.zeros_like(self.cov), where=defined)
        return r, defined


def empty_moments(p: int) -> Moments:
    """The identity element of ``merge_moments`` for p columns."""
    return Moments(0, np.zeros(p), np.zeros((p, p)))


def moments_of(x: np.ndarray) -> Moments:
    """Return the sketch of one block: centred two-pass co-moments, never raw power sums."""
    x = np.asarray(x, dtype=np.float64)
    n = x.shape[0]
    if n == 0:
        return empty_moments(x.shape[1])
    mean = x.mean(axis=0)
    d = x - mean
    return Moments(n, mean, d.T @ d)


def merge_moments(a: Moments, b: Moments) -> Moments:
    """Combine two sketches exactly (Chan, Golub and LeVeque pairwise update of mean and co-moments)."""
    if a.n == 0:
        return b
    if b.n == 0:
        return a
    n = a.n + b.n
    delta = b.mean - a.mean
    mean = a.mean + delta * (b.n / n)
    comoment = a.comoment + b.comoment + np.outer(delta, delta) * (a.n * b.n / n)
    return Moments(n, mean, comoment)


def tree_merge(items: list, merge, split_every: int = 8):
    """Return delayed ``merge`` applied over ``items`` as a balanced tree (fan-in ``split_every``)."""
    level = list(items)
    if not level:
        raise ValueError("nothing to reduce")
    while len(level) > 1:
        level = [
            dask.delayed(_fold)(level[i : i + split_every], merge)
            for i in range(0, len(level), split_every)
        ]
    return level[0]


def _fold(chunk: list, merge):
    """Merge a short list of sketches left to right."""
    out = chunk[0]
    for item in chunk[1:]:
        out = merge(out, item)
    return out


def _partition_moments(df: pd.DataFrame, columns: list[str]) -> Moments:
    """Sketch of one partition's columns."""
    return moments_of(df[columns].to_numpy(dtype=np.float64))


def moments_graph(ddf: dd.DataFrame, columns: list[str]):
    """Return a delayed Moments of ``columns`` over the whole collection (tree reduction over partitions)."""
    parts = ddf[columns].to_delayed()
    sketches = [dask.delayed(_partition_moments)(part, columns) for part in parts]
    return tree_merge(sketches, merge_moments)
