"""Graph builders: one masking step as three stages over Dask collections.

1. block:   records of a blocked method are sorted on a data-driven key and cut into partitions that hold
            whole blocks (methods that work on whole scopes skip this stage);
2. mask:    the method's kernel runs per block (or per scope) and yields ``_pos`` (the record's position in
            the step's input) with the masked values;
3. restore: the masked values go back into the input's partitions and row order; other columns pass
            through unchanged.

Each stage's output is written to Parquet by the caller, so stages restart from paths and nothing large
stays in cluster memory between them. ``apply_step`` runs all three with a scratch directory.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd

from sdc_tasks import blocking as B
from sdc_tasks.io import read_table, write_parquet
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
class Staged:
    """A lazily built stage output and facts for the report.

    ``pinned`` holds persisted collections ``frame`` is built on: keep this object alive until ``frame`` is
    written, or the cluster releases them.
    """

    frame: dd.DataFrame
    blocks: int
    pinned: tuple = ()


def stratum_labels(ddf: dd.DataFrame, strata: str | None) -> list:
    """Sorted distinct stratum labels (one label, None, when there are no strata)."""
    if strata is None:
        return [None]
    return sorted(ddf[strata].dropna().unique().compute().tolist(), key=str)


def _positions_meta(variables: list[str]) -> pd.DataFrame:
    """Empty frame with the mask stage's columns: _pos and the masked variables."""
    return pd.DataFrame({B.POS_COL: pd.Series(dtype="int64"), **{v: pd.Series(dtype="float64") for v in variables}})


# ---- block stage (statistical_databases_survey.txt, Microaggregation: MDAV applied per block) ----


def _work_frame(part: pd.DataFrame, offset: int, variables: list[str], id_col: str, strata: str | None,
                codes: dict, center: np.ndarray, scale: np.ndarray, axis: np.ndarray) -> pd.DataFrame:
    """Per record: id, position, stratum code, projection on the principal axis, the variables."""
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


def block_records(ddf: dd.DataFrame, variables: list[str], params: dict[str, Any], ctx: StepContext) -> Staged:
    """Data-driven blocks: records sorted by (stratum, projection on the first principal axis of the
    standardized variables, id) and cut into blocks of >= block_size records per stratum (sizes differ by at
    most one); partitions hold whole blocks. Nothing depends on the worker or partition count."""
    k, block_size = params["k"], params["block_size"]
    offsets = B.offsets_of(B.partition_lengths(ddf))
    labels = stratum_labels(ddf, ctx.strata)
    codes = {lab: i for i, lab in enumerate(labels)}
    m = moments_graph(ddf, variables).compute()
    axis = B.settled(B.principal_axis(m))
    args = (variables, ctx.id_column, ctx.strata, codes, B.settled(m.mean), B.settled(m.sd), axis)
    work_parts = [dask.delayed(_work_frame)(part, int(offsets[i]), *args) for i, part in enumerate(ddf.to_delayed())]
    work = dd.from_delayed(work_parts, meta=_work_frame(ddf._meta, 0, *args), verify_meta=False)
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
    meta = _with_blocks(ordered._meta, 0, starts, sizes, nblocks)
    return Staged(dd.from_delayed(aligned, meta=meta, verify_meta=False), int(nblocks.sum()), (ordered,))


# ---- mask stage ----


def _microaggregate_blocks(part: pd.DataFrame, variables: list[str], id_col: str, k: int,
                           group_size: int | None, center: np.ndarray, scale: np.ndarray) -> pd.DataFrame:
    """MDAV on each whole block of one block-aligned partition (rows in id order); positions and group means."""
    if len(part) == 0:
        return _positions_meta(variables)
    pieces = []
    for _, block in part.groupby(B.BLOCK_COL, sort=True):
        block = block.sort_values(id_col, kind="stable")
        masked = microaggregate_block(block[variables].to_numpy(np.float64), k, center, scale, group_size)
        piece = pd.DataFrame(masked, columns=variables)
        piece.insert(0, B.POS_COL, block[B.POS_COL].to_numpy())
        pieces.append(piece)
    return pd.concat(pieces, ignore_index=True)


def microaggregate_records(blocked: dd.DataFrame, variables: list[str], params: dict[str, Any],
                           ctx: StepContext) -> dd.DataFrame:
    """MDAV (statistical_databases_survey.txt, Microaggregation) on every block, standardized with the global
    mean and population sd, group means on the original scale."""
    m = moments_graph(blocked, variables).compute()
    return blocked.map_partitions(_microaggregate_blocks, variables, ctx.id_column, params["k"],
                                  params["group_size"], B.settled(m.mean), B.settled(m.sd),
                                  meta=_positions_meta(variables))


