"""Rank swapping block kernels: hand-worked permutations, plain references of both partner draws (uniform among
the free ranks in range, the mu-Argus walk), properties.

Reference: statistical_databases_survey.txt, Data swapping and rank swapping;
sdc_methods_comparison_chapter.txt sec. 2 (Rank swapping, Moore 1996).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sdc_tasks.masking.rankswap import max_rank_distance, rank_swap_column, rank_swap_permutation


def reference_uniform(n: int, p: float, uniforms: np.ndarray) -> list[int]:
    """Uniform partners exactly as specified: the (floor(F u_i) + 1)-th of the F free ranks among i+1..i+P."""
    max_dist = math.floor(n * p / 100)
    perm = list(range(n))
    swapped = [False] * n
    for i in range(n):
        if swapped[i] or max_dist == 0:
            continue
        free = [j for j in range(i + 1, min(n - 1, i + max_dist) + 1) if not swapped[j]]
        if free:
            partner = free[math.floor(len(free) * uniforms[i])]
            perm[i], perm[partner] = partner, i
            swapped[i] = swapped[partner] = True
    return perm


def reference_permutation(n: int, p: float, uniforms: np.ndarray) -> list[int]:
    """The mu-Argus walk exactly as specified, with linear left/right walks over a swapped flag list."""
    max_dist = math.floor(n * p / 100)
    perm = list(range(n))
    if max_dist == 0:
        return perm
    swapped = [False] * n
    for i in range(n):
        if swapped[i]:
            continue
        start = min(i + 1 + math.floor(max_dist * uniforms[i]), n - 1)
        partner = -1
        if start > i and not swapped[start]:
            partner = start
        elif start > i:
            j = start
            while partner < 0 and j > i + 1:
                j -= 1
                partner = j if not swapped[j] else -1
            j = start
            while partner < 0 and j < n - 1 and j < i + max_dist:
                j += 1
                partner = j if not swapped[j] else -1
        if partner > i:
            perm[i], perm[partner] = partner, i
            swapped[i] = swapped[partner] = True
    return perm


def test_hand_computed_uniform_permutation_n10_p30():
    # n = 10, p = 30 -> P = 3; i takes the (floor(F u_i) + 1)-th of the F free ranks among i+1..i+3.
    # i=0: u=0.5  free {1,2,3}, F=3, floor(1.5)=1  -> 2nd: 2          -> swap 0<->2
    # i=1: u=0.0  free {3,4} (2 taken), F=2, 0     -> 1st: 3          -> swap 1<->3
    # i=4: u=0.99 free {5,6,7}, F=3, floor(2.97)=2 -> 3rd: 7          -> swap 4<->7
    # i=5: u=0.5  free {6,8} (7 taken), F=2, 1     -> 2nd: 8          -> swap 5<->8
    # i=6: u=0.1  free {9} (7, 8 taken), F=1       -> 9               -> swap 6<->9
    u = np.array([0.5, 0.0, 0.25, 0.75, 0.99, 0.5, 0.1, 0.2, 0.9, 0.3])
    np.testing.assert_array_equal(rank_swap_permutation(10, 30, u), [2, 3, 0, 1, 7, 8, 9, 4, 5, 6])
    assert rank_swap_permutation(10, 30, u).tolist() == reference_uniform(10, 30, u)


def test_unknown_partner_rule_refused():
    with pytest.raises(ValueError, match="partner"):
        rank_swap_permutation(10, 30, np.zeros(10), "nearest")


def test_uniform_partners_swap_further_than_the_walk():
    # the walk steps down from a taken target, so its swaps are shorter; uniform partners spread over the range
    u = np.random.default_rng(5).random(20_000)
    walk = np.abs(rank_swap_permutation(20_000, 10, u, "nearest_free") - np.arange(20_000))
    uniform = np.abs(rank_swap_permutation(20_000, 10, u) - np.arange(20_000))
    assert uniform.mean() > 1.1 * walk.mean()


def test_hand_computed_permutation_n10_p30():
    # n = 10, p = 30 -> P = floor(10 * 30 / 100) = 3; target k = i + 1 + floor(3 u_i).
    # i=0: u=0.5  -> k=2, rank 2 free                                  -> swap 0<->2
    # i=1: u=0.0  -> k=2, swapped; walk left needs j > 2: none;
    #              walk right from 2 while j < 9 and j < 1+3: j=3 free  -> swap 1<->3
    # i=2, i=3 already swapped (u=0.25, 0.75 unused)
    # i=4: u=0.99 -> k=5+2=7, free                                     -> swap 4<->7
    # i=5: u=0.5  -> k=6+1=7, swapped; walk left: j=6 free             -> swap 5<->6
    # i=6, i=7 already swapped (u=0.1, 0.2 unused)
    # i=8: u=0.9  -> k=9+2=11, clamped to n-1 = 9, free                -> swap 8<->9
    # i=9 already swapped (u=0.3 unused)
    u = np.array([0.5, 0.0, 0.25, 0.75, 0.99, 0.5, 0.1, 0.2, 0.9, 0.3])
    np.testing.assert_array_equal(rank_swap_permutation(10, 30, u, "nearest_free"), [2, 3, 0, 1, 7, 6, 5, 4, 9, 8])


def test_hand_computed_fixed_point_at_the_end():
    # n = 5, p = 40 -> P = 2; all u = 0 -> k = i + 1: 0<->1, 2<->3; i=4: min(5, 4) = 4 is not > 4 -> fixed.
    # uniform partners: the first free rank for u = 0 as well
    for partner in ("uniform", "nearest_free"):
        np.testing.assert_array_equal(rank_swap_permutation(5, 40, np.zeros(5), partner), [1, 0, 3, 2, 4])


@settings(max_examples=200, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(0, 400),
    p=st.one_of(st.integers(1, 100), st.floats(0.01, 100.0)),
    coarse=st.booleans(),
)
def test_matches_references_and_is_a_bounded_involution(seed, n, p, coarse):
    u = np.random.default_rng(seed).random(n)
    if coarse:
        u = np.floor(u * 4) / 4
    for partner, reference in (("uniform", reference_uniform), ("nearest_free", reference_permutation)):
        perm = rank_swap_permutation(n, p, u, partner)
        assert perm.dtype == np.int64
        np.testing.assert_array_equal(perm, reference(n, p, u))
        np.testing.assert_array_equal(np.sort(perm), np.arange(n))
        np.testing.assert_array_equal(perm[perm], np.arange(n))
        assert n == 0 or np.abs(perm - np.arange(n)).max() <= math.floor(n * p / 100)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 500), p=st.floats(0.5, 100.0))
def test_column_is_a_permutation_with_bounded_rank_displacement(seed, n, p):
    rng = np.random.default_rng(seed)
    values = rng.permutation(n).astype(float) * 1.5 - 7.0
    out = rank_swap_column(values, np.arange(n), p, np.random.default_rng(seed + 1))
    np.testing.assert_array_equal(np.sort(out), np.sort(values))
    sorted_values = values[np.argsort(values, kind="stable")]
    displacement = np.searchsorted(sorted_values, out) - np.searchsorted(sorted_values, values)
    assert np.abs(displacement).max() <= math.floor(n * p / 100)


def test_column_applies_the_rank_permutation_with_tiebreak():
    values = np.array([3, 1, 3, 2, 1, 3, 2, 2, 1, 3], dtype=np.int64)
    tiebreak = np.arange(10)[::-1]
    order = np.lexsort((tiebreak, values))
    perm = rank_swap_permutation(10, 30, np.random.default_rng(4).random(10))
    expected = np.empty_like(values)
    expected[order] = values[order][perm]
    out = rank_swap_column(values, tiebreak, 30, np.random.default_rng(4))
    assert out.dtype == values.dtype
    np.testing.assert_array_equal(out, expected)


def test_p_with_zero_max_distance_returns_input():
    values = np.random.default_rng(0).standard_normal(10)
    assert max_rank_distance(10, 5) == 0
    np.testing.assert_array_equal(rank_swap_permutation(10, 5, np.full(10, 0.5)), np.arange(10))
    np.testing.assert_array_equal(rank_swap_column(values, np.arange(10), 5, np.random.default_rng(1)), values)


def test_same_seed_same_output():
    values = np.random.default_rng(0).standard_normal(2000)
    a = rank_swap_column(values, np.arange(2000), 10, np.random.default_rng(42))
    b = rank_swap_column(values, np.arange(2000), 10, np.random.default_rng(42))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, values)


def test_p15_swaps_most_positions():
    perm = rank_swap_permutation(10_000, 15, np.random.default_rng(9).random(10_000))
    assert np.mean(perm == np.arange(10_000)) < 0.05
    assert np.abs(perm - np.arange(10_000)).max() <= 1500


@pytest.mark.parametrize("bad", [0, -1, 100.5, float("nan"), True, "5"])
def test_bad_p_is_named(bad):
    with pytest.raises(ValueError, match="p must"):
        rank_swap_column(np.arange(5.0), np.arange(5), bad, np.random.default_rng(0))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_value_row_is_named(bad):
    values = np.arange(6.0)
    values[3] = bad
    with pytest.raises(ValueError, match="row 3"):
        rank_swap_column(values, np.arange(6), 10, np.random.default_rng(0))


def test_bad_uniforms():
    with pytest.raises(ValueError, match="uniforms"):
        rank_swap_permutation(4, 50, np.array([0.1, 0.2, 1.0, 0.3]))
    with pytest.raises(ValueError, match="uniforms"):
        rank_swap_permutation(4, 50, np.zeros(3))


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), w=st.integers(1, 300), share=st.floats(0.0, 1.0))
def test_the_free_rank_index_counts_and_selects_as_the_flags_do(seed, w, share):
    """The window's free-rank index (a flag per rank, a Fenwick tree of the free ranks of each block) against the
    flags themselves, before and after ranks are taken, across block boundaries."""
    from sdc_tasks.masking.rankswap import _free_at, _free_index, _free_through, _take

    rng = np.random.default_rng(seed)
    taken = np.flatnonzero(rng.random(w) < share).astype(np.int64)
    flags, tree = _free_index(w, taken)
    free = np.ones(w, dtype=bool)
    free[taken] = False

    def agree() -> None:
        np.testing.assert_array_equal(flags.astype(bool), free)
        counts = np.cumsum(free)
        assert [_free_through(flags, tree, pos) for pos in range(-1, w)] == [0, *counts.tolist()]
        assert [_free_at(flags, tree, target) for target in range(1, counts[-1] + 1)] == np.flatnonzero(free).tolist()

    agree()
    for x in rng.permutation(np.flatnonzero(free))[: w // 3]:
        _take(flags, tree, x)
        free[x] = False
        agree()
