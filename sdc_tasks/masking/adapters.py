"""Kernel adapters: each continuous method's kernel behind the call shape of its stage, and the record
context hooks of the record-shaped methods (the registry, ``sdc_tasks.masking.registry``, names them per
method; the stage builders are ``sdc_tasks.masking.apply``).

- block adapters (``apply.BlockKernel``): (block frame in id order, values, ids, params, global stats) ->
  masked values (the post-masking ones: a ``PostMaskResult``, values and figures, see
  ``sdc_tasks.masking.postmask_outcome``);
- column adapters (``apply.ColumnKernel``): (values of one scope, ids, params, rng) -> masked values;
- fold adapters (``fold.ColumnFold``): (a chunk of a scope's values in rank order, their positions, the chunk's
  first rank, the scope's size, params, the scope's rng, carry) -> (positions, masked values, carry), each with
  its window (``fold.FoldWindow``): (a scope's size, params) -> the ranks ahead of a rank that the carry spans;
- record adapters (``apply.RecordKernel``): (values, ids, params, context) -> masked values, the context
  holding seed, step and the moments of the step input plus what the method's context hook adds;
- categorical methods (``apply.CategoryMethod``): the counts a method plans on, its plan and its mapping of a
  partition's records (``sdc_tasks.masking.categorical``);
- household methods: the mask stage itself, (step input, variables, params, StepContext) -> ``_pos`` and the
  swapped columns (record swapping: ``sdc_tasks.masking.swap_stage.swapped_frame_of``).
"""

from __future__ import annotations

import dask.dataframe as dd
import numpy as np
import pandas as pd

from sdc_tasks.blocking import BLOCK_COL, PROJ_COL
from sdc_tasks.masking.apply import BlockStats, CategoryMethod, StepContext, original_columns, record_records
from sdc_tasks.masking.categorical import (
    bottom_coded,
    coding_plan,
    global_recoding_plan,
    nullable_dtype,
    pram_plan,
    prammed,
    recoded,
    suppressed,
    suppression_plan,
    top_coded,
)
from sdc_tasks.masking.distribution import distribution_mask
from sdc_tasks.masking.jpeg import jpeg_block
from sdc_tasks.masking.md import md_microaggregate_block
from sdc_tasks.masking.mdav import microaggregate_block
from sdc_tasks.masking.noise import correlated_noise, kim_transform
from sdc_tasks.masking.postmask import PostMaskResult, post_mask, random_start
from sdc_tasks.masking.rankswap import SwapCarry, max_rank_distance, rank_swap_chunk, rank_swap_column
from sdc_tasks.masking.recoding import mapped, recode_dtype, recode_plan, threshold_coded, threshold_variables
from sdc_tasks.masking.resampling import resample_column, rescale
from sdc_tasks.masking.swap_stage import swapped_frame_of
from sdc_tasks.masking.univariate import individual_ranking, optimal_univariate, projected_microaggregation
from sdc_tasks.masking.vmdav import variable_microaggregate_block
from sdc_tasks.randomness import rng_for
from sdc_tasks.record_random import record_normals
from sdc_tasks.stats.moments import frame_moments

# ---- block adapters ----


def mdav_on_block(block: pd.DataFrame, x: np.ndarray, ids: np.ndarray, params: dict, stats: BlockStats) -> np.ndarray:
    """MDAV on one block (statistical_databases_survey.txt, Microaggregation)."""
    return microaggregate_block(x, params["k"], stats.center, stats.scale, params["group_size"])


def md_on_block(block: pd.DataFrame, x: np.ndarray, ids: np.ndarray, params: dict, stats: BlockStats) -> np.ndarray:
    """MD on one block (sdc_methods_comparison_chapter.txt sec. 2, Mic2mul..Micmul)."""
    return md_microaggregate_block(x, params["k"], stats.center, stats.scale, params["group_size"])


def vmdav_on_block(block: pd.DataFrame, x: np.ndarray, ids: np.ndarray, params: dict,
                   stats: BlockStats) -> np.ndarray:
    """Variable-size (k..2k-1) microaggregation on one block."""
    return variable_microaggregate_block(x, params["k"], stats.center, stats.scale, params["gamma"],
                                         params["group_size"])


def projected_on_block(block: pd.DataFrame, x: np.ndarray, ids: np.ndarray, params: dict,
                       stats: BlockStats) -> np.ndarray:
    """MicZ / MicPCP on one block: fixed groups of k along the projection the blocks were sorted on
    (sdc_methods_comparison_chapter.txt sec. 2); blocks hold whole groups, so this equals the method on the
    whole file."""
    return projected_microaggregation(x, params["k"], block[f"{PROJ_COL}0"].to_numpy(), ids)


