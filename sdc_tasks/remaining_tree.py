"""A k-d tree over a shrinking set of points: the k nearest of the points still remaining, and bounds on the
farthest.

MDAV and MD (statistical_databases_survey.txt, Microaggregation (MDAV), steps 1-5; masking/md.py) ask, again and
again, for the k-1 remaining records closest to a record, then remove a group of k records. A linear scan per
question costs O(b) distance computations for a block of b records; searching a k-d tree whose node counts and
bounding boxes follow the removals answers each question in about O(log b) leaves for few attributes, with the
same answers. (Their most distant records come from a list by radius, sdc_tasks/radius_list.py; MD bounds a
row's farthest partner by the remaining points' box, ``reach_bound``.)

Exactness: bounds are summed coordinate by coordinate in the order ``kdtree.squared_distance`` sums, each term
rounding no further than the point's own term, so a box is pruned only when none of its points can beat (or tie
with) the best found; ties are broken to the lowest point index, as a scan in index order breaks them. The tree
may also be built on a rotation of the points (MD's principal axes, masking/md.py), whose boxes fit correlated
attributes more tightly, and its boxes may carry the points' squared norms as one more coordinate, which bound
the farthest point far more tightly in many attributes (``norm_bound``); the distances are still those of the
points, and the box bounds are moved by a slack far above the rounding of the rotation and of those bounds, so
that no box that could hold the answer is pruned.
"""

from __future__ import annotations

import numba
import numpy as np

from sdc_tasks.kdtree import STACK_DEPTH, build_nodes, squared_distance
from sdc_tasks.kdtree import box_bound as near_bound


@numba.njit(cache=True, nogil=True)
def _parents(left, right):
    """Parent of each node (-1 for the root)."""
    parent = np.full(left.shape[0], -1, dtype=np.int64)
    for node in range(left.shape[0]):
        if left[node] >= 0:
            parent[left[node]] = node
            parent[right[node]] = node
    return parent


@numba.njit(cache=True, nogil=True)
def _leaves_of(n, perm, start, stop, left):
    """The leaf holding each point."""
    leaf = np.empty(n, dtype=np.int64)
    for node in range(left.shape[0]):
        if left[node] < 0:
            for a in range(start[node], stop[node]):
                leaf[perm[a]] = node
    return leaf


@numba.njit(cache=True, nogil=True)
def far_bound(q, lo, hi, node):
    """Largest squared distance from ``q`` to a point of ``node``'s box, summed left to right: never below the
    computed squared distance of a point in the box (each term rounds no smaller)."""
    s = 0.0
    for j in range(q.shape[0]):
        gap = max(abs(lo[node, j] - q[j]), abs(hi[node, j] - q[j]))
        s += gap * gap
    return s


@numba.njit(cache=True, nogil=True)
def with_squared_norms(points):
    """``points`` with each point's squared norm |x|^2 as one more coordinate: a tree built on them keeps, in that
    coordinate of its boxes, the largest squared norm of each node's remaining points (``norm_bound``)."""
    n, d = points.shape
    out = np.empty((n, d + 1))
    for i in range(n):
        s = 0.0
        for j in range(d):
            out[i, j] = points[i, j]
            s += points[i, j] * points[i, j]
        out[i, d] = s
    return out


@numba.njit(cache=True, nogil=True)
def norm_bound(q, lo, hi, node):
    """Largest squared distance from ``q`` to a point x of ``node`` through the boxes' squared-norm coordinate
    (``with_squared_norms``): |q - x|^2 = |q|^2 + |x|^2 - 2 q.x <= |q|^2 + max |x|^2 + sum_j max(-2 q_j lo_j,
    -2 q_j hi_j). The box's farthest corner adds each attribute's largest square on its own; this adds the largest
    norm of the points themselves, far smaller in many attributes (13 Census-like attributes: about a third of the
    leaves a farthest search opens). It rounds either way, by at most about (2d + 2) eps (|q| + max |x|)^2: callers
    widen it by a slack far above that (``reach_bound``)."""
    d = q.shape[0]
    s = hi[node, d]
    for j in range(d):
        s += q[j] * q[j] + max(-2.0 * q[j] * lo[node, j], -2.0 * q[j] * hi[node, j])
    return s


@numba.njit(cache=True, nogil=True)
def _refit(node, points, perm, start, stop, left, right, alive, count, lo, hi):
    """Shrink ``node``'s box to its remaining points (a leaf) or to its non-empty children's boxes."""
    for j in range(points.shape[1]):
        lo[node, j] = np.inf
        hi[node, j] = -np.inf
    if left[node] < 0:
        for a in range(start[node], stop[node]):
            i = perm[a]
            if alive[i]:
                for j in range(points.shape[1]):
                    lo[node, j] = min(lo[node, j], points[i, j])
                    hi[node, j] = max(hi[node, j], points[i, j])
        return
    for child in (left[node], right[node]):
        if count[child] > 0:
            for j in range(points.shape[1]):
                lo[node, j] = min(lo[node, j], lo[child, j])
                hi[node, j] = max(hi[node, j], hi[child, j])


