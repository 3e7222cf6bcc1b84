"""Univariate / projected microaggregation kernels: hand cases, brute-force optima, properties.

Reference: sdc_methods_comparison_chapter.txt sec. 2 (MicIR, MicZ, MicPCP); statistical_databases_survey.txt,
Microaggregation (SSE; optimal univariate microaggregation, Hansen and Mukherjee 2003).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sdc_tasks.masking.microaggregation import sse
from sdc_tasks.masking.univariate import (
    first_principal_axis,
    fixed_groups_sorted,
    individual_ranking,
    optimal_groups_sorted,
    optimal_univariate,
    projected_microaggregation,
    projection_scores,
)


def plain_sse(values, groups) -> float:
    """Sum over groups of squared deviations from the group mean, written out."""
    total = 0.0
    for grp in groups:
        vals = [values[i] for i in grp]
        mean = sum(vals) / len(vals)
        total += sum((v - mean) ** 2 for v in vals)
    return total


def brute_consecutive(values, k):
    """Least SSE over all splits of the sorted values into consecutive runs of k..2k-1 (enumerated)."""
    n = len(values)
    best = np.inf
    for cuts in range(n // k):
        for inner in itertools.combinations(range(1, n), cuts):
            bounds = (0, *inner, n)
            sizes = np.diff(bounds)
            if (sizes >= k).all() and (sizes <= 2 * k - 1).all():
                best = min(best, plain_sse(values, [range(a, b) for a, b in zip(bounds, bounds[1:])]))
    return best


def brute_any_partition(values, k):
    """Least SSE over every set partition with all groups of at least k records (restricted growth strings)."""
    n = len(values)
    best = np.inf

    def rec(i, assign, nblocks):
        nonlocal best
        if i == n:
            groups = [[j for j in range(n) if assign[j] == b] for b in range(nblocks)]
            if all(len(grp) >= k for grp in groups):
                best = min(best, plain_sse(values, groups))
            return
        for b in range(nblocks + 1):
            assign.append(b)
            rec(i + 1, assign, max(nblocks, b + 1))
            assign.pop()

    rec(0, [], 0)
    return best


# ---- fixed_groups_sorted ----


def test_fixed_groups_sizes_by_hand():
    np.testing.assert_array_equal(fixed_groups_sorted(7, 3), [0, 0, 0, 1, 1, 1, 1])  # 3 + 4
    np.testing.assert_array_equal(fixed_groups_sorted(6, 3), [0, 0, 0, 1, 1, 1])
    np.testing.assert_array_equal(fixed_groups_sorted(5, 3), [0, 0, 0, 0, 0])  # n < 2k: one group
    np.testing.assert_array_equal(fixed_groups_sorted(3, 1), [0, 1, 2])
    assert np.bincount(fixed_groups_sorted(29, 4)).tolist() == [4] * 6 + [5]  # 29 = 6*4 + 5
    assert fixed_groups_sorted(0, 3).shape == (0,)


def test_fixed_groups_bad_k():
    for bad in (0, -2, 1.5, True):
        with pytest.raises(ValueError, match="k"):
            fixed_groups_sorted(5, bad)
    with pytest.raises(ValueError, match=r"k=4.*n=3"):
        fixed_groups_sorted(3, 4)


# ---- optimal_groups_sorted ----


def test_optimal_by_hand():
    # k = 3. Fixed groups {0,1,2} {3,50,51,52}: SSE 2 + (36^2 + 11^2 + 12^2 + 13^2 = 1730) = 1732.
    # Optimal {0,1,2,3} (mean 1.5: 2.25+0.25+0.25+2.25 = 5) and {50,51,52} (2): SSE 7.
    v = np.array([0.0, 1.0, 2.0, 3.0, 50.0, 51.0, 52.0])
    labels = optimal_groups_sorted(v, 3)
    np.testing.assert_array_equal(labels, [0, 0, 0, 0, 1, 1, 1])
    assert sse(v, labels) == pytest.approx(7.0)
    assert sse(v, fixed_groups_sorted(7, 3)) == pytest.approx(1732.0)


def test_optimal_ties_prefer_the_smallest_last_group():
    # Equal values: every partition costs exactly 0. Five with k=2: 3+2 (last group 2, not 2+3).
    # Six with k=2: last group 2, then the prefix of 4 again ends with 2: 2+2+2 (not 3+3).
    np.testing.assert_array_equal(optimal_groups_sorted(np.full(5, 7.1), 2), [0, 0, 0, 1, 1])
    np.testing.assert_array_equal(optimal_groups_sorted(np.full(6, 7.1), 2), [0, 0, 1, 1, 2, 2])


def test_optimal_large_offset_same_partition():
    # Clusters {0,1,2,3}, {40,41,42}, {90,91,92,93,94}; shifted by 1e9 the partition must not change.
    v = np.array([0, 1, 2, 3, 40, 41, 42, 90, 91, 92, 93, 94], dtype=float)
    expected = [0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 2, 2]
    np.testing.assert_array_equal(optimal_groups_sorted(v, 3), expected)
    np.testing.assert_array_equal(optimal_groups_sorted(v + 1e9, 3), expected)
    np.testing.assert_array_equal(optimal_groups_sorted(v * 1e-3 + 1e12, 3), expected)


def test_optimal_input_checks():
    with pytest.raises(ValueError, match="sorted"):
        optimal_groups_sorted(np.array([1.0, 0.0, 2.0]), 1)
    with pytest.raises(ValueError, match="non-finite"):
        optimal_groups_sorted(np.array([0.0, np.nan, 2.0]), 1)
    with pytest.raises(ValueError, match=r"k=3.*n=2"):
        optimal_groups_sorted(np.array([0.0, 1.0]), 3)
    assert optimal_groups_sorted(np.empty(0), 2).shape == (0,)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(2, 4), extra=st.integers(0, 8), integers=st.booleans())
def test_optimal_equals_brute_force(seed, k, extra, integers):
    n = min(k + extra, 12)
    rng = np.random.default_rng(seed)
    v = np.sort(rng.integers(0, 6, n).astype(float) if integers else rng.lognormal(0.0, 1.5, n))
    labels = optimal_groups_sorted(v, k)
    sizes = np.bincount(labels)
    assert (np.diff(labels) >= 0).all() and (sizes >= k).all() and (sizes <= 2 * k - 1).all()
    got = sse(v, labels)
    assert got == pytest.approx(brute_consecutive(list(v), k), rel=1e-9, abs=1e-9)
    assert got <= sse(v, fixed_groups_sorted(n, k)) + 1e-9


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(2, 3), n=st.integers(2, 8))
def test_optimal_is_optimal_over_all_partitions(seed, k, n):
    # Hansen-Mukherjee: no partition (consecutive or not, any sizes >= k) beats the DP's.
    n = max(n, k)
    v = np.sort(np.random.default_rng(seed).normal(0.0, 3.0, n))
    assert sse(v, optimal_groups_sorted(v, k)) == pytest.approx(brute_any_partition(list(v), k), rel=1e-9, abs=1e-9)


# ---- MicIR and the optimal per-column variant ----


def test_individual_ranking_by_hand():
    # k = 2. Column 0: 1(r1) 2(r3) | 3(r2) 4(r4) 5(r0) -> means 1.5 and 4.
    # Column 1: 1(r0) 2(r1) | 3(r2) 5(r4) 40(r3) -> means 1.5 and 16.
    x = np.array([[5.0, 1.0], [1.0, 2.0], [3.0, 3.0], [2.0, 40.0], [4.0, 5.0]])
    out = individual_ranking(x, 2, np.arange(5))
    np.testing.assert_allclose(out, [[4, 1.5], [1.5, 1.5], [4, 16], [1.5, 16], [4, 16]])


def test_individual_ranking_tiebreak_decides_ties():
    # Values 5(r0) 0(r1) 5(r2) 10(r3), k = 2: sorted 0 | 5 5 | 10 -> groups {0, 5}, {5, 10} (means 2.5, 7.5);
    # which 5 joins the 0 is the one with the smaller tiebreak.
    x = np.array([5.0, 0.0, 5.0, 10.0])
    np.testing.assert_allclose(individual_ranking(x, 2, np.array([1, 0, 0, 2]))[:, 0], [7.5, 2.5, 2.5, 7.5])
    np.testing.assert_allclose(individual_ranking(x, 2, np.array([0, 0, 1, 2]))[:, 0], [2.5, 2.5, 7.5, 7.5])


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(1, 6), optimal=st.booleans())
def test_per_column_means_and_group_sizes(seed, k, optimal):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(k, 80))
    x = rng.lognormal(2.0, 1.0, size=(n, 3))
    f = optimal_univariate if optimal else individual_ranking
    out = f(x, k, rng.permutation(n))
    np.testing.assert_allclose(out.mean(axis=0), x.mean(axis=0), rtol=1e-9)
    for j in range(3):
        _, counts = np.unique(out[:, j], return_counts=True)
        assert (counts >= k).all()
        # grouping consecutive ranks never reorders a column: the output is weakly monotone in x
        order = np.argsort(x[:, j], kind="stable")
        assert (np.diff(out[order, j]) >= -1e-9 * np.abs(out[:, j]).max()).all()


def test_optimal_univariate_beats_individual_ranking():
    rng = np.random.default_rng(5)
    x = np.column_stack([rng.lognormal(0, 1, 101), rng.integers(0, 9, 101)])
    tb = np.arange(101)
    a, b = optimal_univariate(x, 4, tb), individual_ranking(x, 4, tb)
    assert ((a - x) ** 2).sum(axis=0).tolist() <= ((b - x) ** 2).sum(axis=0).tolist()


def test_individual_ranking_checks():
    with pytest.raises(ValueError, match="tiebreak"):
        individual_ranking(np.zeros((4, 2)), 2, np.arange(3))
    x = np.zeros((4, 2))
    x[2, 1] = np.inf
    with pytest.raises(ValueError, match="row 2"):
        individual_ranking(x, 2, np.arange(4))
    assert individual_ranking(np.empty((0, 2)), 3, np.empty(0)).shape == (0, 2)


# ---- projections ----


def test_z_projection_by_hand():
    z = np.array([[1.0, 2.0, -0.5], [-1.0, 0.5, 0.0]])
    np.testing.assert_allclose(projection_scores(z, "z"), [2.5, -0.5])


def test_pcp_by_hand_and_sign_rule():
    # u = (1,-1,1,-1), w = (1,1,-1,-1); X0 = -(u+w), X1 = -u, X2 = -w. corr(X0,X1) = corr(X0,X2) = 1/sqrt2,
    # corr(X1,X2) = 0. R(a,b,b) = lambda (a,b,b) gives lambda = 2 with a = sqrt2 b: v = (sqrt2, 1, 1)/2,
    # largest |loading| on X0 and positive. Standardized: z0 = (-sqrt2, 0, 0, sqrt2), z1 = X1, z2 = X2,
    # scores = v . z_i = (-1-0.5-0.5, 0+0.5-0.5, 0-0.5+0.5, 1+0.5+0.5) = (-2, 0, 0, 2).
    u = np.array([1.0, -1.0, 1.0, -1.0])
    w = np.array([1.0, 1.0, -1.0, -1.0])
    x = np.column_stack([-(u + w), -u, -w])
    z = (x - x.mean(axis=0)) / x.std(axis=0)
    np.testing.assert_allclose(first_principal_axis(z), [np.sqrt(0.5), 0.5, 0.5], atol=1e-12)
    np.testing.assert_allclose(projection_scores(z, "pcp"), [-2.0, 0.0, 0.0, 2.0], atol=1e-12)
    # negating the data flips the scores but not the axis (its sign is fixed by the rule, not by LAPACK)
    np.testing.assert_allclose(first_principal_axis(-z), [np.sqrt(0.5), 0.5, 0.5], atol=1e-12)


def test_pcp_matches_plain_numpy_and_ignores_constant_columns():
    rng = np.random.default_rng(2)
    base = rng.standard_normal((200, 1))
    z = np.column_stack([base + 0.3 * rng.standard_normal((200, 1)), -2 * base + rng.standard_normal((200, 1)),
                         rng.standard_normal((200, 1)), np.full((200, 1), 0.1)])
    vals, vecs = np.linalg.eigh(np.corrcoef(z[:, :3], rowvar=False))
    v = vecs[:, -1] * np.sign(vecs[np.argmax(np.abs(vecs[:, -1])), -1])
    axis = first_principal_axis(z)
    np.testing.assert_allclose(axis, np.append(v, 0.0), atol=1e-10)
    np.testing.assert_allclose(projection_scores(z, "pcp"), z @ axis)


def test_projection_kind_checked():
    with pytest.raises(ValueError, match="kind"):
        projection_scores(np.zeros((3, 2)), "pca")


# ---- projected microaggregation ----


def test_projected_by_hand():
    # scores 3, 1, 2, 0, 5 -> order r3 r1 r2 r0 r4; k = 2: groups {r3, r1}, {r2, r0, r4}.
    # {r3, r1}: ((40+20)/2, (6+2)/2) = (30, 4); {r2, r0, r4}: ((30+10+70)/3, (4+0+11)/3) = (110/3, 5).
    x = np.array([[10.0, 0.0], [20.0, 2.0], [30.0, 4.0], [40.0, 6.0], [70.0, 11.0]])
    out = projected_microaggregation(x, 2, np.array([3.0, 1.0, 2.0, 0.0, 5.0]), np.arange(5))
    b = [110 / 3, 5.0]
    np.testing.assert_allclose(out, [b, [30, 4], b, [30, 4], b])


def test_projected_tiebreak_and_checks():
    # equal scores: order by tiebreak 2, 0, 1, 3 -> r1 r2 | r0 r3 with k = 2.
    x = np.array([0.0, 10.0, 20.0, 30.0])
    out = projected_microaggregation(x, 2, np.zeros(4), np.array([2, 0, 1, 3]))
    np.testing.assert_allclose(out[:, 0], [15.0, 15.0, 15.0, 15.0])
    out = projected_microaggregation(x, 2, np.zeros(4), np.array([0, 2, 1, 3]))
    np.testing.assert_allclose(out[:, 0], [10.0, 20.0, 10.0, 20.0])  # r0 r2 | r1 r3
    with pytest.raises(ValueError, match="scores"):
        projected_microaggregation(x, 2, np.zeros(3), np.arange(4))
    with pytest.raises(ValueError, match="k"):
        projected_microaggregation(x, 0, np.zeros(4), np.arange(4))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(1, 6), kind=st.sampled_from(["z", "pcp"]))
def test_projected_preserves_means_and_group_sizes(seed, k, kind):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(max(k, 2), 90))  # one record has sd 0: its z-scores are undefined
    x = rng.lognormal(1.0, 1.0, size=(n, 4)) * [1.0, 10.0, 100.0, 0.1]
    z = (x - x.mean(axis=0)) / x.std(axis=0)
    out = projected_microaggregation(x, k, projection_scores(z, kind), np.arange(n))
    np.testing.assert_allclose(out.mean(axis=0), x.mean(axis=0), rtol=1e-9)
    _, counts = np.unique(out, axis=0, return_counts=True)
    assert (counts >= k).all()
