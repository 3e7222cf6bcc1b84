"""Column kernels whose state is a bounded window (rank swapping) as a fold over rank-ordered partitions: no task
holds a whole column, and the result equals the whole-column kernel's bit for bit on any partitioning.

Per variable:
1. keys: each record's (stratum code, value, id, position), the order the whole-column kernel ranks a scope in
   (value, ties by id, then by input position, the stable sort's order), led by the stratum;
2. an exact global sort on those keys: splitters from a deterministic sample of the keys, each record's
   rank-ordered partition the number of splitters at or below its key; each input partition's keys go to a file
   of the step's work directory with a batch per rank-ordered partition (``sdc_tasks.exchange_files``), one task
   per input partition for every variable;
3. the fold: a chain of tasks over the rank-ordered partitions (each at least a WINDOW_SHARE of the window) in
   order, each reading its keys from those files when it runs, sorting them lexicographically (ties never pile
   into one partition: the position makes every key distinct), and taking the previous task's small state (the
   stratum it ended in, that stratum's ranks done, the kernel's carry, O(window)); it writes (position, masked
   value) for its ranks to a file with a batch per input partition, and its state beside it; the random stream of a
   scope is keyed as the whole-column kernel's, (seed, step, variable[, stratum]), and each chunk positions it at
   its first rank; once a variable's chain has ended, its key files are removed;
4. each input partition reads its batch of every chunk's file and puts the values back at their positions.

A chain's task thus holds one rank-ordered partition, and no task's result holds records beyond its own partition:
a worker's memory grows with the file only as the window does (a Dask shuffle would hand every rank-ordered
partition to the workers at once, held until the chain reached it, and the settled values of every variable until
the last).
"""

from __future__ import annotations

import math
import pickle
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
from dask.base import tokenize

from sdc_tasks.blocking import offsets_of
from sdc_tasks.exchange_files import read_batches, write_batches
from sdc_tasks.outputs import pickled_whole
from sdc_tasks.randomness import rng_for
from sdc_tasks.reserved import POS_COL, SCOPE_COL, VALUE_COL
from sdc_tasks.stats.order import counts_at_or_below, value_order

ColumnFold = Callable[[np.ndarray, np.ndarray, int, int, dict, np.random.Generator, Any],
                      tuple[np.ndarray, np.ndarray, Any]]
FoldWindow = Callable[[int, dict], int]


class WindowFold(NamedTuple):
    """A column kernel as a fold: ``chunk`` masks one chunk of a scope's ranks from the carry of the chunk before,
    and ``window`` gives, for a scope of n records, the ranks ahead of a rank that the carry spans."""

    chunk: ColumnFold
    window: FoldWindow


WINDOW_SHARE = 4
"""A rank-ordered partition of the fold holds at least 1 / WINDOW_SHARE of the widest scope's window: each chunk
copies its carry (pending partners over the window, about P / 4 of them for rank swapping at p = 15), so chunks
of a fixed length made the fold's work grow as records x window / chunk, as records squared; with the chunk a
share of the window it grows as the records (docs/performance.md)."""
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


def _sort_keys(part: pd.DataFrame, positions: np.ndarray, var: str, id_col: str, strata: str | None,
               labels: list) -> pd.DataFrame:
    """The sort keys for ``var`` of the records of ``part`` at the file's ``positions``: scope code (in the smallest
    unsigned integer type that holds the codes: a byte a record where there are at most 256 scopes, instead of eight
    in every key file of the fold), value, id and position; a non-finite value is an error naming the variable and
    the record's position."""
    values = part[var].to_numpy(dtype=np.float64)
    bad = ~np.isfinite(values)
    if bad.any():
        raise ValueError(f"variable {var!r} has a non-finite value in record {int(positions[np.argmax(bad)])}")
    code_type = np.min_scalar_type(max(len(labels) - 1, 0))
    codes = (pd.Index(labels).get_indexer(part[strata]) if strata else np.zeros(len(part))).astype(code_type)
    return pd.DataFrame({SCOPE_COL: codes, VALUE_COL: values, id_col: part[id_col].to_numpy(), POS_COL: positions})


