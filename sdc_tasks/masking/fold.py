"""Column kernels whose state is a bounded window (rank swapping) as a fold over rank-ordered partitions: no task
holds a whole column, and the result equals the whole-column kernel's bit for bit on any partitioning.

Per variable:
1. keys: each record's (stratum code, value, id, position), the order the whole-column kernel ranks a scope in
   (value, ties by id, then by input position, the stable sort's order), led by the stratum;
2. an exact global sort on those keys: splitters from a deterministic sample of the keys, each record's
   rank-ordered partition the number of splitters at or below its key, one Dask shuffle on that number with known
   divisions, then a lexicographic sort within each partition (ties never pile into one partition: the
   position makes every key distinct);
3. the fold: a chain of tasks over the rank-ordered partitions in order, each taking the previous task's small
   state (the stratum it ended in, that stratum's ranks done, the kernel's carry, O(window)) and emitting
   (position, masked value) for its ranks; the random stream of a scope is keyed as the whole-column kernel's,
   (seed, step, variable[, stratum]), and each chunk positions it at its first rank;
4. a shuffle on each position's input partition back to the input's partitions and row order.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd

from sdc_tasks.blocking import offsets_of
from sdc_tasks.randomness import rng_for
from sdc_tasks.reserved import POS_COL, RANGE_COL, SCOPE_COL, VALUE_COL

ColumnFold = Callable[[np.ndarray, np.ndarray, int, int, dict, np.random.Generator, Any],
                      tuple[np.ndarray, np.ndarray, Any]]
SAMPLES_PER_PARTITION = 64


@dataclass(frozen=True)
class Scopes:
    """The scopes a column is masked in: their labels in code order (``[None]`` for the whole file) and the
    records of each."""

    labels: list
    sizes: np.ndarray


@dataclass(frozen=True)
class FoldState:
    """Where the fold stands after a chunk: the code of the scope it ended in (-1 before the first chunk), that
    scope's records and ranks done, and the kernel's carry."""

    code: int = -1
    size: int = 0
    done: int = 0
    carry: Any = None


def scopes_of(ddf: dd.DataFrame, strata: str | None, total: int) -> Scopes:
    """The scopes of a column kernel: the whole file, or each stratum (labels as the whole-column path keys its
    random streams, numpy scalars of the column's dtype, sorted by their text) with its records, by one count."""
    if strata is None:
        return Scopes([None], np.array([total], dtype=np.int64))
    counts = ddf[strata].value_counts().compute()
    counts = counts[counts > 0]
    labels = counts.index.to_numpy()
    order = sorted(range(len(labels)), key=lambda i: str(labels[i]))
    return Scopes([labels[i] for i in order], counts.to_numpy(dtype=np.int64)[order])


def _sort_keys(part: pd.DataFrame, offset: int, var: str, id_col: str, strata: str | None,
               labels: list) -> pd.DataFrame:
    """One partition's sort keys for ``var``: scope code, value, id and position; a non-finite value is an error
    naming the variable and the record's position."""
    values = part[var].to_numpy(dtype=np.float64)
    bad = ~np.isfinite(values)
    if bad.any():
        raise ValueError(f"variable {var!r} has a non-finite value in record {offset + int(np.argmax(bad))}")
    codes = (pd.Index(labels).get_indexer(part[strata]) if strata else np.zeros(len(part))).astype(np.int64)
    return pd.DataFrame({SCOPE_COL: codes, VALUE_COL: values, id_col: part[id_col].to_numpy(),
                         POS_COL: np.arange(offset, offset + len(part), dtype=np.int64)})


def _key_order(keys: pd.DataFrame, id_col: str, stratified: bool, extra: tuple = ()) -> np.ndarray:
    """Row order of ``keys`` by (scope, value, id, position), then by ``extra`` keys (the scope left out when
    there is one)."""
    scope = (keys[SCOPE_COL].to_numpy(),) if stratified else ()
    return np.lexsort((*extra, keys[POS_COL].to_numpy(), keys[id_col].to_numpy(), keys[VALUE_COL].to_numpy(), *scope))


def _key_sample(keys: pd.DataFrame, stride: int) -> pd.DataFrame:
    """The keys of the records whose position is a multiple of ``stride`` (a sample that does not depend on the
    partitioning)."""
    return keys[keys[POS_COL].to_numpy() % stride == 0]


def _splitters(samples: list[pd.DataFrame], count: int, id_col: str, stratified: bool) -> pd.DataFrame:
    """``count - 1`` keys cutting the sorted sample into ``count`` equal runs: the bounds of the rank-ordered
    partitions."""
    sample = pd.concat(samples, ignore_index=True)
    sample = sample.iloc[_key_order(sample, id_col, stratified)].reset_index(drop=True)
    return sample.iloc[[k * len(sample) // count for k in range(1, count)]].reset_index(drop=True)


def _with_range(keys: pd.DataFrame, splitters: pd.DataFrame, id_col: str, stratified: bool) -> pd.DataFrame:
    """``keys`` with each record's rank-ordered partition: the number of splitters at or below its key."""
    both = pd.concat([splitters, keys], ignore_index=True)
    is_key = np.r_[np.zeros(len(splitters), np.int64), np.ones(len(keys), np.int64)]
    order = _key_order(both, id_col, stratified, (is_key,))
    below = np.cumsum(order < len(splitters))
    out = keys.copy()
    out[RANGE_COL] = np.zeros(len(keys), np.int64)
    mine = order >= len(splitters)
    out.iloc[order[mine] - len(splitters), out.columns.get_loc(RANGE_COL)] = below[mine]
    return out


def _rank_ordered(part: pd.DataFrame, id_col: str, stratified: bool) -> pd.DataFrame:
    """One rank-ordered partition's keys, sorted by (scope, value, id, position)."""
    part = part.reset_index(drop=True)
    return part.iloc[_key_order(part, id_col, stratified)].reset_index(drop=True)


def _fold_chunk(ordered: pd.DataFrame, state: FoldState, first_code: int, sizes: np.ndarray, labels: list,
                var: str, fold: ColumnFold, params: dict, seed: int, step: int, stratified: bool,
                offsets: np.ndarray) -> tuple[pd.DataFrame, FoldState]:
    """The fold over one rank-ordered partition: each run of a scope's records goes through ``fold`` from the
    rank the previous chunk stopped at; returns (position, masked value, input partition) of the records it
    settles, and the state for the next chunk. ``sizes``/``labels``: the scopes from ``first_code`` on."""
    codes = ordered[SCOPE_COL].to_numpy()
    values = ordered[VALUE_COL].to_numpy()
    positions = ordered[POS_COL].to_numpy()
    starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]]) if len(codes) else np.zeros(0, np.int64)
    pieces = []
    for a, b in zip(starts, np.r_[starts[1:], len(codes)]):
        code = int(codes[a])
        if code != state.code:
            if state.done != state.size:
                raise RuntimeError(f"rank fold of {var!r}: a scope ended after {state.done} of {state.size} ranks")
            state = FoldState(code, int(sizes[code - first_code]))
        label = labels[code - first_code]
        rng = rng_for(seed, step, var, label) if stratified else rng_for(seed, step, var)
        pos, val, carry = fold(values[a:b], positions[a:b], state.done, state.size, params, rng, state.carry)
        pieces.append(pd.DataFrame({POS_COL: pos, var: val}))
        state = FoldState(code, state.size, state.done + int(b - a), carry)
    out = pd.concat(pieces, ignore_index=True) if pieces else _settled_meta(var).drop(columns=RANGE_COL)
    out[RANGE_COL] = np.searchsorted(offsets, out[POS_COL].to_numpy(), side="right") - 1
    return out, state


