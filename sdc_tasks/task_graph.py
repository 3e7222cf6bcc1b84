"""A low-level Dask task graph built in one dictionary, for stages where every task of one step feeds every task
of the next (records routed to spatial cells and back).

``dask.delayed`` merges the graphs of a call's arguments at every call, so an all-to-all stage of P partitions
and C cells costs about O((P C)^2) in graph building alone (P = C = 20: 18 s on the driver; 40: minutes, with
the workers idle). Here adding a task costs O(1): tasks go into one dictionary, and the inputs' graphs are
merged once, when the result is asked for.
"""

from __future__ import annotations

import operator
from typing import Any, Callable

from dask._task_spec import List, Task, TaskRef
from dask.base import tokenize
from dask.delayed import Delayed
from dask.highlevelgraph import HighLevelGraph


def _node(arg: Any) -> Any:
    """A task argument with every list holding task references made a graph list (resolved before the call)."""
    if isinstance(arg, list):
        items = [_node(a) for a in arg]
        if any(isinstance(a, (TaskRef, List)) for a in items):
            return List(*items)
        return items
    return arg


class TaskGraph:
    """Tasks keyed ``(<name>-<label>, *index)`` in one layer; :meth:`result` returns a Delayed of one of them."""

    def __init__(self, name: str, *token_parts: Any):
        self.name = f"{name}-{tokenize(*token_parts)}"
        self.tasks: dict = {}
        self.inputs: list[Delayed] = []

    def input(self, value: Delayed) -> TaskRef:
        """A reference to a Delayed computed outside this graph (a partition, a persisted piece)."""
        self.inputs.append(value)
        return TaskRef(value.key)

    def task(self, label: str, index: tuple, func: Callable, *args: Any) -> TaskRef:
        """Add ``func(*args)`` (references in args, also inside lists, are replaced by their values)."""
        key = (f"{self.name}-{label}", *index)
        if key in self.tasks:
            raise ValueError(f"task {key!r} is already in the graph")
        self.tasks[key] = Task(key, func, *(_node(a) for a in args))
        return TaskRef(key)

    def item(self, ref: TaskRef, i: int) -> TaskRef:
        """The ``i``-th element of a task's tuple result (one task, however often it is asked for)."""
        label, *index = ref.key
        key = (f"{label}-item", *index, i)
        if key not in self.tasks:
            self.tasks[key] = Task(key, operator.getitem, ref, i)
        return TaskRef(key)

    def reduce(self, label: str, refs: list[TaskRef], merge: Callable, split_every: int = 8) -> TaskRef:
        """``merge`` folded over ``refs`` as a balanced tree (fan-in ``split_every``)."""
        if not refs:
            raise ValueError("nothing to reduce")
        level, depth = list(refs), 0
        while len(level) > 1:
            level = [self.task(f"{label}-{depth}", (i,), fold, level[i:i + split_every], merge)
                     for i in range(0, len(level), split_every)]
            depth += 1
        return level[0]

    def result(self, ref: TaskRef) -> Delayed:
        """A Delayed of the task ``ref`` over this graph and its inputs' graphs."""
        out = dict(self.tasks)
        out[self.name] = Task(self.name, _identity, ref)
        graph = HighLevelGraph.from_collections(self.name, out, dependencies=self.inputs)
        return Delayed(self.name, graph)


def _identity(value: Any) -> Any:
    """The value itself (the graph's named output)."""
    return value


def fold(chunk: list, merge: Callable) -> Any:
    """``merge`` over a short list, left to right."""
    out = chunk[0]
    for item in chunk[1:]:
        out = merge(out, item)
    return out
