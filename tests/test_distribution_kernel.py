"""Distr (Liew et al. 1985): best fitting distribution by Kolmogorov-Smirnov, rank-preserving draws.

Reference: sdc_methods_comparison_chapter.txt sec. 2 (Data distortion by probability distribution).
"""

from __future__ import annotations

import numpy as np
import pytest

from sdc_tasks.masking.distribution import distribution_mask, fit_best_distribution, fitting_sample


def ranks(values, tiebreak):
    order = np.lexsort((tiebreak, values))
    out = np.empty(len(values), dtype=np.int64)
    out[order] = np.arange(len(values))
    return out


@pytest.fixture(scope="module")
def lognormal():
    return np.random.default_rng(2).lognormal(mean=3.0, sigma=0.8, size=20_000)


def test_lognormal_input_chooses_lognorm_and_keeps_the_median(lognormal):
    name, params, ks = fit_best_distribution(lognormal)
    assert name == "lognorm"
    assert params[0] == pytest.approx(0.8, rel=0.05)
    assert params[1] == 0.0
    assert 0 <= ks < 0.02
    tiebreak = np.arange(lognormal.shape[0])
    out = distribution_mask(lognormal, tiebreak, np.random.default_rng(5))
    assert abs(np.median(out) / np.median(lognormal) - 1) < 0.05
    np.testing.assert_array_equal(ranks(out, ranks(lognormal, tiebreak)), ranks(lognormal, tiebreak))
    # masked values are fresh draws, not the originals
    assert not np.isin(out, lognormal).any()
    np.testing.assert_array_equal(out, distribution_mask(lognormal, tiebreak, np.random.default_rng(5)))


def test_other_families():
    rng = np.random.default_rng(3)
    assert fit_best_distribution(rng.gamma(0.7, 10.0, size=5000))[0] in ("gamma", "weibull_min")
    assert fit_best_distribution(rng.exponential(4.0, size=5000))[0] in ("expon", "gamma", "weibull_min")
    name, params, _ = fit_best_distribution(rng.normal(-2.0, 3.0, size=3000))
    assert name in ("norm", "t", "logistic")
    assert params[-2] == pytest.approx(-2.0, abs=0.2)
    assert fit_best_distribution(rng.logistic(1.0, 2.0, size=3000) - 50)[0] in ("logistic", "t")


def test_zeros_are_inside_the_support():
    rng = np.random.default_rng(4)
    values = np.concatenate([np.zeros(50), rng.lognormal(2.0, 0.5, size=3000)])
    name, params, ks = fit_best_distribution(values)
    assert np.isfinite(params).all() and np.isfinite(ks)
    out = distribution_mask(values, np.arange(values.shape[0]), np.random.default_rng(0))
    assert np.isfinite(out).all()
    assert name in ("norm", "lognorm", "gamma", "expon", "weibull_min")


def test_rank_preserved_with_ties():
    rng = np.random.default_rng(6)
    values = rng.integers(0, 20, size=800).astype(float) + 1.0
    tiebreak = rng.permutation(800)
    out = distribution_mask(values, tiebreak, np.random.default_rng(1))
    assert (np.diff(out[np.lexsort((tiebreak, values))]) >= 0).all()


def test_precomputed_global_fit_for_blocks(lognormal):
    fit = fit_best_distribution(lognormal)
    block = lognormal[:100]
    out = distribution_mask(block, np.arange(100), np.random.default_rng(0), fit=fit)
    assert out.shape == (100,)
    assert (np.diff(out[np.argsort(block, kind="stable")]) >= 0).all()


def test_constant_and_tiny_columns_unchanged():
    values = np.full(10, 3.5)
    out = distribution_mask(values, np.arange(10), np.random.default_rng(0))
    np.testing.assert_array_equal(out, values)
    assert out is not values
    np.testing.assert_array_equal(distribution_mask(np.array([2.0]), np.array([0]), np.random.default_rng(0)), [2.0])
    assert distribution_mask(np.array([]), np.array([]), np.random.default_rng(0)).shape == (0,)
    with pytest.raises(ValueError, match="constant"):
        fit_best_distribution(values)


def test_fitting_sample_is_evenly_spaced_order_statistics():
    values = np.arange(1_000_001, dtype=float)[::-1]
    sample = fitting_sample(values, limit=101)
    np.testing.assert_array_equal(sample, np.arange(0, 1_000_001, 10_000))
    np.testing.assert_array_equal(fitting_sample(np.array([3.0, 1.0, 2.0])), [1.0, 2.0, 3.0])


def test_validation():
    with pytest.raises(ValueError, match="row 2"):
        fit_best_distribution(np.array([1.0, 2.0, np.nan]))
    with pytest.raises(ValueError, match="tiebreak"):
        distribution_mask(np.array([1.0, 2.0]), np.arange(3), np.random.default_rng(0))
