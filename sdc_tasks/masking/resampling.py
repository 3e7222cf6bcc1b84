"""Resampling (Resamp t) and the moment rescaling transformation: pure kernels (numpy in, numpy out).

Sources:
- sdc_methods_comparison_chapter.txt sec. 2 (Resampling): take with replacement t independent samples
  X_1..X_t of size n of the values of a variable, rank each sample independently, and build the masked
  variable by taking as first value the average of the first values of the samples, as second value the
  average of the second values, and so on (Resamp1: t = 1, Resamp3: t = 3).
- pil_measures.txt sec. 5 (rescaling transformation): x''_ij = (x'_ij - m_1^0(j)) sqrt(mu_2(j)) /
  sqrt(m_2(j)) + mu_1^0(j), with mu (original) and m (masked) the population moments of sec. 4.2
  (divisor n, resp. n').
"""

from __future__ import annotations

import numpy as np

from sdc_tasks.masking.checks import column_with_tiebreak
from sdc_tasks.stats.order import value_order


def _check_column(values: object, tiebreak: object) -> tuple[np.ndarray, np.ndarray]:
    """Return (values, tiebreak) after checking 1-D, same shape, finite values (ValueError naming them)."""
    return column_with_tiebreak(values, tiebreak)


def rank_order(values: np.ndarray, tiebreak: np.ndarray) -> np.ndarray:
    """Return the row indices sorted by (value, tiebreak): order[i] is the row holding rank i."""
    return value_order(values, tiebreak)


def resampled_order_statistics(values: np.ndarray, t: int, rng: np.random.Generator) -> np.ndarray:
    """Return the n position-wise averages of t sorted samples (with replacement, size n) of ``values``.

    sdc_methods_comparison_chapter.txt sec. 2 (Resampling). Indices come from ``rng.integers(0, n,
    size=(t, n))``; each sample is sorted ascending and the result is the mean over the t samples at each
    position, hence nondecreasing.
    """
    if isinstance(t, bool) or not isinstance(t, (int, np.integer)) or t < 1:
        raise ValueError(f"t must be an integer >= 1 (number of samples), got {t!r}")
    vals = np.asarray(values, dtype=np.float64)
    n = vals.shape[0]
    if n == 0:
        return np.empty(0, dtype=np.float64)
    total = np.zeros(n, dtype=np.float64)
    for _ in range(int(t)):
        total += np.sort(vals[rng.integers(0, n, size=n)])
    return total / int(t)


def resample_column(values: np.ndarray, tiebreak: np.ndarray, t: int, rng: np.random.Generator) -> np.ndarray:
    """Return the Resamp t column in the original row order: rank i gets the i-th averaged value.

    sdc_methods_comparison_chapter.txt sec. 2 (Resampling): the averaged order statistics of
    :func:`resampled_order_statistics` are assigned by rank, the record whose value has rank i (ranking
    stably by (value, tiebreak)) receiving the i-th smallest average, so the masked column has the same
    ranks as the original. With t = 1 every output value is one of the input values. Raises ValueError
    naming ``t`` unless t is an integer >= 1, and naming the first row holding a non-finite value.
    """
    vals, ties = _check_column(values, tiebreak)
    averaged = resampled_order_statistics(vals, t, rng)
    out = np.empty(vals.shape[0], dtype=np.float64)
    out[rank_order(vals, ties)] = averaged
    return out


def rescale(
    xm: np.ndarray,
    orig_mean: np.ndarray,
    orig_var: np.ndarray,
    masked_mean: np.ndarray,
    masked_var: np.ndarray,
) -> np.ndarray:
    """Return x'' = (x' - m_1^0) sqrt(mu_2) / sqrt(m_2) + mu_1^0, column by column.

    pil_measures.txt sec. 5 (rescaling transformation), with mu_1^0, mu_2 (``orig_mean``, ``orig_var``)
    the original and m_1^0, m_2 (``masked_mean``, ``masked_var``) the masked population mean and variance
    (divisor n, sec. 4.2) of each column over the WHOLE file, so blocks can be rescaled separately and the
    rescaled file has exactly the original means and population variances.

    Decision: a column with masked variance 0 is constant, so x' - m_1^0 = 0 and the formula is 0/0; it is
    returned at the original mean mu_1^0 (the formula with 0/0 read as 0): the mean is restored, the
    variance cannot be. ``xm`` is (n, m) with moments of shape (m,), or (n,) with scalar moments.
    """
    block = np.asarray(xm, dtype=np.float64)
    if block.ndim not in (1, 2):
        raise ValueError(f"xm must be 1-D or 2-D, got {block.ndim} dimensions")
    shape = (block.shape[1],) if block.ndim == 2 else ()
    moments = {}
    for name, value in (
        ("orig_mean", orig_mean),
        ("orig_var", orig_var),
        ("masked_mean", masked_mean),
        ("masked_var", masked_var),
    ):
        arr = np.asarray(value, dtype=np.float64)
        if arr.shape != shape:
            raise ValueError(f"{name} must have shape {shape}, got {arr.shape}")
        if not np.isfinite(arr).all():
            raise ValueError(f"{name} has a non-finite value")
        if name.endswith("var") and (arr < 0).any():
            raise ValueError(f"{name} must be >= 0, got {arr!r}")
        moments[name] = arr
    masked_var_ = moments["masked_var"]
    constant = masked_var_ == 0
    ratio = np.sqrt(moments["orig_var"]) / np.sqrt(np.where(constant, 1.0, masked_var_))
    ratio = np.where(constant, 0.0, ratio)
    return (block - moments["masked_mean"]) * ratio + moments["orig_mean"]
