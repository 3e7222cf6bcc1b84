"""The remaining point farthest from a vector, from the points listed by their distance from a reference point.

MDAV and MD (masking/mdav.py, masking/md.py) ask again and again for the remaining record most distant from a
vector: the average record, or a record at the edge of the cloud (statistical_databases_survey.txt,
Microaggregation (MDAV), steps 1, 2 and 5; MD's most distant pair, sdc_methods_comparison_chapter.txt sec. 2).
By the triangle inequality no point lies farther from v than r_i + |v - ref|, r_i its distance from the
reference point ref. With the points listed by decreasing r_i, a scan from the top measures points until the
bound of the next one falls below the largest squared distance found: near the edge of the cloud that is a few
points, where a k-d tree's farthest-point search computes a hundred or more distances and bounds as many boxes.
The answer is a scan's of every point: the distances are ``kdtree.squared_distance``'s, ties go to the lowest
index, and the bounds are widened by RADIUS_SLACK, far above the rounding of the distances they come from (a few
units of 2^-53), so no point that could be the farthest, or tie with it, is left out.
"""

from __future__ import annotations

import numba
import numpy as np

from sdc_tasks.kdtree import squared_distance

RADIUS_SLACK = 1e-9
"""Relative widening of the triangle bounds of :func:`listed_farthest`."""
TINY_SQUARE = 1e-290
"""Absolute widening of those bounds: squared distances this small may have lost their relative precision."""


@numba.njit(cache=True, nogil=True)
def listed_by_radius(points, alive, ref, radius, order):
    """List the remaining points (``alive``) by decreasing distance from ``ref``: ``radius[i]`` the distance of
    point i, ``order[:count]`` the points; returns count."""
    count = 0
    for i in range(points.shape[0]):
        if alive[i]:
            radius[i] = np.sqrt(squared_distance(ref, points, i))
            order[count] = i
            count += 1
    keys = np.empty(count)
    for a in range(count):
        keys[a] = -radius[order[a]]
    order[:count] = order[:count][np.argsort(keys)]
    return count


@numba.njit(cache=True, nogil=True)
def listed_farthest(v, skip, points, alive, ref, radius, order, count, head):
    """(the remaining point other than ``skip`` (-1: none skipped) most distant from ``v``, the lowest index among
    equally distant ones, -1 when none remains; how many distances were computed), from the points listed by
    :func:`listed_by_radius` around ``ref`` (points removed since are passed over; ``head[0]`` moves past those at
    the head of the list, which removals from the edge of the cloud leave there, so that no later search reads them
    again)."""
    gap = 0.0
    for j in range(v.shape[0]):
        diff = v[j] - ref[j]
        gap += diff * diff
    drift = np.sqrt(gap)
    best, best_i, measured = -1.0, np.int64(-1), np.int64(0)
    while head[0] < count and not alive[order[head[0]]]:
        head[0] += 1
    for a in range(head[0], count):
        i = order[a]
        if not alive[i] or i == skip:
            continue
        reach = radius[i] + drift
        if reach * reach * (1.0 + RADIUS_SLACK) + TINY_SQUARE < best:
            break
        measured += 1
        dist = squared_distance(v, points, i)
        if dist > best or (dist == best and i < best_i):
            best, best_i = dist, i
    return best_i, measured
