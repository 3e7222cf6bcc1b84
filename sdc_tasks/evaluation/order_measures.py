"""The measures that read a variable's global order: the rank errors of brMAE and brMSE, the quantile terms of
PIL_Q, the interval-disclosure hits of ID_p and the report's order figures of the variable (quantiles,
histogram), all of one variable from the same two sorts, out of core: each equal to the in-memory kernel on the
whole column (exact integers and the same order statistics) while no task holds more than a few partitions.
Files of at most GATHER_ROWS records gather each variable's columns on one worker instead and run the in-memory
kernels there, with the same results.

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
from pathlib import Path

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd

from sdc_tasks.evaluation.global_order import ID, KEY, SortedColumn, keyed_frame, sorted_column
from sdc_tasks.evaluation.linkage import gathered
from sdc_tasks.metrics.pil import quantile_pil
from sdc_tasks.metrics.rank_metrics import RankErrors, rank_errors, ranked_order, ranks_in
from sdc_tasks.metrics.risk import (
    ID_PERCENTS,
    interval_hits,
    interval_widths,
    last_positions,
    sdid_hits,
    window_hits,
    window_positions,
)
from sdc_tasks.metrics.variable_profile import OrderFigures, order_figures
from sdc_tasks.outputs import spill_area
from sdc_tasks.reserved import MASKED_SUFFIX
from sdc_tasks.scheduling import computed_in_turn, one_graph, one_task_holds, parallel_tasks
from sdc_tasks.stats.moments import tree_merge
from sdc_tasks.stats.order import SortedValues

GATHER_ROWS = 10_000_000
"""Files of at most this many records gather each variable on one worker for the order-based measures instead of
sorting it across the partitions: three times quicker at 1e7 records on two workers than the sorts' rounds of tasks,
and the same numbers (docs/performance.md). Above it no task holds a whole column."""

GATHER_BYTES = 128
"""Bytes per record a gathering task holds at its peak (its columns, their sorted copies, the ranks; about 100
measured at 1e7): a file gathers only when one task holds that (scheduling.one_task_holds)."""

WINDOW_PIECES = 8
"""The most sorted partitions one interval-window task reads (a partition's widths share a task within it)."""

OTHER, RANK = "other", "rank"
"""Carried columns of the sorts: the record's other value (masked in sort A, original in sort B) and, in sort B,
the original value's rank."""


def gathers(records: int) -> bool:
    """Whether a file of ``records`` records is small enough (GATHER_ROWS, GATHER_BYTES) to gather each variable
    on one worker for the order-based measures."""
    return one_task_holds(records, GATHER_ROWS, GATHER_BYTES)


@dataclass(frozen=True)
class OrderMeasures:
    """What one variable contributes to the order-based measures (None where not asked for): its rank errors
    (brMAE, brMSE), its quantile terms (PIL_Q: :func:`~sdc_tasks.metrics.pil.quantile_pil`), its hits
    (ID_1..ID_10, then SDID) and the report's figures of it."""

    rank_errors: RankErrors | None
    quantile_terms: tuple[np.ndarray, int] | None
    hits: np.ndarray | None
    figures: OrderFigures | None = None


def _swapped(part: pd.DataFrame, start: int) -> pd.DataFrame:
    """A partition of sort A as input of sort B: the masked value as KEY, the original value as OTHER and its rank
    (the global position + 1) as RANK."""
    return pd.DataFrame({KEY: part[OTHER].to_numpy(), ID: part[ID].to_numpy(), OTHER: part[KEY].to_numpy(),
                         RANK: start + np.arange(1, len(part) + 1, dtype=np.int64)}, copy=False)


def _within(files: Path | None, name: str) -> Path | None:
    """The directory ``name`` inside ``files`` (None: the sorted data is persisted in memory)."""
    return None if files is None else files / name


def paired_orders(pairs: dd.DataFrame, id_col: str, var: str,
                  files: Path | None = None) -> tuple[SortedColumn, SortedColumn]:
    """Sort A (original values, carrying the masked ones) and sort B (masked values, carrying the original values
    and their ranks) of one variable's paired records (``files``: where their partitions are written instead of
    being persisted, :func:`~sdc_tasks.evaluation.global_order.sorted_column`). Sort A samples its partitions by
    the masked value as it sorts them, so sort B does not read them for its splitters."""
    frame = keyed_frame(pairs, var, id_col, {var + MASKED_SUFFIX: OTHER})
    a = sorted_column(frame, _within(files, "a"), next_key=OTHER)
    parts = [dask.delayed(_swapped)(p, int(a.offsets[k])) for k, p in enumerate(a.parts)]
    b = sorted_column(dd.from_delayed(parts, meta=_swapped(frame._meta, 0), verify_meta=False), _within(files, "b"),
                      samples=a.next_samples)
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


def _part_window_hits(part: pd.DataFrame, start: int, last: int, widths: np.ndarray, n: int, starts: np.ndarray,
                      *pieces: np.ndarray) -> np.ndarray:
    """For each half-width W of ``widths``, how many records of one partition of sort B have their original value
    inside the ID interval: R, the position of the last occurrence of the masked value (``last`` for the
    partition's last value, whose ties may run on), and the values at R - W and R + W - 1
    (sdc_methods_comparison_chapter.txt sec. 3, Interval Disclosure; :func:`~sdc_tasks.metrics.risk.interval_hits`
    on the whole column); ``pieces``: the partitions these windows' ends fall in, from ``starts``."""
    keys, x = part[KEY].to_numpy(), part[OTHER].to_numpy()
    r = start + last_positions(keys, keys)
    r[keys == keys[-1]] = last
    base = np.concatenate([[0], np.cumsum([len(p) for p in pieces])[:-1]]).astype(np.int64)
    return window_hits(np.concatenate(pieces).astype(np.float64, copy=False), base, starts.astype(np.int64), n,
                       np.ascontiguousarray(x, dtype=np.float64), r.astype(np.int64), widths.astype(np.int64))


def _joined(*counts: np.ndarray) -> np.ndarray:
    """Counts of consecutive widths as one integer array."""
    return np.concatenate(counts).astype(np.int64)


def interval_hit_graph(b: SortedColumn, percents: tuple[int, ...] = ID_PERCENTS):
    """Delayed interval-disclosure hits of the variable of sort B, one count per p, summed over its partitions:
    per partition, its widths in as few tasks as keep each within WINDOW_PIECES partitions read (the partitions
    its window ends fall in, passed one by one: Dask finalizes a list of delayed arguments as a collection, which
    costs more than the task), so a task's memory does not grow with the file however wide the windows are."""
    n, keys, last = b.n, b.key_parts(), b.last_occurrences()
    counts = []
    for k, part in enumerate(b.parts):
        start, end = int(b.offsets[k]), int(b.offsets[k + 1])
        groups: list[tuple[list[int], set[int]]] = []
        for w in (int(v) for v in interval_widths(n, percents)):
            lo = window_positions(np.array([start, end - 1, last[k]]), w, n)
            need = {*b.parts_over(lo[0][0], lo[0][1]), *b.parts_over(lo[1][0], lo[1][1]),
                    *b.part_of(np.array([lo[0][2], lo[1][2]])).tolist()}
            if groups and len(groups[-1][1] | need) <= WINDOW_PIECES:
                groups[-1] = (groups[-1][0] + [w], groups[-1][1] | need)
            else:
                groups.append(([w], need))
        tasks = []
        for group_widths, need in groups:
            read = sorted(need)
            tasks.append(dask.delayed(_part_window_hits)(part, start, int(last[k]), np.array(group_widths), n,
                                                         b.offsets[read], *(keys[j] for j in read)))
        counts.append(dask.delayed(_joined)(*tasks))
    return tree_merge(counts, operator.add)


def _part_sdid_hits(part: pd.DataFrame, var: str, sd: float) -> int:
    """SDID hits of one paired partition (:func:`~sdc_tasks.metrics.risk.sdid_hits`)."""
    return sdid_hits(part[var].to_numpy(np.float64), part[var + MASKED_SUFFIX].to_numpy(np.float64), sd)


@dataclass(frozen=True)
class OrderAsked:
    """Which order-based results a variable's measurement returns: rank errors, quantile terms, hits, and the
    report's figures (:class:`~sdc_tasks.metrics.variable_profile.OrderFigures`, from the paired records)."""

    ranks: bool = False
    quantiles: bool = False
    hits: bool = False
    figures: bool = False


def variable_order_measures(pairs: dd.DataFrame, files: tuple[dd.DataFrame, dd.DataFrame] | None, id_col: str,
                            var: str, sd: float, asked: OrderAsked, spill: Path | None = None) -> OrderMeasures:
    """One variable's :class:`OrderMeasures`, out of core: ranks, hits and the figures from the records paired by
    id (``pairs``), the quantile terms from the original and masked files (``files``; None when the pairs hold
    every record of both). The sorted data is held (persisted) only while this variable is measured, or with
    ``spill`` (a directory every worker reaches) written to a scratch directory in it, removed after."""
    with spill_area("order", spill) as sorts:
        return _variable_order_measures(pairs, files, id_col, var, sd, asked, sorts)


def _variable_order_measures(pairs: dd.DataFrame, files: tuple[dd.DataFrame, dd.DataFrame] | None, id_col: str,
                             var: str, sd: float, asked: OrderAsked, sorts: Path | None) -> OrderMeasures:
    """:func:`variable_order_measures` with the sorted partitions written to ``sorts`` (None: persisted)."""
    terms, figures, done = None, None, {}
    if asked.ranks or asked.hits or asked.figures or (asked.quantiles and files is None):
        a, b = paired_orders(pairs, id_col, var, sorts)
        if asked.figures:
            figures = order_figures(a, b)
        if asked.quantiles and files is None:
            terms = figures.quantile_terms if figures is not None else quantile_pil(a, b)
        graphs: dict = {}
        if asked.ranks:
            graphs["ranks"] = rank_error_graph(b)
        if asked.hits:
            graphs["windows"] = interval_hit_graph(b)
            columns = pairs[[var, var + MASKED_SUFFIX]].to_delayed()  # the variable's, not every column of the pairs
            graphs["sdid"] = dask.delayed(sum)([dask.delayed(_part_sdid_hits)(p, var, sd) for p in columns])
        done = dask.compute(graphs)[0]
    if asked.quantiles and files is not None:
        terms = quantile_pil(*(sorted_column(keyed_frame(f, var, id_col), _within(sorts, name))
                               for f, name in zip(files, ("original", "masked"))))
    return OrderMeasures(done.get("ranks"), terms, np.append(done["windows"], done["sdid"]) if asked.hits else None,
                         figures)


def _gathered_measures(pair_parts: list[pd.DataFrame], file_parts: tuple[list, list] | None, id_col: str,
                       var: str, sd: float, asked: OrderAsked) -> OrderMeasures:
    """One variable's :class:`OrderMeasures` with its paired columns gathered on one worker (``file_parts``: the
    original and masked files' partitions with the variable, None when the pairs hold every record of both): the
    whole-column kernels, each column gathered and sorted once for all the results asked for: a column put in
    rank order (by value, ties by id) is read in that order for its sorted values, as the distributed sort gives
    them, instead of being sorted again (``np.sort``: 0.85-0.9 s for 1e7 values, the gather 0.12-0.3 s)."""
    ids = gathered(pair_parts, id_col)
    x, xm = gathered(pair_parts, var, np.float64), gathered(pair_parts, var + MASKED_SUFFIX, np.float64)
    x_order = ranked_order(x, ids) if asked.ranks else None
    masked_order = ranked_order(xm, ids) if asked.ranks or asked.hits else None  # serves the ranks and the hits
    sorted_x = SortedValues(np.sort(x) if x_order is None else x[x_order])
    sorted_xm = SortedValues(np.sort(xm) if masked_order is None else xm[masked_order])
    errors = rank_errors(ranks_in(x_order)[:, None], ranks_in(masked_order)[:, None]) if asked.ranks else None
    figures = order_figures(sorted_x, sorted_xm) if asked.figures else None
    original, masked = sorted_x, sorted_xm  # the files' columns, sorted; each file's read once if it is needed
    if file_parts is not None:
        if asked.quantiles:
            original = SortedValues(np.sort(gathered(file_parts[0], var, np.float64)))
        if asked.quantiles or asked.hits:
            masked = SortedValues(np.sort(gathered(file_parts[1], var, np.float64)))
    terms = None
    if asked.quantiles:
        terms = figures.quantile_terms if figures is not None and file_parts is None else quantile_pil(original, masked)
    hits = None
    if asked.hits:
        hits = np.append(interval_hits(masked.values, x, xm, order=masked_order), sdid_hits(x, xm, sd))
    return OrderMeasures(errors, terms, hits, figures)


def order_measures(pairs: dd.DataFrame, files: tuple[dd.DataFrame, dd.DataFrame] | None, id_col: str,
                   variables: list[str], sd: dict[str, float], records: int, asked: OrderAsked,
                   spill: Path | None = None) -> dict:
    """{variable: :class:`OrderMeasures`} of the paired records (``files``: the original and masked files, None
    when the pairs hold every record of both; ``sd``: each variable's original sd, for SDID): for files of at most
    GATHER_ROWS ``records``, each variable's paired columns gathered on one worker (one task per variable, one more
    at a time than the scheduler runs tasks, the next submitted as one ends: ``scheduling.computed_in_turn``, so that
    a worker holds the columns of the variable it measures and at most those of the next, which it gathers meanwhile;
    all at once where they are few, ``scheduling.one_graph``), else each sorted across the partitions, one variable
    at a time (``spill``: see :func:`variable_order_measures`)."""
    if gathers(records):
        tasks = [dask.delayed(_gathered_measures)(
            pairs[[id_col, v, v + MASKED_SUFFIX]].to_delayed(),
            None if files is None else tuple(f[[v]].to_delayed() for f in files), id_col, v, sd[v], asked)
            for v in variables]
        at_once = len(tasks) if one_graph(records * len(variables)) else parallel_tasks() + 1
        return dict(zip(variables, computed_in_turn(tasks, at_once)))
    return {v: variable_order_measures(pairs, files, id_col, v, sd[v], asked, spill) for v in variables}
