"""Every masking method behind one call shape, ``apply_step``: the registry row of a method
(``sdc_tasks.masking.registry``) says its stage shape (per block, per column scope, per record, or
categorical: counts per scope, then per partition), its kernel adapter and block plan; this module runs the
block and mask stages of that shape, then the restore stage."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import dask.dataframe as dd

from sdc_tasks.io import read_table, write_scratch_parquet
from sdc_tasks.masking import apply as A
from sdc_tasks.masking.household_outcome import HouseholdOutcome
from sdc_tasks.masking.households import household_outcome, household_suppressed_records
from sdc_tasks.masking.postmask_outcome import FIGURE_COLUMNS, PostMaskOutcome
from sdc_tasks.masking.postmask_stage import blocked_records_with_figures, step_outcome
from sdc_tasks.masking.registry import METHODS, Method
from sdc_tasks.masking.swap_outcome import OUTCOME_COLUMN, SwapOutcome, swap_outcome_from_json
from sdc_tasks.outputs import scratch_area, scratch_dir
from sdc_tasks.reserved import HOUSEHOLD_EXTRA_COL
from sdc_tasks.stats.moments import frame_moments


def needs_blocks(method: str) -> bool:
    """Whether a method runs on data-driven blocks."""
    return METHODS[method].shape == "blocked"


def blocks_written(method: str, ddf: dd.DataFrame, variables: list[str], params: dict[str, Any], ctx: A.StepContext,
                   work_dir: Path) -> int:
    """Run the block stage of a blocked method (:func:`block_for`) and write its records, in partitions of whole
    blocks, to BLOCKS in the step's ``work_dir``, the stage's own files kept in a scratch directory there until
    then; what the stage held is released once written. Returns the number of blocks."""
    with scratch_area("block", work_dir) as files:
        staged = block_for(method, ddf, variables, params, replace(ctx, work_dir=files))
        write_scratch_parquet(staged.frame, work_dir / BLOCKS)
        return staged.blocks


def block_for(method: str, ddf: dd.DataFrame, variables: list[str], params: dict[str, Any],
              ctx: A.StepContext) -> A.Staged:
    """The block stage of a blocked method."""
    row = METHODS[method]
    k = params.get("k", 1)
    block_size = params["block_size"] if row.fixed_block_size is None else row.fixed_block_size
    if not row.carries_original:
        return A.block_records(ddf, variables, block_size, k, ctx, row.block, unit=k if row.unit_k else 1)
    joined = A.with_original(ddf, variables, ctx)
    staged = A.block_records(joined.frame, variables + A.original_columns(variables), block_size, k, ctx, row.block)
    return A.Staged(staged.frame, staged.blocks, (*staged.pinned, *joined.pinned))


def _record_context(row: Method, ddf: dd.DataFrame, variables: list[str], params: dict[str, Any],
                    ctx: A.StepContext) -> dict:
    """Global quantities a record kernel needs: seed, step and the moments of the step input (the covariance
    matrix of the variables scaled by powers of two, ``Moments.scaled_cov``, and their exponents), and what the
    method's context hook adds."""
    m = frame_moments(ddf, variables)
    context = {"seed": ctx.seed, "step": ctx.step, "n": m.n, "mean": m.mean, "var": m.sd ** 2,
               "scaled_cov": m.scaled_cov(), "exponent": m.exponent}
    hook = row.context_hook()
    if hook is not None:
        context.update(hook(ddf, variables, params, ctx, context))
    return context


def mask_for(method: str, source: dd.DataFrame, variables: list[str], params: dict[str, Any],
             ctx: A.StepContext) -> dd.DataFrame:
    """The mask stage: ``_pos`` and masked values (``source`` is the block-aligned collection for blocked
    methods, the step input otherwise)."""
    row = METHODS[method]
    kernel = row.adapter()
    if row.shape == "blocked":
        extra = A.original_context(source, variables, ctx) if row.carries_original else {}
        masking = blocked_records_with_figures if row.reports_outcome else A.blocked_records
        return masking(source, variables, {**params, **extra}, ctx, kernel)
    if row.shape == "column":
        return A.column_records(source, variables, params, ctx, kernel, row.fold_adapter())
    if row.shape == "categorical":
        if kernel.suppresses and any(v in ctx.household_variables for v in variables):
            return household_suppressed_records(source, variables, params, ctx, kernel)
        return A.category_records(source, variables, params, ctx, kernel)
    if row.shape == "household":
        return kernel(source, variables, params, ctx)
    return A.record_records(source, variables, params, ctx, kernel,
                            _record_context(row, source, variables, params, ctx))


