"""Probabilistic information loss PIL(Q), PIL(m1), PIL(m2), PIL(m11), PIL(r) and PIL (Mateo-Sanz et al.).

Source: pil_measures.txt sec. 4 (the measures, eq. (1)-(5), the variances of sec. 4.4) and
sec. 5 (PIL(Q) over the quantiles 5 %..95 %, PIL = 100 * mean of the five); names and conventions in
docs/metrics.md (PIL_* rows, "undefined terms" rule).

The original file X is the population (n records), the masked file X' the sample (n' records). Population
parameters theta always come from X (``mo``, an order-4 Moments sketch), statistics theta_hat from X'
(``mm``). Every variance is the simple-random-sampling variance of sec. 4.4 with the masked size n'.

Conventions decided here (documented in each function):

- ``pil(d, 0)``: a term whose sampling variance is 0 has loss 0 if the statistic is reproduced exactly
  (d == 0) and is *undefined* otherwise (an infinite z-score has no probability content worth averaging);
  undefined terms are returned as NaN by :func:`pil` and then left out and counted by the callers
  (docs/metrics.md: ``<key>_undefined_terms``), never reported as NaN or inf.
- Rounding guard: a discrepancy smaller than ``RTOL`` times the magnitude of the statistic (the floating
  point resolution of the sums, with a wide margin) counts as d == 0, and a variance computed as a
  difference of moments (sec. 4.4) that is within ``RTOL`` of the magnitude of its terms counts as 0.
  This changes any pil value by at most about RTOL * sqrt(n'), and makes "statistic preserved"
  (rank swapping, microaggregation means) give exactly 0 and a constant column give undefined terms
  rather than noise.
- Quantiles: numpy's default 'linear' method (Hyndman-Fan type 7, Q_q at position (n - 1) q of the sorted
  values) for both X and X'.
"""

from __future__ import annotations

import numpy as np
from scipy.special import erf

from sdc_tasks.stats.moments import Moments
from sdc_tasks.stats.order import linear_quantiles, ordered

RTOL = 1e-12
"""Relative rounding guard (see module docstring): far above float64 rounding of the centred sums, far below
any information loss that matters (a discrepancy of RTOL standard errors has pil ~ 0.8 RTOL)."""

QUANTILES = np.arange(5, 100, 5) / 100
"""q = 0.05, 0.10, ..., 0.95 (pil_measures.txt sec. 5, PIL(Q))."""

SMALL_SAMPLE = 100
"""n' below which the normal approximation of sec. 4.1 is weak (Kendall et al.: n' > 100)."""

MEASURES = ("PIL_Q", "PIL_m1", "PIL_m2", "PIL_m11", "PIL_r")


def pil(discrepancy: np.ndarray, variance: np.ndarray) -> np.ndarray:
    """pil = 2 P(0 <= Z <= |d| / sqrt(var)) = 2 Phi(|d| / sqrt(var)) - 1 = erf(|d| / sqrt(2 var)).

    pil_measures.txt sec. 4.1, eq. (1), with d = theta_hat - theta and var = Var(Theta_hat) (sec. 4.4).
    Values lie in [0, 1). Undefined terms are NaN (callers count and drop them):
    - var == 0 and d == 0: 0 (the statistic is reproduced exactly, so nothing is lost);
    - var == 0 and d != 0: NaN (the z-score is infinite; docs/metrics.md: variance 0 -> term undefined);
    - var < 0, or d or var not finite: NaN.
    """
    d = np.abs(np.asarray(discrepancy, dtype=np.float64))
    v = np.asarray(variance, dtype=np.float64)
    d, v = np.broadcast_arrays(d, v)
    out = np.full(d.shape, np.nan)
    finite = np.isfinite(d) & np.isfinite(v)
    positive = finite & (v > 0)
    out[positive] = erf(d[positive] / np.sqrt(2.0 * v[positive]))
    out[finite & (v == 0) & (d == 0)] = 0.0
    return out


def _defined(values: np.ndarray) -> tuple[np.ndarray, int]:
    """The finite entries of ``values`` (1-D) and how many were left out."""
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    ok = np.isfinite(v)
    return v[ok], int((~ok).sum())


