"""Categorical masking kernels: top and bottom coding, global recoding, PRAM with the Kooiman et al. matrix and
local suppression to k-anonymity.

Sources: sdc_methods_comparison_chapter.txt sec. 2, "SDC Methods for Categorical Microdata" (Top-coding,
Bottom-coding, Global recoding of the p lowest-frequency categories, PRAM with the Kooiman et al. matrix);
statistical_databases_survey.txt (PRAM; Global recoding; Top and bottom coding; Local suppression; the
k-anonymity of the R-U section).

Every method plans on small exact tables counted over a whole scope (the file, or one stratum): category
frequencies, or the counts of the key variables' value combinations; the plan then maps the records of each
partition, so nothing depends on the partitioning.

Representation. A recoding merges a set of categories into one and writes it as one of its members, so a
column keeps its type (integer codes stay integers, labels stay labels) and its order: top coding writes the
first of the last p categories (codes 1..5, p = 2: 4 and 5 become 4, read "4 or more"), bottom coding the
last of the first p (1 and 2 become 2, "2 or less"), global recoding the first of the merged categories in
category order. Missing values are not a category: frequencies leave them out and they stay missing. Local
suppression writes suppressed values as missing (null); integer and boolean columns become their nullable
pandas types (Int64, boolean), which Parquet stores as the same type with nulls.
"""

from __future__ import annotations

from itertools import combinations
from typing import Any, Callable, Iterable

import numpy as np
import pandas as pd

from sdc_tasks.masking.households import draw_keys
from sdc_tasks.masking.risk_suppression import threshold_suppression_plan
from sdc_tasks.masking.suppression import suppression_plan_any
from sdc_tasks.record_random import record_uniforms
from sdc_tasks.reserved import COUNT_COL, POS_COL, SUPPRESS_COL


def nullable_dtype(dtype, variable: str | None = None, params: dict | None = None):
    """The dtype a column takes when some of its values become missing: numpy integers and booleans their
    nullable pandas types, any other dtype itself (``variable`` and ``params``: as ``CategoryMethod.masked_dtype``
    is called, unused)."""
    if isinstance(dtype, np.dtype) and dtype.kind in "iu":
        return pd.api.types.pandas_dtype(f"{'UInt' if dtype.kind == 'u' else 'Int'}{dtype.itemsize * 8}")
    if isinstance(dtype, np.dtype) and dtype.kind == "b":
        return pd.BooleanDtype()
    return dtype


def category_order(observed: Iterable, declared: list | None, variable: str) -> list:
    """The categories of ``variable`` in order: its declared order, or else its observed values sorted; raise
    ValueError naming the variable when it holds a category its declared order does not list."""
    observed = list(observed)
    if declared is None:
        return sorted(observed)
    listed = set(declared)
    if any(v not in listed for v in observed):
        raise ValueError(f"variable {variable!r} holds a category that its declared category order does not list")
    return list(declared)


def _check_p(p: int, categories: int, method: str, variable: str) -> None:
    """Raise ValueError naming the parameter and the variable when p exceeds the number of categories."""
    if p > categories:
        raise ValueError(f"parameter 'p' of {method} = {p} exceeds the {categories} categories of variable "
                         f"{variable!r}")


def top_coded(order: list, p: int, variable: str) -> tuple[list, Any]:
    """(merged categories, the category written for them) of top coding: the last p categories of the order,
    written as the first of them (sdc_methods_comparison_chapter.txt sec. 2, Top-coding)."""
    _check_p(p, len(order), "top_coding", variable)
    merged = order[len(order) - p:]
    return merged, merged[0]


def bottom_coded(order: list, p: int, variable: str) -> tuple[list, Any]:
    """(merged categories, the category written for them) of bottom coding: the first p categories of the
    order, written as the last of them (sdc_methods_comparison_chapter.txt sec. 2, Bottom-coding)."""
    _check_p(p, len(order), "bottom_coding", variable)
    merged = order[:p]
    return merged, merged[-1]


