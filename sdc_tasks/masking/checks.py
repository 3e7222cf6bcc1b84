"""Input checks shared by the masking kernels; errors name the argument and the first bad row."""

from __future__ import annotations

import numbers

import numpy as np


def finite_array(values: object, name: str, ndim: int, dtype=np.float64) -> np.ndarray:
    """``values`` as an array (of ``dtype``; None keeps the input's) of ``ndim`` dimensions, all finite."""
    arr = np.asarray(values, dtype=dtype)
    if arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got {arr.ndim} dimensions")
    finite = np.isfinite(arr)
    if not finite.all():
        raise ValueError(f"{name} has a non-finite value in row {int(np.argwhere(~finite)[0][0])}")
    return arr


def column_with_tiebreak(values: object, tiebreak: object) -> tuple[np.ndarray, np.ndarray]:
    """(values, tiebreak) after checking a finite 1-D column and a tiebreak of the same shape."""
    vals = finite_array(values, "values", 1, dtype=None)
    ties = np.asarray(tiebreak)
    if ties.shape != vals.shape:
        raise ValueError(f"tiebreak must have shape {vals.shape}, got {ties.shape}")
    return vals, ties


def as_columns(a: np.ndarray, name: str) -> np.ndarray:
    """Return ``a`` as a C-contiguous float64 (n, p) array; a 1-D array is one attribute."""
    arr = np.asarray(a, dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 1-D or 2-D array, got {arr.ndim} dimensions")
    return np.ascontiguousarray(arr)


def check_finite_rows(a: np.ndarray, name: str) -> None:
    """Raise ValueError naming the first row of ``a`` holding a NaN or infinite value."""
    bad = ~np.isfinite(a).all(axis=1)
    if bad.any():
        raise ValueError(f"{name} has a non-finite value in row {int(np.argmax(bad))}")


def check_group_size_k(k: object) -> int:
    """Return ``k`` as an int after checking it is an integer >= 1 (the minimal group size)."""
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
        raise ValueError(f"k must be an integer >= 1, got {k!r}")
    return int(k)


def checked_block(z: np.ndarray, k: int, method: str) -> np.ndarray:
    """The block as finite (n, p) columns; ValueError naming k when 0 < n < k."""
    zz = as_columns(z, "z")
    n = zz.shape[0]
    if 0 < n < k:
        raise ValueError(f"k={k} exceeds the number of records n={n}: {method} needs n >= k")
    check_finite_rows(zz, "z")
    return zz
