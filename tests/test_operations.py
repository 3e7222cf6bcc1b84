"""Operating the ``sdc`` command as Prefect and Dask users expect: ``--version``, ``sdc validate`` and the same
checks before a release starts anything, a refusal reported as an outcome (exit 3, the failing checks, a
"Refused" state in Prefect), and a quiet console by default."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
import yaml
from processes import SOURCE_ROOT
from spec_files import demo_spec_file
from typer.testing import CliRunner

import sdc_tasks.cluster
from sdc_tasks.cli import app
from sdc_tasks.generate import bundled_path

runner = CliRunner()


def invoke(*args) -> object:
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture
def nothing_starts(monkeypatch):
    """Fail the test if a command starts a Dask cluster or a Prefect server."""
    import flows.server

    def started(*args, **kwargs):
        raise AssertionError("a cluster or server was started")

    monkeypatch.setattr(sdc_tasks.cluster, "LocalCluster", started)
    monkeypatch.setattr(flows.server, "temporary_server", started)


def test_version_names_the_package_and_the_libraries_it_runs_on():
    result = invoke("--version")
    assert result.exit_code == 0
    assert result.output.strip() == (f"sdc {version('sdc-pipeline')} (prefect {version('prefect')}, dask "
                                     f"{version('dask')}, distributed {version('distributed')})")


def test_validate_checks_spec_input_and_output_without_starting_anything(tmp_path, nothing_starts):
    result = invoke("validate", demo_spec_file(tmp_path))
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].endswith("valid (census-demo, 1 masking step: md)")
    assert lines[1].endswith("census.csv: 13 columns, each with a role")
    assert lines[2].startswith("  masked AFNLWGT, AGI,") and lines[2].endswith("; id record_id")
    assert lines[3] == f"  output {tmp_path / 'release'}: new"


FAULTS = [
    (lambda s: s["steps"][0].update(method="mdavv"), "steps.0.method"),
    (lambda s: s["variables"]["continuous"].append("NOPE"), "NOPE"),
    (lambda s: s["variables"]["continuous"].remove("ERNVAL"), "'ERNVAL'"),
    (lambda s: s["input"].update(path="/nonexistent/census.csv"), "input not found: /nonexistent/census.csv"),
    (lambda s: s["output"].update(dir=str(bundled_path("census.csv"))), "is the input"),
]


@pytest.mark.parametrize("command", ["validate", "release"])
@pytest.mark.parametrize("fault,named", FAULTS)
def test_a_spec_input_or_output_fault_is_named_before_anything_starts(tmp_path, nothing_starts, command, fault,
                                                                       named):
    spec = yaml.safe_load(demo_spec_file(tmp_path).read_text())
    fault(spec)
    path = tmp_path / "faulty.yaml"
    path.write_text(yaml.safe_dump(spec))
    result = invoke(command, path)
    assert result.exit_code == 2, result.output
    assert named in result.output and len(result.output.strip().splitlines()) == 1
    assert "Traceback" not in result.output


def test_an_existing_output_is_refused_before_anything_starts(tmp_path, nothing_starts):
    (tmp_path / "release").mkdir()
    for command in ("validate", "release"):
        result = invoke(command, demo_spec_file(tmp_path))
        assert result.exit_code == 2 and "already exists" in result.output


def test_a_refused_release_exits_3_with_its_checks_and_ends_as_refused_in_prefect(prefect_harness, tmp_path):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.sorting import FlowRunSort
    from prefect.settings import PREFECT_API_URL

    spec = demo_spec_file(tmp_path, gate={"max": {"DLD": 1.0, "ID": 99.0, "PLD": 0.5}})
    env = {**os.environ, "PYTHONPATH": str(SOURCE_ROOT), "PREFECT_API_URL": PREFECT_API_URL.value()}
    for name in ("SDC_VERBOSE", "PREFECT_LOGGING_LEVEL"):  # the suite's conftest quiets Prefect's loggers
        env.pop(name, None)
    done = subprocess.run([sys.executable, "-m", "sdc_tasks.cli", "release", str(spec)], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 3, done.stderr
    metrics = json.loads((tmp_path / "release" / "metrics.json").read_text())
    report = tmp_path / "release" / "report.md"
    tail = done.stderr.splitlines()[-4:]
    assert tail == ["refused: census-demo was not published; the risk gate failed 2 of 3 checks:",
                    f"  DLD  {format(metrics['DLD'], '.4g'):>8} > limit 1",
                    f"  PLD  {format(metrics['PLD'], '.4g'):>8} > limit 0.5",
                    f"report: {report}"]
    assert "Traceback" not in done.stderr and done.stdout == ""
    for noise in ("Finished in state", "Beginning flow run", "distributed.", "Lost all workers",
                  "Starting temporary server"):
        assert noise not in done.stderr
    assert "dashboard http://127.0.0.1:" in done.stderr and "validated 1080 records" in done.stderr

    with get_client(sync_client=True) as client:
        [run] = client.read_flow_runs(sort=FlowRunSort.START_TIME_DESC, limit=1)
    assert run.state.is_failed() and run.state.name == "Refused"
    assert f"DLD = {format(metrics['DLD'], '.4g')} > limit 1" in run.state.message
    assert f"PLD = {format(metrics['PLD'], '.4g')} > limit 0.5" in run.state.message


ONE_CONFIGURATION = {"name": "one", "seed": 5, "families": [
    {"label": "Rank", "method": "rankswap", "sweep": {"param": "p", "values": [15], "label_format": "02d"}}]}


def test_a_comparison_with_nothing_within_its_limits_is_refused_not_crashed(prefect_harness, tmp_path, dask_scheduler):
    from flows.compare import compare

    grid = tmp_path / "grid.yaml"
    grid.write_text(yaml.safe_dump(ONE_CONFIGURATION))
    cli = invoke("compare", "--input", bundled_path("census.csv"), "--grid", grid, "--out", tmp_path / "cli",
                 "--max", "DLD=0", "--best-spec", tmp_path / "cli.yaml", "--dask-address", dask_scheduler)
    assert cli.exit_code == 3, cli.output
    assert cli.output.strip().splitlines()[-1] == "error: no configuration of one meets DLD <= 0"
    assert (tmp_path / "cli" / "ranking.csv").is_file() and not (tmp_path / "cli.yaml").exists()

    state = compare(str(bundled_path("census.csv")), str(tmp_path / "flow"), grid=str(grid), limits=["DLD=0"],
                    best_spec=str(tmp_path / "flow.yaml"), dask_address=dask_scheduler, return_state=True)
    assert state.is_failed() and state.name == "Refused"
    assert state.message == "no configuration of one meets DLD <= 0"
    assert (tmp_path / "flow" / "ranking.csv").is_file() and not (tmp_path / "flow.yaml").exists()


HEAVY = ("distributed", "dask.dataframe", "prefect", "scipy", "numba", "pandas")
ARRAYS = ("numpy", "pyarrow", "PIL")  # none needed to print help


@pytest.mark.parametrize("args", [["--help"], ["mask", "--help"], ["validate", "SPEC"], ["validate", "BAD"]])
def test_help_and_validate_import_no_engine(tmp_path, args):
    """``sdc --help`` and ``sdc validate`` answer from the registry, the spec and the files' headers: none of Dask's
    dataframe or distributed packages, Prefect, SciPy, numba or pandas is imported, and for help not even numpy,
    pyarrow or Pillow (start-up is what a spec or path error costs; docs/performance.md has the times)."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("input: {path: census.csv}\nmethd: mdav\n")
    argv = [str(demo_spec_file(tmp_path)) if a == "SPEC" else str(bad) if a == "BAD" else a for a in args]
    heavy = HEAVY + ARRAYS if "--help" in args else HEAVY
    probe = ("import sys\nfrom sdc_tasks.cli import main\nsys.argv = ['sdc', *sys.argv[1:]]\ntry:\n    main()\n"
             f"except SystemExit:\n    pass\nprint(sorted(m for m in {heavy!r} if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(SOURCE_ROOT)})
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout + done.stderr


GC_PROBE = """
import gc
from sdc_tasks import cli
states = []
resume = cli._collection_resumed
def resumed():
    states.append(gc.isenabled())
    resume()
    states.append((gc.isenabled(), gc.get_freeze_count() > 50_000))
cli._collection_resumed = resumed
"""


def test_a_small_mask_imports_no_drawing_and_no_flow_engine(tmp_path):
    """``sdc mask`` of a small file runs in its own process without loading what it does not use: matplotlib
    (the reports), scipy.stats (distribution fitting), Prefect, pyreadstat (SPSS, Stata and SAS files) and SciPy's
    graph algorithms (record pairing) stay unimported, and so does ``distributed`` (no cluster: the file is masked on
    threads of the command's own process; start-up is most of a small file's time;
    benchmarks/small_files.py). Its garbage collector waits while it imports, resumes (with the imports' objects
    frozen) where the work starts, and at the end everything is frozen (Python's finalization skips it)."""
    unused = ("matplotlib", "scipy.stats", "prefect", "pyreadstat", "scipy.sparse.csgraph", "distributed")
    probe = (f"import sys\n{GC_PROBE}\nsys.argv = ['sdc', *sys.argv[1:]]\nbefore = len(gc.get_objects())\ntry:\n"
             "    cli.main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
             "print(states, gc.isenabled(), gc.get_freeze_count() > before)\n"
             f"print(sorted(m for m in {unused!r} if m in sys.modules))")
    argv = ["mask", "--input", str(bundled_path("census.csv")), "--method", "mdav", "--param", "k=3",
            "--out", str(tmp_path / "masked.parquet")]
    done = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(SOURCE_ROOT)})
    assert (tmp_path / "masked.parquet").is_dir(), done.stderr
    assert done.stdout.strip().splitlines()[-2:] == ["[False, (True, True)] True True", "[]"], \
        done.stdout + done.stderr