def globally_recoded(counts: pd.Series, order: list, p: int, variable: str) -> tuple[list, Any]:
    """(merged categories, the category written for them) of global recoding: the p categories of lowest
    frequency (ties: the earlier in category order first), written as the first of them in category order
    (sdc_methods_comparison_chapter.txt sec. 2, Global recoding). ``counts``: frequency per observed category."""
    present = [c for c in order if c in counts.index]
    _check_p(p, len(present), "global_recoding", variable)
    rarest = sorted(range(len(present)), key=lambda i: (int(counts[present[i]]), i))[:p]
    merged = [present[i] for i in sorted(rarest)]
    return merged, merged[0]


def kooiman_matrix(frequencies: np.ndarray, theta: float) -> np.ndarray:
    """The PRAM matrix of Kooiman et al.: P_kl = 1 - theta T(K) / T(k) if l = k, theta T(K) / ((K - 1) T(k))
    otherwise, T the category frequencies and T(K) the smallest (sdc_methods_comparison_chapter.txt sec. 2,
    PRAM); rows sum to 1. A variable with one category keeps it (the identity)."""
    t = np.asarray(frequencies, dtype=np.float64)
    if t.ndim != 1 or len(t) == 0 or (t <= 0).any():
        raise ValueError("kooiman_matrix needs one positive frequency per category")
    size = len(t)
    if size == 1:
        return np.ones((1, 1))
    smallest = t.min()
    matrix = np.repeat((theta * smallest / ((size - 1) * t))[:, None], size, axis=1)
    np.fill_diagonal(matrix, 1.0 - theta * smallest / t)
    return matrix


def pram_draws(codes: np.ndarray, matrix: np.ndarray, uniforms: np.ndarray) -> np.ndarray:
    """The category each record gets under PRAM (survey, PRAM): for a record of category c and uniform u,
    the first l with u < P_c1 + ... + P_cl (inversion of row c of the Markov matrix)."""
    cumulative = np.cumsum(matrix, axis=1)
    cumulative[:, -1] = 1.0
    out = np.empty(len(codes), dtype=np.int64)
    for c in range(len(matrix)):
        rows = np.flatnonzero(codes == c)
        out[rows] = np.searchsorted(cumulative[c], uniforms[rows], side="right")
    return out


# ---- local suppression on the table of key combinations ----