def _settled_meta(var: str) -> pd.DataFrame:
    """Empty frame of what the fold settles: position, masked value, input partition."""
    return pd.DataFrame({POS_COL: pd.Series(dtype="int64"), var: pd.Series(dtype="float64"),
                         RANGE_COL: pd.Series(dtype="int64")})


def _code_bounds(splitters: pd.DataFrame, scopes: int) -> list[tuple[int, int]]:
    """The first and last scope code each rank-ordered partition can hold, from the splitters around it."""
    cut = splitters[SCOPE_COL].tolist()
    return list(zip([0, *cut], [*cut, scopes - 1]))


def _folded_column(keys: list, samples: list[pd.DataFrame], key_meta: pd.DataFrame, count: int, scopes: Scopes,
                   var: str, id_col: str, fold: ColumnFold, params: dict, seed: int, step: int, stratified: bool,
                   offsets: np.ndarray) -> list:
    """Delayed frames of (position, masked value) of one variable, one per input partition (rows in any order)."""
    splitters = _splitters(samples, count, id_col, stratified)
    ranged = [dask.delayed(_with_range)(k, splitters, id_col, stratified) for k in keys]
    meta = _with_range(key_meta, splitters.iloc[:0], id_col, stratified)
    shuffled = dd.from_delayed(ranged, meta=meta, verify_meta=False).set_index(
        RANGE_COL, divisions=list(range(count)) + [count - 1])
    state: Any = FoldState()
    settled = []
    for part, (lo, hi) in zip(shuffled.to_delayed(), _code_bounds(splitters, len(scopes.labels))):
        ordered = dask.delayed(_rank_ordered)(part, id_col, stratified)
        out, state = dask.delayed(_fold_chunk, nout=2)(ordered, state, lo, scopes.sizes[lo:hi + 1],
                                                       scopes.labels[lo:hi + 1], var, fold, params, seed, step,
                                                       stratified, offsets)
        settled.append(out)
    parts = len(offsets) - 1
    back = dd.from_delayed(settled, meta=_settled_meta(var), verify_meta=False).set_index(
        RANGE_COL, divisions=list(range(parts)) + [parts - 1])
    return back.to_delayed()


