"""Tests for brMAE and brMSE (bounded_rank_metrics.txt eq. 8, 9; docs/metrics.md: ties by increasing record id).

Expected values come from hand arithmetic (comments), from brute force over all permutations, or from
the paper's own Tables 1 and 2; never from the code under test run twice.
"""

from __future__ import annotations

from itertools import permutations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sdc_tasks.metrics.rank_metrics import (
    RankErrors,
    bounded_rank_metrics,
    max_abs_rank_distance,
    max_sq_rank_distance,
    rank_errors,
    ranks,
)

HYPO = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def br(x: np.ndarray, xm: np.ndarray, ids: np.ndarray) -> dict[str, float]:
    """brMAE / brMSE of two paired files (row i of each is record ids[i]) through the public API."""
    ro = np.column_stack([ranks(x[:, j], ids) for j in range(x.shape[1])])
    rm = np.column_stack([ranks(xm[:, j], ids) for j in range(xm.shape[1])])
    return bounded_rank_metrics(rank_errors(ro, rm), x.shape[0])


# ----------------------------------------------------------------------------------------------------------
# ranks
# ----------------------------------------------------------------------------------------------------------

def test_ranks_ties_by_increasing_id():
    # three equal values: ids 7, 3, 5 -> id 3 gets rank 1, id 5 rank 2, id 7 rank 3
    assert ranks(np.array([1.0, 1.0, 1.0]), np.array([7, 3, 5])).tolist() == [3, 1, 2]
    # mixed: values 2, 1, 2, 0 with ids 10, 11, 4, 12 -> 0 (id 12) 1; 1 (id 11) 2; the 2s: id 4 then id 10
    assert ranks(np.array([2.0, 1.0, 2.0, 0.0]), np.array([10, 11, 4, 12])).tolist() == [4, 2, 3, 1]
    assert ranks(np.array([]), np.array([], dtype=np.int64)).tolist() == []
    with pytest.raises(ValueError):
        ranks(np.array([1.0, np.nan]), np.array([0, 1]))


@HYPO
@given(vals=st.lists(st.integers(-3, 3), min_size=1, max_size=40), seed=st.integers(0, 2 ** 32 - 1))
def test_ranks_against_sorted_pairs(vals, seed):
    rng = np.random.default_rng(seed)
    ids = rng.permutation(10 * len(vals))[: len(vals)]
    r = ranks(np.array(vals, dtype=float), ids)
    # plain python: sort (value, id) pairs; rank = position + 1
    order = sorted(range(len(vals)), key=lambda i: (vals[i], ids[i]))
    expected = [0] * len(vals)
    for pos, i in enumerate(order):
        expected[i] = pos + 1
    assert r.tolist() == expected


# ----------------------------------------------------------------------------------------------------------
# normalisers
# ----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n", range(1, 8))
def test_normalisers_are_the_maxima_over_all_permutations(n):
    ident = np.arange(1, n + 1)
    perms = np.array(list(permutations(range(1, n + 1))))
    d = perms - ident
    assert max_abs_rank_distance(n) == int(np.abs(d).sum(axis=1).max())
    assert max_sq_rank_distance(n) == int((d ** 2).sum(axis=1).max())
    # and they are the paper's sums 2 sum_{k=1}^{K} (n - 2k + 1)^e, K = floor(n / 2) (eq. 1-3, 7)
    k_max = n // 2
    assert max_abs_rank_distance(n) == 2 * sum(n - 2 * k + 1 for k in range(1, k_max + 1))
    assert max_sq_rank_distance(n) == 2 * sum((n - 2 * k + 1) ** 2 for k in range(1, k_max + 1))
    # the reversal attains both
    rev = ident[::-1] - ident
    assert int(np.abs(rev).sum()) == max_abs_rank_distance(n)
    assert int((rev ** 2).sum()) == max_sq_rank_distance(n)


def test_normalisers_match_paper_tables():
    # Table 1 (n = 3): max absolute 4, max squared 8; Table 2 (n = 4): 8 and 20
    assert (max_abs_rank_distance(3), max_sq_rank_distance(3)) == (4, 8)
    assert (max_abs_rank_distance(4), max_sq_rank_distance(4)) == (8, 20)
    # large n stays exact: floor(n^2/2) and n(n^2 - 1)/3
    n = 10 ** 7 + 1
    assert max_abs_rank_distance(n) == (n * n - 1) // 2
    assert max_sq_rank_distance(n) * 3 == n * (n * n - 1)


# ----------------------------------------------------------------------------------------------------------
# brMAE, brMSE
# ----------------------------------------------------------------------------------------------------------

def test_hand_case():
    ids = np.array([0, 1, 2, 3])
    x = np.array([[10.0, 5.0], [20.0, 5.0], [30.0, 1.0], [40.0, 9.0]])
    xm = np.array([[20.0, 9.0], [10.0, 1.0], [30.0, 5.0], [40.0, 5.0]])
    # column 1: r = 1 2 3 4, r~ = 2 1 3 4: |d| = 1 1 0 0 (sum 2), d^2 sum 2
    # column 2: original 5, 5, 1, 9 -> 1 is rank 1 (id 2); the tied 5s: id 0 rank 2, id 1 rank 3; 9 rank 4
    #   r = 2 3 1 4; masked 9, 1, 5, 5 -> r~ = 4 1 2 3 (tied 5s: id 2 before id 3)
    #   d = -2 2 -1 1: |d| sum 6, d^2 sum 10
    # M1(4) = 8, M2(4) = 20: brMAE = (2 + 6) / (2 * 8) = 0.5, brMSE = (2 + 10) / (2 * 20) = 0.3
    out = br(x, xm, ids)
    assert out == {"brMAE": pytest.approx(0.5), "brMSE": pytest.approx(0.3)}
    errs = rank_errors(np.column_stack([ranks(x[:, j], ids) for j in range(2)]),
                       np.column_stack([ranks(xm[:, j], ids) for j in range(2)]))
    assert errs == RankErrors((2, 6), (2, 10), (4, 4))


