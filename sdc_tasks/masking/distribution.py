"""Data distortion by probability distribution (Distr, Liew et al. 1985): pure kernels (numpy in, numpy out).

Source: sdc_methods_comparison_chapter.txt sec. 2 (Data distortion by probability distribution, Distr):
"For each variable in the original microdataset, the best fitting distribution is found; then the fitted
distribution is used to generate the masked dataset. There are no parameters." The chapter used Crystal
Ball to pick the distribution; here the choice is made as follows (a project decision, not the chapter's):

- candidates: for data with no negative value, norm, lognorm, gamma, expon and weibull_min (skewed,
  non-negative families plus the normal); for data with a negative value, norm, logistic and t;
- fitting: maximum likelihood (``scipy.stats.<dist>.fit``) on at most ``MAX_FIT_VALUES`` = 100,000 values,
  the evenly spaced order statistics sorted[round(linspace(0, n - 1, 100000))] when n is larger
  (deterministic, keeps the shape of the empirical distribution);
- the non-negative families are fitted with a fixed location loc0: 0 when every value is > 0, and
  loc0 = -1e-3 * sd when the minimum is 0, so that zeros lie inside the support (log 0 is undefined for
  lognorm; likewise gamma and weibull_min with shape < 1 have infinite density at loc). Free-location MLE
  for these families is unstable (the likelihood is unbounded as loc approaches the minimum);
- selection: the smallest Kolmogorov-Smirnov statistic D = sup |F_n - F| of the fitted distribution on the
  fitting values (used as a distance, not as a test, since the parameters are estimated from the same
  values); ties go to the earlier candidate, and a candidate whose fit fails or gives non-finite
  parameters is skipped.

Masking: n values are drawn from the chosen distribution, sorted, and assigned by rank (the record of rank
i, ranking stably by (value, tiebreak), gets the i-th smallest draw), so ranks are preserved. Draws are
not truncated to the original range (a normal fitted to non-negative data can give negative values).
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from sdc_tasks.masking.checks import finite_array
from sdc_tasks.stats.order import value_order

MAX_FIT_VALUES = 100_000
NON_NEGATIVE_CANDIDATES = ("norm", "lognorm", "gamma", "expon", "weibull_min")
GENERAL_CANDIDATES = ("norm", "logistic", "t")
_LOCATED = frozenset({"lognorm", "gamma", "expon", "weibull_min"})


def _check_values(values: object) -> np.ndarray:
    """Return ``values`` as a 1-D float64 array with finite values (ValueError naming the first bad row)."""
    return finite_array(values, "values", 1)


def fitting_sample(values: np.ndarray, limit: int = MAX_FIT_VALUES) -> np.ndarray:
    """Return the sorted values, or ``limit`` evenly spaced order statistics of them when n > limit."""
    ordered = np.sort(np.asarray(values, dtype=np.float64))
    if ordered.shape[0] <= limit:
        return ordered
    return ordered[np.round(np.linspace(0, ordered.shape[0] - 1, limit)).astype(np.int64)]


def _scipy_stats(name: str):
    """``scipy.stats.<name>``, a distribution family or a test (scipy.stats imported on first use: a process that
    masks by other methods does not load it)."""
    from scipy import stats

    return getattr(stats, name)


def _fit_one(name: str, sample: np.ndarray, loc0: float) -> tuple[float, ...] | None:
    """MLE fit of one candidate (fixed loc for the non-negative families); None if it fails."""
    dist = _scipy_stats(name)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            params = dist.fit(sample, floc=loc0) if name in _LOCATED else dist.fit(sample)
    except Exception:  # noqa: BLE001 - any optimizer failure just removes the candidate
        return None
    params = tuple(float(v) for v in params)
    if not all(math.isfinite(v) for v in params) or params[-1] <= 0:
        return None
    return params


def fit_best_distribution(values: np.ndarray) -> tuple[str, tuple[float, ...], float]:
    """Return (scipy.stats name, params, KS statistic) of the best fitting candidate distribution.

    sdc_methods_comparison_chapter.txt sec. 2 (Distr, Liew et al. 1985): "the best fitting distribution
    is found". Candidates, fitting and the Kolmogorov-Smirnov selection are described in the module
    docstring; ``params`` is scipy's (shapes..., loc, scale) tuple. Raises ValueError for an empty or
    constant column (nothing to fit) and naming the first row holding a non-finite value.
    """
    vals = _check_values(values)
    if vals.shape[0] == 0:
        raise ValueError("values is empty; nothing to fit")
    sample = fitting_sample(vals)
    if sample[0] == sample[-1]:
        raise ValueError("values is constant; nothing to fit")
    non_negative = sample[0] >= 0
    candidates = NON_NEGATIVE_CANDIDATES if non_negative else GENERAL_CANDIDATES
    loc0 = 0.0 if sample[0] > 0 else -1e-3 * float(sample.std())
    best: tuple[str, tuple[float, ...], float] | None = None
    for name in candidates:
        params = _fit_one(name, sample, loc0)
        if params is None:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ks = float(_scipy_stats("kstest")(sample, _scipy_stats(name)(*params).cdf).statistic)
        if math.isfinite(ks) and (best is None or ks < best[2]):
            best = (name, params, ks)
    if best is None:
        raise ValueError("no candidate distribution could be fitted to values")
    return best


def distribution_mask(
    values: np.ndarray,
    tiebreak: np.ndarray,
    rng: np.random.Generator,
    fit: tuple[str, tuple[float, ...], float] | None = None,
) -> np.ndarray:
    """Return the Distr-masked column in the original row order: rank i gets the i-th smallest draw.

    sdc_methods_comparison_chapter.txt sec. 2 (Distr, Liew et al. 1985): the fitted distribution
    (``fit`` from :func:`fit_best_distribution`, fitted on ``values`` when None; pass a fit made on the
    whole file to mask a block of it) generates n values (``dist.rvs(size=n, random_state=rng)``), which
    are sorted and assigned by the stable (value, tiebreak) ranks of ``values``.

    Decision: a constant column (including n <= 1) has no distribution to fit and is returned unchanged
    (a copy), since any fitted distribution would be degenerate at that value anyway.
    """
    vals = _check_values(values)
    ties = np.asarray(tiebreak)
    if ties.shape != vals.shape:
        raise ValueError(f"tiebreak must have shape {vals.shape}, got {ties.shape}")
    n = vals.shape[0]
    if fit is None:
        if n == 0 or vals.min() == vals.max():
            return vals.copy()
        fit = fit_best_distribution(vals)
    name, params, _ = fit
    draws = np.sort(np.asarray(_scipy_stats(name).rvs(*params, size=n, random_state=rng), dtype=np.float64))
    out = np.empty(n, dtype=np.float64)
    out[value_order(vals, ties)] = draws
    return out
