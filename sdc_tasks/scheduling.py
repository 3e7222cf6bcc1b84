"""Where the public API's Dask graphs run, by Dask's own convention: a client the caller names, else a
scheduler the caller configured (``dask.config.set(scheduler=...)``), else the active ``distributed`` client,
else in this process on threads. A LocalCluster (worker processes) is started only when asked for
(``workers=``) or for a file or Dask input larger than :data:`LARGE_INPUT_BYTES`; in-memory pandas input never
starts one, so a plain script needs no ``if __name__ == "__main__":`` guard."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
from concurrent.futures import Executor, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

import dask
import dask.dataframe as dd
import dask.local
import dask.threaded
import pandas as pd
import psutil
from dask.utils import get_default_shuffle_method

from sdc_tasks import progress

if TYPE_CHECKING:
    from distributed import Client

LARGE_INPUT_BYTES = 256 * 2**20
"""Inputs (file bytes on disk, or the estimated memory of a Dask DataFrame) above this run on a LocalCluster."""


def active_client() -> Any:
    """The default ``distributed`` client of this process, or None when there is none (none can exist before
    ``distributed`` is imported: this module imports it only where a cluster is started or used)."""
    if "distributed" not in sys.modules:
        return None
    from distributed import default_client

    try:
        return default_client()
    except ValueError:
        return None


def _distributed_client() -> Client | None:
    """The ``distributed`` client that runs this thread's next computation, None for Dask's local schedulers."""
    if "distributed" not in sys.modules:
        return None
    from distributed import Client

    owner = getattr(dask.base.get_scheduler(), "__self__", None)
    return owner if isinstance(owner, Client) else None


def parallel_tasks() -> int:
    """How many tasks this thread's next computation runs at once: the worker threads of its ``distributed``
    client, else the threads of Dask's local scheduler (one for the synchronous one)."""
    client = _distributed_client()
    if client is not None:
        return max(1, sum(client.nthreads().values()))
    if dask.base.get_scheduler() is dask.local.get_sync:
        return 1
    return max(1, int(dask.config.get("num_workers", None) or os.cpu_count() or 1))


ONE_GRAPH_VALUES = 2**20
"""Work on at most this many values (records times variables) is computed as one graph even where a large file's
is split into graphs computed one after the other to bound memory: on a small file each graph's round trip to
the scheduler costs more than its tasks (the 1,080-record Census file's evaluation on two workers: DLD_1..7 in
about 0.3 s instead of 0.8 s, the 13 variables' order measures in 0.1 s instead of 0.27 s)."""


def one_graph(values: int) -> bool:
    """Whether work on ``values`` values is small enough to be computed as one graph (:data:`ONE_GRAPH_VALUES`)."""
    return values <= ONE_GRAPH_VALUES


def computed_in_turn(tasks: list[Any], at_once: int) -> list:
    """The values of the Dask ``tasks`` (Delayed objects), in their order, with at most ``at_once`` of them
    submitted at a time. On a ``distributed`` client the next is submitted as soon as one is done (Dask's
    ``as_completed`` pattern), so no worker waits for the slowest of a batch, and a task already assigned to a worker
    that still computes another gets its inputs meanwhile; the futures are released as the call ends, as
    ``dask.compute`` releases its own, so those not done when it ends by an exception are dropped. On Dask's local
    schedulers they are computed in batches of ``at_once``, and anywhere all at once as one graph (one round trip to
    the scheduler) where ``at_once`` covers them all."""
    at_once = max(1, at_once)
    client = _distributed_client()
    if client is None or at_once >= len(tasks):
        return [v for i in range(0, len(tasks), at_once) for v in dask.compute(*tasks[i:i + at_once])]
    from distributed import as_completed

    values: list = [None] * len(tasks)
    submitted = [client.compute(task) for task in tasks[:at_once]]
    queue = as_completed(submitted, with_results=True)
    try:
        for future, value in queue:
            values[submitted.index(future)] = value
            if len(submitted) < len(tasks):
                submitted.append(client.compute(tasks[len(submitted)]))
                queue.add(submitted[-1])
    finally:
        for future in submitted:
            future.release()
    return values


