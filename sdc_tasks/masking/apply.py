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

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd

from sdc_tasks import blocking as B
from sdc_tasks.masking.fold import WindowFold, folded_records
from sdc_tasks.masking.registry import BlockPlan
from sdc_tasks.masking.risk_suppression import checked_weight
from sdc_tasks.masking.suppression import first_records, largest_k, merge_first_records
from sdc_tasks.randomness import rng_for
from sdc_tasks.reserved import COUNT_COL, ORIGINAL_PREFIX
from sdc_tasks.scheduling import one_task_holds, shuffle_method, workers_hold
from sdc_tasks.stats.frequencies import frequency_tables, scope_rows, weighted_frequency_table
from sdc_tasks.stats.moments import frame_moments, frame_spread
from sdc_tasks.task_graph import kept_partitions

TARGET_PARTITION_ROWS = 250_000
BLOCKED_PARTITIONS = 8
"""A small file's blocks go into at least about this many partitions, so that its blocks run side by side (on
the threads of a small file's process too); set by the data alone, so the release does not depend on it."""
COLUMN_MAX_RECORDS = 10_000_000
"""A column kernel with a fold gathers each column into one task up to this many records of the step input, where
a quarter of a task's memory holds COLUMN_BYTES a record, and runs as the fold beyond (rank swapping of 1e7 x 13
on two workers: mask step 57 s gathered, 293 s as the fold, docs/performance.md)."""
COLUMN_BYTES = 128
"""Bytes per record a column kernel's task holds at its peak (the column, ids, positions, the permutation)."""


@dataclass(frozen=True)
class StepContext:
    """What a step needs besides its parameters: seed, step number, id column, strata column, the
    release's original records (``reference``, a Dask collection) for steps that restore its statistics,
    the declared order of ordinal categorical variables (``category_orders``: variable -> categories, or None
    for the sorted observed values), and the household id column with the household-level variables, which
    categorical methods mask once per household (``household``, ``household_variables``;
    ``sdc_tasks.masking.households``) and record swapping swaps whole (``sdc_tasks.masking.swap_stage``), and the
    step's work directory (``work_dir``: kept until the step's output is written, reached by every worker), where
    a stage keeps the files it reads back (the rank fold's; the block stage's sorts beyond the workers' memory)."""

    seed: int
    step: int
    id_column: str
    strata: str | None = None
    reference: Any = None
    category_orders: dict = field(default_factory=dict)
    household: str | None = None
    household_variables: tuple[str, ...] = ()
    work_dir: Path | None = None


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


def stratum_sizes(frame: dd.DataFrame, strata_count: int, records: int, strata: str | None) -> np.ndarray:
    """Records of each stratum, by the stratum codes of ``frame``'s block column (a pass over the file); without
    strata the file's ``records``, one stratum, with no pass."""
    if strata is None:
        return np.array([records], dtype=np.int64)
    return np.bincount(frame[B.BLOCK_COL].compute().to_numpy(), minlength=strata_count).astype(np.int64)


def _positions_meta(variables: list[str]) -> pd.DataFrame:
    """Empty frame with the mask stage's columns: _pos and the masked variables."""
    return pd.DataFrame({B.POS_COL: pd.Series(dtype="int64"), **{v: pd.Series(dtype="float64") for v in variables}})


# ---- block stage (statistical_databases_survey.txt, Microaggregation: MDAV applied per block) ----


def _key_frame(part: pd.DataFrame, offset: int, variables: list[str], id_col: str, strata: str | None,
               codes: dict, center: np.ndarray, scale: np.ndarray, axes: np.ndarray) -> pd.DataFrame:
    """Per record, what the levels sort: id, position, stratum code (the first grouping) and scores on the
    principal axes; the variables stay behind until the records move to their blocks."""
    z = (part[variables].to_numpy(dtype=np.float64) - center) / np.where(scale > 0, scale, 1.0)
    scores = z @ axes
    out = pd.DataFrame({
        id_col: part[id_col].to_numpy(),
        B.POS_COL: np.arange(offset, offset + len(part), dtype=np.int64),
        B.BLOCK_COL: (part[strata].map(codes).to_numpy(dtype=np.int64) if strata else np.zeros(len(part), np.int64)),
    })
    for a in range(axes.shape[1]):
        out[f"{B.PROJ_COL}{a}"] = scores[:, a]
    return out


