"""Faults of a release's environment, injected: a full, read-only or vanishing output, an ``--out`` that is a file
or someone else's directory, an unreachable or lost Dask scheduler, workers that die, a Prefect API that does not
answer, and an input changed or reached through a symbolic link. Each ends with one error naming the resource
(exit 2 from the command line), nothing published, no hidden directory left beside the output, and the computed
metrics kept when only writing failed."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Iterator

import dask
import pytest
import yaml
from distributed import Client, LocalCluster, default_client
from processes import SOURCE_ROOT
from typer.testing import CliRunner

import sdc_tasks.outputs
from sdc_tasks.cli import app
from sdc_tasks.cluster import WorkersLost, dask_client
from sdc_tasks.errors import InputError
from sdc_tasks.files import tree_checksums
from sdc_tasks.generate import bundled_path
from sdc_tasks.pipeline.gate import gate_checks
from sdc_tasks.pipeline.run import LOG, Stages, released, run_release
from sdc_tasks.pipeline.spec import load_spec
from sdc_tasks.pipeline.stages import mask_stage


@pytest.fixture(scope="module")
def client():
    """An in-process Dask cluster (threads) shared by this module's runs."""
    with LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None) as cluster, \
            Client(cluster, set_as_default=False) as c:
        yield c


@pytest.fixture
def systmp(tmp_path, monkeypatch) -> Path:
    """The system's temporary directory (scratch, kept metrics) moved into this test's directory."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "systmp"))
    (tmp_path / "systmp").mkdir()
    return tmp_path / "systmp"


def spec_file(tmp_path: Path, **changes) -> Path:
    """The demo spec on a copy of the Census file in tmp_path/data, output tmp_path/release, with ``changes``."""
    spec = yaml.safe_load(bundled_path("demo.yaml").read_text())
    (tmp_path / "data").mkdir(exist_ok=True)
    source = tmp_path / "data" / "census.csv"
    shutil.copyfile(bundled_path("census.csv"), source)
    spec["input"]["path"] = str(source)
    spec["output"] = {"dir": str(tmp_path / "release"), "overwrite": False}
    spec.update(changes)
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


@contextlib.contextmanager
def on(client: Client):
    """``client`` as the run's Dask client (left open)."""
    with client.as_current():
        yield client


IL_ONLY = {"metrics": ["il"], "gate": {"max": {"IL": 100.0}, "min_group_size": 3}}
"""Spec changes for a run whose fault does not depend on the measures: information loss only (the disclosure-risk
measures and their pictures take most of a demo run)."""


def run_with(tmp_path: Path, client: Client, changes: dict | None = None, **stages):
    """Run the demo release with the spec ``changes`` and some stages replaced (``Stages`` fields)."""
    return released(load_spec(spec_file(tmp_path, **(changes or {}))), on(client), Stages(**stages), LOG)


def left_beside(out: Path) -> list[str]:
    """What a run left beside its output: the output itself and any hidden sibling or lock."""
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith((out.name, f".{out.name}")))


def kept_metrics_of(message: str) -> dict:
    """The metrics kept where the error message says."""
    path = Path(message.split("its metrics were kept in ")[1].strip())
    return json.loads(path.read_text())


# ---- the input is the input ----


def test_input_changed_during_the_run_publishes_nothing(tmp_path, client, systmp):
    source = tmp_path / "data" / "census.csv"

    def gate(spec, metrics):
        source.write_text(source.read_text().replace("\n", "\r\n", 1))
        return gate_checks(spec, metrics)

    with pytest.raises(InputError, match=f"^input changed during the run: {source};"):
        run_with(tmp_path, client, IL_ONLY, gate=gate)
    assert left_beside(tmp_path / "release") == []


def test_input_touched_during_the_run_is_a_change(tmp_path, client, systmp):
    source = tmp_path / "data" / "census.csv"

    def gate(spec, metrics):
        info = source.stat()
        os.utime(source, ns=(info.st_atime_ns, info.st_mtime_ns + 1_000_000_000))
        return gate_checks(spec, metrics)

    with pytest.raises(InputError, match="input changed during the run"):
        run_with(tmp_path, client, IL_ONLY, gate=gate)
    assert left_beside(tmp_path / "release") == []