def _select(part: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """A column subset of one partition."""
    return part[columns]


def _swap_column(pieces: list[pd.DataFrame], var: str, id_col: str, strata: str | None, p: float,
                 seed: int, step: int) -> np.ndarray:
    """Rank-swap one column over its whole scope (the file, or each stratum); values in input row order
    (statistical_databases_survey.txt, Data swapping and rank swapping)."""
    frame = pd.concat(pieces, ignore_index=True)
    values = frame[var].to_numpy(dtype=np.float64)
    ids = frame[id_col].to_numpy()
    if strata is None:
        return rank_swap_column(values, ids, p, rng_for(seed, step, var))
    out = np.empty_like(values)
    labels = frame[strata].to_numpy()
    for label in sorted(pd.unique(labels), key=str):
        idx = np.flatnonzero(labels == label)
        out[idx] = rank_swap_column(values[idx], ids[idx], p, rng_for(seed, step, var, label))
    return out


def _positions_frame(offset: int, n: int, columns: dict[str, np.ndarray]) -> pd.DataFrame:
    """_pos for rows offset..offset+n-1 and the given column slices."""
    out = pd.DataFrame({B.POS_COL: np.arange(offset, offset + n, dtype=np.int64)})
    for name, values in columns.items():
        out[name] = np.asarray(values[offset:offset + n], dtype=np.float64)
    return out


def rank_swap_records(ddf: dd.DataFrame, variables: list[str], params: dict[str, Any], ctx: StepContext) -> dd.DataFrame:
    """Rank swapping of each variable over the whole file or within each stratum, exact: one column at a time
    is gathered on one worker; random draws keyed by (seed, step, variable, stratum). The result has the
    input's partitions and row order."""
    lengths = B.partition_lengths(ddf)
    offsets = B.offsets_of(lengths)
    parts = ddf.to_delayed()
    keep = [ctx.id_column] + ([ctx.strata] if ctx.strata else [])
    swapped = {
        var: dask.delayed(_swap_column)([dask.delayed(_select)(part, keep + [var]) for part in parts],
                                        var, ctx.id_column, ctx.strata, params["p"], ctx.seed, ctx.step)
        for var in variables
    }
    pieces = [dask.delayed(_positions_frame)(int(offsets[i]), lengths[i], swapped) for i in range(len(parts))]
    return dd.from_delayed(pieces, meta=_positions_meta(variables), verify_meta=False)


# ---- restore stage ----


def _assign_columns(part: pd.DataFrame, masked: pd.DataFrame, variables: list[str]) -> pd.DataFrame:
    """A copy of ``part`` with ``variables`` replaced by the aligned masked values (input never modified)."""
    if len(masked) != len(part):
        raise RuntimeError(f"restore: a partition of {len(part)} records got {len(masked)} masked records")
    out = part.copy()
    for v in variables:
        out[v] = masked[v].to_numpy(dtype=np.float64)
    return out


def _position_layout(part: pd.DataFrame) -> pd.DataFrame:
    """Length, first position and whether positions run consecutively in one partition."""
    pos = part[B.POS_COL].to_numpy()
    consecutive = bool(len(pos) == 0 or (pos[-1] - pos[0] == len(pos) - 1 and np.all(np.diff(pos) == 1)))
    return pd.DataFrame({"n": [len(pos)], "first": [int(pos[0]) if len(pos) else -1], "consecutive": [consecutive]})


def _aligned(masked: dd.DataFrame, lengths: list[int], offsets: list[int]) -> bool:
    """Whether ``masked`` already has the source's partitions with positions in order (no sort needed)."""
    if masked.npartitions != len(lengths):
        return False
    layout = masked.map_partitions(_position_layout, meta=_position_layout(masked._meta)).compute()
    return (layout["n"].tolist() == lengths and layout["consecutive"].all()
            and all(f == o for f, o, n in zip(layout["first"], offsets, lengths) if n))


def restore_order(source: dd.DataFrame, masked: dd.DataFrame, variables: list[str]) -> Staged:
    """Put masked values (keyed by ``_pos``) back into ``source``'s partitions and row order; masked variables
    become float64, every other column passes through. Sorts by position only when the masked values are
    not already aligned with the source's partitions."""
    lengths = B.partition_lengths(source)
    offsets = [int(o) for o in B.offsets_of(lengths)]
    pinned: tuple = ()
    if _aligned(masked, lengths, offsets):
        back = masked.to_delayed()
    else:
        by_pos = masked.sort_values(B.POS_COL).persist()
        back = B.cut_rows(by_pos.to_delayed(), B.partition_lengths(by_pos), offsets)
        pinned = (by_pos,)
    parts = [dask.delayed(_assign_columns)(part, piece, variables) for part, piece in zip(source.to_delayed(), back)]
    meta = source._meta.astype({v: "float64" for v in variables})
    return Staged(dd.from_delayed(parts, meta=meta, divisions=source.divisions, verify_meta=False), 0, pinned)


@dataclass(frozen=True)
class MethodStages:
    """How a registered method runs: whether it needs the block stage, and its mask stage."""

    blocked: bool
    mask: Callable[..., dd.DataFrame]


STAGES: dict[str, MethodStages] = {
    "mdav": MethodStages(blocked=True, mask=microaggregate_records),
    "rankswap": MethodStages(blocked=False, mask=rank_swap_records),
}


def scope_count(ddf: dd.DataFrame, ctx: StepContext) -> int:
    """Number of swap scopes (strata, or the whole file)."""
    return len(stratum_labels(ddf, ctx.strata))


def apply_step(ddf: dd.DataFrame, method: str, variables: list[str], params: dict[str, Any], ctx: StepContext,
               work_dir: str | Path | None = None) -> Staged:
    """Run block, mask and restore for one method, each stage written to Parquet under ``work_dir`` (a
    temporary directory when None, kept until the returned frame has been computed or written)."""
    scratch = tempfile.TemporaryDirectory(prefix="sdc-step-") if work_dir is None else None
    root = Path(scratch.name if scratch else work_dir)
    stages = STAGES[method]
    source = ddf
    blocks = scope_count(ddf, ctx)
    if stages.blocked:
        staged = block_records(ddf, variables, params, ctx)
        write_parquet(staged.frame, root / "blocks")
        source, blocks = read_table(root / "blocks", "parquet"), staged.blocks
    write_parquet(stages.mask(source, variables, params, ctx), root / "masked-values")
    restored = restore_order(ddf, read_table(root / "masked-values", "parquet"), variables)
    return Staged(restored.frame, blocks, (*restored.pinned, scratch))