def _with_blocks(part: pd.DataFrame, blocks: pd.DataFrame, offset: int, variables: list[str],
                 id_col: str) -> pd.DataFrame:
    """One input partition's id, position, block and scores (from ``blocks``, its rows in position order) and
    variables."""
    if len(blocks) != len(part):
        raise RuntimeError(f"block stage: a partition of {len(part)} records got {len(blocks)} block numbers")
    out = pd.DataFrame({
        id_col: part[id_col].to_numpy(),
        B.POS_COL: np.arange(offset, offset + len(part), dtype=np.int64),
        B.BLOCK_COL: blocks[B.BLOCK_COL].to_numpy(dtype=np.int64),
    })
    for c in blocks.columns.drop([B.POS_COL, B.BLOCK_COL]):
        out[c] = blocks[c].to_numpy()
    for v in variables:
        out[v] = part[v].to_numpy(dtype=np.float64)
    return out


def _block_column(part: pd.DataFrame) -> pd.DataFrame:
    """The block number back from the index to a column."""
    return part.reset_index()


def in_input_order(frame: dd.DataFrame, lengths: list[int], files: Path | None = None) -> tuple[list, tuple]:
    """Delayed pieces of ``frame`` (keyed by ``_pos``) holding the rows of each input partition of ``lengths``, in
    position order, and what they are read from (keep it until the pieces are computed): the shuffled rows, held in the
    workers' memory or, with ``files``, in files in that directory (:func:`~sdc_tasks.task_graph.kept_partitions`).
    Each row goes to its input partition by a range shuffle on divisions known here, not by Dask's sort_values: that
    samples the column through a read that Dask may fuse into fewer partitions than the frame's, and then takes
    partitions that overlap for sorted ones (seen on Parquet files of a mask stage)."""
    offsets = B.offsets_of(lengths)
    targets = frame.assign(**{TARGET_COL: frame[B.POS_COL].map_partitions(_input_partition, offsets,
                                                                         meta=(B.POS_COL, "int64"))})
    by_part = targets.set_index(TARGET_COL, divisions=[*range(len(lengths)), len(lengths) - 1],
                               shuffle_method=shuffle_method())
    ordered = by_part.map_partitions(_by_position, meta=_by_position(by_part._meta))
    return kept_partitions(ordered, files)


def files_beyond_memory(work_dir: Path | None, name: str, records: int, values: int) -> Path | None:
    """Where a stage keeps intermediate results of ``values`` values a record (8 bytes each, an index included)
    for ``records`` records: None, the workers' memory, when they hold them within a quarter of it
    (:func:`~sdc_tasks.scheduling.workers_hold`) or the step has no work directory; else ``work_dir / name``."""
    if work_dir is None or workers_hold(records * values * 8):
        return None
    return Path(work_dir) / name


TARGET_COL = "_input_partition"


def _input_partition(positions: pd.Series, offsets: np.ndarray) -> pd.Series:
    """The input partition of each position (``offsets``: each partition's first position, then the total)."""
    return pd.Series(np.searchsorted(offsets, positions.to_numpy(), side="right") - 1, index=positions.index,
                     dtype="int64")


def _by_position(part: pd.DataFrame) -> pd.DataFrame:
    """One input partition's rows in position order, without the shuffle's index."""
    return part.sort_values(B.POS_COL, kind="stable").reset_index(drop=True)


def _group_counts(part: pd.DataFrame, groups: int) -> np.ndarray:
    """Records of each group in one partition."""
    return np.bincount(part[B.BLOCK_COL].to_numpy(), minlength=groups).reshape(1, groups)


