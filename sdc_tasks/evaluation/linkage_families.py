"""The record-linkage families: ``dld`` (DLD_i, DLD2_i, DLD), ``pld`` (PLD and its fit), ``dld_published``
(DLDpub_i, DLDpub) and ``pld_published`` (PLDpub_i, PLDpub), each a
:class:`~sdc_tasks.evaluation.family.Family` over the paired records of a
:class:`~sdc_tasks.evaluation.continuous.ContinuousContext`.

They need records paired by id (the ground truth of who is whom) and key variables; otherwise they compute
nothing. Their graphs (linkage.py) are computed after the shared pass, one key prefix after another, so that only
one prefix's cells are in memory at a time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import dask
import numpy as np

from sdc_tasks.evaluation.continuous import ContinuousContext
from sdc_tasks.evaluation.family import Deferred, Family
from sdc_tasks.evaluation.linkage import (
    linkage_graph,
    probabilistic_linkage_graph,
    published_linkage_graph,
    published_probabilistic_linkage_graph,
)
from sdc_tasks.outputs import spill_area
from sdc_tasks.scheduling import one_graph


def _computed(ctx: ContinuousContext, graph: Callable[[Path | None], Any]) -> Any:
    """The value of ``graph(files)`` computed with its own directory for its tasks' results (task_graph.TaskGraph):
    a new one in ``ctx.spill``, removed after, when the file is larger than the workers keep in memory; else None
    (in memory)."""
    with spill_area("linkage", ctx.spill) as files:
        return dask.compute(graph(files))[0]


def _per_prefix(ctx: ContinuousContext, key_vars: list[str], graph) -> np.ndarray:
    """Summed (linked, linked to 2nd nearest) counts for the first i key variables, i = 1..m, shape (m, 2), from
    ``graph(pair_parts, sizes, i, files)``: one blocked exact search per prefix, computed one after the other so
    only one prefix's cells are in memory (or in ``files``, :func:`_computed`) at a time, or all in one graph when
    the file is small and kept in memory (``scheduling.one_graph``)."""
    pair_parts = ctx.pairs.to_delayed()
    sizes = list(dask.compute(*[dask.delayed(len)(p) for p in pair_parts]))
    if ctx.spill is None and one_graph(ctx.n * len(key_vars)):
        return np.array(dask.compute(*[graph(pair_parts, sizes, i + 1, None) for i in range(len(key_vars))]))
    return np.array([_computed(ctx, lambda files, i=i: graph(pair_parts, sizes, i + 1, files))
                     for i in range(len(key_vars))])


def _linkable(ctx: ContinuousContext) -> bool:
    """Whether linkage has a ground truth (records paired by id) and keys to link on."""
    return ctx.by_id and bool(ctx.key_vars)


def _linkage_tasks(name: str, run: Callable[[ContinuousContext], Any]) -> Callable[[ContinuousContext], dict]:
    """The tasks of a linkage family: ``run`` deferred under ``name`` when linkage applies (:func:`_linkable`)."""
    return lambda ctx: {name: Deferred(run)} if _linkable(ctx) else {}


def _percent_by_prefix(stem: str, percents: np.ndarray) -> dict[str, float]:
    """``stem_i`` for the first i key variables, i = 1..m, and ``stem``, their mean (chapter 6 sec. 4 averages
    the linkage measures over the number of key variables the intruder knows)."""
    out = {f"{stem}_{i + 1}": float(v) for i, v in enumerate(percents)}
    out[stem] = float(percents.mean())
    return out


# ---------------------------------------------------------------- dld


def _distance_credits(ctx: ContinuousContext) -> np.ndarray:
    """Summed (DLD, DLD2) credits for the first i key variables, i = 1..m, shape (m, 2) (docs/metrics.md DLD_i)."""
    center, scale = ctx.key_scaling
    return _per_prefix(ctx, ctx.key_vars, lambda parts, sizes, i, files: linkage_graph(
        ctx.original_key_parts, parts, sizes, ctx.id_col, ctx.key_vars[:i], center[:i], scale[:i], ctx.n,
        ctx.cell_rows, files=files))


def _dld_finish(results: dict, ctx: ContinuousContext) -> dict:
    """DLD_i and DLD2_i in percent of the masked records, DLD the mean of DLD_i."""
    dld = 100.0 * results["credits"] / ctx.n_masked
    out = _percent_by_prefix("DLD", dld[:, 0])
    out.update({f"DLD2_{i + 1}": float(v) for i, v in enumerate(dld[:, 1])})
    return out


DLD = Family("dld", _linkage_tasks("credits", _distance_credits), _dld_finish)


# ---------------------------------------------------------------- pld


def _probabilistic_links(ctx: ContinuousContext) -> tuple:
    """(Fellegi-Sunter model, [correctly paired records, records with their own original among the candidates])
    of probabilistic linkage on all key variables."""
    center, scale = ctx.key_scaling
    return _computed(ctx, lambda files: probabilistic_linkage_graph(
        ctx.original_key_parts, ctx.pair_parts, ctx.id_col, ctx.key_vars, center, scale, ctx.n, ctx.pld_cell_rows,
        files=files))


def _pld_finish(results: dict, ctx: ContinuousContext) -> dict:
    """PLD and PLD_candidate_recall in percent of the masked records, the EM fit's match prior and iterations."""
    model, (correct, reachable) = results["links"]
    return {"PLD": 100.0 * float(correct) / ctx.n_masked,
            "PLD_candidate_recall": 100.0 * float(reachable) / ctx.n_masked,
            "PLD_match_prior": float(model.p), "PLD_em_iterations": float(model.iterations)}


