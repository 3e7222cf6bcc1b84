"""MD (maximum distance) multivariate fixed-group-size microaggregation: pure block kernels (numpy in, numpy out).

Sources:
- sdc_methods_comparison_chapter.txt sec. 2: "microaggregation on unprojected multivariate data" (Mic2mul k ..
  Micmul k), citing Domingo-Ferrer and Mateo-Sanz (2002), "Practical data-oriented microaggregation for
  statistical disclosure control" (IEEE TKDE 14(1)), whose fixed-size heuristic seeds each pair of groups with
  the two most distant records of those left; MDAV (statistical_databases_survey.txt, Microaggregation) is its
  later, cheaper variant that seeds with the record most distant from the average record.
- docs/reproduction.md, "Chapter 6, Table 1": this heuristic, on the standardized Census file with the
  attributes grouped as ``microaggregation.attribute_groups`` does, reproduces Table 1's IL and DLD columns for the 32
  Mic2mul..Micmul rows (MDAV does not).

Tie rule (as in ``mdav``): equal squared distances are resolved to the lowest row index of the block; the most
distant pair is the first in (row, row) order, so the grouping is a deterministic function of the row order.
"""

from __future__ import annotations

import numba
import numpy as np

from sdc_tasks.masking.checks import check_group_size_k, checked_block
from sdc_tasks.masking.microaggregation import (
    centroid,
    grouped_block,
    scan_group_around,
    scan_most_distant,
    scan_pair_of_groups,
    squared_distances,
)


@numba.njit(cache=True)
def _reach_bounds(z, rem, m, reach, exact):
    """Upper bounds on each remaining row's largest squared distance to another remaining row, by the triangle
    inequality through their average: (|z_i - c| + max_j |z_j - c|)^2; none is exact yet."""
    c = centroid(z, rem, m)
    radius = np.empty(m)
    squared_distances(z, rem, m, c, radius)
    far = np.sqrt(radius.max())
    for a in range(m):
        t = np.sqrt(radius[a]) + far
        reach[rem[a]] = t * t
        exact[rem[a]] = False


@numba.njit(cache=True)
def _exact_reach(z, rem, m, pos, partner, reach, exact, d):
    """Set the most distant other remaining row of ``rem[pos]`` (the lowest index among ties) and that squared
    distance, by the MDAV scan (the row itself excluded as in ``scan_group_around``)."""
    row = rem[pos]
    squared_distances(z, rem, m, z[row], d)
    d[pos] = -1.0
    far = scan_most_distant(d, m)
    reach[row], partner[row], exact[row] = d[far], rem[far], True


@numba.njit(cache=True)
def _diameter_end(z, rem, m, labels, partner, reach, exact, d):
    """Position in ``rem`` of the lower-indexed end of the most distant remaining pair (the first such pair in
    (row, row) order): the lowest row whose most distant partner is at the largest distance.

    ``reach`` holds upper bounds (removing rows never makes a row's farthest partner farther); a row's bound is
    exact while the partner it was computed with is still remaining. The row with the largest bound (the lowest
    among equal ones) is made exact until an exact one is on top: then no other row can exceed it or equal it
    with a lower index. ``d`` is scratch space of at least m entries."""
    while True:
        best = 0
        for a in range(1, m):
            if reach[rem[a]] > reach[rem[best]]:
                best = a
        row = rem[best]
        if exact[row] and labels[partner[row]] < 0:
            return best
        _exact_reach(z, rem, m, best, partner, reach, exact, d)


@numba.njit(cache=True)
def _md_labels(z, k):
    """MD group labels 0..g-1 in order of formation, each question answered by a scan of the remaining rows
    (kept in row order); the most distant pair is found from cached bounds, made exact only where they could
    hold the largest distance (``_diameter_end``)."""
    n = z.shape[0]
    labels = np.full(n, -1, np.int64)
    rem = np.arange(n)
    d = np.empty(n)
    members = np.empty(k, np.int64)
    partner = np.empty(n, np.int64)
    reach = np.empty(n)
    exact = np.empty(n, np.bool_)
    _reach_bounds(z, rem, n, reach, exact)
    m = n
    g = 0
    while m >= 3 * k:
        r = _diameter_end(z, rem, m, labels, partner, reach, exact, d)
        m = scan_pair_of_groups(z, rem, m, r, k, g, labels, d, members)
        g += 2
    if m >= 2 * k:
        r = _diameter_end(z, rem, m, labels, partner, reach, exact, d)
        m = scan_group_around(z, rem, m, r, k, g, labels, d, members)
        g += 1
    for a in range(m):
        labels[rem[a]] = g
    return labels


def md_groups(z: np.ndarray, k: int) -> np.ndarray:
    """Return MD group labels (int64, 0..g-1 in order of formation) for the standardized block ``z`` (n, p).

    Domingo-Ferrer and Mateo-Sanz (2002), as cited by sdc_methods_comparison_chapter.txt sec. 2: while at least
    3k records remain, x_r and x_s are the two most distant remaining records (squared Euclidean); x_r and its
    k-1 closest remaining records form a group, then x_s and its k-1 closest records among those still
    remaining form another. With 2k..3k-1 left, x_r of the most distant pair and its k-1 closest form a group
    and the rest the last group; with 1..2k-1 left they form one group (MDAV's steps 5-6 with MD's x_r;
    docs/reproduction.md: this end rule fits Table 1 better than MDAV's average record). Every group has k
    records except the last, which has k..2k-1.

    x_s is taken as the remaining record most distant from x_r once x_r's group is formed: the other end of the
    pair unless it fell in x_r's group, which only tied distances allow. A 1-D ``z`` is one attribute.
    Raises ValueError when ``k`` is not an integer >= 1, when n < k, or when a row holds a non-finite value;
    n == 0 gives an empty array.
    """
    k = check_group_size_k(k)
    zz = checked_block(z, k, "MD")
    return _md_labels(zz, k) if len(zz) else np.empty(0, dtype=np.int64)


def md_microaggregate_block(x: np.ndarray, k: int, center: np.ndarray, scale: np.ndarray,
                            group_size: int | None = None) -> np.ndarray:
    """Return the MD-microaggregated block (n, p) on the original scale of ``x``: records grouped by MD on the
    data standardized with the global ``center``/``scale`` in each attribute group, values replaced by their
    group's average (sdc_methods_comparison_chapter.txt sec. 2: Micmul k for ``group_size=None``, Mic3mul k
    for 3, ...)."""
    return grouped_block(x, center, scale, group_size, lambda z: md_groups(z, k))
