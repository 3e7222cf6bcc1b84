"""Shape checks shared by the kernels that sum over blocks of paired records."""

from __future__ import annotations

import numpy as np


def paired_columns(a: np.ndarray, b: np.ndarray, dtype=np.float64) -> tuple[np.ndarray, np.ndarray]:
    """Both blocks as 2-D arrays of ``dtype`` (one column if 1-D); raise ValueError if their shapes differ."""
    a = np.asarray(a, dtype=dtype)
    b = np.asarray(b, dtype=dtype)
    if a.ndim == 1:
        a, b = a[:, None], b[:, None]
    if a.shape != b.shape:
        raise ValueError(f"paired blocks differ in shape: {a.shape} vs {b.shape}")
    return a, b
