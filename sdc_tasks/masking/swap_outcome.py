"""What a targeted record swapping step reached (sdcMicro recordSwap; docs/recordswap.md): a ``SwapOutcome`` with
the swap rate reached per geographic level, the risky households before and after, those that found no donor
(a count, never a list), as ``sdc mask`` prints it, the release report shows it and metrics.json holds it
(``trs_*`` keys, docs/metrics.md). The figures come out of the mask stage in a reserved column
(``OUTCOME_COLUMN``). Pure Python: the reports import it without a numeric library."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

OUTCOME_COLUMN = "__swap_outcome"
"""Reserved column ("__" prefix, sdc_tasks.reserved) holding the step's figures as JSON on the first record of
each partition of the mask stage's output."""


@dataclass(frozen=True)
class SwapOutcome:
    """One record swapping step's result: ``levels`` the geographic columns coarse to fine; per level,
    ``risky_before`` the households risky at that level and no coarser one (a member in a cell of fewer than k
    persons of its risk variables and geography), ``swapped`` the households (both of each pair) swapped in pairs
    formed at that level, ``unmatched`` the risky households of that level that found no donor, and
    ``risky_after`` the households risky at that level on the swapped file; ``households``, ``persons`` of the
    file and ``persons_swapped`` the persons whose geography was exchanged."""

    method: str
    swap_rate: float
    k: int
    levels: list[str]
    households: int
    persons: int
    persons_swapped: int
    risky_before: list[int]
    swapped: list[int]
    unmatched: list[int]
    risky_after: list[int]

    @property
    def reached(self) -> float:
        """Share of the households swapped, all levels together (both households of a pair counted)."""
        return sum(self.swapped) / self.households if self.households else 0.0

    def level_rates(self) -> dict[str, float]:
        """Per level, the share of the households swapped in pairs formed at that level."""
        return {level: n / self.households if self.households else 0.0 for level, n in zip(self.levels,
                                                                                          self.swapped)}

    def as_dict(self) -> dict[str, Any]:
        """The outcome as plain values (a release step's summary, a Prefect task result)."""
        return asdict(self)

    def as_json(self) -> str:
        """The outcome as one JSON text (the mask stage's reserved column)."""
        return json.dumps(self.as_dict(), separators=(",", ":"))

    def metrics(self) -> dict[str, Any]:
        """The metrics.json keys of the outcome (docs/metrics.md, ``trs_*``)."""
        return {"trs_swap_rate": self.reached, "trs_swap_rate_target": self.swap_rate,
                **{f"trs_level_swap_rate_{level}": rate for level, rate in self.level_rates().items()},
                "trs_risky_households_before": sum(self.risky_before),
                "trs_risky_households_after": sum(self.risky_after),
                "trs_unmatched_households": sum(self.unmatched), "trs_persons_swapped": self.persons_swapped}

    def text(self) -> str:
        """One line: swap rate reached against the target, per level, risky households and those without donor."""
        levels = ", ".join(f"{level} {100 * rate:.2f} %" for level, rate in self.level_rates().items())
        return (f"{self.method}: {100 * self.reached:.2f} % of {self.households:,} households swapped (target "
                f"{100 * self.swap_rate:g} %; by level {levels}); risky households (k = {self.k}) "
                f"{sum(self.risky_before):,} before, {sum(self.risky_after):,} after; {sum(self.unmatched):,} "
                "without a donor")

    def warning(self) -> str | None:
        """The line a person must see when risky households found no donor (None when all did)."""
        missing = sum(self.unmatched)
        if not missing:
            return None
        return (f"warning: {self.method} found no donor for {missing:,} risky households (they keep their "
                "geography); widen the similarity profiles or add a coarser one (docs/recordswap.md)")


def swap_outcome_from_json(text: str) -> SwapOutcome:
    """A ``SwapOutcome`` from its ``as_json``."""
    return SwapOutcome(**json.loads(text))
