"""Rank swapping (Moore 1996): pure block kernels (numpy in, numpy out).

Two ways of drawing a rank's partner (``partner``):
- ``uniform`` (default): uniformly among the unswapped ranks i+1..i+P, the survey's "randomly chosen within a
  restricted range" read literally; it reproduces the ID column of chapter 6 Table 1 (docs/reproduction.md);
- ``nearest_free``: the mu-Argus walk, a target rank drawn uniformly in i+1..i+P and, when it is taken, the
  nearest unswapped rank below it (else above): it favours short swaps (ID about 4 points higher at p = 10..18).

Sources:
- statistical_databases_survey.txt, Data swapping and rank swapping: values of an attribute are ranked in
  ascending order and each ranked value is swapped with another ranked value randomly chosen within a
  restricted range: the ranks of two swapped values differ by at most p% of the number of records.
- sdc_methods_comparison_chapter.txt sec. 2 (Rank swapping, Moore 1996): "Rank p", applied independently
  to each variable, p from 1 to 20.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numba
import numpy as np

from sdc_tasks.masking.checks import column_with_tiebreak
from sdc_tasks.stats.order import value_order


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


@numba.njit(cache=True, nogil=True)
def _fenwick_add(tree, pos, delta):
    """Add ``delta`` at 0-based ``pos`` of a Fenwick tree (1-based array of counts)."""
    k = pos + 1
    while k < tree.shape[0]:
        tree[k] += delta
        k += k & -k


@numba.njit(cache=True, nogil=True)
def _fenwick_prefix(tree, pos):
    """Sum of the counts at 0-based positions 0..pos (0 when pos < 0)."""
    k = pos + 1
    total = 0
    while k > 0:
        total += tree[k]
        k -= k & -k
    return total


@numba.njit(cache=True, nogil=True)
def _fenwick_select(tree, m):
    """Smallest 0-based position whose prefix sum reaches ``m`` (1 <= m <= total)."""
    n = tree.shape[0] - 1
    step = 1
    while step * 2 <= n:
        step *= 2
    pos = 0
    while step > 0:
        if pos + step <= n and tree[pos + step] < m:
            pos += step
            m -= tree[pos]
        step //= 2
    return pos


FREE_BLOCK = 32
"""Ranks per block of the free-rank index: a flag per rank, a Fenwick tree of the free ranks of each block."""


@numba.njit(cache=True, nogil=True)
def _free_index(w, taken):
    """The free ranks of a window of ``w`` ranks, those at the window positions ``taken`` already taken: a flag per
    rank (1: free) and a Fenwick tree of each FREE_BLOCK-rank block's free ranks, built in O(w). A whole-window
    Fenwick tree of ranks would be eight times the memory, its lookups spread over all of it."""
    flags = np.ones(w, dtype=np.uint8)
    for x in taken:
        flags[x] = 0
    blocks = (w + FREE_BLOCK - 1) // FREE_BLOCK
    tree = np.zeros(blocks + 1, dtype=np.int64)
    for k in range(1, blocks + 1):
        for x in range((k - 1) * FREE_BLOCK, min(w, k * FREE_BLOCK)):
            tree[k] += flags[x]
        parent = k + (k & -k)
        if parent <= blocks:
            tree[parent] += tree[k]
    return flags, tree


@numba.njit(cache=True, nogil=True)
def _free_through(flags, tree, pos):
    """How many ranks at window positions 0..pos are free (0 when pos < 0)."""
    if pos < 0:
        return 0
    block = pos // FREE_BLOCK
    total = _fenwick_prefix(tree, block - 1)
    for x in range(block * FREE_BLOCK, pos + 1):
        total += flags[x]
    return total


@numba.njit(cache=True, nogil=True)
def _free_at(flags, tree, target):
    """The window position of the ``target``-th free rank (1 <= target <= the free ranks)."""
    block = _fenwick_select(tree, target)
    count = _fenwick_prefix(tree, block - 1)
    x = block * FREE_BLOCK
    while True:
        count += flags[x]
        if flags[x] == 1 and count == target:
            return x
        x += 1


@numba.njit(cache=True, nogil=True)
def _take(flags, tree, x):
    """Mark the rank at window position ``x`` taken."""
    flags[x] = 0
    _fenwick_add(tree, x // FREE_BLOCK, np.int64(-1))


@numba.njit(cache=True, nogil=True)
def _uniform_partner(flags, tree, i, before, u, n, max_dist):
    """Rank i's partner drawn uniformly among the F free ranks in i+1..i+P: the (floor(F u) + 1)-th of them in rank
    order, or -1 when F = 0 (``before``: the free ranks at or below i).

    statistical_databases_survey.txt, Data swapping and rank swapping: "swapped with another ranked value
    randomly chosen within a restricted range"."""
    free = _free_through(flags, tree, min(n - 1, i + max_dist)) - before
    if free == 0:
        return -1
    return _free_at(flags, tree, before + 1 + np.int64(math.floor(free * u)))


