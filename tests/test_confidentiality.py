"""Original values never leave the run except masked: a release of the Census file salted with canary values,
logged at DEBUG everywhere, leaves no trace of a canary in logs, console output, warnings, Prefect logs,
task runs, artifacts, results or database, PREFECT_HOME, or the release directory (masked file included)."""

from __future__ import annotations

import json
import logging
import re
import struct
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import prefect.settings as ps
import yaml
from distributed import LocalCluster
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import ArtifactFilter, FlowFilter, FlowRunFilter, LogFilter, TaskRunFilter
from prefect.client.schemas.sorting import ArtifactSort, FlowRunSort, TaskRunSort
from typer.testing import CliRunner

from sdc_tasks.cli import app
from sdc_tasks.generate import bundled_path

VARIABLES = ["AFNLWGT", "AGI", "EMCONTRB", "FEDTAX", "PTOTVAL", "STATETAX", "TAXINC", "POTHVAL", "INTVAL",
             "PEARNVAL", "FICA", "WSALVAL", "ERNVAL"]
ROWS_PER_VARIABLE = (5, 400, 900)
LOGGERS = ("", "prefect", "distributed", "dask", "sdc_tasks", "flows")


def canaries() -> dict[tuple[int, str], float]:
    """Three distinctive values per variable, by (row, column): 7-digit integer parts found in no other value,
    and no canary the mean of others (MDAV may put a variable's three outliers in one group)."""
    return {(row + j, v): 9_183_746.0 + 1013 * j + offset + 0.246813
            for j, v in enumerate(VARIABLES) for row, offset in zip(ROWS_PER_VARIABLE, (0, 337, 1009))}


def patterns(values) -> list[bytes]:
    """Text forms of each canary (its integer part standing alone covers repr, str and any fixed decimals;
    plus scientific notation) and its float64 bytes as stored in binary files."""
    out = []
    for v in values:
        out.append(rb"(?<![0-9])" + str(int(v)).encode() + rb"(?![0-9])")
        out += [re.escape(f"{v:.{d}e}".encode()) for d in range(4, 16)]
        out.append(re.escape(struct.pack("<d", v)))
    return out


def hits(data: bytes, compiled: list[re.Pattern]) -> list[str]:
    """The patterns found in ``data``."""
    return [p.pattern.decode("latin-1") for p in compiled if p.search(data)]


def test_no_original_value_reaches_logs_artifacts_or_storage(tmp_path, prefect_harness, caplog, capfd):
    salted = pd.read_csv(bundled_path("census.csv")).astype(float)
    for (row, column), value in canaries().items():
        salted.loc[row, column] = value
    source = tmp_path / "input" / "salted.csv"
    source.parent.mkdir()
    salted.to_csv(source, index=False)
    compiled = [re.compile(p) for p in patterns(canaries().values())]
    assert hits(source.read_bytes(), compiled), "the search must find the canaries where they are"

    spec = yaml.safe_load(bundled_path("demo.yaml").read_text())
    spec.update(input={"path": str(source)}, output={"dir": str(tmp_path / "release"), "overwrite": False},
                steps=[{"method": "mdav", "params": {"k": 3, "group_size": 3}}],
                gate={"max": {"DLD": 100.0, "PLD": 100.0, "ID": 100.0}, "min_group_size": 3})
    spec_path = tmp_path / "input" / "spec.yaml"
    spec_path.write_text(yaml.safe_dump(spec))

    home = tmp_path / "prefect-home"
    for name in LOGGERS:
        caplog.set_level(logging.DEBUG, logger=name)
    for name in LOGGERS[1:]:  # loggers that do not propagate to the root handler
        logging.getLogger(name).addHandler(caplog.handler)
    try:
        with ps.temporary_settings(updates={ps.PREFECT_HOME: home, ps.PREFECT_LOCAL_STORAGE_PATH: home / "storage",
                                            ps.PREFECT_RESULTS_PERSIST_BY_DEFAULT: True,
                                            ps.PREFECT_LOGGING_LEVEL: "DEBUG", ps.PREFECT_LOGGING_LOG_PRINTS: True}), \
                LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None,
                             silence_logs=False) as cluster, warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = CliRunner().invoke(app, ["release", str(spec_path), "--dask-address", cluster.scheduler_address])
    finally:
        for name in LOGGERS[1:]:
            logging.getLogger(name).removeHandler(caplog.handler)
    assert result.exit_code == 0, result.output
    out, err = capfd.readouterr()
    assert len(caplog.records) > 50  # DEBUG logging was on
    console = "\n".join([caplog.text, *(r.getMessage() for r in caplog.records), result.output, out, err,
                         *(str(w.message) for w in caught)])
    assert hits(console.encode(), compiled) == []
    assert re.search(r"step 0 \(mdav\): \d+ blocks, 1080 records written in [\d.]+ s", console)  # stage facts

    release = tmp_path / "release"
    masked = pd.read_parquet(release / "masked")
    assert not np.isin(masked[VARIABLES].to_numpy(), list(canaries().values())).any()
    for path in [*release.rglob("*"), *home.rglob("*")]:
        if path.is_file():
            assert hits(path.read_bytes(), compiled) == [], path
    database = Path(ps.PREFECT_SERVER_DATABASE_CONNECTION_URL.value().removeprefix("sqlite+aiosqlite:///"))
    for path in database.parent.iterdir():  # the harness database with its journal files
        assert hits(path.read_bytes(), compiled) == [], path

    with get_client(sync_client=True) as client:
        run = client.read_flow_runs(flow_filter=FlowFilter(name={"any_": ["release"]}),
                                    sort=FlowRunSort.START_TIME_DESC, limit=1)[0]
        runs = FlowRunFilter(id={"any_": [run.id]})
        artifacts = client.read_artifacts(artifact_filter=ArtifactFilter(flow_run_id={"any_": [run.id]}),
                                          flow_run_filter=runs, task_run_filter=TaskRunFilter(),
                                          sort=ArtifactSort.CREATED_DESC, limit=100, offset=0)
        logs = client.read_logs(log_filter=LogFilter(flow_run_id={"any_": [run.id]}), limit=200, offset=0)
        task_runs = client.read_task_runs(flow_run_filter=runs, sort=TaskRunSort.EXPECTED_START_TIME_ASC, limit=200)
    assert {a.key for a in artifacts} >= {"release-report", "release-il", "release-dr", "release-scores",
                                          "release-ru-map", "release-output"}
    assert len(task_runs) >= 6 and logs
    records = [json.dumps(x.model_dump(mode="json")) for x in [run, *artifacts, *logs, *task_runs]]
    assert hits("\n".join(records).encode(), compiled) == []
