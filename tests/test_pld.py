"""Tests for the PLD kernels (sdc_methods_comparison_chapter.txt sec. 3; Jaro 1989; docs/metrics.md PLD).

Expected values come from hand arithmetic, from the generating parameters of simulated data, from brute force
(scipy.optimize.linear_sum_assignment on dense matrices) or from an established implementation
(recordlinkage's ECMClassifier); never from the code under test run twice.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment

from sdc_tasks.metrics.pld import (
    DEFAULT_THRESHOLDS,
    FellegiSunterModel,
    agreement_levels,
    assign_max_weight,
    correct_pairs,
    fit_fellegi_sunter,
    pattern_codes,
    pattern_counts,
    pattern_levels,
    tied_max_credit,
)

# generating parameters of the latent class simulations: 4 variables, 3 levels, match prior 0.2
TRUE_M = np.array([[0.80, 0.15, 0.05], [0.70, 0.20, 0.10], [0.90, 0.07, 0.03], [0.60, 0.30, 0.10]])
TRUE_U = np.array([[0.10, 0.30, 0.60], [0.20, 0.30, 0.50], [0.05, 0.25, 0.70], [0.30, 0.30, 0.40]])
TRUE_P = 0.2


def simulate_levels(rng: np.random.Generator, n: int, m: np.ndarray, u: np.ndarray, p: float) -> np.ndarray:
    """(n, m_vars) levels drawn from the two-class latent class model with conditional independence."""
    is_match = rng.random(n) < p
    levels = np.empty((n, m.shape[0]), dtype=np.int8)
    for j in range(m.shape[0]):
        levels[is_match, j] = rng.choice(m.shape[1], is_match.sum(), p=m[j])
        levels[~is_match, j] = rng.choice(m.shape[1], (~is_match).sum(), p=u[j])
    return levels


def expected_counts(n: float, m: np.ndarray, u: np.ndarray, p: float) -> np.ndarray:
    """n times the model probability of every pattern code, first variable most significant (hand-written
    product over variables, independent of the module's helpers)."""
    m_vars, n_levels = m.shape
    prob_m = np.ones(1)
    prob_u = np.ones(1)
    for j in range(m_vars):
        prob_m = np.outer(prob_m, m[j]).ravel()
        prob_u = np.outer(prob_u, u[j]).ravel()
    return n * (p * prob_m + (1 - p) * prob_u)


# ----------------------------------------------------------------------------------------------------------
# agreement_levels
# ----------------------------------------------------------------------------------------------------------

def test_agreement_levels_hand_cases_and_boundaries():
    assert DEFAULT_THRESHOLDS == (0.05, 0.25, 1.0)
    diff = np.array([[0.0, 0.05], [np.nextafter(0.05, 1.0), 0.25], [0.2500001, 1.0], [1.0000001, np.inf]])
    levels = agreement_levels(diff)
    # a difference equal to a cut point belongs to the closer level (diff <= t_k)
    np.testing.assert_array_equal(levels, [[0, 0], [1, 1], [2, 2], [3, 3]])
    assert levels.dtype == np.int8


def test_agreement_levels_custom_thresholds():
    diff = np.array([[0.1], [0.25], [0.3]])
    np.testing.assert_array_equal(agreement_levels(diff, thresholds=(0.25,)), [[0], [0], [1]])


@pytest.mark.parametrize("bad", [np.nan, -0.1])
def test_agreement_levels_rejects_nan_and_negative(bad):
    with pytest.raises(ValueError):
        agreement_levels(np.array([[0.1, bad]]))


@pytest.mark.parametrize("thresholds", [(), (0.25, 0.05), (0.1, 0.1)])
def test_agreement_levels_rejects_bad_thresholds(thresholds):
    with pytest.raises(ValueError):
        agreement_levels(np.array([[0.1]]), thresholds=thresholds)


# ----------------------------------------------------------------------------------------------------------
# pattern codes and counts
# ----------------------------------------------------------------------------------------------------------

def test_pattern_codes_first_variable_most_significant():
    # base 3: (1, 0, 0) -> 9, (0, 0, 1) -> 1, (2, 1, 2) -> 18 + 3 + 2 = 23
    levels = np.array([[1, 0, 0], [0, 0, 1], [2, 1, 2]], dtype=np.int8)
    codes = pattern_codes(levels, 3)
    np.testing.assert_array_equal(codes, [9, 1, 23])
    assert codes.dtype == np.int64


def test_pattern_codes_levels_round_trip():
    rng = np.random.default_rng(3)
    for m_vars, n_levels in [(1, 2), (4, 3), (7, 4)]:
        levels = rng.integers(0, n_levels, size=(500, m_vars)).astype(np.int8)
        codes = pattern_codes(levels, n_levels)
        assert codes.min() >= 0 and codes.max() < n_levels**m_vars
        np.testing.assert_array_equal(pattern_levels(codes, m_vars, n_levels), levels)
        every = np.arange(n_levels**m_vars)
        np.testing.assert_array_equal(pattern_codes(pattern_levels(every, m_vars, n_levels), n_levels), every)


def test_pattern_codes_empty_and_out_of_range():
    assert pattern_codes(np.zeros((0, 3), dtype=np.int8), 4).shape == (0,)
    assert pattern_levels(np.zeros(0, dtype=np.int64), 3, 4).shape == (0, 3)
    with pytest.raises(ValueError):
        pattern_codes(np.array([[0, 3]]), 3)


def test_pattern_counts_hand_case_and_additivity():
    codes = np.array([0, 2, 2, 5])
    np.testing.assert_array_equal(pattern_counts(codes, 8), [1, 0, 2, 0, 0, 1, 0, 0])
    rng = np.random.default_rng(4)
    many = rng.integers(0, 81, 10_000)
    blocks = np.array_split(many, 7)
    np.testing.assert_array_equal(sum(pattern_counts(b, 81) for b in blocks), pattern_counts(many, 81))
    with pytest.raises(ValueError):
        pattern_counts(np.array([8]), 8)


# ----------------------------------------------------------------------------------------------------------
# fit_fellegi_sunter
# ----------------------------------------------------------------------------------------------------------

def test_em_recovers_parameters_from_expected_counts():
    # the population frequencies themselves: the maximum-likelihood estimate is the truth
    fit = fit_fellegi_sunter(expected_counts(1e6, TRUE_M, TRUE_U, TRUE_P), 4, 3)
    assert fit.converged
    np.testing.assert_allclose(fit.m, TRUE_M, atol=1e-6)
    np.testing.assert_allclose(fit.u, TRUE_U, atol=1e-6)
    assert fit.p == pytest.approx(TRUE_P, abs=1e-6)


@pytest.fixture(scope="module")
def simulated_levels() -> np.ndarray:
    return simulate_levels(np.random.default_rng(1), 200_000, TRUE_M, TRUE_U, TRUE_P)


def test_em_recovers_parameters_from_simulated_pairs(simulated_levels):
    fit = fit_fellegi_sunter(pattern_counts(pattern_codes(simulated_levels, 3), 81), 4, 3)
    assert fit.converged
    # sampling error: about 40k matches (sd of an m entry <= 0.0025), 160k non-matches (sd <= 0.00125)
    np.testing.assert_allclose(fit.m, TRUE_M, atol=1e-2)
    np.testing.assert_allclose(fit.u, TRUE_U, atol=5e-3)
    assert fit.p == pytest.approx(TRUE_P, abs=5e-3)
    np.testing.assert_allclose(fit.m.sum(axis=1), 1.0)
    np.testing.assert_allclose(fit.u.sum(axis=1), 1.0)


def test_em_invariant_to_pair_order_and_block_split(simulated_levels):
    codes = pattern_codes(simulated_levels, 3)
    whole = fit_fellegi_sunter(pattern_counts(codes, 81), 4, 3)
    shuffled = np.random.default_rng(2).permutation(codes)
    block_counts = sum(pattern_counts(block, 81) for block in np.array_split(shuffled, 13))
    for other in (fit_fellegi_sunter(pattern_counts(shuffled, 81), 4, 3), fit_fellegi_sunter(block_counts, 4, 3)):
        np.testing.assert_array_equal(other.m, whole.m)
        np.testing.assert_array_equal(other.u, whole.u)
        assert other.p == whole.p and other.iterations == whole.iterations


def test_em_labels_match_class_when_matches_are_the_majority():
    # p = 0.8 from a start at prior 0.1: the class with more level-0 mass is still called "match"
    fit = fit_fellegi_sunter(expected_counts(1e6, TRUE_M, TRUE_U, 0.8), 4, 3, prior=0.1)
    assert fit.p == pytest.approx(0.8, abs=1e-6)
    np.testing.assert_allclose(fit.m, TRUE_M, atol=1e-6)


def test_em_log_likelihood_increases_with_iterations():
    counts = expected_counts(1e5, TRUE_M, TRUE_U, TRUE_P)
    lls = [fit_fellegi_sunter(counts, 4, 3, max_iter=k).loglik for k in (1, 3, 10, 500)]
    assert all(a <= b + 1e-9 for a, b in zip(lls, lls[1:]))
    short = fit_fellegi_sunter(counts, 4, 3, max_iter=3)
    assert short.iterations == 3 and not short.converged


def test_em_rejects_empty_and_misshaped_counts():
    with pytest.raises(ValueError):
        fit_fellegi_sunter(np.zeros(81), 4, 3)
    with pytest.raises(ValueError):
        fit_fellegi_sunter(np.ones(80), 4, 3)
    with pytest.raises(ValueError):
        fit_fellegi_sunter(-np.ones(81), 4, 3)


def test_weights_and_match_probability_per_pattern():
    m = np.array([[0.9, 0.1], [0.8, 0.2]])
    u = np.array([[0.2, 0.8], [0.5, 0.5]])
    model = FellegiSunterModel(m=m, u=u, p=0.25, iterations=0, converged=True, loglik=0.0)
    # codes 0..3 = (0,0), (0,1), (1,0), (1,1); weight = log2(m1/u1) + log2(m2/u2)
    expected_w = [np.log2(0.9 / 0.2 * 0.8 / 0.5), np.log2(0.9 / 0.2 * 0.2 / 0.5),
                  np.log2(0.1 / 0.8 * 0.8 / 0.5), np.log2(0.1 / 0.8 * 0.2 / 0.5)]
    np.testing.assert_allclose(model.weights(), expected_w)
    # posterior of (0,0): 0.25*0.72 / (0.25*0.72 + 0.75*0.10) = 0.18 / 0.255
    assert model.match_probability()[0] == pytest.approx(0.18 / 0.255)
    assert model.match_probability().shape == (4,)


def test_weights_finite_for_unobserved_levels():
    # level 2 never occurs: the floor keeps m and u positive, so every pattern weight is finite
    levels = simulate_levels(np.random.default_rng(5), 20_000, TRUE_M[:, :2] / TRUE_M[:, :2].sum(1, keepdims=True),
                             TRUE_U[:, :2] / TRUE_U[:, :2].sum(1, keepdims=True), TRUE_P)
    fit = fit_fellegi_sunter(pattern_counts(pattern_codes(levels, 3), 81), 4, 3)
    assert np.isfinite(fit.weights()).all() and (fit.m > 0).all() and (fit.u > 0).all()


# ----------------------------------------------------------------------------------------------------------
# assign_max_weight and correct_pairs
# ----------------------------------------------------------------------------------------------------------

def brute_force_total(rows, cols, weights, n_rows, n_cols) -> float:
    """Best total weight: dense matrix of each edge's largest weight, non-edges 0 and weights clipped at 0
    (taking a weight-0 entry is the same as leaving both records unpaired)."""
    dense = np.zeros((n_rows, n_cols))
    np.maximum.at(dense, (rows, cols), weights)
    r, c = linear_sum_assignment(dense, maximize=True)
    return float(dense[r, c].sum())


def test_assign_matches_brute_force_on_random_small_graphs():
    rng = np.random.default_rng(6)
    for _ in range(400):
        n_rows, n_cols = rng.integers(1, 7, size=2)
        n_edges = rng.integers(0, 2 * n_rows * n_cols)
        rows = rng.integers(0, n_rows, n_edges)
        cols = rng.integers(0, n_cols, n_edges)
        weights = rng.normal(0.5, 2.0, n_edges).round(1)  # rounding makes ties and duplicates common
        r, c = assign_max_weight(rows, cols, weights, n_rows, n_cols)
        assert np.unique(r).size == r.size and np.unique(c).size == c.size  # one-to-one
        best = {}
        for a, b, w in zip(rows, cols, weights):
            best[a, b] = max(best.get((a, b), -np.inf), w)
        taken = [best[a, b] for a, b in zip(r, c)]
        assert all(w > 0 for w in taken)
        assert sum(taken) == pytest.approx(brute_force_total(rows, cols, weights, n_rows, n_cols), abs=1e-9)


def test_assign_beats_greedy():
    # greedy would take (0,0) = 3 and stop; the optimum pairs (0,1) + (1,0) = 4
    r, c = assign_max_weight(np.array([0, 0, 1]), np.array([0, 1, 0]), np.array([3.0, 2.0, 2.0]), 2, 2)
    np.testing.assert_array_equal(r, [0, 1])
    np.testing.assert_array_equal(c, [1, 0])


def test_assign_keeps_largest_duplicate_and_skips_non_positive():
    r, c = assign_max_weight(np.array([0, 0, 1, 2]), np.array([0, 0, 1, 2]), np.array([-1.0, 5.0, 0.0, -2.0]), 3, 3)
    np.testing.assert_array_equal(r, [0])
    np.testing.assert_array_equal(c, [0])


def test_assign_empty_and_negative_only_graphs():
    empty = np.zeros(0, dtype=np.int64)
    negative_only = (np.array([0, 1]), np.array([1, 0]), np.array([-1.0, -3.0]))
    for rows, cols, weights in [(empty, empty, np.zeros(0)), negative_only]:
        r, c = assign_max_weight(rows, cols, weights, 2, 2)
        assert r.size == 0 and c.size == 0 and r.dtype == np.int64


def test_assign_rectangular():
    # one masked record, three originals: the heaviest wins
    r, c = assign_max_weight(np.zeros(3, dtype=int), np.arange(3), np.array([1.0, 4.0, 2.0]), 1, 3)
    assert (r.tolist(), c.tolist()) == ([0], [1])
    # three masked records, one original: the heaviest wins
    r, c = assign_max_weight(np.arange(3), np.zeros(3, dtype=int), np.array([1.0, 4.0, 2.0]), 3, 1)
    assert (r.tolist(), c.tolist()) == ([1], [0])
    # 4 x 2 with the best pairing avoiding each row's own best column
    r, c = assign_max_weight(np.array([0, 0, 1, 2, 3]), np.array([0, 1, 0, 1, 1]),
                             np.array([5.0, 4.0, 4.5, 1.0, 3.0]), 4, 2)
    assert (r.tolist(), c.tolist()) == ([0, 1], [1, 0])


def test_assign_rejects_bad_input():
    with pytest.raises(ValueError):
        assign_max_weight(np.array([2]), np.array([0]), np.array([1.0]), 2, 2)
    with pytest.raises(ValueError):
        assign_max_weight(np.array([0]), np.array([0]), np.array([np.nan]), 2, 2)
    with pytest.raises(ValueError):
        assign_max_weight(np.array([0, 1]), np.array([0]), np.array([1.0]), 2, 2)


def test_correct_pairs_counts_agreeing_ids():
    row_ids = np.array([10, 11, 12])
    col_ids = np.array([12, 11, 10, 13])
    # pairs (0,2): 10=10 yes, (1,1): 11=11 yes, (2,3): 12 vs 13 no
    assert correct_pairs(np.array([0, 1, 2]), np.array([2, 1, 3]), row_ids, col_ids) == 2
    assert correct_pairs(np.zeros(0, dtype=int), np.zeros(0, dtype=int), row_ids, col_ids) == 0


def test_tied_max_credit_shares_ties_among_the_best_candidates():
    row_ids = np.array([0, 1, 2, 3])
    col_ids = np.array([0, 1, 2, 3])
    rows = np.array([0, 0, 0, 1, 1, 2, 2, 2])
    cols = np.array([0, 1, 2, 1, 0, 0, 1, 3])
    weights = np.array([5.0, 5.0, 1.0, 3.0, -2.0, 4.0, 4.0, 4.0])
    # record 0: own (w 5) tied with col 1 -> 1/2; record 1: own (w 3) the unique best -> 1;
    # record 2: own original 2 is no candidate, its best three are others -> 0; record 3 has no candidate
    assert tied_max_credit(rows, cols, weights, row_ids, col_ids) == pytest.approx(1.5)
    # record 2 gets its own original among three tied best candidates -> 1/3 more
    cols_own = np.array([0, 1, 2, 1, 0, 0, 1, 2])
    assert tied_max_credit(rows, cols_own, weights, row_ids, col_ids) == pytest.approx(1.5 + 1 / 3)
    # an own original below its record's best earns nothing, whatever its weight's sign
    assert tied_max_credit(np.array([0, 0]), np.array([0, 1]), np.array([-1.0, 2.0]), row_ids, col_ids) == 0.0
    assert tied_max_credit(np.zeros(0), np.zeros(0), np.zeros(0), row_ids, col_ids) == 0.0
    with pytest.raises(ValueError, match="differ in length"):
        tied_max_credit(np.array([0]), np.array([0, 1]), np.array([1.0]), row_ids, col_ids)


# ----------------------------------------------------------------------------------------------------------
# comparison with recordlinkage's ECMClassifier
# ----------------------------------------------------------------------------------------------------------

def test_em_agrees_with_recordlinkage_ecm():
    recordlinkage = pytest.importorskip("recordlinkage")
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(7)
    n, k, m_vars = 4000, 5, 5
    original = rng.normal(size=(n, m_vars))
    masked = original + rng.normal(scale=0.2, size=(n, m_vars))
    # candidates: each masked record with its own original and k - 1 random others
    rows = np.repeat(np.arange(n), k)
    cols = rng.integers(0, n, n * k)
    cols[::k] = np.arange(n)
    diff = np.abs(masked[rows] - original[cols]) / original.std(axis=0)
    levels = agreement_levels(diff, thresholds=(0.25,))
    ours = fit_fellegi_sunter(pattern_counts(pattern_codes(levels, 2), 2**m_vars), m_vars, 2)

    names = [f"v{j}" for j in range(m_vars)]
    agree = pd.DataFrame((levels == 0).astype(int), columns=names, index=pd.MultiIndex.from_arrays([rows, cols]))
    ecm = recordlinkage.ECMClassifier(binarize=None, max_iter=5000, atol=1e-12)
    ecm.fit(agree)
    # recordlinkage: value 1 = agree, our level 0 = agree
    np.testing.assert_allclose(ours.m[:, 0], [ecm.m_probs[v][1] for v in names], atol=1e-3)
    np.testing.assert_allclose(ours.u[:, 0], [ecm.u_probs[v][1] for v in names], atol=1e-3)
    assert ours.p == pytest.approx(ecm.p, abs=1e-3)

    our_match = ours.match_probability()[pattern_codes(levels, 2)] > 0.5
    their_match = ecm.prob(agree).to_numpy() > 0.5
    assert np.mean(our_match == their_match) >= 0.999
    assert np.mean(our_match == (rows == cols)) > 0.9  # and both actually find the true pairs
