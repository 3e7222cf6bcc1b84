"""``sdc release`` interrupted in the middle of its masking stage, as by Ctrl-C (SIGINT to its whole process group,
as a terminal sends it), by ``kill`` (SIGTERM to the command alone) or by a service manager (SIGTERM to the whole
group): it ends within seconds with one
``interrupted:`` line and exit status 130 / 143, after stopping every process it started (the temporary Prefect
server, the Dask workers) and removing its hidden output directory, lock and scratch directories; no file is left
in the temporary directory but Dask's empty lock files, and a following run publishes normally."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import pytest
import yaml

from sdc_tasks import outputs as O
from sdc_tasks.generate import write_synthetic

VARIABLES = ["AFNLWGT", "AGI", "EMCONTRB", "FEDTAX", "PTOTVAL", "STATETAX", "TAXINC", "POTHVAL", "INTVAL",
             "PEARNVAL", "FICA", "WSALVAL", "ERNVAL"]
DASK_LOCKS = {"global.lock", "purge.lock"}  # empty lock files Dask keeps in the temporary directory


@pytest.fixture
def slow_release(tmp_path, monkeypatch):
    """(command, environment, output) of a release of 60,000 synthetic records (MDAV on blocks: a masking stage of
    many seconds) with its own temporary directory and Prefect home under tmp_path."""
    write_synthetic(tmp_path / "data", 60_000, seed=1)
    spec = {"name": "slow", "input": {"path": "data", "format": "parquet"}, "id_column": "record_id",
            "variables": {"key": VARIABLES[:3], "continuous": VARIABLES},
            "steps": [{"method": "md", "params": {"k": 7, "group_size": 3, "block_size": 6000}}],
            "metrics": ["il"], "output": {"dir": "out"}, "seed": 1, "dask": {"workers": 2}}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    systmp = tmp_path / "systmp"
    systmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(systmp))
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update(TMPDIR=str(systmp), PREFECT_HOME=str(tmp_path / "prefect-home"),
               PYTHONPATH=os.pathsep.join(filter(None, [str(Path(__file__).parents[1]), env.get("PYTHONPATH")])))
    return [sys.executable, "-m", "sdc_tasks.cli", "release", str(tmp_path / "spec.yaml")], env, tmp_path / "out"


def _masking(out: Path) -> bool:
    """Whether the release of ``out`` works on its first step (its hidden directory holds the step's work)."""
    return any((p / "_work" / "step-00").is_dir() for p in out.parent.glob(f".{out.name}.tmp.*"))


def _interrupted_run(command: list[str], env: dict, out: Path, sig: int,
                     to_group: bool) -> tuple[int, str, float, set[int]]:
    """Start ``command`` in its own session, wait until it masks, send ``sig`` (to its process group or to it
    alone); return its exit status, its stderr, the seconds it took to end and every process it had started."""
    proc = subprocess.Popen(command, env=env, cwd=Path(command[-1]).parent, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True)
    reader.start()
    started: set[int] = set()
    try:
        deadline = time.monotonic() + 240
        while not _masking(out):
            assert proc.poll() is None and time.monotonic() < deadline, "the release never reached its masking"
            started |= {p.pid for p in psutil.Process(proc.pid).children(recursive=True)}
            time.sleep(0.1)
        time.sleep(2)
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


def _check_clean_end(code: int, stderr: str, took: float, started: set[int], out: Path, expected: int) -> None:
    """The interrupted run's properties: its exit status, one ``interrupted:`` line and no traceback, no process
    left, nothing beside the output, nothing in the scratch root and no file in the temporary directory."""
    assert code == expected, stderr[-3000:]
    assert took < 30
    assert [line for line in stderr.splitlines() if line.startswith(("interrupted:", "error:"))] == \
        [stderr.strip().splitlines()[-1]]
    assert stderr.strip().splitlines()[-1].startswith("interrupted: release stopped by SIG")
    assert "Traceback" not in stderr
    assert started and _running(started) == []
    assert sorted(p.name for p in out.parent.iterdir()) == ["data", "prefect-home", "spec.yaml", "systmp"]
    assert list(O.scratch_root().iterdir()) == []
    systmp = out.parent / "systmp"
    assert [f for f in _files(systmp) if Path(f).name not in DASK_LOCKS] == []


def test_ctrl_c_stops_a_release_cleanly(slow_release):
    command, env, out = slow_release
    code, stderr, took, started = _interrupted_run(command, env, out, signal.SIGINT, to_group=True)
    _check_clean_end(code, stderr, took, started, out, 130)


def test_sigterm_to_the_process_group_stops_a_release_cleanly(slow_release):
    """As a service manager stops a unit: SIGTERM to every process of the group at once (the server among them)."""
    command, env, out = slow_release
    code, stderr, took, started = _interrupted_run(command, env, out, signal.SIGTERM, to_group=True)
    _check_clean_end(code, stderr, took, started, out, 143)


def test_sigterm_stops_a_release_cleanly_and_the_next_run_publishes(slow_release):
    command, env, out = slow_release
    code, stderr, took, started = _interrupted_run(command, env, out, signal.SIGTERM, to_group=False)
    _check_clean_end(code, stderr, took, started, out, 143)
    demo = subprocess.run([sys.executable, "-m", "sdc_tasks.cli", "demo", "--out", str(out)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert demo.returncode == 0, demo.stderr[-3000:]
    assert (out / "manifest.json").is_file()
    assert list(O.scratch_root().iterdir()) == []
