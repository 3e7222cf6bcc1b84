"""Rank swapping (mu-Argus / Moore 1996): pure block kernels (numpy in, numpy out).

Sources:
- statistical_databases_survey.txt, Data swapping and rank swapping: values of an attribute are ranked in
  ascending order and each ranked value is swapped with another ranked value randomly chosen within a
  restricted range: the ranks of two swapped values differ by at most p% of the number of records.
- sdc_methods_comparison_chapter.txt sec. 2 (Rank swapping, Moore 1996): "Rank p", applied independently
  to each variable, p from 1 to 20.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from sdc_tasks.masking.checks import column_with_tiebreak


def _check_percent(p: float) -> float:
    """Return ``p`` as a float after checking 0 < p <= 100 (the swap range in percent of n)."""
    if isinstance(p, bool) or not isinstance(p, (int, float, np.integer, np.floating)) or not 0 < p <= 100:
        raise ValueError(f"p must be a percentage in (0, 100], got {p!r}")
    return float(p)


def max_rank_distance(n: int, p: float) -> int:
    """Return P = floor(n * p / 100), the largest allowed rank difference of two swapped values.

    statistical_databases_survey.txt, Data swapping and rank swapping: "the rank of two swapped values
    cannot differ by more than p% of the total number of records".
    """
    return math.floor(n * _check_percent(p) / 100)


def fewest_swapped_records(p: float) -> int:
    """The fewest records n (at least 2) whose P = floor(n p / 100) (``max_rank_distance``) is at least 1: with
    fewer, no value moves and the scope would be published as it is."""
    n = max(2, math.ceil(100 / _check_percent(p)))
    return n if max_rank_distance(n, p) >= 1 else n + 1


@numba.njit(cache=True)
def _find(parent, x):
    """Root of x in a union-find forest whose roots are the unswapped ranks (path halving)."""
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x


@numba.njit(cache=True)
def _free_partner(i, k, n, max_dist, perm, left, right):
    """First unswapped rank j > i for rank i, or -1: j = min(k, n-1), else walking left, else walking right.

    mu-Argus rank swapping (Moore 1996): the leftward walk stops at i+1 and the rightward walk at
    min(n-1, i+P), so |j - i| <= P. ``left``/``right`` give the nearest unswapped rank at or below /
    at or above a rank, so each walk costs near-constant time instead of its length.
    """
    start = min(k, n - 1)
    if start <= i:
        return -1
    if perm[start] == start:
        return start
    j = _find(left, start - 1)
    if j >= i + 1:
        return j
    j = _find(right, start + 1)
    if j <= min(n - 1, i + max_dist):
        return j
    return -1


@numba.njit(cache=True)
def _mark_swapped(x, left, right):
    """Link rank x to its lower and upper neighbours in the nearest-unswapped-rank forests."""
    if x > 0:
        left[x] = x - 1
    right[x] = x + 1


@numba.njit(cache=True)
def _swap_partners(n, max_dist, uniforms):
    """Rank-space involution: rank i pairs with a free rank among i+1..i+P drawn from uniforms[i].

    statistical_databases_survey.txt, Data swapping and rank swapping; target k = i + 1 + floor(P * u_i).
    """
    perm = np.arange(n)
    left = np.arange(n)
    right = np.arange(n + 1)
    for i in range(n):
        if perm[i] != i:
            continue
        j = _free_partner(i, i + 1 + np.int64(math.floor(max_dist * uniforms[i])), n, max_dist, perm, left, right)
        if j > i:
            perm[i] = j
            perm[j] = i
            _mark_swapped(i, left, right)
            _mark_swapped(j, left, right)
    return perm


def rank_swap_permutation(n: int, p: float, uniforms: np.ndarray) -> np.ndarray:
    """Return perm (int64, n) in rank space: the value at sorted position i takes the value at perm[i].

    statistical_databases_survey.txt, Data swapping and rank swapping; sdc_methods_comparison_chapter.txt
    sec. 2 (Rank swapping, Moore 1996). With P = floor(n p / 100) (identity when P == 0), ranks
    i = 0..n-1 are visited in order; an unswapped rank i aims at k = i + 1 + floor(P u_i), takes
    j = min(k, n-1) if unswapped, else the nearest unswapped rank walking left down to i+1, else walking
    right up to min(n-1, i+P), and swaps with it; if none is free, i stays fixed. perm is an involution
    of disjoint transpositions and fixed points with |perm[i] - i| <= P.
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"n must be an integer >= 0, got {n!r}")
    u = np.ascontiguousarray(uniforms, dtype=np.float64)
    if u.shape != (n,):
        raise ValueError(f"uniforms must have shape ({n},), got {u.shape}")
    if not ((u >= 0.0) & (u < 1.0)).all():
        raise ValueError(f"uniforms must lie in [0, 1); row {int(np.argmin((u >= 0.0) & (u < 1.0)))} does not")
    max_dist = max_rank_distance(int(n), p)
    if max_dist == 0:
        return np.arange(n, dtype=np.int64)
    return _swap_partners(int(n), max_dist, u)


def rank_swap_column(values: np.ndarray, tiebreak: np.ndarray, p: float, rng: np.random.Generator) -> np.ndarray:
    """Return the rank-swapped column in the original row order (a permutation of ``values``).

    statistical_databases_survey.txt, Data swapping and rank swapping; sdc_methods_comparison_chapter.txt
    sec. 2 (Rank swapping, Moore 1996). Values are ranked stably by (value, tiebreak), ``rng.random(n)``
    supplies the uniforms of :func:`rank_swap_permutation`, and each value moves at most
    floor(n p / 100) ranks. Raises ValueError naming ``p`` when p is outside (0, 100] and naming the
    first row holding a non-finite value.
    """
    _check_percent(p)
    vals, ties = column_with_tiebreak(values, tiebreak)
    order = np.lexsort((ties, vals))
    perm = rank_swap_permutation(vals.shape[0], p, rng.random(vals.shape[0]))
    out = np.empty_like(vals)
    out[order] = vals[order][perm]
    return out
