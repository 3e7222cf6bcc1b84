"""A command interrupted while it works, as by Ctrl-C (SIGINT to its whole process group, as a terminal sends it), by
``kill`` (SIGTERM to the command alone) or by a service manager (SIGTERM to the whole group): ``sdc release`` in
the middle of its masking stage, ``sdc mask``, ``sdc evaluate`` and ``sdc compare`` while their cluster works, and
any of them while its local cluster starts. It ends within seconds with one ``interrupted:`` line and exit status
130 / 143, after stopping every process it started (the temporary Prefect server, the Dask workers) and removing
its hidden output directory, lock and scratch directories; no file is left in the temporary directory but Dask's
empty lock files, and a following run publishes normally. Workers never take the terminal's Ctrl-C themselves."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
import psutil
import pytest
import yaml
from processes import SOURCE_ROOT

from sdc_tasks import outputs as O
from sdc_tasks.generate import write_synthetic

VARIABLES = ["AFNLWGT", "AGI", "EMCONTRB", "FEDTAX", "PTOTVAL", "STATETAX", "TAXINC", "POTHVAL", "INTVAL",
             "PEARNVAL", "FICA", "WSALVAL", "ERNVAL"]
DASK_LOCKS = {"global.lock", "purge.lock"}  # empty lock files Dask keeps in the temporary directory


@pytest.fixture(scope="module")
def records(tmp_path_factory) -> Path:
    """60,000 synthetic records (masking them takes many seconds), written once for the module's runs."""
    data = tmp_path_factory.mktemp("records") / "data"
    write_synthetic(data, 60_000, seed=1)
    return data


@pytest.fixture(scope="module")
def prefect_home(tmp_path_factory) -> Path:
    """The Prefect home of the module's runs: the first release's temporary server creates its database (Prefect's
    migrations, about 10 s of CPU), the later ones reuse it."""
    return tmp_path_factory.mktemp("prefect-home")


@pytest.fixture
def synthetic(records, prefect_home, tmp_path, monkeypatch):
    """(environment, directory) of a run on a copy of the 60,000 synthetic records in tmp_path/data, with its own
    temporary directory (tmp_path/systmp) and the module's Prefect home."""
    shutil.copytree(records, tmp_path / "data")
    systmp = tmp_path / "systmp"
    systmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(systmp))
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update(TMPDIR=str(systmp), PREFECT_HOME=str(prefect_home),
               PYTHONPATH=os.pathsep.join(filter(None, [str(SOURCE_ROOT), env.get("PYTHONPATH")])))
    return env, tmp_path


@pytest.fixture
def slow_release(synthetic):
    """(command, environment, output) of a release of the 60,000 synthetic records (MDAV on blocks: a masking
    stage of many seconds)."""
    env, tmp_path = synthetic
    spec = {"name": "slow", "input": {"path": "data", "format": "parquet"}, "id_column": "record_id",
            "variables": {"key": VARIABLES[:3], "continuous": VARIABLES},
            "steps": [{"method": "md", "params": {"k": 7, "group_size": 3, "block_size": 6000}}],
            "metrics": ["il"], "output": {"dir": "out"}, "seed": 1, "dask": {"workers": 2}}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    return sdc("release", tmp_path / "spec.yaml"), env, tmp_path / "out"


def sdc(*args) -> list[str]:
    """The command line of ``sdc ARGS`` from this worktree."""
    return [sys.executable, "-m", "sdc_tasks.cli", *map(str, args)]


def _masking(out: Path) -> bool:
    """Whether the release of ``out`` works on its first step (its hidden directory holds the step's work)."""
    return any((p / "_work" / "step-00").is_dir() for p in out.parent.glob(f".{out.name}.tmp.*"))


