"""Household risk: the probability that at least one member of a household is re-identified, from the members'
individual risks, and its global figures.

Source: sdcMicro's ``measure_risk(..., hid=)`` (measure_hierachical; docs/references.md, sdcMicro measure_risk):
a household's risk is 1 - prod over its members of (1 - r_i), r_i the members' individual risks
(categorical_risk.individual_risk); every member carries its household's risk, so the expected
re-identifications with household structure are the sum over persons of their household's risk (sdcMicro's
hier_risk_ER) and the household risk in percent is that sum over the number of persons (hier_risk_pct).
docs/categorical.md, "Households".

The members' risks come from the table of key combinations (each record looks up its combination's risk); the
products per household come from a grouping of the records by household id, which Dask shuffles across
partitions (a household may span partitions), so no task holds more than a share of the households.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sdc_tasks.metrics.categorical_risk import COUNT, RISK_THRESHOLD, combination_rows

SURVIVAL = "_survival"  # 1 - r_i of a record, then the product over a household's members
MEMBERS = "_members"


def member_survival(part: pd.DataFrame, keys: list[str], text: dict[str, bool], household: str,
                    risks: pd.DataFrame) -> pd.DataFrame:
    """(household id, 1 - r_i) of each record of a partition, r_i its key combination's individual risk
    (``risks``: the combination table's keys beside each combination's risk, column SURVIVAL holding 1 - r)."""
    survival = risks[SURVIVAL].to_numpy()[combination_rows(part, risks, keys, text)]
    return pd.DataFrame({household: part[household].to_numpy(), SURVIVAL: survival, MEMBERS: 1.0})


def household_sums(households: pd.DataFrame) -> np.ndarray:
    """Partial sums over a set of whole households (per household: members, product of 1 - r_i): [persons,
    households, sum over persons of their household's risk, largest household risk, households with a risk above
    RISK_THRESHOLD]; they add up (the largest by max) over disjoint sets (:func:`add_household_sums`)."""
    risk = 1.0 - households[SURVIVAL].to_numpy()
    members = households[MEMBERS].to_numpy()
    return np.array([members.sum(), float(len(households)), float(members @ risk), risk.max(initial=0.0),
                     float((risk > RISK_THRESHOLD).sum())])


def add_household_sums(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The sums of two disjoint sets of households."""
    return np.array([a[0] + b[0], a[1] + b[1], a[2] + b[2], max(a[3], b[3]), a[4] + b[4]])


def household_measures(sums: np.ndarray) -> dict:
    """The household-risk keys of the summed figures: household_expected_reidentifications (sdcMicro's
    hier_risk_ER), household_risk_percent (hier_risk_pct), household_risk_max and households_risk_above_0.1
    (percent of the households)."""
    persons, households, expected, largest, above = sums
    return {"household_expected_reidentifications": float(expected),
            "household_risk_percent": 100.0 * float(expected) / float(persons),
            "household_risk_max": float(largest),
            f"households_risk_above_{RISK_THRESHOLD}": 100.0 * float(above) / float(households)}


def risk_lookup(table: pd.DataFrame, keys: list[str], risk: np.ndarray) -> pd.DataFrame:
    """The keys of each combination beside 1 - its risk (column SURVIVAL), for :func:`member_survival`."""
    return table[keys].assign(**{SURVIVAL: 1.0 - risk}).drop(columns=[COUNT], errors="ignore")
