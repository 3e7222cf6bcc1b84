"""The k-d tree over a shrinking set of points against brute force: after any removals, the bound on the farthest
remaining point from a vector and the nearest remaining points to a point, ties to the lowest index, with boxes in
the points' coordinates, in a rotation of them, and with the squared norms as one more coordinate."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sdc_tasks.kdtree import squared_distance
from sdc_tasks.remaining_tree import (
    far_bound,
    nearest_points,
    norm_bound,
    reach_bound,
    remaining_tree,
    remove_point,
    with_squared_norms,
)


def _brute_order(d: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Rows in (distance, index) order."""
    return rows[np.lexsort((rows, d))]


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 300), p=st.integers(1, 5), tied=st.booleans(),
       removed=st.floats(0.0, 0.95), kk=st.integers(1, 6), leaf=st.sampled_from([1, 4, 16]), rotated=st.booleans(),
       normed=st.booleans())
def test_searches_match_brute_force_after_removals(seed, n, p, tied, removed, kk, leaf, rotated, normed):
    rng = np.random.default_rng(seed)
    z = rng.integers(0, 3, size=(n, p)).astype(float) if tied else rng.standard_normal((n, p))
    # boxes in rotated coordinates (as MD builds them), with the squared norms or not; distances still those of z
    rotation = np.linalg.qr(rng.standard_normal((p, p)))[0] if rotated else np.eye(p)
    coords = np.ascontiguousarray(z @ rotation)
    boxes = with_squared_norms(coords) if normed else coords
    slack = 1e-9 * (1.0 + float((z * z).sum(axis=1).max())) if rotated or normed else 0.0
    perm, start, stop, left, right, parent, leaf_of, alive, count, lo, hi = remaining_tree(boxes, leaf)
    for i in rng.permutation(n)[: int(removed * (n - 1))]:
        remove_point(i, boxes, perm, start, stop, left, right, parent, leaf_of, alive, count, lo, hi)
    rows = np.flatnonzero(alive)
    assert count[0] == len(rows)
    q = rng.standard_normal(p) if not tied else rng.integers(0, 3, size=p).astype(float)
    d = np.array([squared_distance(q, z, i) for i in rows])
    assert reach_bound(q @ rotation, lo, hi, np.int64(0), slack) >= d.max()  # the root's box holds every one left
    c = rows[rng.integers(len(rows))]
    others = rows[rows != c]
    want = _brute_order(((z[others] - z[c]) ** 2).sum(axis=1), others)[:kk]
    out = np.empty(kk, dtype=np.int64)
    got = nearest_points(c, kk, out, z, coords, slack, perm, start, stop, left, right, alive, count, lo, hi)
    assert got == len(want)
    np.testing.assert_array_equal(out[:got], want)


def test_removing_every_point_empties_the_tree():
    z = np.arange(40, dtype=float).reshape(20, 2)
    perm, start, stop, left, right, parent, leaf_of, alive, count, lo, hi = remaining_tree(z, 4)
    for i in range(19):
        remove_point(i, z, perm, start, stop, left, right, parent, leaf_of, alive, count, lo, hi)
    np.testing.assert_array_equal(lo[0], z[19])  # the root's box shrank to the one point left
    np.testing.assert_array_equal(hi[0], z[19])
    out = np.empty(1, dtype=np.int64)
    assert nearest_points(19, 1, out, z, z, 0.0, perm, start, stop, left, right, alive, count, lo, hi) == 0
    remove_point(19, z, perm, start, stop, left, right, parent, leaf_of, alive, count, lo, hi)
    assert count[0] == 0 and not alive.any()


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 200), p=st.integers(1, 13), removed=st.floats(0.0, 0.95))
def test_norm_bound_holds_every_remaining_point(seed, n, p, removed):
    """In every node after removals, norm_bound is at least each remaining point's squared distance (summed as the
    searches sum it) up to a rounding far below MD's slack, as the box's farthest corner is without any."""
    rng = np.random.default_rng(seed)
    points = rng.standard_normal((n, p)) * rng.uniform(0.1, 10.0, size=p)
    boxes = with_squared_norms(points)
    perm, start, stop, left, right, parent, leaf_of, alive, count, lo, hi = remaining_tree(boxes, 4)
    for i in rng.permutation(n)[: int(removed * n)]:
        remove_point(i, boxes, perm, start, stop, left, right, parent, leaf_of, alive, count, lo, hi)
    q = rng.standard_normal(p) * 3
    tolerance = 1e-12 * (1.0 + float((points * points).sum(axis=1).max()) + float(q @ q))
    for node in np.flatnonzero(count[: len(left)] > 0):
        members = [i for i in perm[start[node]:stop[node]] if alive[i]]
        farthest = max(squared_distance(q, points, i) for i in members)
        assert norm_bound(q, lo, hi, node) >= farthest - tolerance
        assert far_bound(q, lo, hi, node) >= farthest
