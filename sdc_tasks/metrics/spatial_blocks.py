"""Data-driven spatial blocks of the original records for exact blocked nearest-record search.

A :class:`SplitTree` cuts the standardized key space by recursive quantile splits of a sample of the original
records (each split on the dimension of widest sample spread), so its leaves hold about equal numbers of
records whatever the distribution. Its leaves partition the whole space (the outer leaves are unbounded), so
every original record falls in exactly one leaf, and :meth:`SplitTree.ball_leaves` lists every leaf a ball can
touch: searching only those leaves finds every record the ball holds. A :class:`Cell` is one leaf's original
records with their k-d tree and bounding box; no cell holds more than its share of the file.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np
import pandas as pd

from sdc_tasks.kdtree import KdTree, kd_tree


@dataclass(frozen=True)
class SplitTree:
    """Axis-aligned binary space partition: internal node ``j`` sends points with ``x[dim[j]] <= threshold[j]``
    to ``left[j]`` and the others to ``right[j]``; a leaf has ``leaf[j] >= 0`` (its cell number)."""

    dim: np.ndarray
    threshold: np.ndarray
    left: np.ndarray
    right: np.ndarray
    leaf: np.ndarray

    @property
    def n_leaves(self) -> int:
        """Number of leaves (cells)."""
        return int(self.leaf.max()) + 1

    def leaves_of(self, points: np.ndarray) -> np.ndarray:
        """The leaf holding each point (the cell a record belongs to)."""
        return _leaves_of(np.ascontiguousarray(points, dtype=np.float64), self.dim, self.threshold, self.left,
                          self.right, self.leaf)

    def ball_leaves(self, points: np.ndarray, radius: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(point index, leaf) pairs for every leaf whose region meets the closed ball around each point, point
        by point (:func:`_ball_leaves`).

        A record of a leaf at distance <= radius from the point differs from it by at most radius on the split
        dimension, so the descent follows a side whenever the ball's extent on that dimension reaches it.
        """
        return _ball_leaves(np.ascontiguousarray(points, dtype=np.float64),
                            np.ascontiguousarray(radius, dtype=np.float64), self.dim, self.threshold, self.left,
                            self.right, self.leaf)


