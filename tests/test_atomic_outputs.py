"""Outputs appear whole or not at all, even when the writing process is killed outright (SIGKILL): the next run
on the same output removes what the killed one left and restores an output it had moved aside. Outputs never
destroy an input or another release: the guard, the ownership marker, the cross-host lock, exact sibling names,
private work directories and the cleanup of scratch directories left by dead processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
import pytest
from processes import held_within
from typer.testing import CliRunner

from sdc_tasks import outputs as O
from sdc_tasks.cli import app
from sdc_tasks.errors import InputError
from sdc_tasks.files import tree_checksums
from sdc_tasks.generate import bundled_path
from sdc_tasks.outputs import atomic_output_dir, atomic_output_file, output_lock, recover_interrupted

WRITER = """
import sys, time
from pathlib import Path
from sdc_tasks.outputs import atomic_output_dir, atomic_output_file
target, kind = Path(sys.argv[1]), sys.argv[2]
writer = atomic_output_dir if kind == "dir" else atomic_output_file
with writer(target, overwrite=True, inputs=[]) as tmp:
    if kind == "dir":
        (tmp / "part-0.parquet").write_text("half of a release")
    else:
        tmp.write_text("half of a file")
    print("writing", flush=True)
    time.sleep(600)
"""


def killed_while_writing(target: Path, kind: str, tmpdir: Path | None = None) -> None:
    """Start a process writing ``target`` (its system temporary directory ``tmpdir`` if given) and SIGKILL it in
    the middle of its write."""
    env = {**os.environ, "TMPDIR": str(tmpdir)} if tmpdir else None
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(target), kind], stdout=subprocess.PIPE, text=True,
                            env=env)
    try:
        assert proc.stdout.readline().strip() == "writing"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)


def hidden_siblings(target: Path) -> list[str]:
    """The hidden names beside ``target`` that belong to it (work directories, moved-aside outputs, its lock)."""
    return sorted(p.name for p in target.parent.iterdir() if p.name.startswith(f".{target.name}."))


def dead_pid() -> int:
    """The id of a process that has exited."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(30)
    return proc.pid


def tagged(kind: str, pid: int, host: str = O.HOST_TAG, rand: str = "0123456789ab") -> str:
    """A work-directory name of the tool's pattern: ``KIND.HOST.PID.RAND``."""
    return f"{kind}.{host}.{pid}.{rand}"


def write_dir(target: Path, text: str, overwrite: bool = False, inputs=()) -> None:
    """Write a one-file output directory through atomic_output_dir."""
    with atomic_output_dir(target, overwrite, inputs=inputs) as tmp:
        (tmp / "part-0.parquet").write_text(text)


