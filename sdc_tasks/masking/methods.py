"""Every masking method as one plan: its kernel and the shape it runs in (per block, per column scope, per
record, or categorical: counts per scope, then per partition), behind one call shape, ``apply_step``.

Sources: statistical_databases_survey.txt (Noise addition, Microaggregation, Data swapping and rank
swapping); sdc_methods_comparison_chapter.txt sec. 2 (Noise, Distr, Resampling, MicIR/MicZ/MicPCP,
Mic2mul..Micmul, JPEG, Rank swapping); pil_measures.txt sec. 5 (rescaling); post_masking_optimization.txt
Algorithm 1 and sec. 5 (post-masking optimization, synthetic generator); the categorical methods: their
module, sdc_tasks.masking.categorical (chapter sec. 2, SDC Methods for Categorical Microdata).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import dask.dataframe as dd
import numpy as np
import pandas as pd

from sdc_tasks.io import read_table, write_parquet
from sdc_tasks.masking import apply as A
from sdc_tasks.masking.categorical import CATEGORY_METHODS
from sdc_tasks.masking.distribution import distribution_mask
from sdc_tasks.masking.jpeg import TILE_ROWS, jpeg_block
from sdc_tasks.masking.md import md_microaggregate_block
from sdc_tasks.masking.mdav import microaggregate_block
from sdc_tasks.masking.noise import correlated_noise, kim_transform
from sdc_tasks.masking.postmask import (original_columns, original_context, postmask_block, synthetic_block,
                                         with_original)
from sdc_tasks.masking.rankswap import rank_swap_column
from sdc_tasks.masking.resampling import resample_column, rescale
from sdc_tasks.masking.univariate import individual_ranking, optimal_univariate, projected_microaggregation
from sdc_tasks.masking.vmdav import variable_microaggregate_block
from sdc_tasks.outputs import scratch_dir
from sdc_tasks.record_random import record_normals
from sdc_tasks.stats.moments import frame_moments


@dataclass(frozen=True)
class MethodPlan:
    """How a method runs: ``shape`` is "blocked", "column", "record" or "categorical"; blocked methods carry a BlockPlan
    and say whether blocks must be made of whole groups of k (``unit_k``) and whether the block stage carries
    each record's original values beside the masked ones (``original``)."""

    shape: str
    kernel: Callable
    block: A.BlockPlan | None = None
    unit_k: bool = False
    original: bool = False


# ---- block kernels: (block frame in id order, values, ids, params, global stats) -> masked values ----


def _mdav(block: pd.DataFrame, x: np.ndarray, ids: np.ndarray, params: dict, stats: A.BlockStats) -> np.ndarray:
    """MDAV on one block (statistical_databases_survey.txt, Microaggregation)."""
    return microaggregate_block(x, params["k"], stats.center, stats.scale, params["group_size"])


def _md(block: pd.DataFrame, x: np.ndarray, ids: np.ndarray, params: dict, stats: A.BlockStats) -> np.ndarray:
    """MD on one block (sdc_methods_comparison_chapter.txt sec. 2, Mic2mul..Micmul)."""
    return md_microaggregate_block(x, params["k"], stats.center, stats.scale, params["group_size"])


def _vmdav(block: pd.DataFrame, x: np.ndarray, ids: np.ndarray, params: dict, stats: A.BlockStats) -> np.ndarray:
    """Variable-size (k..2k-1) microaggregation on one block."""
    return variable_microaggregate_block(x, params["k"], stats.center, stats.scale, params["gamma"],
                                         params["group_size"])


def _projected(block: pd.DataFrame, x: np.ndarray, ids: np.ndarray, params: dict,
               stats: A.BlockStats) -> np.ndarray:
    """MicZ / MicPCP on one block: fixed groups of k along the projection the blocks were sorted on
    (chapter sec. 2); blocks hold whole groups, so this equals the method on the whole file."""
    return projected_microaggregation(x, params["k"], block[f"{A.B.PROJ_COL}0"].to_numpy(), ids)