def _key_order(keys: pd.DataFrame, id_col: str, stratified: bool) -> np.ndarray:
    """Row order of ``keys`` by (scope, value, id, position), rows equal in all four in row order: the order of
    (value, id) by :func:`~sdc_tasks.stats.order.value_order`, then a stable sort by scope; only where two rows
    share value and id (repeated ids) but not their position, ``np.lexsort`` of all four (which took 3-4 times as
    long on a partition of 250,000 records)."""
    values, ids, positions = keys[VALUE_COL].to_numpy(), keys[id_col].to_numpy(), keys[POS_COL].to_numpy()
    order = value_order(values, ids)
    scope = (keys[SCOPE_COL].to_numpy(),) if stratified else ()
    if stratified:
        order = order[np.argsort(scope[0][order], kind="stable")]
    ranked_values, ranked_ids, ranked_positions = values[order], ids[order], positions[order]
    same = (ranked_values[1:] == ranked_values[:-1]) & (ranked_ids[1:] == ranked_ids[:-1])
    if (ranked_positions[1:][same] != ranked_positions[:-1][same]).any():
        return np.lexsort((positions, ids, values, *scope))
    return order


def _key_samples(part: pd.DataFrame, offset: int, variables: list[str], id_col: str, strata: str | None,
                 labels: list, stride: int) -> dict[str, pd.DataFrame]:
    """Each variable's sort keys of the records of one partition (rows from file position ``offset``) whose
    position is a multiple of ``stride``: a sample that does not depend on the partitioning, its keys made for
    the sampled records only."""
    rows = np.flatnonzero((offset + np.arange(len(part), dtype=np.int64)) % stride == 0)
    sampled = part.iloc[rows]
    return {var: _sort_keys(sampled, offset + rows, var, id_col, strata, labels) for var in variables}


