"""A low-level Dask task graph built in one dictionary, for stages where every task of one step feeds every task
of the next (records routed to spatial cells and back).

``dask.delayed`` merges the graphs of a call's arguments at every call, so an all-to-all stage of P partitions
and C cells costs about O((P C)^2) in graph building alone (P = C = 20: 18 s on the driver; 40: minutes, with
the workers idle). Here adding a task costs O(1): tasks go into one dictionary, and the inputs' graphs are
merged once, when the result is asked for.

A graph given a directory (``files``) keeps its tasks' results there instead of in the workers' memory: each task
writes its result to a file (each element of a tuple result separately) and returns only where it lies
(:class:`Stored`), and each task loads what it reads when it runs. A routing step's pieces for every cell then
wait on disk, not in memory, until the cell's task reads them, so a worker holds the pieces of the tasks it runs
and no more, however large the file (Dask releases a result only when every task reading it is done, and runs
a ready task as soon as a thread is free: the pieces of all cells would otherwise be held at once).
:func:`kept_partitions` keeps the computed partitions of a Dask DataFrame the same way, in memory or in files.

Each task also keeps where its result lies, in a small file beside it: a task Dask runs again, because the worker
holding that was lost, returns it without loading its arguments. So the graph may remove a result's file once
every task reading it has run (:meth:`TaskGraph.remove`): no task that could still need it is left to run.

A result's arrays are written beside its pickle (protocol 5's out-of-band buffers) and loaded by mapping the file
into memory: nothing is copied or read before a task touches it, and a task that reads a few values of a partition
reads a few pages.
"""

from __future__ import annotations

import mmap
import operator
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import dask
from dask._task_spec import GraphNode, List, Task, TaskRef
from dask.base import tokenize
from dask.delayed import Delayed
from dask.highlevelgraph import HighLevelGraph

from sdc_tasks.outputs import pickled_whole, replaced_whole


def _node(arg: Any) -> Any:
    """A task argument with every list holding task references or inline tasks made a graph list (resolved before
    the call)."""
    if isinstance(arg, list):
        items = [_node(a) for a in arg]
        if any(isinstance(a, (TaskRef, GraphNode)) for a in items):
            return List(*items)
        return items
    return arg


ALIGN = 64
"""Byte alignment of each array's data in a result's file (numpy and numba read aligned arrays quicker)."""


@dataclass(frozen=True)
class Stored:
    """A task result kept in a file: its pickle, bytes ``start`` .. ``end`` of ``path``, and the data of the arrays it
    holds (protocol 5's out-of-band buffers), each at (offset, length) of ``buffers``."""

    path: str
    start: int
    end: int
    buffers: tuple[tuple[int, int], ...] = ()

    def load(self) -> Any:
        """The result, its arrays mapped from the file copy-on-write: pages are read as they are touched, and a task
        that writes to an array writes to its own copy of the page, never to the file."""
        with open(self.path, "rb") as f:
            mapped = memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY))
        return pickle.loads(mapped[self.start:self.end], buffers=[mapped[a:a + n] for a, n in self.buffers])


@dataclass(frozen=True)
class StoredTuple:
    """A tuple result kept in a file, each element its own :class:`Stored` piece (read alone by :meth:`item`)."""

    pieces: tuple[Stored, ...]


def _loaded(arg: Any) -> Any:
    """A task argument with every stored result in it (also inside lists and tuples) loaded."""
    if isinstance(arg, Stored):
        return arg.load()
    if isinstance(arg, StoredTuple):
        return tuple(p.load() for p in arg.pieces)
    if isinstance(arg, (list, tuple)):
        return type(arg)(_loaded(a) for a in arg)
    return arg


def _where_path(path: str) -> Path:
    """Where a task that keeps its result in the file ``path`` keeps where that result lies."""
    return Path(f"{path}.where")


def _stored_call(func: Callable, path: str, *args: Any) -> Stored | StoredTuple:
    """``func`` on the loaded ``args``, its result written to the file ``path``; returns where it lies, and keeps that
    beside it. A task run again after its worker died returns what it kept, loading none of its ``args``: results
    the graph has removed (:meth:`TaskGraph.remove`) are then never read, as every task reading them has run."""
    where = _where_path(path)
    if where.exists():
        return pickle.loads(where.read_bytes())
    result = stored(func(*_loaded(args)), path)
    pickled_whole(where, result)
    return result


def _removed(results: list[Stored | StoredTuple], *after: Any) -> None:
    """Remove the files of ``results`` (``after``: the results of the tasks that read them, all done)."""
    for result in results:
        Path(result.pieces[0].path if isinstance(result, StoredTuple) else result.path).unlink(missing_ok=True)


def _written_piece(f: Any, result: Any, path: str) -> Stored:
    """Write ``result``'s pickle to the open file ``f``, then the data of its arrays, each aligned to ALIGN bytes;
    where it lies in the file ``path``."""
    buffers: list[pickle.PickleBuffer] = []
    start = f.tell()
    f.write(pickle.dumps(result, protocol=5, buffer_callback=buffers.append))
    end, spans = f.tell(), []
    for buffer in buffers:
        data = buffer.raw()
        f.write(bytes(-f.tell() % ALIGN))
        spans.append((f.tell(), data.nbytes))
        f.write(data)
    return Stored(path, start, end, tuple(spans))


def stored(result: Any, path: str) -> Stored | StoredTuple:
    """Where ``result`` lies once written to the file ``path`` (atomically: a retried task replaces it whole), each
    element of a tuple on its own."""
    with replaced_whole(path) as partial, open(partial, "wb") as f:
        pieces = tuple(_written_piece(f, r, path) for r in (result if isinstance(result, tuple) else (result,)))
    return StoredTuple(pieces) if isinstance(result, tuple) else pieces[0]