def test_input_rewritten_with_its_old_size_and_time_is_a_change(tmp_path, client, systmp):
    """Same length, one byte different, the modification time set back: the inode change time still tells."""
    source = tmp_path / "data" / "census.csv"

    def gate(spec, metrics):
        info, data = source.stat(), bytearray(source.read_bytes())
        data[-2] = ord("8") if data[-2] != ord("8") else ord("7")
        source.write_bytes(bytes(data))
        os.utime(source, ns=(info.st_atime_ns, info.st_mtime_ns))
        assert source.stat().st_size == info.st_size and source.stat().st_mtime_ns == info.st_mtime_ns
        return gate_checks(spec, metrics)

    with pytest.raises(InputError, match="input changed during the run"):
        run_with(tmp_path, client, IL_ONLY, gate=gate)
    assert left_beside(tmp_path / "release") == []


def test_output_linked_to_the_inputs_directory_never_touches_the_input(tmp_path, client, systmp):
    spec = load_spec(spec_file(tmp_path))
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "data", target_is_directory=True)
    before = tree_checksums(tmp_path / "data")
    with pytest.raises(InputError, match=f"contains the input {tmp_path / 'data' / 'census.csv'}"):
        run_release(spec, client=client, out_dir=link, overwrite=True)
    with pytest.raises(InputError, match="contains the input"):  # the link given as is, unresolved
        sdc_tasks.outputs.check_output(link, [spec.input_path])
    assert tree_checksums(tmp_path / "data") == before and link.is_symlink()


# ---- the output: full, read-only, vanishing, a file, someone else's ----


def test_disk_full_while_writing_the_report_keeps_the_metrics(tmp_path, client, systmp):
    def full(summary, root):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(root / "report.html"))

    with pytest.raises(InputError) as caught:
        run_with(tmp_path, client, publish=full)
    message = str(caught.value)
    assert message.startswith(f"cannot write the release to {tmp_path / 'release'}: No space left on device")
    assert "nothing was published" in message and "\n" not in message
    metrics = kept_metrics_of(message)
    assert {"IL", "DLD", "ID"} <= metrics.keys() and str(systmp) in message
    assert left_beside(tmp_path / "release") == []


def test_disk_full_while_masking_names_the_output_and_leaves_nothing(tmp_path, client, systmp):
    def full(spec, i, paths):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(paths.work(i)))

    with pytest.raises(InputError, match=f"cannot write the release to {tmp_path / 'release'}: No space left on "
                                         r"device .*; nothing was published$"):
        run_with(tmp_path, client, mask=full)
    assert left_beside(tmp_path / "release") == []


def test_read_only_output_at_publication_keeps_the_metrics(tmp_path, client, systmp, monkeypatch):
    real_rename = os.rename

    def read_only(src, dst):
        if Path(dst) == tmp_path / "release":
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(dst))
        return real_rename(src, dst)

    monkeypatch.setattr(sdc_tasks.outputs.os, "rename", read_only)
    with pytest.raises(InputError, match="cannot publish output .*Read-only file system") as caught:
        run_with(tmp_path, client, IL_ONLY)
    assert "IL" in kept_metrics_of(str(caught.value))
    assert left_beside(tmp_path / "release") == []


def test_output_removed_by_someone_else_before_publication(tmp_path, client, systmp):
    def gate(spec, metrics):
        hidden = [p for p in tmp_path.iterdir() if p.name.startswith(".release.tmp.")]
        shutil.rmtree(hidden[0])
        return gate_checks(spec, metrics)

    with pytest.raises(InputError, match=f"cannot write the release to {tmp_path / 'release'}: No such file") \
            as caught:
        run_with(tmp_path, client, IL_ONLY, gate=gate)
    assert "IL" in kept_metrics_of(str(caught.value))
    assert left_beside(tmp_path / "release") == []