BLOCKS = "blocks"
"""The directory of a step's work directory where a blocked method's block stage writes its records."""
RESTORE_SCRATCH = "restore-scratch"
"""The directory of a step's work directory where the restore stage keeps the masked values in input order when
the workers cannot hold them (``apply.in_input_order``)."""
MASKED_VALUES = "masked-values"
"""The directory of a step's work directory where its mask stage writes positions and masked values."""
MASK_SCRATCH = "mask-scratch"
"""The directory of a step's work directory holding the mask stage's own files (the rank fold's), removed once the
masked values are written."""


def masked_values_written(method: str, source: dd.DataFrame, variables: list[str], params: dict[str, Any],
                          ctx: A.StepContext, work_dir: Path) -> Path:
    """Run the mask stage of a step (:func:`mask_for`) on the step's ``source`` or, for a blocked method, on the
    blocks its block stage wrote to BLOCKS in the step's ``work_dir``, and write its positions and masked values to
    MASKED_VALUES there, its own files kept in MASK_SCRATCH until then; the blocks and those files are removed once
    the masked values are written (no later stage reads them). Returns the written directory."""
    out, scratch, blocks = work_dir / MASKED_VALUES, work_dir / MASK_SCRATCH, work_dir / BLOCKS
    frame = read_table(blocks, "parquet") if needs_blocks(method) else source
    write_scratch_parquet(mask_for(method, frame, variables, params, replace(ctx, work_dir=scratch)), out)
    for done in (scratch, blocks):
        shutil.rmtree(done, ignore_errors=True)
    return out


@dataclass
class Applied(A.Staged):
    """A step's restored output (``apply.Staged``) and, for a post-masking or record swapping method, what it
    reached (for a suppressing one with households, its extra suppressions)."""

    outcome: PostMaskOutcome | HouseholdOutcome | SwapOutcome | None = None


def outcome_for(method: str, params: dict[str, Any],
                masked_values: str | Path) -> PostMaskOutcome | HouseholdOutcome | SwapOutcome | None:
    """What a post-masking or record swapping step reached, from the figures its mask stage wrote to
    ``masked_values``; for a suppressing step that made households consistent, the extra suppressions
    (``masking.households``); None for any other step."""
    row = METHODS[method]
    if row.shape == "categorical" and row.adapter().suppresses:
        masked = read_table(masked_values, "parquet")
        return household_outcome(method, masked) if HOUSEHOLD_EXTRA_COL in masked.columns else None
    if not row.reports_outcome:
        return None
    if METHODS[method].shape == "household":
        texts = read_table(masked_values, "parquet")[OUTCOME_COLUMN].dropna().head(1, npartitions=-1)
        return swap_outcome_from_json(texts.iloc[0])
    figures = read_table(masked_values, "parquet")[list(FIGURE_COLUMNS.values())]
    first = FIGURE_COLUMNS["records"]
    return step_outcome(method, params, figures[figures[first].notnull()].compute())


def apply_step(ddf: dd.DataFrame, method: str, variables: list[str], params: dict[str, Any], ctx: A.StepContext,
               work_dir: str | Path | None = None) -> Applied:
    """Run block, mask and restore for one method, each stage written to Parquet under ``work_dir`` (a
    private scratch directory when None, ``sdc_tasks.outputs.scratch_dir``, kept until the returned frame has
    been computed or written; the blocks removed once the masked values are written); a post-masking method's
    outcome with it."""
    scratch = scratch_dir("step") if work_dir is None else None
    root = Path(scratch.name if scratch else work_dir)
    blocks = A.scope_count(ddf, ctx)
    if needs_blocks(method):
        blocks = blocks_written(method, ddf, variables, params, ctx, root)
    masked = masked_values_written(method, ddf, variables, params, ctx, root)
    restored = A.restore_order(ddf, read_table(masked, "parquet"), variables, root / RESTORE_SCRATCH)
    return Applied(restored.frame, blocks, (*restored.pinned, scratch), outcome_for(method, params, masked))
