"""V-MDAV variable-group-size multivariate microaggregation: pure block kernels (numpy in, numpy out).

Sources:
- statistical_databases_survey.txt, Microaggregation: groups of at least k records, the SSE criterion, and
  the taxonomy "fixed group size [16, 17, 18] vs variable group size [19, 20, 21]"; the MDAV steps that
  V-MDAV modifies.
- Solanas, A. and Martinez-Balleste, A. (2006) "V-MDAV: a multivariate microaggregation with variable group
  size", COMPSTAT 2006 (written from knowledge of the paper; it is not among the seed texts). The variant
  implemented is spelled out in ``vmdav_groups``.

Tie rule (as in ``mdav``): wherever the algorithm says "most distant", "nearest" or "closest", equal
squared distances are resolved to the lowest row index of the block (for groups: the lowest label), so
the grouping is a deterministic function of the block's row order.
"""

from __future__ import annotations

import numbers

import numba
import numpy as np

from sdc_tasks.masking.checks import check_group_size_k, checked_block
from sdc_tasks.masking.microaggregation import centroid, closest, grouped_block, scan_most_distant, squared_distances

DEFAULT_GAMMA = 0.2


def _check_gamma(gamma: object) -> float:
    """Return ``gamma`` as a float after checking it is a finite real >= 0 (the extension gain factor)."""
    if isinstance(gamma, bool) or not isinstance(gamma, numbers.Real) or not np.isfinite(gamma) or gamma < 0:
        raise ValueError(f"gamma must be a finite number >= 0, got {gamma!r}")
    return float(gamma)


@numba.njit(cache=True, nogil=True)
def _split_group(z, labels, h, new, k):
    """Split group h (2k members) in two groups of k, MDAV-style; the second part gets label ``new``.

    x_r is the member most distant from the group's centroid; x_r and its k-1 closest members keep
    label h, the other k members take label ``new`` (ties to the lowest row index).
    """
    n = z.shape[0]
    rows = np.empty(2 * k, np.int64)
    cnt = np.int64(0)
    for i in range(n):
        if labels[i] == h:
            rows[cnt] = i
            cnt += 1
    d = np.empty(cnt)
    squared_distances(z, rows, cnt, centroid(z, rows, cnt), d)
    far = scan_most_distant(d, cnt)
    squared_distances(z, rows, cnt, z[rows[far]], d)
    d[far] = -1.0
    keep = np.empty(k, np.int64)
    closest(d, cnt, k, keep)
    for a in range(cnt):
        labels[rows[a]] = new
    for t in range(k):
        labels[rows[keep[t]]] = h


@numba.njit(cache=True, nogil=True)
def _vmdav_labels(z, k, gamma2):
    """V-MDAV group labels 0..g-1 in order of formation (see ``vmdav_groups`` for the steps)."""
    n, p = z.shape
    labels = np.full(n, -1, np.int64)
    rem = np.arange(n)
    m = n
    # step 1: the centroid of the whole block, computed once, and each record's distance to it
    dc = np.empty(n)
    squared_distances(z, rem, n, centroid(z, rem, n), dc)
    d = np.empty(n)
    dg = np.empty(n)
    members = np.empty(k, np.int64)
    group_rows = np.empty(2 * k, np.int64)
    g = 0
    while m >= 2 * k:
        # step 2: the unassigned record most distant from the centroid
        best = 0
        for a in range(1, m):
            if dc[rem[a]] > dc[rem[best]]:
                best = a
        r = rem[best]
        # step 3: r and its k-1 nearest unassigned records
        squared_distances(z, rem, m, z[r], d)
        d[best] = -1.0
        closest(d, m, k, members)
        for t in range(k):
            group_rows[t] = rem[members[t]]
            labels[rem[members[t]]] = g
        size = k
        kept = np.int64(0)
        for a in range(m):
            if labels[rem[a]] < 0:
                rem[kept] = rem[a]
                kept += 1
        m = kept
        # step 4: extension; dg[a] = squared distance from rem[a] to the nearest member of the group
        for a in range(m):
            dg[a] = np.inf
        for t in range(size):
            squared_distances(z, rem, m, z[group_rows[t]], d)
            for a in range(m):
                if d[a] < dg[a]:
                    dg[a] = d[a]
        while size < 2 * k - 1 and m > 0:
            e = 0
            for a in range(1, m):
                if dg[a] < dg[e]:
                    e = a
            d_in2 = dg[e]
            row = rem[e]
            squared_distances(z, rem, m, z[row], d)
            d_out2 = np.inf
            for a in range(m):
                if a != e and d[a] < d_out2:
                    d_out2 = d[a]
            if not (d_in2 < gamma2 * d_out2):
                break
            labels[row] = g
            group_rows[size] = row
            size += 1
            for a in range(m):
                if d[a] < dg[a]:
                    dg[a] = d[a]
            for a in range(e, m - 1):
                rem[a] = rem[a + 1]
                dg[a] = dg[a + 1]
            m -= 1
        g += 1
    # step 5: k..2k-1 unassigned records form the last group
    if m >= k:
        for a in range(m):
            labels[rem[a]] = g
        g += 1
        m = 0
    # step 6: 1..k-1 unassigned records join, one by one, the group with the nearest centroid
    if m > 0:
        sizes = np.zeros(g + m, np.int64)
        sums = np.zeros((g + m, p))
        for i in range(n):
            h = labels[i]
            if h >= 0:
                sizes[h] += 1
                for j in range(p):
                    sums[h, j] += z[i, j]
        for a in range(m):
            row = rem[a]
            best_h = np.int64(0)
            best_d = np.inf
            for h in range(g):
                acc = 0.0
                for j in range(p):
                    t = z[row, j] - sums[h, j] / sizes[h]
                    acc += t * t
                if acc < best_d:
                    best_d = acc
                    best_h = h
            labels[row] = best_h
            sizes[best_h] += 1
            for j in range(p):
                sums[best_h, j] += z[row, j]
            if sizes[best_h] == 2 * k:
                _split_group(z, labels, best_h, g, k)
                for h in (best_h, g):
                    sizes[h] = 0
                    for j in range(p):
                        sums[h, j] = 0.0
                for i in range(n):
                    h = labels[i]
                    if h == best_h or h == g:
                        sizes[h] += 1
                        for j in range(p):
                            sums[h, j] += z[i, j]
                g += 1
    return labels


