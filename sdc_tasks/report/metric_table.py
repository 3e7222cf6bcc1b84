"""The metrics of a report as table rows, each key resolved against the metric catalogue
(sdc_tasks/metrics/catalogue.py): its group, unit and description, in catalogue order."""

from __future__ import annotations

import numbers
from dataclasses import dataclass

from sdc_tasks.metrics.catalogue import (
    BOOKKEEPING,
    GROUP_ORDER,
    GROUP_OTHER,
    HIGHER,
    MEASURES,
    anchor_of,
    description_of,
    key_order,
    measure_of,
)


@dataclass(frozen=True)
class MetricRow:
    """A metric key resolved against the catalogue, with its sort position."""

    measure: str
    value: float | int
    group: str
    unit: str
    description: str
    anchor: str
    position: tuple[int, int, int, str]


def _is_metric_value(key: str, value) -> bool:
    """Return whether a metrics entry is a reportable number (a number, not a bool, of a key that is no
    bookkeeping)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return False
    try:
        return measure_of(key).family != BOOKKEEPING
    except KeyError:
        return True


def metric_row(key: str, value: numbers.Real) -> MetricRow:
    """Return a metric resolved to its group, unit, description and position (group, catalogue order, number,
    key); a key the catalogue does not know goes last under Other, without unit or description.

    Counts (integers, such as PRIL_RF_undefined_terms) stay integers; every other value becomes a float.
    """
    value = value if isinstance(value, numbers.Integral) else float(value)
    try:
        measure = measure_of(key)
    except KeyError:
        return MetricRow(key, value, GROUP_OTHER, "", "", "", (GROUP_ORDER.index(GROUP_OTHER), len(MEASURES), 0, key))
    description = description_of(key) + (" (higher is better)" if measure.direction == HIGHER else "")
    return MetricRow(key, value, measure.group, measure.unit, description, anchor_of(key), key_order(key))


def metrics_table_rows(metrics: dict) -> list[dict]:
    """Return rows {"measure", "value", "group", "unit", "description", "anchor"} for the numeric metrics, in
    catalogue order ("anchor": the key's row in docs/metrics.md, "" for an unknown key).

    Groups come in the order Information loss, Disclosure risk, Score, Other; unknown numeric keys close the
    list under "Other" sorted by name, and bookkeeping keys are skipped.
    """
    rows = sorted((metric_row(key, value) for key, value in metrics.items() if _is_metric_value(key, value)),
                  key=lambda row: row.position)
    return [{"measure": r.measure, "value": r.value, "group": r.group, "unit": r.unit, "description": r.description,
             "anchor": r.anchor} for r in rows]