@numba.njit(cache=True, nogil=True)
def remove_point(i, points, perm, start, stop, left, right, parent, leaf, alive, count, lo, hi):
    """Remove point ``i``: counts on its path drop by one and the boxes on it shrink to what remains (``points``:
    the coordinates the tree was built on)."""
    alive[i] = False
    node = leaf[i]
    while node >= 0:
        count[node] -= 1
        _refit(node, points, perm, start, stop, left, right, alive, count, lo, hi)
        node = parent[node]


@numba.njit(cache=True, nogil=True)
def _widened(bound, slack):
    """A box bound moved up by ``slack`` (relative and absolute: slack * (1 + bound)); 0 leaves it as it is."""
    return bound + slack * (1.0 + bound)


@numba.njit(cache=True, nogil=True)
def reach_bound(q_box, lo, hi, node, slack):
    """An upper bound on the squared distance from ``q_box`` to every remaining point of ``node``, widened by
    ``slack`` (``_widened``): the box's farthest corner (``far_bound``) or, where the boxes carry the points'
    squared norms (one column more than ``q_box``), the smaller of that and ``norm_bound``. A tree with squared
    norms needs a positive slack, as ``norm_bound`` may round down."""
    bound = far_bound(q_box, lo, hi, node)
    if lo.shape[1] > q_box.shape[0]:
        bound = min(bound, norm_bound(q_box, lo, hi, node))
    return _widened(bound, slack)


@numba.njit(cache=True, nogil=True)
def insert_nearest(dist, i, dist_of, out, filled, kk):
    """Put candidate ``i`` at squared distance ``dist`` into the buffer of the ``kk`` nearest so far (``out`` and
    ``dist_of``, ``filled`` of them, in (distance, index) order); returns the new number held."""
    if filled == kk and (dist > dist_of[kk - 1] or (dist == dist_of[kk - 1] and i > out[kk - 1])):
        return filled
    pos = filled if filled < kk else kk - 1
    while pos > 0 and (dist_of[pos - 1] > dist or (dist_of[pos - 1] == dist and out[pos - 1] > i)):
        dist_of[pos], out[pos] = dist_of[pos - 1], out[pos - 1]
        pos -= 1
    dist_of[pos], out[pos] = dist, i
    return filled + 1 if filled < kk else filled


@numba.njit(cache=True, nogil=True)
def nearest_points(c, kk, out, points, coords, slack, perm, start, stop, left, right, alive, count, lo, hi):
    """The ``kk`` remaining points other than ``c`` nearest to point ``c``, in (squared distance, index) order,
    into ``out[:kk]`` (fewer when fewer remain: returns how many). The boxes are of ``coords`` (``points`` or a
    rotation of them), their bounds narrowed by ``slack`` as ``reach_bound`` widens them."""
    if kk <= 0:
        return 0
    q = points[c]
    q_box = coords[c]
    dist_of = np.empty(kk)
    filled = np.int64(0)
    nodes = np.zeros(STACK_DEPTH, dtype=np.int64)
    top = 1
    while top > 0:
        top -= 1
        node = nodes[top]
        if count[node] == 0:
            continue
        if filled == kk:
            bound = near_bound(q_box, lo, hi, node)
            if bound - slack * (1.0 + bound) > dist_of[kk - 1]:
                continue
        if left[node] < 0:
            for a in range(start[node], stop[node]):
                i = perm[a]
                if not alive[i] or i == c:
                    continue
                filled = insert_nearest(squared_distance(q, points, i), i, dist_of, out, filled, kk)
            continue
        a, b = left[node], right[node]
        if near_bound(q_box, lo, hi, a) > near_bound(q_box, lo, hi, b):
            a, b = b, a
        nodes[top], nodes[top + 1] = b, a
        top += 2
    return filled


@numba.njit(cache=True, nogil=True)
def remaining_tree(points, leaf_size):
    """The arrays of a tree over all of ``points`` (every point remaining): perm, start, stop, left, right, parent,
    leaf of each point, alive flags, node counts and the (mutable) node boxes lo, hi."""
    perm, _, start, stop, dim, split, left, right, lo, hi = build_nodes(points, leaf_size)
    count = (stop - start).astype(np.int64)
    alive = np.ones(points.shape[0], dtype=np.bool_)
    return (perm, start, stop, left, right, _parents(left, right), _leaves_of(points.shape[0], perm, start, stop, left),
            alive, count, lo, hi)