def _regrouped(part: pd.DataFrame, first_rank: np.ndarray, sizes: np.ndarray, parts: np.ndarray,
               unit: int) -> pd.DataFrame:
    """Replace each record's group by its part, from its global rank in (group, key, id) order: the rank of the
    group's first record in this partition (``first_rank``) plus its place among the group's records here."""
    group = part[B.BLOCK_COL].to_numpy()
    rank = first_rank[group] + pd.Series(group).groupby(group).cumcount().to_numpy()
    out = part.copy()
    out[B.BLOCK_COL] = B.part_of_rank(rank, group, sizes, parts, unit)
    return out


def _split_level(frame: dd.DataFrame, key: str, id_col: str, sizes: np.ndarray, parts: np.ndarray, unit: int,
                 files: Path | None) -> tuple[dd.DataFrame, tuple]:
    """Cut every group into ``parts`` by rank on (key, id); returns (frame, what it is read from: keep it until the
    frame is computed).

    The records are sorted on (key, id) across groups, a sort Dask range-partitions on the key (a sort led by the group
    would put a whole group, or the whole file, in one partition), and kept in the workers' memory or, with
    ``files``, in files in that directory (:func:`~sdc_tasks.task_graph.kept_partitions`); each record's rank within
    its group comes from the group counts of the partitions before its own."""
    ordered = frame.sort_values([key] if key == id_col else [key, id_col])
    held, pinned = kept_partitions(ordered, None if files is None else files / f"level-{key}")
    counts = np.concatenate(dask.compute(*[dask.delayed(_group_counts)(part, len(sizes)) for part in held]))
    group_start = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    first_rank = group_start + np.cumsum(counts, axis=0) - counts
    pieces = [dask.delayed(_regrouped)(part, first_rank[i], sizes, parts, unit) for i, part in enumerate(held)]
    return dd.from_delayed(pieces, meta=ordered._meta, verify_meta=False), pinned


def _axes(m, plan: BlockPlan, p: int) -> np.ndarray:
    """The projection axes (p, levels) of a plan; none for a plan that sorts on the id."""
    if plan.axes == "zsum":
        return np.ones((p, 1))
    if plan.axes == "principal":
        return B.principal_axes(m, min(plan.levels, p))
    return np.zeros((p, 0))


def block_records(ddf: dd.DataFrame, variables: list[str], block_size: int, k: int, ctx: StepContext,
                  plan: BlockPlan = BlockPlan(), unit: int = 1) -> Staged:
    """Data-driven blocks by recursive sort-tile partitioning: within each stratum, records are sorted on the
    plan's first key (ties by id) and cut by rank into slabs, each slab sorted on the next key and cut
    again, the last level into blocks of >= block_size records made of whole ``unit``s (sizes within a
    parent differ by at most one unit). Partitions hold whole blocks. Nothing depends on the worker or
    partition count.

    Only the sort keys go through the levels' sorts; the records themselves move once, to the partition of
    their block (a shuffle on the block number with the partition boundaries known in advance). A level that cuts
    no group (every stratum under two blocks' records) sorts nothing."""
    lengths = B.partition_lengths(ddf)
    offsets = B.offsets_of(lengths)
    labels = stratum_labels(ddf, ctx.strata)
    codes = {lab: i for i, lab in enumerate(labels)}
    m = frame_moments(ddf, variables) if plan.axes == "principal" else frame_spread(ddf, variables)
    axes = _axes(m, plan, len(variables))
    args = (variables, ctx.id_column, ctx.strata, codes, m.mean, m.sd, axes)
    key_parts = [dask.delayed(_key_frame)(part, int(offsets[i]), *args) for i, part in enumerate(ddf.to_delayed())]
    frame = dd.from_delayed(key_parts, meta=_key_frame(ddf._meta, 0, *args), verify_meta=False)
    sizes = stratum_sizes(frame, len(labels), int(offsets[-1]), ctx.strata)
    too_small = [int(n) for n in sizes if n < max(k, unit)]
    if too_small:
        scope = f"the stratum of {ctx.strata!r}" if ctx.strata else "the file"
        raise ValueError(f"k = {k} needs at least {k} records per block but {scope} has {too_small[0]}")
    scores = [f"{B.PROJ_COL}{a}" for a in range(axes.shape[1])]
    keys = scores or [ctx.id_column]
    files = files_beyond_memory(ctx.work_dir, "block-keys", int(sizes.sum()),
                                (len(keys) + 1) * (len(frame.columns) + 1))  # every level's sort, then the order back
    pinned: list = []
    cut = False
    for level, key in enumerate(keys):
        parts = B.fanout(sizes, block_size, len(keys) - level, unit)
        if (parts == 1).all():  # a level that cuts no group keeps every record's block: no sort
            continue
        cut = True
        frame, held = _split_level(frame, key, ctx.id_column, sizes, parts, unit, files)
        pinned.extend(held)
        sizes = B.split_sizes(sizes, parts, unit)
    block_keys = frame[[B.POS_COL, B.BLOCK_COL, *scores]]
    if cut:
        pieces, held = in_input_order(block_keys, lengths, None if files is None else files / "in-input-order")
        pinned.extend(held)
    else:  # no level sorted: the key frame's partitions are the input's, in its order
        pieces = block_keys.to_delayed()
    records = [dask.delayed(_with_blocks)(part, piece, int(offsets[i]), variables, ctx.id_column)
               for i, (part, piece) in enumerate(zip(ddf.to_delayed(), pieces))]
    meta = _with_blocks(ddf._meta, block_keys._meta, 0, variables, ctx.id_column)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    cuts = B.block_cuts(starts, int(sizes.sum()), max(block_size, partition_rows(int(sizes.sum()))))
    divisions = [int(b) for b in np.searchsorted(starts, cuts[:-1])] + [len(sizes) - 1]
    moved = dd.from_delayed(records, meta=meta, verify_meta=False).set_index(B.BLOCK_COL, divisions=divisions,
                                                                             shuffle_method=shuffle_method())
    return Staged(moved.map_partitions(_block_column, meta=_block_column(moved._meta)), len(sizes), tuple(pinned))


