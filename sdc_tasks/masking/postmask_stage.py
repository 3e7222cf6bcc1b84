"""The mask stage of the post-masking methods: the blocks' values as ``apply`` masks them, and each block's
figures of its ``PostMaskResult`` carried beside them (``postmask_outcome.FIGURE_COLUMNS``), then summed up
into the step's ``PostMaskOutcome``."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pandas as pd

from sdc_tasks.masking import apply as A
from sdc_tasks.masking.postmask import PostMaskResult
from sdc_tasks.masking.postmask_outcome import FIGURE_COLUMNS, PostMaskOutcome


def block_figures(result: PostMaskResult) -> dict[str, float]:
    """The figures of one block's run, by FIGURES name."""
    return {"records": len(result.values), "e_initial": result.e_initial, "e_final": result.e_final,
            "il1_initial": result.il1_initial, "il1_final": result.il1_final, "iterations": result.iterations}


def _figures_meta(variables: list[str]) -> pd.DataFrame:
    """Empty frame with the mask stage's columns and the figure columns."""
    meta = A._positions_meta(variables)
    return meta.assign(**{c: pd.Series(dtype="float64") for c in FIGURE_COLUMNS.values()})


def _mask_blocks_with_figures(part: pd.DataFrame, variables: list[str], id_col: str, kernel: Callable,
                              params: dict, stats: A.BlockStats) -> pd.DataFrame:
    """``apply``'s per-block mask of one partition with a kernel returning ``PostMaskResult``: the masked
    values, and each block's figures on its first record (nan on the others)."""
    figures: list[dict[str, float]] = []

    def values(block, x, ids, block_params, block_stats) -> np.ndarray:
        """The kernel's values; its figures kept."""
        result = kernel(block, x, ids, block_params, block_stats)
        figures.append(block_figures(result))
        return result.values

    out = A._mask_blocks(part, variables, id_col, values, params, stats)
    if len(out) == 0:
        return _figures_meta(variables)
    firsts = np.cumsum([0] + [int(f["records"]) for f in figures[:-1]])
    for name, column in FIGURE_COLUMNS.items():
        filled = np.full(len(out), np.nan)
        filled[firsts] = [f[name] for f in figures]
        out[column] = filled
    return out


def blocked_records_with_figures(blocked, variables: list[str], params: dict[str, Any], ctx: A.StepContext,
                                 kernel: Callable):
    """The mask stage of a post-masking method: ``apply.blocked_records`` whose output also carries each
    block's figures (FIGURE_COLUMNS)."""
    stats = A.global_stats(blocked, variables)
    return blocked.map_partitions(_mask_blocks_with_figures, variables, ctx.id_column, kernel, params, stats,
                                  meta=_figures_meta(variables))


def step_outcome(method: str, params: dict[str, Any], figures: pd.DataFrame) -> PostMaskOutcome:
    """The step's outcome from its blocks' figures (one row per block, FIGURE_COLUMNS); the IL1 target p is
    the step's ``p``."""
    f = figures.rename(columns={c: n for n, c in FIGURE_COLUMNS.items()})
    n = f["records"].to_numpy(np.float64)
    total = float(n.sum())

    def weighted(name: str) -> float:
        """Record-weighted mean of one figure over the blocks."""
        return float(np.dot(n, f[name].to_numpy(np.float64)) / total) if total else float("nan")

    return PostMaskOutcome(method, float(params["target_e"]), float(params["p"]), len(f),
                           int((f["e_final"] < params["target_e"]).sum()), int(total), weighted("e_initial"),
                           weighted("e_final"), weighted("il1_initial"), weighted("il1_final"),
                           int(f["iterations"].sum()))
