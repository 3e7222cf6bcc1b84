"""Order statistics of a sorted column: the values at given 0-based positions, how many values lie below given
thresholds, and numpy's default quantiles computed from them.

A column is anything with ``n``, ``at(positions)`` and ``count_below(thresholds, side)``: a sorted numpy array
held in memory (:class:`SortedValues`) or a column sorted across the partitions of a Dask frame
(:class:`sdc_tasks.evaluation.global_order.SortedColumn`), so one kernel serves both and gives the same bits.
"""

from __future__ import annotations

import numba
import numpy as np


class SortedValues:
    """A sorted column held in memory."""

    def __init__(self, values: np.ndarray) -> None:
        """``values``: sorted ascending (not re-sorted)."""
        self.values = np.asarray(values, dtype=np.float64).reshape(-1)

    @property
    def n(self) -> int:
        """Number of values."""
        return int(self.values.size)

    def at(self, positions: np.ndarray) -> np.ndarray:
        """The values at the given 0-based positions of the sorted column."""
        return self.values[np.asarray(positions, dtype=np.int64)]

    def count_below(self, thresholds: np.ndarray, side: str) -> np.ndarray:
        """For each threshold t, how many values are < t (``side="left"``) or <= t (``side="right"``)."""
        return np.searchsorted(self.values, thresholds, side=side)


LARGE_ORDER = 2**12
"""Columns of at least this many values are put in order of value by :func:`_radix_order` (float64 values) and,
with integer tiebreaks, have their short tied runs ordered by :func:`_short_runs_ordered`; below it numpy's
argsort and a lexsort of the tied rows take well under a millisecond and spare a small run numba's start (about
0.3 s the first time a process calls compiled code). On a partition of 250,000 values, best of seven:
continuous 18.6 -> 8.6 ms, MDAV-like groups of three 92.8 -> 12.8 ms, 60 % zeros 47.1 -> 20.2 ms (the threshold
was 2**20 before; docs/performance.md)."""
RADIX_BITS = 8
"""The width of :func:`_radix_order`'s digits: eight passes at most over 256 buckets each."""


def value_order(values: np.ndarray, tiebreak: np.ndarray) -> np.ndarray:
    """The row indices sorted by (value, tiebreak), rows equal in both kept in row order: exactly
    ``np.lexsort((tiebreak, values))``, quicker: the rows in order of value, then only the runs of tied values put
    in (tiebreak, row) order (NaNs tie with each other and sort last, as in lexsort). From LARGE_ORDER values
    with integer tiebreaks the short runs are ordered in place in one compiled pass and only the long ones
    lexsorted (a lexsort of every tied row took 4 s for 1e7 values here, where MDAV's groups of three tie nearly
    all of them); large float64 columns are put in order of value by a radix sort (:func:`_radix_order`, about
    three times as quick as numpy's argsort on 1e7 values), which changes nothing after the tied runs are ordered."""
    values, tiebreak = np.asarray(values).reshape(-1), np.asarray(tiebreak).reshape(-1)
    if values.size >= LARGE_ORDER and values.dtype == np.float64:
        order = _radix_order(np.ascontiguousarray(values))
    else:
        order = np.argsort(values)
    ranked = values[order]
    same = _same(ranked[1:], ranked[:-1])
    if not same.any():
        return order
    if values.size >= LARGE_ORDER and tiebreak.dtype.kind in "iub" and tiebreak.dtype != np.uint64:
        bounds = _short_runs_ordered(order, same, tiebreak.astype(np.int64, copy=False))
        starts, ends = bounds[0::2], bounds[1::2]
        lengths = ends - starts
        at = np.repeat(ends - np.cumsum(lengths), lengths) + np.arange(lengths.sum())
        run = np.repeat(np.arange(starts.size), lengths)
    else:
        tied = np.zeros(ranked.size, dtype=bool)
        tied[1:] |= same
        tied[:-1] |= same
        at = np.flatnonzero(tied)
        run = ranked[at]
    rows = order[at]
    order[at] = rows[np.lexsort((rows, tiebreak[rows], run))]
    return order