def _columns_at(offset: int, n: int, pieces: list[pd.DataFrame], variables: list[str]) -> pd.DataFrame:
    """_pos for rows offset..offset+n-1 and each variable's masked values from its piece, put at their positions."""
    out = pd.DataFrame({POS_COL: np.arange(offset, offset + n, dtype=np.int64)})
    for var, piece in zip(variables, pieces):
        rows = piece[POS_COL].to_numpy() - offset
        if len(rows) != n or not np.array_equal(np.bincount(rows, minlength=n), np.ones(n, np.int64)):
            raise RuntimeError(f"rank fold of {var!r}: a partition of {n} records got {len(rows)} masked records")
        values = np.empty(n, dtype=np.float64)
        values[rows] = piece[var].to_numpy(dtype=np.float64)
        out[var] = values
    return out


def folded_records(ddf: dd.DataFrame, lengths: list[int], variables: list[str], fold: ColumnFold, params: dict,
                   seed: int, step: int, id_col: str, strata: str | None, target_rows: int) -> dd.DataFrame:
    """A window kernel (``fold``) on each variable over the whole file or within each stratum, as a fold over
    rank-ordered partitions of about ``target_rows`` records (at least as many as the input has); the result
    has the input's partitions and row order, _pos and the masked variables."""
    offsets = offsets_of(lengths)
    total = int(offsets[-1])
    scopes = scopes_of(ddf, strata, total)
    count = max(len(lengths), math.ceil(total / target_rows))
    stride = max(1, total // (SAMPLES_PER_PARTITION * count))
    parts = ddf.to_delayed()
    keys = {var: [dask.delayed(_sort_keys)(part, int(offsets[i]), var, id_col, strata, scopes.labels)
                  for i, part in enumerate(parts)] for var in variables}
    samples = dask.compute({var: [dask.delayed(_key_sample)(k, stride) for k in keys[var]] for var in variables})[0]
    columns = [_folded_column(keys[var], samples[var], _sort_keys(ddf._meta, 0, var, id_col, strata, scopes.labels),
                              count, scopes, var, id_col, fold, params, seed, step, strata is not None, offsets)
               for var in variables]
    pieces = [dask.delayed(_columns_at)(int(offsets[i]), lengths[i], [c[i] for c in columns], variables)
              for i in range(len(lengths))]
    meta = pd.DataFrame({POS_COL: pd.Series(dtype="int64"), **{v: pd.Series(dtype="float64") for v in variables}})
    return dd.from_delayed(pieces, meta=meta, verify_meta=False)
