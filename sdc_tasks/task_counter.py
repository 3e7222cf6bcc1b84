"""The scheduler plugin behind ``sdc_tasks.progress.counting``: it counts the tasks one ``distributed`` client
submits and those that finish, estimates the seconds of work left from the scheduler's average duration of each
kind of task, and publishes them on a scheduler event topic (apart from ``progress`` so that runs on Dask's local
schedulers do not import ``distributed``)."""

from __future__ import annotations

import sys
import time
from collections import Counter

from dask.utils import key_split
from distributed.diagnostics.plugin import SchedulerPlugin

from sdc_tasks.progress import seconds_left

TOPIC = "sdc-progress"
PUBLISH_SECONDS = 0.25  # the plugin publishes the counts at most this often (and whenever all tasks are done)


class TaskCounter(SchedulerPlugin):
    """Scheduler plugin: the number of tasks one client has submitted and how many of them have finished (in
    memory, erred, forgotten, or released before they ran), and the seconds its unfinished tasks will take
    (``seconds_left``), published on the event topic :data:`TOPIC` as {"done", "total", "left"}."""

    def __init__(self, client_id: str):
        self.client_id = client_id
        self.name = f"{TOPIC}-{client_id}"
        self.pending: dict = {}  # each unfinished task's kind (Dask's task prefix)
        self.waiting: Counter = Counter()  # unfinished tasks per kind
        self.total = 0
        self.done = 0
        self.published = 0.0
        self.scheduler = None

    async def start(self, scheduler) -> None:
        """Keep the scheduler to publish on."""
        self.scheduler = scheduler

    def update_graph(self, scheduler, *, client: str, tasks: list, **kwargs) -> None:
        """Count the tasks of the client's graph that are to run: not those counted already, nor those whose results
        are in memory (a persisted result the graph reads: counted, it would stay pending through this graph and
        count as done in whichever later graph saw it released)."""
        self.scheduler = scheduler
        if client == self.client_id:
            states = scheduler.tasks if scheduler is not None else {}
            new = [key for key in tasks if key not in self.pending
                   and getattr(states.get(key), "state", None) not in ("memory", "erred")]
            for key in new:
                self.pending[key] = kind = sys.intern(key_split(key))  # one string per kind, not per task
                self.waiting[kind] += 1
            self.total += len(new)
            self._publish(force=True)

    def transition(self, key, start: str, finish: str, *args, **kwargs) -> None:
        """Count a task of the client's that has finished: in memory, erred, forgotten or released from any state.
        A task released while it ran (its graph's results dropped) is done with for its submission; a later graph
        that holds it again submits it anew. Left pending, it would count as done in the later graph, which did not
        count it as submitted (progress above 100 %, seen in the 1e7 and 3e7 releases' evaluation)."""
        if key in self.pending and finish in ("memory", "erred", "forgotten", "released"):
            kind = self.pending.pop(key)
            self.waiting[kind] -= 1
            if not self.waiting[kind]:
                del self.waiting[kind]
            self.done += 1
            self._publish(force=self.done == self.total)

    def _average(self, kind: str) -> float | None:
        """The scheduler's average duration of a task of ``kind`` (its moving average of their compute times),
        None while it has none."""
        prefix = getattr(self.scheduler, "task_prefixes", {}).get(kind)
        return prefix.duration_average if prefix is not None and prefix.duration_average >= 0 else None

    def seconds_left(self) -> float | None:
        """Seconds until the client's unfinished tasks are done, from the scheduler's average duration of each kind
        (``progress.seconds_left``, over the cluster's threads); None while a kind has none."""
        return seconds_left(self.waiting, self._average, getattr(self.scheduler, "total_nthreads", 1))

    def _publish(self, force: bool = False) -> None:
        """Publish the counts when forced or when the last publication is older than PUBLISH_SECONDS."""
        now = time.monotonic()
        if self.scheduler is not None and (force or now - self.published >= PUBLISH_SECONDS):
            self.published = now
            self.scheduler.log_event(self.name, {"done": self.done, "total": self.total, "left": self.seconds_left()})