@pytest.fixture
def private_tmp(tmp_path, monkeypatch):
    """The system's temporary directory (where scratch directories live) moved into this test's directory."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "systmp"))
    (tmp_path / "systmp").mkdir()
    return tmp_path / "systmp"


# ---- killed runs ----


@pytest.mark.parametrize("kind", ["dir", "file"])
def test_killed_writer_leaves_no_output_and_the_next_run_cleans_up(tmp_path, kind):
    target = tmp_path / ("release" if kind == "dir" else "masked.csv")
    killed_while_writing(target, kind)
    assert not target.exists()
    left = hidden_siblings(target)  # what the killed run was writing, and its lock
    assert len(left) == 2 and f".{target.name}.lock" in left
    writer = atomic_output_dir if kind == "dir" else atomic_output_file
    with writer(target, inputs=[]) as tmp:
        if kind == "dir":
            (tmp / "part-0.parquet").write_text("whole release")
        else:
            tmp.write_text("whole file")
    assert hidden_siblings(target) == []
    content = (target / "part-0.parquet" if kind == "dir" else target).read_text()
    assert content.startswith("whole")


def test_the_next_run_of_any_output_removes_what_a_killed_run_was_writing(tmp_path, private_tmp):
    target = tmp_path / "release"
    killed_while_writing(target, "dir", tmpdir=private_tmp)
    assert len(hidden_siblings(target)) == 2  # its private work directory (raw records) and its lock
    write_dir(tmp_path / "another-output", "another run")
    assert hidden_siblings(target) == [] and not target.exists()
    assert list(O.scratch_root().iterdir()) == []


def test_killed_replacement_keeps_the_previous_release(tmp_path):
    target = tmp_path / "release"
    write_dir(target, "first")
    killed_while_writing(target, "dir")
    assert (target / "part-0.parquet").read_text() == "first"
    recover_interrupted(target)
    assert hidden_siblings(target) == []
    assert (target / "part-0.parquet").read_text() == "first"


def test_previous_output_moved_aside_by_a_killed_run_is_restored(tmp_path):
    target = tmp_path / "release"
    aside = tmp_path / f".release.{tagged('old', dead_pid())}"
    aside.mkdir()
    (aside / "manifest.json").write_text("first")
    with pytest.raises(InputError, match="already exists"):
        with atomic_output_dir(target, inputs=[]):
            pass
    assert (target / "manifest.json").read_text() == "first" and hidden_siblings(target) == []


def test_siblings_of_a_live_run_are_left_alone(tmp_path):
    target = tmp_path / "release"
    live = tmp_path / f".release.{tagged('tmp', os.getpid())}"
    live.mkdir()
    with output_lock(target) as lock:  # a live run holds the output
        with pytest.raises(InputError, match="in use"):
            recover_interrupted(target)
        assert live.exists() and lock.exists()
    assert not lock.exists()


# ---- the guard: never an input ----


@pytest.fixture
def dataset(tmp_path) -> Path:
    """A small Parquet dataset directory (an input)."""
    ds = tmp_path / "ds"
    ds.mkdir()
    pd.read_csv(bundled_path("census.csv")).head(40).to_parquet(ds / "part-0.parquet", index=False)
    return ds


def mask(*args) -> tuple[int, str]:
    """Run ``sdc mask`` (MDAV, k = 3) with these extra arguments; (exit code, output)."""
    result = CliRunner().invoke(app, ["mask", "--method", "mdav", "--param", "k=3", "--workers", "1",
                                      *map(str, args)])
    return result.exit_code, result.output


def test_output_that_is_the_input_dataset_is_refused_and_the_input_kept(dataset, no_cluster):
    before = tree_checksums(dataset)
    code, output = mask("--input", dataset, "--out", dataset, "--overwrite")
    assert code == 2 and output.startswith("error: output") and f"is the input {dataset}" in output
    assert tree_checksums(dataset) == before and sorted(p.name for p in dataset.iterdir()) == ["part-0.parquet"]


def test_output_inside_the_input_dataset_is_refused(dataset, no_cluster):
    before = tree_checksums(dataset)
    code, output = mask("--input", dataset, "--out", dataset / "out")
    assert code == 2 and f"lies inside the input {dataset}" in output
    assert tree_checksums(dataset) == before and sorted(p.name for p in dataset.iterdir()) == ["part-0.parquet"]


def test_output_that_links_to_the_input_is_refused(dataset, tmp_path):
    link = tmp_path / "link"
    link.symlink_to(dataset, target_is_directory=True)
    before = tree_checksums(dataset)
    with pytest.raises(InputError, match="is the input"):
        write_dir(link, "release", overwrite=True, inputs=[dataset])
    with pytest.raises(InputError, match="is the input"):  # the input named through the link
        write_dir(dataset, "release", overwrite=True, inputs=[link])
    assert tree_checksums(dataset) == before


def test_output_that_contains_the_input_is_refused(tmp_path):
    source = tmp_path / "data" / "in.csv"
    source.parent.mkdir()
    source.write_text("a\n1\n")
    with pytest.raises(InputError, match=f"output {tmp_path / 'data'} contains the input {source}"):
        with atomic_output_dir(tmp_path / "data", True, inputs=[None, source]):
            pass
    with pytest.raises(InputError, match="is the input"):
        with atomic_output_file(source, True, inputs=[source]):
            pass
    assert source.read_text() == "a\n1\n"


@pytest.mark.parametrize("command", [
    ["evaluate", "--original", "{census}", "--masked", "{copy}", "--out", "{copy}", "--overwrite"],
    ["compare", "--input", "{copy}", "--out", "{root}", "--overwrite"],
])
def test_evaluate_and_compare_outputs_are_guarded_too(tmp_path, command, no_cluster):
    copy = tmp_path / "census.csv"
    copy.write_bytes(bundled_path("census.csv").read_bytes())
    names = {"census": bundled_path("census.csv"), "copy": copy, "root": tmp_path}
    result = CliRunner().invoke(app, [arg.format(**names) for arg in command])
    assert result.exit_code == 2 and f"the input {copy}" in result.output, result.output
    assert copy.read_bytes() == bundled_path("census.csv").read_bytes() and [p.name for p in tmp_path.iterdir()] == [
        "census.csv"]


def test_output_whose_parent_is_a_file_is_an_input_error(tmp_path, no_cluster):
    blocker = tmp_path / "notes.txt"
    blocker.write_text("x")
    with pytest.raises(InputError, match=f"cannot create output .*: {blocker} is not a directory"):
        write_dir(blocker / "release", "x")
    code, output = mask("--input", bundled_path("census.csv"), "--out", blocker / "sub" / "masked.csv")
    assert code == 2 and output.startswith("error: cannot create output") and "Traceback" not in output


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_output_in_a_read_only_directory_is_an_input_error(tmp_path):
    shelf = tmp_path / "shelf"
    shelf.mkdir(mode=0o500)
    try:
        with pytest.raises(InputError, match=f"cannot create the output's lock {shelf / '.release.lock'}"):
            write_dir(shelf / "release", "x")
    finally:
        shelf.chmod(0o700)


# ---- overwrite replaces only the tool's own outputs ----


def test_overwrite_of_a_directory_the_tool_did_not_write_is_refused(tmp_path):
    users = tmp_path / "data"
    users.mkdir()
    (users / "keep.csv").write_text("precious")
    with pytest.raises(InputError, match=f"output directory {users} exists and was not written by sdc-pipeline"):
        write_dir(users, "release", overwrite=True)
    assert (users / "keep.csv").read_text() == "precious" and hidden_siblings(users) == []


def test_overwrite_replaces_the_tools_own_output_and_a_legacy_release(tmp_path):
    target = tmp_path / "release"
    write_dir(target, "first")
    assert json.loads((target / O.MARKER).read_text()) == {"written_by": "sdc-pipeline"}
    write_dir(target, "second", overwrite=True)
    assert (target / "part-0.parquet").read_text() == "second"
    legacy = tmp_path / "old-release"
    legacy.mkdir()
    (legacy / "manifest.json").write_text(json.dumps({"spec_hash": "0" * 64, "files": {}}))
    write_dir(legacy, "third", overwrite=True)
    assert (legacy / "part-0.parquet").read_text() == "third"


def test_a_file_output_is_replaced_only_with_overwrite(tmp_path):
    target = tmp_path / "metrics.json"
    target.write_text("old")
    with pytest.raises(InputError, match="already exists"):
        with atomic_output_file(target, inputs=[]) as tmp:
            tmp.write_text("new")
    assert target.read_text() == "old"
    with atomic_output_file(target, True, inputs=[]) as tmp:
        tmp.write_text("new")
    assert target.read_text() == "new"


def test_overwrite_false_is_honoured_at_the_final_swap(tmp_path):
    target = tmp_path / "release"
    with pytest.raises(InputError, match="already exists"):
        with atomic_output_dir(target, inputs=[]) as tmp:
            (tmp / "part-0.parquet").write_text("second")
            target.mkdir()  # another release appears while this one is written
            (target / "part-0.parquet").write_text("first")
    assert (target / "part-0.parquet").read_text() == "first" and hidden_siblings(target) == []


# ---- one run per output, across hosts ----


def test_a_second_run_on_a_locked_output_is_refused_at_once(tmp_path):
    target = tmp_path / "release"
    with output_lock(target) as lock:
        holder = json.loads(lock.read_text())
        assert holder["host"] == O.HOST and holder["pid"] == os.getpid() and holder["started"]
        with pytest.raises(InputError, match=rf"in use by a run on host .* \(pid {os.getpid()}, .*lock {lock}"):
            write_dir(target, "second")
    assert not target.exists() and hidden_siblings(target) == []


def test_a_lock_left_by_a_dead_local_process_is_broken(tmp_path):
    target = tmp_path / "release"
    lock = tmp_path / ".release.lock"
    lock.write_text(json.dumps({"host": O.HOST, "pid": dead_pid(), "started": "2026-01-01T00:00:00+00:00"}))
    write_dir(target, "release")
    assert (target / "part-0.parquet").read_text() == "release" and not lock.exists()


@pytest.mark.parametrize("content", [{"host": "elsewhere.example", "pid": 1, "started": "2026-01-01"}, "garbled"])
def test_a_lock_from_another_host_or_unreadable_is_never_broken(tmp_path, content):
    target = tmp_path / "release"
    lock = tmp_path / ".release.lock"
    lock.write_text(json.dumps(content))
    with pytest.raises(InputError, match="remove the lock file") as caught:
        write_dir(target, "release")
    assert ("elsewhere.example" in str(caught.value)) == isinstance(content, dict)
    assert lock.read_text() == json.dumps(content) and not target.exists()


# ---- names are matched exactly ----


@pytest.mark.parametrize("name", ["re?", "a[x]", "*", "r*"])
def test_glob_characters_in_a_name_never_touch_another_output(tmp_path, name):
    other = tmp_path / "rex"
    write_dir(other, "other release")
    dead = dead_pid()
    strangers = [tmp_path / f".{n}.{tagged(kind, dead)}" for n in ("rex", "ax") for kind in ("tmp", "old")]
    for path in strangers:
        path.mkdir()
    before = tree_checksums(tmp_path)
    write_dir(tmp_path / name, "mine")
    write_dir(tmp_path / name, "mine again", overwrite=True)
    recover_interrupted(tmp_path / name)
    assert (tmp_path / name / "part-0.parquet").read_text() == "mine again"
    assert all(path.is_dir() for path in strangers)
    assert {k: v for k, v in tree_checksums(tmp_path).items() if not k.startswith(name)} == before


# ---- private work directories, scratch cleanup ----


def mode(path: Path) -> int:
    """The permission bits of ``path``."""
    return path.stat().st_mode & 0o777


def test_work_directories_are_private_and_the_release_is_not(tmp_path):
    with atomic_output_dir(tmp_path / "release", inputs=[]) as tmp:
        assert mode(tmp) == 0o700 and tmp.name.startswith(".release.tmp.")
    with atomic_output_file(tmp_path / "masked.csv", inputs=[]) as tmp:
        assert mode(tmp) == 0o600
        tmp.write_text("a\n")
    umask = os.umask(0o022)
    os.umask(umask)
    assert mode(tmp_path / "release") == 0o777 & ~umask and mode(tmp_path / "masked.csv") == 0o666 & ~umask


def test_scratch_directories_are_private_and_stale_ones_removed_at_the_next_start(tmp_path, private_tmp):
    root = O.scratch_root()
    assert root.parent == private_tmp and mode(root) == 0o700
    stale = root / tagged("step", dead_pid(), rand="abc_12")
    live = root / tagged("step", os.getpid(), rand="live")
    remote = root / tagged("step", dead_pid(), host="otherhost", rand="remote")
    for path in (stale, live, remote):
        path.mkdir()
        (path / "raw.parquet").write_text("raw records")
    write_dir(tmp_path / "release", "any run")
    assert not stale.exists() and live.exists() and remote.exists()
    scratch = O.scratch_dir("step")
    path = Path(scratch.name)
    assert path.parent == root and mode(path) == 0o700 and O.SCRATCH_NAME.fullmatch(path.name)
    scratch.cleanup()
    assert not path.exists()


def test_apply_step_scratch_lives_in_the_private_scratch_directory(private_tmp, sync_dask):
    import dask.dataframe as dd

    from sdc_tasks.masking.apply import StepContext
    from sdc_tasks.masking.methods import apply_step
    from sdc_tasks.masking.registry import validate_params

    frame = pd.read_csv(bundled_path("census.csv")).head(30)
    frame.insert(0, "record_id", range(len(frame)))
    staged = apply_step(dd.from_pandas(frame, npartitions=2), "mdav", ["FEDTAX", "AGI"],
                        validate_params("mdav", {"k": 3}), StepContext(0, 0, "record_id", None))
    (scratch,) = list(O.scratch_root().iterdir())
    assert scratch.name.startswith(f"step.{O.HOST_TAG}.{os.getpid()}.") and mode(scratch) == 0o700
    assert sorted(p.name for p in scratch.iterdir()) == ["masked-values"]  # the blocks removed once masked
    assert len(staged.frame.compute()) == 30


@pytest.mark.parametrize("out", ["ds", "ds-link"])
def test_release_onto_its_input_dataset_is_refused_and_the_input_kept(dataset, tmp_path, out, prefect_harness):
    import yaml

    (tmp_path / "ds-link").symlink_to(dataset, target_is_directory=True)
    spec = yaml.safe_load(bundled_path("demo.yaml").read_text())
    spec.update(input={"path": "ds"}, output={"dir": out, "overwrite": True}, create_id=True)
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    before = tree_checksums(dataset)
    result = CliRunner().invoke(app, ["release", str(tmp_path / "spec.yaml")])
    assert result.exit_code == 2 and f"is the input {dataset}" in result.output
    assert tree_checksums(dataset) == before and sorted(p.name for p in dataset.iterdir()) == ["part-0.parquet"]


def test_a_helper_process_of_a_killed_run_is_ended_by_the_next_run(private_tmp, tmp_path):
    owner = dead_pid()
    helpers = {name: subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", name])
               for name in ("noted-server", "other-program")}
    try:
        for name, proc in helpers.items():  # Linux shows a new program's arguments some time after Popen returns
            assert held_within(lambda: name.encode() in Path(f"/proc/{proc.pid}/cmdline").read_bytes(), 30), name
        root = O.scratch_root()
        (root / tagged("process", owner, rand="srv")).write_text(json.dumps(
            {"pid": helpers["noted-server"].pid, "command": "noted-server"}))
        (root / tagged("process", owner, rand="reused")).write_text(json.dumps(  # a pid now running another program
            {"pid": helpers["other-program"].pid, "command": "noted-server"}))
        write_dir(tmp_path / "release", "the next run")
        assert helpers["noted-server"].wait(10) == -signal.SIGKILL
        assert helpers["other-program"].poll() is None
        assert list(root.iterdir()) == []
    finally:
        for proc in helpers.values():
            proc.kill()
            proc.wait(10)
