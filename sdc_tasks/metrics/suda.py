"""Special uniques (SUDA2): each record's minimal sample uniques on the categorical keys, its SUDA score and its DIS
score, and each key's contribution to the file's SUDA scores.

Sources: Elliot, Manning, Mayes, Gurd and Bane, "SUDA: A Program for Detecting Special Uniques"; Manning, Haglin
and Keane (2008), "A recursive search algorithm for statistical disclosure assessment" (SUDA2); Skinner and
Elliot (2002) for the DIS measure; the definitions as sdcMicro's ``suda2`` computes them (docs/references.md,
sdcMicro suda2). docs/categorical.md, "Special uniques".

A minimal sample unique (MSU) of a record is a set of key variables on which the record's values occur once in
the file while they occur more than once on every proper subset. A record has MSUs only if it is unique on all
the keys. With M keys, an MSU of size s adds w_s = (M - s)! to the record's SUDA score (Elliot et al.'s
weights); a variable's contribution is the share of the score coming from the MSUs that hold it. A missing value
takes no part in an MSU: a record missing a key is never unique on a set holding that key, and does not count
for others there (as a missing item of SUDA2).

Everything is computed on the table of key combinations (one row per distinct combination with its record count,
``categorical_risk.combination_counts``): a subset's counts are that table summed over the subset, so the cost is
2^M - 1 group-bys of the table (M keys), whatever the number of records; the keys are bounded for that reason
(``MAX_KEYS``).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from sdc_tasks.metrics.categorical_risk import COUNT, _missing

MAX_KEYS = 16
"""The most key variables SUDA2 runs on: 2^M - 1 subsets (65,535 for 16)."""
DIS_FRACTION = 0.01
"""The sampling fraction of the DIS measure (sdcMicro suda2's DisFraction default)."""


def msu_weights(m: int) -> np.ndarray:
    """w_s = (M - s)! for MSU sizes s = 1..M (Elliot et al.; sdcMicro suda2, original_scores = TRUE)."""
    return np.array([math.factorial(m - s) for s in range(1, m + 1)], dtype=np.float64)


def _subset_unique(table: pd.DataFrame, keys: list[str], missing: np.ndarray, subset: tuple[int, ...]) -> np.ndarray:
    """Whether each combination's values on the keys of ``subset`` occur in exactly one record (False where it
    misses one of them)."""
    cols = [keys[j] for j in subset]
    present = ~missing[:, list(subset)].any(axis=1)
    counts = np.zeros(len(table))
    if present.any():
        rows = table[present]
        counts[present] = rows.groupby(cols, sort=False)[COUNT].transform("sum").to_numpy()
    return present & (counts == 1.0)


def msu_scores(table: pd.DataFrame, keys: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(SUDA score of each combination of ``table``, (rows, keys) array of each key's share of the combination's
    MSU weights: its raw contribution); zero for combinations of more than one record."""
    m = len(keys)
    if m > MAX_KEYS:
        raise ValueError(f"SUDA2 runs on at most {MAX_KEYS} key variables ({m} given): 2^M subsets")
    missing = np.column_stack([_missing(table[k]) for k in keys]) if len(table) else np.zeros((0, m), bool)
    weights = msu_weights(m)
    unique: dict[int, np.ndarray] = {}
    score = np.zeros(len(table))
    raw = np.zeros((len(table), m))
    for mask in sorted(range(1, 2 ** m), key=lambda b: bin(b).count("1")):
        subset = tuple(j for j in range(m) if mask >> j & 1)
        here = _subset_unique(table, keys, missing, subset)
        unique[mask] = here
        minimal = here.copy()
        if len(subset) > 1:
            for j in subset:
                minimal &= ~unique[mask & ~(1 << j)]
        if minimal.any():
            w = weights[len(subset) - 1]
            score[minimal] += w
            raw[np.ix_(minimal, list(subset))] += w
    return score, raw


def dis_scores(score: np.ndarray, n_pair_records: int, m: int, dis_fraction: float = DIS_FRACTION) -> np.ndarray:
    """DIS score of each SUDA score (Skinner and Elliot; sdcMicro suda2): with U the records unique on all keys, P
    the records in combinations of exactly two, f the sampling fraction, Dis = U f / (U f + P (1 - f)),
    Q = 1 + (8 - M) / 20 and A the sum over scored records of score^-Q, DIS = 1 / (1 + (U / Dis - U) /
    (score^Q A)), where U / Dis - U = P (1 - f) / f; 0 for a score of 0. In double precision (sdcMicro evaluates
    Dis, Q and U / Dis - U in single precision: its DIS scores differ from these by up to 2e-8 on testdata.csv)."""
    q = 1.0 + (8.0 - m) / 20.0
    scored = score > 0
    adjust = float(np.sum(1.0 / np.power(score[scored], q)))
    spread = n_pair_records * (1.0 - dis_fraction) / dis_fraction
    out = np.zeros_like(score)
    out[scored] = 1.0 / (1.0 + spread / (np.power(score[scored], q) * adjust))
    return out


def suda_measures(table: pd.DataFrame, keys: list[str], dis_fraction: float = DIS_FRACTION) -> dict:
    """The ``suda`` keys of a combination table: records with an MSU (suda_special_uniques), the largest and the
    mean SUDA score, the largest and the mean DIS score over all records (dis_suda_max, dis_suda_mean) and each
    key's contribution to the file's SUDA scores in percent (suda_contribution_<key>; 0 when no record has an
    MSU)."""
    score, raw = msu_scores(table, keys)
    records = table[COUNT].to_numpy(np.float64)
    n = float(records.sum())
    dis = dis_scores(score, int(2 * (records == 2.0).sum()), len(keys), dis_fraction)
    out = {"suda_special_uniques": float(records[score > 0].sum()),
           "suda_score_max": float(score.max(initial=0.0)), "suda_score_mean": float((score * records).sum() / n),
           "dis_suda_max": float(dis.max(initial=0.0)), "dis_suda_mean": float((dis * records).sum() / n)}
    total = float(score.sum())
    out.update({f"suda_contribution_{k}": 100.0 * float(raw[:, j].sum()) / total if total else 0.0
                for j, k in enumerate(keys)})
    return out