def _digits(table: pd.DataFrame, keys: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Each combination as digits (category rank + 1; 0 for missing) and the mixed-radix weights that make
    ``digits @ weights`` a unique int64 key of a combination."""
    digits = np.empty((len(table), len(keys)), dtype=np.int64)
    bases = []
    for j, key in enumerate(keys):
        codes, uniques = pd.factorize(table[key], sort=True, use_na_sentinel=True)
        digits[:, j] = codes + 1
        bases.append(len(uniques) + 1)
    if np.prod(np.array(bases, dtype=np.float64)) >= 2.0**62:
        raise ValueError(f"local_suppression: the key variables {keys} have too many combinations of categories")
    weights = np.concatenate([[1], np.cumprod(bases[:-1])]).astype(np.int64)
    return digits, weights


def _kept(pattern: np.ndarray, m: int) -> np.ndarray:
    """(rows, m) 1 where a row keeps key j, 0 where its bit mask suppresses it."""
    return ((pattern[:, None] >> np.arange(m)) & 1 == 0).astype(np.int64)


def _group_sizes(codes: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Per row, the total count of the rows sharing its combination key."""
    _, inverse = np.unique(codes, return_inverse=True)
    return np.bincount(inverse, weights=counts).astype(np.int64)[inverse]


def _level_moves(digits: np.ndarray, weights: np.ndarray, counts: np.ndarray, small: np.ndarray,
                 codes: np.ndarray, level: list[int], k: int) -> pd.DataFrame:
    """The moves of one level: for each subset (index into ``level``) and each group its suppression would
    form, the rows of groups of fewer than k records that reach at least k there (with the rows already
    holding that combination): one frame row per (row, subset) with the target combination, the row's
    records, the values it would lose and the records already at the target (``base``)."""
    unsafe = np.flatnonzero(small)
    safe_sizes = pd.Series(counts[~small]).groupby(codes[~small]).sum()
    frames = []
    for i, subset in enumerate(level):
        keep = _kept(np.array([subset]), digits.shape[1])[0]
        projected = (digits[unsafe] * keep) @ weights
        groups, inverse = np.unique(projected, return_inverse=True)
        base = safe_sizes.reindex(groups, fill_value=0).to_numpy(np.int64)
        ok = (np.bincount(inverse, weights=counts[unsafe]).astype(np.int64) + base)[inverse] >= k
        lost = ((digits[unsafe] > 0) & (keep == 0)).sum(axis=1) * counts[unsafe]
        base = base[inverse]
        frames.append(pd.DataFrame({"row": unsafe[ok], "subset": i, "to": projected[ok], "n": counts[unsafe][ok],
                                    "lost": lost[ok], "base": base[ok]}))
    return pd.concat(frames, ignore_index=True)


def _apply_level(pattern: np.ndarray, moves: pd.DataFrame, level: list[int], k: int) -> None:
    """Apply the moves of a level, most constrained first: a move whose rows have the fewest other moves
    goes first (then more records, fewer values lost, subset order). A move takes only its rows that no
    other move could take when those reach k on their own, so the others stay free; rows an earlier move
    took are left out, and a move whose remaining rows no longer reach k waits for the next round."""
    moves = moves.assign(options=moves.groupby("row")["row"].transform("size"))
    summary = moves.groupby(["subset", "to"]).agg(options=("options", "min"), n=("n", "sum"), lost=("lost", "sum"),
                                                  base=("base", "first"))
    summary = summary.assign(neg_n=-summary["n"]).reset_index()
    members = moves.groupby(["subset", "to"]).indices
    rows_of, counts_of, options_of = (moves[c].to_numpy() for c in ("row", "n", "options"))
    taken = np.zeros(len(pattern), dtype=bool)
    order = summary.sort_values(["options", "neg_n", "lost", "subset", "to"])
    for subset, to, base in order[["subset", "to", "base"]].to_numpy():
        member = members[(subset, to)]
        free = member[~taken[rows_of[member]]]
        if base + counts_of[free].sum() < k:
            continue
        own = free[options_of[free] == 1]
        rows = rows_of[own] if base + counts_of[own].sum() >= k else rows_of[free]
        taken[rows] = True
        pattern[rows] = level[subset]


def _subsets(table: pd.DataFrame, keys: list[str]) -> list[int]:
    """Bit masks of the key subsets by increasing size; within a size, subsets of the keys with more
    categories first (the heuristic's importance: a key with many categories identifies most)."""
    ranked = sorted(range(len(keys)), key=lambda j: (-table[keys[j]].nunique(dropna=True), j))
    return [sum(1 << j for j in chosen) for size in range(1, len(keys) + 1) for chosen in combinations(ranked, size)]


def _joins(current: np.ndarray, weights: np.ndarray, counts: np.ndarray, subset: int,
           k: int) -> tuple[float, int, np.ndarray]:
    """The moves that suppress the keys of ``subset`` in the rows of groups of fewer than k records, and in as
    few whole groups of at least k records as it takes (fewest suppressions first) to make each resulting
    group reach k: (suppressions per record of small groups rescued, those records, rows moved)."""
    m = current.shape[1]
    codes = current @ weights
    sizes = _group_sizes(codes, counts)
    small = sizes < k
    keep = _kept(np.array([subset]), m)[0]
    projected = (current * keep) @ weights
    lost = ((current > 0) & (keep == 0)).sum(axis=1) * counts
    rows = pd.DataFrame({"to": projected, "code": codes, "n": counts, "lost": lost, "small": small})
    movers = rows[small].groupby("to").agg(n=("n", "sum"), lost=("lost", "sum"))
    staying = rows[~small & (projected == codes)].groupby("to")["n"].sum()
    movers["short"] = k - movers["n"] - staying.reindex(movers.index, fill_value=0)
    donors = rows[~small & (projected != codes) & rows["to"].isin(movers.index[movers["short"] > 0])]
    groups = donors.groupby(["to", "code"]).agg(n=("n", "sum"), lost=("lost", "sum")).reset_index()
    groups = groups.sort_values(["to", "lost", "code"], kind="stable")
    groups["before"] = groups.groupby("to")["n"].cumsum() - groups["n"]
    groups = groups[groups["before"] < movers["short"].reindex(groups["to"]).to_numpy()]
    covered = groups.groupby("to")["n"].sum().reindex(movers.index, fill_value=0)
    feasible = movers.index[movers["short"] <= covered]
    if len(feasible) == 0:
        return np.inf, 0, np.empty(0, dtype=np.int64)
    joined = groups[groups["to"].isin(feasible)]
    cost = movers.loc[feasible, "lost"].sum() + joined["lost"].sum()
    records = int(movers.loc[feasible, "n"].sum())
    moved = (small & np.isin(projected, feasible)) | np.isin(codes, joined["code"].to_numpy()) & ~small
    return float(cost) / records, records, np.flatnonzero(moved)


def suppression_patterns(table: pd.DataFrame, keys: list[str], k: int) -> np.ndarray:
    """For each combination of key values (a row of ``table``: the keys and their record ``count``; missing is
    a value of its own) the bit mask of the keys whose values its records lose, so that every record's
    combination, suppressed values included, is shared by at least k records (k-anonymity,
    statistical_databases_survey.txt; local suppression, same paper).

    Greedy on the combinations. First, over key subsets of increasing size (more categories first), move
    the records of groups of fewer than k records into groups of at least k that suppressing a subset forms,
    the most constrained moves first (those whose records have the fewest other moves at that size). Then,
    while small groups remain, apply the subset of the smallest size that can rescue any, the one whose
    moves cost the fewest suppressions per record rescued, where a move also takes whole groups of at least
    k records into the new group when it needs them (the cheapest first); suppressing every key always
    succeeds once the scope has k records."""
    counts = table[COUNT_COL].to_numpy(np.int64)
    if counts.sum() < k:
        raise ValueError(f"parameter 'k' of local_suppression = {k} exceeds the {int(counts.sum())} records of a scope")
    digits, weights = _digits(table, keys)
    pattern = np.zeros(len(table), dtype=np.int64)
    subsets = _subsets(table, keys)
    for size in range(1, len(keys) + 1):
        level = [s for s in subsets if bin(s).count("1") == size]
        while True:
            codes = (digits * _kept(pattern, len(keys))) @ weights
            small = _group_sizes(codes, counts) < k
            if not small.any():
                return pattern
            moves = _level_moves(digits, weights, counts, small, codes, level, k)
            if moves.empty:
                break
            _apply_level(pattern, moves, level, k)
    while True:
        current = digits * _kept(pattern, len(keys))
        if (_group_sizes(current @ weights, counts) >= k).all():
            return pattern
        for size in range(1, len(keys) + 1):
            level = [s for s in subsets if bin(s).count("1") == size]
            tries = [(_joins(current, weights, counts, s, k), i) for i, s in enumerate(level)]
            (per_record, _, rows), i = min(tries, key=lambda t: (t[0][0], -t[0][1], t[1]))
            if np.isfinite(per_record):
                pattern[rows] |= level[i]
                break


# ---- the methods as plan/mask pairs: a plan per scope from exact counts, then the records of a partition
#      masked by it (sdc_tasks.masking.apply.CategoryMethod) ----


def coding_plan(coding: Callable[[list, int, str], tuple[list, Any]]):
    """The plan of top or bottom coding: per variable, the categories merged over its declared or observed order."""
    def plan(counts: dict[str, pd.Series], params: dict, orders: dict) -> dict:
        """Per variable: (merged categories, the category written for them)."""
        return {v: coding(category_order(c.index, orders.get(v), v), params["p"], v) for v, c in counts.items()}
    return plan


def global_recoding_plan(counts: dict[str, pd.Series], params: dict, orders: dict) -> dict:
    """Per variable: the p lowest-frequency categories and the category written for them."""
    return {v: globally_recoded(c, category_order(c.index, orders.get(v), v), params["p"], v)
            for v, c in counts.items()}


def recoded(rows: pd.DataFrame, variables: list[str], plan: dict, keys: dict) -> pd.DataFrame:
    """Each variable with its merged categories replaced by the category written for them (type kept)."""
    return pd.DataFrame({v: rows[v].mask(rows[v].isin(plan[v][0]), plan[v][1]) for v in variables})


def pram_plan(counts: dict[str, pd.Series], params: dict, orders: dict) -> dict:
    """Per variable: its observed categories in order and their Kooiman matrix."""
    plan = {}
    for v, c in counts.items():
        order = [x for x in category_order(c.index, orders.get(v), v) if x in c.index]
        plan[v] = (pd.Index(order, dtype=c.index.dtype), kooiman_matrix(c[order].to_numpy(), params["theta"]))
    return plan


def prammed(rows: pd.DataFrame, variables: list[str], plan: dict, keys: dict) -> pd.DataFrame:
    """Each variable's categories drawn from their PRAM matrix rows; the uniform of a record is keyed by
    (seed, step, variable, record id), so a record gets the same draw in any partition, or for a household-level
    variable by (seed, step, variable, household id), so all members of a household get the same draw
    (households.draw_keys)."""
    out = {}
    for v in variables:
        categories, matrix = plan[v]
        known = rows[v].notna().to_numpy()
        # a private copy: the plan is shared by tasks on threads, which must not build its index's hash table at once
        codes = categories.copy(deep=True).get_indexer(rows[v][known])
        if (codes < 0).any():
            raise RuntimeError(f"pram: variable {v!r} holds a category its frequencies did not count")
        ids, stream = draw_keys(rows[known], v, keys)
        u = record_uniforms(keys["seed"], keys["step"], ids, 1, stream=stream)[:, 0]
        column = rows[v].copy()
        column[known] = categories.take(pram_draws(codes, matrix, u)).to_numpy()
        out[v] = column
    return pd.DataFrame(out)


def suppression_plan(table: pd.DataFrame, params: dict, orders: dict) -> pd.DataFrame:
    """With ``threshold``, the key combinations whose records lose values from the weighted combination table
    (sdc_tasks.masking.risk_suppression); with ``missing: any``, the records that lose values (by position) from
    the first-records table (sdc_tasks.masking.suppression); else the key combinations whose records lose values,
    with the bit mask of the keys they lose."""
    if params["threshold"] is not None:
        return threshold_suppression_plan(table, params, orders)
    if params["missing"] == "any":
        keys = [c for c in table.columns if c != POS_COL]
        return suppression_plan_any(table, keys, params)
    keys = [c for c in table.columns if c != COUNT_COL]
    pattern = suppression_patterns(table, keys, params["k"])
    return table.loc[pattern > 0, keys].assign(**{SUPPRESS_COL: pattern[pattern > 0]}).reset_index(drop=True)


def suppressed(rows: pd.DataFrame, variables: list[str], plan: pd.DataFrame, keys: dict) -> pd.DataFrame:
    """The key variables with the planned values missing: a record's bit mask picked by its position (a plan of
    records, ``missing: any``) or by its combination, missing values included (a plan of combinations)."""
    on = [POS_COL] if POS_COL in plan.columns else variables
    bits = rows[on].merge(plan, on=on, how="left")[SUPPRESS_COL].fillna(0).to_numpy(np.int64)
    return pd.DataFrame({v: rows[v].astype(nullable_dtype(rows[v].dtype)).mask(bits >> j & 1 == 1)
                         for j, v in enumerate(variables)})