def _interrupted_run(command: list[str], env: dict, cwd: Path, ready: Callable[[], bool], sig: int,
                     to_group: bool, settle: float = 2) -> tuple[int, str, float, set[int]]:
    """Start ``command`` in its own session, wait until ``ready()`` and ``settle`` seconds more, send ``sig`` (to its
    process group or to it alone); return its exit status, its stderr, the seconds it took to end and every
    process it had started."""
    proc = subprocess.Popen(command, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True)
    reader.start()
    started: set[int] = set()
    try:
        deadline = time.monotonic() + 240
        while not ready():
            assert proc.poll() is None and time.monotonic() < deadline, "the run never got ready"
            started |= {p.pid for p in psutil.Process(proc.pid).children(recursive=True)}
            time.sleep(0.1)
        time.sleep(settle)
        started |= {p.pid for p in psutil.Process(proc.pid).children(recursive=True)}
        sent = time.monotonic()
        os.killpg(proc.pid, sig) if to_group else proc.send_signal(sig)
        code = proc.wait(60)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    reader.join(10)
    return code, "".join(lines), took, started


def _running(pids: set[int]) -> list[str]:
    """The command lines of the processes of ``pids`` still running 5 s from now (zombies are not; the
    multiprocessing resource tracker ends when it sees its parent gone)."""
    procs = []
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            procs.append(psutil.Process(pid))
    _, alive = psutil.wait_procs(procs, timeout=5)
    left = []
    for proc in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            if proc.status() != psutil.STATUS_ZOMBIE:
                left.append(" ".join(proc.cmdline()))
    return left


