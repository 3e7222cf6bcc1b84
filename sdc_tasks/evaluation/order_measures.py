"""The measures that read a variable's global order, out of core: the rank errors of brMAE and brMSE, the quantile
terms of PIL_Q and the interval-disclosure hits of ID_p, each equal to the in-memory kernel on the whole column
(exact integers and the same order statistics) while no task holds more than a few partitions.

Two sorts of one variable's paired records (:mod:`sdc_tasks.evaluation.global_order`) carry everything: sort A by
(original value, id) gives each record its original rank r (its global position + 1, ties by id as
:func:`~sdc_tasks.metrics.rank_metrics.ranks`); sort B by (masked value, id), carrying r and the original value,
gives its masked rank r~ beside r, so the rank differences are summed per partition with no join, and sort B's
masked values are the sorted masked column the interval windows read. A window's ends lie W positions either
side of the record's own, so a partition's windows for one W read the few partitions that its positions, shifted
by W, fall in (halos of any width, across as many partitions as W spans).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd

from sdc_tasks.evaluation.global_order import ID, KEY, SortedColumn, keyed_frame, sorted_column
from sdc_tasks.metrics.pil import quantile_pil
from sdc_tasks.metrics.rank_metrics import RankErrors, rank_errors
from sdc_tasks.metrics.risk import ID_PERCENTS, interval_widths, sdid_hits, window_positions
from sdc_tasks.reserved import MASKED_SUFFIX
from sdc_tasks.stats.moments import tree_merge

GATHER_ROWS = 1_000_000
"""Files of at most this many records gather each variable on one worker for the order-based measures instead:
quicker there than the sorts' rounds of tasks, and the same numbers."""

OTHER, RANK = "other", "rank"
"""Carried columns of the sorts: the record's other value (masked in sort A, original in sort B) and, in sort B,
the original value's rank."""


def gathers(records: int) -> bool:
    """Whether a file of ``records`` records is small enough (GATHER_ROWS) to gather each variable on one worker
    for the order-based measures."""
    return records <= GATHER_ROWS


@dataclass(frozen=True)
class OrderMeasures:
    """What one variable contributes to the order-based measures (None where not asked for): its rank errors
    (brMAE, brMSE), its quantile terms (PIL_Q: :func:`~sdc_tasks.metrics.pil.quantile_pil`) and its hits
    (ID_1..ID_10, then SDID)."""

    rank_errors: RankErrors | None
    quantile_terms: tuple[np.ndarray, int] | None
    hits: np.ndarray | None


def _swapped(part: pd.DataFrame, start: int) -> pd.DataFrame:
    """A partition of sort A as input of sort B: the masked value as KEY, the original value as OTHER and its rank
    (the global position + 1) as RANK."""
    return pd.DataFrame({KEY: part[OTHER].to_numpy(), ID: part[ID].to_numpy(), OTHER: part[KEY].to_numpy(),
                         RANK: start + np.arange(1, len(part) + 1, dtype=np.int64)})


def paired_orders(pairs: dd.DataFrame, id_col: str, var: str) -> tuple[SortedColumn, SortedColumn]:
    """Sort A (original values, carrying the masked ones) and sort B (masked values, carrying the original values
    and their ranks) of one variable's paired records."""
    frame = keyed_frame(pairs, var, id_col, {var + MASKED_SUFFIX: OTHER})
    a = sorted_column(frame)
    parts = [dask.delayed(_swapped)(p, int(a.offsets[k])) for k, p in enumerate(a.parts)]
    b = sorted_column(dd.from_delayed(parts, meta=_swapped(frame._meta, 0), verify_meta=False))
    return a, b


def _part_rank_errors(part: pd.DataFrame, start: int) -> RankErrors:
    """Rank errors of one partition of sort B: its carried original ranks against its masked ranks (the global
    position + 1; bounded_rank_metrics.txt eq. 8 and 9 numerators)."""
    masked_rank = start + np.arange(1, len(part) + 1, dtype=np.int64)
    return rank_errors(part[RANK].to_numpy()[:, None], masked_rank[:, None])


def rank_error_graph(b: SortedColumn):
    """Delayed rank errors of the variable of sort B, summed over its partitions."""
    return tree_merge([dask.delayed(_part_rank_errors)(p, int(b.offsets[k])) for k, p in enumerate(b.parts)],
                      operator.add)


def _values_at(positions: np.ndarray, pieces: tuple[np.ndarray, ...], starts: np.ndarray) -> np.ndarray:
    """The sorted column's values at global positions, from the pieces (whole partitions, in order) that hold
    them, piece i starting at global position ``starts[i]``."""
    values = np.concatenate(pieces)
    base = np.concatenate([[0], np.cumsum([len(p) for p in pieces])[:-1]]).astype(np.int64)
    piece = np.searchsorted(starts, positions, side="right") - 1
    return values[base[piece] + positions - starts[piece]]