@numba.njit(cache=True, nogil=True)
def _radix_order(values: np.ndarray) -> np.ndarray:
    """The row indices of the float64 ``values`` in ascending order of value, rows of equal values (NaNs with each
    other, -0.0 with 0.0) in row order: ``np.argsort(values, kind="stable")``, by a least-significant-digit radix
    sort. Each value becomes an unsigned key in the same order (-0.0 taken as 0.0 and every NaN as one NaN, last;
    the sign bit set for non-negative values, every bit flipped for negative ones), the keys are scattered stably
    by their RADIX_BITS-bit digits from the lowest up, and a digit every key shares is skipped."""
    n = values.shape[0]
    top = np.uint64(1) << np.uint64(63)
    bits = values.view(np.uint64)
    keys = np.empty(n, np.uint64)
    for i in range(n):
        u = bits[i]
        if values[i] != values[i]:
            u = np.uint64(0x7FF8000000000000)
        elif u == top:
            u = np.uint64(0)
        keys[i] = ~u if u & top else u | top
    digits = (64 + RADIX_BITS - 1) // RADIX_BITS
    buckets = 1 << RADIX_BITS
    mask = np.uint64(buckets - 1)
    counts = np.zeros((digits, buckets), np.int64)
    for i in range(n):
        for d in range(digits):
            counts[d, (keys[i] >> np.uint64(d * RADIX_BITS)) & mask] += 1
    order = np.arange(n)
    keys_to, order_to = np.empty_like(keys), np.empty_like(order)
    starts = np.empty(buckets, np.int64)
    for d in range(digits):
        if counts[d].max() == n:
            continue
        total = 0
        for b in range(buckets):
            starts[b] = total
            total += counts[d, b]
        shift = np.uint64(d * RADIX_BITS)
        for i in range(n):
            b = (keys[i] >> shift) & mask
            keys_to[starts[b]], order_to[starts[b]] = keys[i], order[i]
            starts[b] += 1
        keys, keys_to, order, order_to = keys_to, keys, order_to, order
    return order


RUN_INSERTION = 64
"""Runs of tied values up to this length are ordered in place by :func:`_short_runs_ordered`; the longer ones
(many records sharing one value) by a lexsort of them all together."""


@numba.njit(cache=True, nogil=True)
def _short_runs_ordered(order: np.ndarray, same: np.ndarray, tiebreak: np.ndarray) -> np.ndarray:
    """Put each run of at most RUN_INSERTION tied values of ``order`` (``same[i]``: position i + 1 ties with
    position i) in (tiebreak, row) order in place, by insertion; return the start and end positions of the
    longer runs, one after the other (:func:`value_order` for integer tiebreaks). No slice assignment: numba took
    4.5 s more to compile one here."""
    bounds = np.empty(16, dtype=np.int64)
    found = 0
    i = 0
    while i < order.shape[0] - 1:
        if not same[i]:
            i += 1
            continue
        end = i + 1
        while end < order.shape[0] - 1 and same[end]:
            end += 1
        if end + 1 - i > RUN_INSERTION:
            if found + 2 > bounds.shape[0]:
                bounds = np.concatenate((bounds, np.empty_like(bounds)))
            bounds[found], bounds[found + 1] = i, end + 1
            found += 2
        else:
            for a in range(i + 1, end + 1):
                row, key = order[a], tiebreak[order[a]]
                b = a - 1
                while b >= i and (tiebreak[order[b]] > key or (tiebreak[order[b]] == key and order[b] > row)):
                    order[b + 1] = order[b]
                    b -= 1
                order[b + 1] = row
        i = end + 1
    return bounds[:found]