def record(name: str, level: int, path: str) -> logging.LogRecord:
    """A log record as logger ``name`` would make it at ``path``."""
    return logging.LogRecord(name, level, path, 1, "message", None, None)


def test_the_quiet_console_keeps_own_lines_and_warnings_only():
    from flows.console import OwnLinesAndWarnings

    keep = OwnLinesAndWarnings().filter
    ours = str(Path(sdc_tasks.cluster.__file__).resolve().parent / "pipeline" / "run.py")  # installed or checkout
    import prefect

    prefects = str(Path(prefect.__file__).parent / "engine.py")
    assert keep(record("prefect.flow_runs", logging.INFO, ours))
    assert not keep(record("prefect.flow_runs", logging.INFO, prefects))
    assert not keep(record("distributed.scheduler", logging.INFO, prefects))
    assert keep(record("distributed.scheduler", logging.WARNING, prefects))


class Collected(logging.Handler):
    """Keeps every record it is handed."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.mark.parametrize("verbose", [False, True])
def test_a_local_cluster_closes_quietly_unless_verbose(monkeypatch, verbose):
    monkeypatch.setenv("SDC_VERBOSE", "1" if verbose else "0")
    collected, logger = Collected(), logging.getLogger("distributed")
    logger.addHandler(collected)
    try:
        with dask_cluster_of_one() as client:
            assert client.submit(sum, [1, 2]).result() == 3
    finally:
        logger.removeHandler(collected)
    messages = [r.getMessage() for r in collected.records]
    assert any("Lost all workers" in m for m in messages) == verbose
    assert all(r.levelno >= logging.ERROR for r in collected.records) != verbose


def dask_cluster_of_one():
    """``sdc_tasks.cluster.dask_client`` with one worker."""
    return sdc_tasks.cluster.dask_client(None, 1)


def test_runs_on_the_temporary_server_send_no_heartbeats(tmp_path, monkeypatch):
    """The temporary server ends with the run, so its flow runs send no heartbeats (Prefect's engine waits up to
    1 s for its heartbeat thread at each run's end); the API URL points at that server for the block only."""
    import prefect.settings as ps

    import flows.server

    stand_in = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    monkeypatch.setattr(flows.server, "_server_process", lambda: (stand_in, "http://127.0.0.1:9/api"))
    monkeypatch.setattr(flows.server, "_server_answering", lambda process, url: (process, url))
    no_server = {ps.PREFECT_HOME: tmp_path, ps.PREFECT_SERVER_EPHEMERAL_ENABLED: True}
    with ps.temporary_settings(no_server, restore_defaults={ps.PREFECT_API_URL}):
        heartbeats = ps.PREFECT_FLOWS_HEARTBEAT_FREQUENCY.value()
        with flows.server.temporary_server():
            assert (ps.PREFECT_API_URL.value(), ps.PREFECT_FLOWS_HEARTBEAT_FREQUENCY.value()) == (
                "http://127.0.0.1:9/api", None)
        assert (ps.PREFECT_API_URL.value(), ps.PREFECT_FLOWS_HEARTBEAT_FREQUENCY.value()) == (None, heartbeats)
    assert heartbeats is not None and stand_in.poll() is not None
