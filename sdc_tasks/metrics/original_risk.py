"""The original file's disclosure-risk figures beside the release's: each figure of the categorical risk families
computed on the original file is published as ``<key>_before``, with its change ``<key>_change_percent``
(docs/metrics.md "The original file's risk"; sdcMicro prints the risk of the original beside the risk after
masking, sdcMicro ``print(sdcObj, "risk")``).

Pure Python on the finished metric values: the figures themselves come from the same finishers as the
release's (sdc_tasks.evaluation.categorical), run on the original file.
"""

from __future__ import annotations

import math

from sdc_tasks.metrics.catalogue import BEFORE, CHANGE, has_original_figure


def change_percent(before: float, after: float) -> float:
    """100 (after - before) / before: the change of a figure from the original file to the release in percent of
    the original's value (docs/metrics.md "The original file's risk"); 0 when both are 0, infinite when only the
    original's is 0 (left out as not finite)."""
    if before == 0:
        return 0.0 if after == 0 else math.copysign(math.inf, after)
    return 100.0 * (after - before) / before


def original_figures(released: dict, original: dict) -> dict:
    """``<key>_before`` for each risk figure of ``original`` (the metric keys of the risk families computed on the
    original file) and ``<key>_change_percent`` where ``released`` holds the key too; other keys (diagnostics,
    bookkeeping) are left out."""
    out: dict = {}
    for key, value in original.items():
        if not has_original_figure(key) or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        out[key + BEFORE] = float(value)
        if key in released:
            out[key + CHANGE] = change_percent(float(value), float(released[key]))
    return out