@numba.njit(cache=True, nogil=True)
def _ball_leaves(points: np.ndarray, radius: np.ndarray, dim: np.ndarray, threshold: np.ndarray,
                 left: np.ndarray, right: np.ndarray, leaf: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:meth:`SplitTree.ball_leaves`: each point's descent, left where its value less the radius is at or below
    the node's threshold, right where its value plus the radius is above it (both where the ball straddles it)."""
    found = max(16, 2 * points.shape[0])
    rec, hit = np.empty(found, dtype=np.int64), np.empty(found, dtype=np.int64)
    nodes = np.empty(dim.shape[0], dtype=np.int64)
    k = 0
    for i in range(points.shape[0]):
        nodes[0] = 0
        top = 1
        while top > 0:
            top -= 1
            node = nodes[top]
            if leaf[node] >= 0:
                if k == rec.shape[0]:
                    rec, hit = np.concatenate((rec, np.empty_like(rec))), np.concatenate((hit, np.empty_like(hit)))
                rec[k], hit[k] = i, leaf[node]
                k += 1
                continue
            v = points[i, dim[node]]
            if v + radius[i] > threshold[node]:
                nodes[top] = right[node]
                top += 1
            if v - radius[i] <= threshold[node]:
                nodes[top] = left[node]
                top += 1
    return rec[:k], hit[:k]


@numba.njit(cache=True, nogil=True)
def _leaves_of(points: np.ndarray, dim: np.ndarray, threshold: np.ndarray, left: np.ndarray, right: np.ndarray,
               leaf: np.ndarray) -> np.ndarray:
    """:meth:`SplitTree.leaves_of`: each point walked from the root, left where its value on the node's dimension
    is at or below the node's threshold, to its leaf."""
    out = np.empty(points.shape[0], dtype=np.int64)
    for i in range(points.shape[0]):
        node = 0
        while leaf[node] < 0:
            node = left[node] if points[i, dim[node]] <= threshold[node] else right[node]
        out[i] = leaf[node]
    return out


def _split(values: np.ndarray, share: float) -> tuple[int, float] | None:
    """The dimension of widest spread and the threshold putting about ``share`` of the rows at or below it
    (never all of them); None when every dimension is constant."""
    spreads = values.max(axis=0) - values.min(axis=0)
    d = int(np.argmax(spreads))
    if spreads[d] <= 0:
        return None
    v = np.sort(values[:, d])
    threshold = v[min(max(int(round(share * len(v))), 1), len(v) - 1) - 1]
    if threshold == v[-1]:
        threshold = v[np.searchsorted(v, v[-1], side="left") - 1]
    return d, float(threshold)


def split_tree(sample: np.ndarray, n_leaves: int) -> SplitTree:
    """Recursive quantile splits of ``sample`` (standardized key values) into at most ``n_leaves`` leaves; a
    node with ``c`` leaves to make sends ``floor(c / 2) / c`` of its sample rows left."""
    dim, thr, left, right, leaf = [], [], [], [], []

    def grow(rows: np.ndarray, leaves: int) -> int:
        j = len(dim)
        for lst, v in ((dim, 0), (thr, 0.0), (left, -1), (right, -1), (leaf, -1)):
            lst.append(v)
        cut = _split(rows, (leaves // 2) / leaves) if leaves > 1 and len(rows) > 1 else None
        if cut is None:
            leaf[j] = sum(x >= 0 for x in leaf)
            return j
        d, t = cut
        below = rows[:, d] <= t
        dim[j], thr[j] = d, t
        left[j] = grow(rows[below], leaves // 2)
        right[j] = grow(rows[~below], leaves - leaves // 2)
        return j

    grow(np.asarray(sample, dtype=np.float64).reshape(len(sample), -1), max(int(n_leaves), 1))
    return SplitTree(np.array(dim, dtype=np.int64), np.array(thr), np.array(left, dtype=np.int64),
                     np.array(right, dtype=np.int64), np.array(leaf, dtype=np.int64))


def sample_mask(ids: np.ndarray, fraction: float) -> np.ndarray:
    """Rows kept in a sample of about ``fraction`` of the records, chosen by a hash of each record's id, so the
    sample (and the blocks grown from it) does not depend on how the file is partitioned."""
    u = (pd.util.hash_array(np.asarray(ids)) >> np.uint64(11)) * 2.0**-53
    return u < fraction


@dataclass(frozen=True)
class Cell:
    """The original records of one leaf, sorted by id: ids, bounding box and the k-d tree of their standardized key
    values (which holds the values, in its own order)."""

    ids: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    tree: KdTree | None

    @property
    def points(self) -> np.ndarray:
        """The standardized key values in id order (a new array)."""
        return self.tree.points if self.tree is not None else np.zeros((0, len(self.lo)))

    def min_distance(self, q: np.ndarray) -> np.ndarray:
        """Euclidean distance from each query point to the bounding box (0 inside; inf for an empty cell)."""
        if len(self.ids) == 0:
            return np.full(len(q), np.inf)
        gap = np.maximum(np.maximum(self.lo - q, q - self.hi), 0.0)
        return np.sqrt((gap * gap).sum(axis=1))


def make_cell(ids: np.ndarray, points: np.ndarray) -> Cell:
    """A cell of the given original records (put in id order, so results never depend on partitioning)."""
    order = np.argsort(ids, kind="stable")
    ids, points = ids[order], np.ascontiguousarray(points[order])
    if len(ids) == 0:
        return Cell(ids, np.zeros(points.shape[1]), np.zeros(points.shape[1]), None)
    return Cell(ids, points.min(axis=0), points.max(axis=0), kd_tree(points))
