"""Disclosure risk kernels: distance-based linkage (DLD, DLD2), interval disclosure (ID, SDID) and scores.

Sources: sdc_methods_comparison_chapter.txt sec. 3 (Distance-Based Record Linkage, Interval Disclosure)
and sec. 4 (Disclosure Risk Assessment); post_masking_optimization.txt eq. (2); docs/metrics.md.
"""

from __future__ import annotations

import numba
import numpy as np

from sdc_tasks.kdtree import KdTree, capped_counts

ID_PERCENTS = tuple(range(1, 11))
TIE_RTOL = 1e-9


def exact_distances(points: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Euclidean distances over the last axis, computed one fixed way whatever the memory layout.

    The squares are summed left to right by elementwise operations (einsum's summation order depends on the
    strides: Fortran-ordered inputs, as pandas hands them out, gave other last bits than C-ordered ones, so a
    record could come out strictly closer to its masked record than itself).
    """
    d = np.asarray(points, dtype=np.float64) - np.asarray(rows, dtype=np.float64)
    sq = np.zeros(d.shape[:-1])
    for j in range(d.shape[-1]):
        sq = sq + d[..., j] * d[..., j]
    return np.sqrt(sq)


def _closer_tied(d: np.ndarray, d_own: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Counts over the last axis of distances strictly below ``d_own`` and equal to it, equal meaning within
    TIE_RTOL relative: standardizing (x - mean) / sd rounds differently for different x (and the mean's last
    bits depend on the partitioning), so distances that are equal on the raw data are only equal to rounding."""
    tol = TIE_RTOL * d_own
    closer = (d < d_own - tol).sum(axis=-1)
    tied = (np.abs(d - d_own) <= tol).sum(axis=-1)
    return closer, tied


def linkage_credit(closer: np.ndarray, tied: np.ndarray, position: int) -> np.ndarray:
    """Credit of each record for 'own original is the ``position``-th nearest' (docs/metrics.md tie rule).

    With ``closer`` originals strictly nearer than the own original and ``tied`` originals (own included) at
    exactly its distance, the own record takes each of the ranks closer+1 .. closer+tied with probability
    1/tied, so it earns 1/tied when closer < position <= closer + tied.
    """
    hit = (closer < position) & (position <= closer + tied)
    return np.where(hit, 1.0 / np.maximum(tied, 1), 0.0)


def search_radius(d_own: np.ndarray) -> np.ndarray:
    """Radius of the ball that holds every original record nearer than or tied with the own original (never 0:
    the k-d tree compares squared distances strictly below the squared bound, so a 0 radius would find nothing)."""
    return d_own * (1 + 2 * TIE_RTOL) + 1e-100


def linkage_counts(tree: KdTree | None, q: np.ndarray, d_own: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each query record: how many records of ``tree`` are strictly nearer than ``d_own`` (its distance to its
    own original) and how many are as near (to TIE_RTOL relative). The tied count is exact wherever fewer than
    two are strictly nearer; otherwise the count stops at two, which already settles DLD and DLD2.

    Distance-based record linkage, sdc_methods_comparison_chapter.txt sec. 3; inputs already standardized.
    Counts over disjoint sets of originals add up, which is what makes the blocked search exact.
    """
    if tree is None or tree.n == 0 or len(q) == 0:
        return np.zeros(len(q), dtype=np.int64), np.zeros(len(q), dtype=np.int64)
    return capped_counts(tree, q, d_own, search_radius(d_own), TIE_RTOL, 2)


@numba.njit(cache=True, nogil=True)
def _value_at(values, base, starts, position):
    """The sorted column's value at a global position, from its pieces laid end to end in ``values``: piece k
    starts at global position ``starts[k]`` and at ``base[k]`` in ``values`` (``starts`` ascending)."""
    k = 0
    while k + 1 < starts.shape[0] and starts[k + 1] <= position:
        k += 1
    return values[base[k] + position - starts[k]]


@numba.njit(cache=True, nogil=True)
def _inside(values, base, starts, n, x, r, width):
    """Whether ``x`` lies within the sorted column's values at positions r - width .. r + width - 1, clipped to its
    n positions (:func:`window_positions`), the column read from the pieces of :func:`_value_at`."""
    lo = _value_at(values, base, starts, max(r - width, 0))
    hi = _value_at(values, base, starts, min(r + width - 1, n - 1))
    return lo <= x <= hi


@numba.njit(cache=True, nogil=True)
def window_hits(values, base, starts, n, x, r, widths):
    """For each half-width W of ``widths``: how many x[i] lie within the sorted column's values at positions
    R - W .. R + W - 1 (R = r[i]; clipped to its n positions, as :func:`window_positions`), the column read from
    the pieces of :func:`_value_at` (the whole column: one piece, ``base`` = ``starts`` = [0]); the intervals of
    ID_p (sdc_methods_comparison_chapter.txt sec. 3, Interval Disclosure; docs/metrics.md ID_p).

    A wider window's ends lie at or beyond a narrower one's in the sorted column, so its values enclose the
    narrower one's: a value inside the window of one width is inside that of every wider one. Each record's
    narrowest width that holds it is found by bisection over the widths in ascending order (about log2 of their
    number of windows read instead of all of them) and counted for that width and every wider one."""
    m = widths.shape[0]
    rank = np.argsort(widths, kind="mergesort")
    ascending = widths[rank]
    narrowest = np.zeros(m + 1, dtype=np.int64)
    for i in range(x.shape[0]):
        a, b = 0, m
        while a < b:
            c = (a + b) // 2
            if _inside(values, base, starts, n, x[i], r[i], ascending[c]):
                b = c
            else:
                a = c + 1
        narrowest[a] += 1
    hits = np.empty(m, dtype=np.int64)
    hits[rank] = np.cumsum(narrowest[:m])
    return hits


@numba.njit(cache=True, nogil=True)
def last_positions(sorted_values, sorted_queries):
    """For each query of ``sorted_queries`` (ascending), the position of the last value of ``sorted_values`` at or
    below it (0 when none): ``np.searchsorted(sorted_values, q, side="right") - 1`` clipped at 0, by one pass over
    both (the ID interval's R, :func:`interval_hits`)."""
    out = np.empty(sorted_queries.shape[0], dtype=np.int64)
    p, n = 0, sorted_values.shape[0]
    for i in range(sorted_queries.shape[0]):
        q = sorted_queries[i]
        while p < n and (sorted_values[p] <= q or q != q):  # a NaN sorts after every value, as in numpy
            p += 1
        out[i] = max(p - 1, 0)
    return out


def interval_widths(n: int, percents: tuple[int, ...] = ID_PERCENTS) -> np.ndarray:
    """W = ceil(p n / 100) for each p: the half-width, in positions of the sorted masked column of n values, of
    the interval of ID_p (sdc_methods_comparison_chapter.txt sec. 3, Interval Disclosure; docs/metrics.md ID_p)."""
    return np.array([-(-p * n // 100) for p in percents], dtype=np.int64)


def window_positions(r: np.ndarray, width: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The ends R - W and R + W - 1 of the interval of ID_p in the sorted masked column, clipped to its n
    positions, for each last-occurrence position R (chapter sec. 3 as calibrated on its Table 1; docs/metrics.md
    ID_p); :func:`interval_hits` reads the same ends."""
    return np.maximum(r - width, 0), np.minimum(r + width - 1, n - 1)


def interval_hits(sorted_masked: np.ndarray, x: np.ndarray, xm: np.ndarray,
                  percents: tuple[int, ...] = ID_PERCENTS, order: np.ndarray | None = None) -> np.ndarray:
    """Number of original values inside the value interval around their masked value, for each p.

    The interval is taken in the sorted masked column: with W = ceil(p n / 100) and R the 0-based position of the
    last occurrence of x' there (the number of masked values <= x', minus 1), it runs from sorted_masked[R - W] to
    sorted_masked[R + W - 1], clipped to the column (sdc_methods_comparison_chapter.txt sec. 3, Interval Disclosure,
    as calibrated on its Table 1; docs/metrics.md ID_p). ``order``: the rows in ascending order of ``xm`` when the
    caller has it (any order of ties; the counts do not depend on it), else found here.
    """
    n = sorted_masked.shape[0]
    if order is None:  # sorted queries read the sorted column in order (cache-friendly)
        order = np.argsort(xm, kind="stable")
    sorted_masked = np.ascontiguousarray(sorted_masked, dtype=np.float64)
    x, xm = np.ascontiguousarray(x[order], dtype=np.float64), np.ascontiguousarray(xm[order], dtype=np.float64)
    whole = np.zeros(1, dtype=np.int64)
    return window_hits(sorted_masked, whole, whole, n, x, last_positions(sorted_masked, xm),
                       interval_widths(n, percents))


def sdid_hits(x: np.ndarray, xm: np.ndarray, sd: float, k: float = 0.05) -> int:
    """Number of original values inside [x' - k S, x' + k S] (SDID; bounded_rank_metrics.txt ref. [10])."""
    return int((np.abs(x - xm) <= k * sd).sum())


def scores(metrics: dict[str, float]) -> dict[str, float]:
    """The scores docs/metrics.md defines from whatever of IL, DLD, PLD, ID and PIL is present.

    score = 0.5 IL + 0.125 DLD + 0.125 PLD + 0.25 ID (chapter 6 sec. 4);
    score_simple = 0.5 IL + 0.25 DLD + 0.25 ID (post_masking_optimization.txt eq. (2));
    score_pil = score with PIL in place of IL (pil_measures.txt sec. 3).
    """
    m = metrics
    out: dict[str, float] = {}
    if all(k in m for k in ("IL", "DLD", "ID")):
        out["score_simple"] = 0.5 * m["IL"] + 0.25 * m["DLD"] + 0.25 * m["ID"]
    if all(k in m for k in ("IL", "DLD", "PLD", "ID")):
        out["score"] = 0.5 * m["IL"] + 0.125 * m["DLD"] + 0.125 * m["PLD"] + 0.25 * m["ID"]
    if all(k in m for k in ("PIL", "DLD", "PLD", "ID")):
        out["score_pil"] = 0.5 * m["PIL"] + 0.125 * m["DLD"] + 0.125 * m["PLD"] + 0.25 * m["ID"]
    return out
