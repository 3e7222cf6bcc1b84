"""Graph builders: apply one masking step to a Dask DataFrame, per data-driven block or per swap scope."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd

from sdc_tasks import blocking as B
from sdc_tasks.masking.mdav import microaggregate_block
from sdc_tasks.masking.rankswap import rank_swap_column
from sdc_tasks.randomness import rng_for
from sdc_tasks.stats.moments import moments_graph

TARGET_PARTITION_ROWS = 250_000


@dataclass(frozen=True)
class StepContext:
    """What a step needs besides its parameters: seed, step number, id column and strata column."""

    seed: int
    step: int
    id_column: str
    strata: str | None = None


@dataclass
class StepResult:
    """A masked collection (same partitions and row order as the input) and facts for the report.

    ``pinned`` holds the persisted intermediate collections ``frame`` is built on; keep the result alive
    until ``frame`` has been computed, or the cluster releases them.
    """

    frame: dd.DataFrame
    blocks: int
    min_group_size: int | None = None
    pinned: tuple = ()


def _stratum_labels(ddf: dd.DataFrame, strata: str | None) -> list:
    """Sorted distinct stratum labels (one label, None, when there are no strata)."""
    if strata is None:
        return [None]
    return sorted(ddf[strata].dropna().unique().compute().tolist(), key=str)


def _assign_columns(part: pd.DataFrame, columns: dict[str, np.ndarray]) -> pd.DataFrame:
    """Return a copy of ``part`` with the given columns replaced (the input partition is never modified)."""
    out = part.copy()
    for name, values in columns.items():
        out[name] = np.asarray(values, dtype=np.float64)
    return out


def _rebuild(ddf: dd.DataFrame, parts: list, variables: list[str]) -> dd.DataFrame:
    """A Dask DataFrame from delayed partitions with the input's divisions and metadata, masked columns float64."""
    meta = ddf._meta.astype({v: "float64" for v in variables})
    return dd.from_delayed(parts, meta=meta, divisions=ddf.divisions, verify_meta=False)


# ---- microaggregation (statistical_databases_survey.txt, Microaggregation; MDAV per block) ----


def _work_frame(part: pd.DataFrame, offset: int, variables: list[str], id_col: str, strata: str | None,
                codes: dict, center: np.ndarray, scale: np.ndarray, axis: np.ndarray) -> pd.DataFrame:
    """Per record: id, global row position, stratum code, projection on the principal axis, the variables."""
    x = part[variables].to_numpy(dtype=np.float64)
    z = (x - center) / np.where(scale > 0, scale, 1.0)
    out = pd.DataFrame({
        id_col: part[id_col].to_numpy(),
        B.POS_COL: np.arange(offset, offset + len(part), dtype=np.int64),
        B.STRATUM_COL: (part[strata].map(codes).to_numpy(dtype=np.int64) if strata else np.zeros(len(part), np.int64)),
        B.PROJ_COL: z @ axis,
    })
    for j, v in enumerate(variables):
        out[v] = x[:, j]
    return out


def _with_blocks(part: pd.DataFrame, offset: int, starts: np.ndarray, sizes: np.ndarray,
                 nblocks: np.ndarray) -> pd.DataFrame:
    """Add the block id of each record of one sorted partition starting at global rank ``offset``."""
    rank = np.arange(offset, offset + len(part), dtype=np.int64)
    out = part.copy()
    out[B.BLOCK_COL] = B.block_of_rank(rank, part[B.STRATUM_COL].to_numpy(), starts, sizes, nblocks)
    return out


def _microaggregate_blocks(part: pd.DataFrame, variables: list[str], id_col: str, k: int,
                           group_size: int | None, center: np.ndarray, scale: np.ndarray) -> pd.DataFrame:
    """MDAV on each whole block of one block-aligned partition; returns position and masked values."""
    pieces = []
    for _, block in part.groupby(B.BLOCK_COL, sort=True):
        block = block.sort_values(id_col, kind="stable")
        masked = microaggregate_block(block[variables].to_numpy(np.float64), k, center, scale, group_size)
        piece = pd.DataFrame(masked, columns=variables)
        piece.insert(0, B.POS_COL, block[B.POS_COL].to_numpy())
        pieces.append(piece)
    return pd.concat(pieces, ignore_index=True)