def _jpeg(block: pd.DataFrame, x: np.ndarray, ids: np.ndarray, params: dict, stats: A.BlockStats) -> np.ndarray:
    """JPEG q on one tile of records in id order (chapter sec. 2, Lossy compression)."""
    return jpeg_block(x, params["q"], stats.lo, stats.hi)


# ---- column kernels: (values of one scope, ids, params, rng) -> masked values ----


def _rankswap(values: np.ndarray, ids: np.ndarray, params: dict, rng: np.random.Generator) -> np.ndarray:
    """Rank swapping (survey, Data swapping and rank swapping)."""
    return rank_swap_column(values, ids, params["p"], rng)


def _mic_ir(values: np.ndarray, ids: np.ndarray, params: dict, rng: np.random.Generator) -> np.ndarray:
    """Individual ranking microaggregation of one variable (chapter sec. 2, MicIR)."""
    return individual_ranking(values[:, None], params["k"], ids)[:, 0]


def _mic_optimal(values: np.ndarray, ids: np.ndarray, params: dict, rng: np.random.Generator) -> np.ndarray:
    """Optimal univariate microaggregation (Hansen-Mukherjee; survey ref. [22])."""
    return optimal_univariate(values[:, None], params["k"], ids)[:, 0]


def _resample(values: np.ndarray, ids: np.ndarray, params: dict, rng: np.random.Generator) -> np.ndarray:
    """Resampling with t samples (chapter sec. 2)."""
    return resample_column(values, ids, params["t"], rng)


def _distr(values: np.ndarray, ids: np.ndarray, params: dict, rng: np.random.Generator) -> np.ndarray:
    """Data distortion by the best-fitting distribution (chapter sec. 2, Distr)."""
    return distribution_mask(values, ids, rng)


# ---- record kernels: (values, ids, params, global context) -> masked values ----


def _noise(x: np.ndarray, ids: np.ndarray, params: dict, ctx: dict) -> np.ndarray:
    """Additive noise from record-keyed normals: N(0, alpha Sigma) with alpha = p^2 when correlated (so each
    variable's noise sd is p s_j as in the uncorrelated N(0, p s)); optionally Kim's linear transformation
    restoring means and covariances (survey, Noise addition; chapter sec. 2)."""
    normals = record_normals(ctx["seed"], ctx["step"], ids, x.shape[1])
    alpha = params["p"] ** 2
    cov = ctx["cov"] if params["correlated"] else np.diag(np.diag(ctx["cov"]))
    z = correlated_noise(x, alpha, cov, normals)
    if "noised_mean" not in ctx:
        return z
    return kim_transform(z, alpha, ctx["mean"], ctx["n"], ctx["noised_mean"])


def _rescale(x: np.ndarray, ids: np.ndarray, params: dict, ctx: dict) -> np.ndarray:
    """Rescaling to the original means and variances (pil_measures.txt sec. 5)."""
    return rescale(x, ctx["ref_mean"], ctx["ref_var"], ctx["mean"], ctx["var"])


PLANS: dict[str, MethodPlan] = {
    "mdav": MethodPlan("blocked", _mdav, A.BlockPlan("principal", 2)),
    "md": MethodPlan("blocked", _md, A.BlockPlan("principal", 2)),
    "mdav_variable": MethodPlan("blocked", _vmdav, A.BlockPlan("principal", 2)),
    "mic_z": MethodPlan("blocked", _projected, A.BlockPlan("zsum", 1), unit_k=True),
    "mic_pcp": MethodPlan("blocked", _projected, A.BlockPlan("principal", 1), unit_k=True),
    "jpeg": MethodPlan("blocked", _jpeg, A.BlockPlan("id", 1)),
    "postmask": MethodPlan("blocked", postmask_block, A.BlockPlan("principal", 2), original=True),
    "synthetic_postmask": MethodPlan("blocked", synthetic_block, A.BlockPlan("principal", 2), original=True),
    "rankswap": MethodPlan("column", _rankswap),
    "mic_ir": MethodPlan("column", _mic_ir),
    "mic_optimal": MethodPlan("column", _mic_optimal),
    "resample": MethodPlan("column", _resample),
    "distr": MethodPlan("column", _distr),
    "noise": MethodPlan("record", _noise),
    "rescale": MethodPlan("record", _rescale),
    **{name: MethodPlan("categorical", method) for name, method in CATEGORY_METHODS.items()},
}


