"""``scheduling.computed_within``: graphs computed in order of submission, as many at a time as their weights fit
in a budget, each graph's context left once it is computed, on a ``distributed`` client and on Dask's local
schedulers."""

from __future__ import annotations

import contextlib
import time

import dask
import pytest

from sdc_tasks.scheduling import computed_within


class Contexts:
    """Context managers giving delayed values, recording the weight open at once and the order they closed in."""

    def __init__(self):
        self.open = 0
        self.most_open = 0
        self.closed: list[int] = []

    def graph(self, i: int, seconds: float = 0.0, weight: int = 1, fails: bool = False):
        return weight, self._graph(i, seconds, weight, fails)

    @contextlib.contextmanager
    def _graph(self, i: int, seconds: float, weight: int, fails: bool):
        self.open += weight
        self.most_open = max(self.most_open, self.open)
        try:
            yield dask.delayed(_value)(i, seconds, fails)
        finally:
            self.open -= weight
            self.closed.append(i)


def _value(i: int, seconds: float, fails: bool) -> int:
    time.sleep(seconds)
    if fails:
        raise ValueError(f"graph {i} failed")
    return i * i


@pytest.fixture(scope="module")
def client():
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster) as c, dask.config.set(scheduler=c):
        yield c


@pytest.mark.parametrize("budget", [1, 2, 3])
def test_values_come_in_order_with_at_most_the_budget_open(client, budget):
    ctx = Contexts()
    seconds = [0.3, 0.0, 0.1, 0.0, 0.2, 0.0]
    assert computed_within((ctx.graph(i, s) for i, s in enumerate(seconds)), budget) == \
        [i * i for i in range(len(seconds))]
    assert ctx.most_open == budget and ctx.open == 0 and sorted(ctx.closed) == list(range(len(seconds)))


def test_weights_decide_what_runs_together(client):
    """Budget 7: weights 2 and 3 run together; 4 waits until the 2 ends and runs beside the slow 3; 5 waits until
    both end (3 + 5 > 7). A graph heavier than the budget still runs, by itself."""
    ctx = Contexts()
    graphs = [ctx.graph(0, 0.0, 2), ctx.graph(1, 0.5, 3), ctx.graph(2, 0.0, 4), ctx.graph(3, 0.0, 5)]
    assert computed_within(iter(graphs), 7) == [0, 1, 4, 9]
    assert ctx.most_open == 7 and ctx.closed[-1] == 3
    assert computed_within(iter([ctx.graph(4, 0.0, 9)]), 7) == [16]


def test_the_next_graph_starts_as_soon_as_any_running_one_ends(client):
    """The slow first graph is still running when the quick ones after it are computed and their contexts left."""
    ctx = Contexts()
    assert computed_within((ctx.graph(i, 1.0 if i == 0 else 0.0) for i in range(4)), 2) == [0, 1, 4, 9]
    assert ctx.closed == [1, 2, 3, 0]


def test_a_failing_graph_raises_and_every_context_is_left(client):
    ctx = Contexts()
    graphs = (ctx.graph(i, 0.5 if i == 0 else 0.0, fails=i == 1) for i in range(5))
    with pytest.raises(ValueError, match="graph 1 failed"):
        computed_within(graphs, 2)
    assert ctx.open == 0 and sorted(ctx.closed) == [0, 1]


def test_local_schedulers_compute_one_graph_after_the_other(sync_dask):
    ctx = Contexts()
    assert computed_within((ctx.graph(i) for i in range(4)), 3) == [0, 1, 4, 9]
    assert ctx.most_open == 1 and ctx.closed == [0, 1, 2, 3]
