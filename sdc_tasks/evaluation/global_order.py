"""One column of a Dask frame in its exact global order, with no task ever holding the column.

The records are sorted by (value, record id), a total order (ids are unique), so a tie group of any size may be
cut between partitions and the order is the same whatever the input's partitioning. The sort is parallel
sorting by regular sampling (Shi and Schaeffer 1992): each partition, sorted locally, gives evenly spaced
(value, id) samples; the pooled samples, sorted on the driver, give one splitter per output partition boundary;
every record is numbered by the splitters below it and moved by Dask's own shuffle (``set_index`` on that
number with the divisions given, peer-to-peer on a distributed cluster, spilling to disk where memory is short),
or, for a file larger than the workers keep in memory, through files (:mod:`sdc_tasks.exchange_files`: each input
partition writes a batch per output partition, which reads its batches when its task runs); each output partition
is then sorted locally. With as many samples per partition as there are partitions
(MIN_SAMPLES to MAX_SAMPLES), no output partition holds much more than twice an input partition.

The sorted partitions are persisted (each as its own small delayed object, so that the many tasks reading a few
of them do not each carry the whole collection's graph), or, through files, written to files that the tasks
reading a partition map into memory (:func:`sdc_tasks.task_graph.stored`: a task that reads values at a few
positions or counts below thresholds reads the few pages it touches); their lengths, first and last values are
fetched, so that a record's global position is its partition's offset plus its local position: the driver then
knows which partition holds any global position, and the order statistics (:mod:`sdc_tasks.stats.order`) read only
the partitions they need.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd

from sdc_tasks.exchange_files import read_batches, write_batches
from sdc_tasks.scheduling import shuffle_method
from sdc_tasks.stats.order import counts_at_or_below, value_order
from sdc_tasks.task_graph import Stored, stored

KEY, ID, BUCKET = "key", "id", "bucket"
"""Column names of the frames :func:`sorted_column` sorts: the value (float64), the record id, the output
partition of a record (added here); any other column travels with its record."""

MIN_SAMPLES, MAX_SAMPLES = 32, 2048


def keyed_frame(frame: dd.DataFrame, value: str, id_col: str, carry: dict[str, str] | None = None) -> dd.DataFrame:
    """``frame``'s ``value`` column as float64 KEY beside its ``id_col`` as ID and the ``carry`` columns (as
    float64, renamed {source: name}), ready for :func:`sorted_column`."""
    carry = dict(carry or {})
    meta = _keyed(frame._meta, value, id_col, carry)
    return frame[[id_col, *dict.fromkeys([value, *carry])]].map_partitions(_keyed, value, id_col, carry, meta=meta)


def _keyed(part: pd.DataFrame, value: str, id_col: str, carry: dict[str, str]) -> pd.DataFrame:
    """One partition as KEY, ID and the carried columns."""
    columns = {KEY: part[value].to_numpy(np.float64), ID: part[id_col].to_numpy()}
    columns.update({name: part[source].to_numpy(np.float64) for source, name in carry.items()})
    return pd.DataFrame(columns, copy=False)


def _locally_sorted(part: pd.DataFrame) -> pd.DataFrame:
    """The records of one partition sorted by (KEY, ID), on a fresh 0.. index (set, not copied)."""
    out = part.iloc[value_order(part[KEY].to_numpy(), part[ID].to_numpy())]
    out.index = pd.RangeIndex(len(out))
    return out


def _regular_sample(part: pd.DataFrame, size: int, key: str = KEY) -> tuple[np.ndarray, np.ndarray]:
    """``size`` evenly spaced (``key``, ID) pairs of one partition in its (``key``, ID) order (all of them when
    fewer)."""
    keys, ids = part[key].to_numpy(), part[ID].to_numpy()
    m = keys.size
    take = value_order(keys, ids)[(np.arange(min(size, m)) * m) // max(min(size, m), 1)]
    return keys[take], ids[take]


def _splitters(samples: list[tuple[np.ndarray, np.ndarray]], buckets: int) -> tuple[np.ndarray, np.ndarray]:
    """The (KEY, ID) splitters that cut the pooled samples into ``buckets`` equal runs (Shi and Schaeffer 1992,
    regular sampling): ``buckets - 1`` pairs in (KEY, ID) order."""
    keys = np.concatenate([s[0] for s in samples])
    ids = np.concatenate([s[1] for s in samples])
    order = value_order(keys, ids)
    at = (np.arange(1, buckets if keys.size else 1) * keys.size) // buckets
    return keys[order][at], ids[order][at]


def _bucket_numbers(keys: np.ndarray, ids: np.ndarray, split_keys: np.ndarray, split_ids: np.ndarray) -> np.ndarray:
    """For each record (key, id), the number of splitters at or below it in (KEY, ID) order: the output
    partition that holds it."""
    return counts_at_or_below([split_keys, split_ids], [keys, ids])


def _bucketed(part: pd.DataFrame, split_keys: np.ndarray, split_ids: np.ndarray) -> pd.DataFrame:
    """One partition with the BUCKET column of :func:`_bucket_numbers`."""
    out = part.copy()
    out[BUCKET] = _bucket_numbers(part[KEY].to_numpy(), part[ID].to_numpy(), split_keys, split_ids)
    return out


def _ends(part: pd.DataFrame) -> tuple[int, float, float, int]:
    """Length, first and last KEY of a sorted partition and how many records hold its first KEY."""
    keys = part[KEY].to_numpy()
    if keys.size == 0:
        return 0, np.nan, np.nan, 0
    return int(keys.size), float(keys[0]), float(keys[-1]), int(np.searchsorted(keys, keys[0], side="right"))


def _described(part: pd.DataFrame, next_key: str | None,
               size: int) -> tuple[tuple[int, float, float, int], tuple[np.ndarray, np.ndarray] | None]:
    """A sorted partition's :func:`_ends` and, given ``next_key``, the :func:`_regular_sample` of its records
    keyed by that column (the sample of the next sort, whose partitions are these ones)."""
    return _ends(part), None if next_key is None else _regular_sample(part, size, next_key)


def _take(part: pd.DataFrame, local: np.ndarray) -> np.ndarray:
    """KEY at local positions of one partition."""
    return part[KEY].to_numpy()[local]


def _count_below(part: pd.DataFrame, thresholds: np.ndarray, side: str) -> np.ndarray:
    """How many KEYs of one sorted partition lie below each threshold (< or <= as ``side``)."""
    return np.searchsorted(part[KEY].to_numpy(), thresholds, side=side)


def _keys(part: pd.DataFrame) -> np.ndarray:
    """KEY of one partition."""
    return part[KEY].to_numpy()


@dataclass(frozen=True)
class SortedColumn:
    """A column sorted by (KEY, ID) across ``parts`` (persisted delayed partitions in global order, none empty):
    partition k holds global positions ``offsets[k]`` .. ``offsets[k + 1] - 1``; ``first``/``last``: its first
    and last KEY, ``head``: how many of its records hold its first KEY; ``next_samples``: per partition, the
    regular sample by another column that a sort of these partitions by it reads (None unless asked for). Reads
    as a sorted column of :mod:`sdc_tasks.stats.order`."""

    parts: list
    offsets: np.ndarray
    first: np.ndarray
    last: np.ndarray
    head: np.ndarray
    next_samples: list | None = None

    @property
    def n(self) -> int:
        """Number of records."""
        return int(self.offsets[-1])

    def part_of(self, positions: np.ndarray) -> np.ndarray:
        """The partition holding each global position."""
        return np.searchsorted(self.offsets, positions, side="right") - 1

    def at(self, positions: np.ndarray) -> np.ndarray:
        """KEY at the given global positions, reading only the partitions that hold them."""
        positions = np.asarray(positions, dtype=np.int64).reshape(-1)
        part = self.part_of(positions)
        touched = np.unique(part)
        got = dask.compute(*[dask.delayed(_take)(self.parts[k], positions[part == k] - self.offsets[k])
                             for k in touched])
        out = np.empty(positions.size)
        for k, values in zip(touched, got):
            out[part == k] = values
        return out

    def count_below(self, thresholds: np.ndarray, side: str) -> np.ndarray:
        """For each threshold t, how many KEYs are < t (``side="left"``) or <= t (``side="right"``), reading only
        the partitions whose first and last KEYs do not settle the count (a partition whose last KEY lies below
        t counts whole, one whose first KEY lies at or above it not at all)."""
        thresholds = np.asarray(thresholds, dtype=np.float64).reshape(-1)
        first, last = self.first[:, None], self.last[:, None]
        whole = last < thresholds if side == "left" else last <= thresholds
        none = first >= thresholds if side == "left" else first > thresholds
        out = np.diff(self.offsets) @ whole.astype(np.int64)
        read = np.flatnonzero(~(whole | none).all(axis=1))
        counts = dask.compute(*[dask.delayed(_count_below)(self.parts[k], thresholds, side) for k in read])
        for k, got in zip(read, counts):
            out += np.where(whole[k], 0, got)
        return out

    def last_occurrences(self) -> np.ndarray:
        """For each partition, the global position of the last record holding its last KEY (the tie group may
        run on through the following partitions)."""
        count = len(self.parts)
        out = np.empty(count, dtype=np.int64)
        for k in range(count):
            end, j = self.offsets[k + 1], k + 1
            while j < count and self.first[j] == self.last[k]:
                if self.last[j] != self.last[k]:
                    end = self.offsets[j] + self.head[j]
                    break
                end, j = self.offsets[j + 1], j + 1
            out[k] = end - 1
        return out

    def parts_over(self, low: int, high: int) -> list[int]:
        """The partitions holding any of the global positions ``low`` .. ``high``, in order."""
        return list(range(int(self.part_of(low)), int(self.part_of(high)) + 1))

    def key_parts(self) -> list:
        """Delayed KEY arrays of the partitions (one task each, shared by the tasks that read them)."""
        return [dask.delayed(_keys)(p) for p in self.parts]


def _sent(part: pd.DataFrame, split_keys: np.ndarray, split_ids: np.ndarray, count: int, path: Path) -> int:
    """One input partition's records written to the file ``path``, a batch per output partition
    (:func:`~sdc_tasks.exchange_files.write_batches`); returns how many."""
    buckets = _bucket_numbers(part[KEY].to_numpy(), part[ID].to_numpy(), split_keys, split_ids)
    return write_batches(part, buckets, count, path)


def _stored_sorted(sent_files: list[Path], j: int, sent: int, path: str, next_key: str | None,
                   size: int) -> tuple[Stored, tuple]:
    """Output partition ``j`` read from every input partition's file (``sent``: the records written, every file
    done), sorted by (KEY, ID) and written to the file ``path``: where it lies and its :func:`_described`."""
    part = _locally_sorted(read_batches(sent_files, j))
    return stored(part, path), _described(part, next_key, size)


def _written_sorted(pieces: list, split_keys: np.ndarray, split_ids: np.ndarray, files: Path, next_key: str | None,
                    size: int) -> list[tuple]:
    """The partitions of ``pieces`` exchanged through files in ``files`` (exchange_files: each input partition
    writes a batch per output partition, each output task reads its own), each sorted and written to a file
    there: per output partition, where it lies and its :func:`_described`. The exchanged files are removed
    after."""
    count = len(pieces)
    files.mkdir(parents=True, exist_ok=True)
    sent_files = [files / f"sent-{k}" for k in range(count)]
    sent = dask.delayed(sum)([dask.delayed(_sent)(p, split_keys, split_ids, count, f)
                              for p, f in zip(pieces, sent_files)])
    written = dask.compute(*[dask.delayed(_stored_sorted)(sent_files, j, sent, str(files / str(j)), next_key, size)
                             for j in range(count)])
    for f in sent_files:
        f.unlink()
    return list(written)


def _sample_size(count: int) -> int:
    """Samples per partition of a sort into ``count`` partitions: as many as the partitions, within MIN_SAMPLES
    to MAX_SAMPLES."""
    return min(max(count, MIN_SAMPLES), MAX_SAMPLES)


def sorted_column(frame: dd.DataFrame, files: Path | None = None, samples: list | None = None,
                  next_key: str | None = None) -> SortedColumn:
    """``frame`` (KEY, ID and carried columns; :func:`keyed_frame`) sorted by (KEY, ID) across as many
    partitions as it has, persisted, or with ``files`` (a directory every worker reaches, kept while the column is
    read) written there, a file per partition, and read back by each task that needs it (see the module docstring
    for the algorithm). ``samples``: the partitions' regular samples when known (a previous sort's
    ``next_samples``); ``next_key``: a carried column by which the sorted partitions are sampled in the same
    pass, for a sort of them by that column (``next_samples`` of the result)."""
    pieces = frame.to_delayed()
    count = len(pieces)
    size = _sample_size(count)
    if samples is None:
        samples = dask.compute(*[dask.delayed(_regular_sample)(p, size) for p in pieces])
    split_keys, split_ids = _splitters(list(samples), count)
    if files is None:
        meta = frame._meta.assign(**{BUCKET: np.zeros(0, dtype=np.int64)})
        bucketed = frame.map_partitions(_bucketed, split_keys, split_ids, meta=meta)
        shuffled = bucketed.set_index(BUCKET, divisions=list(range(count + 1)), sorted=False,
                                      shuffle_method=shuffle_method())
        parts = list(dask.persist(*shuffled.map_partitions(_locally_sorted, meta=frame._meta).to_delayed()))
        described = dask.compute(*[dask.delayed(_described)(p, next_key, size) for p in parts])
    else:
        written = _written_sorted(pieces, split_keys, split_ids, files, next_key, size)
        parts = [dask.delayed(Stored.load, pure=True)(where) for where, _ in written]
        described = [d for _, d in written]
    kept = [k for k, (e, _) in enumerate(described) if e[0]]
    ends = [described[k][0] for k in kept]
    lengths = np.array([e[0] for e in ends], dtype=np.int64)
    return SortedColumn([parts[k] for k in kept], np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
                        np.array([e[1] for e in ends]), np.array([e[2] for e in ends]),
                        np.array([e[3] for e in ends], dtype=np.int64),
                        None if next_key is None else [described[k][1] for k in kept])
