"""The metrics of a report as table rows, each key resolved against the metric catalogue
(sdc_tasks/metrics/catalogue.py): its group, unit and description, in catalogue order."""

from __future__ import annotations

import numbers
from dataclasses import dataclass

from sdc_tasks.metrics.catalogue import (
    BEFORE,
    BOOKKEEPING,
    CHANGE,
    GROUP_ORDER,
    GROUP_OTHER,
    HIGHER,
    MEASURES,
    anchor_of,
    derived_from,
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


@dataclass(frozen=True)
class RiskChange:
    """One disclosure-risk figure of the original file beside the release's: the figure's key, its value on the
    original file (``<key>_before``) and on the release (None when not computed there), its change in percent
    of the original's (``<key>_change_percent``; None when not finite, with the original's value 0), its unit,
    direction and catalogue anchor. Read from the metrics, never computed here."""

    key: str
    original: float
    released: float | None
    change_percent: float | None
    unit: str
    direction: str
    anchor: str

    def change_text(self) -> str:
        """The change as :func:`change_text` writes it."""
        return change_text(self.change_percent, self.released)


def change_text(change_percent: float | None, released: float | None) -> str:
    """A figure's change from the original file as "-85.2 %", "+12 %" or "0 %"; "new" when it has no change
    (the original's value was 0) and the release's value is not 0, "n/a" when the release has no value."""
    if change_percent is None:
        return "new" if released else "n/a"
    return "0 %" if change_percent == 0 else f"{change_percent:+.4g} %"


def risk_changes(metrics: dict) -> list[RiskChange]:
    """Every figure computed on the original file too (its ``<key>_before`` key), in report order, with the
    release's value and the change (docs/metrics.md "The original file's risk")."""
    keys = sorted((k[:-len(BEFORE)] for k in metrics if k.endswith(BEFORE) and derived_from(k) is not None),
                  key=key_order)
    rows = []
    for key in keys:
        measure = measure_of(key)
        change = metrics.get(key + CHANGE)
        rows.append(RiskChange(key, float(metrics[key + BEFORE]), metrics.get(key),
                               None if change is None else float(change),
                               measure.unit, measure.direction, anchor_of(key)))
    return rows

