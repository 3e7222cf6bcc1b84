"""A k-d tree usable from compiled (numba) code: the exact nearest-record search of post-masking optimization
and the capped radius counts of distance-based record linkage.

Compiled searches over one tree serve both: post-masking needs one nearest record at a time inside its hill
climb (post_masking_optimization.txt sec. 2, Algorithm 1), and distance linkage needs, per masked record, how
many originals are strictly nearer than its own original and how many tie with it, where "two or more strictly
nearer" already settles DLD and DLD2 (sdc_methods_comparison_chapter.txt sec. 3; docs/metrics.md DLD_i). A
count that stops at two is far cheaper than the three nearest records when masking is heavy and the ball
around a masked record holds many originals.

Compiled code here and in the kernels built on it passes an integer argument to another compiled function as an
int64 value (``np.int64(0)``), never as a literal integer or a variable that starts as one: numba compiles the
callee, and what it calls with that argument, once more for the literal, which an empty cache pays on its first
call (MD's first call, 22-23 s before, 17-20 s after; tests/test_kernel_signatures.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

LEAF_SIZE = 16
STACK_DEPTH = 256


@dataclass(frozen=True)
class KdTree:
    """A k-d tree of points (median splits on the dimension of largest spread, leaves of <= leaf_size points):
    node t holds points ``perm[start[t]:stop[t]]``, whose bounding box is ``lo[t]``..``hi[t]``; internal nodes
    split on ``dim[t]`` at ``split[t]`` (left child coordinates <= split <= right child coordinates); leaves
    have dim -1. The tree holds the points in its own order, ``ordered`` (point ``perm[a]`` at row ``a``), so a
    leaf's points are read contiguously; ``points`` gives them back in their given order."""

    perm: np.ndarray
    ordered: np.ndarray
    start: np.ndarray
    stop: np.ndarray
    dim: np.ndarray
    split: np.ndarray
    left: np.ndarray
    right: np.ndarray
    lo: np.ndarray
    hi: np.ndarray

    @property
    def n(self) -> int:
        """Number of points."""
        return len(self.perm)

    @property
    def points(self) -> np.ndarray:
        """The points in the order they were given (a new array)."""
        out = np.empty_like(self.ordered)
        out[self.perm] = self.ordered
        return out


