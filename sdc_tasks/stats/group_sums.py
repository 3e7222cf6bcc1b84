"""Group sums with Kahan's compensation, in row order, as pandas' group-by sums doubles: the same results, for
callers that group by integer codes in loops where a pandas group-by per call costs a millisecond."""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def compensated_group_sums(labels, values, groups):
    """(groups, columns): per group and column, the sum of the rows of ``values`` (n, columns) labelled with that
    group (``labels``: 0..groups-1 per row), NaN skipped, each added in row order with Kahan's compensation and
    the compensation cleared where it is NaN (an infinite term), as pandas 2's ``group_sum`` adds them
    (pandas/_libs/groupby.pyx); tests/test_categorical_metrics.py compares the doubles with pandas' group-by."""
    n, k = values.shape
    sums = np.zeros((groups, k))
    compensation = np.zeros((groups, k))
    for i in range(n):
        g = labels[i]
        for j in range(k):
            v = values[i, j]
            if v != v:
                continue
            y = v - compensation[g, j]
            t = sums[g, j] + y
            compensation[g, j] = t - sums[g, j] - y
            if compensation[g, j] != compensation[g, j]:
                compensation[g, j] = 0.0
            sums[g, j] = t
    return sums