@numba.njit(cache=True, nogil=True)
def _walk_partner(flags, tree, i, before, u, n, max_dist):
    """Rank i's partner by the mu-Argus walk (Moore 1996): the target k = i + 1 + floor(P u), j = min(k, n-1) if it
    is free, else the nearest free rank below it down to i+1, else the nearest free rank above it up to
    min(n-1, i+P), else -1 (``before``: the free ranks at or below i)."""
    start = min(i + 1 + np.int64(math.floor(max_dist * u)), n - 1)
    if start <= i:
        return -1
    if flags[start] == 1:
        return start
    below = _free_through(flags, tree, start - 1)
    if below > before:
        return _free_at(flags, tree, below)
    if _free_through(flags, tree, min(n - 1, i + max_dist)) > below:
        return _free_at(flags, tree, below + 1)
    return -1


@numba.njit(cache=True, nogil=True)
def _partners(m, w, n, max_dist, uniforms, taken, walk):
    """Partners of the first ``m`` ranks of a window of ``w`` ranks (``n``: ranks from the window's first to the
    scope's last; ``taken``: window positions an earlier rank already took): perm (int64, m), perm[i] the rank i
    pairs with, i itself when it stays, -1 when taken before. Ranks are visited in order; an unswapped rank i
    pairs with a free rank in i+1..i+P drawn with uniforms[i] by :func:`_walk_partner` (``walk``) or
    :func:`_uniform_partner`, or stays when there is none. The free ranks are counted and selected in O(log w)
    (:func:`_free_index`)."""
    perm = np.arange(m)
    for x in taken:
        if x < m:
            perm[x] = -1
    flags, tree = _free_index(w, taken)
    for i in range(m):
        if perm[i] != i:
            continue
        before = _free_through(flags, tree, i)
        if walk:
            j = _walk_partner(flags, tree, i, before, uniforms[i], n, max_dist)
        else:
            j = _uniform_partner(flags, tree, i, before, uniforms[i], n, max_dist)
        if j < 0:
            continue
        perm[i] = j
        if j < m:
            perm[j] = i
        _take(flags, tree, i)
        _take(flags, tree, j)
    return perm


PARTNERS = ("uniform", "nearest_free")


def rank_swap_permutation(n: int, p: float, uniforms: np.ndarray, partner: str = "uniform") -> np.ndarray:
    """Return perm (int64, n) in rank space: the value at sorted position i takes the value at perm[i].

    statistical_databases_survey.txt, Data swapping and rank swapping; sdc_methods_comparison_chapter.txt
    sec. 2 (Rank swapping, Moore 1996). With P = floor(n p / 100) (identity when P == 0), ranks
    i = 0..n-1 are visited in order and an unswapped rank i swaps with an unswapped rank j in i+1..i+P drawn
    with u_i; if none is free, i stays fixed. ``partner="uniform"``: j is the (floor(F u_i) + 1)-th of the F
    free ranks there. ``partner="nearest_free"`` (mu-Argus): i aims at k = i + 1 + floor(P u_i), takes
    j = min(k, n-1) if unswapped, else the nearest unswapped rank walking left down to i+1, else walking
    right up to min(n-1, i+P). perm is an involution of disjoint transpositions and fixed points with
    |perm[i] - i| <= P.
    """
    if partner not in PARTNERS:
        raise ValueError(f"partner must be one of {', '.join(PARTNERS)}, got {partner!r}")
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
    return _window_partners(partner, int(n), int(n), int(n), max_dist, u, np.zeros(0, dtype=np.int64))