def test_out_that_is_a_file_or_someone_elses_directory_is_refused_untouched(tmp_path, client, systmp):
    spec = load_spec(spec_file(tmp_path))
    notes = tmp_path / "notes.txt"
    notes.write_text("keep")
    with pytest.raises(InputError, match=f"output {notes} exists and is not a directory"):
        run_release(spec, client=client, out_dir=notes, overwrite=True)
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "thesis.tex").write_text("keep")
    with pytest.raises(InputError, match=f"output directory {theirs} exists and was not written by sdc-pipeline"):
        run_release(spec, client=client, out_dir=theirs, overwrite=True)
    assert notes.read_text() == "keep" and [p.name for p in theirs.iterdir()] == ["thesis.tex"]
    assert left_beside(notes) == ["notes.txt"] and left_beside(theirs) == ["theirs"]


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("mount"), reason="mounts a tmpfs (root only)")
def test_a_really_full_disk_ends_in_one_line_and_leaves_nothing(tmp_path, client, systmp):
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)]).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        spec = load_spec(spec_file(tmp_path))
        with pytest.raises(InputError, match=f"^cannot write .*{disk / 'release'}") as caught:
            run_release(spec, client=client, out_dir=disk / "release")
        assert "\n" not in str(caught.value) and os.listdir(disk) == []
    finally:
        subprocess.run(["umount", str(disk)], check=True)


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("mount"), reason="bind-mounts read-only (root only)")
def test_a_really_read_only_output_parent_is_refused_naming_it(tmp_path, client, systmp):
    shelf = tmp_path / "shelf"
    shelf.mkdir()
    if subprocess.run(["mount", "--bind", str(shelf), str(shelf)]).returncode:
        pytest.skip("cannot bind-mount here")
    try:
        if subprocess.run(["mount", "-o", "remount,bind,ro", str(shelf)]).returncode:
            pytest.skip("cannot remount read-only here")
        with pytest.raises(InputError, match=f"cannot create the output's lock {shelf / '.release.lock'}: "
                                             "Read-only file system"):
            run_release(load_spec(spec_file(tmp_path)), client=client, out_dir=shelf / "release")
        assert os.listdir(shelf) == []
    finally:
        subprocess.run(["umount", str(shelf)], check=True)


# ---- the scheduler ----


def test_unreachable_scheduler_is_one_error_within_seconds(tmp_path, systmp):
    spec = load_spec(spec_file(tmp_path), {"dask.address": "tcp://127.0.0.1:1"})
    started = time.monotonic()
    with pytest.raises(InputError, match="could not connect to the Dask scheduler at tcp://127.0.0.1:1"):
        run_release(spec)
    assert time.monotonic() - started < 15 and left_beside(tmp_path / "release") == []


def test_scheduler_lost_mid_run_names_it_and_publishes_nothing(tmp_path, systmp):
    cluster = LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None)
    lost = Client(cluster, set_as_default=False)
    address = cluster.scheduler_address

    def mask(spec, i, paths):
        cluster.close()
        return mask_stage(spec, i, paths)

    try:
        with pytest.raises(InputError, match=f"^lost the Dask scheduler {address} during the run .*; nothing "
                                             "was published$"):
            run_with(tmp_path, lost, mask=mask)
    finally:
        lost.close()
        cluster.close()
    assert left_beside(tmp_path / "release") == []


async def never_restarted() -> None:
    """A nanny's ``instantiate`` that starts no worker process."""


def test_every_worker_killed_mid_run_ends_it_naming_why_and_publishes_nothing(tmp_path, systmp):
    def mask(spec, i, paths):
        client = default_client()
        for nanny in client.cluster.workers.values():
            nanny.instantiate = never_restarted  # as when the nanny cannot start a worker any more
        for pid in client.run(os.getpid).values():
            os.kill(pid, signal.SIGKILL)
        return mask_stage(spec, i, paths)

    spec = load_spec(spec_file(tmp_path, **IL_ONLY))
    started = time.monotonic()
    with dask.config.set({"distributed.scheduler.no-workers-timeout": "1s"}), \
            pytest.raises(InputError, match=r"^no Dask worker was left alive for 1 s \(task .*\): workers are killed "
                                             r"when their memory runs out; .*; nothing was published$"):
        released(spec, dask_client(workers=1), Stages(mask=mask), LOG)
    assert time.monotonic() - started < 60 and left_beside(tmp_path / "release") == []