def _files(root: Path) -> list[str]:
    """Every file under ``root``, as paths relative to it."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def _check_clean_end(code: int, stderr: str, took: float, started: set[int], out: Path, expected: int,
                     command: str = "release", beside: tuple[str, ...] = ("spec.yaml",),
                     processes: bool = True) -> None:
    """The interrupted run's properties: its exit status, one ``interrupted:`` line naming ``command`` and no
    traceback, no process left (``processes``: it had started some), nothing beside the output but the run's inputs
    (``beside``: those besides the data), nothing in the scratch root and no file in the temporary directory."""
    assert code == expected, stderr[-3000:]
    assert took < 30
    assert [line for line in stderr.splitlines() if line.startswith(("interrupted:", "error:"))] == \
        [stderr.strip().splitlines()[-1]]
    assert stderr.strip().splitlines()[-1].startswith(f"interrupted: {command} stopped by SIG")
    assert "Traceback" not in stderr
    assert (bool(started) or not processes) and _running(started) == []
    assert sorted(p.name for p in out.parent.iterdir()) == sorted(["data", "systmp", *beside]), "left beside"
    assert list(O.scratch_root().iterdir()) == []
    systmp = out.parent / "systmp"
    assert [f for f in _files(systmp) if Path(f).name not in DASK_LOCKS] == []


def test_ctrl_c_stops_a_release_cleanly(slow_release):
    command, env, out = slow_release
    code, stderr, took, started = _interrupted_run(command, env, out.parent, lambda: _masking(out), signal.SIGINT,
                                                   to_group=True)
    _check_clean_end(code, stderr, took, started, out, 130)


def test_sigterm_to_the_process_group_stops_a_release_cleanly(slow_release):
    """As a service manager stops a unit: SIGTERM to every process of the group at once (the server among them)."""
    command, env, out = slow_release
    code, stderr, took, started = _interrupted_run(command, env, out.parent, lambda: _masking(out), signal.SIGTERM,
                                                   to_group=True)
    _check_clean_end(code, stderr, took, started, out, 143)


def test_sigterm_stops_a_release_cleanly_and_the_next_run_publishes(slow_release):
    command, env, out = slow_release
    code, stderr, took, started = _interrupted_run(command, env, out.parent, lambda: _masking(out), signal.SIGTERM,
                                                   to_group=False)
    _check_clean_end(code, stderr, took, started, out, 143)
    spec = yaml.safe_load((out.parent / "spec.yaml").read_text())
    spec["steps"] = [{"method": "rankswap", "params": {"p": 15}}]  # the same output, a quicker masking
    (out.parent / "spec.yaml").write_text(yaml.safe_dump(spec))
    next_run = subprocess.run(command, env=env, cwd=out.parent, capture_output=True, text=True, timeout=300)
    assert next_run.returncode == 0, next_run.stderr[-3000:]
    assert (out / "manifest.json").is_file()
    assert list(O.scratch_root().iterdir()) == []


# ---- the other commands: mask, evaluate, compare ----


def _workers_started(systmp: Path, workers: int = 2) -> bool:
    """Whether the workers of a run's local Dask cluster have started (each has its directory in the cluster's
    scratch directory)."""
    root = systmp / f"sdc-scratch-{os.getuid()}"
    return root.is_dir() and len([p for d in root.glob("dask.*") for p in d.rglob("worker-*") if p.is_dir()]) >= workers


def _noisy_copy(data: Path, out: Path) -> Path:
    """The records of ``data`` with the continuous variables shifted by noise, as one Parquet file ``out``."""
    frame = pd.read_parquet(data)
    rng = np.random.default_rng(5)
    spread = frame[VARIABLES].std().to_numpy()
    frame[VARIABLES] = frame[VARIABLES] + rng.normal(scale=spread, size=(len(frame), len(VARIABLES)))
    frame.to_parquet(out, index=False)
    return out


def command_of(name: str, tmp_path: Path) -> tuple[list[str], tuple[str, ...]]:
    """(command line of ``sdc NAME`` on the 60,000 synthetic records, writing tmp_path/out; its inputs beside the
    data in tmp_path)."""
    data, out = tmp_path / "data", tmp_path / "out"
    if name == "mask":
        return sdc("mask", "--input", data, "--method", "md", "--param", "k=7", "--param", "group_size=3", "--param",
                   "block_size=6000", "--out", out, "--workers", 2), ()
    if name == "evaluate":
        masked = _noisy_copy(data, tmp_path / "masked.parquet")
        return sdc("evaluate", "--original", data, "--masked", masked, "--out", out, "--workers", 2), \
            ("masked.parquet",)
    (tmp_path / "grid.yaml").write_text(yaml.safe_dump({"families": [
        {"label": "Mic", "method": "md", "params": {"group_size": 3, "block_size": 6000},
         "sweep": {"param": "k", "values": [5, 7]}}]}))
    return sdc("compare", "--input", data, "--grid", tmp_path / "grid.yaml", "--out", out), ("grid.yaml",)


@pytest.mark.parametrize("name, sig, to_group", [
    ("mask", signal.SIGINT, True), ("evaluate", signal.SIGTERM, False), ("compare", signal.SIGINT, True),
])
def test_an_interrupted_command_stops_cleanly(synthetic, name, sig, to_group):
    """As for a release: Ctrl-C (SIGINT to the group) or ``kill`` (SIGTERM to the command) while its cluster works
    ends it with one line and 128 + the signal, no process, no hidden output, no scratch and no record left. Every
    command stops through the same handler (``cli._reported``): each is interrupted once, and each way of
    interrupting (SIGINT to the group, SIGTERM to the command) is sent to a command's cluster at work at least once
    (the releases above take all three ways)."""
    env, tmp_path = synthetic
    command, inputs = command_of(name, tmp_path)
    code, stderr, took, started = _interrupted_run(command, env, tmp_path,
                                                   lambda: _workers_started(tmp_path / "systmp"), sig, to_group)
    _check_clean_end(code, stderr, took, started, tmp_path / "out", 128 + sig, command=name, beside=inputs)


def test_a_command_on_threads_of_its_own_process_stops_cleanly(synthetic):
    """Without --workers a small file is masked on threads of the command's own process: Ctrl-C ends it the same
    way, with no output, hidden directory or scratch left."""
    env, tmp_path = synthetic
    command, inputs = command_of("mask", tmp_path)
    command = command[:command.index("--workers")]
    code, stderr, took, started = _interrupted_run(command, env, tmp_path,
                                                   lambda: any(tmp_path.glob(".out.tmp.*")), signal.SIGINT, True)
    _check_clean_end(code, stderr, took, started, tmp_path / "out", 128 + signal.SIGINT, command="mask",
                     beside=inputs, processes=False)


# ---- Ctrl-C while the cluster starts; workers never take the terminal's Ctrl-C themselves ----


STARTING_HOOK = """
import os, pathlib, time
import sdc_tasks.cluster as cluster

class SlowStart(cluster.LocalCluster):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        pathlib.Path(os.environ["SDC_TEST_STARTED"]).touch()
        time.sleep(5)  # still starting: the workers run, the start has not returned

