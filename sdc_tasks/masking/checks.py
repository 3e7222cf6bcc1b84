"""Input checks shared by the masking kernels; errors name the argument and the first bad row."""

from __future__ import annotations

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
