"""Progress per stage (sdc_tasks.progress): the counts Dask's scheduler publishes, the line a stage shows on a
terminal and elsewhere, and the progress artifacts of a flow run."""

from __future__ import annotations

import io
import time

import pytest

from sdc_tasks.cluster import dask_client
from sdc_tasks.progress import StageProgress, TerminalProgress, count, seconds_left, stage, tracking
from sdc_tasks.task_counter import TaskCounter


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def test_a_stage_line_estimates_the_remaining_time_of_its_own_parts_from_the_rate_so_far():
    p = StageProgress("generate", 25, 100, 10.0, unit="files")
    assert p.remaining() == pytest.approx(30.0) and p.fraction() == 0.25
    assert p.line() == "generate: 25/100 files, 10 s elapsed, about 30 s remaining"
    assert StageProgress("generate", 0, 8, 3.0, unit="files").line() == \
        "generate: 0/8 files, 3 s elapsed, remaining unknown"
    finished = StageProgress("write", 4, 4, 2.0, finished=True, unit="files")
    assert finished.line() == "write: 4/4 files, 2 s elapsed, done"


def test_a_stage_of_dask_tasks_shows_the_estimate_from_their_kinds_or_says_it_has_none():
    # 385 of 415 tasks in 30 s: the rate says 2 s more, but the 30 left are the long ones
    p = StageProgress("mask (mdav)", 385, 415, 30.0, left=14.6)
    assert p.remaining() == 14.6
    assert p.line() == "mask (mdav): 385/415 tasks, 30 s elapsed, about 15 s remaining"
    # a kind still to run not timed yet (a kernel compiling on its first call): no estimate, not the rate
    assert StageProgress("mask (md)", 4, 9, 10.0).line() == "mask (md): 4/9 tasks, 10 s elapsed, remaining unknown"
    # every task submitted so far done, the stage not ended: it has more to submit, of unknown length
    between = StageProgress("mask", 108, 108, 10.0, left=0.0)
    assert between.line() == "mask: 108/108 tasks, 10 s elapsed, remaining unknown"
    assert StageProgress("evaluate", 5, 9, 1.0, left=0.2).line() == \
        "evaluate: 5/9 tasks, 1 s elapsed, about 1 s remaining"


def test_plain_lines_come_every_ten_seconds_and_a_last_one_only_for_a_stage_that_showed_one():
    stream = io.StringIO()
    show = TerminalProgress(stream)
    for elapsed in (1.0, 5.0, 10.5, 12.0, 21.0):
        show(StageProgress("evaluate", int(elapsed), 30, elapsed, left=30 - elapsed))
    show(StageProgress("evaluate", 30, 30, 22.0, finished=True))
    show(StageProgress("validate", 3, 3, 0.4, finished=True))
    assert stream.getvalue().splitlines() == ["evaluate: 10/30 tasks, 10 s elapsed, about 20 s remaining",
                                              "evaluate: 21/30 tasks, 21 s elapsed, about 9 s remaining",
                                              "evaluate: 30/30 tasks, 22 s elapsed, done"]


def test_a_terminal_line_is_redrawn_in_place_and_cleared_at_the_end():
    stream = Terminal()
    show = TerminalProgress(stream)
    show(StageProgress("mask", 1, 4, 1.0, left=3.0))
    show(StageProgress("mask", 2, 4, 2.0, left=2.0))
    show(StageProgress("mask", 4, 4, 3.0, finished=True))
    assert stream.getvalue() == ("\r\x1b[2Kmask: 1/4 tasks, 1 s elapsed, about 3 s remaining"
                                 "\r\x1b[2Kmask: 2/4 tasks, 2 s elapsed, about 2 s remaining\r\x1b[2K")
    assert "\n" not in stream.getvalue()


class Prefix:
    """The part of the scheduler's record of a kind of task that the counter reads."""

    def __init__(self, average: float):
        self.duration_average = average


class Scheduler:
    """The part of Dask's scheduler that the counter reads and writes."""

    def __init__(self, threads: int):
        self.tasks: dict = {}
        self.task_prefixes: dict[str, Prefix] = {}
        self.total_nthreads = threads
        self.events: list[dict] = []

    def log_event(self, topic: str, message: dict) -> None:
        self.events.append(message)


def test_the_seconds_left_weigh_each_kind_of_task_by_its_average_duration():
    averages = {"read": 0.05, "kernel": 3.0}
    assert seconds_left({"read": 40, "kernel": 6}, averages.get, 2) == pytest.approx((40 * 0.05 + 6 * 3.0) / 2)
    assert seconds_left({"read": 0, "kernel": 1}, averages.get, 2) == 3.0  # one task runs on one thread
    assert seconds_left({}, averages.get, 2) == 0.0
    # a kind never timed (a kernel compiling on its first call) may take any time
    assert seconds_left({"read": 3, "write": 1}, averages.get, 2) is None


def test_the_scheduler_plugin_estimates_from_the_scheduler_s_averages():
    scheduler = Scheduler(threads=2)
    counter = TaskCounter("me")
    keys = [f"read-{i}" for i in range(40)] + [f"kernel-{i}" for i in range(6)] + ["write-0"]
    counter.update_graph(scheduler, client="me", tasks=keys)
    assert counter.seconds_left() is None  # nothing timed yet
    scheduler.task_prefixes.update(read=Prefix(0.05), write=Prefix(0.2))
    for i in range(40):
        counter.transition(f"read-{i}", "processing", "memory")
    assert counter.seconds_left() is None  # the kernels not timed yet
    scheduler.task_prefixes["kernel"] = Prefix(3.0)
    counter.transition("kernel-0", "processing", "memory")
    assert counter.seconds_left() == pytest.approx((5 * 3.0 + 0.2) / 2)
    for i in range(1, 6):
        counter.transition(f"kernel-{i}", "processing", "memory")
    assert counter.seconds_left() == pytest.approx(0.2)
    counter.transition("write-0", "processing", "memory")
    assert counter.seconds_left() == 0.0 and counter.waiting == {}
    assert scheduler.events[-1] == {"done": 47, "total": 47, "left": 0.0}