def test_a_task_that_kills_its_worker_each_time_is_one_error_naming_the_task():
    def fatal():
        os._exit(1)

    with dask.config.set({"distributed.scheduler.allowed-failures": 1}), \
            pytest.raises(WorkersLost, match=r"^task 'fatal-.*' killed the Dask worker that ran it, 2 times in a "
                                             r"row: .*Worker memory and spilling"), \
            dask_client(workers=1) as client:
        client.submit(fatal).result()


# ---- from the command line ----


def sdc(*args, env: dict | None = None, timeout: int = 240) -> subprocess.CompletedProcess:
    """Run the ``sdc`` command of this session's code (killed after ``timeout`` seconds) in an empty directory of its
    own: not a checkout, whose copy ``-m`` would import first, nor the system's temporary directory, where ``-m``
    would import any stray module before the standard library's (a ``re.py`` there broke Python's start)."""
    with tempfile.TemporaryDirectory() as cwd:
        return subprocess.run([sys.executable, "-m", "sdc_tasks.cli", *map(str, args)], capture_output=True,
                              text=True, timeout=timeout, cwd=cwd,
                              env={**os.environ, "PYTHONPATH": str(SOURCE_ROOT), **(env or {})})


def test_cli_evaluate_out_on_a_full_disk_exits_2_in_one_line(tmp_path, no_cluster, monkeypatch):
    real_write = Path.write_text

    def full(self, *args, **kwargs):
        if self.name.startswith(".metrics.json.tmp."):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))
        return real_write(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", full)
    census = bundled_path("census.csv")
    result = CliRunner().invoke(app, ["evaluate", "--original", str(census), "--masked", str(census), "--families",
                                      "il", "--out", str(tmp_path / "metrics.json")])
    assert result.exit_code == 2 and result.output.startswith("error: [Errno 28] No space left on device: ")
    assert len(result.output.strip().splitlines()) == 1 and os.listdir(tmp_path) == []


def test_cli_prefect_api_that_does_not_answer_exits_2_in_one_line(tmp_path):
    result = sdc("release", spec_file(tmp_path), env={"PREFECT_API_URL": "http://127.0.0.1:1/api"})
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]
    assert result.stderr.startswith("error: the Prefect API at http://127.0.0.1:1/api (PREFECT_API_URL) does not "
                                    "answer")
    assert left_beside(tmp_path / "release") == []


@pytest.fixture
def silent_api():
    """The URL of a "Prefect API" that accepts TCP connections and never answers (a hung server, a black-holing
    proxy); the connections are held open until the test ends."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                held.append(listener.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/api"
    finally:
        stop.set()
        thread.join(5)
        for conn in held:
            conn.close()
        listener.close()


def test_a_prefect_api_that_never_answers_is_refused_naming_it(silent_api):
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from flows.server import HEALTH_SECONDS, check_api

    with temporary_settings({PREFECT_API_URL: silent_api}), pytest.raises(InputError) as err:
        check_api(silent_api)
    assert str(err.value) == (f"the Prefect API at {silent_api} (PREFECT_API_URL) does not answer within "
                              f"{HEALTH_SECONDS} s (ReadTimeout): start that server, or unset PREFECT_API_URL to use a "
                              "temporary one")


@contextlib.contextmanager
def _no_server_left(home: Path, **settings) -> Iterator[None]:
    """For the block, Prefect settings with no server configured (a run starts its temporary one), PREFECT_HOME at
    ``home`` and ``settings`` (setting name: value); after it, no process it started is left."""
    import prefect.settings as ps
    import psutil

    before = {p.pid for p in psutil.Process().children(recursive=True)}
    updates = {ps.PREFECT_HOME: home, ps.PREFECT_SERVER_EPHEMERAL_ENABLED: True,
               **{getattr(ps, name): value for name, value in settings.items()}}
    with ps.temporary_settings(updates, restore_defaults={ps.PREFECT_API_URL}):
        yield
    assert {p.pid for p in psutil.Process().children(recursive=True)} - before == set()


def test_a_temporary_server_that_does_not_answer_in_time_is_stopped_and_named(tmp_path):
    """The temporary server is given PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS to answer (1 s here, less than
    it takes to start): the run ends with a TimeoutError naming the setting, and the server's process is gone."""
    from flows.server import temporary_server

    with _no_server_left(tmp_path, PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS=1), \
            pytest.raises(TimeoutError, match=r"^Prefect's temporary server did not answer within 1 s \(still "
                                              r"starting\); set PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"):
        with temporary_server():
            pytest.fail("the block ran without a server")