cluster.LocalCluster = SlowStart
"""


@pytest.mark.parametrize("sig, to_group", [(signal.SIGINT, True), (signal.SIGTERM, False)])
def test_a_signal_while_the_cluster_starts_ends_the_run_right_after(synthetic, sig, to_group):
    """Ctrl-C (SIGINT to the group; the workers do not take it themselves) or SIGTERM to the command while its
    workers start is not lost, nor does it break the start: it ends the run as soon as the start returns, the new
    cluster closed."""
    env, tmp_path = synthetic
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(STARTING_HOOK)
    marker = tmp_path / "hook" / "started"
    env = {**env, "SDC_TEST_STARTED": str(marker), "PYTHONPATH": f"{hook}{os.pathsep}{env['PYTHONPATH']}"}
    command, inputs = command_of("evaluate", tmp_path)
    code, stderr, took, started = _interrupted_run(command, env, tmp_path, marker.exists, sig, to_group, settle=0.5)
    _check_clean_end(code, stderr, took, started, tmp_path / "out", 128 + sig, command="evaluate",
                     beside=(*inputs, "hook"))


def test_workers_of_a_local_cluster_do_not_take_the_terminals_ctrl_c():
    """A SIGINT to a worker process (as the terminal sends one to the whole foreground group) leaves it working;
    the starting process's handler and signal mask are as before the start."""
    from sdc_tasks.cluster import dask_client

    handler = signal.getsignal(signal.SIGINT)
    with dask_client(workers=2) as client:
        pids = sorted(client.run(os.getpid).values())
        for pid in pids:
            os.kill(pid, signal.SIGINT)
        assert sorted(client.run(os.getpid).values()) == pids
        assert client.submit(sum, [1, 2, 3]).result() == 6
        assert signal.getsignal(signal.SIGINT) is handler
        assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, set())


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_the_deferred_block_is_raised_when_it_ends(sig):
    caught = []

    def handler(signum, frame):
        caught.append(signum)
        raise KeyboardInterrupt

    previous = signal.signal(sig, handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            with O.interruption_deferred():
                os.kill(os.getpid(), sig)
                time.sleep(0.2)
                assert caught == []
        assert caught == [sig] and signal.getsignal(sig) is handler
    finally:
        signal.signal(sig, previous)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_taken_inside_a_finalizer_still_stops_the_run(sig, capsys):
    """A stop signal handled while a finalizer or a garbage-collector callback runs (Dask's GC diagnosis, seen in a
    run of this suite: the evaluation went on to publish, exit 0): Python drops the exception raised there, and the
    command's handler delivers the signal again, so that Interrupted reaches the run (in a blocking wait) at once with
    nothing printed."""
    from sdc_tasks.cli import Interrupted, _interruptible

    class SignalledWhileFinalized:
        def __del__(self):
            os.kill(os.getpid(), sig)
            for _ in range(1000):  # the handler runs here, inside the finalizer
                pass

    import logging

    previous = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM), sys.unraisablehook)
    asyncio_filters = list(logging.getLogger("asyncio").filters)
    try:
        start = time.monotonic()
        with pytest.raises(Interrupted) as stopped:
            with _interruptible():
                SignalledWhileFinalized()
                time.sleep(10)  # a blocking wait, as for a cluster's results
                pytest.fail("the run went on after the signal")
        assert stopped.value.signum == sig and time.monotonic() - start < 2
        with pytest.raises(Interrupted) as stopped:  # the block ends before the signal is sent again: raised at its end
            with _interruptible():
                SignalledWhileFinalized()
        assert stopped.value.signum == sig
    finally:
        logging.getLogger("asyncio").filters[:] = asyncio_filters  # the handler's filter, for a stopping process
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM), sys.unraisablehook) == previous
    assert "Exception ignored" not in capsys.readouterr().err


