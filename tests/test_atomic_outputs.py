"""Outputs appear whole or not at all, even when the writing process is killed outright (SIGKILL): the next run
on the same output removes what the killed one left and restores an output it had moved aside."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from sdc_tasks.io import InputError, atomic_output_dir, atomic_output_file, recover_interrupted

WRITER = """
import sys, time
from pathlib import Path
from sdc_tasks.io import atomic_output_dir, atomic_output_file
target, kind = Path(sys.argv[1]), sys.argv[2]
with (atomic_output_dir(target, overwrite=True) if kind == "dir" else atomic_output_file(target, overwrite=True)) as tmp:
    if kind == "dir":
        (tmp / "part-0.parquet").write_text("half of a release")
    else:
        tmp.write_text("half of a file")
    print("writing", flush=True)
    time.sleep(600)
"""


def killed_while_writing(target: Path, kind: str) -> None:
    """Start a process writing ``target`` and SIGKILL it in the middle of its write."""
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(target), kind], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "writing"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)


def hidden_siblings(target: Path) -> list[str]:
    return sorted(p.name for p in target.parent.iterdir() if p.name.startswith(f".{target.name}."))


def dead_pid() -> int:
    """The id of a process that has exited."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(30)
    return proc.pid


@pytest.mark.parametrize("kind", ["dir", "file"])
def test_killed_writer_leaves_no_output_and_the_next_run_cleans_up(tmp_path, kind):
    target = tmp_path / ("release" if kind == "dir" else "masked.csv")
    killed_while_writing(target, kind)
    assert not target.exists()
    assert len(hidden_siblings(target)) == 1  # what the killed run was writing
    writer = atomic_output_dir(target) if kind == "dir" else atomic_output_file(target)
    with writer as tmp:
        if kind == "dir":
            (tmp / "part-0.parquet").write_text("whole release")
        else:
            tmp.write_text("whole file")
    assert hidden_siblings(target) == []
    content = (target / "part-0.parquet" if kind == "dir" else target).read_text()
    assert content.startswith("whole")


def test_killed_replacement_keeps_the_previous_release(tmp_path):
    target = tmp_path / "release"
    with atomic_output_dir(target) as tmp:
        (tmp / "manifest.json").write_text("first")
    killed_while_writing(target, "dir")
    assert (target / "manifest.json").read_text() == "first"
    recover_interrupted(target)
    assert hidden_siblings(target) == []
    assert (target / "manifest.json").read_text() == "first"


def test_previous_output_moved_aside_by_a_killed_run_is_restored(tmp_path):
    target = tmp_path / "release"
    aside = tmp_path / f".release.old-{dead_pid()}-0123456789ab"
    aside.mkdir()
    (aside / "manifest.json").write_text("first")
    with pytest.raises(InputError, match="already exists"):
        with atomic_output_dir(target):
            pass
    assert (target / "manifest.json").read_text() == "first" and hidden_siblings(target) == []


def test_siblings_of_a_live_run_are_left_alone(tmp_path):
    target = tmp_path / "release"
    live = tmp_path / f".release.tmp-{os.getpid()}-0123456789ab"
    live.mkdir()
    recover_interrupted(target)
    assert live.exists()