def test_an_interruption_while_the_temporary_server_starts_stops_it(tmp_path):
    """The run's imports are done while its temporary server starts (``meanwhile``); an interruption or an error
    there stops the server's process before it propagates."""
    from flows.server import temporary_server

    def interrupted() -> None:
        raise KeyboardInterrupt

    with _no_server_left(tmp_path), pytest.raises(KeyboardInterrupt):
        with temporary_server(meanwhile=interrupted):
            pytest.fail("the block ran after an interrupted start")


def test_cli_prefect_api_that_accepts_but_never_answers_exits_2_in_one_line(tmp_path, silent_api):
    """Prefect's own client would wait its request timeout (60 s) and retry 5 times; the health check tries once,
    for a few seconds (the command's time limit here is well under Prefect's waits)."""
    result = sdc("release", spec_file(tmp_path), env={"PREFECT_API_URL": silent_api}, timeout=90)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        f"error: the Prefect API at {silent_api} (PREFECT_API_URL) does not answer within 5 s (ReadTimeout): start "
        "that server, or unset PREFECT_API_URL to use a temporary one"]
    assert left_beside(tmp_path / "release") == []


@pytest.fixture
def session_api(prefect_harness) -> dict:
    """The environment naming the session's Prefect test server (PREFECT_API_URL): a command given it starts no
    temporary server of its own (that start is tested by test_interruption and test_killed_release)."""
    from prefect.settings import PREFECT_API_URL

    return {"PREFECT_API_URL": PREFECT_API_URL.value()}


def test_cli_input_changed_exits_2_in_one_line(tmp_path, session_api, dask_scheduler):
    hook = tmp_path / "sitecustomize.py"
    hook.write_text(
        "import pathlib, sdc_tasks.pipeline.stages as s\n"
        "_write = s.write_stage\n"
        "def write_stage(spec, i, paths):\n"
        "    path = pathlib.Path(spec.input_path)\n"
        "    path.write_bytes(path.read_bytes() + b'\\n')\n"
        "    return _write(spec, i, paths)\n"
        "s.write_stage = write_stage\n")
    result = sdc("release", spec_file(tmp_path, **IL_ONLY), "--dask-address", dask_scheduler,
                 env={"PYTHONPATH": f"{tmp_path}:{SOURCE_ROOT}", **session_api})
    assert result.returncode == 2, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert errors == [f"error: input changed during the run: {tmp_path / 'data' / 'census.csv'}; nothing was "
                      "published (run again on a file that stays as it is)"]
    assert "sdc_tasks.errors.InputError:" not in result.stderr  # Prefect logs the failed flow run untraced
    assert left_beside(tmp_path / "release") == []


def test_cli_unreachable_dask_address_exits_2_in_one_line(tmp_path, session_api):
    result = sdc("release", spec_file(tmp_path), "--dask-address", "tcp://127.0.0.1:1", env=session_api)
    assert result.returncode == 2, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith("error: could not connect to the Dask scheduler at "
                                                     "tcp://127.0.0.1:1 within 5 s")
    assert "sdc_tasks.errors.InputError:" not in result.stderr and left_beside(tmp_path / "release") == []
