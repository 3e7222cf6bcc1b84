"""``compatible_totals`` before it matched combinations by integer codes (commit afa3520's
sdc_tasks/metrics/categorical_risk.py), kept as the reference the faster one must equal to the bit: for each pair
of missing patterns, the pattern-T combinations grouped by pandas on the key columns outside both patterns and
merged onto the pattern-S combinations."""

from __future__ import annotations

import numpy as np
import pandas as pd

from sdc_tasks.metrics.categorical_risk import _missing
from sdc_tasks.reserved import COUNT_COL as COUNT
from sdc_tasks.reserved import WEIGHT_COL as WEIGHT


def reference_compatible_totals(table: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """COUNT (f_k) and WEIGHT (F_k) of the combinations compatible with each combination of ``table``."""
    sums = [c for c in (COUNT, WEIGHT) if c in table.columns]
    miss = pd.DataFrame({k: _missing(table[k]) for k in keys})
    pattern = miss.apply(lambda row: tuple(k for k in keys if row[k]), axis=1) if len(table) else pd.Series([])
    groups = {p: table[(pattern == p).to_numpy()] for p in pattern.unique()}
    out = []
    for s, rows in groups.items():
        acc = np.zeros((len(rows), len(sums)))
        for t, others in groups.items():
            on = [k for k in keys if k not in s and k not in t]
            if not on:
                acc += others[sums].sum().to_numpy()
                continue
            summed = others.groupby(on, sort=False)[sums].sum()
            joined = rows[on].merge(summed, left_on=on, right_index=True, how="left")
            acc += joined[sums].fillna(0.0).to_numpy()
        out.append(pd.DataFrame(acc, columns=sums, index=rows.index))
    return pd.concat(out).loc[table.index] if out else table[sums]
