"""Additive noise masking: pure block kernels (numpy in, numpy out).

Sources:
- statistical_databases_survey.txt, Additive noise: uncorrelated noise z_j = x_j + eps_j with
  eps_j ~ N(0, sigma_eps_j^2) and Cov(eps_t, eps_l) = 0 for t != l; correlated noise
  eps ~ N(0, Sigma_eps) with Sigma_eps = alpha Sigma, Sigma the covariance matrix of the original data;
  noise addition and linear transformation (Kim 1986, reference [15]): "ensures by additional
  transformations that the sample covariance matrix of the masked attributes is an unbiased estimator
  for the covariance matrix of the original attributes".
- sdc_methods_comparison_chapter.txt sec. 2 (Additive noise, "Noise p"): if the standard deviation of
  the original variable is s, noise is generated using a N(0, p s).

The kernels take their standard normals from the caller (for instance
:func:`sdc_tasks.record_random.record_normals`, keyed by record id) and every global quantity
(standard deviations, covariance matrix, n, means) as arguments, so a distributed file can be masked
block by block with the same result as the whole file at once.
"""

from __future__ import annotations

import math

import numpy as np


def _check_positive(name: str, value: object) -> float:
    """Return ``value`` as a float after checking it is a finite number > 0 (ValueError naming it)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float, np.integer, np.floating))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def _as_block(name: str, x: object) -> np.ndarray:
    """Return ``x`` as a float64 array of 1 or 2 dimensions with finite values (ValueError naming it)."""
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim not in (1, 2):
        raise ValueError(f"{name} must be 1-D or 2-D, got {arr.ndim} dimensions")
    finite = np.isfinite(arr)
    if not finite.all():
        row = int(np.argwhere(~finite)[0][0])
        raise ValueError(f"{name} has a non-finite value in row {row}")
    return arr


def _check_normals(normals: object, shape: tuple[int, ...]) -> np.ndarray:
    """Return ``normals`` as float64 after checking it has the block's shape and finite values."""
    arr = _as_block("normals", normals)
    if arr.shape != shape:
        raise ValueError(f"normals must have shape {shape}, got {arr.shape}")
    return arr


def uncorrelated_noise(x: np.ndarray, p: float, sd: np.ndarray, normals: np.ndarray) -> np.ndarray:
    """Return x + p * sd_j * normals: Noise p, independent Gaussian noise N(0, p s_j) per variable.

    sdc_methods_comparison_chapter.txt sec. 2 (Additive noise): noise N(0, p s) where s is the standard
    deviation of the original variable (here ``sd``, one per column, computed on the whole original file by
    the caller); statistical_databases_survey.txt, Additive noise (uncorrelated: z_j = x_j + eps_j,
    eps_j ~ N(0, sigma_eps_j^2) with sigma_eps_j = p s_j, Cov(eps_t, eps_l) = 0).
    ``x`` is (n, m) (or (n,) for one variable), ``sd`` has shape (m,) (or is a scalar) and ``normals``
    has x's shape. Raises ValueError naming ``p`` unless p is a finite number > 0.
    """
    p = _check_positive("p", p)
    block = _as_block("x", x)
    sds = np.asarray(sd, dtype=np.float64)
    width = block.shape[1] if block.ndim == 2 else 1
    if sds.ndim > 1 or (sds.ndim == 1 and sds.shape[0] != width) or (block.ndim == 1 and sds.ndim == 1):
        expected = f"({width},)" if block.ndim == 2 else "a scalar"
        raise ValueError(f"sd must be {expected} (one standard deviation per column), got shape {sds.shape}")
    if not (np.isfinite(sds) & (sds >= 0)).all():
        raise ValueError(f"sd must hold finite values >= 0, got {sds!r}")
    z = _check_normals(normals, block.shape)
    return block + p * sds * z


def noise_factor(cov: np.ndarray, alpha: float) -> np.ndarray:
    """Return L with L L^T = alpha * Sigma: Cholesky, or V diag(sqrt(w)) if Sigma is only semi-definite.

    statistical_databases_survey.txt, Additive noise (correlated: Sigma_eps = alpha Sigma). When the
    Cholesky factorization fails (singular Sigma, e.g. a constant or collinear variable), the symmetric
    eigendecomposition alpha Sigma = V diag(w) V^T is used with eigenvalues above -1e-10 max|w| clipped
    to 0; a clearly negative eigenvalue raises ValueError naming ``cov``.
    """
    alpha = _check_positive("alpha", alpha)
    sigma = np.asarray(cov, dtype=np.float64)
    if sigma.ndim != 2 or sigma.shape[0] != sigma.shape[1]:
        raise ValueError(f"cov must be a square matrix, got shape {sigma.shape}")
    if not np.isfinite(sigma).all():
        raise ValueError("cov has a non-finite entry")
    scale = float(np.abs(sigma).max()) if sigma.size else 0.0
    if not np.allclose(sigma, sigma.T, rtol=1e-10, atol=1e-12 * scale):
        raise ValueError("cov must be symmetric")
    target = alpha * 0.5 * (sigma + sigma.T)
    try:
        return np.linalg.cholesky(target)
    except np.linalg.LinAlgError:
        pass
    w, v = np.linalg.eigh(target)
    tol = 1e-10 * float(np.abs(w).max()) if w.size else 0.0
    if w.size and w.min() < -tol:
        raise ValueError(f"cov must be positive semi-definite, smallest eigenvalue {w.min() / alpha!r}")
    return v * np.sqrt(np.clip(w, 0.0, None))


