"""Progress of a run's Dask work, stage by stage: tasks done of tasks submitted, elapsed and remaining time.

The counts come from Dask itself: a scheduler plugin (``sdc_tasks.task_counter.TaskCounter``, registered by the
run's client) counts the tasks that client submits and those that finish, estimates the time left from the
scheduler's average duration of each kind of task still to run, and publishes them on a scheduler event topic
that the client subscribes to (no polling of the scheduler). A run names its stages (:func:`stage`); the
reporters it tracks with (:func:`tracking`) are shown a :class:`StageProgress` every second while a stage runs
and once when it ends: :class:`TerminalProgress` redraws one line in place on a terminal and writes plain lines
every few seconds elsewhere (a log, a pipe); the Prefect flows add a progress artifact per stage.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import logging
import os
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterator, Mapping, Protocol, TextIO

import dask
from dask.callbacks import Callback
from dask.utils import key_split

if TYPE_CHECKING:
    from distributed import Client

TICK_SECONDS = 1.0  # reporters see the progress this often while a stage runs
LOG = logging.getLogger("sdc_tasks.progress")
LOG.addHandler(logging.NullHandler())  # a library logs only where its caller configured logging


@dataclass(frozen=True)
class StageProgress:
    """One stage's progress: its Dask tasks (or its own parts, ``unit``) done of those submitted so far, and its
    elapsed seconds; ``finished`` once the stage has ended, ``failed`` too when it ended by an exception (an error,
    an interruption); ``left``: the estimate of the seconds its unfinished tasks take (``seconds_left``), when
    there is one."""

    stage: str
    done: int
    total: int
    elapsed: float
    finished: bool = False
    unit: str = "tasks"
    failed: bool = False
    left: float | None = None

    def remaining(self) -> float | None:
        """Seconds left: for Dask tasks the estimate from each kind's average duration (``left``: a stage's kinds
        differ in length, many quick reads and a few long kernels), None while it has none; for a stage's own
        parts the rate so far (elapsed x parts left / parts done), None before the first part is done. None too
        while every task or part counted is done but the stage has not ended (it has more to submit)."""
        if self.finished and not self.failed:
            return 0.0
        if self.total and self.done >= self.total:
            return None
        if self.unit == "tasks":
            return self.left
        return self.elapsed * (self.total - self.done) / self.done if self.done else None

    def fraction(self) -> float:
        """Tasks done / tasks submitted (1 once the stage finished, 0 before any task was submitted)."""
        return 1.0 if self.finished and not self.failed else self.done / self.total if self.total else 0.0

    def line(self) -> str:
        """'evaluate: 412/800 tasks, 12 s elapsed, about 11 s remaining'."""
        left = self.remaining()
        rest = ("stopped" if self.failed else "done" if self.finished else "remaining unknown" if left is None
                else f"about {max(left, 1):.0f} s remaining")
        return f"{self.stage}: {self.done}/{self.total} {self.unit}, {self.elapsed:.0f} s elapsed, {rest}"


def seconds_left(waiting: Mapping[str, int], average: Callable[[str], float | None], threads: int) -> float | None:
    """Seconds until the ``waiting`` tasks (a count per kind of task, Dask's key prefix) are done: each at the
    average duration of its kind, spread over ``threads``, and at least the longest of them; 0 when none waits.
    None while a kind waiting has no average yet: its first task (a kernel compiling on its first call, a block of
    another size) may take any time."""
    work, longest = 0.0, 0.0
    for kind, n in waiting.items():
        if n:
            if (seconds := average(kind)) is None:
                return None
            work, longest = work + n * seconds, max(longest, seconds)
    return max(work / max(threads, 1), longest)


class Reporter(Protocol):
    """What shows progress: called every TICK_SECONDS while a stage runs and once, finished (and failed if it
    ended by an exception), when it ends."""

    def __call__(self, progress: StageProgress) -> None: ...


class TerminalProgress:
    """Progress on a stream (stderr by default): on a terminal one line redrawn in place and cleared when the
    stage ends (the run's own stage line, or its error, follows); elsewhere a plain line every ``every`` seconds
    and, for a stage that showed one and completed, a last one when it ends, written to ``log`` (INFO) when
    given, else the stream."""

    def __init__(self, stream: TextIO | None = None, every: float = 10.0,
                 log: logging.Logger | logging.LoggerAdapter | None = None):
        self.stream = stream or sys.stderr
        self.every = every
        self.log = log
        self.shown: dict[str, float] = {}

    def __call__(self, progress: StageProgress) -> None:
        """Show ``progress`` as the stream allows."""
        if self.stream.isatty():
            self.stream.write("\r\x1b[2K" + ("" if progress.finished else progress.line()))
            self.stream.flush()
            return
        last = self.shown.get(progress.stage)
        if progress.failed:
            return
        if (progress.finished and last is not None) or progress.elapsed - (last or 0.0) >= self.every:
            self.shown[progress.stage] = progress.elapsed
            if self.log is not None:
                self.log.info("%s", progress.line())
            else:
                print(progress.line(), file=self.stream, flush=True)


class _Tracker:
    """The counts of the run's clients and the stage now running, shown to the reporters by a ticking thread."""

    def __init__(self, reporters: list[Callable[[StageProgress], None]]):
        self.reporters = reporters
        self.counts: dict[str, tuple[int, int, float | None]] = {}
        self.current: tuple[str, int, int, float] | None = None
        self.parts: tuple[int, int, str] | None = None
        self.lock = threading.Lock()

    def counted(self, client_id: str, done: int, total: int, left: float | None = None) -> None:
        """Note a client's counts and its estimate of the seconds left (None: none), as its scheduler published
        them."""
        with self.lock:
            self.counts[client_id] = (done, total, left)

    def _sums(self) -> tuple[int, int]:
        """Tasks done and submitted, over every client of the run."""
        return sum(c[0] for c in self.counts.values()), sum(c[1] for c in self.counts.values())

    def _left(self) -> float | None:
        """Seconds left over every client with unfinished tasks; None unless each of them has an estimate."""
        unfinished = [c[2] for c in self.counts.values() if c[0] < c[1]]
        return None if None in unfinished else sum(unfinished)

    def snapshot(self, finished: bool = False) -> StageProgress | None:
        """The running stage's progress since it started; None between stages."""
        with self.lock:
            if self.current is None:
                return None
            name, done0, total0, started = self.current
            done, total = self._sums()
            elapsed = time.monotonic() - started
            if self.parts is not None:
                return StageProgress(name, *self.parts[:2], elapsed, finished, self.parts[2])
        return StageProgress(name, done - done0, total - total0, elapsed, finished, left=self._left())

    def show(self, progress: StageProgress | None) -> None:
        """Hand ``progress`` to every reporter; a reporter's failure is logged, never fails the run."""
        for report in self.reporters if progress is not None else ():
            try:
                report(progress)
            except Exception as exc:  # a progress display must never fail the run it shows
                LOG.warning("progress display %s failed: %s", type(report).__name__, type(exc).__name__)

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Track stage ``name`` for the block: its counts from now on, shown every TICK_SECONDS and at its end."""
        with self.lock:
            self.current = (name, *self._sums(), time.monotonic())
        stop = threading.Event()
        ticker = threading.Thread(target=contextvars.copy_context().run, args=(self._tick, stop),
                                  name=f"sdc-progress-{name}", daemon=True)  # the caller's context: its flow run
        ticker.start()
        failed = True
        try:
            yield
            failed = False
        finally:
            stop.set()
            ticker.join()
            ended = self.snapshot(finished=True)
            with self.lock:
                self.current, self.parts = None, None
            self.show(dataclasses.replace(ended, failed=failed))

    def _tick(self, stop: threading.Event) -> None:
        """Show the stage's progress every TICK_SECONDS until ``stop`` is set."""
        while not stop.wait(TICK_SECONDS):
            self.show(self.snapshot())


_ACTIVE: list[_Tracker] = []


@contextlib.contextmanager
def tracking(reporters: list[Callable[[StageProgress], None]]) -> Iterator[None]:
    """For the block, the stages it names (:func:`stage`) are shown to ``reporters``, counted on every Dask client
    that :func:`counting` attaches (``sdc_tasks.cluster.dask_client`` does)."""
    _ACTIVE.append(_Tracker(reporters))
    try:
        yield
    finally:
        _ACTIVE.pop()


@contextlib.contextmanager
def stage(name: str) -> Iterator[None]:
    """Name the stage the block runs, for the reporters of the innermost :func:`tracking` (nothing without one)."""
    if not _ACTIVE:
        yield
        return
    with _ACTIVE[-1].stage(name):
        yield


def count(done: int, total: int, unit: str) -> None:
    """The running stage's own count of its ``unit`` (work done outside Dask, e.g. files written), shown instead
    of Dask's task counts; nothing without a :func:`tracking`."""
    if _ACTIVE:
        with _ACTIVE[-1].lock:
            _ACTIVE[-1].parts = (done, total, unit)


@contextlib.contextmanager
def counting(client: Client) -> Iterator[None]:
    """For the block, count ``client``'s tasks for the innermost :func:`tracking` (nothing without one): its
    scheduler runs a ``TaskCounter`` whose counts the client receives as events. A scheduler that cannot load
    the plugin (this package not installed beside it) only costs the progress display, with a warning."""
    if not _ACTIVE:
        yield
        return
    from sdc_tasks.task_counter import TaskCounter  # distributed's plugin base: imported where a cluster runs

    tracker, plugin = _ACTIVE[-1], TaskCounter(client.id)
    try:
        client.register_plugin(plugin)
    except Exception as exc:  # the scheduler's environment, not the run, is at fault
        LOG.warning("no progress display: the Dask scheduler did not take the progress plugin (%s)",
                    type(exc).__name__)
        yield
        return
    client.subscribe_topic(plugin.name, lambda event: tracker.counted(client.id, event[1]["done"],
                                                                      event[1]["total"], event[1].get("left")))
    try:
        yield
    finally:
        with contextlib.suppress(Exception):  # the scheduler may be gone already (a lost cluster is reported apart)
            client.unsubscribe_topic(plugin.name)
            client.unregister_scheduler_plugin(plugin.name)


LOCAL_TASKS = "threads-of-this-process"
"""The tracker's name for the counts of Dask's threaded scheduler in this process."""


class _LocalTaskCounter(Callback):
    """Dask local-scheduler callback: the tasks of every graph run on threads in this process (submitted when its
    graph starts, done as each ends), and the seconds left (``seconds_left``, from its own average duration of
    each kind of task, as Dask's scheduler keeps one), for a tracker, as one more client's counts."""

    def __init__(self, tracker: _Tracker):
        super().__init__()
        self.tracker = tracker
        self.done = self.total = 0
        self.waiting: Counter = Counter()
        self.averages: dict[str, float] = {}
        self.started: dict = {}
        self.threads = dask.config.get("num_workers", None) or os.cpu_count() or 1
        self.lock = threading.Lock()

    def _counted(self) -> None:
        """Hand the counts and the seconds left to the tracker."""
        left = seconds_left(self.waiting, self.averages.get, self.threads)
        self.tracker.counted(LOCAL_TASKS, self.done, self.total, left)

    def _start_state(self, dsk, state) -> None:
        """Count the tasks a graph will run, by kind."""
        with self.lock:
            for key in (*state["ready"], *state["waiting"]):
                self.waiting[key_split(key)] += 1
            self.total += len(state["ready"]) + len(state["waiting"])
            self._counted()

    def _pretask(self, key, dsk, state) -> None:
        """Note when a task starts."""
        self.started[key] = time.perf_counter()

    def _posttask(self, key, result, dsk, state, worker_id) -> None:
        """Count a task that has ended and fold its duration into its kind's average (half the new one, half the
        old, as Dask's scheduler does)."""
        seconds = time.perf_counter() - self.started.pop(key, time.perf_counter())
        kind = key_split(key)
        with self.lock:
            self.done += 1
            self.waiting[kind] -= 1
            old = self.averages.get(kind)
            self.averages[kind] = seconds if old is None else 0.5 * seconds + 0.5 * old
            self._counted()


@contextlib.contextmanager
def counting_local() -> Iterator[None]:
    """For the block, count the tasks Dask's threaded scheduler runs in this process for the innermost
    :func:`tracking` (nothing without one)."""
    if not _ACTIVE:
        yield
        return
    with _LocalTaskCounter(_ACTIVE[-1]):
        yield
