"""Data-driven blocks of Dask collections: partition lengths and offsets, principal axes, block boundaries.

Blocks are defined by the data alone (a sort on a projection, ties broken by record id), never by the
number of workers or partitions, so blocked methods give the same release on any cluster.
"""

from __future__ import annotations

import dask.dataframe as dd
import numpy as np

from sdc_tasks.reserved import BLOCK_COL, POS_COL, PROJ_COL  # noqa: F401 (B.BLOCK_COL, ... in other modules)
from sdc_tasks.stats.moments import Moments


def partition_lengths(ddf: dd.DataFrame) -> list[int]:
    """Number of rows in each partition, in order."""
    return [int(x) for x in ddf.map_partitions(len).compute()]


def offsets_of(lengths: list[int]) -> np.ndarray:
    """Global index of each partition's first row, plus the total at the end."""
    return np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])


def principal_axes(m: Moments, count: int) -> np.ndarray:
    """The first ``count`` principal components of the correlation matrix as columns (p, count), by decreasing
    eigenvalue, each with its largest loading positive; standardized records projected on them are ordered
    along the directions of greatest spread."""
    r, _ = m.corr()
    np.fill_diagonal(r, 1.0)
    vals, vecs = np.linalg.eigh(r)
    axes = vecs[:, np.argsort(vals, kind="stable")[::-1][:count]]
    signs = np.sign(axes[np.argmax(np.abs(axes), axis=0), np.arange(axes.shape[1])])
    return axes * np.where(signs == 0, 1.0, signs)


def block_cuts(block_starts: np.ndarray, total: int, target_rows: int) -> list[int]:
    """Partition boundaries that fall on block starts, each partition holding about ``target_rows`` rows."""
    cuts = [0]
    for s in block_starts[1:]:
        if s - cuts[-1] >= target_rows:
            cuts.append(int(s))
    cuts.append(int(total))
    return cuts


def fanout(sizes: np.ndarray, block_size: int, levels_left: int, unit: int = 1) -> np.ndarray:
    """Number of parts each group is split into at one level of recursive sort-tile blocking: the last level
    makes max(1, m // block_size) parts of >= block_size records; earlier levels ceil((m / block_size)^(1/L));
    never more parts than whole units."""
    sizes = np.asarray(sizes, dtype=np.int64)
    if levels_left <= 1:
        parts = np.maximum(1, sizes // block_size)
    else:
        parts = np.maximum(1, np.ceil((sizes / block_size) ** (1.0 / levels_left)).astype(np.int64))
    return np.minimum(parts, np.maximum(1, sizes // unit))


def split_sizes(sizes: np.ndarray, parts: np.ndarray, unit: int = 1) -> np.ndarray:
    """Sizes of the parts when a group of m ranked records, read as m // unit units (the remainder joins the
    last unit), is cut into b parts at unit ceil(j u / b); concatenated over groups."""
    out = []
    for m, b in zip(np.asarray(sizes, dtype=np.int64), np.asarray(parts, dtype=np.int64)):
        u = m // unit
        cuts = (np.arange(b + 1, dtype=np.int64) * u + b - 1) // b
        part = np.diff(cuts) * unit
        part[-1] += m - u * unit
        out.append(part)
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


def part_of_rank(rank: np.ndarray, group: np.ndarray, sizes: np.ndarray, parts: np.ndarray,
                 unit: int = 1) -> np.ndarray:
    """Index of the part (numbered over all groups) holding each record, from its global rank in the order
    sorted by (group, key, id): the record of rank r within a group of u units cut into b parts is in
    part min(r // unit, u - 1) b // u of that group (consistent with ``split_sizes``)."""
    sizes = np.asarray(sizes, dtype=np.int64)
    parts = np.asarray(parts, dtype=np.int64)
    group_start = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    part_offset = np.concatenate([[0], np.cumsum(parts)[:-1]])
    units = sizes[group] // unit
    local_unit = np.minimum((rank - group_start[group]) // unit, units - 1)
    return part_offset[group] + local_unit * parts[group] // units
