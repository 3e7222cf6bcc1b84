"""What a post-masking step reached (post_masking_optimization.txt Algorithm 1): a ``PostMaskOutcome`` with
E before and after (expr. (7)), TargetE, the IL1 ratio (expr. (6), (8)), the tries made and whether every
block met TargetE, as ``sdc mask`` prints it, the release report shows it and metrics.json holds it
(``postmask_*`` keys, docs/metrics.md). The per-block figures come out of the mask stage in reserved columns
(``sdc_tasks.masking.postmask_stage``). Pure Python: the reports import it without a numeric library."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from sdc_tasks.masking.household_outcome import HouseholdOutcome
from sdc_tasks.masking.swap_outcome import SwapOutcome

SWAP_METHOD = "record_swap"
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


def outcome_from_dict(values: dict[str, Any]) -> PostMaskOutcome | HouseholdOutcome | SwapOutcome:
    """A step's outcome from its ``as_dict``: a ``SwapOutcome`` for record swapping, a suppressing step's
    ``HouseholdOutcome`` (told by its ``extra_suppressions``), else a ``PostMaskOutcome``."""
    if values.get("method") == SWAP_METHOD:
        return SwapOutcome(**values)
    if "extra_suppressions" in values:
        return HouseholdOutcome(**values)
    return PostMaskOutcome(**values)


def outcome_metrics(steps) -> dict[str, Any]:
    """The outcome keys of a release's steps (objects with an ``outcome`` attribute, an outcome's ``as_dict`` or
    None): the ``postmask_*`` keys of its last post-masking step, with ``postmask_blocks_short`` counted over every
    post-masking step (so a gate on it, docs/postmask.md, sees each), and the ``trs_*`` keys of its last record
    swapping step; none without such steps."""
    outcomes = [outcome_from_dict(s.outcome) for s in steps if s.outcome is not None]
    postmask = [o for o in outcomes if isinstance(o, PostMaskOutcome)]
    swaps = [o for o in outcomes if isinstance(o, SwapOutcome)]
    out = swaps[-1].metrics() if swaps else {}
    if postmask:
        out.update({**postmask[-1].metrics(),
                    "postmask_blocks_short": sum(o.blocks - o.blocks_met for o in postmask)})
    return out
