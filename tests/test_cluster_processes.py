"""Releases on a real multi-process Dask cluster: a ``dask scheduler`` and two ``dask worker`` processes on
loopback, attached by address. The masked file equals an in-process run's, and a worker killed while it is
masking does not change it (the scheduler recomputes the lost work on the surviving worker)."""

from __future__ import annotations

import gc
import os
import platform
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import dask
import pandas as pd
import pytest
from distributed import Client, get_task_stream
from distributed.utils import key_split
from spec_files import demo_spec_file

from flows.release import release
from sdc_tasks.files import tree_checksums
from sdc_tasks.generate import write_synthetic
from sdc_tasks.pipeline import stages as R
from sdc_tasks.pipeline.spec import load_spec

pytestmark = pytest.mark.usefixtures("prefect_harness")

MASK_TASK = "mask_blocks"  # key prefix of the blocked kernels' tasks (sdc_tasks.masking.apply._mask_blocks)


def free_port() -> int:
    """A TCP port free on the loopback interface right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(workers: list[subprocess.Popen], scheduler: subprocess.Popen) -> None:
    """Kill the worker processes (they hold nothing to save), then stop the scheduler (killed after 10 s)."""
    for p in workers:
        p.kill()
        p.wait()
    scheduler.terminate()
    try:
        scheduler.wait(10)
    except subprocess.TimeoutExpired:
        scheduler.kill()
        scheduler.wait()


@pytest.fixture
def cluster():
    """Address and worker processes ({address: Popen}) of a scheduler and two single-threaded workers without
    nannies (a killed worker stays dead); every process started here is stopped at the end."""
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    quiet = dict(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    scheduler = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                                  "--port", str(port), "--no-dashboard", "--idle-timeout", "300"], **quiet)
    workers = []
    try:
        for _ in range(2):
            workers.append(subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address,
                                             "--host", "127.0.0.1", "--nthreads", "1", "--no-nanny",
                                             "--no-dashboard", "--death-timeout", "30"], **quiet))
        with Client(address, timeout=60, set_as_default=False) as client:
            client.wait_for_workers(2, timeout=60)
            pids = client.run(os.getpid)
        by_pid = {p.pid: p for p in workers}
        yield address, {addr: by_pid[pid] for addr, pid in pids.items()}
    finally:
        stop(workers, scheduler)


def masked(out: Path) -> tuple[pd.DataFrame, dict[str, str]]:
    """The masked dataset of a release and the SHA-256 of each of its files."""
    files = {k: v for k, v in tree_checksums(out).items() if k.startswith("masked/")}
    return pd.read_parquet(out / "masked"), files


def in_process_release(spec_path: Path, root: Path) -> Path:
    """Run the spec's masking steps with the release stages in this process (Dask's synchronous scheduler, no
    cluster) and return ``root``, which then holds masked/ as a release does."""
    spec = load_spec(spec_path)
    paths = R.ReleasePaths(root)
    with dask.config.set(scheduler="synchronous"):
        R.validate_input(spec, paths.checkpoint)
        for i in range(len(spec.steps)):
            if R.needs_blocks(spec, i):
                R.block_stage(spec, i, paths)
            R.mask_stage(spec, i, paths)
            R.write_stage(spec, i, paths)
    return root


def assert_equals_in_process_run(spec: Path, tmp_path: Path, rows: int) -> None:
    """The release under ``tmp_path`` masked ``rows`` records to the same values and file bytes as an
    in-process run of ``spec``."""
    released, released_files = masked(tmp_path / "release")
    reference, reference_files = masked(in_process_release(spec, tmp_path / "in-process"))
    assert len(released) == rows
    pd.testing.assert_frame_equal(released, reference, check_exact=True)
    assert released_files == reference_files


def test_release_on_scheduler_processes_equals_in_process_run(cluster, tmp_path):
    address, workers = cluster
    spec = demo_spec_file(tmp_path)
    with Client(address, set_as_default=False) as client, get_task_stream(client) as stream:
        summary = release(str(spec), dask_address=address)
    assert {t["worker"] for t in stream.data} == set(workers)  # both worker processes did work
    assert summary.published
    assert_equals_in_process_run(spec, tmp_path, 1080)


def kill_when_masking(address: str, workers: dict[str, subprocess.Popen], done: threading.Event,
                      killed: list) -> None:
    """Poll the scheduler; SIGKILL the worker that runs the first mask task and record its address."""
    with Client(address, set_as_default=False) as client:  # never the default: it lives beside the release's
        while not done.is_set():
            for worker, keys in client.processing().items():
                if worker in workers and any(key_split(k) == MASK_TASK for k in keys):
                    os.kill(workers[worker].pid, signal.SIGKILL)
                    killed.append(worker)
                    return
            time.sleep(0.01)


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory) -> Path:
    """40,000 synthetic Census-like records in four Parquet files (masking takes about a second)."""
    out = tmp_path_factory.mktemp("synthetic") / "data"
    write_synthetic(out, 40_000, seed=11, rows_per_file=10_000)
    return out


def test_worker_killed_while_masking_gives_the_same_release(cluster, synthetic, tmp_path):
    address, workers = cluster
    changes = dict(input={"path": str(synthetic), "format": "parquet"}, create_id=False, metrics=["il"],
                   gate={"min_group_size": 3},
                   steps=[{"method": "mdav", "params": {"k": 7, "group_size": 3, "block_size": 2000}}])
    spec = demo_spec_file(tmp_path, **changes)
    done, killed = threading.Event(), []
    killer = threading.Thread(target=kill_when_masking, args=(address, workers, done, killed))
    killer.start()
    try:
        summary = release(str(spec), dask_address=address)
    finally:
        done.set()
        killer.join(30)
    assert killed, "no mask task was seen processing, so no worker was killed"
    worker = killed[0]
    assert workers[worker].wait(10) == -signal.SIGKILL
    with Client(address, set_as_default=False) as client:
        assert set(client.scheduler_info()["workers"]) == set(workers) - {worker}
    assert summary.published
    assert_equals_in_process_run(spec, tmp_path, 40_000)


def test_no_client_is_left_as_the_default_scheduler():
    assert dask.config.get("scheduler", None) in (None, "sync", "synchronous", "threads")


def test_the_workers_of_a_runs_own_cluster_set_numba_up_and_their_heap_as_they_start():
    """Each worker of the run's own LocalCluster sets numba up once, on its own thread, from its start (the
    WorkerSetUp plugin), so the first kernel of a release does not wait for it; has frozen its imports out of
    the garbage collector's passes; runs with glibc's mmap threshold at 32 MiB beside Dask's trim threshold
    (worker_heap.HEAP_ENVIRONMENT) and the heap trim near its spill threshold; and neither Dask's configuration
    nor this process's environment keeps the threshold after the cluster."""
    from sdc_tasks.cluster import dask_client

    def numba_set_up() -> bool:
        from sdc_tasks import scheduling

        setups = list(scheduling._NUMBA_SETUP)
        for setup in setups:
            setup.join(60)
        return len(setups) == 1 and not setups[0].is_alive()

    before = dask.config.get("distributed.nanny.pre-spawn-environ")
    with dask_client(None, 1) as client:
        assert list(client.run(numba_set_up).values()) == [True]
        assert list(client.run(lambda: gc.get_freeze_count() > 10_000).values()) == [True]
        malloc = client.run(lambda: {k: v for k, v in os.environ.items() if k.startswith("MALLOC_")})
        assert list(malloc.values()) == [{"MALLOC_MMAP_THRESHOLD_": "33554432", "MALLOC_TRIM_THRESHOLD_": "65536"}]
        trims = client.run(lambda dask_worker: "sdc-heap-trim" in dask_worker.periodic_callbacks)
        assert list(trims.values()) == [platform.libc_ver()[0] == "glibc"]
    assert dask.config.get("distributed.nanny.pre-spawn-environ") == before
    assert "MALLOC_MMAP_THRESHOLD_" not in os.environ
