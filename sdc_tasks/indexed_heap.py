"""An indexed binary max-heap of rows by key, for compiled (numba) code: the row with the largest key on top, the
lowest row among equal keys (the tie rule of a scan in row order), any row's key changed or the row removed in
O(log n).

Williams 1964, "Algorithm 232: Heapsort" (the binary heap; docs/references.md); the position of each row kept
beside the heap is what lets a row's key change in place.
"""

from __future__ import annotations

import numba


@numba.njit(cache=True, nogil=True)
def _before(keys, a, b):
    """Whether row ``a`` belongs above row ``b``: a larger key, or an equal key and a lower row."""
    return keys[a] > keys[b] or (keys[a] == keys[b] and a < b)


@numba.njit(cache=True, nogil=True)
def _sift_up(order, where, keys, pos):
    """Move the row at heap position ``pos`` up until its parent belongs above it."""
    row = order[pos]
    while pos > 0:
        up = (pos - 1) // 2
        if not _before(keys, row, order[up]):
            break
        order[pos] = order[up]
        where[order[pos]] = pos
        pos = up
    order[pos] = row
    where[row] = pos


@numba.njit(cache=True, nogil=True)
def _sift_down(order, where, keys, pos, size):
    """Move the row at heap position ``pos`` down until no child of the first ``size`` positions belongs above
    it."""
    row = order[pos]
    while True:
        child = 2 * pos + 1
        if child >= size:
            break
        if child + 1 < size and _before(keys, order[child + 1], order[child]):
            child += 1
        if not _before(keys, order[child], row):
            break
        order[pos] = order[child]
        where[order[pos]] = pos
        pos = child
    order[pos] = row
    where[row] = pos


@numba.njit(cache=True, nogil=True)
def heap_fill(order, where, keys, rows, size):
    """Make ``order[:size]`` the heap of ``rows[:size]`` by ``keys``, ``where`` the position of each row (-1 for a
    row not in the heap: ``where`` must be -1 for every row not in ``rows[:size]``)."""
    for pos in range(size):
        order[pos] = rows[pos]
        where[rows[pos]] = pos
    for pos in range(size // 2 - 1, -1, -1):
        _sift_down(order, where, keys, pos, size)


@numba.njit(cache=True, nogil=True)
def heap_rekey(order, where, keys, row, size):
    """Restore the heap of ``size`` rows after ``keys[row]`` changed."""
    _sift_up(order, where, keys, where[row])
    _sift_down(order, where, keys, where[row], size)


@numba.njit(cache=True, nogil=True)
def heap_remove(order, where, keys, row, size):
    """Remove ``row`` from the heap of ``size`` rows; returns the new size."""
    pos = where[row]
    where[row] = -1
    size -= 1
    if pos < size:
        moved = order[size]
        order[pos] = moved
        where[moved] = pos
        heap_rekey(order, where, keys, moved, size)
    return size
