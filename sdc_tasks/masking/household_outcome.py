"""What household consistency added to a suppressing step (``sdc_tasks.masking.households``): a
``HouseholdOutcome`` with the household-level values suppressed only because another member of the household lost
them, and the records that lost them, as the release's log, summary and report state it. Pure Python: the reports
import it without a numeric library."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class HouseholdOutcome:
    """A suppressing step with household-level variables: ``extra_suppressions`` values set missing so that every
    member of a household lost the same household-level values (beyond the step's own suppressions), in
    ``records`` records."""

    method: str
    extra_suppressions: int
    records: int

    def as_dict(self) -> dict[str, Any]:
        """The outcome as plain values (a release step's summary)."""
        return asdict(self)

    def text(self) -> str:
        """One line: the extra suppressions and the records they fell on."""
        return (f"{self.method}: {self.extra_suppressions:,} more household-level values suppressed in "
                f"{self.records:,} records, so that all members of a household lost the same ones")

    def warning(self) -> str | None:
        """Nothing a person must be warned of: the extra suppressions keep k-anonymity."""
        return None
