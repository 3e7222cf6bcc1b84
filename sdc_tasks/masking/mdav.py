"""MDAV multivariate fixed-group-size microaggregation: pure block kernels (numpy in, numpy out).

Sources:
- statistical_databases_survey.txt, Microaggregation (MDAV): the 6-step MDAV algorithm and the SSE criterion.
- sdc_methods_comparison_chapter.txt sec. 2: microaggregation variants Micmul k (all attributes together)
  and Mic2mul k / Mic3mul k / Mic4mul k (attributes microaggregated two, three, four at a time).

Tie rule: wherever the survey says "most distant" or "closest", equal squared distances are resolved to the
lowest row index of the block, so the grouping is a deterministic function of the block's row order.
"""

from __future__ import annotations

import numbers

import numba
import numpy as np

from sdc_tasks.kdtree import LEAF_SIZE
from sdc_tasks.remaining_tree import farthest_point, insert_nearest, nearest_points, remaining_tree, remove_point

TREE_MAX_ATTRIBUTES = 5


def _as_columns(a: np.ndarray, name: str) -> np.ndarray:
    """Return ``a`` as a C-contiguous float64 (n, p) array; a 1-D array is one attribute."""
    arr = np.asarray(a, dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 1-D or 2-D array, got {arr.ndim} dimensions")
    return np.ascontiguousarray(arr)


def _check_finite_rows(a: np.ndarray, name: str) -> None:
    """Raise ValueError naming the first row of ``a`` holding a NaN or infinite value."""
    bad = ~np.isfinite(a).all(axis=1)
    if bad.any():
        raise ValueError(f"{name} has a non-finite value in row {int(np.argmax(bad))}")


def _check_group_size_k(k: object) -> int:
    """Return ``k`` as an int after checking it is an integer >= 1 (the minimal group size)."""
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
        raise ValueError(f"k must be an integer >= 1, got {k!r}")
    return int(k)


@numba.njit(cache=True)
def _centroid(z, rem, m):
    """Average record of the m remaining rows ``z[rem[:m]]`` (survey, MDAV step 1 / step 5a)."""
    p = z.shape[1]
    total = np.zeros(p)
    for a in range(m):
        row = rem[a]
        for j in range(p):
            total[j] += z[row, j]
    return total / m


@numba.njit(cache=True)
def _squared_distances(z, rem, m, v, out):
    """Squared Euclidean distance of each remaining row to the vector v, into ``out[:m]`` (survey, MDAV step 1)."""
    p = z.shape[1]
    for a in range(m):
        row = rem[a]
        acc = 0.0
        for j in range(p):
            t = z[row, j] - v[j]
            acc += t * t
        out[a] = acc


@numba.njit(cache=True)
def _scan_most_distant(d, m):
    """Position of the largest of ``d[:m]``, the lowest position among equal maxima (MDAV steps 1, 2, 5b)."""
    best = 0
    for a in range(1, m):
        if d[a] > d[best]:
            best = a
    return best


@numba.njit(cache=True)
def _closest(d, m, k, out):
    """The k positions with the smallest ``d[:m]`` in (distance, position) order, into ``out`` (MDAV step 3);
    ties go to the lowest position."""
    dist_of = np.empty(k)
    filled = 0
    for a in range(m):
        filled = insert_nearest(d[a], a, dist_of, out, filled, k)


@numba.njit(cache=True)
def _scan_group_around(z, rem, m, pos, k, g, labels, d, members):
    """Label record ``rem[pos]`` and its k-1 closest remaining records as group g (survey, MDAV step 3).

    Returns the new number of remaining rows; ``rem`` is compacted in place, its order kept.
    """
    _squared_distances(z, rem, m, z[rem[pos]], d)
    d[pos] = -1.0
    _closest(d, m, k, members)
    for t in range(k):
        labels[rem[members[t]]] = g
    kept = 0
    for a in range(m):
        if labels[rem[a]] < 0:
            rem[kept] = rem[a]
            kept += 1
    return kept


@numba.njit(cache=True)
def _scan_pair_of_groups(z, rem, m, r, k, g, labels, d, members):
    """Label x_r = ``rem[r]`` and its k-1 closest remaining records as group g, then x_s, the remaining record most
    distant from x_r, and its k-1 closest as group g + 1 (survey, MDAV steps 2-3); returns the rows left."""
    x_r = z[rem[r]].copy()
    m = _scan_group_around(z, rem, m, r, k, g, labels, d, members)
    _squared_distances(z, rem, m, x_r, d)
    return _scan_group_around(z, rem, m, _scan_most_distant(d, m), k, g + 1, labels, d, members)


@numba.njit(cache=True)
def _scan_labels(z, k):
    """MDAV group labels 0..g-1 in order of formation (survey, Microaggregation (MDAV), steps 1-6), each question
    answered by a scan of the remaining rows (kept in row order)."""
    n = z.shape[0]
    labels = np.full(n, -1, np.int64)
    rem = np.arange(n)
    d = np.empty(n)
    members = np.empty(k, np.int64)
    m = n
    g = 0
    while m >= 3 * k:
        _squared_distances(z, rem, m, _centroid(z, rem, m), d)
        m = _scan_pair_of_groups(z, rem, m, _scan_most_distant(d, m), k, g, labels, d, members)
        g += 2
    if m >= 2 * k:
        _squared_distances(z, rem, m, _centroid(z, rem, m), d)
        m = _scan_group_around(z, rem, m, _scan_most_distant(d, m), k, g, labels, d, members)
        g += 1
    for a in range(m):
        labels[rem[a]] = g
    return labels


@numba.njit(cache=True)
def _tree_group_around(z, c, k, g, labels, members, sums, tree):
    """Label record ``c`` and its k-1 closest remaining records as group g and remove them from the tree and from
    the column sums of the remaining records (survey, MDAV step 3)."""
    perm, start, stop, left, right, parent, leaf, alive, count, lo, hi = tree
    members[0] = c
    nearest_points(c, k - 1, members[1:], z, perm, start, stop, left, right, alive, count, lo, hi)
    for t in range(k):
        row = members[t]
        labels[row] = g
        remove_point(row, z, perm, start, stop, left, right, parent, leaf, alive, count, lo, hi)
        for j in range(z.shape[1]):
            sums[j] -= z[row, j]


@numba.njit(cache=True)
def _remaining_sums(z, alive):
    """Column sums of the remaining records, in row order."""
    sums = np.zeros(z.shape[1])
    for i in range(z.shape[0]):
        if alive[i]:
            for j in range(z.shape[1]):
                sums[j] += z[i, j]
    return sums


@numba.njit(cache=True)
def _tree_most_distant(z, v, tree):
    """The remaining record most distant from ``v`` (lowest row index among ties; survey, MDAV steps 1, 2, 5b)."""
    perm, start, stop, left, right, parent, leaf, alive, count, lo, hi = tree
    return farthest_point(v, z, perm, start, stop, left, right, alive, count, lo, hi)


@numba.njit(cache=True)
def _tree_labels(z, k):
    """MDAV group labels 0..g-1 in order of formation (survey, Microaggregation (MDAV), steps 1-6), each question
    answered by a k-d tree search.

    The remaining records live in a k-d tree that follows the removals (sdc_tasks.remaining_tree). The average
    record is kept from column sums updated at each removal and summed afresh from the remaining rows whenever
    their number has halved, so rounding stays that of a sum over at most twice the records averaged. Where sums
    are exact (integer-valued data) the groups are the scan's; elsewhere the average can differ from the scan's
    fresh sum in its last bits, so an exact tie of distances to it may be broken differently (summing afresh
    at every step would make the tree barely faster than the scan: 0.115 s instead of 0.058 s for 12,000
    records of 3 attributes).
    """
    n = z.shape[0]
    labels = np.full(n, -1, np.int64)
    tree = remaining_tree(z, LEAF_SIZE)
    alive = tree[7]
    members = np.empty(k, np.int64)
    sums = _remaining_sums(z, alive)
    m, fresh_at, g = n, n, 0
    while m >= 2 * k:
        if 2 * m <= fresh_at:
            sums, fresh_at = _remaining_sums(z, alive), m
        pair = m >= 3 * k
        r = _tree_most_distant(z, sums / m, tree)
        _tree_group_around(z, r, k, g, labels, members, sums, tree)
        m -= k
        g += 1
        if not pair:
            break
        _tree_group_around(z, _tree_most_distant(z, z[r], tree), k, g, labels, members, sums, tree)
        m -= k
        g += 1
    for i in range(n):
        if alive[i]:
            labels[i] = g
    return labels


def _mdav_labels(z: np.ndarray, k: int) -> np.ndarray:
    """MDAV group labels: by tree searches up to TREE_MAX_ATTRIBUTES attributes (fewer distance computations: a
    12,000-record block of 3 attributes in 0.06 s instead of 0.16 s; the scan's labels but for the rounding of
    exact ties noted in ``_tree_labels``) and by scans above (where a k-d tree prunes too little to pay: 13
    attributes 0.39 s by scans, 0.79 s by the tree)."""
    return _tree_labels(z, k) if z.shape[1] <= TREE_MAX_ATTRIBUTES else _scan_labels(z, k)


def checked_block(z: np.ndarray, k: int, method: str) -> np.ndarray:
    """The block as finite (n, p) columns; ValueError naming k when 0 < n < k."""
    zz = _as_columns(z, "z")
    n = zz.shape[0]
    if 0 < n < k:
        raise ValueError(f"k={k} exceeds the number of records n={n}: {method} needs n >= k")
    _check_finite_rows(zz, "z")
    return zz


def mdav_groups(z: np.ndarray, k: int) -> np.ndarray:
    """Return MDAV group labels (int64, 0..g-1 in order of formation) for the standardized block ``z`` (n, p).

    statistical_databases_survey.txt, Microaggregation (MDAV), steps 1-6:
    while at least 3k records remain, x_r is the remaining record most distant (squared Euclidean) from
    the remaining records' average, x_s the remaining record most distant from x_r; x_r and its k-1
    closest remaining records form a group, then x_s and its k-1 closest records among those still
    remaining form another. With 2k..3k-1 left, x_r (most distant from their average) and its k-1
    closest form a group and the rest the last group; with 1..2k-1 left they form one group.
    Every group has k records except the last, which has k..2k-1.

    x_s is taken among the records left after x_r's group is formed: the survey's choice (step 2 before
    step 3) unless that record would itself fall in x_r's group, which only tied distances allow.
    A 1-D ``z`` is one attribute. Raises ValueError when ``k`` is not an integer >= 1, when n < k,
    or when a row holds a non-finite value; n == 0 gives an empty array.
    """
    k = _check_group_size_k(k)
    zz = checked_block(z, k, "MDAV")
    return _mdav_labels(zz, k) if len(zz) else np.empty(0, dtype=np.int64)


def group_means(x: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Return (n, p): each row of ``x`` replaced by the mean of its group (survey, Microaggregation).

    "For each attribute, the average value over each group is computed and is used to replace each
    of the original averaged values" (statistical_databases_survey.txt, Microaggregation).
    """
    xx = _as_columns(x, "x")
    lab = np.asarray(labels, dtype=np.int64)
    if lab.shape != (xx.shape[0],):
        raise ValueError(f"labels must have shape ({xx.shape[0]},), got {lab.shape}")
    counts = np.bincount(lab)
    sums = np.column_stack([np.bincount(lab, weights=xx[:, j], minlength=counts.shape[0]) for j in range(xx.shape[1])])
    means = sums / np.maximum(counts, 1)[:, None]
    return means[lab]


def sse(x: np.ndarray, labels: np.ndarray) -> float:
    """Return the within-groups sum of squares SSE = sum_i sum_j (x_ij - xbar_i)'(x_ij - xbar_i).

    statistical_databases_survey.txt, Microaggregation (SSE formula).
    """
    xx = _as_columns(x, "x")
    resid = xx - group_means(xx, labels)
    return float(np.sum(resid * resid))


def _standardized(x: np.ndarray, center: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Return (x - center) / scale column-wise, a zero scale counting as 1 for its column."""
    p = x.shape[1]
    c = np.asarray(center, dtype=np.float64).reshape(-1)
    s = np.asarray(scale, dtype=np.float64).reshape(-1)
    if c.shape != (p,) or s.shape != (p,):
        raise ValueError(f"center and scale must have {p} entries, got {c.shape[0]} and {s.shape[0]}")
    if not (np.isfinite(c).all() and np.isfinite(s).all()):
        raise ValueError("center and scale must be finite")
    return (x - c) / np.where(s == 0.0, 1.0, s)


def attribute_groups(p: int, group_size: int | None) -> list[np.ndarray]:
    """Return the column indices of each attribute group: consecutive runs of ``group_size`` columns, the last
    run taking the remaining columns when fewer than ``group_size`` would be left over.

    sdc_methods_comparison_chapter.txt sec. 2: Micmul (None: all p together), Mic2mul (2: [0,1],[2,3],...),
    Mic3mul (3), Mic4mul (4). Thirteen attributes three at a time are 3+3+3+4: with it Table 1's IL of the 32
    Mic2mul..Micmul rows reproduces (docs/reproduction.md) and pil_measures.txt Table 3's PIL(m2) of Mic3mul7
    is exact; a group of one attribute would be univariate microaggregation, another method.
    """
    if group_size is None:
        return [np.arange(p)]
    if isinstance(group_size, bool) or not isinstance(group_size, numbers.Integral) or group_size < 1:
        raise ValueError(f"group_size must be None or an integer >= 1, got {group_size!r}")
    if p == 0:
        return []
    g = int(group_size)
    runs = max(p // g, 1)
    return [np.arange(i * g, p if i == runs - 1 else (i + 1) * g) for i in range(runs)]


def microaggregate_block(
    x: np.ndarray,
    k: int,
    center: np.ndarray,
    scale: np.ndarray,
    group_size: int | None = None,
) -> np.ndarray:
    """Return the MDAV-microaggregated block (n, p) on the original scale of ``x``.

    statistical_databases_survey.txt, Microaggregation (MDAV): records are grouped by MDAV on the data
    standardized with the global ``center``/``scale`` (a zero scale counts as 1) and each value is
    replaced by its group's average on the original scale; "the above algorithm can be applied
    independently to each group of attributes".
    sdc_methods_comparison_chapter.txt sec. 2: ``group_size=None`` is Micmul k, 2 is Mic2mul k, etc.
    """
    return grouped_block(x, center, scale, group_size, lambda z: mdav_groups(z, k))


def grouped_block(x: np.ndarray, center: np.ndarray, scale: np.ndarray, group_size: int | None,
                  labels_of) -> np.ndarray:
    """Each attribute group of ``x`` grouped by ``labels_of`` on the standardized data and replaced by its
    group means on the original scale (statistical_databases_survey.txt, Microaggregation)."""
    xx = _as_columns(x, "x")
    _check_finite_rows(xx, "x")
    z = _standardized(xx, center, scale)
    out = np.empty_like(xx)
    for cols in attribute_groups(xx.shape[1], group_size):
        out[:, cols] = group_means(xx[:, cols], labels_of(z[:, cols]))
    return out
