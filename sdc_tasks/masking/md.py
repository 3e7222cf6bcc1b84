"""MD (maximum distance) multivariate fixed-group-size microaggregation: pure block kernels (numpy in, numpy out).

Sources:
- sdc_methods_comparison_chapter.txt sec. 2: "microaggregation on unprojected multivariate data" (Mic2mul k ..
  Micmul k), citing Domingo-Ferrer and Mateo-Sanz (2002), "Practical data-oriented microaggregation for
  statistical disclosure control" (IEEE TKDE 14(1)), whose fixed-size heuristic seeds each pair of groups with
  the two most distant records of those left; MDAV (statistical_databases_survey.txt, Microaggregation) is its
  later, cheaper variant that seeds with the record most distant from the average record.
- docs/reproduction.md, "Chapter 6, Table 1": this heuristic, on the standardized Census file with the
  attributes grouped as ``microaggregation.attribute_groups`` does, reproduces Table 1's IL and DLD columns for the 32
  Mic2mul..Micmul rows (MDAV does not).

Tie rule (as in ``mdav``): equal squared distances are resolved to the lowest row index of the block; the most
distant pair is the first in (row, row) order, so the grouping is a deterministic function of the row order.

Speed (benchmarks/microaggregation_kernels.py, docs/performance.md): the k-1 closest records are found by a k-d tree
that follows the removals, the most distant pair from upper bounds kept in a heap, refreshed cheaply before a
search makes one exact, and every most distant record from the rows listed by their distance from the block's
average (``radius_list.listed_farthest``: the triangle inequality stops the scan after a few rows at the edge of
the cloud); the groups are those of the scan kernel this replaced (tests/md_scan_reference.py), 12x-24x fewer CPU
seconds on 12,000-record blocks of 3-4 attributes and about 10x on 13.
"""

from __future__ import annotations

import numba
import numpy as np

from sdc_tasks.indexed_heap import heap_fill, heap_rekey, heap_remove
from sdc_tasks.kdtree import LEAF_SIZE, squared_distance
from sdc_tasks.masking.checks import check_group_size_k, checked_block
from sdc_tasks.masking.microaggregation import centroid, grouped_block
from sdc_tasks.radius_list import listed_farthest
from sdc_tasks.remaining_tree import nearest_points, reach_bound, remaining_tree, remove_point, with_squared_norms

# relative margin on the triangle-inequality bounds, far above their rounding error (a few units in the last
# place of a squared distance), so that they stay upper bounds of every computed squared distance
BOUND_MARGIN = 1e-9


@numba.njit(cache=True, nogil=True)
def _centre_and_squared_radii(z):
    """The block's average record c and each row's squared distance |z_i - c|^2."""
    n = z.shape[0]
    c = centroid(z, np.arange(n), n)
    squared = np.empty(n)
    for i in range(n):
        squared[i] = squared_distance(c, z, i)
    return c, squared


def _block_geometry(z: np.ndarray) -> tuple[np.ndarray, float, np.ndarray, np.ndarray, np.ndarray]:
    """The block's rows in its principal axes (the eigenvectors of its scatter matrix about the average record c);
    the slack that covers the rounding between squared distances there and in ``z`` and that of the bounds through
    the squared norms (``remaining_tree.norm_bound``, at most about (2p + 2) eps 4 max_i |z_i - c|^2 between rows of
    the block), 1e-9 (1 + max_i |z_i - c|^2), many orders of magnitude above both; c; each row's distance
    |z_i - c|; and the rows by decreasing distance (``radius_list.listed_farthest`` reads them).

    The k-d tree's boxes are drawn in the principal axes, which fit correlated attributes more tightly (13
    Census-like attributes: about 1.8x fewer seconds per block); every distance the groups depend on is still
    computed from ``z``. The eigenvectors and the sort are numpy's: compiled, they cost 8 of the 19 seconds of the
    kernel's first compilation."""
    c, squared = _centre_and_squared_radii(z)
    centered = z - c
    axes = np.linalg.eigh(centered.T @ centered)[1]
    slack = 1e-9 * (1.0 + squared.max())
    radius = np.sqrt(squared)
    return np.ascontiguousarray(centered @ axes), slack, c, radius, np.argsort(-radius)


@numba.njit(cache=True, nogil=True)
def _cheap_reach(y, slack, row, radius, by_radius, cursor, tree):
    """An upper bound on the largest squared distance from ``row`` to a remaining row, from what remains now: the
    triangle inequality through the block's average, (|z_row - c| + max_j |z_j - c|)^2 over the remaining j, and
    the bound of the remaining rows' box in the principal axes (``remaining_tree.reach_bound``, widened by
    ``slack``); ``cursor[0]`` moves past the removed rows of ``by_radius``."""
    alive, lo, hi = tree[7], tree[9], tree[10]
    while not alive[by_radius[cursor[0]]]:
        cursor[0] += 1
    t = radius[row] + radius[by_radius[cursor[0]]]
    return min(t * t * (1.0 + BOUND_MARGIN), reach_bound(y[row], lo, hi, np.int64(0), slack))


