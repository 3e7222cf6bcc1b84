"""The remaining point farthest from a vector from the points listed by distance from a reference point
(sdc_tasks.radius_list): the answer of a scan of every point, ties to the lowest index."""

from __future__ import annotations

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from sdc_tasks.radius_list import listed_by_radius, listed_farthest


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**31), n=st.integers(1, 300), p=st.integers(1, 6), grid=st.booleans(),
       shift=st.floats(-50, 50))
def test_the_listed_search_finds_the_farthest_point_of_a_scan(seed, n, p, grid, shift):
    """Ties on a grid, removed points, a reference far from the vector asked about, the vector itself a point
    (skipped or not)."""
    rng = np.random.default_rng(seed)
    z = rng.integers(-3, 4, (n, p)).astype(float) if grid else rng.standard_normal((n, p)) * rng.uniform(0.1, 5, p)
    alive = rng.random(n) < 0.7
    assume(alive.any())
    ref = z[alive].mean(axis=0) + shift * rng.standard_normal(p) / 10
    radius, order = np.empty(n), np.empty(n, np.int64)
    listed = listed_by_radius(z, alive, ref, radius, order)
    assert sorted(order[:listed].tolist()) == np.flatnonzero(alive).tolist()
    last = int(np.flatnonzero(alive)[-1])
    for v, skip in ((z[alive].mean(axis=0), -1), (z[last], -1), (z[last], last), (ref + 3.0, -1)):
        d = np.full(n, -1.0)
        for i in np.flatnonzero(alive):  # summed left to right, as the kernels sum
            if i != skip:
                d[i] = sum(((v[j] - z[i, j]) ** 2 for j in range(p)), 0.0)
        head = np.zeros(1, np.int64)
        found, measured = listed_farthest(v, np.int64(skip), z, alive, ref, radius, order, listed, head)
        expected = int(np.flatnonzero(d == d.max())[0]) if d.max() >= 0 else -1
        assert found == expected and measured <= alive.sum()