def needs_blocks(method: str) -> bool:
    """Whether a method runs on data-driven blocks."""
    return PLANS[method].shape == "blocked"


def block_for(method: str, ddf: dd.DataFrame, variables: list[str], params: dict[str, Any],
              ctx: A.StepContext) -> A.Staged:
    """The block stage of a blocked method."""
    plan = PLANS[method]
    k = params.get("k", 1)
    block_size = TILE_ROWS if method == "jpeg" else params["block_size"]
    if not plan.original:
        return A.block_records(ddf, variables, block_size, k, ctx, plan.block, unit=k if plan.unit_k else 1)
    joined = with_original(ddf, variables, ctx)
    staged = A.block_records(joined.frame, variables + original_columns(variables), block_size, k, ctx, plan.block)
    return A.Staged(staged.frame, staged.blocks, (*staged.pinned, *joined.pinned))


def _moments(ddf: dd.DataFrame, variables: list[str]):
    """Moments of the variables (the same for any partitioning)."""
    return frame_moments(ddf, variables)


def _record_context(method: str, ddf: dd.DataFrame, variables: list[str], params: dict[str, Any],
                    ctx: A.StepContext) -> dict:
    """Global quantities a record kernel needs."""
    m = _moments(ddf, variables)
    context = {"seed": ctx.seed, "step": ctx.step, "n": m.n, "mean": m.mean, "var": m.sd ** 2, "cov": m.cov}
    if method == "rescale":
        ref = _moments(ctx.reference if ctx.reference is not None else ddf, variables)
        context.update(ref_mean=ref.mean, ref_var=ref.sd ** 2)
    if method == "noise" and params["linear_transform"]:
        noised = A.record_records(ddf, variables, params, ctx, _noise, context)
        context["noised_mean"] = _moments(noised, variables).mean
    return context


def mask_for(method: str, source: dd.DataFrame, variables: list[str], params: dict[str, Any],
             ctx: A.StepContext) -> dd.DataFrame:
    """The mask stage: ``_pos`` and masked values (``source`` is the block-aligned collection for blocked
    methods, the step input otherwise)."""
    plan = PLANS[method]
    if plan.shape == "blocked":
        extra = original_context(source, variables, ctx) if plan.original else {}
        return A.blocked_records(source, variables, {**params, **extra}, ctx, plan.kernel)
    if plan.shape == "column":
        return A.column_records(source, variables, params, ctx, plan.kernel)
    if plan.shape == "categorical":
        return A.category_records(source, variables, params, ctx, plan.kernel)
    return A.record_records(source, variables, params, ctx, plan.kernel,
                            _record_context(method, source, variables, params, ctx))


def apply_step(ddf: dd.DataFrame, method: str, variables: list[str], params: dict[str, Any], ctx: A.StepContext,
               work_dir: str | Path | None = None) -> A.Staged:
    """Run block, mask and restore for one method, each stage written to Parquet under ``work_dir`` (a
    private scratch directory when None, ``sdc_tasks.outputs.scratch_dir``, kept until the returned frame has
    been computed or written)."""
    scratch = scratch_dir("step") if work_dir is None else None
    root = Path(scratch.name if scratch else work_dir)
    source, blocks = ddf, A.scope_count(ddf, ctx)
    if needs_blocks(method):
        staged = block_for(method, ddf, variables, params, ctx)
        write_parquet(staged.frame, root / "blocks")
        source, blocks = read_table(root / "blocks", "parquet"), staged.blocks
    write_parquet(mask_for(method, source, variables, params, ctx), root / "masked-values")
    restored = A.restore_order(ddf, read_table(root / "masked-values", "parquet"), variables)
    return A.Staged(restored.frame, blocks, (*restored.pinned, scratch))

