"""Data-driven blocks and row-range repartitioning of Dask collections.

Blocks are defined by the data alone (a sort on a projection, ties broken by record id), never by the
number of workers or partitions, so blocked methods give the same release on any cluster.
"""

from __future__ import annotations

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd

from sdc_tasks.stats.moments import Moments, settled

BLOCK_COL = "_block"
POS_COL = "_pos"
PROJ_COL = "_proj"
STRATUM_COL = "_stratum"


def partition_lengths(ddf: dd.DataFrame) -> list[int]:
    """Number of rows in each partition, in order."""
    return [int(x) for x in ddf.map_partitions(len).compute()]


def offsets_of(lengths: list[int]) -> np.ndarray:
    """Global index of each partition's first row, plus the total at the end."""
    return np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])


def principal_axis(m: Moments) -> np.ndarray:
    """First principal component of the correlation matrix (sign fixed: largest loading positive).

    Projecting standardized records on it orders them along the direction of greatest spread.
    """
    r, _ = m.corr()
    np.fill_diagonal(r, 1.0)
    vals, vecs = np.linalg.eigh(r)
    axis = vecs[:, int(np.argmax(vals))]
    return axis if axis[int(np.argmax(np.abs(axis)))] > 0 else -axis


def _slice_rows(df: pd.DataFrame, start: int, stop: int) -> pd.DataFrame:
    """Rows start..stop-1 of one partition."""
    return df.iloc[start:stop]


def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Concatenate frames keeping row order."""
    return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0].reset_index(drop=True)


def cut_rows(parts: list, lengths: list[int], cuts: list[int]) -> list:
    """Return delayed frames holding global rows [cuts[i], cuts[i+1]) of the concatenated ``parts``.

    Only neighbouring slices move: no hash shuffle, and the new boundaries are exactly ``cuts``.
    """
    starts = offsets_of(lengths)
    out = []
    for a, b in zip(cuts[:-1], cuts[1:]):
        first = int(np.searchsorted(starts, a, side="right") - 1)
        pieces = []
        i = first
        while i < len(parts) and starts[i] < b:
            lo, hi = max(a, starts[i]) - starts[i], min(b, starts[i + 1]) - starts[i]
            if hi > lo:
                pieces.append(dask.delayed(_slice_rows)(parts[i], int(lo), int(hi)))
            i += 1
        out.append(dask.delayed(_concat)(pieces))
    return out


def block_cuts(block_starts: np.ndarray, total: int, target_rows: int) -> list[int]:
    """Partition boundaries that fall on block starts, each partition holding about ``target_rows`` rows."""
    cuts = [0]
    for s in block_starts[1:]:
        if s - cuts[-1] >= target_rows:
            cuts.append(int(s))
    cuts.append(int(total))
    return cuts


def block_layout(stratum_sizes: np.ndarray, block_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Return (first global rank of each stratum, number of blocks per stratum) for blocks of >= block_size rows.

    A stratum of n records gets max(1, n // block_size) blocks of nearly equal size (sizes differ by at most one).
    """
    starts = np.concatenate([[0], np.cumsum(stratum_sizes)[:-1]]).astype(np.int64)
    nblocks = np.maximum(1, stratum_sizes // block_size).astype(np.int64)
    return starts, nblocks


def block_of_rank(rank: np.ndarray, code: np.ndarray, starts: np.ndarray, sizes: np.ndarray,
                  nblocks: np.ndarray) -> np.ndarray:
    """Block id of records by global sorted rank: stratum code in the high 32 bits, block within it below."""
    local = rank - starts[code]
    within = local * nblocks[code] // sizes[code]
    return (code.astype(np.int64) << 32) + within


def block_starts(stratum_sizes: np.ndarray, block_size: int) -> np.ndarray:
    """Global sorted rank at which every block begins."""
    starts, nblocks = block_layout(stratum_sizes, block_size)
    out = []
    for s, n, b in zip(starts, stratum_sizes, nblocks):
        j = np.arange(b, dtype=np.int64)
        out.append(s + (j * n + b - 1) // b)
    return np.concatenate(out) if out else np.zeros(1, dtype=np.int64)
