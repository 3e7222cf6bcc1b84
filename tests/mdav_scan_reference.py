"""The MDAV scan kernel before the column layout (commit d8513a6's sdc_tasks/masking/mdav.py, ``_scan_labels``), kept
as the reference the faster scan must equal group for group, with its two steps that tests/md_scan_reference.py
shares: each question answered by a scan of a list of the remaining rows, compacted after every group.

Source: statistical_databases_survey.txt, Microaggregation (MDAV), steps 1-6.
"""

from __future__ import annotations

import numba
import numpy as np

from sdc_tasks.masking.microaggregation import centroid, closest, scan_most_distant, squared_distances


@numba.njit(cache=True)
def scan_group_around(z, rem, m, pos, k, g, labels, d, members):
    """Label record ``rem[pos]`` and its k-1 closest remaining records as group g (survey, MDAV step 3).

    Returns the new number of remaining rows; ``rem`` is compacted in place, its order kept.
    """
    squared_distances(z, rem, m, z[rem[pos]], d)
    d[pos] = -1.0
    closest(d, m, k, members)
    for t in range(k):
        labels[rem[members[t]]] = g
    kept = 0
    for a in range(m):
        if labels[rem[a]] < 0:
            rem[kept] = rem[a]
            kept += 1
    return kept


@numba.njit(cache=True)
def scan_pair_of_groups(z, rem, m, r, k, g, labels, d, members):
    """Label x_r = ``rem[r]`` and its k-1 closest remaining records as group g, then x_s, the remaining record most
    distant from x_r, and its k-1 closest as group g + 1 (survey, MDAV steps 2-3); returns the rows left."""
    x_r = z[rem[r]].copy()
    m = scan_group_around(z, rem, m, r, k, g, labels, d, members)
    squared_distances(z, rem, m, x_r, d)
    return scan_group_around(z, rem, m, scan_most_distant(d, m), k, g + 1, labels, d, members)


@numba.njit(cache=True)
def scan_mdav_labels(z, k):
    """MDAV group labels 0..g-1 in order of formation, each question answered by a scan of the remaining rows
    (kept in row order)."""
    n = z.shape[0]
    labels = np.full(n, -1, np.int64)
    rem = np.arange(n)
    d = np.empty(n)
    members = np.empty(k, np.int64)
    m = n
    g = 0
    while m >= 3 * k:
        squared_distances(z, rem, m, centroid(z, rem, m), d)
        m = scan_pair_of_groups(z, rem, m, scan_most_distant(d, m), k, g, labels, d, members)
        g += 2
    if m >= 2 * k:
        squared_distances(z, rem, m, centroid(z, rem, m), d)
        m = scan_group_around(z, rem, m, scan_most_distant(d, m), k, g, labels, d, members)
        g += 1
    for a in range(m):
        labels[rem[a]] = g
    return labels