def _splitters(samples: list[pd.DataFrame], count: int, id_col: str, stratified: bool) -> pd.DataFrame:
    """``count - 1`` keys cutting the sorted sample into ``count`` equal runs: the bounds of the rank-ordered
    partitions."""
    sample = pd.concat(samples, ignore_index=True)
    sample = sample.iloc[_key_order(sample, id_col, stratified)].reset_index(drop=True)
    return sample.iloc[[k * len(sample) // count for k in range(1, count)]].reset_index(drop=True)


def _key_ranges(keys: pd.DataFrame, splitters: pd.DataFrame, id_col: str, stratified: bool) -> np.ndarray:
    """Each key's rank-ordered partition: the number of splitters at or below it in (scope, value, id, position)
    order (a splitter equal to a key, the key it was sampled from, counts as below it)."""
    levels = [*([SCOPE_COL] if stratified else []), VALUE_COL, id_col, POS_COL]
    return counts_at_or_below([splitters[c].to_numpy() for c in levels], [keys[c].to_numpy() for c in levels])


def _keys_sent(part: pd.DataFrame, offset: int, variables: list[str], id_col: str, strata: str | None, labels: list,
               splitters: dict[str, pd.DataFrame], count: int, files: dict[str, Path]) -> int:
    """Steps 1-2 for one input partition: each variable's sort keys written to its file ``files[var]``, a batch per
    rank-ordered partition (exchange_files.write_batches); returns the partition's records."""
    for var in variables:
        keys = _sort_keys(part, np.arange(offset, offset + len(part), dtype=np.int64), var, id_col, strata, labels)
        write_batches(keys, _key_ranges(keys, splitters[var], id_col, strata is not None), count, files[var])
    return len(part)


def _rank_ordered(part: pd.DataFrame, id_col: str, stratified: bool) -> pd.DataFrame:
    """One rank-ordered partition's scope codes, values and positions (the fold's columns, not the ids that only
    order them) in (scope, value, id, position) order."""
    order = _key_order(part, id_col, stratified)
    return pd.DataFrame({c: part[c].to_numpy()[order] for c in (SCOPE_COL, VALUE_COL, POS_COL)})


def _fold_chunk(ordered: pd.DataFrame, state: FoldState, first_code: int, sizes: np.ndarray, labels: list,
                var: str, fold: ColumnFold, params: dict, seed: int, step: int,
                stratified: bool) -> tuple[pd.DataFrame, FoldState]:
    """The fold over one rank-ordered partition: each run of a scope's records goes through ``fold`` from the
    rank the previous chunk stopped at; returns (position, masked value) of the records it settles, and the state
    for the next chunk. ``sizes``/``labels``: the scopes from ``first_code`` on."""
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
    out = pd.concat(pieces, ignore_index=True) if pieces else pd.DataFrame(
        {POS_COL: pd.Series(dtype="int64"), var: pd.Series(dtype="float64")})
    return out, state


def _chunk_folded(sent: int, files: list[Path], j: int, state: FoldState, first_code: int, sizes: np.ndarray,
                  labels: list, var: str, id_col: str, fold: ColumnFold, params: dict, seed: int, step: int,
                  stratified: bool, offsets: np.ndarray, settled: Path, before: Path | None) -> FoldState:
    """Step 3 for rank-ordered partition ``j`` of ``var``: its keys read from the input partitions' ``files``
    (``sent``: the records their tasks wrote, all of them done) and folded from ``state`` (:func:`_fold_chunk`);
    what it settles written to ``settled``, a batch per input partition, and the state it returns beside it
    (:func:`_state_path`). A chunk run again after its result was lost with a worker returns that state without
    reading its keys, which are removed once the variable's fold has ended (:func:`_keys_removed`). Once its own
    state is kept, the previous chunk's (``before``: that chunk's ``settled``) is kept without its carry, which
    only this chunk reads (O(window): about 4 MB a chunk of rank swapping at p = 15 and 4e6 records): a chunk run
    again returns its own kept state whatever it was given."""
    kept = _state_path(settled)
    if kept.exists():
        return pickle.loads(kept.read_bytes())
    ordered = _rank_ordered(read_batches(files, j), id_col, stratified)
    out, done = _fold_chunk(ordered, state, first_code, sizes, labels, var, fold, params, seed, step, stratified)
    write_batches(out, np.searchsorted(offsets, out[POS_COL].to_numpy(), side="right") - 1, len(offsets) - 1,
                  settled)
    pickled_whole(kept, done)
    if before is not None:
        pickled_whole(_state_path(before), replace(state, carry=None))
    return done


def _state_path(settled: Path) -> Path:
    """Where the state a chunk of the fold ended in is kept, beside the file of what it settled."""
    return settled.with_suffix(".state")


def _keys_removed(state: FoldState, files: list[Path]) -> FoldState:
    """Remove a variable's key files once its fold has ended (``state``: its last chunk's, passed on): every chunk
    has read them, and a chunk run again returns its kept state instead (:func:`_chunk_folded`). The variables'
    keys, 25 bytes a record each, are all written before the first chain starts; without this, a variable's stayed
    until the step's end, beside the settled values of every variable (docs/performance.md)."""
    for path in files:
        path.unlink(missing_ok=True)
    return state


def _code_bounds(splitters: pd.DataFrame, scopes: int) -> list[tuple[int, int]]:
    """The first and last scope code each rank-ordered partition can hold, from the splitters around it."""
    cut = splitters[SCOPE_COL].tolist()
    return list(zip([0, *cut], [*cut, scopes - 1]))


def _columns_at(offset: int, n: int, i: int, settled: dict[str, list[Path]], done: list[FoldState],
                variables: list[str]) -> pd.DataFrame:
    """Step 4 for input partition ``i`` (rows offset..offset+n-1): _pos and each variable's masked values, read from
    batch ``i`` of its chunks' ``settled`` files (``done``: the last state of each variable's fold, every chunk
    written) and put at their positions."""
    out = pd.DataFrame({POS_COL: np.arange(offset, offset + n, dtype=np.int64)})
    for var in variables:
        piece = read_batches(settled[var], i)
        rows = piece[POS_COL].to_numpy() - offset
        if len(rows) != n or not np.array_equal(np.bincount(rows, minlength=n), np.ones(n, np.int64)):
            raise RuntimeError(f"rank fold of {var!r}: a partition of {n} records got {len(rows)} masked records")
        values = np.empty(n, dtype=np.float64)
        values[rows] = piece[var].to_numpy(dtype=np.float64)
        out[var] = values
    return out


def _shared(value: Any):
    """``value`` as one task of the graph that the tasks reading it depend on, instead of a copy in each of them (a
    rank fold over P partitions would otherwise carry P copies of the splitters, file lists and offsets: a graph
    growing as P squared)."""
    return dask.delayed(value, pure=True, traverse=False)


def folded_records(ddf: dd.DataFrame, lengths: list[int], variables: list[str], fold: WindowFold, params: dict,
                   seed: int, step: int, id_col: str, strata: str | None, target_rows: int,
                   work: Path) -> dd.DataFrame:
    """A window kernel (``fold``) on each variable over the whole file or within each stratum, as a fold over
    rank-ordered partitions of about ``target_rows`` records (at least as many as the input has) or, where the
    widest scope's window is longer, of a WINDOW_SHARE of that window; its files in a directory of ``work`` named
    for this fold (every worker reaches it; keep it until the result is written: a chunk's kept state is read back
    only by the same fold); the result has the input's partitions and row order, _pos and the masked variables."""
    offsets = offsets_of(lengths)
    total = int(offsets[-1])
    scopes = scopes_of(ddf, strata, total)
    window = max(fold.window(int(n), params) for n in scopes.sizes)
    count = max(len(lengths), math.ceil(total / target_rows))
    count = max(1, min(count, math.ceil(total / max(1, window // WINDOW_SHARE))))
    stride = max(1, total // (SAMPLES_PER_PARTITION * count))
    stratified = strata is not None
    work = work / f"fold-{tokenize(ddf, variables, params, seed, step, id_col, strata, target_rows)}"
    parts = ddf.to_delayed()
    samples = dask.compute([dask.delayed(_key_samples)(part, int(offsets[i]), variables, id_col, strata,
                                                       scopes.labels, stride) for i, part in enumerate(parts)])[0]
    splitters = {var: _splitters([sample[var] for sample in samples], count, id_col, stratified)
                 for var in variables}
    work.mkdir(parents=True, exist_ok=True)
    keys = {var: [work / f"keys-{k:03d}-{i:05d}.arrow" for i in range(len(parts))] for k, var in enumerate(variables)}
    split_at = _shared(splitters)
    sent = dask.delayed(sum)([dask.delayed(_keys_sent)(part, int(offsets[i]), variables, id_col, strata,
                                                        scopes.labels, split_at, count,
                                                        {var: keys[var][i] for var in variables})
                              for i, part in enumerate(parts)])
    settled = {var: [work / f"settled-{k:03d}-{j:05d}.arrow" for j in range(count)] for k, var in enumerate(variables)}
    bounds, done = _shared(offsets), []
    for var in variables:
        state: Any = FoldState()
        sources = _shared(keys[var])
        for j, (lo, hi) in enumerate(_code_bounds(splitters[var], len(scopes.labels))):
            state = dask.delayed(_chunk_folded)(sent, sources, j, state, lo, scopes.sizes[lo:hi + 1],
                                                scopes.labels[lo:hi + 1], var, id_col, fold.chunk, params, seed, step,
                                                stratified, bounds, settled[var][j],
                                                settled[var][j - 1] if j else None)
        done.append(dask.delayed(_keys_removed)(state, sources))
    settled_at = _shared(settled)
    pieces = [dask.delayed(_columns_at)(int(offsets[i]), lengths[i], i, settled_at, done, variables)
              for i in range(len(lengths))]
    meta = pd.DataFrame({POS_COL: pd.Series(dtype="int64"), **{v: pd.Series(dtype="float64") for v in variables}})
    return dd.from_delayed(pieces, meta=meta, verify_meta=False)
