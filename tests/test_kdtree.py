"""The compiled k-d tree: exact nearest records and capped radius counts against brute force."""

from __future__ import annotations

import numpy as np
import pytest

from sdc_tasks.kdtree import capped_counts, kd_tree, nearest_records
from sdc_tasks.metrics.risk import TIE_RTOL, exact_distances, search_radius


def brute_counts(points: np.ndarray, queries: np.ndarray, d_own: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """All-pairs strictly-nearer and tied counts (the docs/metrics.md tie tolerance)."""
    d = exact_distances(points[None, :, :], queries[:, None, :])
    tol = TIE_RTOL * d_own[:, None]
    return (d < d_own[:, None] - tol).sum(axis=1), (np.abs(d - d_own[:, None]) <= tol).sum(axis=1)


@pytest.mark.parametrize("dims", [1, 2, 5])
def test_capped_counts_equal_brute_force_below_the_cap_and_reach_it_otherwise(dims):
    rng = np.random.default_rng(dims)
    lattice = rng.integers(0, 6, size=(3000, dims)).astype(float)  # duplicates and exact ties everywhere
    queries = lattice[:400] + rng.integers(-1, 2, size=(400, dims))
    d_own = exact_distances(queries, lattice[:400])
    closer, tied = capped_counts(kd_tree(lattice, leaf_size=8), queries, d_own, search_radius(d_own), TIE_RTOL, 2)
    want_closer, want_tied = brute_counts(lattice, queries, d_own)
    below = want_closer < 2
    assert np.array_equal(closer[below], want_closer[below])
    assert np.array_equal(tied[below], want_tied[below])
    assert np.all(closer[~below] == 2)
    assert below.any() and (~below).any()


def test_capped_counts_on_identical_points_and_zero_radius():
    points = np.zeros((100, 3))
    q = np.zeros((2, 3))
    closer, tied = capped_counts(kd_tree(points), q, np.zeros(2), search_radius(np.zeros(2)), TIE_RTOL, 2)
    assert closer.tolist() == [0, 0] and tied.tolist() == [100, 100]


def test_nearest_records_match_brute_force_with_lowest_index_on_ties():
    rng = np.random.default_rng(7)
    points = rng.integers(0, 4, size=(500, 2)).astype(float)
    queries = rng.uniform(-1, 5, size=(200, 2))
    d = exact_distances(points[None, :, :], queries[:, None, :])
    assert np.array_equal(nearest_records(kd_tree(points), queries), d.argmin(axis=1))


def test_the_tree_is_the_same_for_the_same_points():
    points = np.random.default_rng(3).normal(size=(2000, 4))
    a, b = kd_tree(points), kd_tree(points.copy())
    assert all(np.array_equal(x, y) for x, y in zip(a.__dict__.values(), b.__dict__.values()))
    assert a.n == 2000 and np.array_equal(np.sort(a.perm), np.arange(2000))