def _window_partners(partner: str, m: int, w: int, n: int, max_dist: int, u: np.ndarray,
                     taken: np.ndarray) -> np.ndarray:
    """The partner rule's partners of the first ``m`` ranks of a window of ``w`` ranks (:func:`_partners`)."""
    return _partners(m, w, n, max_dist, u, taken, partner == "nearest_free")


def rank_swap_column(values: np.ndarray, tiebreak: np.ndarray, p: float, rng: np.random.Generator,
                     partner: str = "uniform") -> np.ndarray:
    """Return the rank-swapped column in the original row order (a permutation of ``values``).

    statistical_databases_survey.txt, Data swapping and rank swapping; sdc_methods_comparison_chapter.txt
    sec. 2 (Rank swapping, Moore 1996). Values are ranked stably by (value, tiebreak), ``rng.random(n)``
    supplies the uniforms of :func:`rank_swap_permutation` (``partner`` as there), and each value moves at most
    floor(n p / 100) ranks. Raises ValueError naming ``p`` when p is outside (0, 100] and naming the
    first row holding a non-finite value.
    """
    _check_percent(p)
    vals, ties = column_with_tiebreak(values, tiebreak)
    order = value_order(vals, ties)
    perm = rank_swap_permutation(vals.shape[0], p, rng.random(vals.shape[0]), partner)
    out = np.empty_like(vals)
    out[order] = vals[order][perm]
    return out


@dataclass(frozen=True)
class SwapCarry:
    """What a chunk of ranks leaves to the ranks after it: each rank beyond the chunk that a rank of the chunk
    (or before it) took, with the value and the record position of the rank that took it. At most P entries."""

    ranks: np.ndarray
    values: np.ndarray
    positions: np.ndarray


NO_CARRY = SwapCarry(np.zeros(0, np.int64), np.zeros(0, np.float64), np.zeros(0, np.int64))


def rank_swap_chunk(values: np.ndarray, positions: np.ndarray, first: int, n: int, p: float,
                    rng: np.random.Generator, carry: SwapCarry | None = None,
                    partner: str = "uniform") -> tuple[np.ndarray, np.ndarray, SwapCarry]:
    """Rank swapping of the ranks first..first+m-1 of a scope of n values, the same as over the whole scope:
    returns (record positions, their masked values, the carry to the next chunk).

    statistical_databases_survey.txt, Data swapping and rank swapping; the visit of :func:`rank_swap_permutation`
    cut into consecutive chunks. ``values`` and ``positions`` are the chunk's values in rank order and their
    records' positions; ``rng`` is the scope's stream from its start (rank i draws its i-th double, so the
    stream is advanced by ``first``); ``carry`` is what the chunk before returned (None for the first). A rank
    whose partner lies beyond the chunk waits in the carry, and both records of that pair are emitted with
    the chunk holding the partner; every record is emitted exactly once over the chunks. The state is the
    window of the next P ranks (P = floor(n p / 100)), never the scope."""
    m = len(values)
    carry = NO_CARRY if carry is None else carry
    max_dist = max_rank_distance(int(n), p)
    if max_dist == 0:
        return np.asarray(positions, np.int64), np.asarray(values, np.float64), NO_CARRY
    rng.bit_generator.advance(int(first))
    perm = _window_partners(partner, m, min(int(n - first), m + max_dist), int(n - first), max_dist, rng.random(m),
                            carry.ranks - first)
    inside = (perm >= 0) & (perm < m)
    later = perm >= m
    resolved = carry.ranks < first + m
    taken = carry.ranks[resolved] - first
    out_pos = np.concatenate([positions[inside], positions[taken], carry.positions[resolved]])
    out_val = np.concatenate([values[perm[inside]], carry.values[resolved], values[taken]])
    left = SwapCarry(np.concatenate([carry.ranks[~resolved], first + perm[later]]),
                     np.concatenate([carry.values[~resolved], values[later]]),
                     np.concatenate([carry.positions[~resolved], positions[later]]))
    return out_pos.astype(np.int64), out_val.astype(np.float64), left