PLD = Family("pld", _linkage_tasks("links", _probabilistic_links), _pld_finish)


# ---------------------------------------------------------------- dld_published


def file_key_order(columns: list[str], key_vars: list[str]) -> list[int]:
    """Positions in ``key_vars`` of the key variables in the file's column order (``columns``): the order in which
    the published Census tables took their first i keys (docs/reproduction.md, DLDpub; docs/postmask.md, the
    paper's evaluation setup), whatever order the keys were given in."""
    return sorted(range(len(key_vars)), key=lambda k: columns.index(key_vars[k]))


def published_key_order(ctx: ContinuousContext) -> list[int]:
    """Positions in ``ctx.key_vars`` of the key variables in the original file's column order (DLDpub, PLDpub)."""
    return file_key_order(list(ctx.original.columns), ctx.key_vars)


def _published_distance_counts(ctx: ContinuousContext) -> np.ndarray:
    """Linked counts of the published Table 1 setup for the first i key variables in the file's column order,
    i = 1..m, shape (m, 2) (linkage.published_linkage_graph)."""
    keys = [ctx.key_vars[k] for k in published_key_order(ctx)]
    return _per_prefix(ctx, keys, lambda parts, sizes, i, files: published_linkage_graph(
        parts, sizes, ctx.id_col, keys[:i], ctx.cell_rows, files=files))


def _dld_published_finish(results: dict, ctx: ContinuousContext) -> dict:
    """DLDpub_i in percent of the masked records and DLDpub their mean (docs/reproduction.md)."""
    return _percent_by_prefix("DLDpub", 100.0 * results["counts"][:, 0] / ctx.n_masked)


DLD_PUBLISHED = Family("dld_published", _linkage_tasks("counts", _published_distance_counts), _dld_published_finish)


# ---------------------------------------------------------------- pld_published


def _published_probabilistic_credits(ctx: ContinuousContext) -> np.ndarray:
    """Summed credits of probabilistic linkage as the published Table 1 was computed, for the first i key
    variables in the file's column order, i = 1..m, shape (m,) (linkage.published_probabilistic_linkage_graph)."""
    order = published_key_order(ctx)
    keys = [ctx.key_vars[k] for k in order]
    center, scale = (a[order] for a in ctx.key_scaling)
    return _per_prefix(ctx, keys, lambda parts, sizes, i, files: published_probabilistic_linkage_graph(
        ctx.original_key_parts, parts, ctx.id_col, keys[:i], center[:i], scale[:i], ctx.n, ctx.pld_cell_rows,
        files=files))


def _pld_published_finish(results: dict, ctx: ContinuousContext) -> dict:
    """PLDpub_i in percent of the masked records and PLDpub their mean (docs/reproduction.md)."""
    return _percent_by_prefix("PLDpub", 100.0 * results["credits"] / ctx.n_masked)


PLD_PUBLISHED = Family("pld_published", _linkage_tasks("credits", _published_probabilistic_credits),
                       _pld_published_finish)
