"""Univariate and projected microaggregation: pure block kernels (numpy in, numpy out).

Sources:
- sdc_methods_comparison_chapter.txt sec. 2 (Microaggregation): the variants individual ranking (MicIR k),
  microaggregation on data projected by z-scores projection (MicZ k) and by principal components
  projection (MicPCP k); groups of size at least k, each value replaced by its group's average.
- statistical_databases_survey.txt, Microaggregation: the SSE criterion, fixed vs variable group size,
  and exact optimal microaggregation "only for the univariate case" (ref. [22], Hansen and Mukherjee 2003,
  "A polynomial algorithm for optimal univariate microaggregation", IEEE TKDE 15(4)).

Tie rule: equal sort keys are ordered by the caller's ``tiebreak`` (np.lexsort on (key, tiebreak), stable),
so the grouping is a deterministic function of the data and the tiebreak; see ``optimal_groups_sorted``
for ties in cost.
"""

from __future__ import annotations

import numba
import numpy as np

from sdc_tasks.masking.checks import as_columns, check_finite_rows, check_group_size_k
from sdc_tasks.masking.microaggregation import group_means
from sdc_tasks.stats.order import value_order

PROJECTIONS = ("z", "pcp")


def _check_n_k(n: int, k: int) -> int:
    """Return ``k`` checked (integer >= 1) and raise ValueError when 0 < n < k."""
    k = check_group_size_k(k)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"n must be an integer >= 0, got {n!r}")
    if 0 < n < k:
        raise ValueError(f"k={k} exceeds the number of records n={n}: microaggregation needs n >= k")
    return k