def jpeg_on_block(block: pd.DataFrame, x: np.ndarray, ids: np.ndarray, params: dict, stats: BlockStats) -> np.ndarray:
    """JPEG q on one tile of records in id order (sdc_methods_comparison_chapter.txt sec. 2, Lossy compression)."""
    return jpeg_block(x, params["q"], stats.lo, stats.hi)


def postmask_on_block(block: pd.DataFrame, x: np.ndarray, ids: np.ndarray, params: dict,
                      stats: BlockStats) -> PostMaskResult:
    """Algorithm 1 on one block against the original records of the same ids (post_masking_optimization.txt
    sec. 3.2)."""
    original, rng = _block_original(block, params)
    return _optimized(original, x, params["q"], params["correspondence"], params, rng)


def synthetic_on_block(block: pd.DataFrame, x: np.ndarray, ids: np.ndarray, params: dict,
                       stats: BlockStats) -> PostMaskResult:
    """Synthetic records for one block: Algorithm 1 from a random start with q = 1
    (post_masking_optimization.txt sec. 5); the block's input values are not used."""
    original, rng = _block_original(block, params)
    return _optimized(original, random_start(original, len(x), rng), 1.0, "nearest", params, rng)


def _block_original(block: pd.DataFrame, params: dict) -> tuple[np.ndarray, np.random.Generator]:
    """The block's original records and its random stream, keyed by (seed, step, block)."""
    ctx = params["context"]
    original = block[original_columns(ctx["variables"])].to_numpy(np.float64)
    return original, rng_for(ctx["seed"], ctx["step"], int(block[BLOCK_COL].iloc[0]))


def _optimized(original: np.ndarray, start: np.ndarray, q: float, correspondence: str, params: dict,
               rng: np.random.Generator) -> PostMaskResult:
    """Algorithm 1 with the step's parameters and the global standardization (post_masking_optimization.txt
    sec. 3.2): the optimized values and the run's figures."""
    ctx = params["context"]
    return post_mask(original, start, params["p"], q, params["target_e"], params["max_iter"],
                     params["perturbation_sd"], rng, params["order"], ctx["center"], ctx["scale"],
                     correspondence, params["compensate"])


# ---- column adapters ----


def rankswap_on_column(values: np.ndarray, ids: np.ndarray, params: dict, rng: np.random.Generator) -> np.ndarray:
    """Rank swapping (statistical_databases_survey.txt, Data swapping and rank swapping)."""
    return rank_swap_column(values, ids, params["p"], rng, params.get("partner", "uniform"))


def rankswap_fold(values: np.ndarray, positions: np.ndarray, first: int, n: int, params: dict,
                  rng: np.random.Generator, carry: SwapCarry | None) -> tuple[np.ndarray, np.ndarray, SwapCarry]:
    """Rank swapping of one chunk of ranks of a scope (statistical_databases_survey.txt, Data swapping and rank
    swapping), equal to ``rankswap_on_column`` over the whole scope."""
    return rank_swap_chunk(values, positions, first, n, params["p"], rng, carry, params.get("partner", "uniform"))


def rankswap_window(n: int, params: dict) -> int:
    """The ranks ahead of a rank that rank swapping's partners reach in a scope of ``n`` records: P = floor(n p /
    100) (statistical_databases_survey.txt, Data swapping and rank swapping)."""
    return max_rank_distance(int(n), params["p"])


def mic_ir_on_column(values: np.ndarray, ids: np.ndarray, params: dict, rng: np.random.Generator) -> np.ndarray:
    """Individual ranking microaggregation of one variable (sdc_methods_comparison_chapter.txt sec. 2, MicIR)."""
    return individual_ranking(values[:, None], params["k"], ids)[:, 0]


def mic_optimal_on_column(values: np.ndarray, ids: np.ndarray, params: dict, rng: np.random.Generator) -> np.ndarray:
    """Optimal univariate microaggregation (Hansen-Mukherjee; statistical_databases_survey.txt ref. [22])."""
    return optimal_univariate(values[:, None], params["k"], ids)[:, 0]


def resample_on_column(values: np.ndarray, ids: np.ndarray, params: dict, rng: np.random.Generator) -> np.ndarray:
    """Resampling with t samples (sdc_methods_comparison_chapter.txt sec. 2, Resampling)."""
    return resample_column(values, ids, params["t"], rng)


def distr_on_column(values: np.ndarray, ids: np.ndarray, params: dict, rng: np.random.Generator) -> np.ndarray:
    """Data distortion by the best-fitting distribution (sdc_methods_comparison_chapter.txt sec. 2, Distr)."""
    return distribution_mask(values, ids, rng)


# ---- record adapters and their context hooks: (step input, variables, params, ctx, context) -> more context ----