def test_a_run_on_threads_times_its_own_kinds_of_task():
    import dask
    from dask import delayed

    from sdc_tasks.progress import counting_local

    seen: list[StageProgress] = []
    with tracking([seen.append]), dask.config.set(scheduler="threads"), counting_local(), stage("local"):
        assert dask.compute(*[delayed(increment)(i) for i in range(12)]) == tuple(range(1, 13))
    (final,) = [p for p in seen if p.finished]
    assert (final.done, final.total, final.left) == (12, 12, 0.0)


def increment(x: int) -> int:
    """A task."""
    return x + 1


def test_the_scheduler_counts_each_stage_s_tasks_for_the_client():
    seen: list[StageProgress] = []
    with tracking([seen.append]), dask_client(None, 1) as client:
        with stage("first"):
            assert client.gather(client.map(increment, range(20))) == list(range(1, 21))
        with stage("second"):
            assert sum(client.gather(client.map(increment, range(100, 107)))) == sum(range(101, 108))
    finals = [p for p in seen if p.finished]
    assert [(p.stage, p.done, p.total) for p in finals] == [("first", 20, 20), ("second", 7, 7)]
    assert all(p.done <= p.total for p in seen)
    assert all(p.left is not None for p in finals)  # the scheduler timed the tasks and published its estimate


def test_a_task_released_while_it_ran_is_counted_again_when_a_later_graph_submits_it():
    # The scheduler's transitions as the plugin sees them: task b is released while it runs (its graph dropped),
    # then a graph of the next stage holds b again. Each stage's counts stay within what it submitted.
    counter = TaskCounter("me")
    counter.update_graph(None, client="me", tasks=["a", "b"])
    counter.transition("a", "processing", "memory")
    counter.transition("b", "processing", "released")
    first = (counter.done, counter.total)
    counter.update_graph(None, client="me", tasks=["b"])
    counter.transition("b", "processing", "memory")
    assert first == (2, 2)
    assert (counter.done - first[0], counter.total - first[1]) == (1, 1)
    counter.update_graph(None, client="other", tasks=["c"])
    assert counter.total == 3


def test_a_stage_may_count_its_own_parts_and_nothing_is_shown_without_tracking():
    seen: list[StageProgress] = []
    with stage("untracked"):
        count(1, 2, "files")  # no tracking: nothing to show, nothing fails
    with tracking([seen.append]), stage("generate"):
        count(0, 3, "files")
        count(3, 3, "files")
    assert [(p.stage, p.done, p.total, p.unit, p.finished) for p in seen] == [("generate", 3, 3, "files", True)]


def test_a_flow_run_has_a_progress_artifact_per_stage(prefect_harness):
    from prefect import flow
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId, ArtifactFilterType

    from flows.progress import flow_progress

    @flow(persist_result=False)
    def staged() -> None:
        with flow_progress():
            for name, parts in (("block", 2), ("write", 5)):
                with stage(name):
                    count(parts, parts, "files")

    state = staged(return_state=True)
    with get_client(sync_client=True) as client:
        artifacts = client.read_artifacts(artifact_filter=ArtifactFilter(
            flow_run_id=ArtifactFilterFlowRunId(any_=[state.state_details.flow_run_id]),
            type=ArtifactFilterType(any_=["progress"])))
    assert sorted((a.description, a.data) for a in artifacts) == [
        ("block: 2/2 files, 0 s elapsed, done", 100.0), ("write: 5/5 files, 0 s elapsed, done", 100.0)]


def test_a_stage_ended_by_an_exception_clears_the_terminal_line_and_claims_nothing_done():
    terminal, plain, seen = Terminal(), io.StringIO(), []
    with pytest.raises(KeyboardInterrupt), tracking([TerminalProgress(terminal), TerminalProgress(plain), seen.append]):
        with stage("mask"):
            count(2, 5, "files")
            raise KeyboardInterrupt
    [ended] = seen
    assert ended.finished and ended.failed and ended.line() == "mask: 2/5 files, 0 s elapsed, stopped"
    assert ended.fraction() == 0.4
    assert terminal.getvalue() == "\r\x1b[2K" and plain.getvalue() == ""


def test_a_persisted_result_read_by_a_later_stage_is_not_counted_done_when_it_is_released():
    # A later graph that reads a persisted result holds it again (the scheduler hands the plugin every task of
    # the graph), but the result is already in memory: it must not be counted as submitted, or its release in a
    # still later stage counts as done there (the 1e7 MDAV release showed 189 %).
    import dask

    seen: list[StageProgress] = []
    with tracking([seen.append]), dask_client(None, 1) as client:
        with stage("persist"):
            kept = client.persist(dask.delayed(increment)(1))
            assert kept.compute() == 2
        with stage("read"):
            assert dask.delayed(increment)(kept).compute() == 3
        with stage("release"):
            del kept
            time.sleep(0.5)
            assert client.gather(client.map(increment, range(3))) == [1, 2, 3]
    finals = {p.stage: (p.done, p.total) for p in seen if p.finished}
    assert finals["read"] == (1, 1) and finals["release"] == (3, 3)
    assert all(p.done <= p.total for p in seen)
