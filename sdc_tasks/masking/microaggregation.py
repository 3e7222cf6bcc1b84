"""Shared pieces of the microaggregation kernels (MDAV, MD, V-MDAV, univariate and projected): the distance scans
over the remaining records of a block, and the replacement of each group by its mean, attribute group by attribute
group. Pure numpy and numba; the tie rule of ``mdav``: equal squared distances go to the lowest position.

Sources: statistical_databases_survey.txt, Microaggregation (MDAV steps 1-6, the group means, the SSE criterion);
sdc_methods_comparison_chapter.txt sec. 2 (Mic2mul k .. Micmul k: attributes microaggregated in groups).
"""

from __future__ import annotations

import numbers

import numba
import numpy as np

from sdc_tasks.masking.checks import as_columns, check_finite_rows
from sdc_tasks.remaining_tree import insert_nearest


@numba.njit(cache=True, nogil=True)
def centroid(z, rem, m):
    """Average record of the m remaining rows ``z[rem[:m]]`` (survey, MDAV step 1 / step 5a)."""
    p = z.shape[1]
    total = np.zeros(p)
    for a in range(m):
        row = rem[a]
        for j in range(p):
            total[j] += z[row, j]
    return total / m


@numba.njit(cache=True, nogil=True)
def squared_distances(z, rem, m, v, out):
    """Squared Euclidean distance of each remaining row to the vector v, into ``out[:m]`` (survey, MDAV step 1)."""
    p = z.shape[1]
    for a in range(m):
        row = rem[a]
        acc = 0.0
        for j in range(p):
            t = z[row, j] - v[j]
            acc += t * t
        out[a] = acc


@numba.njit(cache=True, nogil=True)
def scan_most_distant(d, m):
    """Position of the largest of ``d[:m]``, the lowest position among equal maxima (MDAV steps 1, 2, 5b)."""
    best = 0
    for a in range(1, m):
        if d[a] > d[best]:
            best = a
    return best


@numba.njit(cache=True, nogil=True)
def closest(d, m, k, out):
    """The k positions with the smallest ``d[:m]`` in (distance, position) order, into ``out`` (MDAV step 3);
    ties go to the lowest position."""
    dist_of = np.empty(k)
    filled = np.int64(0)
    for a in range(m):
        filled = insert_nearest(d[a], a, dist_of, out, filled, k)


def group_means(x: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Return (n, p): each row of ``x`` replaced by the mean of its group (survey, Microaggregation).

    "For each attribute, the average value over each group is computed and is used to replace each
    of the original averaged values" (statistical_databases_survey.txt, Microaggregation).
    """
    xx = as_columns(x, "x")
    lab = np.asarray(labels, dtype=np.int64)
    if lab.shape != (xx.shape[0],):
        raise ValueError(f"labels must have shape ({xx.shape[0]},), got {lab.shape}")
    counts = np.bincount(lab)
    sums = np.column_stack([np.bincount(lab, weights=xx[:, j], minlength=counts.shape[0]) for j in range(xx.shape[1])])
    means = sums / np.maximum(counts, 1)[:, None]
    return means[lab]


def sse(x: np.ndarray, labels: np.ndarray) -> float:
    """Return the within-groups sum of squares SSE = sum_i sum_j (x_ij - xbar_i)'(x_ij - xbar_i).

    statistical_databases_survey.txt, Microaggregation (SSE formula).
    """
    xx = as_columns(x, "x")
    resid = xx - group_means(xx, labels)
    return float(np.sum(resid * resid))


def standardized(x: np.ndarray, center: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Return (x - center) / scale column-wise, a zero scale counting as 1 for its column."""
    p = x.shape[1]
    c = np.asarray(center, dtype=np.float64).reshape(-1)
    s = np.asarray(scale, dtype=np.float64).reshape(-1)
    if c.shape != (p,) or s.shape != (p,):
        raise ValueError(f"center and scale must have {p} entries, got {c.shape[0]} and {s.shape[0]}")
    if not (np.isfinite(c).all() and np.isfinite(s).all()):
        raise ValueError("center and scale must be finite")
    return (x - c) / np.where(s == 0.0, 1.0, s)


def attribute_groups(p: int, group_size: int | None) -> list[np.ndarray]:
    """Return the column indices of each attribute group: consecutive runs of ``group_size`` columns, the last
    run taking the remaining columns when fewer than ``group_size`` would be left over.

    sdc_methods_comparison_chapter.txt sec. 2: Micmul (None: all p together), Mic2mul (2: [0,1],[2,3],...),
    Mic3mul (3), Mic4mul (4). Thirteen attributes three at a time are 3+3+3+4: with it Table 1's IL of the 32
    Mic2mul..Micmul rows reproduces (docs/reproduction.md) and pil_measures.txt Table 3's PIL(m2) of Mic3mul7
    is exact; a group of one attribute would be univariate microaggregation, another method.
    """
    if group_size is None:
        return [np.arange(p)]
    if isinstance(group_size, bool) or not isinstance(group_size, numbers.Integral) or group_size < 1:
        raise ValueError(f"group_size must be None or an integer >= 1, got {group_size!r}")
    if p == 0:
        return []
    g = int(group_size)
    runs = max(p // g, 1)
    return [np.arange(i * g, p if i == runs - 1 else (i + 1) * g) for i in range(runs)]


def grouped_block(x: np.ndarray, center: np.ndarray, scale: np.ndarray, group_size: int | None,
                  labels_of) -> np.ndarray:
    """Each attribute group of ``x`` grouped by ``labels_of`` on the standardized data and replaced by its
    group means on the original scale (statistical_databases_survey.txt, Microaggregation)."""
    xx = as_columns(x, "x")
    check_finite_rows(xx, "x")
    z = standardized(xx, center, scale)
    out = np.empty_like(xx)
    for cols in attribute_groups(xx.shape[1], group_size):
        out[:, cols] = group_means(xx[:, cols], labels_of(z[:, cols]))
    return out