def counts_at_or_below(bounds: list[np.ndarray], keys: list[np.ndarray]) -> np.ndarray:
    """For each key (the tuple of ``keys[l][i]`` over the levels l), how many of the bounds (tuples of
    ``bounds[l][b]``, in lexicographic order) are at or below it in that order: the number of an exact sort's
    output partition that holds the key, the bounds being its splitters. Levels compare as ``np.searchsorted``
    does (NaN equal to NaN and above every number, -0.0 equal to 0.0; text by Python's order). Each level is one
    binary search of the keys still tied with a run of bounds, within that run; a key tied with a single bound
    is compared with it on the remaining levels (the rank fold's keys of a partition of 250,000 sorted with the
    bounds took 11-60 ms)."""
    out = np.zeros(len(keys[0]), np.int64)
    pending = [(np.arange(len(keys[0])), 0, len(bounds[0]), 0)]
    while pending:
        rows, start, stop, level = pending.pop()
        run, wanted = bounds[level][start:stop], keys[level][rows]
        if level == len(bounds) - 1 or not run.size:
            out[rows] = start + np.searchsorted(run, wanted, side="right")
            continue
        below = np.searchsorted(run, wanted, side="left")
        out[rows] = start + below
        tied = np.flatnonzero((below < run.size) & _same(run[np.minimum(below, run.size - 1)], wanted))
        heads = below[tied]
        single = np.searchsorted(run, run[heads], side="right") - heads == 1
        one = rows[tied[single]]
        out[one] += _at_or_below([b[start + heads[single]] for b in bounds[level + 1:]],
                                 [k[one] for k in keys[level + 1:]])
        by_run = tied[~single][np.argsort(heads[~single], kind="stable")]
        starts = below[by_run]
        cuts = np.flatnonzero(np.r_[True, starts[1:] != starts[:-1]]) if by_run.size else by_run
        for head, group in zip(starts[cuts], np.split(by_run, cuts[1:])):
            end = head + np.searchsorted(run[head:], run[head:head + 1], side="right")[0]
            pending.append((rows[group], start + head, start + end, level + 1))
    return out


def _same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise equality as ``np.searchsorted`` and ``np.lexsort`` rank values: NaN equal to NaN."""
    equal = a == b
    if a.dtype.kind in "fc" and b.dtype.kind in "fc":
        equal |= np.isnan(a) & np.isnan(b)
    return equal


def _at_or_below(bounds: list[np.ndarray], keys: list[np.ndarray]) -> np.ndarray:
    """Elementwise, whether each bound (a tuple over the levels) is at or below its key in lexicographic order,
    the levels compared as :func:`counts_at_or_below` does (at least one level)."""
    below, decided = np.ones(len(keys[0]), bool), np.zeros(len(keys[0]), bool)
    for bound, key in zip(bounds, keys):
        less, more = bound < key, bound > key
        if bound.dtype.kind == "f" and key.dtype.kind == "f":
            less |= np.isnan(key) & ~np.isnan(bound)
            more |= np.isnan(bound) & ~np.isnan(key)
        below &= decided | ~more
        decided |= less | more
    return below


def ordered(column):
    """``column`` itself when it is a sorted column object, else a sorted numpy array as a :class:`SortedValues`."""
    return column if hasattr(column, "count_below") else SortedValues(column)


def linear_quantiles(column, qs: np.ndarray) -> np.ndarray:
    """``np.quantile(values, qs)`` (method 'linear', Hyndman and Fan 1996 type 7) of a non-empty sorted column from
    two order statistics per q, with numpy's own steps (numpy/lib/_function_base_impl.py ``_quantile``,
    ``_get_indexes``, ``_lerp``), so the result is numpy's bit for bit: virtual position v = (n - 1) q, the values
    a, b at floor(v) and floor(v) + 1 (both the last value where v >= n - 1), g = v - floor(v), and a + (b - a) g,
    or b - (b - a) (1 - g) where g >= 0.5."""
    q = np.asarray(qs, dtype=np.float64).reshape(-1)
    n = column.n
    virtual = (n - 1) * q
    previous = np.floor(virtual)
    gamma = virtual - previous
    lower = previous.astype(np.int64)
    upper = lower + 1
    top = virtual >= n - 1
    lower[top], upper[top] = n - 1, n - 1
    bottom = virtual < 0
    lower[bottom], upper[bottom] = 0, 0
    values = column.at(np.concatenate([lower, upper]))
    a, b = values[: q.size], values[q.size:]
    diff = b - a
    return np.where(gamma >= 0.5, b - diff * (1 - gamma), a + diff * gamma)
