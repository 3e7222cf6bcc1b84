"""Controlled local suppression to k-anonymity where a suppressed (missing) value matches any value: the field's
convention (sdcMicro's ``kAnon``/``localSuppression``, mu-Argus), with an importance order over the keys and keys
that are never suppressed.

Sources: statistical_databases_survey.txt, "Local suppression" and "k-anonymity"; the procedure sdcMicro's
``localSuppression`` follows (docs/references.md, sdcMicro 2015: kAnon), so that with the same keys, k and
importance the same values are suppressed (docs/categorical.md, "Local suppression"):

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

With key combinations (sdcMicro kAnon's ``combs``: every subset of each given size of the keys, subsets in
``itertools.combinations`` order as R's ``combn``; or the listed ``key_sets``), steps 1-4 run on each key set in
turn, with its own k, on the values the earlier sets left: the considered records are the first k of each
combination of the set's keys, the importance order is the step's restricted to the set. A suppression only
adds compatible records, so no later set undoes an earlier one. The plan starts from the first max(k) records of
each combination of all the keys, which holds the first k of every combination of every set.

The importance order ranks the keys from the most to the least important (the least important loses values
first); by default the keys with fewer categories are the more important (sdcMicro's default, ties by key
order). A key named in ``never`` never loses a value; a record that is still in a group of fewer than k once it
has lost every other key makes the method fail, naming it by position. The work is on the considered records
(at most k per key combination), so it grows with the number of combinations, not of records, but is quadratic
in it: suitable for the key sets agencies protect; at very many combinations ``missing: category``
(sdc_tasks.masking.categorical) scales further.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd

from sdc_tasks.metrics.categorical_risk import compatible_frequencies
from sdc_tasks.reserved import POS_COL, SUPPRESS_COL


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


def suppression_order(table: pd.DataFrame, keys: list[str], params: dict) -> list[str]:
    """The keys from the most to the least important: the parameter ``importance`` as given, or by default the
    keys with fewer observed categories first (ties in key order; sdcMicro's default); ValueError naming the
    parameter when ``importance`` or ``never`` names a key the step lacks, or ``importance`` does not list every
    key once."""
    importance = params["importance"]
    for name, listed in (("importance", importance or []), ("never", params["never"])):
        stray = [v for v in listed if v not in keys]
        if stray:
            raise ValueError(f"parameter '{name}' of local_suppression names {stray[0]!r}, which is not a key of the "
                             f"step ({', '.join(keys)})")
    if importance is not None and sorted(importance) != sorted(keys):
        raise ValueError(f"parameter 'importance' of local_suppression must list every key of the step once "
                         f"({', '.join(keys)})")
    if importance is not None:
        return list(importance)
    categories = {k: table[k].nunique(dropna=True) for k in keys}
    return sorted(keys, key=lambda k: categories[k])


def _compatible_frequencies(codes: np.ndarray) -> np.ndarray:
    """f_k of each row of ``codes`` (NaN: missing, matching any value) among the rows."""
    return compatible_frequencies(pd.DataFrame(codes, columns=[str(j) for j in range(codes.shape[1])]))


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


def _considered_rows(codes: np.ndarray, k: int) -> np.ndarray:
    """The rows (in position order) that a key set's pass considers: the first k of each combination of
    ``codes``, a missing value a value of its own (step 1 of the module docstring)."""
    frame = pd.DataFrame(codes)
    return frame.groupby(list(frame.columns), sort=False, dropna=False).head(k).index.to_numpy()


def _anonymized(codes: np.ndarray, k: int, columns: list[int], positions: np.ndarray, what: str) -> None:
    """Steps 2-4 of the module docstring on ``codes`` (rows: the considered records of one key set, in place);
    ValueError naming the record's position and ``what`` (the key set and the keys of ``never``) when a record
    cannot reach k-anonymity with the suppressible ``columns`` (least important first)."""
    while True:
        f = _compatible_frequencies(codes)
        unsafe = np.flatnonzero(f < k)
        if not len(unsafe):
            return
        for row in unsafe[np.argsort(f[unsafe], kind="stable")]:
            c = _suppressed_key(codes, row, columns)
            if c is None:
                raise ValueError(f"local_suppression: the record at position {int(positions[row])} cannot reach "
                                 f"{k}-anonymity{what}")
            codes[row, c] = np.nan


def key_sets(keys: list[str], params: dict) -> list[tuple[list[str], int]]:
    """The key sets made k-anonymous in turn, each with its k: every subset of each size of ``combs`` (in the
    order given, subsets in key order as R's combn lists them) with the matching k, or each set of ``key_sets``,
    or all the keys; ValueError naming the parameter for a size above the number of keys, a listed key that is
    not a key of the step (the parameters validated: one k per entry when k is a list)."""
    k, sizes, listed = params["k"], params["combs"], params["key_sets"]
    if sizes is None and listed is None:
        return [(list(keys), k)]
    ks = k if isinstance(k, list) else [k] * len(sizes if sizes is not None else listed)
    if sizes is not None:
        large = [s for s in sizes if s > len(keys)]
        if large:
            raise ValueError(f"parameter 'combs' of local_suppression asks for subsets of {large[0]} keys but the "
                             f"step has {len(keys)} ({', '.join(keys)})")
        return [(list(subset), kk) for size, kk in zip(sizes, ks) for subset in combinations(keys, size)]
    for subset in listed:
        stray = [v for v in subset if v not in keys]
        if stray:
            raise ValueError(f"parameter 'key_sets' of local_suppression names {stray[0]!r}, which is not a key of "
                             f"the step ({', '.join(keys)})")
    return [(list(dict.fromkeys(subset)), kk) for subset, kk in zip(listed, ks)]


def largest_k(params: dict) -> int:
    """The largest k of a local suppression step (the records per key combination its plan considers)."""
    return max(params["k"]) if isinstance(params["k"], list) else params["k"]


def suppression_plan_any(table: pd.DataFrame, keys: list[str], params: dict) -> pd.DataFrame:
    """The records that lose values and the bit mask of the keys they lose (bit j: ``keys[j]``), from the scope's
    :func:`merge_first_records` table, by the procedure of the module docstring run on each key set of
    :func:`key_sets` in turn (steps 1-4 on the values the earlier sets left); ValueError naming the parameter for
    bad key sets or k, and naming the key set and the record's position when a record cannot reach k-anonymity
    without a key of ``never``."""
    sets = key_sets(keys, params)
    never = params["never"]
    if len(table) < largest_k(params):
        raise ValueError(f"parameter 'k' of local_suppression = {largest_k(params)} exceeds the {len(table)} records "
                         "of a scope")
    rank = {v: i for i, v in enumerate(suppression_order(table, keys, params))}
    codes = np.column_stack([key_codes(table[v]) for v in keys])
    given = ~np.isnan(codes)
    positions = table[POS_COL].to_numpy()
    for subset, k in sets:
        cols = [keys.index(v) for v in subset]
        rows = _considered_rows(codes[:, cols], k)
        part = codes[np.ix_(rows, cols)]
        columns = [j for j in sorted(range(len(subset)), key=lambda j: -rank[subset[j]]) if subset[j] not in never]
        what = (f" on the keys {', '.join(subset)}" if len(sets) > 1 else "") + \
            f" without suppressing a key of 'never' ({', '.join(never)})"
        _anonymized(part, k, columns, positions[rows], what)
        codes[np.ix_(rows, cols)] = part
    lost = ((given & np.isnan(codes)) << np.arange(len(keys))).sum(axis=1)
    keep = lost > 0
    return pd.DataFrame({POS_COL: positions[keep], SUPPRESS_COL: lost[keep]})


def key_codes(values: pd.Series, missing: float = np.nan) -> np.ndarray:
    """A key's values as float codes comparable by equality (categories numbered), missing as ``missing``."""
    codes, _ = pd.factorize(values, use_na_sentinel=True)
    return np.where(codes < 0, missing, codes.astype(np.float64))