def task_memory() -> int:
    """Bytes one task of this thread's next computation may count on: the smallest worker memory limit of its
    ``distributed`` client shared by the worker's threads (the machine's available memory for a worker without a
    limit), else the machine's available memory shared by the local scheduler's threads."""
    available = psutil.virtual_memory().available
    client = _distributed_client()
    if client is None:
        return available // parallel_tasks()
    workers = client.scheduler_info(n_workers=-1)["workers"].values()
    return min(((w.get("memory_limit") or available) // max(1, w.get("nthreads", 1)) for w in workers),
               default=available)


def one_task_holds(records: int, most: int, bytes_per_record: int) -> bool:
    """Whether one task may hold a whole column of ``records`` records: at most ``most`` of them, and their
    ``bytes_per_record`` bytes each within a quarter of :func:`task_memory`, so that a worker running its other
    tasks beside it does not spill or pause."""
    return records <= most and 4 * records * bytes_per_record <= task_memory()


def workers_hold(nbytes: int) -> bool:
    """Whether the workers of this thread's next computation can keep ``nbytes`` of data in memory for its
    duration: within a quarter of what their tasks count on together (:func:`task_memory` for each task they run
    at once), so that their work beside it never spills."""
    return 4 * nbytes <= parallel_tasks() * task_memory()


def held_in_process(ddf: dd.DataFrame, path: Path | None) -> dd.DataFrame:
    """``ddf``, read from the file at ``path``, persisted in this process when its computations run here (Dask's
    local schedulers) and the file is at most LARGE_INPUT_BYTES: the command's computations (checks, lengths,
    blocks, writing) then reuse the parsed records instead of parsing the file again each time (a dozen times for
    ``sdc mask`` of a CSV)."""
    if path is None or _distributed_client() is not None or input_bytes(path) > LARGE_INPUT_BYTES:
        return ddf
    return ddf.persist()


def shared(obj: Any) -> Any:
    """``obj`` (a table many tasks of a graph read) as a task argument held once: scattered to the workers when a
    ``distributed`` client runs this thread's computations, so that the graph sent to its scheduler stays small
    (no "Sending large graph" warning), else ``dask.delayed(obj)``, one task of the graph. Tasks on threads read
    the same object: they must not build its lazy parts (a pandas index's hash table, built by ``get_indexer``
    or ``is_unique``, can come out broken when threads build it at once)."""
    client = _distributed_client()
    return dask.delayed(obj if client is None else client.scatter(obj, hash=False))


def input_bytes(data: Any) -> int:
    """Bytes of an input: on disk for a file or dataset directory, in memory for a pandas DataFrame, and for a
    Dask DataFrame its first partition's memory times the number of partitions (one partition computed)."""
    if isinstance(data, pd.DataFrame):
        return int(data.memory_usage(deep=True).sum())
    if isinstance(data, dd.DataFrame):
        first = data.get_partition(0).compute()
        return int(first.memory_usage(deep=True).sum()) * data.npartitions
    p = Path(data)
    return p.stat().st_size if p.is_file() else sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def _starts_cluster(inputs: list[Any]) -> bool:
    """Whether inputs of this size run on a LocalCluster (none of them is a pandas DataFrame, and together they
    exceed LARGE_INPUT_BYTES)."""
    if any(isinstance(d, pd.DataFrame) for d in inputs):
        return False
    return sum(input_bytes(d) for d in inputs) > LARGE_INPUT_BYTES


_NUMBA_SETUP: list[threading.Thread] = []
"""The thread that set up numba's compiler contexts in this process (:func:`start_numba_setup`), once started."""


def _numba_setup(compiler_lock, target) -> None:
    """Load numba's typing and target registries (``target``'s context), under its ``compiler_lock``, as a
    process's first compiled call (even one read from the cache) would."""
    with compiler_lock:
        target.target_context.refresh()


def start_numba_setup() -> None:
    """Start numba's one-time set-up (:func:`_numba_setup`: 0.2-0.6 s here) on a thread, once per process, so that
    it runs while the input is read (parsing releases the GIL) and not after it, before the first kernel
    (docs/performance.md, small files). Numba's modules are imported here, in the calling thread (0.1 s where
    numba is not imported yet): imported on the thread, they could meet a task importing numba at the same time
    and one of the two would find it partly initialised. Not a daemon: a run that fails at once still ends after
    the set-up, never with the thread cut off inside numba."""
    if not _NUMBA_SETUP:
        from numba.core.compiler_lock import global_compiler_lock
        from numba.core.registry import cpu_target

        _NUMBA_SETUP.append(threading.Thread(target=_numba_setup, args=(global_compiler_lock, cpu_target),
                                             name="sdc-numba-setup"))
        _NUMBA_SETUP[0].start()


def _cluster_client(workers: int) -> contextlib.AbstractContextManager:
    """``cluster.dask_client`` on a LocalCluster of ``workers`` processes (``cluster``, and with it ``distributed``,
    imported only where a cluster starts: 0.2 s that runs on threads skip)."""
    from sdc_tasks import cluster

    return cluster.dask_client(None, workers)


@contextlib.contextmanager
def scheduled(inputs: list[Any], client: Any = None, workers: int | None = None) -> Iterator[None]:
    """Run the Dask computations of the ``with`` body on ``client`` when given; else on a LocalCluster of
    ``workers`` processes when given; else on the scheduler set in ``dask.config`` or the active distributed
    client when there is one; else on a LocalCluster when the ``inputs`` (paths, pandas or Dask DataFrames) are
    large (:func:`_starts_cluster`), and otherwise on threads in this process."""
    if client is not None:
        with dask.config.set(scheduler=client), client.as_current():
            yield
    elif workers is not None:
        with _cluster_client(workers):
            yield
    elif dask.config.get("scheduler", None) is not None or active_client() is not None:
        yield
    elif _starts_cluster([d for d in inputs if d is not None]):
        with _cluster_client(os.cpu_count() or 1):
            yield
    else:  # the threaded scheduler itself: named "threads", Dask would import distributed (0.2 s) to look for a client
        start_numba_setup()
        with _threads_waited_for() as threads, dask.config.set(scheduler=threads), progress.counting_local():
            yield


class _AwaitedTasks(Executor):
    """Dask's executor interface over a pool of threads shared by the process, remembering each task it submitted
    until the task is done, so that the end of a run can wait for the ones still running (:meth:`settled`)."""

    def __init__(self, pool: ThreadPoolExecutor):
        self.pool, self._max_workers = pool, pool._max_workers
        self.lock = threading.Lock()
        self.pending: set[Future] = set()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        """Submit to the shared pool and remember the future until it is done."""
        future = self.pool.submit(fn, *args, **kwargs)
        with self.lock:
            self.pending.add(future)
        future.add_done_callback(self._forget)
        return future

    def _forget(self, future: Future) -> None:
        """Drop a done future."""
        with self.lock:
            self.pending.discard(future)

    def settled(self) -> None:
        """Cancel the submitted tasks that have not started; wait for those that run."""
        with self.lock:
            left = list(self.pending)
        for future in left:
            future.cancel()
        wait(left)


_SHARED_POOLS: dict[int, ThreadPoolExecutor] = {}
_SHARED_POOLS_LOCK = threading.Lock()


def _shared_pool(size: int) -> ThreadPoolExecutor:
    """The process's pool of ``size`` threads for runs on threads, made at its first use (its threads and their
    malloc arenas stay warm from one run to the next, as Dask's own pool's do)."""
    with _SHARED_POOLS_LOCK:
        if size not in _SHARED_POOLS:
            _SHARED_POOLS[size] = ThreadPoolExecutor(size, thread_name_prefix="sdc-threads")
        return _SHARED_POOLS[size]


@contextlib.contextmanager
def _threads_waited_for() -> Iterator[Callable[..., Any]]:
    """Dask's threaded scheduler for the block, the graphs computed by the block's own thread on the process's
    shared pool (``num_workers`` of ``dask.config``, else one thread per core, as Dask's) through an
    :class:`_AwaitedTasks`: a block left by an exception (Ctrl-C among them) ends only once the tasks it had
    running have returned and the rest are cancelled, so that no task writes into the scratch or output files its
    caller removes next (Dask's own scheduler leaves them running). A graph computed inside a task runs on Dask's
    own pools, as before."""
    tasks = _AwaitedTasks(_shared_pool(dask.config.get("num_workers", None) or dask.threaded.CPU_COUNT))
    owner = threading.current_thread()

    def threads(dsk: Any, keys: Any, **kwargs: Any) -> Any:
        """``dask.threaded.get`` on the block's tasks when called from the block's thread."""
        if threading.current_thread() is owner:
            kwargs.setdefault("pool", tasks)
        return dask.threaded.get(dsk, keys, **kwargs)

    try:
        yield threads
    finally:
        tasks.settled()


@contextlib.contextmanager
def release_client(address: str | None, input_path: Path, client: Any = None,
                   workers: int | None = None) -> Iterator[Any]:
    """The Dask client a release runs on: ``client`` when given; else a LocalCluster of ``workers`` processes when
    given; else the active distributed client; else None, the spec's own cluster (``pipeline.run.run_release``),
    when the spec names a scheduler ``address`` or the input is larger than LARGE_INPUT_BYTES; else a cluster of
    threads inside this process (no worker processes, so no ``__main__`` guard is needed)."""
    if client is not None:
        yield client
    elif workers is not None:
        with _cluster_client(workers) as started:
            yield started
    elif active_client() is not None:
        yield active_client()
    elif address is not None or input_bytes(input_path) > LARGE_INPUT_BYTES:
        yield None
    else:
        from distributed import Client, LocalCluster

        with LocalCluster(n_workers=1, processes=False, dashboard_address=None,
                          silence_logs=logging.ERROR) as threads, Client(threads, set_as_default=False) as started:
            yield started


def shuffle_method() -> str:
    """Dask's default shuffle (peer-to-peer on a distributed cluster), in memory by tasks without one: Dask's
    default there, a partd disk store, is slow for many small shuffles and leaves its directories in the
    temporary directory. Without a configured method or an active client it is "tasks" without asking Dask, whose
    answer imports ``distributed`` (0.2-0.3 s of a small command that runs on threads)."""
    if dask.config.get("dataframe.shuffle.method", None) is None and active_client() is None:
        return "tasks"
    method = get_default_shuffle_method()
    return "tasks" if method == "disk" else method
