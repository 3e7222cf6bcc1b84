"""Additive noise kernels: Noise p, correlated noise alpha Sigma, Kim's linear transformation.

Reference: statistical_databases_survey.txt, Additive noise; sdc_methods_comparison_chapter.txt sec. 2
(Additive noise, Noise p with N(0, p s)).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from sdc_tasks.masking.noise import correlated_noise, kim_constant, kim_transform, noise_factor, uncorrelated_noise
from sdc_tasks.record_random import record_normals

SIGMA = np.array([[4.0, 1.2, -0.6], [1.2, 1.0, 0.3], [-0.6, 0.3, 2.25]])
MEAN = np.array([10.0, -3.0, 100.0])
N = 200_000


@pytest.fixture(scope="module")
def original():
    rng = np.random.default_rng(11)
    return rng.multivariate_normal(MEAN, SIGMA, size=N)


def test_uncorrelated_noise_sd_ratio(original):
    sd = original.std(axis=0, ddof=1)
    p = 0.16
    z = uncorrelated_noise(original, p, sd, record_normals(5, 0, np.arange(N), 3))
    noise = z - original
    np.testing.assert_allclose(noise.std(axis=0) / sd, p, rtol=0.01)
    np.testing.assert_allclose(noise.mean(axis=0) / sd, 0.0, atol=0.01)
    # independent across variables
    corr = np.corrcoef(noise, rowvar=False)
    assert np.abs(corr - np.eye(3)).max() < 0.01


def test_uncorrelated_noise_hand_values_and_1d():
    x = np.array([[1.0, 10.0], [2.0, 20.0]])
    normals = np.array([[1.0, -1.0], [0.5, 2.0]])
    np.testing.assert_allclose(
        uncorrelated_noise(x, 0.1, np.array([2.0, 5.0]), normals), [[1.2, 9.5], [2.1, 21.0]]
    )
    np.testing.assert_allclose(uncorrelated_noise(np.array([1.0, 2.0]), 0.5, 2.0, np.array([1.0, -1.0])), [2.0, 1.0])


def test_correlated_noise_covariance(original):
    alpha = 0.5
    cov = np.cov(original, rowvar=False)
    z = correlated_noise(original, alpha, cov, record_normals(5, 1, np.arange(N), 3))
    np.testing.assert_allclose(np.cov(z - original, rowvar=False), alpha * cov, atol=0.02 * np.abs(cov).max())
    np.testing.assert_allclose(np.cov(z, rowvar=False), (1 + alpha) * cov, atol=0.03 * np.abs(cov).max())
    # correlations are preserved
    np.testing.assert_allclose(np.corrcoef(z, rowvar=False), np.corrcoef(original, rowvar=False), atol=0.01)


def test_noise_factor_singular_covariance():
    # third variable = first + second: Sigma is singular, Cholesky fails, eigen factor is used
    base = np.array([[1.0, 0.2], [0.2, 2.0]])
    a = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    singular = a @ base @ a.T
    factor = noise_factor(singular, 0.3)
    np.testing.assert_allclose(factor @ factor.T, 0.3 * singular, atol=1e-12)
    pd_factor = noise_factor(SIGMA, 2.0)
    np.testing.assert_allclose(pd_factor, np.linalg.cholesky(2.0 * SIGMA))


def test_kim_transform_restores_means_exactly_and_covariance(original):
    alpha = 0.3
    cov = np.cov(original, rowvar=False)
    xbar = original.mean(axis=0)
    z = correlated_noise(original, alpha, cov, record_normals(9, 0, np.arange(N), 3))
    zbar = z.mean(axis=0)
    # block by block with global quantities only
    blocks = [kim_transform(part, alpha, xbar, N, noised_mean=zbar) for part in np.array_split(z, 7)]
    g = np.concatenate(blocks)
    np.testing.assert_allclose(g, kim_transform(z, alpha, xbar, N, noised_mean=zbar), rtol=0, atol=1e-12)
    np.testing.assert_allclose(g.mean(axis=0), xbar, rtol=0, atol=1e-9)
    np.testing.assert_allclose(np.cov(g, rowvar=False), cov, atol=0.03 * np.abs(cov).max())
    np.testing.assert_allclose(np.diag(np.cov(g, rowvar=False)) / np.diag(cov), 1.0, atol=0.03)
    # Kim's d = (1 - c) xbar: means restored in expectation, same spread
    g_kim = kim_transform(z, alpha, xbar, N)
    assert (np.abs(g_kim.mean(axis=0) - xbar) < 0.01 * np.sqrt(np.diag(cov))).all()
    np.testing.assert_allclose(g_kim - g_kim.mean(axis=0), g - g.mean(axis=0), atol=1e-9)


def test_kim_constant():
    assert kim_constant(2, 1.0) == pytest.approx(math.sqrt(1 / 3))
    assert kim_constant(10**9, 0.44) == pytest.approx(1 / 1.2, rel=1e-8)
    x = np.array([[1.0], [3.0]])
    c = kim_constant(4, 0.5)
    np.testing.assert_allclose(kim_transform(x, 0.5, np.array([2.0]), 4), c * x + (1 - c) * 2.0)
    one = np.array([1.0, 3.0])
    np.testing.assert_allclose(kim_transform(one, 0.5, 2.0, 4, noised_mean=2.5), c * (one - 2.5) + 2.0)


@pytest.mark.parametrize("bad", [0, -0.1, float("nan"), float("inf"), True, "0.1"])
def test_validation_names_the_parameter(bad):
    x = np.ones((3, 2))
    with pytest.raises(ValueError, match=r"\bp\b"):
        uncorrelated_noise(x, bad, np.ones(2), np.zeros((3, 2)))
    with pytest.raises(ValueError, match="alpha"):
        correlated_noise(x, bad, np.eye(2), np.zeros((3, 2)))
    with pytest.raises(ValueError, match="alpha"):
        kim_transform(x, bad, np.zeros(2), 3)


def test_validation_shapes():
    x = np.ones((3, 2))
    with pytest.raises(ValueError, match="normals"):
        uncorrelated_noise(x, 0.1, np.ones(2), np.zeros((3, 3)))
    with pytest.raises(ValueError, match="sd"):
        uncorrelated_noise(x, 0.1, np.ones(3), np.zeros((3, 2)))
    with pytest.raises(ValueError, match="cov"):
        correlated_noise(x, 0.1, np.eye(3), np.zeros((3, 2)))
    with pytest.raises(ValueError, match="cov"):
        correlated_noise(x, 0.1, np.array([[1.0, 0.5], [0.0, 1.0]]), np.zeros((3, 2)))
    with pytest.raises(ValueError, match="cov"):
        noise_factor(np.array([[1.0, 2.0], [2.0, 1.0]]), 1.0)
    with pytest.raises(ValueError, match="row 1"):
        uncorrelated_noise(np.array([[1.0, 2.0], [np.nan, 1.0]]), 0.1, np.ones(2), np.zeros((2, 2)))
    with pytest.raises(ValueError, match=r"\bn\b"):
        kim_transform(x, 0.1, np.zeros(2), 1)
    with pytest.raises(ValueError, match="noised_mean"):
        kim_transform(x, 0.1, np.zeros(2), 3, noised_mean=np.zeros(3))


@pytest.mark.parametrize("correlated", [False, True])
def test_noise_step_equals_the_unscaled_formula_and_moves_values_near_1e_minus_300(correlated):
    # the step draws its noise for the variables scaled by powers of two: bit for bit x + normals @ L^T with
    # L L^T = p^2 Sigma on ordinary data; on values near 1e-300, whose variance underflows to 0, still noise
    import dask.dataframe as dd
    import pandas as pd

    from sdc_tasks.masking.apply import StepContext
    from sdc_tasks.masking.methods import apply_step
    from sdc_tasks.masking.registry import validate_params

    rng = np.random.default_rng(3)
    x = np.column_stack([rng.normal(50.0, 10.0, 40), rng.gamma(2.0, 300.0, 40)])
    x[:, 1] += 0.5 * x[:, 0]
    frame = pd.DataFrame({"record_id": np.arange(40), "a": x[:, 0], "b": x[:, 1]})
    params = validate_params("noise", {"p": 0.5, "correlated": correlated})

    def noised(df: pd.DataFrame) -> np.ndarray:
        step = apply_step(dd.from_pandas(df, npartitions=3, sort=False), "noise", ["a", "b"], params,
                          StepContext(seed=4, step=0, id_column="record_id"))
        return step.frame.compute(scheduler="synchronous")[["a", "b"]].to_numpy()

    normals = record_normals(4, 0, frame["record_id"].to_numpy(), 2)
    cov = np.cov(x, rowvar=False, bias=True)
    sigma = cov if correlated else np.diag(np.diag(cov))
    expected = correlated_noise(x, 0.25, sigma, normals)
    np.testing.assert_allclose(noised(frame), expected, rtol=1e-13)
    tiny = pd.DataFrame({"record_id": [0, 1], "a": [1e-300, -1e-300], "b": [2e-300, 3e-300]})
    moved = noised(tiny)
    assert np.isfinite(moved).all() and (moved != tiny[["a", "b"]].to_numpy()).all()
    assert np.abs(moved - tiny[["a", "b"]].to_numpy()).max() < 1e-298