def microaggregation_step(ddf: dd.DataFrame, variables: list[str], params: dict[str, Any],
                          ctx: StepContext) -> StepResult:
    """Blocked MDAV: sort on the first principal axis (ties by id), cut into blocks of >= block_size records
    per stratum, microaggregate each block exactly, and put the masked values back in input order.

    Standardization uses the global mean and population sd; group means are on the original scale
    (statistical_databases_survey.txt, Microaggregation).
    """
    k, block_size = params["k"], params["block_size"]
    lengths = B.partition_lengths(ddf)
    offsets = B.offsets_of(lengths)
    labels = _stratum_labels(ddf, ctx.strata)
    codes = {lab: i for i, lab in enumerate(labels)}
    m = moments_graph(ddf, variables).compute()
    center, scale = m.mean, m.sd
    axis = B.principal_axis(m)
    work_parts = [
        dask.delayed(_work_frame)(part, int(offsets[i]), variables, ctx.id_column, ctx.strata, codes,
                                  center, scale, axis)
        for i, part in enumerate(ddf.to_delayed())
    ]
    work = dd.from_delayed(work_parts, meta=_work_frame(ddf._meta, 0, variables, ctx.id_column, ctx.strata,
                                                        codes, center, scale, axis), verify_meta=False)
    ordered = work.sort_values([B.STRATUM_COL, B.PROJ_COL, ctx.id_column]).persist()
    sizes = np.bincount(ordered[B.STRATUM_COL].compute().to_numpy(), minlength=len(labels)).astype(np.int64)
    too_small = [str(labels[i]) for i, s in enumerate(sizes) if s < k]
    if too_small:
        raise ValueError(f"mdav: k = {k} but stratum {too_small[0]!r} has fewer than k records")
    starts, nblocks = B.block_layout(sizes, block_size)
    sorted_lengths = B.partition_lengths(ordered)
    sorted_offsets = B.offsets_of(sorted_lengths)
    blocked = [
        dask.delayed(_with_blocks)(part, int(sorted_offsets[i]), starts, sizes, nblocks)
        for i, part in enumerate(ordered.to_delayed())
    ]
    cuts = B.block_cuts(B.block_starts(sizes, block_size), int(sizes.sum()), max(block_size, TARGET_PARTITION_ROWS))
    aligned = B.cut_rows(blocked, sorted_lengths, cuts)
    masked_parts = [
        dask.delayed(_microaggregate_blocks)(part, variables, ctx.id_column, k, params["group_size"], center, scale)
        for part in aligned
    ]
    meta = pd.DataFrame({B.POS_COL: pd.Series(dtype="int64"), **{v: pd.Series(dtype="float64") for v in variables}})
    masked = dd.from_delayed(masked_parts, meta=meta, verify_meta=False).sort_values(B.POS_COL).persist()
    back = B.cut_rows(masked.to_delayed(), B.partition_lengths(masked), [int(o) for o in offsets])
    final = [
        dask.delayed(_assign_columns)(part, dask.delayed(_columns_of)(piece, variables))
        for part, piece in zip(ddf.to_delayed(), back)
    ]
    return StepResult(_rebuild(ddf, final, variables), blocks=int(nblocks.sum()), min_group_size=k, pinned=(ordered, masked))


def _columns_of(frame: pd.DataFrame, variables: list[str]) -> dict[str, np.ndarray]:
    """The given columns of a frame as arrays."""
    return {v: frame[v].to_numpy() for v in variables}


# ---- rank swapping (statistical_databases_survey.txt, Data swapping and rank swapping) ----


def _select(part: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """A column subset of one partition."""
    return part[columns]


def _swap_column(pieces: list[pd.DataFrame], var: str, id_col: str, strata: str | None, p: float,
                 seed: int, step: int) -> np.ndarray:
    """Rank-swap one column over its whole scope (the file, or each stratum); values in input row order."""
    frame = pd.concat(pieces, ignore_index=True)
    values = frame[var].to_numpy(dtype=np.float64)
    ids = frame[id_col].to_numpy()
    out = np.empty_like(values)
    if strata is None:
        return rank_swap_column(values, ids, p, rng_for(seed, step, var))
    labels = frame[strata].to_numpy()
    for label in sorted(pd.unique(labels), key=str):
        idx = np.flatnonzero(labels == label)
        out[idx] = rank_swap_column(values[idx], ids[idx], p, rng_for(seed, step, var, label))
    return out


def _slice(arr: np.ndarray, start: int, stop: int) -> np.ndarray:
    """arr[start:stop]."""
    return arr[start:stop]


def rank_swap_step(ddf: dd.DataFrame, variables: list[str], params: dict[str, Any], ctx: StepContext) -> StepResult:
    """Rank swapping of each variable over the whole file or within each stratum, exact (one column at a time
    is gathered on one worker), with random draws keyed by (seed, step, variable, stratum)."""
    lengths = B.partition_lengths(ddf)
    offsets = B.offsets_of(lengths)
    parts = ddf.to_delayed()
    keep = [ctx.id_column] + ([ctx.strata] if ctx.strata else [])
    swapped = {
        var: dask.delayed(_swap_column)(
            [dask.delayed(_select)(part, keep + [var]) for part in parts],
            var, ctx.id_column, ctx.strata, params["p"], ctx.seed, ctx.step,
        )
        for var in variables
    }
    final = [
        dask.delayed(_assign_columns)(
            part, {var: dask.delayed(_slice)(col, int(offsets[i]), int(offsets[i + 1])) for var, col in swapped.items()}
        )
        for i, part in enumerate(parts)
    ]
    scopes = len(_stratum_labels(ddf, ctx.strata))
    return StepResult(_rebuild(ddf, final, variables), blocks=scopes)


STEP_BUILDERS: dict[str, Callable[..., StepResult]] = {
    "mdav": microaggregation_step,
    "rankswap": rank_swap_step,
}


def apply_step(ddf: dd.DataFrame, method: str, variables: list[str], params: dict[str, Any],
               ctx: StepContext) -> StepResult:
    """Apply one registered masking method to ``variables`` of ``ddf``; other columns pass through unchanged."""
    return STEP_BUILDERS[method](ddf, variables, params, ctx)