def noise_on_records(x: np.ndarray, ids: np.ndarray, params: dict, context: dict) -> np.ndarray:
    """Additive noise from record-keyed normals: N(0, alpha Sigma) with alpha = p^2 when correlated (so each
    variable's noise sd is p s_j as in the uncorrelated N(0, p s)); optionally Kim's linear transformation
    restoring means and covariances (statistical_databases_survey.txt, Noise addition;
    sdc_methods_comparison_chapter.txt sec. 2). Where Sigma is not representable (a variance of values near
    1e-300 underflows to 0, one near 1e300 overflows) the noise is drawn for the variables scaled by the powers of
    two of ``context["exponent"]`` (Sigma = D S D, S the scaled covariance, D = diag(2^e)) and scaled back."""
    normals = record_normals(context["seed"], context["step"], ids, x.shape[1])
    alpha = params["p"] ** 2
    scaled = context["scaled_cov"] if params["correlated"] else np.diag(np.diag(context["scaled_cov"]))
    e = context["exponent"]
    with np.errstate(over="ignore", under="ignore"):
        cov = np.ldexp(scaled, e[:, None] + e[None, :])
    if np.isfinite(cov).all() and ((np.diag(cov) > 0) == (np.diag(scaled) > 0)).all():
        z = correlated_noise(x, alpha, cov, normals)
    else:
        z = x + np.ldexp(correlated_noise(np.zeros_like(x), alpha, scaled, normals), e)
    if "noised_mean" not in context:
        return z
    return kim_transform(z, alpha, context["mean"], context["n"], context["noised_mean"])


def noise_context(ddf: dd.DataFrame, variables: list[str], params: dict, ctx: StepContext, context: dict) -> dict:
    """With Kim's linear transformation: the means of the noised variables, which it needs (survey, Noise
    addition); nothing otherwise."""
    if not params["linear_transform"]:
        return {}
    noised = record_records(ddf, variables, params, ctx, noise_on_records, context)
    return {"noised_mean": frame_moments(noised, variables).mean}


def rescale_on_records(x: np.ndarray, ids: np.ndarray, params: dict, context: dict) -> np.ndarray:
    """Rescaling to the original means and variances (pil_measures.txt sec. 5)."""
    return rescale(x, context["ref_mean"], context["ref_var"], context["mean"], context["var"])


def rescale_context(ddf: dd.DataFrame, variables: list[str], params: dict, ctx: StepContext, context: dict) -> dict:
    """The means and variances of the original records (``ctx.reference``; the step input when there is
    none) that rescaling restores (pil_measures.txt sec. 5)."""
    ref = frame_moments(ctx.reference if ctx.reference is not None else ddf, variables)
    return {"ref_mean": ref.mean, "ref_var": ref.sd ** 2}


def threshold_on_records(x: np.ndarray, ids: np.ndarray, params: dict, context: dict) -> np.ndarray:
    """Top and bottom coding at values, each variable by its own rule (statistical_databases_survey.txt, Top and
    bottom coding)."""
    return np.column_stack([threshold_coded(x[:, j], params["rules"][v]) for j, v in enumerate(context["variables"])])


def threshold_context(ddf: dd.DataFrame, variables: list[str], params: dict, ctx: StepContext, context: dict) -> dict:
    """The step's variables in column order, each checked to have a rule."""
    return {"variables": threshold_variables(variables, params)}


# ---- categorical methods ----

top_coding = CategoryMethod("values", coding_plan(top_coded), recoded)
bottom_coding = CategoryMethod("values", coding_plan(bottom_coded), recoded)
global_recoding = CategoryMethod("values", global_recoding_plan, recoded)
pram = CategoryMethod("values", pram_plan, prammed)
def suppression_counts(params: dict) -> str:
    """What local suppression plans on: the combination table with summed weights (threshold), the first k
    records of each key combination (missing: any) or the combination table (missing: category)."""
    if params["threshold"] is not None:
        return "weighted_combinations"
    return "first_records" if params["missing"] == "any" else "combinations"


local_suppression = CategoryMethod(suppression_counts, suppression_plan, suppressed, masked_dtype=nullable_dtype,
                                   suppresses=True)
recode = CategoryMethod("values", recode_plan, mapped, masked_dtype=recode_dtype)


# ---- household methods ----


def swapped_records(ddf: dd.DataFrame, variables: list[str], params: dict, ctx: StepContext) -> dd.DataFrame:
    """Targeted record swapping's mask stage (sdcMicro recordSwap; docs/recordswap.md): ``_pos``, the swapped
    hierarchy and carry-along columns and the step's figures."""
    return swapped_frame_of(ddf, variables, params, ctx)