def _part_window_hits(part: pd.DataFrame, start: int, last: int, width: int, n: int, starts: np.ndarray,
                      *pieces: np.ndarray) -> int:
    """How many records of one partition of sort B have their original value inside the ID interval of half-width
    ``width``: R, the position of the last occurrence of the masked value (``last`` for the partition's last
    value, whose ties may run on), and the values at R - W and R + W - 1 (sdc_methods_comparison_chapter.txt
    sec. 3, Interval Disclosure; :func:`~sdc_tasks.metrics.risk.interval_hits` on the whole column)."""
    keys, x = part[KEY].to_numpy(), part[OTHER].to_numpy()
    r = start + np.searchsorted(keys, keys, side="right") - 1
    r[keys == keys[-1]] = last
    lo, hi = window_positions(r, width, n)
    return int(((_values_at(lo, pieces, starts) <= x) & (x <= _values_at(hi, pieces, starts))).sum())


def _stacked(*counts: int) -> np.ndarray:
    """Counts as one integer array."""
    return np.array(counts, dtype=np.int64)


def interval_hit_graph(b: SortedColumn, percents: tuple[int, ...] = ID_PERCENTS):
    """Delayed interval-disclosure hits of the variable of sort B, one count per p, summed over its partitions:
    one task per partition and p, reading the partitions its window ends fall in (passed one by one: Dask
    finalizes a list of delayed arguments as a collection, which costs more than the task)."""
    n, keys, last = b.n, b.key_parts(), b.last_occurrences()
    counts = []
    for k, part in enumerate(b.parts):
        start, end = int(b.offsets[k]), int(b.offsets[k + 1])
        per_width = []
        for w in (int(v) for v in interval_widths(n, percents)):
            lo = window_positions(np.array([start, end - 1, last[k]]), w, n)
            need = sorted({*b.parts_over(lo[0][0], lo[0][1]), *b.parts_over(lo[1][0], lo[1][1]),
                           *b.part_of(np.array([lo[0][2], lo[1][2]])).tolist()})
            per_width.append(dask.delayed(_part_window_hits)(part, start, int(last[k]), w, n, b.offsets[need],
                                                             *(keys[j] for j in need)))
        counts.append(dask.delayed(_stacked)(*per_width))
    return tree_merge(counts, operator.add)


def _part_sdid_hits(part: pd.DataFrame, var: str, sd: float) -> int:
    """SDID hits of one paired partition (:func:`~sdc_tasks.metrics.risk.sdid_hits`)."""
    return sdid_hits(part[var].to_numpy(np.float64), part[var + MASKED_SUFFIX].to_numpy(np.float64), sd)


def _paired_measures(pairs: dd.DataFrame, id_col: str, var: str, sd: float, ranks: bool, quantiles: bool,
                     hits: bool) -> tuple[tuple[np.ndarray, int] | None, dict]:
    """The order-based results of one variable's paired records: the quantile terms when ``quantiles`` (the pairs
    then hold every record of both files) and {"ranks", "windows", "sdid"} as asked; both sorts are released on
    return."""
    a, b = paired_orders(pairs, id_col, var)
    terms = quantile_pil(a, b) if quantiles else None
    graphs: dict = {}
    if ranks:
        graphs["ranks"] = rank_error_graph(b)
    if hits:
        graphs["windows"] = interval_hit_graph(b)
        graphs["sdid"] = dask.delayed(sum)([dask.delayed(_part_sdid_hits)(p, var, sd) for p in pairs.to_delayed()])
    return terms, dask.compute(graphs)[0]


def variable_order_measures(pairs: dd.DataFrame, files: tuple[dd.DataFrame, dd.DataFrame] | None, id_col: str,
                            var: str, sd: float, ranks: bool, quantiles: bool, hits: bool) -> OrderMeasures:
    """One variable's :class:`OrderMeasures`, out of core: ``ranks`` and ``hits`` from the records paired by id
    (``pairs``), the quantile terms from the original and masked files (``files``; None when the pairs hold every
    record of both). The sorted data is held (persisted) only while this variable is measured."""
    terms, done = None, {}
    if ranks or hits or (quantiles and files is None):
        terms, done = _paired_measures(pairs, id_col, var, sd, ranks, quantiles and files is None, hits)
    if quantiles and files is not None:
        terms = quantile_pil(*(sorted_column(keyed_frame(f, var, id_col)) for f in files))
    return OrderMeasures(done.get("ranks"), terms, np.append(done["windows"], done["sdid"]) if hits else None)