def _snap(d: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Rounding guard: discrepancies with |d| <= RTOL * scale are set to exactly 0 (module docstring)."""
    return np.where(np.abs(d) <= RTOL * scale, 0.0, d)


def _floor(var: np.ndarray, terms: np.ndarray) -> np.ndarray:
    """Rounding guard: a variance within RTOL * (sum of |terms| it was computed from) of 0 becomes 0."""
    return np.where(np.abs(var) <= RTOL * terms, 0.0, var)


def quantile_pil(sorted_orig, sorted_masked, qs: np.ndarray = QUANTILES) -> tuple[np.ndarray, int]:
    """pil(Q_q) of one attribute for each q in ``qs``: the defined values and the number of undefined terms.

    pil_measures.txt sec. 4.3 (quantile comparison) and sec. 4.4:
    - Q_q of X (population) and of X' (sample): numpy's default 'linear' method (type 7) on the sorted
      values, i.e. position (n - 1) q with linear interpolation between the neighbouring order statistics;
    - density f(Q_q) of X: the proportion of original records in the OPEN interval (Q_q - eps, Q_q + eps),
      eps = (max - min) / 1000, divided by the width 2 eps (sec. 4.4);
    - Var(Q_q) = q (1 - q) / (n' f^2) (sec. 4.4), n' = the masked column's size; pil by eq. (1).
    A term is undefined when the range of X is 0 or no original record lies in the interval (f = 0).
    Both inputs are sorted ascending (they are not re-sorted): numpy arrays, or sorted columns read through
    :mod:`sdc_tasks.stats.order` (a column sorted across partitions), with the same result.
    """
    xo, xm = ordered(sorted_orig), ordered(sorted_masked)
    q = np.asarray(qs, dtype=np.float64).reshape(-1)
    if xo.n == 0 or xm.n == 0:
        return np.empty(0), int(q.size)
    n, n_masked = xo.n, xm.n
    low, high = xo.at(np.array([0, n - 1]))
    eps = (high - low) / 1000.0
    if not np.isfinite(eps) or eps <= 0:
        return np.empty(0), int(q.size)
    theta = linear_quantiles(xo, q)
    theta_hat = linear_quantiles(xm, q)
    inside = xo.count_below(theta + eps, "left") - xo.count_below(theta - eps, "right")
    f = inside / (n * 2.0 * eps)
    with np.errstate(divide="ignore", over="ignore"):
        var = np.where(f > 0, q * (1.0 - q) / (n_masked * np.where(f > 0, f, 1.0) ** 2), np.nan)
    scale = np.maximum(np.abs(theta), np.abs(theta_hat))
    return _defined(pil(_snap(theta_hat - theta, scale), var))


def _var_r(mo: Moments, n_masked: int) -> np.ndarray:
    """Var(r) of sec. 4.4 (Kendall et al. ch. 10) for every pair, (p, p), with rho the population correlation:

    Var(r) = rho^2 / n' { mu22 / mu11^2 + 1/4 (mu40 / mu20^2 + mu04 / mu02^2 + 2 mu22 / (mu20 mu02))
                          - (mu31 / (mu11 mu20) + mu13 / (mu11 mu02)) }     (pil_measures.txt sec. 4.4).

    Written exactly as in the paper where mu11 != 0; where mu11 == 0 (rho = 0) the paper's expression is
    0 * inf, and its limit rho^2 mu22 / mu11^2 -> mu22 / (mu20 mu02) (the other terms vanish) is used.
    NaN where mu20 or mu02 is 0 (rho undefined). Variances within the rounding guard of 0 become 0.
    """
    mu11, mu22 = mo.mu_rs(1, 1), mo.mu_rs(2, 2)
    mu20, mu02 = mo.mu_rs(2, 0), mo.mu_rs(0, 2)
    mu40, mu04 = mo.mu_rs(4, 0), mo.mu_rs(0, 4)
    mu31, mu13 = mo.mu_rs(3, 1), mo.mu_rs(1, 3)
    ok = (mu20 > 0) & (mu02 > 0)
    zero_cov = ok & (mu11 == 0)
    full = ok & ~zero_cov
    one = np.where(ok, 1.0, np.nan)
    a20, a02 = mu20 * one, mu02 * one
    c11 = np.where(full, mu11, np.nan)
    rho2 = c11 ** 2 / (a20 * a02)
    terms = [mu22 / c11 ** 2, 0.25 * mu40 / a20 ** 2, 0.25 * mu04 / a02 ** 2, 0.25 * 2.0 * mu22 / (a20 * a02),
             -mu31 / (c11 * a20), -mu13 / (c11 * a02)]
    braces = sum(terms)
    var = _floor(rho2 * braces, rho2 * sum(np.abs(t) for t in terms)) / n_masked
    limit = mu22 / (a20 * a02) / n_masked
    return np.where(zero_cov, limit, np.where(full, var, np.nan))


def moment_pils(mo: Moments, mm: Moments) -> dict[str, tuple[np.ndarray, int]]:
    """pil values (defined terms) and undefined-term counts for m1, m2 (per attribute) and m11, r (pairs j < j').

    pil_measures.txt sec. 4.2 (moments divide by n), sec. 4.3 (the statistics), sec. 4.4 (variances), eq. (1):
    - m1  (mean):        Var(m1^0) = mu_2 / n'
    - m2  (variance):    Var(m_2)  = (mu_4 - mu_2^2) / n'
    - m11 (covariance):  Var(m_11) = (mu_22 - mu_11^2) / n'
    - r   (Pearson):     Var(r) as in :func:`_var_r`; a pair is undefined when rho or r' is (a zero variance).
    ``mo``: the original file (population, needs ``order=4``); ``mm``: the masked file (sample, n' = mm.n;
    order 2 is enough: only its means, variances, covariances and correlations are used).
    """
    if mo.order != 4:
        raise ValueError("the original file's Moments must have order 4 (moments_of(x, order=4))")
    if mo.mean.shape != mm.mean.shape:
        raise ValueError(f"original and masked files have {mo.mean.size} and {mm.mean.size} attributes")
    n_masked = mm.n
    if n_masked < 1:
        raise ValueError("the masked file has no record")
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return _moment_pils(mo, mm, n_masked)


def _moment_pils(mo: Moments, mm: Moments, n_masked: int) -> dict[str, tuple[np.ndarray, int]]:
    """Body of :func:`moment_pils` (0/0 and inf cases are turned into undefined terms, never returned)."""
    p = mo.mean.size
    strict = np.triu_indices(p, k=1)

    mu2, mu4 = mo.mu(2), mo.mu(4)
    raw2 = np.maximum(mu2 + mo.mean ** 2, mm.mu(2) + mm.mean ** 2)  # magnitude of x^2, for the guard
    # An attribute of X is constant when its sd is within the guard of its magnitude: all its variances are 0.
    const = mu2 <= (RTOL ** 2) * raw2
    # sec. 4.4: Var(m1^0) = mu_2 / n'
    var_m1 = np.where(const, 0.0, mu2) / n_masked
    d_m1 = _snap(mm.mean - mo.mean, np.sqrt(raw2))
    # sec. 4.4: Var(m_2) = (mu_4 - mu_2^2) / n'
    var_m2 = np.where(const, 0.0, _floor(mu4 - mu2 ** 2, mu4 + mu2 ** 2)) / n_masked
    d_m2 = _snap(mm.mu(2) - mu2, raw2)
    # sec. 4.4: Var(m_11) = (mu_22 - mu_11^2) / n'
    mu11, mu22 = mo.mu_rs(1, 1), mo.mu_rs(2, 2)
    pair_const = const[:, None] | const[None, :]
    var_m11 = np.where(pair_const, 0.0, _floor(mu22 - mu11 ** 2, mu22 + mu11 ** 2)) / n_masked
    d_m11 = _snap(mm.mu_rs(1, 1) - mu11, np.sqrt(np.outer(raw2, raw2)))
    # sec. 4.2: rho = mu11 / (mu20 mu02)^(1/2) on X, r = m11 / (m20 m02)^(1/2) on X'
    rho, rho_ok = mo.corr()
    r, r_ok = mm.corr()
    masked_const = mm.mu(2) <= (RTOL ** 2) * raw2
    r_ok = r_ok & ~(masked_const[:, None] | masked_const[None, :])
    var_r = np.where(rho_ok & r_ok & ~pair_const, _var_r(mo, n_masked), np.nan)
    d_r = _snap(r - rho, np.ones_like(rho))

    return {
        "m1": _defined(pil(d_m1, var_m1)),
        "m2": _defined(pil(d_m2, var_m2)),
        "m11": _defined(pil(d_m11[strict], var_m11[strict])),
        "r": _defined(pil(d_r[strict], var_r[strict])),
    }


def pil_measures(mo: Moments, mm: Moments, quantile_terms: list[tuple[np.ndarray, int]]) -> dict[str, float]:
    """PIL_Q, PIL_m1, PIL_m2, PIL_m11, PIL_r (fractions) and PIL = 100 * their mean (docs/metrics.md).

    pil_measures.txt sec. 4.3 eq. (2)-(5) (means over attributes / pairs j < j') and sec. 5 (PIL(Q): mean of
    pil(Q_q) over q = 5 %..95 % in 5 % steps and all attributes; PIL = 100 (PIL(Q) + ... + PIL(r)) / 5).
    ``quantile_terms``: per attribute, its :func:`quantile_pil` (defined values, undefined terms), computed where
    the attribute's sorted columns are, so that only these few numbers travel.
    Each measure is the mean over its defined terms; a measure with no defined term is omitted (never NaN)
    and PIL is the mean of the present ones; ``<key>_undefined_terms`` is reported when > 0;
    ``PIL_small_sample`` = 1.0 when n' < 100 (sec. 4.1: the normal approximation is weak).
    """
    parts = {"PIL_" + k: v for k, v in moment_pils(mo, mm).items()}
    values = [v for v, _ in quantile_terms]
    parts["PIL_Q"] = (np.concatenate(values) if values else np.empty(0), sum(u for _, u in quantile_terms))
    out: dict[str, float] = {}
    present = []
    for key in MEASURES:
        v, u = parts[key]
        if v.size:
            out[key] = float(np.mean(v))
            present.append(out[key])
        if u:
            out[f"{key}_undefined_terms"] = float(u)
    if present:
        out["PIL"] = 100.0 * float(np.mean(present))
    if mm.n < SMALL_SAMPLE:
        out["PIL_small_sample"] = 1.0
    return out
