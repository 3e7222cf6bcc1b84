"""The final state of a flow run that ended in a refusal rather than a crash: the release gate refused
publication, or no configuration of a comparison met its risk limits."""

from __future__ import annotations

from prefect.states import Failed, State

from sdc_tasks.errors import NoneWithinLimits, ReleaseRefused

REFUSED = "Refused"
"""The name of the final state of a refused run (a Failed state)."""


def refused_state(exc: ReleaseRefused | NoneWithinLimits) -> State:
    """The final state of a refused run: Failed (nothing was published, so failure notifications and ``prefect
    deployment run --watch`` report it) but named "Refused", not a crash: its message says why (for a release,
    each failing check, its value and its limit, and the report; for a comparison, the limits no configuration
    met). Calling the flow raises ``exc`` again."""
    return Failed(name=REFUSED, message=str(exc), data=exc)
