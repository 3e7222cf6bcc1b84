"""The MD kernel before the tree (commit 50c25d9's sdc_tasks/masking/md.py, ``_md_labels``), kept as the
reference the faster kernel must equal group for group: every question answered by a scan of the remaining rows,
the most distant pair found from cached upper bounds made exact by full scans.

One change: the first bounds are raised by a relative 1e-9. Without it, where the triangle inequality through
the average is tight (one attribute: every row is collinear with the average) rounding could put the bound of the
lower-indexed end of the most distant pair a unit in the last place below their distance; that kernel then took
the other end as x_r, against its own tie rule and the brute-force reference of tests/test_md_kernel.py (seen on
136 standard normal values, k = 2: the first two groups formed in the other order). On every block of two or
more attributes tried, with and without the margin, the labels are the same.

Run as a script (``PYTHONPATH=. python tests/md_scan_reference.py``) it prints the SHA-256 of its labels for the
12,000-record blocks that tests/test_md_kernel.py checks by hash (seconds each by scans: too slow to recompute in
every test run)."""

from __future__ import annotations

import hashlib

import numba
import numpy as np
from mdav_scan_reference import scan_group_around, scan_pair_of_groups

from sdc_tasks.masking.microaggregation import centroid, scan_most_distant, squared_distances


@numba.njit(cache=True)
def _reach_bounds(z, rem, m, reach, exact):
    """Upper bounds on each remaining row's largest squared distance to another remaining row, by the triangle
    inequality through their average: (|z_i - c| + max_j |z_j - c|)^2, raised by a relative 1e-9 to stay above
    rounding; none is exact yet."""
    c = centroid(z, rem, m)
    radius = np.empty(m)
    squared_distances(z, rem, m, c, radius)
    far = np.sqrt(radius.max())
    for a in range(m):
        t = np.sqrt(radius[a]) + far
        reach[rem[a]] = t * t * (1.0 + 1e-9)
        exact[rem[a]] = False


@numba.njit(cache=True)
def _exact_reach(z, rem, m, pos, partner, reach, exact, d):
    """Set the most distant other remaining row of ``rem[pos]`` (the lowest index among ties) and that squared
    distance, by a scan (the row itself excluded)."""
    row = rem[pos]
    squared_distances(z, rem, m, z[row], d)
    d[pos] = -1.0
    far = scan_most_distant(d, m)
    reach[row], partner[row], exact[row] = d[far], rem[far], True


@numba.njit(cache=True)
def _diameter_end(z, rem, m, labels, partner, reach, exact, d):
    """Position in ``rem`` of the lower-indexed end of the most distant remaining pair: the row with the largest
    bound (the lowest among equal ones) is made exact until an exact one is on top."""
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
def scan_md_labels(z, k):
    """MD group labels 0..g-1 in order of formation, each question answered by a scan of the remaining rows."""
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


def large_blocks() -> dict[str, tuple[np.ndarray, int]]:
    """The 12,000-record blocks checked by hash, with their k: Census-like generated records (sdc_tasks.generate,
    seed 5) standardized, three, four and all 13 attributes, k = 3; integer values 0..5 in three attributes (ties
    and duplicated rows everywhere), k = 5."""
    from sdc_tasks.generate import census_model, census_reference, synthetic_chunk

    x = synthetic_chunk(census_model(census_reference()), 12000, 5, 0, 0).drop(columns="record_id").to_numpy()
    z = (x - x.mean(axis=0)) / x.std(axis=0)
    ints = np.random.default_rng(20).integers(0, 6, size=(12000, 3)).astype(float)
    return {
        "census-like 3": (np.ascontiguousarray(z[:, :3]), 3),
        "census-like 4": (np.ascontiguousarray(z[:, 9:]), 3),
        "census-like 13": (z, 3),
        "integers 3": (ints, 5),
    }


def labels_digest(labels: np.ndarray) -> str:
    """SHA-256 of the labels as int64 bytes."""
    return hashlib.sha256(np.ascontiguousarray(labels, dtype=np.int64).tobytes()).hexdigest()


if __name__ == "__main__":
    for name, (block, k) in large_blocks().items():
        print(f"{name!r}: {labels_digest(scan_md_labels(block, k))!r},")