def vmdav_groups(z: np.ndarray, k: int, gamma: float = DEFAULT_GAMMA) -> np.ndarray:
    """Return V-MDAV group labels (int64, 0..g-1 in order of formation) for the standardized block ``z`` (n, p).

    V-MDAV (Solanas and Martinez-Balleste 2006), distances squared Euclidean, as implemented here:
    1. c = the centroid of the whole block, computed once (unlike MDAV, not recomputed per round).
    2. While at least 2k records are unassigned: r = the unassigned record most distant from c.
    3. r and its k-1 nearest unassigned records form a new group G.
    4. Extension, while |G| < 2k-1 and records remain unassigned: e_min = the unassigned record nearest to
       G, d_in = its distance to the nearest member of G, d_out = its distance to the nearest other
       unassigned record (infinite when there is none); if d_in < gamma * d_out, e_min joins G and the
       extension goes on, otherwise it stops. (Compared squared: d_in^2 < gamma^2 * d_out^2.)
    5. When k..2k-1 records are left unassigned they form the last group.
    6. When 1..k-1 records are left (an extension took records from the last 2k), each of them, in row
       order, joins the group whose current centroid is nearest. Departure from the paper, to keep every
       group within [k, 2k-1] (the size range of optimal k-partitions, Domingo-Ferrer and Mateo-Sanz
       2002): a group that thereby reaches 2k records is split MDAV-style into two groups of k (its member
       most distant from its centroid and that member's k-1 closest members keep the label, the other k
       get the next new label). Splitting never raises the SSE.
    So every group has k..2k-1 records (k == 1: every group has 1). gamma = 0 never extends (groups of
    k, the last k..2k-1); the paper suggests a small gamma (about 0.2) for scattered data and a larger one
    (about 1.1) for clustered data. Ties go to the lowest row index (groups in step 6: lowest label).

    A 1-D ``z`` is one attribute. Raises ValueError when k is not an integer >= 1, gamma is not a finite
    number >= 0, 0 < n < k, or a row holds a non-finite value; n == 0 gives an empty array.
    Cost: O(n^2 p) (about k + 1 + extensions distance passes per group over the unassigned records).
    """
    k = check_group_size_k(k)
    gamma = _check_gamma(gamma)
    zz = checked_block(z, k, "V-MDAV")
    return _vmdav_labels(zz, k, gamma * gamma) if len(zz) else np.empty(0, dtype=np.int64)


def variable_microaggregate_block(
    x: np.ndarray,
    k: int,
    center: np.ndarray,
    scale: np.ndarray,
    gamma: float = DEFAULT_GAMMA,
    group_size: int | None = None,
) -> np.ndarray:
    """Return the V-MDAV-microaggregated block (n, p) on the original scale of ``x``.

    As ``mdav.microaggregate_block`` with ``vmdav_groups`` in place of MDAV: records are grouped on the data
    standardized with the global ``center``/``scale`` (a zero scale counts as 1), each value replaced by its
    group's average on the original scale (statistical_databases_survey.txt, Microaggregation), each group of
    attributes (``microaggregation.attribute_groups``: None all together, 2 two at a time, ...) independently.
    """
    gamma = _check_gamma(gamma)
    return grouped_block(x, center, scale, group_size, lambda z: vmdav_groups(z, k, gamma))