def kept_partitions(frame: Any, files: Path | None) -> tuple[list[Delayed], tuple]:
    """The partitions of the Dask DataFrame ``frame`` computed once, as delayed pieces for the graphs that read
    them, and what to keep alive while those graphs run: persisted in the workers' memory, or, with ``files`` (a
    directory every worker reaches, kept while the pieces are read), each partition written to its own file there
    as it is computed and loaded by each task that reads it. Through files nothing stays in memory, and a lost
    worker's share is read again instead of recomputed from collections no longer held."""
    if files is None:
        held = frame.persist()
        return list(held.to_delayed()), (held,)
    Path(files).mkdir(parents=True, exist_ok=True)
    where = dask.compute(*[dask.delayed(stored)(part, str(Path(files) / f"part-{i}"))
                           for i, part in enumerate(frame.to_delayed())])
    return [dask.delayed(Stored.load, pure=True)(w) for w in where], ()


def _item(result: StoredTuple, i: int) -> Stored:
    """Where the ``i``-th element of a stored tuple result lies."""
    return result.pieces[i]


class TaskGraph:
    """Tasks keyed ``(<name>-<label>, *index)`` in one layer; :meth:`result` returns a Delayed of one of them. With
    ``files`` (a directory every worker reaches, kept until the result is computed), the tasks' results are kept
    there (module docstring)."""

    def __init__(self, name: str, *token_parts: Any, files: Path | None = None):
        self.name = f"{name}-{tokenize(*token_parts, None if files is None else str(files))}"
        self.tasks: dict = {}
        self.inputs: list[Delayed] = []
        self.removals: list[TaskRef] = []
        self.files = files

    def input(self, value: Delayed) -> TaskRef:
        """A reference to a Delayed computed outside this graph (a partition, a persisted piece)."""
        self.inputs.append(value)
        return TaskRef(value.key)

    def task(self, label: str, index: tuple, func: Callable, *args: Any) -> TaskRef:
        """Add ``func(*args)`` (references in args, also inside lists, are replaced by their values)."""
        key = (f"{self.name}-{label}", *index)
        if key in self.tasks:
            raise ValueError(f"task {key!r} is already in the graph")
        nodes = [_node(a) for a in args]
        if self.files is None:
            self.tasks[key] = Task(key, func, *nodes)
        else:
            path = self.files / "-".join([label, *(str(i) for i in index)])
            self.tasks[key] = Task(key, _stored_call, func, str(path), *nodes)
        return TaskRef(key)

    def item(self, ref: TaskRef, i: int) -> TaskRef | Task:
        """The ``i``-th element of a task's tuple result. In memory, a task of its own (one, however often it is
        asked for), run where the tuple is, so that only the element moves to the tasks reading it. With ``files``,
        picked inside each task that reads it (an inline task): what moves is the tuple of where its elements lie,
        a few bytes each, so an all-to-all step of P producers and C consumers adds no P x C tasks to the graph
        (distance linkage at 3e7 records had about 126,000 of them, each a round of the scheduler)."""
        if self.files is not None:
            return Task(None, _item, ref, i)
        label, *index = ref.key
        key = (f"{label}-item", *index, i)
        if key not in self.tasks:
            self.tasks[key] = Task(key, operator.getitem, ref, i)
        return TaskRef(key)

    def remove(self, label: str, refs: list[TaskRef | Task], after: list[TaskRef]) -> TaskRef | None:
        """With ``files``, remove the files of the results ``refs`` (or of the tasks whose items they are) once the
        tasks ``after`` have run, every task reading them among those or before them: the graph's disk then holds
        what its tasks still read, not all it has written (distance linkage at 4e6 records held all it wrote, 1,516 MB,
        at its peak; 1,247 MB with the routed originals removed once the cells are built). The graph's result waits
        for the removals. Returns the removal's reference, for tasks that must wait for it (:meth:`after`); in
        memory, where Dask releases a result once its readers are done, None."""
        if self.files is None:
            return None
        key = (f"{self.name}-{label}",)
        sources = [r if isinstance(r, TaskRef) else TaskRef(next(iter(r.dependencies))) for r in refs]
        self.tasks[key] = Task(key, _removed, List(*dict.fromkeys(sources)), *after)
        self.removals.append(TaskRef(key))
        return self.removals[-1]

    def after(self, label: str, ref: TaskRef, removal: TaskRef | None) -> TaskRef:
        """``ref``'s result for tasks that are to start only once ``removal`` is done (the same ``ref`` without one):
        a step whose files would otherwise be written beside those that step removes."""
        return ref if removal is None else self.task(label, (), _first, ref, removal)

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
        out[self.name] = Task(self.name, _identity if self.files is None else _loaded_after, ref, *self.removals)
        graph = HighLevelGraph.from_collections(self.name, out, dependencies=self.inputs)
        return Delayed(self.name, graph)


def _identity(value: Any) -> Any:
    """The value itself (the graph's named output)."""
    return value


def _first(value: Any, *done: Any) -> Any:
    """``value``, once the tasks giving ``done`` have run."""
    return value


def _loaded_after(value: Any, *removals: None) -> Any:
    """A stored value loaded (the graph's named output), once the graph's removals are done."""
    return _loaded(value)


def fold(chunk: list, merge: Callable) -> Any:
    """``merge`` over a short list, left to right."""
    out = chunk[0]
    for item in chunk[1:]:
        out = merge(out, item)
    return out