def test_a_flow_handler_s_signal_taken_inside_a_finalizer_reaches_that_handler_again(capsys):
    """While a flow runs, Prefect's SIGTERM handler replaces the command's and raises its TerminationSignal; taken
    inside a garbage-collector callback (seen in a run of this suite: the release went on to publish, exit 0), it
    is dropped, and the command's hook sends the signal again to the handler installed then."""
    from prefect.exceptions import TerminationSignal
    from prefect.utilities.engine import _prefect_sigterm_handler

    from sdc_tasks.cli import _interruptible

    class SignalledWhileFinalized:
        def __del__(self):
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):  # the handler runs here, inside the finalizer
                pass

    previous = (signal.getsignal(signal.SIGTERM), sys.unraisablehook)
    start = time.monotonic()
    with pytest.raises(TerminationSignal) as stopped:
        with _interruptible():
            command_handler = signal.signal(signal.SIGTERM, _prefect_sigterm_handler)
            try:
                SignalledWhileFinalized()
                time.sleep(10)  # a blocking wait, as for a cluster's results
                pytest.fail("the run went on after the signal")
            finally:
                signal.signal(signal.SIGTERM, command_handler)
    assert stopped.value.signal == signal.SIGTERM and time.monotonic() - start < 2
    assert (signal.getsignal(signal.SIGTERM), sys.unraisablehook) == previous
    assert "Exception ignored" not in capsys.readouterr().err


def test_an_interrupted_run_does_not_report_the_tasks_its_tear_down_abandons(caplog):
    """After the stop signal, asyncio's "Task exception was never retrieved" (a comm handler of the stopping
    scheduler, seen once on a loaded machine) is dropped; asyncio's other records are kept."""
    import asyncio
    import gc
    import logging

    from sdc_tasks.cli import _AbandonedTasks

    async def failing() -> None:
        raise KeyError("<TaskState 'x' released> forgotten")

    async def abandon() -> None:
        asyncio.ensure_future(failing())
        await asyncio.sleep(0.05)

    gc.collect()  # earlier tests' garbage: a future of theirs never retrieved reports when collected, not in this test
    log = logging.getLogger("asyncio")
    dropped = _AbandonedTasks()
    log.addFilter(dropped)
    try:
        with caplog.at_level(logging.ERROR, logger="asyncio"):
            asyncio.run(abandon())
            gc.collect()
            log.error("kept")
    finally:
        log.removeFilter(dropped)
    assert [r.getMessage() for r in caplog.records if r.name == "asyncio"] == ["kept"]


def test_dask_s_reports_of_released_work_are_dropped(caplog):
    """Dask's traceback for a worker's request about a P2P shuffle that failed: ``shuffle_restrict_task`` about a
    shuffle the in-process scheduler already forgot (the run released it: seen after a SIGTERM in CI and after a
    SIGINT here), ``shuffle_barrier`` with a worker gone (after a SIGTERM to the process group here), and asyncio's
    report of a gather the client ended are dropped; the same loggers' other errors, another op's failure included,
    are kept."""
    import logging

    from distributed.client import AllExit

    from sdc_tasks.cluster import _ReleasedWorkReports

    def logged(name: str, error: Exception, message: str, *args) -> None:
        try:
            raise error
        except type(error):
            logging.getLogger(name).exception(message, *args)

    dropped = _ReleasedWorkReports()
    loggers = [logging.getLogger(name) for name in _ReleasedWorkReports.LOGGERS]
    for log in loggers:
        log.addFilter(dropped)
    try:
        with caplog.at_level(logging.ERROR):
            logged("distributed.core", KeyError("570b984c58d0a1fa8a85cbdf520c3b4d"),
                   "Exception while handling op %s", "shuffle_restrict_task")
            logged("asyncio", AllExit(), "Task exception was never retrieved")
            logged("distributed.core", KeyError("x"), "Exception while handling op %s", "gather")
            logged("distributed.core", RuntimeError("Worker ['tcp://127.0.0.1:40000'] left during shuffle"),
                   "Exception while handling op %s", "shuffle_barrier")
            logged("distributed.core", ValueError("x"), "Exception while handling op %s", "register_worker")
            logged("asyncio", KeyError("x"), "Task exception was never retrieved")
    finally:
        for log in loggers:
            log.removeFilter(dropped)
    assert [(r.name, r.getMessage()) for r in caplog.records] == [
        ("distributed.core", "Exception while handling op gather"),
        ("distributed.core", "Exception while handling op register_worker"),
        ("asyncio", "Task exception was never retrieved")]
