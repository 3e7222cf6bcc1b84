"""A metric family as a small unit, and the loop that evaluates the requested ones.

As dask writes a reduction as chunk, combine and aggregate functions (dask/array/reductions.py), a family is
two functions: ``tasks(ctx)`` builds its per-partition work and the tree reductions that combine it, as Dask
graphs; ``finish(results, ctx)`` turns the computed results into metrics.json keys (the aggregate step, on
the driver). The evaluator computes the graphs of every requested family in one pass, so partitions read
once serve them all, then runs each family's :class:`Deferred` work (computations that must follow one another,
such as linkage one key prefix at a time), then each finish. ``ctx`` is whatever the families of one kind
share: the paired records, the files, their moments.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import dask


@dataclass(frozen=True)
class Deferred:
    """Work a family computes by itself after the shared pass: ``run(ctx)`` returns the computed result."""

    run: Callable[[Any], Any]


@dataclass(frozen=True)
class Family:
    """One metric family: ``tasks(ctx)`` -> {name: Dask graph (a Delayed, or a list of them) or Deferred},
    ``finish(results, ctx)`` -> {metrics.json key: value} from {name: computed result}. ``moment_order``: the
    highest moment of the original file its finish reads (4 for PIL's variances of variances)."""

    name: str
    tasks: Callable[[Any], dict[str, Any]]
    finish: Callable[[dict[str, Any], Any], dict]
    moment_order: int = 2


def family_measures(families: list[Family], ctx) -> dict:
    """The metric keys of ``families``, in their order: every family's graphs computed together in one
    ``dask.compute``, then each Deferred in turn, then each family's finish on its own results."""
    tasks = {f.name: f.tasks(ctx) for f in families}
    shared = [(name, key, task) for name, named in tasks.items() for key, task in named.items()
              if not isinstance(task, Deferred)]
    results: dict[str, dict[str, Any]] = {name: {} for name in tasks}
    for (name, key, _), value in zip(shared, dask.compute(*(task for _, _, task in shared))):
        results[name][key] = value
    for name, named in tasks.items():
        for key, task in named.items():
            if isinstance(task, Deferred):
                results[name][key] = task.run(ctx)
    out: dict = {}
    for f in families:
        out.update(f.finish(results[f.name], ctx) if results[f.name] else {})
    return out
