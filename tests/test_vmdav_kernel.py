"""V-MDAV block kernels: hand-worked cases, a slow reference of the documented steps, properties.

Reference: Solanas and Martinez-Balleste (2006) V-MDAV as documented in sdc_tasks.masking.vmdav.vmdav_groups;
statistical_databases_survey.txt, Microaggregation (SSE, MDAV).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sdc_tasks.masking.mdav import mdav_groups
from sdc_tasks.masking.microaggregation import group_means, sse
from sdc_tasks.masking.vmdav import variable_microaggregate_block, vmdav_groups


def reference_vmdav(z: np.ndarray, k: int, gamma: float) -> np.ndarray:
    """The documented V-MDAV steps written plainly with lists; ties to the lowest row index / label."""
    z = np.asarray(z, dtype=np.float64).reshape(len(z), -1)
    n = len(z)
    labels = np.full(n, -1, dtype=np.int64)

    def sq(a, b) -> float:
        return float(((z[a] - z[b]) ** 2).sum())

    def to_point(i, c) -> float:
        return float(((z[i] - c) ** 2).sum())

    c = z.mean(axis=0)
    unassigned = list(range(n))
    g = 0
    while len(unassigned) >= 2 * k:
        r = max(unassigned, key=lambda i: (to_point(i, c), -i))
        group = [r] + sorted((i for i in unassigned if i != r), key=lambda i: (sq(i, r), i))[: k - 1]
        for i in group:
            unassigned.remove(i)
        while len(group) < 2 * k - 1 and unassigned:
            e = min(unassigned, key=lambda i: (min(sq(i, q) for q in group), i))
            d_in = min(sq(e, q) for q in group)
            d_out = min((sq(e, i) for i in unassigned if i != e), default=np.inf)
            if not d_in < gamma * gamma * d_out:
                break
            group.append(e)
            unassigned.remove(e)
        labels[group] = g
        g += 1
    if len(unassigned) >= k:
        labels[unassigned] = g
        g += 1
        unassigned = []
    for row in unassigned:
        h = min(range(g), key=lambda h: (to_point(row, z[labels == h].mean(axis=0)), h))
        labels[row] = h
        members = np.flatnonzero(labels == h)
        if len(members) == 2 * k:
            cen = z[members].mean(axis=0)
            far = max(members, key=lambda i: (to_point(i, cen), -i))
            near = sorted((i for i in members if i != far), key=lambda i: (sq(i, far), i))[: k - 1]
            labels[members] = g
            labels[[far, *near]] = h
            g += 1
    return labels


def grid_clusters(seed: int, size: int, side: int = 4, p: int = 2) -> np.ndarray:
    """side*side clusters of ``size`` points, centres 100 apart on a grid, points within 1 of the centre."""
    rng = np.random.default_rng(seed)
    grid = np.stack(np.meshgrid(np.arange(side), np.arange(side)), axis=-1).reshape(-1, 2) * 100.0
    centres = np.column_stack([grid, np.zeros((len(grid), p - 2))])
    return (centres[:, None, :] + rng.uniform(-1, 1, size=(len(grid), size, p))).reshape(-1, p)


def test_three_clusters_by_hand():
    # Rows 0-3: 0 1 2 3; rows 4-6: 100 101 102; rows 7-9: 200 201 202; k = 3, gamma = 0.2.
    # Centroid 912/10 = 91.2. Farthest: row 9 (202, 110.8) -> group 0 = {202, 201, 200}.
    #   Extension: e_min = 102 (d_in 98), d_out = 1 (to 101): 98 < 0.2 fails -> stop.
    # 7 left >= 2k: farthest from 91.2 is row 0 (91.2) -> group 1 = {0, 1, 2}.
    #   Extension: e_min = 3 (d_in 1), d_out = 97 (to 100): 1 < 19.4 -> row 3 joins;
    #   next e_min = 100 (d_in 97), d_out 1 -> stop.
    # 3 left (k..2k-1): group 2 = {100, 101, 102}.
    z = np.array([0, 1, 2, 3, 100, 101, 102, 200, 201, 202], dtype=float)
    np.testing.assert_array_equal(vmdav_groups(z, 3), [1, 1, 1, 1, 2, 2, 2, 0, 0, 0])
    # MDAV (fixed size) cuts the cluster {0..3}: {202..200}, {0, 1, 2}, {3, 100, 101, 102}.
    np.testing.assert_array_equal(mdav_groups(z, 3), [1, 1, 1, 2, 2, 2, 2, 0, 0, 0])
    # SSE: V-MDAV 5 + 2 + 2 = 9; MDAV 2 + 2 + (3, 100, 101, 102: mean 76.5 -> 5402.25+552.25+600.25+650.25) = 7209
    assert sse(z, vmdav_groups(z, 3)) == pytest.approx(9.0)
    assert sse(z, mdav_groups(z, 3)) == pytest.approx(7209.0)


def test_leftover_split_keeps_sizes_within_bounds():
    # Rows 0, 1, 5, 50; k = 2, gamma = 5. Centroid 14: farthest row 3 (50); nearest 5 -> group {50, 5}.
    # Extension: e_min = 1 (d_in 4 to 5), d_out = 1 (to 0): 4 < 5 -> joins; size 3 = 2k-1 stops.
    # Row 0 is left over (1 < k), joins the only group -> 4 = 2k records -> split: centroid 14, farthest 50,
    # with its closest member 5 keeps label 0; {0, 1} take label 1.
    z = np.array([0.0, 1.0, 5.0, 50.0])
    np.testing.assert_array_equal(vmdav_groups(z, 2, gamma=5.0), [1, 1, 0, 0])


def test_gamma_zero_never_extends_and_k_one_gives_singletons():
    z = np.random.default_rng(4).standard_normal((47, 3))
    sizes = np.bincount(vmdav_groups(z, 4, gamma=0.0))
    assert (sizes[:-1] == 4).all() and 4 <= sizes[-1] <= 7
    np.testing.assert_array_equal(np.sort(vmdav_groups(z, 1, gamma=3.0)), np.arange(47))


def test_checks():
    assert vmdav_groups(np.empty((0, 2)), 3).shape == (0,)
    for bad in (0, 2.5, True):
        with pytest.raises(ValueError, match="k"):
            vmdav_groups(np.zeros((5, 2)), bad)
    with pytest.raises(ValueError, match=r"k=4.*n=3"):
        vmdav_groups(np.zeros((3, 2)), 4)
    for bad in (-0.1, np.nan, np.inf, True):
        with pytest.raises(ValueError, match="gamma"):
            vmdav_groups(np.zeros((5, 2)), 2, bad)
    z = np.zeros((6, 2))
    z[3, 0] = np.nan
    with pytest.raises(ValueError, match="row 3"):
        vmdav_groups(z, 2)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(1, 5), extra=st.integers(0, 50), p=st.integers(1, 3),
       gamma=st.sampled_from([0.0, 0.2, 0.7, 1.1, 5.0]))
def test_matches_reference_on_tied_integer_data(seed, k, extra, p, gamma):
    z = np.random.default_rng(seed).integers(0, 5, size=(k + extra, p)).astype(float)
    np.testing.assert_array_equal(vmdav_groups(z, k, gamma), reference_vmdav(z, k, gamma))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(2, 4), size=st.integers(2, 7),
       gamma=st.sampled_from([0.2, 1.1, 5.0]))
def test_matches_reference_on_clustered_data(seed, k, size, gamma):
    z = grid_clusters(seed, size, side=3)
    np.testing.assert_array_equal(vmdav_groups(z, k, gamma), reference_vmdav(z, k, gamma))


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(1, 6), extra=st.integers(0, 150), p=st.integers(1, 4),
       gamma=st.sampled_from([0.0, 0.2, 1.1, 5.0, 100.0]), clustered=st.booleans())
def test_group_sizes_within_k_and_2k_minus_1(seed, k, extra, p, gamma, clustered):
    rng = np.random.default_rng(seed)
    n = k + extra
    z = rng.standard_normal((n, p)) + (10.0 * rng.integers(0, 4, size=(n, 1)) if clustered else 0.0)
    labels = vmdav_groups(z, k, gamma)
    sizes = np.bincount(labels)
    assert sizes.sum() == n and (sizes >= k).all() and (sizes <= 2 * k - 1).all()


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_clustered_sse_below_mdav(seed):
    # 16 clusters of 5 points, k = 3: MDAV's fixed groups of 3 must mix clusters; V-MDAV (default gamma)
    # extends groups inside a cluster.
    z = grid_clusters(seed, 5)
    assert sse(z, vmdav_groups(z, 3)) < sse(z, mdav_groups(z, 3))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_clusters_of_k_plus_one_recovered_exactly(seed):
    # Clusters of 4, k = 3: the group around a cluster's outer point takes its 4th point (d_in <= 2*sqrt2,
    # d_out >= 100 - 2*sqrt2) and stops (the next candidate is ~100 away, its cluster mates within 2*sqrt2).
    z = grid_clusters(seed, 4)
    labels = vmdav_groups(z, 3)
    truth = np.repeat(np.arange(16), 4)
    assert len(np.unique(labels)) == 16
    for h in range(16):
        assert len(np.unique(truth[labels == h])) == 1


def test_deterministic():
    z = np.random.default_rng(7).standard_normal((400, 4))
    np.testing.assert_array_equal(vmdav_groups(z, 3, 1.1), vmdav_groups(z.copy(), 3, 1.1))


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(2, 6), group_size=st.sampled_from([None, 1, 2, 3]),
       gamma=st.sampled_from([0.2, 1.1]))
def test_block_preserves_column_means(seed, k, group_size, gamma):
    rng = np.random.default_rng(seed)
    x = rng.lognormal(3.0, 1.5, size=(int(rng.integers(k, 150)), 5))
    out = variable_microaggregate_block(x, k, x.mean(axis=0), x.std(axis=0), gamma, group_size)
    np.testing.assert_allclose(out.mean(axis=0), x.mean(axis=0), rtol=1e-9)


def test_block_uses_given_standardization_and_attribute_groups():
    rng = np.random.default_rng(11)
    x = rng.normal(0.0, [1.0, 5.0, 20.0, 0.1, 3.0], size=(80, 5))
    center, scale = np.median(x, axis=0), x.std(axis=0)
    z = (x - center) / scale
    expected = np.empty_like(x)
    for cols in ([0, 1], [2, 3, 4]):
        expected[:, cols] = group_means(x[:, cols], vmdav_groups(z[:, cols], 4, 1.1))
    np.testing.assert_array_equal(variable_microaggregate_block(x, 4, center, scale, 1.1, group_size=2), expected)
