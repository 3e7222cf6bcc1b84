"""The continuous families over paired records: ``il`` (IL1..IL5, IL, IL1s, the survey's matrix measures, brMAE,
brMSE), ``pil`` (PIL_*, PIL) and ``id`` (ID_p, ID, SDID), each a :class:`~sdc_tasks.evaluation.family.Family`,
and the context every continuous family reads (the linkage families are in linkage_families.py).

Cell errors are per-partition partial results combined by tree reductions. The measures that read a variable's
exact order (PIL_Q quantiles, brMAE/brMSE ranks, ID windows) sort it across the partitions, one variable at a
time, so no task holds more than a few partitions whatever the number of records (order_measures.py). Files of at
most GATHER_ROWS records, where one task is quicker than the sorts' rounds of tasks, gather each variable's
columns on one worker instead, with the same results.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd

from sdc_tasks.evaluation.family import Deferred, Family
from sdc_tasks.evaluation.order_measures import OrderAsked, OrderMeasures, order_measures
from sdc_tasks.evaluation.profile import PROFILES_KEY, variable_cells, variable_profiles
from sdc_tasks.metrics.information_loss import CellSums, cell_sums, information_loss
from sdc_tasks.metrics.matrix_measures import CellErrors, cell_errors, effective_sd, matrix_measures
from sdc_tasks.metrics.pil import pil_measures
from sdc_tasks.metrics.rank_metrics import RankErrors, bounded_rank_metrics
from sdc_tasks.metrics.risk import ID_PERCENTS
from sdc_tasks.reserved import MASKED_SUFFIX
from sdc_tasks.stats.moments import Moments, tree_merge


def standard_scale(sd: np.ndarray) -> np.ndarray:
    """Divisors that standardize columns: the original's sd, 1 for a constant column (left as it is)."""
    return np.where(sd > 0, sd, 1.0)


@dataclass(frozen=True)
class ContinuousContext:
    """What the continuous families read: both files, their records paired (``pairs``, persisted), the moment
    sketches of the original and the masked file over ``columns`` (the variables, then the other key variables),
    whether the records were paired by id (``by_id``: disclosure risk has a ground truth only then), the
    families asked for (``families``: which order-based results to compute) and whether the ids are the masked
    records' nearest originals' (``nearest_ids``, pairing "paper": an original may then be paired several times
    and another not at all, so the pairs never stand for the original file) and, for a file larger than the
    workers keep in memory, a directory for intermediate results (``spill``: the linkage graphs keep their tasks'
    results there and the order-based measures their sorted columns; None: in the workers' memory)."""

    original: dd.DataFrame
    masked: dd.DataFrame
    pairs: dd.DataFrame
    id_col: str
    variables: list[str]
    key_vars: list[str]
    columns: list[str]
    moments: tuple[Moments, Moments]
    by_id: bool
    cell_rows: int
    pld_cell_rows: int
    families: tuple[str, ...]
    nearest_ids: bool = False
    spill: Path | None = None

    @property
    def n(self) -> int:
        """Records of the original file."""
        return self.moments[0].n

    @property
    def n_masked(self) -> int:
        """Records of the masked file."""
        return self.moments[1].n

    @property
    def whole(self) -> bool:
        """Whether every original record is paired once by id: the pairs then stand for both files (no second
        read)."""
        return self.by_id and self.n == self.n_masked and not self.nearest_ids

    @cached_property
    def pair_parts(self) -> list:
        """The delayed partitions of the paired records."""
        return self.pairs.to_delayed()

    @cached_property
    def variable_moments(self) -> tuple[Moments, Moments]:
        """The original's and the masked file's sketches of the variables only."""
        index = [self.columns.index(v) for v in self.variables]
        return self.moments[0].subset(index), self.moments[1].subset(index)

    @cached_property
    def original_sd(self) -> dict[str, float]:
        """Population sd of each column of the original file."""
        return dict(zip(self.columns, self.moments[0].sd))

    @cached_property
    def key_scaling(self) -> tuple[np.ndarray, np.ndarray]:
        """(mean, standard_scale) of the original's key variables: the standardization of distance linkage."""
        index = [self.columns.index(k) for k in self.key_vars]
        return self.moments[0].mean[index], standard_scale(self.moments[0].sd)[index]

    @cached_property
    def original_key_parts(self) -> list:
        """Delayed partitions of the original file holding the id and the key variables (the pairs when they
        stand for the whole original file)."""
        return self.pair_parts if self.whole else self.original[[self.id_col, *self.key_vars]].to_delayed()

    @property
    def profiled(self) -> bool:
        """Whether the report's per-variable profile is asked for and can be read from this evaluation: records
        paired by id, every one once (the profile pairs by id)."""
        return PROFILE.name in self.families and self.whole

    @cached_property
    def order_measures(self) -> dict[str, OrderMeasures]:
        """Each variable's order-based results for the families asked for and the profile, from one gathering or
        one pair of sorts of the variable (order_measures.py)."""
        asked = OrderAsked(ranks=self.by_id and ("il" in self.families or self.profiled),
                           quantiles="pil" in self.families,
                           hits=self.by_id and ("id" in self.families or self.profiled), figures=self.profiled)
        return order_measures(self.pairs, None if self.whole else (self.original, self.masked), self.id_col,
                              self.variables, self.original_sd, max(self.n, self.n_masked), asked, self.spill)