@numba.njit(cache=True, nogil=True)
def _select(perm, ordered, lo, hi, kth, axis):
    """Reorder rows ``lo:hi`` of ``ordered`` (and of ``perm`` alike) in place so that row ``kth`` holds the record of
    that rank on ``axis``, with no larger value before it and no smaller one after (Hoare's selection,
    median-of-three pivots)."""
    hi -= 1
    while hi > lo:
        a, b, c = ordered[lo, axis], ordered[(lo + hi) // 2, axis], ordered[hi, axis]
        pivot = max(min(a, b), min(max(a, b), c))
        i, j = lo, hi
        while i <= j:
            while ordered[i, axis] < pivot:
                i += 1
            while ordered[j, axis] > pivot:
                j -= 1
            if i <= j:
                perm[i], perm[j] = perm[j], perm[i]
                for col in range(ordered.shape[1]):
                    ordered[i, col], ordered[j, col] = ordered[j, col], ordered[i, col]
                i += 1
                j -= 1
        if kth <= j:
            hi = j
        elif kth >= i:
            lo = i
        else:
            return


@numba.njit(cache=True, nogil=True)
def build_nodes(points, leaf_size):
    """The node arrays of the k-d tree of ``points`` (median splits by selection, O(n log n) in all; the same tree
    for the same points), after ``perm`` and ``ordered`` (the points in the tree's order, ``points[perm]``: the
    selection moves the points themselves, so every pass reads them in order)."""
    n, d = points.shape
    max_nodes = 2 * (n // max((leaf_size + 1) // 2, 1)) + 3
    perm = np.arange(n)
    ordered = points.copy()
    start = np.zeros(max_nodes, dtype=np.int64)
    stop = np.zeros(max_nodes, dtype=np.int64)
    dim = np.full(max_nodes, -1, dtype=np.int64)
    split = np.zeros(max_nodes)
    left = np.full(max_nodes, -1, dtype=np.int64)
    right = np.full(max_nodes, -1, dtype=np.int64)
    box_lo = np.full((max_nodes, d), np.inf)
    box_hi = np.full((max_nodes, d), -np.inf)
    stop[0] = n
    count = 1
    todo = [0]
    while len(todo) > 0:
        node = todo.pop()
        lo, hi = start[node], stop[node]
        for a in range(lo, hi):
            for j in range(d):
                v = ordered[a, j]
                box_lo[node, j] = min(box_lo[node, j], v)
                box_hi[node, j] = max(box_hi[node, j], v)
        if hi - lo <= leaf_size:
            continue
        axis, widest = np.int64(0), -1.0
        for j in range(d):
            if box_hi[node, j] - box_lo[node, j] > widest:
                axis, widest = j, box_hi[node, j] - box_lo[node, j]
        if widest <= 0:
            continue
        mid = lo + (hi - lo) // 2
        _select(perm, ordered, lo, hi, mid, axis)
        dim[node], split[node] = axis, ordered[mid, axis]
        for a, b in ((lo, mid), (mid, hi)):
            start[count], stop[count] = a, b
            todo.append(count)
            count += 1
        left[node], right[node] = count - 2, count - 1
    return (perm, ordered, start[:count], stop[:count], dim[:count], split[:count], left[:count], right[:count],
            box_lo[:count], box_hi[:count])


def kd_tree(points: np.ndarray, leaf_size: int = LEAF_SIZE) -> KdTree:
    """The k-d tree of ``points`` (n, d); deterministic for given points."""
    points = np.ascontiguousarray(points, dtype=np.float64).reshape(len(points), -1)
    return KdTree(*build_nodes(points, leaf_size))


def tree_arrays(tree: KdTree) -> tuple:
    """The tree's arrays in the order the compiled searches take them."""
    return tree.perm, tree.ordered, tree.start, tree.stop, tree.dim, tree.split, tree.left, tree.right, tree.lo, tree.hi


@numba.njit(cache=True, nogil=True)
def squared_distance_over(a, points, i, bound):
    """Squared Euclidean distance between the vector ``a`` and ``points[i]``, summed over the coordinates left to
    right (the order sdc_tasks.metrics.risk.exact_distances uses, so both give the same bits), or a partial sum
    already above ``bound`` (a sum of non-negative terms only grows, so it is above ``bound`` exactly when the
    whole sum is)."""
    s = 0.0
    for j in range(a.shape[0]):
        diff = a[j] - points[i, j]
        s += diff * diff
        if s > bound:
            return s
    return s


@numba.njit(cache=True, nogil=True)
def squared_distance(a, points, i):
    """Squared Euclidean distance between the vector ``a`` and ``points[i]`` (squared_distance_over, no bound)."""
    return squared_distance_over(a, points, i, np.inf)


@numba.njit(cache=True, nogil=True)
def box_bound_over(q, lo, hi, node, bound):
    """Squared distance from ``q`` to the bounding box of ``node``, summed left to right as squared_distance sums,
    so it never exceeds the computed squared distance of any point of the node (each term rounds no larger), or a
    partial sum already above ``bound`` (as squared_distance_over)."""
    s = 0.0
    for j in range(q.shape[0]):
        gap = max(lo[node, j] - q[j], q[j] - hi[node, j], 0.0)
        s += gap * gap
        if s > bound:
            return s
    return s


@numba.njit(cache=True, nogil=True)
def box_bound(q, lo, hi, node):
    """Squared distance from ``q`` to the bounding box of ``node`` (box_bound_over, no bound)."""
    return box_bound_over(q, lo, hi, node, np.inf)


@numba.njit(cache=True, nogil=True)
def _push_children(nodes, top, node, q, split, dim, left, right, bound):
    """Push an internal node's children on the search stack, the near one (the query's side) on top; the far one
    only if the squared gap from ``q`` to the split is within ``bound``. A far child's box lies beyond the split,
    so its box_bound is at least that squared gap (each rounded step of box_bound is monotone): a child left out
    here would be pruned when taken from the stack, so the search finds the same points without visiting it."""
    gap = q[dim[node]] - split[node]
    near, far = (left[node], right[node]) if gap < 0 else (right[node], left[node])
    if gap * gap <= bound:
        nodes[top] = far
        top += 1
    nodes[top] = near
    return top + 1


@numba.njit(cache=True, nogil=True)
def nearest_index(q, warm, points, perm, ordered, start, stop, dim, split, left, right, lo, hi):
    """Index of the point nearest to ``q`` (d-dimensional Euclidean distance, post_masking_optimization.txt
    sec. 2), the lowest index among equally near points; ``warm`` (an index, or -1) seeds the search radius with
    its distance, read from ``points`` (the tree's points in their given order; not read without ``warm``)."""
    best_i = warm
    best = squared_distance(q, points, warm) if warm >= 0 else np.inf
    nodes = np.zeros(STACK_DEPTH, dtype=np.int64)
    top = 1
    while top > 0:
        top -= 1
        node = nodes[top]
        if box_bound(q, lo, hi, node) > best:
            continue
        axis = dim[node]
        if axis < 0:
            for a in range(start[node], stop[node]):
                i = perm[a]
                dist = squared_distance(q, ordered, a)
                if dist < best or (dist == best and i < best_i):
                    best, best_i = dist, i
            continue
        top = _push_children(nodes, top, node, q, split, dim, left, right, best)
    return best_i


def nearest_records(tree: KdTree, queries: np.ndarray) -> np.ndarray:
    """Index of the tree point nearest to each query row (ties: lowest index)."""
    queries = np.ascontiguousarray(queries, dtype=np.float64)
    arrays = tree_arrays(tree)
    return np.array([nearest_index(q, -1, tree.ordered, *arrays) for q in queries], dtype=np.int64)


@numba.njit(cache=True, nogil=True)
def _capped_counts(queries, d_own, radius, rtol, cap, perm, ordered, start, stop, dim, split, left, right, lo, hi):
    """Per query: points strictly nearer than ``d_own`` (stopping at ``cap``) and points as near (within ``rtol``
    relative), searched in the closed ball of ``radius`` (sdc_tasks.metrics.risk.linkage_counts). A node goes on the
    search stack only when its box meets the ball (the far child first checked against the gap to the split, which
    its box's bound is at least), so every node taken from the stack is searched."""
    m = queries.shape[0]
    closer = np.zeros(m, dtype=np.int64)
    tied = np.zeros(m, dtype=np.int64)
    nodes = np.zeros(STACK_DEPTH, dtype=np.int64)
    for k in range(m):
        q, own = queries[k], d_own[k]
        tol = rtol * own
        r2 = radius[k] * radius[k]
        c, t, top = 0, 0, 0
        if box_bound_over(q, lo, hi, np.int64(0), r2) <= r2:
            nodes[0], top = 0, 1
        while top > 0 and c < cap:
            top -= 1
            node = nodes[top]
            axis = dim[node]
            if axis < 0:
                for a in range(start[node], stop[node]):
                    d2 = squared_distance_over(q, ordered, a, r2)
                    if d2 > r2:
                        continue
                    dist = np.sqrt(d2)
                    if dist < own - tol:
                        c += 1
                        if c >= cap:
                            break
                    elif abs(dist - own) <= tol:
                        t += 1
                continue
            gap = q[axis] - split[node]
            near, far = (left[node], right[node]) if gap < 0 else (right[node], left[node])
            if gap * gap <= r2 and box_bound_over(q, lo, hi, far, r2) <= r2:
                nodes[top] = far
                top += 1
            if box_bound_over(q, lo, hi, near, r2) <= r2:
                nodes[top] = near
                top += 1
        closer[k], tied[k] = c, t
    return closer, tied


@numba.njit(cache=True, nogil=True)
def _leaf_positions(queries, start, dim, split, left, right):
    """For each query, the first position (in the tree's point order) of the leaf it falls in."""
    out = np.empty(queries.shape[0], dtype=np.int64)
    for k in range(queries.shape[0]):
        node = 0
        while dim[node] >= 0:
            node = left[node] if queries[k, dim[node]] < split[node] else right[node]
        out[k] = start[node]
    return out


def capped_counts(tree: KdTree, queries: np.ndarray, d_own: np.ndarray, radius: np.ndarray, rtol: float,
                  cap: int) -> tuple[np.ndarray, np.ndarray]:
    """(strictly nearer, tied) counts of the tree's points for each query: nearer means a distance below
    ``d_own (1 - rtol)``, tied within ``rtol d_own`` of it; the search covers the ball of ``radius`` (which must
    hold every tied point) and stops at ``cap`` strictly nearer points (the tied count is then partial).
    Queries are searched in the order of the leaves they fall in, so neighbouring searches read the same nodes
    (three times faster on 250,000 records of 7 attributes than in file order)."""
    queries = np.ascontiguousarray(queries, dtype=np.float64).reshape(len(queries), -1)
    order = np.argsort(_leaf_positions(queries, tree.start, tree.dim, tree.split, tree.left, tree.right), kind="stable")
    closer, tied = np.empty(len(queries), dtype=np.int64), np.empty(len(queries), dtype=np.int64)
    closer[order], tied[order] = _capped_counts(queries[order], np.asarray(d_own, np.float64)[order],
                                                np.asarray(radius, np.float64)[order], float(rtol), int(cap),
                                                *tree_arrays(tree))
    return closer, tied
