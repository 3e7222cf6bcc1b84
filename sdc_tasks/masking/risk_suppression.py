"""Local suppression until no record's individual risk is above a threshold: mu-Argus' individual-risk
suppression and sdcMicro's ``localSupp(obj, threshold, keyVar)``, carried on over the keys in importance order.

Sources: statistical_databases_survey.txt, "Local suppression" and "disclosure risk for categorical data"; the
individual risk is the project's (sdc_tasks.metrics.categorical_risk.individual_risk, sdcMicro indivRisk, a
missing value matching any value as in sdcMicro's measure_risk); sdcMicro's localSupp suppresses its one key in
every record whose risk is above the threshold (docs/references.md, sdcMicro 2015). The procedure, on the table
of key combinations with their records and summed sampling weights (a missing value a value of its own):

1. each combination's individual risk is computed from its compatible f_k and F_k (every combination that agrees
   with it where both have a value);
2. every combination whose risk is above the threshold loses the value of its least important key that still
   has one (never a key of ``never``): all its records lose it;
3. steps 1-2 repeat until no combination is above the threshold.

The first pass is sdcMicro's localSupp on the least important key; the next ones take the next key for the
records still above the threshold (a suppression only adds records and weight to compatible groups, which lowers
their risks in practice; every pass suppresses a value of each unsafe combination, so at most as many passes as
keys). The importance order is the one of sdcMicro's kAnon (sdc_tasks.masking.suppression). The work is on the
combination table: one individual-risk computation (categorical_risk.combination_risks) per pass.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sdc_tasks.masking.suppression import key_codes, suppression_order
from sdc_tasks.metrics.categorical_loss import MISSING_CODE
from sdc_tasks.metrics.categorical_risk import combination_risks
from sdc_tasks.reserved import COUNT_COL, SUPPRESS_COL, WEIGHT_COL


def checked_weight(meta: pd.DataFrame, keys: list[str], params: dict) -> str | None:
    """The sampling weight column of the parameters (None: none); ValueError naming the parameter when it is not a
    numeric column of the step input, or is one of the keys."""
    weight = params["weight"]
    if weight is None:
        return None
    if weight not in meta.columns or weight in keys:
        raise ValueError(f"parameter 'weight' of local_suppression names {weight!r}, which is not a column of the "
                         "input beside the keys")
    if not pd.api.types.is_numeric_dtype(meta[weight].dtype) or pd.api.types.is_bool_dtype(meta[weight].dtype):
        raise ValueError(f"parameter 'weight' of local_suppression names {weight!r}, which does not hold numbers")
    return weight


def threshold_suppression_plan(table: pd.DataFrame, params: dict, orders: dict) -> pd.DataFrame:
    """The key combinations whose records lose values, with the bit mask of the keys they lose (bit j: the j-th
    key), from a scope's table of key combinations with COUNT_COL and WEIGHT_COL (missing a value of its own), by
    the procedure of the module docstring; ValueError naming the parameter when a combination is still above the
    threshold with every key it may lose suppressed."""
    keys = [c for c in table.columns if c not in (COUNT_COL, WEIGHT_COL)]
    threshold, never = params["threshold"], params["never"]
    order = suppression_order(table, keys, params)
    columns = [keys.index(v) for v in reversed(order) if v not in never]
    codes = pd.DataFrame({v: key_codes(table[v], MISSING_CODE) for v in keys})
    sums = table[[COUNT_COL, WEIGHT_COL]].reset_index(drop=True)
    lost = np.zeros(len(table), dtype=np.int64)
    weight = params["weight"] or "(none: each record weighs 1)"
    while True:
        risk = combination_risks(pd.concat([codes, sums], axis=1), keys, weight)
        unsafe = np.flatnonzero(risk > threshold)
        if not len(unsafe):
            break
        present = codes.to_numpy()[unsafe][:, columns] != MISSING_CODE
        if not present.any(axis=1).all():
            stuck = int(sums[COUNT_COL].to_numpy()[unsafe[~present.any(axis=1)]].sum())
            spared = f" but those of 'never' ({', '.join(never)})" if never else ""
            raise ValueError(f"parameter 'threshold' of local_suppression = {threshold:g}: {stuck} records of a scope "
                             f"stay above it with every key suppressed{spared}")
        chosen = np.asarray(columns)[present.argmax(axis=1)]
        for c in np.unique(chosen):
            rows = unsafe[chosen == c]
            codes.iloc[rows, c] = MISSING_CODE
            lost[rows] |= 1 << c
    keep = lost > 0
    return table.loc[keep, keys].assign(**{SUPPRESS_COL: lost[keep]}).reset_index(drop=True)
