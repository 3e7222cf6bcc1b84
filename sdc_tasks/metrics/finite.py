"""Every number reported is finite: a measure that is not (an overflow, inf - inf, 0/0) is left out with its reason.

docs/metrics.md's rule for a term whose denominator is 0 (left out and counted in ``<key>_undefined_terms``)
extends to values that are not finite: terms that are not finite are left out and counted the same way, and a
measure whose value is not finite is left out and ``<key>_not_finite`` = 1.0 says why it is missing.
"""

from __future__ import annotations

import math

NOT_FINITE = "_not_finite"


def is_finite(value) -> bool:
    """Whether ``value`` is a finite number (True for anything that is not a number: names, lists)."""
    return not isinstance(value, (int, float)) or isinstance(value, bool) or math.isfinite(value)


def finite_measure(key: str, value: float) -> dict[str, float]:
    """``{key: value}`` when value is finite, else ``{key + "_not_finite": 1.0}``."""
    return {key: float(value)} if is_finite(value) else {key + NOT_FINITE: 1.0}


def finite_metrics(metrics: dict) -> dict:
    """``metrics`` with every number that is not finite replaced by its ``<key>_not_finite`` reason."""
    out: dict = {}
    for key, value in metrics.items():
        out.update({key: value} if is_finite(value) else finite_measure(key, value))
    return out
