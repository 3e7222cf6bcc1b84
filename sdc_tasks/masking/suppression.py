"""Controlled local suppression to k-anonymity where a suppressed (missing) value matches any value: the field's
convention (sdcMicro's ``kAnon``/``localSuppression``, mu-Argus), with an importance order over the keys and keys
that are never suppressed.

Sources: statistical_databases_survey.txt, "Local suppression" and "k-anonymity"; the procedure sdcMicro's
``localSuppression`` follows (docs/references.md, sdcMicro kAnon), so that with the same keys, k and importance the
same values are suppressed (docs/categorical.md, "Local suppression"):

1. the records considered are, per combination of the key values (a missing value being a value of its own),
   the first k records in file order; the others are in groups of more than k and never lose a value;
2. the compatible frequency f_k of each considered record counts the considered records that agree with it on
   every key where both have a value;
3. the records with f_k < k are taken in order of increasing f_k (file order among equal ones); for each, the
   nearest other considered records (the fewest keys on which both have values that differ, at least one) are
   found, and the record loses the value of the least important key on which it differs from one of them (from
   every key with a value when it is the only record; when those keys are all in ``never``, the least important
   key it still has a value of); suppressions within a pass change the distances seen by the records after it;
4. steps 2-3 repeat until every considered record has f_k >= k.

The importance order ranks the keys from the most to the least important (the least important loses values
first); by default the keys with fewer categories are the more important (sdcMicro's default, ties by key
order). A key named in ``never`` never loses a value; a record that is still in a group of fewer than k once it
has lost every other key makes the method fail, naming it by position. The work is on the considered records
(at most k per key combination), so it grows with the number of combinations, not of records, but is quadratic
in it: suitable for the key sets agencies protect; at very many combinations ``missing: category``
(sdc_tasks.masking.categorical) scales further.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sdc_tasks.metrics.categorical_loss import canonical
from sdc_tasks.metrics.categorical_risk import combination_counts, compatible_totals
from sdc_tasks.reserved import COUNT_COL, POS_COL, SUPPRESS_COL


def first_records(part: pd.DataFrame, keys: list[str], k: int, offset: int) -> pd.DataFrame:
    """The key values and global positions of the first k records of each key combination in one partition
    (missing a value of its own), in position order (kernel; tables merge with :func:`merge_first_records`)."""
    frame = part[keys].reset_index(drop=True).assign(**{POS_COL: np.arange(offset, offset + len(part),
                                                                             dtype=np.int64)})
    return frame.groupby(keys, sort=False, dropna=False, observed=True).head(k)


def merge_first_records(tables: list[pd.DataFrame], keys: list[str], k: int) -> pd.DataFrame:
    """The first k records of each combination over several partitions' :func:`first_records` tables."""
    frame = pd.concat(tables, ignore_index=True).sort_values(POS_COL, kind="stable")
    return frame.groupby(keys, sort=False, dropna=False, observed=True).head(k).reset_index(drop=True)


def importance_order(table: pd.DataFrame, keys: list[str], importance: list[str] | None) -> list[str]:
    """The keys from the most to the least important: ``importance`` as given, or by default the keys with fewer
    observed categories first (ties in key order)."""
    if importance is not None:
        return list(importance)
    categories = {k: table[k].nunique(dropna=True) for k in keys}
    return sorted(keys, key=lambda k: categories[k])


def _compatible_frequencies(codes: np.ndarray, keys: list[str]) -> np.ndarray:
    """f_k of each row of ``codes`` (NaN: missing, matching any value) among the rows."""
    frame = pd.DataFrame(codes, columns=keys)
    table = combination_counts(frame, keys, {k: False for k in keys})
    totals = compatible_totals(table, keys)[COUNT_COL].to_numpy()
    canon = pd.DataFrame({k: canonical(frame[k], False) for k in keys})
    index = canon.merge(table[keys].reset_index(), on=keys, how="left")["index"].to_numpy()
    return totals[index]


def _suppressed_key(codes: np.ndarray, row: int, columns: list[int]) -> int | None:
    """The column ``row`` loses: among its nearest other rows (fewest keys with two differing values, at least
    one), the first of ``columns`` (least important first) on which it differs from one of them; from every
    column with a value when no other row has a differing value. When the keys it differs on are all left out of
    ``columns`` (``never``), the first of ``columns`` where it still has a value; None when it has none left."""
    present = ~np.isnan(codes)
    differs = present & present[row] & (codes != codes[row])
    distance = differs.sum(axis=1)
    positive = distance[distance > 0]
    nearest = np.flatnonzero(distance == (positive.min() if len(positive) else codes.shape[1]))
    alone = len(nearest) == 1 and nearest[0] == row
    for c in columns:
        if (present[nearest, c] if alone else differs[nearest, c]).any():
            return c
    return next((c for c in columns if present[row, c]), None)


def suppression_plan_any(table: pd.DataFrame, keys: list[str], k: int, importance: list[str] | None,
                         never: list[str]) -> pd.DataFrame:
    """The records that lose values and the bit mask of the keys they lose (bit j: ``keys[j]``), from the scope's
    :func:`merge_first_records` table, by the procedure of the module docstring; ValueError naming the key set and
    the record's position when a record cannot reach k-anonymity without a key of ``never``."""
    if len(table) < k:
        raise ValueError(f"parameter 'k' of local_suppression = {k} exceeds the {len(table)} records of a scope")
    for name, listed in (("importance", importance or []), ("never", never)):
        stray = [v for v in listed if v not in keys]
        if stray:
            raise ValueError(f"parameter '{name}' of local_suppression names {stray[0]!r}, which is not a key of the "
                             f"step ({', '.join(keys)})")
    if importance is not None and sorted(importance) != sorted(keys):
        raise ValueError(f"parameter 'importance' of local_suppression must list every key of the step once "
                         f"({', '.join(keys)})")
    order = importance_order(table, keys, importance)
    columns = [keys.index(v) for v in reversed(order) if v not in never]
    codes = np.column_stack([_codes(table[v]) for v in keys])
    lost = np.zeros(len(table), dtype=np.int64)
    while True:
        f = _compatible_frequencies(codes, keys)
        unsafe = np.flatnonzero(f < k)
        if not len(unsafe):
            break
        for row in unsafe[np.argsort(f[unsafe], kind="stable")]:
            c = _suppressed_key(codes, row, columns)
            if c is None:
                raise ValueError(f"local_suppression: the record at position {int(table[POS_COL].iat[row])} cannot "
                                 f"reach {k}-anonymity without suppressing a key of 'never' ({', '.join(never)})")
            codes[row, c] = np.nan
            lost[row] |= 1 << c
    keep = lost > 0
    return pd.DataFrame({POS_COL: table[POS_COL].to_numpy()[keep], SUPPRESS_COL: lost[keep]})


def _codes(values: pd.Series) -> np.ndarray:
    """A key's values as float codes comparable by equality (categories numbered), missing as NaN."""
    codes, _ = pd.factorize(values, use_na_sentinel=True)
    return np.where(codes < 0, np.nan, codes.astype(np.float64))