def test_identical_is_zero_and_reversed_is_one():
    rng = np.random.default_rng(0)
    for n in (2, 3, 10, 101):
        x = rng.normal(size=(n, 3))
        ids = rng.permutation(n)
        assert br(x, x.copy(), ids) == {"brMAE": 0.0, "brMSE": 0.0}
        # masked = -x reverses every column's ranking (no ties): the paper's maximum, exactly 1
        assert br(x, -x, ids) == {"brMAE": 1.0, "brMSE": 1.0}


def test_ties_broken_by_id_affect_the_result():
    # all-tied original column: ranks follow the ids. masked values are increasing in row order.
    x = np.array([[1.0], [1.0], [1.0]])
    xm = np.array([[1.0], [2.0], [3.0]])
    # ids 0 1 2: r = 1 2 3 = r~ -> 0
    assert br(x, xm, np.array([0, 1, 2])) == {"brMAE": 0.0, "brMSE": 0.0}
    # ids 2 1 0: r = 3 2 1, r~ = 1 2 3 -> |d| sum 4 (= M1(3)), d^2 sum 8 (= M2(3)) -> 1, 1
    assert br(x, xm, np.array([2, 1, 0])) == {"brMAE": 1.0, "brMSE": 1.0}


@HYPO
@given(seed=st.integers(0, 2 ** 32 - 1), n=st.integers(2, 60), p=st.integers(1, 4),
       spread=st.integers(1, 100))
def test_bounds(seed, n, p, spread):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, spread, size=(n, p)).astype(float)  # many ties when spread is small
    xm = rng.integers(0, spread, size=(n, p)).astype(float)
    ids = rng.permutation(3 * n)[:n]
    out = br(x, xm, ids)
    assert 0.0 <= out["brMAE"] <= 1.0
    assert 0.0 <= out["brMSE"] <= 1.0
    # plain reference straight from eq. 8, 9 with the (value, id) sort done by python's sorted
    def rk(col):
        order = sorted(range(n), key=lambda i: (col[i], ids[i]))
        r = np.empty(n)
        r[order] = np.arange(1, n + 1)
        return r
    d = np.column_stack([rk(x[:, j]) - rk(xm[:, j]) for j in range(p)])
    k_max = n // 2
    m1 = 2 * sum(n - 2 * k + 1 for k in range(1, k_max + 1))
    m2 = 2 * sum((n - 2 * k + 1) ** 2 for k in range(1, k_max + 1))
    assert out["brMAE"] == pytest.approx(np.abs(d).sum() / (p * m1), rel=1e-12)
    assert out["brMSE"] == pytest.approx((d ** 2).sum() / (p * m2), rel=1e-12)


@HYPO
@given(seed=st.integers(0, 2 ** 32 - 1), n=st.integers(1, 80), p=st.integers(1, 3),
       cuts=st.lists(st.floats(0, 1), max_size=6))
def test_rank_errors_add_over_random_splits(seed, n, p, cuts):
    rng = np.random.default_rng(seed)
    ro = np.column_stack([rng.permutation(n) + 1 for _ in range(p)])
    rm = np.column_stack([rng.permutation(n) + 1 for _ in range(p)])
    bounds = sorted({0, n, *(int(c * n) for c in cuts)})
    total = RankErrors.zero(p)
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        total = total + rank_errors(ro[lo:hi], rm[lo:hi])
    d = ro - rm
    assert total == RankErrors(tuple(int(v) for v in np.abs(d).sum(axis=0)),
                               tuple(int(v) for v in (d ** 2).sum(axis=0)), (n,) * p)
    assert total == rank_errors(ro, rm)


def test_exact_sums_for_large_ranks():
    # differences of 2^31 - 1: d^2 ~ 4.6e18, four of them exceed the int64 range (9.2e18)
    big = 2 ** 31 - 1
    ro = np.array([[1]] * 5)
    rm = np.array([[big + 1]] * 4 + [[2]])
    e = rank_errors(ro, rm)
    assert e.abs_sum == (4 * big + 1,)
    assert e.sq_sum == (4 * big * big + 1,)
    assert 4 * big * big + 1 > np.iinfo(np.int64).max  # a plain int64 sum would have wrapped


def test_degenerate_and_invalid():
    # n = 1: both maxima are 0, the terms are undefined (docs/metrics.md): left out and counted
    assert bounded_rank_metrics(rank_errors(np.array([[1, 1]]), np.array([[1, 1]])), 1) == {
        "brMAE_undefined_terms": 2.0, "brMSE_undefined_terms": 2.0}
    # counts must be n
    with pytest.raises(ValueError):
        bounded_rank_metrics(rank_errors(np.array([1, 2]), np.array([2, 1])), 3)
    with pytest.raises(ValueError):
        RankErrors.zero(2) + RankErrors.zero(3)
    with pytest.raises(ValueError):
        rank_errors(np.array([1, 2]), np.array([1, 2, 3]))
    # one attribute, 1-D input
    assert bounded_rank_metrics(rank_errors(np.array([1, 2]), np.array([2, 1])), 2) == {"brMAE": 1.0,
                                                                                       "brMSE": 1.0}