@numba.njit(cache=True, nogil=True)
def _diameter_end(z, y, slack, tree, heap, reach, exact, partner, c, radius, by_radius, cursor):
    """The lower-indexed end of the most distant remaining pair (the first such pair in (row, row) order): the
    lowest row whose most distant other remaining row is at the largest distance.

    ``reach`` holds upper bounds (removing rows never makes a row's farthest partner farther), exact while the
    partner found for the row remains; the heap keeps the rows by bound, the lowest row first among equal ones.
    The row on top is refreshed with ``_cheap_reach`` or, when that does not lower it, made exact by a search of
    the rows listed by their distance from the block's average ``c`` (``radius_list.listed_farthest``), until an
    exact one is on top: then no row can exceed it or equal it with a lower index."""
    alive = tree[7]
    order, where, size = heap
    while True:
        row = order[0]
        if exact[row] and alive[partner[row]]:
            return row
        exact[row] = False
        cheap = _cheap_reach(y, slack, row, radius, by_radius, cursor, tree)
        if cheap < reach[row]:
            reach[row] = cheap
        else:
            far = listed_farthest(z[row], row, z, alive, c, radius, by_radius, z.shape[0], cursor)[0]
            reach[row], partner[row], exact[row] = squared_distance(z[row], z, far), far, True
        heap_rekey(order, where, reach, row, size[0])


@numba.njit(cache=True, nogil=True)
def _group_around(z, y, boxes, slack, c, k, g, labels, members, tree, heap, reach):
    """Label record ``c`` and its k-1 closest remaining records (ties: lowest row) as group g and remove them from
    the tree (built on ``boxes``) and the heap."""
    perm, start, stop, left, right, parent, leaf, alive, count, lo, hi = tree
    order, where, size = heap
    members[0] = c
    nearest_points(c, k - 1, members[1:], z, y, slack, perm, start, stop, left, right, alive, count, lo, hi)
    for t in range(k):
        row = members[t]
        labels[row] = g
        remove_point(row, boxes, perm, start, stop, left, right, parent, leaf, alive, count, lo, hi)
        size[0] = heap_remove(order, where, reach, row, size[0])


@numba.njit(cache=True, nogil=True)
def _md_labels(z, k, y, slack, c, radius, by_radius):
    """MD group labels 0..g-1 in order of formation: the most distant pair from bounds kept in a heap
    (``_diameter_end``), the k-1 closest by a k-d tree that follows the removals (sdc_tasks.remaining_tree), its
    boxes in the principal axes with the squared norms there, and the most distant record from x_r from the rows
    listed by their distance from the block's average (``radius_list.listed_farthest``); ties to the lowest row,
    as a scan of the rows in order breaks them. ``y, slack, c, radius, by_radius``: the block's geometry
    (``_block_geometry``)."""
    n = z.shape[0]
    labels = np.full(n, -1, np.int64)
    boxes = with_squared_norms(y)
    tree = remaining_tree(boxes, np.int64(LEAF_SIZE))
    alive = tree[7]
    cursor = np.zeros(1, np.int64)
    reach = np.empty(n)
    for i in range(n):
        reach[i] = _cheap_reach(y, slack, i, radius, by_radius, cursor, tree)
    exact = np.zeros(n, np.bool_)
    partner = np.zeros(n, np.int64)
    heap = (np.empty(n, np.int64), np.full(n, -1, np.int64), np.full(1, n, np.int64))
    heap_fill(heap[0], heap[1], reach, np.arange(n), n)
    members = np.empty(k, np.int64)
    m, g = n, np.int64(0)
    while m >= 2 * k:
        pair = m >= 3 * k
        r = _diameter_end(z, y, slack, tree, heap, reach, exact, partner, c, radius, by_radius, cursor)
        _group_around(z, y, boxes, slack, r, k, g, labels, members, tree, heap, reach)
        m -= k
        g += 1
        if not pair:
            break
        s = listed_farthest(z[r], np.int64(-1), z, alive, c, radius, by_radius, n, cursor)[0]
        _group_around(z, y, boxes, slack, s, k, g, labels, members, tree, heap, reach)
        m -= k
        g += 1
    for i in range(n):
        if alive[i]:
            labels[i] = g
    return labels


def md_groups(z: np.ndarray, k: int) -> np.ndarray:
    """Return MD group labels (int64, 0..g-1 in order of formation) for the standardized block ``z`` (n, p).

    Domingo-Ferrer and Mateo-Sanz (2002), as cited by sdc_methods_comparison_chapter.txt sec. 2: while at least
    3k records remain, x_r and x_s are the two most distant remaining records (squared Euclidean); x_r and its
    k-1 closest remaining records form a group, then x_s and its k-1 closest records among those still
    remaining form another. With 2k..3k-1 left, x_r of the most distant pair and its k-1 closest form a group
    and the rest the last group; with 1..2k-1 left they form one group (MDAV's steps 5-6 with MD's x_r;
    docs/reproduction.md: this end rule fits Table 1 better than MDAV's average record). Every group has k
    records except the last, which has k..2k-1.

    x_s is taken as the remaining record most distant from x_r once x_r's group is formed: the other end of the
    pair unless it fell in x_r's group, which only tied distances allow. A 1-D ``z`` is one attribute.
    Raises ValueError when ``k`` is not an integer >= 1, when n < k, or when a row holds a non-finite value;
    n == 0 gives an empty array.
    """
    k = check_group_size_k(k)
    zz = checked_block(z, k, "MD")
    return _md_labels(zz, k, *_block_geometry(zz)) if len(zz) else np.empty(0, dtype=np.int64)


def md_microaggregate_block(x: np.ndarray, k: int, center: np.ndarray, scale: np.ndarray,
                            group_size: int | None = None) -> np.ndarray:
    """Return the MD-microaggregated block (n, p) on the original scale of ``x``: records grouped by MD on the
    data standardized with the global ``center``/``scale`` in each attribute group, values replaced by their
    group's average (sdc_methods_comparison_chapter.txt sec. 2: Micmul k for ``group_size=None``, Mic3mul k
    for 3, ...)."""
    return grouped_block(x, center, scale, group_size, lambda z: md_groups(z, k))
