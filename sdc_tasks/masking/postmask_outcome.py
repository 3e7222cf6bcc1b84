"""What a post-masking step reached (post_masking_optimization.txt Algorithm 1): per block, the figures of
``PostMaskResult`` carried out of the mask stage in reserved columns; per step, a ``PostMaskOutcome`` with E
before and after (expr. (7)), TargetE, the IL1 ratio (expr. (6), (8)), the tries made and whether every
block met TargetE, as ``sdc mask`` prints it, the release report shows it and metrics.json holds it
(``postmask_*`` keys, docs/metrics.md)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Callable

import numpy as np
import pandas as pd

from sdc_tasks.masking import apply as A
from sdc_tasks.masking.postmask import PostMaskResult

FIGURES = ("records", "e_initial", "e_final", "il1_initial", "il1_final", "iterations")
"""The per-block figures: records of the block, E and IL1 before and after, perturbations tried."""
FIGURE_COLUMNS = {name: f"__postmask_{name}" for name in FIGURES}
"""Reserved columns ("__" prefix, sdc_tasks.reserved) holding a block's figures on its first record."""


@dataclass(frozen=True)
class PostMaskOutcome:
    """One post-masking step's result over its blocks: ``e_before``/``e_after`` the record-weighted mean of
    the blocks' E (expr. (7); for one block, E of the file; over several, an upper bound of the file's E
    against the original file's moments, docs/postmask.md), ``il1_before``/``il1_after`` IL1 (expr. (6),
    percent) of the input and of the output under the step's correspondence, ``iterations`` the
    perturbations tried in all blocks and ``blocks_met`` the blocks whose E fell below ``target_e``."""

    method: str
    target_e: float
    p: float
    blocks: int
    blocks_met: int
    records: int
    e_before: float
    e_after: float
    il1_before: float
    il1_after: float
    iterations: int

    @property
    def met(self) -> bool:
        """Whether every block reached E < TargetE."""
        return self.blocks_met == self.blocks

    @property
    def il1_ratio(self) -> float:
        """IL1 after / IL1 before: p within 1 % when the band of expr. (8) holds (nan for an input without
        information loss)."""
        return self.il1_after / self.il1_before if self.il1_before > 0 else float("nan")

    def as_dict(self) -> dict[str, Any]:
        """The outcome as plain values (a release step's summary, a Prefect task result)."""
        return asdict(self)

    def metrics(self) -> dict[str, Any]:
        """The metrics.json keys of the outcome (docs/metrics.md, ``postmask_*``)."""
        return {"postmask_E_before": self.e_before, "postmask_E_after": self.e_after,
                "postmask_target_E": self.target_e, "postmask_IL1_ratio": self.il1_ratio,
                "postmask_iterations": self.iterations, "postmask_target_met": int(self.met),
                "postmask_blocks_short": self.blocks - self.blocks_met}

    def text(self) -> str:
        """One line: E before and after against TargetE, the IL1 ratio against p, the tries."""
        reached = "met" if self.met else f"NOT met in {self.blocks - self.blocks_met} of {self.blocks} blocks"
        return (f"{self.method}: E {self.e_before:.4g} -> {self.e_after:.4g}, TargetE {self.target_e:g} "
                f"{reached}; IL1 ratio {self.il1_ratio:.4g} (p = {self.p:g}); {self.iterations:,} tries")

    def warning(self) -> str | None:
        """The line a person must see when TargetE was not met (None when it was)."""
        if self.met:
            return None
        return (f"warning: {self.method} stopped short of TargetE {self.target_e:g} (E {self.e_after:.4g} after "
                f"max_iter tries in {self.blocks - self.blocks_met} of {self.blocks} blocks); docs/postmask.md, "
                f"\"Reaching TargetE\"")


def outcome_from_dict(values: dict[str, Any]) -> PostMaskOutcome:
    """A ``PostMaskOutcome`` from its ``as_dict``."""
    return PostMaskOutcome(**values)


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

