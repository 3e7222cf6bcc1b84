"""The release gate: each gated measure against its limit, and the wording of a refusal."""

from __future__ import annotations

from dataclasses import dataclass

from sdc_tasks.pipeline.spec import ReleaseSpec


@dataclass(frozen=True)
class GateCheck:
    """One gated measure: its value (None when the evaluation did not produce it), the comparison ``op`` with its
    limit, whether it passed, and the ``margin`` left below the limit (limit - value; None when missing)."""

    measure: str
    value: float | None
    op: str
    limit: float
    passed: bool
    margin: float | None


def gate_checks(spec: ReleaseSpec, metrics: dict) -> tuple[GateCheck, ...]:
    """Compare each gated measure of the spec (``gate.max``) with its limit; a missing measure fails its check."""
    checks = []
    for measure, limit in spec.gate.max.items():
        value = metrics.get(measure)
        checks.append(GateCheck(measure, value, "<=", limit, bool(value is not None and value <= limit),
                                None if value is None else limit - value))
    return tuple(checks)


def failed_checks(checks: tuple[GateCheck, ...]) -> tuple[GateCheck, ...]:
    """The checks that did not pass."""
    return tuple(c for c in checks if not c.passed)


def refusal_message(checks: tuple[GateCheck, ...]) -> str:
    """One line naming every failed check: measure, value and limit."""
    parts = [f"{c.measure} = {'missing' if c.value is None else format(c.value, '.4g')} > limit {c.limit:g}"
             for c in failed_checks(checks)]
    return "release refused by the risk gate: " + "; ".join(parts)