# ---------------------------------------------------------------- il


def _partition_cells(part: pd.DataFrame, variables: list[str], sd: np.ndarray) -> tuple[CellSums, CellErrors]:
    """IL1 sums and the matrix-measure cell errors of one paired partition."""
    x = part[variables].to_numpy(np.float64)
    xm = part[[v + MASKED_SUFFIX for v in variables]].to_numpy(np.float64)
    return cell_sums(x, xm), cell_errors(x, xm, sd)


def _add_cells(a: tuple[CellSums, CellErrors], b: tuple[CellSums, CellErrors]) -> tuple[CellSums, CellErrors]:
    """The cell sums and errors of two disjoint sets of paired records."""
    return a[0] + b[0], a[1] + b[1]


def _concat_errors(errors: list[RankErrors]) -> RankErrors:
    """Rank errors of disjoint sets of attributes side by side."""
    return RankErrors(*(sum((getattr(e, f) for e in errors), ()) for f in ("abs_sum", "sq_sum", "count")))


def _il_tasks(ctx: ContinuousContext) -> dict:
    """Cell sums and errors of every paired partition, tree-reduced; with pairing by id, each variable's rank
    errors."""
    sd = effective_sd(ctx.variable_moments[0])
    tasks = {"cells": tree_merge([dask.delayed(_partition_cells)(p, ctx.variables, sd) for p in ctx.pair_parts],
                                 _add_cells)}
    if ctx.by_id:  # the paired records' values each ranked 1..n' among themselves, ties by id
        tasks["ranks"] = Deferred(lambda c: [c.order_measures[v].rank_errors for v in c.variables])
    return tasks


def _il_finish(results: dict, ctx: ContinuousContext) -> dict:
    """IL1..IL5, IL, the matrix measures, IL1s and (pairing by id) brMAE, brMSE."""
    mo, mm = ctx.variable_moments
    sums, errors = results["cells"]
    out = {**information_loss(sums, mo, mm), **matrix_measures(errors, mo, mm)}
    if "ranks" in results:
        out.update(bounded_rank_metrics(_concat_errors(list(results["ranks"])), ctx.n_masked))
    return out


IL = Family("il", _il_tasks, _il_finish)


# ---------------------------------------------------------------- pil


def _pil_tasks(ctx: ContinuousContext) -> dict:
    """Each variable's pil(Q_q) terms from the exact quantiles of its sorted original and masked columns
    (pil_measures.txt sec. 4.3-5, :func:`~sdc_tasks.metrics.pil.quantile_pil`)."""
    return {"quantiles": Deferred(lambda c: [c.order_measures[v].quantile_terms for v in c.variables])}


def _pil_finish(results: dict, ctx: ContinuousContext) -> dict:
    """PIL_Q, PIL_m1, PIL_m2, PIL_m11, PIL_r and PIL."""
    mo, mm = ctx.variable_moments
    return pil_measures(mo, mm, list(results["quantiles"]))


PIL = Family("pil", _pil_tasks, _pil_finish, moment_order=4)


# ---------------------------------------------------------------- id


def _id_tasks(ctx: ContinuousContext) -> dict:
    """With pairing by id, the interval-disclosure hits (ID_1..ID_10 then SDID) summed over the variables, each
    variable's read in its sorted masked column (sdc_methods_comparison_chapter.txt sec. 3)."""
    if not ctx.by_id:
        return {}
    return {"hits": Deferred(lambda c: sum(c.order_measures[v].hits for v in c.variables))}


def _id_finish(results: dict, ctx: ContinuousContext) -> dict:
    """ID_p in percent of the paired values (sdc_methods_comparison_chapter.txt sec. 3), ID = their mean
    (sec. 4), SDID."""
    pct = 100.0 * results["hits"] / (ctx.n_masked * len(ctx.variables))
    out = {f"ID_{p}": float(pct[j]) for j, p in enumerate(ID_PERCENTS)}
    out["ID"] = float(pct[:-1].mean())
    out["SDID"] = float(pct[-1])
    return out


ID = Family("id", _id_tasks, _id_finish)


# ---------------------------------------------------------------- profile


def _profile_tasks(ctx: ContinuousContext) -> dict:
    """When the records pair one to one by id, each variable's IL1 sums and its order-based results with the
    report's figures (the same gathering or sorts as il, pil and id)."""
    if not ctx.profiled:
        return {}
    return {"cells": variable_cells(ctx.pair_parts, ctx.variables), "order": Deferred(lambda c: c.order_measures)}


def _profile_finish(results: dict, ctx: ContinuousContext) -> dict:
    """{PROFILES_KEY: each variable's report figures (profile.py)}."""
    return {PROFILES_KEY: variable_profiles(ctx.variables, ctx.variable_moments, results["cells"], results["order"])}


PROFILE = Family("profile", _profile_tasks, _profile_finish, moment_order=4)
"""Not a metric family: the release report's per-variable figures, asked for by the release's evaluation."""