def fixed_groups_sorted(n: int, k: int) -> np.ndarray:
    """Return int64 labels 0..g-1 for ``n`` records already in sorted order: consecutive groups of k.

    Fixed group size microaggregation of sorted data (statistical_databases_survey.txt, Microaggregation:
    fixed group size; sdc_methods_comparison_chapter.txt sec. 2, MicIR / MicZ / MicPCP): g = n // k groups
    of exactly k consecutive records, the last group absorbing the remainder n - g*k (size k..2k-1); with
    n < 2k one group. Raises ValueError naming k when k is not an integer >= 1 or 0 < n < k; n == 0 gives
    an empty array (as ``mdav.mdav_groups`` does for an empty block).
    """
    k = _check_n_k(n, k)
    if n == 0:
        return np.empty(0, dtype=np.int64)
    return np.minimum(np.arange(n, dtype=np.int64) // k, n // k - 1)


@numba.njit(cache=True, nogil=True)
def _optimal_labels(v, k):
    """Hansen-Mukherjee shortest path over prefixes of the sorted values v (survey ref. [22]).

    best[i] is the least SSE of a partition of v[:i] into consecutive groups of sizes k..2k-1 and last[i]
    the size of that partition's last group. The SSE of each candidate last group v[i-m:i], m = 1..2k-1,
    comes from a Welford update run backwards from v[i-1], so each i costs O(k): O(n k) in all.
    """
    n = v.shape[0]
    hi = 2 * k - 1
    best = np.full(n + 1, np.inf)
    best[0] = 0.0
    last = np.zeros(n + 1, np.int64)
    for i in range(k, n + 1):
        mean = 0.0
        m2 = 0.0
        top = min(hi, i)
        for m in range(1, top + 1):
            x = v[i - m]
            delta = x - mean
            mean += delta / m
            m2 += delta * (x - mean)
            if m >= k:
                prev = best[i - m]
                if prev < np.inf:
                    c = prev + m2
                    if c < best[i]:  # strict: among equal costs the smallest last group stays
                        best[i] = c
                        last[i] = m
    sizes = np.empty(n, np.int64)
    g = 0
    i = n
    while i > 0:
        sizes[g] = last[i]
        i -= last[i]
        g += 1
    labels = np.empty(n, np.int64)
    pos = 0
    for t in range(g):
        m = sizes[g - 1 - t]
        for a in range(m):
            labels[pos + a] = t
        pos += m
    return labels


def optimal_groups_sorted(values_sorted: np.ndarray, k: int) -> np.ndarray:
    """Return int64 labels 0..g-1 of the SSE-optimal univariate k-partition of sorted values.

    statistical_databases_survey.txt, Microaggregation: exact optimal microaggregation exists "only for the
    univariate case" (ref. [22], Hansen and Mukherjee 2003). Their result: an optimal k-partition of sorted
    univariate data consists of groups of consecutive values, each of size k..2k-1, so it is a shortest path
    from node 0 to node n in the graph whose edge (j, i), k <= i - j <= 2k-1, weighs the SSE of the group
    values_sorted[j:i]. The path is found by dynamic programming in O(n k).

    Numerics: instead of differences of prefix sums of values and squares (which cancel catastrophically
    when the values sit far from zero; centring on the overall mean only moves the problem to groups far
    from the mean), each candidate group's SSE is accumulated by Welford's update over the group itself,
    run backwards from the group's last value: the same O(n k) cost, stable for any offset, and an exact
    0 for a run of equal values.

    Ties in cost: among partitions whose computed costs are exactly equal in floating point, the one whose
    last group is smallest is taken, then recursively for the prefix before it (e.g. five equal values with
    k = 2 give sizes 3, 2). Raises ValueError when ``values_sorted`` is not 1-D, holds a non-finite value or
    is not non-decreasing, or when k is not an integer >= 1 or 0 < n < k; n == 0 gives an empty array.
    """
    v = np.ascontiguousarray(values_sorted, dtype=np.float64)
    if v.ndim != 1:
        raise ValueError(f"values_sorted must be 1-D, got {v.ndim} dimensions")
    n = v.shape[0]
    k = _check_n_k(n, k)
    if n == 0:
        return np.empty(0, dtype=np.int64)
    if not np.isfinite(v).all():
        raise ValueError(f"values_sorted has a non-finite value at position {int(np.argmax(~np.isfinite(v)))}")
    if (np.diff(v) < 0).any():
        raise ValueError("values_sorted must be sorted in non-decreasing order")
    return _optimal_labels(v, k)


def _check_tiebreak(tiebreak: np.ndarray, n: int) -> np.ndarray:
    """Return ``tiebreak`` as an array of shape (n,), raising ValueError otherwise."""
    t = np.asarray(tiebreak)
    if t.shape != (n,):
        raise ValueError(f"tiebreak must have shape ({n},), got {t.shape}")
    return t


def _per_column(x: np.ndarray, k: int, tiebreak: np.ndarray, optimal: bool) -> np.ndarray:
    """Each column of x sorted by (value, tiebreak), grouped, and replaced by its group means."""
    xx = as_columns(x, "x")
    n, p = xx.shape
    k = _check_n_k(n, k)
    t = _check_tiebreak(tiebreak, n)
    check_finite_rows(xx, "x")
    out = np.empty_like(xx)
    if n == 0:
        return out
    fixed = None if optimal else fixed_groups_sorted(n, k)
    for j in range(p):
        order = value_order(xx[:, j], t)
        sorted_labels = optimal_groups_sorted(xx[order, j], k) if optimal else fixed
        labels = np.empty(n, dtype=np.int64)
        labels[order] = sorted_labels
        out[:, j] = group_means(xx[:, j], labels)[:, 0]
    return out


def individual_ranking(x: np.ndarray, k: int, tiebreak: np.ndarray) -> np.ndarray:
    """Return MicIR k: (n, p), each column microaggregated on its own, in the original row order.

    sdc_methods_comparison_chapter.txt sec. 2, "individual ranking (abbr. MicIR k)": every variable is
    ranked independently, here by (value, tiebreak) with np.lexsort; the ranked values are cut into
    consecutive groups of k (``fixed_groups_sorted``: the last group takes the remainder) and each value is
    replaced by its group's average (statistical_databases_survey.txt, Microaggregation). A 1-D ``x`` is one
    variable. Raises ValueError when k is not an integer >= 1, 0 < n < k, ``tiebreak`` is not of shape (n,),
    or a row of x holds a non-finite value; n == 0 gives an empty (0, p) array.
    """
    return _per_column(x, k, tiebreak, optimal=False)


def optimal_univariate(x: np.ndarray, k: int, tiebreak: np.ndarray) -> np.ndarray:
    """Return (n, p): each column replaced by the group means of its optimal univariate k-partition.

    As ``individual_ranking`` but the groups of each ranked column are the SSE-optimal ones of Hansen and
    Mukherjee 2003 (statistical_databases_survey.txt, Microaggregation, ref. [22]; ``optimal_groups_sorted``):
    sizes k..2k-1, consecutive in (value, tiebreak) order. Same errors as ``individual_ranking``.
    """
    return _per_column(x, k, tiebreak, optimal=True)


def first_principal_axis(z: np.ndarray) -> np.ndarray:
    """Return the unit loading vector (p,) of the first principal component of the correlation matrix of z.

    The correlation matrix is that of the columns of ``z`` (population moments; a constant column gets zero
    correlations and a zero diagonal entry, so it never loads). The axis is the eigenvector of the largest
    eigenvalue (numpy.linalg.eigh). Its sign is fixed so that the loading of largest absolute value is
    positive; loadings whose absolute values agree within a relative 1e-9 count as tied, and the lowest
    column index among them decides. When the largest eigenvalue is repeated the axis within its
    eigenspace is the one LAPACK returns (deterministic for a given platform).
    """
    zz = as_columns(z, "z")
    n, p = zz.shape
    if n == 0:
        raise ValueError("z has no rows: the principal axis is undefined")
    check_finite_rows(zz, "z")
    const = zz.max(axis=0) == zz.min(axis=0)
    c = zz - zz.mean(axis=0)
    c[:, const] = 0.0
    sd = np.sqrt((c * c).mean(axis=0))
    cs = c / np.where(const, 1.0, sd)
    corr = cs.T @ cs / n
    _, vecs = np.linalg.eigh(corr)
    v = vecs[:, -1].copy()
    mag = np.abs(v)
    lead = int(np.argmax(mag >= mag.max() * (1.0 - 1e-9)))
    if v[lead] < 0:
        v = -v
    return v


def projection_scores(z: np.ndarray, kind: str) -> np.ndarray:
    """Return the (n,) projection of the standardized records ``z`` (n, p) used to rank them.

    sdc_methods_comparison_chapter.txt sec. 2: "microaggregation on projected data using z-scores projection
    (abbr. MicZ k), and principal components projection (abbr. MicPCP k)". The chapter names the two
    projections without formulas; the choices here:
    - kind "z" (MicZ): the sum of the record's z-scores, sum_j z_ij, i.e. the projection on the direction
      (1, ..., 1) of the standardized space;
    - kind "pcp" (MicPCP): the record's score z_i . v on the first principal component v of the correlation
      matrix of z (``first_principal_axis``: sign fixed so that the largest |loading| is positive). The
      scores are not re-centred: a constant shift does not change the ranking.
    ``z`` is used as given (the caller standardizes, e.g. with global centre/scale). Raises ValueError for an
    unknown kind or a non-finite value.
    """
    zz = as_columns(z, "z")
    check_finite_rows(zz, "z")
    if kind == "z":
        return zz.sum(axis=1)
    if kind == "pcp":
        if zz.shape[0] == 0:
            return np.empty(0)
        return zz @ first_principal_axis(zz)
    raise ValueError(f"kind must be one of {PROJECTIONS}, got {kind!r}")


def projected_microaggregation(x: np.ndarray, k: int, scores: np.ndarray, tiebreak: np.ndarray) -> np.ndarray:
    """Return (n, p): records grouped on their projection scores, every variable replaced by its group mean.

    sdc_methods_comparison_chapter.txt sec. 2 (MicZ k, MicPCP k: microaggregation on projected data): records
    are sorted by (score, tiebreak) with np.lexsort, cut into consecutive groups of k (``fixed_groups_sorted``,
    the last group taking the remainder), and each variable of ``x`` is replaced by its group's average on the
    original scale (statistical_databases_survey.txt, Microaggregation). Raises ValueError when k is not an
    integer >= 1, 0 < n < k, ``scores``/``tiebreak`` are not of shape (n,), or a value is non-finite.
    """
    xx = as_columns(x, "x")
    n = xx.shape[0]
    k = _check_n_k(n, k)
    s = np.asarray(scores, dtype=np.float64)
    if s.shape != (n,):
        raise ValueError(f"scores must have shape ({n},), got {s.shape}")
    t = _check_tiebreak(tiebreak, n)
    check_finite_rows(xx, "x")
    if not np.isfinite(s).all():
        raise ValueError(f"scores has a non-finite value in row {int(np.argmax(~np.isfinite(s)))}")
    if n == 0:
        return np.empty_like(xx)
    order = value_order(s, t)
    labels = np.empty(n, dtype=np.int64)
    labels[order] = fixed_groups_sorted(n, k)
    return group_means(xx, labels)