def correlated_noise(x: np.ndarray, alpha: float, cov: np.ndarray, normals: np.ndarray) -> np.ndarray:
    """Return z = x + normals @ L^T with L L^T = alpha * Sigma, i.e. eps ~ N(0, alpha Sigma) per record.

    statistical_databases_survey.txt, Additive noise (correlated: eps ~ N(0, Sigma_eps),
    Sigma_eps = alpha Sigma, Sigma the covariance matrix of the original data, passed as ``cov``,
    computed on the whole file by the caller). If the rows of ``normals`` are i.i.d. N(0, I), the rows of
    normals @ L^T are N(0, alpha Sigma), so Cov(z) = (1 + alpha) Sigma in expectation. ``x`` and
    ``normals`` are (n, m), ``cov`` is (m, m); L comes from :func:`noise_factor`. Raises ValueError
    naming ``alpha`` unless alpha is a finite number > 0.
    """
    alpha = _check_positive("alpha", alpha)
    block = _as_block("x", x)
    if block.ndim != 2:
        raise ValueError(f"x must be 2-D (records x variables), got {block.ndim} dimensions")
    factor = noise_factor(cov, alpha)
    if factor.shape[0] != block.shape[1]:
        raise ValueError(f"cov must be ({block.shape[1]}, {block.shape[1]}), got {factor.shape}")
    z = _check_normals(normals, block.shape)
    return block + z @ factor.T


def kim_constant(n: int, alpha: float) -> float:
    """Return c = sqrt((n - 1) / (n (1 + alpha) - 1)), the scale of Kim's linear transformation.

    statistical_databases_survey.txt, Additive noise (noise addition and linear transformation, Kim 1986
    [15]) states only the goal (the masked sample covariance matrix is an unbiased estimator of the
    original one); it gives no formula. This constant is the one commonly quoted for Kim's method in the
    secondary literature; Kim 1986 itself is not among the seed files, so it is not checked against the
    original paper. Since correlated noise gives E[S_zz] ~ (1 + alpha) Sigma,
    c^2 (1 + alpha) = (n - 1) (1 + alpha) / (n (1 + alpha) - 1) = 1 + O(1/n), i.e. c -> 1/sqrt(1 + alpha).
    """
    alpha = _check_positive("alpha", alpha)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 2:
        raise ValueError(f"n must be an integer >= 2 (records in the whole file), got {n!r}")
    return math.sqrt((n - 1) / (n * (1.0 + alpha) - 1.0))


def kim_transform(
    z: np.ndarray,
    alpha: float,
    mean: np.ndarray,
    n: int,
    noised_mean: np.ndarray | None = None,
) -> np.ndarray:
    """Return Kim's linear transformation g = c z + d of a correlated-noise block z = x + eps.

    statistical_databases_survey.txt, Additive noise (noise addition and linear transformation, Kim 1986
    [15]): masked data whose sample covariance matrix estimates the original one without bias and whose
    means are the original means. With c = :func:`kim_constant` (n, alpha) (n = records of the WHOLE file,
    alpha the correlated-noise factor of Sigma_eps = alpha Sigma):

    - ``noised_mean`` None (Kim's d): g = c z + (1 - c) xbar, d = (1 - c) xbar. Means are restored in
      expectation (E[zbar] = xbar), not exactly;
    - ``noised_mean`` = zbar, the global mean of the noised file: g = c (z - zbar) + xbar, i.e.
      d = xbar - c zbar, so the mean of g over the whole file equals xbar exactly (same covariance as Kim's).

    Only global quantities (n, alpha, xbar = ``mean`` of the original, zbar) enter, so the transform is
    applied block by block. ``z`` is (n_block, m) or (n_block,); ``mean``/``noised_mean`` have shape (m,)
    (or are scalars for a 1-D block).
    """
    c = kim_constant(n, alpha)
    block = _as_block("z", z)
    width = block.shape[1] if block.ndim == 2 else None

    def _vector(name: str, value: object) -> np.ndarray:
        vec = np.asarray(value, dtype=np.float64)
        ok = vec.shape == (width,) if width is not None else vec.ndim == 0
        if not ok:
            raise ValueError(f"{name} must have shape {(width,) if width is not None else ()}, got {vec.shape}")
        if not np.isfinite(vec).all():
            raise ValueError(f"{name} has a non-finite value")
        return vec

    xbar = _vector("mean", mean)
    if noised_mean is None:
        return c * block + (1.0 - c) * xbar
    zbar = _vector("noised_mean", noised_mean)
    return c * (block - zbar) + xbar
