"""A release killed outright (SIGKILL) in the middle of its work: the next run of the tool, whatever its output,
ends the temporary Prefect server the killed run had started and removes the private work directory that held
original records, so nothing of it is left running or lying around."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from processes import held_within

from sdc_tasks import outputs as O


def _running(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (OSError, IndexError):
        return False


def test_a_killed_release_leaves_no_server_and_no_records_once_another_run_starts(tmp_path, monkeypatch):
    systmp = tmp_path / "systmp"
    systmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(systmp))
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update(TMPDIR=str(systmp), PREFECT_HOME=str(tmp_path / "prefect-home"))
    out = tmp_path / "release"
    proc = subprocess.Popen([sys.executable, "-m", "sdc_tasks.cli", "demo", "--out", str(out)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    root = O.scratch_root()

    def writing() -> bool:
        return any(p.name.startswith(f".{out.name}.tmp.") for p in tmp_path.iterdir()) and \
            any(p.name.startswith(f"{O.PROCESS}.") for p in root.iterdir())

    try:
        assert held_within(writing, 180), "the release never started writing"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    (note,) = [p for p in root.iterdir() if p.name.startswith(f"{O.PROCESS}.")]
    server = O._json_file(note)["pid"]
    assert _running(server)  # orphaned by the kill, still listening
    assert any(p.name.startswith(f".{out.name}.tmp.") for p in tmp_path.iterdir())

    with O.atomic_output_dir(tmp_path / "another-output", inputs=[]) as tmp:
        (tmp / "part-0.parquet").write_text("another run")
    assert held_within(lambda: not _running(server), 15)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["another-output", "prefect-home", "systmp"]
    assert list(root.iterdir()) == []