def partition_rows(total: int) -> int:
    """Rows per partition of the blocked records: TARGET_PARTITION_ROWS, or fewer for a file of fewer than
    BLOCKED_PARTITIONS times that."""
    return max(1, min(TARGET_PARTITION_ROWS, -(-total // BLOCKED_PARTITIONS)))


# ---- the original records carried beside the masked ones (post_masking_optimization.txt, Algorithm 1: each
#      record's original values in its block) ----


def original_columns(variables: list[str]) -> list[str]:
    """Names of the columns that carry each record's original values through the block stage."""
    return [ORIGINAL_PREFIX + v for v in variables]


def with_original(ddf: dd.DataFrame, variables: list[str], ctx: StepContext) -> Staged:
    """The step input with each record's original values (``ctx.reference``, matched by id; the input itself
    when there is no reference) beside the masked ones, same partitions and row order; a record without an
    original is an error naming its id. Keep the result alive until its frame has been used."""
    cols = original_columns(variables)
    if ctx.reference is None:
        return Staged(ddf.assign(**{c: ddf[v].astype("float64") for c, v in zip(cols, variables)}), 0)
    missing = [c for c in [ctx.id_column, *variables] if c not in ctx.reference.columns]
    if missing:
        raise ValueError(f"the original records lack column(s) {missing} needed by post-masking optimization")
    offsets = B.offsets_of(B.partition_lengths(ddf))
    ids = ddf[[ctx.id_column]]
    parts = [dask.delayed(_with_positions)(part, int(offsets[i])) for i, part in enumerate(ids.to_delayed())]
    positions = dd.from_delayed(parts, meta=_with_positions(ids._meta, 0), verify_meta=False)
    ref = ctx.reference[[ctx.id_column, *variables]].rename(columns=dict(zip(variables, cols)))
    joined = positions.merge(ref, on=ctx.id_column, how="left", shuffle_method=shuffle_method())
    unmatched = joined[joined[cols[0]].isna()][ctx.id_column].head(1, npartitions=-1)
    if len(unmatched):
        raise ValueError(f"record {ctx.id_column} = {unmatched.tolist()[0]!r} has no original record")
    placeholders = ddf.assign(**{c: 0.0 for c in cols})
    return restore_order(placeholders, joined[[B.POS_COL, *cols]], cols, ctx.work_dir)


def _with_positions(part: pd.DataFrame, first: int) -> pd.DataFrame:
    """The id column of one partition with each record's position in the collection (``_pos``)."""
    out = part.copy()
    out[B.POS_COL] = np.arange(first, first + len(part), dtype=np.int64)
    return out


def original_context(source: dd.DataFrame, variables: list[str], ctx: StepContext) -> dict:
    """What the kernel needs besides the block, under ``context``: the variables, the original's mean and
    population sd (standardization, Algorithm 1 step 1), seed and step (random streams keyed by (seed,
    step, block))."""
    m = frame_moments(source, original_columns(variables))
    return {"context": {"variables": list(variables), "center": m.mean, "scale": m.sd, "seed": ctx.seed,
                        "step": ctx.step}}


# ---- mask stage: a kernel of each shape (blocked, column, record, categorical) ----

BlockKernel = Callable[[pd.DataFrame, np.ndarray, np.ndarray, dict, "BlockStats"], np.ndarray]
ColumnKernel = Callable[[np.ndarray, np.ndarray, dict, np.random.Generator], np.ndarray]
RecordKernel = Callable[[np.ndarray, np.ndarray, dict, dict], np.ndarray]


@dataclass(frozen=True)
class CategoryMethod:
    """A categorical method: ``counts`` is "values" (a frequency table per variable), "combinations" (one
    table of the variables' value combinations, missing counted as a value), "weighted_combinations" (that table
    with summed sampling weights), "first_records" (the key values and positions of the first k records of each
    combination) or a function of the parameters naming one; ``plan``
    makes a scope's plan from its counts, the parameters and the declared category orders; ``mask`` masks a
    scope's records of one partition (their positions in column ``_pos``) with it; ``masked_dtype``: the dtype a
    masked column takes given its input's, the variable and the parameters (None: the input's; e.g. a nullable
    one where values may become missing, text for labels); ``suppresses``: a method that sets values missing
    (local suppression), whose household-level variables a household loses together (``masking.households``)."""

    counts: str | Callable[[dict], str]
    plan: Callable[[Any, dict, dict], Any]
    mask: Callable[[pd.DataFrame, list[str], Any, dict], pd.DataFrame]
    masked_dtype: Callable[[Any, str, dict], Any] | None = None
    suppresses: bool = False


@dataclass(frozen=True)
class BlockStats:
    """Global statistics a block kernel may need: mean, population sd, minimum and maximum of each variable."""

    center: np.ndarray
    scale: np.ndarray
    lo: np.ndarray
    hi: np.ndarray


def _mask_blocks(part: pd.DataFrame, variables: list[str], id_col: str, kernel: BlockKernel, params: dict,
                 stats: BlockStats) -> pd.DataFrame:
    """Run ``kernel`` on each whole block of one block-aligned partition (rows in id order)."""
    if len(part) == 0:
        return _positions_meta(variables)
    pieces = []
    for _, block in part.groupby(B.BLOCK_COL, sort=True):
        block = block.sort_values(id_col, kind="stable")
        masked = kernel(block, block[variables].to_numpy(np.float64), block[id_col].to_numpy(), params, stats)
        piece = pd.DataFrame(masked, columns=variables)
        piece.insert(0, B.POS_COL, block[B.POS_COL].to_numpy())
        pieces.append(piece)
    return pd.concat(pieces, ignore_index=True)


def global_stats(ddf: dd.DataFrame, variables: list[str]) -> BlockStats:
    """Mean and sd (exact sums, the same for any partitioning) and the extremes of each variable."""
    spread = frame_spread(ddf, variables)
    return BlockStats(spread.mean, spread.sd, spread.low, spread.high)


def blocked_records(blocked: dd.DataFrame, variables: list[str], params: dict[str, Any], ctx: StepContext,
                    kernel: BlockKernel) -> dd.DataFrame:
    """A block kernel on every block of the block-aligned collection, with global statistics."""
    stats = global_stats(blocked, variables)
    return blocked.map_partitions(_mask_blocks, variables, ctx.id_column, kernel, params, stats,
                                  meta=_positions_meta(variables))


def _select(part: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """A column subset of one partition."""
    return part[columns]


def _mask_column(pieces: list[pd.DataFrame], var: str, id_col: str, strata: str | None, kernel: ColumnKernel,
                 params: dict, seed: int, step: int) -> np.ndarray:
    """One column masked over its whole scope (the file, or each stratum) by a column kernel; values in
    input row order; random draws keyed by (seed, step, variable, stratum)."""
    frame = pd.concat(pieces, ignore_index=True)
    values = frame[var].to_numpy(dtype=np.float64)
    ids = frame[id_col].to_numpy()
    if strata is None:
        return kernel(values, ids, params, rng_for(seed, step, var))
    out = np.empty_like(values)
    labels = frame[strata].to_numpy()
    for label in sorted(pd.unique(labels), key=str):
        idx = np.flatnonzero(labels == label)
        out[idx] = kernel(values[idx], ids[idx], params, rng_for(seed, step, var, label))
    return out


def _positions_frame(offset: int, n: int, columns: dict[str, np.ndarray]) -> pd.DataFrame:
    """_pos for rows offset..offset+n-1 and the given column slices."""
    out = pd.DataFrame({B.POS_COL: np.arange(offset, offset + n, dtype=np.int64)})
    for name, values in columns.items():
        out[name] = np.asarray(values[offset:offset + n], dtype=np.float64)
    return out


def column_records(ddf: dd.DataFrame, variables: list[str], params: dict[str, Any], ctx: StepContext,
                   kernel: ColumnKernel, fold: WindowFold | None = None) -> dd.DataFrame:
    """A column kernel on each variable over the whole file or within each stratum, exact. Up to
    ``COLUMN_MAX_RECORDS`` records that a task's memory holds (COLUMN_BYTES), or without a ``fold`` (the kernel as
    a fold over rank-ordered partitions, ``sdc_tasks.masking.fold``), each column is gathered on one worker;
    otherwise the fold runs, the same values with a few partitions per task, its files under ``ctx.work_dir``.
    The result has the input's partitions and row order."""
    lengths = B.partition_lengths(ddf)
    records = sum(lengths)
    if fold is not None and records > 0 and not one_task_holds(records, COLUMN_MAX_RECORDS, COLUMN_BYTES):
        if ctx.work_dir is None:
            raise ValueError("the rank fold keeps its files in the step's work directory: StepContext.work_dir")
        return folded_records(ddf, lengths, variables, fold, params, ctx.seed, ctx.step, ctx.id_column, ctx.strata,
                              TARGET_PARTITION_ROWS, Path(ctx.work_dir) / "fold")
    offsets = B.offsets_of(lengths)
    parts = ddf.to_delayed()
    keep = [ctx.id_column] + ([ctx.strata] if ctx.strata else [])
    masked = {
        var: dask.delayed(_mask_column)([dask.delayed(_select)(part, keep + [var]) for part in parts],
                                        var, ctx.id_column, ctx.strata, kernel, params, ctx.seed, ctx.step)
        for var in variables
    }
    pieces = [dask.delayed(_positions_frame)(int(offsets[i]), lengths[i], masked) for i in range(len(parts))]
    return dd.from_delayed(pieces, meta=_positions_meta(variables), verify_meta=False)


def _mask_records(part: pd.DataFrame, offset: int, variables: list[str], id_col: str, kernel: RecordKernel,
                  params: dict, context: dict) -> pd.DataFrame:
    """A record kernel on one partition: each record's masked values depend on the record and global context."""
    masked = kernel(part[variables].to_numpy(np.float64), part[id_col].to_numpy(), params, context)
    out = pd.DataFrame({B.POS_COL: np.arange(offset, offset + len(part), dtype=np.int64)})
    for j, v in enumerate(variables):
        out[v] = masked[:, j]
    return out


def record_records(ddf: dd.DataFrame, variables: list[str], params: dict[str, Any], ctx: StepContext,
                   kernel: RecordKernel, context: dict) -> dd.DataFrame:
    """A record kernel over every partition (aligned with the input)."""
    offsets = B.offsets_of(B.partition_lengths(ddf))
    pieces = [dask.delayed(_mask_records)(part, int(offsets[i]), variables, ctx.id_column, kernel, params, context)
              for i, part in enumerate(ddf.to_delayed())]
    return dd.from_delayed(pieces, meta=_positions_meta(variables), verify_meta=False)


def _scope_counts(tables: list[pd.DataFrame], variables: list[str], counts: str, strata: str | None) -> dict:
    """The counts a categorical method plans on, per stratum label: {variable: frequency per category} or
    the table of combinations."""
    if counts == "combinations":
        return scope_rows(tables[0], strata)
    per_variable = [scope_rows(t, strata) for t in tables]
    return {label: {v: rows[label].set_index(v)[COUNT_COL] for v, rows in zip(variables, per_variable)}
            for label in per_variable[0]}


def _first_records_scopes(ddf: dd.DataFrame, variables: list[str], strata: str | None, k: int) -> dict:
    """Per stratum label, the key values and positions of the first k records of each combination of
    ``variables`` (suppression.first_records, merged over the partitions; at most k rows per combination). Each
    partition's table and length come from the same delayed partitions, in one pass, and the offsets from those
    lengths: Dask's Parquet reader may fuse a few columns' partitions, and may fuse them differently for two
    computations (the lengths of one, the partitions of another), while a record's position is the same over any
    partitioning of the file."""
    lead = [strata] if strata else []
    parts = ddf[lead + variables].to_delayed()
    tables, lengths = dask.compute([dask.delayed(first_records)(part, lead + variables, k, 0) for part in parts],
                                   [dask.delayed(len)(part) for part in parts])
    offsets = B.offsets_of(lengths)
    table = merge_first_records([t.assign(**{B.POS_COL: t[B.POS_COL] + offsets[i]}) for i, t in enumerate(tables)],
                                lead + variables, k)
    if strata is None:
        return {None: table}
    return {label: rows.drop(columns=strata).reset_index(drop=True)
            for label, rows in table.groupby(strata, sort=True, observed=True)}


def mask_categories(part: pd.DataFrame, offset: int, variables: list[str], strata: str | None,
                     method: CategoryMethod, plans: dict, keys: dict, meta: pd.DataFrame) -> pd.DataFrame:
    """A categorical method on one partition: the records of each stratum masked by that stratum's plan."""
    part = part.reset_index(drop=True)
    positions = pd.Series(np.arange(offset, offset + len(part), dtype=np.int64))
    scopes = [(None, part)] if strata is None else part.groupby(strata, sort=True, observed=True)
    located = [(label, rows.assign(**{B.POS_COL: positions[rows.index].to_numpy()})) for label, rows in scopes]
    pieces = [method.mask(rows, variables, plans[label], keys).assign(**{B.POS_COL: rows[B.POS_COL].to_numpy()})
              for label, rows in located]
    if not pieces:
        return meta
    out = pd.concat(pieces).sort_values(B.POS_COL, kind="stable")
    return out[meta.columns].astype(meta.dtypes.to_dict()).reset_index(drop=True)


def category_plans(ddf: dd.DataFrame, variables: list[str], params: dict[str, Any], ctx: StepContext,
                   method: CategoryMethod) -> tuple[dict, dict, pd.DataFrame]:
    """A categorical method's plan per stratum label from exact counts (one tree reduction; category frequencies of
    a household-level variable count households), the keys its mask gets (seed, step, id column, household id
    column and the household-level variables among ``variables``) and the mask stage's empty frame (``_pos`` and
    the variables in their masked dtypes)."""
    kind = method.counts(params) if callable(method.counts) else method.counts
    homes = [v for v in variables if v in ctx.household_variables]
    if kind == "first_records":
        scopes = _first_records_scopes(ddf, variables, ctx.strata, largest_k(params))
    elif kind == "weighted_combinations":
        table = weighted_frequency_table(ddf, variables, checked_weight(ddf._meta, variables, params), ctx.strata)
        scopes = scope_rows(table, ctx.strata)
    else:
        groupings = [variables] if kind == "combinations" else [[v] for v in variables]
        units = [ctx.household if kind == "values" and g[0] in homes else None for g in groupings]
        tables = frequency_tables(ddf, groupings, ctx.strata, dropna=kind == "values", units=units)
        scopes = _scope_counts(tables, variables, kind, ctx.strata)
    plans = {label: method.plan(counts, params, ctx.category_orders) for label, counts in scopes.items()}
    keys = {"seed": ctx.seed, "step": ctx.step, "id_column": ctx.id_column, "household": ctx.household,
            "household_variables": homes}
    dtypes = {v: ddf._meta[v].dtype if method.masked_dtype is None
              else method.masked_dtype(ddf._meta[v].dtype, v, params) for v in variables}
    meta = pd.DataFrame({B.POS_COL: pd.Series(dtype="int64"), **{v: pd.Series(dtype=t) for v, t in dtypes.items()}})
    return plans, keys, meta


def category_records(ddf: dd.DataFrame, variables: list[str], params: dict[str, Any], ctx: StepContext,
                     method: CategoryMethod) -> dd.DataFrame:
    """A categorical method over every partition (aligned with the input): exact counts per stratum by one
    tree reduction, a small plan per stratum made on the client (:func:`category_plans`), then each partition's
    records mapped by it. Masked columns keep their dtype (a nullable one when values may become missing)."""
    plans, keys, meta = category_plans(ddf, variables, params, ctx, method)
    offsets = B.offsets_of(B.partition_lengths(ddf))
    pieces = [dask.delayed(mask_categories)(part, int(offsets[i]), variables, ctx.strata, method, plans, keys, meta)
              for i, part in enumerate(ddf.to_delayed())]
    return dd.from_delayed(pieces, meta=meta, verify_meta=False)


# ---- restore stage ----


def _assign_columns(part: pd.DataFrame, masked: pd.DataFrame, dtypes: dict) -> pd.DataFrame:
    """A copy of ``part`` with the variables of ``dtypes`` replaced by the aligned masked values, of those
    dtypes (input never modified)."""
    if len(masked) != len(part):
        raise RuntimeError(f"restore: a partition of {len(part)} records got {len(masked)} masked records")
    out = part.copy()
    for v, dtype in dtypes.items():
        out[v] = masked[v].astype(dtype).array
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


def restore_order(source: dd.DataFrame, masked: dd.DataFrame, variables: list[str],
                  work_dir: Path | None = None) -> Staged:
    """Put masked values (keyed by ``_pos``) back into ``source``'s partitions and row order; masked variables
    take the mask stage's dtype (float64 for continuous methods), every other column passes through. Sorts by
    position only when the masked values are not already aligned with the source's partitions, through files in
    ``work_dir`` (kept until the frame is written) when the workers cannot hold them (:func:`files_beyond_memory`).
    """
    lengths = B.partition_lengths(source)
    offsets = [int(o) for o in B.offsets_of(lengths)]
    pinned: tuple = ()
    if _aligned(masked, lengths, offsets):
        back = masked.to_delayed()
    else:
        files = files_beyond_memory(work_dir, "in-input-order", offsets[-1], len(masked.columns) + 1)
        back, pinned = in_input_order(masked, lengths, files)
    dtypes = {v: masked._meta[v].dtype for v in variables}
    parts = [dask.delayed(_assign_columns)(part, piece, dtypes) for part, piece in zip(source.to_delayed(), back)]
    meta = source._meta.astype(dtypes)
    return Staged(dd.from_delayed(parts, meta=meta, divisions=source.divisions, verify_meta=False), 0, pinned)


def scope_count(ddf: dd.DataFrame, ctx: StepContext) -> int:
    """Number of scopes a whole-scope method runs in (strata, or the whole file)."""
    return len(stratum_labels(ddf, ctx.strata))
