"""Original values never leave the run except masked: a release of the Census file salted with canary values in a
column of every role, logged at DEBUG everywhere, leaves no trace of a canary in logs, console output, warnings,
Prefect logs, task runs, artifacts, results or database, PREFECT_HOME, the release directory (masked file
included, but for the columns published unmasked) or the temp dir; nor does a release that fails in a library
whose message quotes a value; and ``value_free`` withholds such messages at every stage's boundary."""

from __future__ import annotations

import base64
import json
import logging
import os
import pickle
import re
import struct
import tempfile
import traceback
import warnings
from pathlib import Path

import dask.dataframe as dd
import numpy as np
import pandas as pd
import prefect.settings as ps
import pyarrow as pa
import pydantic
import pytest
import yaml
from distributed import LocalCluster
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import ArtifactFilter, FlowFilter, FlowRunFilter, LogFilter, TaskRunFilter
from prefect.client.schemas.sorting import ArtifactSort, FlowRunSort, TaskRunSort
from prefect.events.worker import EventsWorker
from prefect.logging.handlers import APILogHandler
from typer.testing import CliRunner

import sdc_tasks.masking.methods
import sdc_tasks.pipeline.stages
from sdc_tasks.cli import app
from sdc_tasks.cluster import dask_client
from sdc_tasks.errors import InputError, StageFailed, value_free
from sdc_tasks.generate import bundled_path

VARIABLES = ["AFNLWGT", "AGI", "EMCONTRB", "FEDTAX", "PTOTVAL", "STATETAX", "TAXINC", "POTHVAL", "INTVAL",
             "PEARNVAL", "FICA", "WSALVAL", "ERNVAL"]
KEYS = ["FEDTAX", "AFNLWGT", "AGI", "EMCONTRB", "PTOTVAL", "TAXINC", "STATETAX"]
ROWS_PER_VARIABLE = (5, 400, 900)
LOGGERS = ("", "prefect", "distributed", "dask", "sdc_tasks", "flows")

# One column per remaining role, each salted with a canary (text or a number no other cell holds). The direct
# identifier is dropped and the categorical canary, a category of one record, is suppressed by local
# suppression: neither may appear anywhere. The weight and the pass-through column are published unmasked, so
# their canaries may appear in masked/ only. Stratum labels are categories a message may name (a stratum with
# too few records is reported by its label): they hold no canary. Record ids are row positions, which messages
# name (a duplicate id, a bad cell's row): they hold no canary either.
NAME, REGION, WEIGHT, STRATUM, NOTE = "NAME", "REGION", "WEIGHT", "STRATUM", "NOTE"
TEXT_CANARIES = {NAME: "Quintus Zebulanary", REGION: "Xylocanaria", NOTE: "Ulrike-Quaxwell-canary"}
NUMBER_CANARIES = {WEIGHT: 7_364_519.135791, NOTE: 6_251_837.864209}
PUBLISHED_UNMASKED = (WEIGHT, NOTE)
CANARY_ROW = 777  # in the second half: the second file of a two-file input


def roles() -> dict:
    """The spec's variables: a role for every column, NOTE passed through unmasked."""
    return {"direct_identifiers": [NAME], "key": KEYS, "continuous": VARIABLES, "categorical": [REGION],
            "weight": WEIGHT, "strata": STRATUM, "pass_through": [NOTE]}


def canaries() -> dict[tuple[int, str], float]:
    """Three distinctive values per variable, by (row, column): 7-digit integer parts found in no other value,
    and no canary the mean of others (MDAV may put a variable's three outliers in one group)."""
    return {(row + j, v): 9_183_746.0 + 1013 * j + offset + 0.246813
            for j, v in enumerate(VARIABLES) for row, offset in zip(ROWS_PER_VARIABLE, (0, 337, 1009))}


def patterns(values, texts=()) -> list[tuple[bytes, list[bytes]]]:
    """Text forms of each canary number (its integer part standing alone covers repr, str and any fixed
    decimals; plus scientific notation) and its float64 bytes as stored in binary files; each text canary. Grouped
    by a literal text that every pattern of the group starts with (an integer part, the common start of a number's
    scientific forms, its bytes, a text), so that data without that text is not searched for the group's patterns:
    one search for a number's twelve scientific forms where they are absent, about four times quicker over all.
    An integer part follows no decimal point: a database stores a timestamp's microseconds (``.918881``) right
    before a record header byte that may be an ASCII digit, which would read as a canary's integer part. Every
    pattern starts with its literal text (the integer part's look-behind comes after it), so that the regular
    expression engine skips ahead to that text instead of trying each byte of the data: about 60 times quicker."""
    out = [(t.encode(), [re.escape(t.encode())]) for t in texts]
    for v in values:
        digits = str(int(v)).encode()
        out.append((digits, [digits + rb"(?<![0-9.]" + digits + rb")(?![0-9])"]))
        forms = [f"{v:.{d}e}".encode() for d in range(4, 16)]
        out.append((os.path.commonprefix(forms), [re.escape(f) for f in forms]))
        packed = struct.pack("<d", v)
        out.append((packed, [re.escape(packed)]))
    return out


def compiled(published: bool = True) -> list[tuple[bytes, list[re.Pattern]]]:
    """The search patterns of every canary, in their groups (``published``: those of the columns published
    unmasked too)."""
    numbers = [*canaries().values(), *(v for c, v in NUMBER_CANARIES.items() if published or c not in
                                       PUBLISHED_UNMASKED)]
    texts = [t for c, t in TEXT_CANARIES.items() if published or c not in PUBLISHED_UNMASKED]
    return [(literal, [re.compile(p) for p in group]) for literal, group in patterns(numbers, texts)]


def hits(data: bytes, groups: list[tuple[bytes, list[re.Pattern]]]) -> list[str]:
    """The patterns found in ``data`` (those of a group only where its literal text is)."""
    return [p.pattern.decode("latin-1") for literal, group in groups if literal in data for p in group
            if p.search(data)]


def salted() -> pd.DataFrame:
    """The Census file salted with the canaries, plus a direct identifier, a categorical variable, a weight,
    a stratum label and a pass-through column, each with its canary at CANARY_ROW."""
    df = pd.read_csv(bundled_path("census.csv")).astype(float)
    for (row, column), value in canaries().items():
        df.loc[row, column] = value
    n = np.arange(len(df))
    df[NAME] = [f"person {i}" for i in n]
    df[REGION] = np.array(["north", "south", "east", "west"])[n % 4]
    df[WEIGHT] = 100.0 + n % 7
    df[STRATUM] = np.where(n % 2 == 0, "A", "B")
    df[NOTE] = 10.0 + n % 5
    df.loc[CANARY_ROW, [NAME, REGION]] = [TEXT_CANARIES[NAME], TEXT_CANARIES[REGION]]
    df.loc[CANARY_ROW, [WEIGHT, NOTE]] = [NUMBER_CANARIES[WEIGHT], NUMBER_CANARIES[NOTE]]
    return df


def write_spec(tmp_path: Path, source: Path) -> Path:
    """A release spec of ``source``: MDAV k = 3 on the continuous variables within strata, then local
    suppression k = 3 of the categorical variable; the gate passes any risk."""
    spec = yaml.safe_load(bundled_path("demo.yaml").read_text())
    spec.update(input={"path": str(source), "format": "csv"}, variables=roles(),
                output={"dir": str(tmp_path / "release"), "overwrite": False},
                steps=[{"method": "mdav", "params": {"k": 3, "group_size": 3}},
                       {"method": "local_suppression", "params": {"k": 3}}],
                gate={"max": {"DLD": 100.0, "PLD": 100.0, "ID": 100.0}, "min_group_size": 3})
    path = tmp_path / "input" / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def released(spec_path: Path, home: Path, caplog) -> tuple:
    """Run ``sdc release`` on an in-process Dask cluster with every logger at DEBUG and results persisted by
    default; return the CLI result, the warnings and the temp dir entries the run created."""
    for name in LOGGERS:
        caplog.set_level(logging.DEBUG, logger=name)
    for name in LOGGERS[1:]:  # loggers that do not propagate to the root handler
        logging.getLogger(name).addHandler(caplog.handler)
    before = set(Path(tempfile.gettempdir()).iterdir())
    try:
        with ps.temporary_settings(updates={ps.PREFECT_HOME: home, ps.PREFECT_LOCAL_STORAGE_PATH: home / "storage",
                                            ps.PREFECT_RESULTS_PERSIST_BY_DEFAULT: True,
                                            ps.PREFECT_LOGGING_LEVEL: "DEBUG", ps.PREFECT_LOGGING_LOG_PRINTS: True}), \
                LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None,
                             silence_logs=False) as cluster, warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = CliRunner().invoke(app, ["release", str(spec_path), "--dask-address", cluster.scheduler_address])
            APILogHandler().flush()
            EventsWorker.drain_all()
    finally:
        for name in LOGGERS[1:]:
            logging.getLogger(name).removeHandler(caplog.handler)
    return result, caught, set(Path(tempfile.gettempdir()).iterdir()) - before


def console_text(result, caught, caplog, capfd) -> str:
    """Everything the run printed or logged: log records, CLI output, captured stdout/stderr, warnings."""
    out, err = capfd.readouterr()
    assert len(caplog.records) > 50  # DEBUG logging was on
    return "\n".join([caplog.text, *(r.getMessage() for r in caplog.records), result.output, out, err,
                      *(str(w.message) for w in caught)])


def stored_results(path: Path) -> bytes:
    """A Prefect result record's bytes with its base64 payload (the pickled result or exception) decoded."""
    data = path.read_bytes()
    try:
        record = json.loads(data)
    except ValueError:
        return data
    payload = record.get("result") if isinstance(record, dict) else None
    return data + (base64.b64decode(payload) if isinstance(payload, str) else b"")


def prefect_records() -> tuple[list[str], dict]:
    """The latest release flow run, its artifacts, logs and task runs as JSON lines, and their counts."""
    with get_client(sync_client=True) as client:
        run = client.read_flow_runs(flow_filter=FlowFilter(name={"any_": ["release"]}),
                                    sort=FlowRunSort.START_TIME_DESC, limit=1)[0]
        runs = FlowRunFilter(id={"any_": [run.id]})
        artifacts = client.read_artifacts(artifact_filter=ArtifactFilter(flow_run_id={"any_": [run.id]}),
                                          flow_run_filter=runs, task_run_filter=TaskRunFilter(),
                                          sort=ArtifactSort.CREATED_DESC, limit=100, offset=0)
        logs = client.read_logs(log_filter=LogFilter(flow_run_id={"any_": [run.id]}), limit=200, offset=0)
        task_runs = client.read_task_runs(flow_run_filter=runs, sort=TaskRunSort.EXPECTED_START_TIME_ASC, limit=200)
    records = [json.dumps(x.model_dump(mode="json")) for x in [run, *artifacts, *logs, *task_runs]]
    return records, {"run": run, "artifacts": {a.key for a in artifacts}, "logs": logs, "task_runs": task_runs}


def places_searched(tmp_path: Path, created: set[Path], console: str, records: list[str]) -> dict[str, bytes]:
    """Every place a run writes, by name: the console, the Prefect API's records, the harness database with its
    journal files, every file under ``tmp_path`` but the input (release dir, its hidden siblings, PREFECT_HOME,
    result storage with payloads decoded) and the temp dir entries the run created. The masked dataset is
    searched separately (it publishes some columns unmasked)."""
    places = {"console": console.encode(), "prefect api records": "\n".join(records).encode()}
    database = Path(ps.PREFECT_SERVER_DATABASE_CONNECTION_URL.value().removeprefix("sqlite+aiosqlite:///"))
    files = [*database.parent.iterdir(), *(p for p in tmp_path.rglob("*") if "input" not in p.parts),
             *(p for entry in created for p in [entry, *(entry.rglob("*") if entry.is_dir() else [])])]
    masked = tmp_path / "release" / "masked"
    for path in files:
        if path.is_file() and masked not in path.parents:
            places[str(path)] = stored_results(path)
    return places


def canary_hits(places: dict[str, bytes], groups: list[tuple[bytes, list[re.Pattern]]]) -> dict[str, list[str]]:
    """The places where a canary was found, with the patterns found there; the count searched is printed."""
    print(f"searched {len(places)} places for {sum(len(g) for _, g in groups)} canary patterns", sorted(places))
    return {name: found for name, data in places.items() if (found := hits(data, groups))}


def test_a_canary_s_integer_part_is_found_standing_alone_only():
    """The integer-part pattern finds 1234567 at the start of the data, after a space or a letter and before a
    decimal point, never inside a longer number or after a decimal point (a timestamp's microseconds)."""
    (literal, (source,)), *_ = patterns([1_234_567.5])
    groups = [(literal, [re.compile(source)])]
    for data in (b"1234567", b"x 1234567.5 y", b"a1234567,", b"1234567e3"):
        assert hits(data, groups), data
    for data in (b"91234567", b"12345678", b".1234567", b"0.1234567 ", b"123456 7"):
        assert not hits(data, groups), data


def test_each_form_of_a_canary_is_found_through_its_group():
    """Its integer part, each scientific form and its float64 bytes, inside other data: the literal text of the
    group searched first never hides a pattern."""
    value = 9_183_749.996813  # its scientific forms round up from the sixth digit on
    groups = [(literal, [re.compile(p) for p in group]) for literal, group in patterns([value])]
    forms = [str(value).encode(), *(f"{value:.{d}e}".encode() for d in range(4, 16)), struct.pack("<d", value)]
    for form in forms:
        assert hits(b"x " + form + b" y", groups), form
    assert len(hits(b" ".join(forms), groups)) == 14


def test_no_original_value_reaches_logs_artifacts_or_storage(tmp_path, prefect_harness, caplog, capfd):
    source = tmp_path / "input" / "salted.csv"
    source.parent.mkdir()
    salted().to_csv(source, index=False)
    found_in_input = hits(source.read_bytes(), compiled())  # each canary once, as its text or integer part
    assert len(found_in_input) == len(canaries()) + len(NUMBER_CANARIES) + len([NAME, REGION]), found_in_input

    result, caught, created = released(write_spec(tmp_path, source), tmp_path / "prefect-home", caplog)
    assert result.exit_code == 0, result.output
    console = console_text(result, caught, caplog, capfd)
    assert re.search(r"step 0 \(mdav\): \d+ blocks, 1080 records written in [\d.]+ s", console)  # stage facts

    masked = pd.read_parquet(tmp_path / "release" / "masked")
    assert NAME not in masked.columns
    assert not np.isin(masked[VARIABLES].to_numpy(), list(canaries().values())).any()
    assert TEXT_CANARIES[REGION] not in set(masked[REGION])
    assert set(masked[STRATUM]) == {"A", "B"}  # stratum labels are published
    canary_row = masked[masked["record_id"] == CANARY_ROW]  # published unmasked, by design
    assert canary_row[[WEIGHT, NOTE]].to_numpy().tolist() == [[NUMBER_CANARIES[WEIGHT], NUMBER_CANARIES[NOTE]]]

    records, found = prefect_records()
    assert found["artifacts"] >= {"release-report", "release-il", "release-dr", "release-scores"}
    assert len(found["task_runs"]) >= 6 and found["logs"]
    assert canary_hits(places_searched(tmp_path, created, console, records), compiled(published=False)) == {}


def two_file_input(directory: Path, type_change: bool) -> None:
    """The salted file as a dataset directory of two CSV files; with ``type_change``, NOTE is numeric in the
    first and text in the second ("n/a" on every row, the text canary at CANARY_ROW)."""
    df = salted()
    directory.mkdir(parents=True)
    half = len(df) // 2
    df.iloc[:half].to_csv(directory / "part-0.csv", index=False)
    second = df.iloc[half:]
    if type_change:
        second = second.assign(**{NOTE: "n/a"})
        second.loc[CANARY_ROW, NOTE] = TEXT_CANARIES[NOTE]
    second.to_csv(directory / "part-1.csv", index=False)


def quoting_failure(part: pd.DataFrame) -> pd.DataFrame:
    """Fail as a library does when it quotes a cell: pandas-style, with canaries in the message."""
    raise ValueError(f"could not convert string to float: '{TEXT_CANARIES[NOTE]}' at {NUMBER_CANARIES[NOTE]!r}")


def failing_final_write(monkeypatch) -> None:
    """Make the release's last write (masked/) fail on the workers with ``quoting_failure``."""
    write = sdc_tasks.pipeline.stages.write_parquet

    def write_parquet(ddf, path):
        """``write_parquet``, every partition of masked/ failing."""
        fails = Path(path).name == "masked"
        write(ddf.map_partitions(quoting_failure, meta=ddf._meta) if fails else ddf, path)

    monkeypatch.setattr(sdc_tasks.pipeline.stages, "write_parquet", write_parquet)


@pytest.mark.parametrize("failure", ["type change between files", "injected library error"])
def test_a_failed_release_leaks_no_value(failure, tmp_path, prefect_harness, caplog, capfd, monkeypatch):
    source = tmp_path / "input" / "dataset"
    two_file_input(source, type_change=failure == "type change between files")
    if failure == "injected library error":
        failing_final_write(monkeypatch)

    result, caught, created = released(write_spec(tmp_path, source), tmp_path / "prefect-home", caplog)
    assert result.exit_code in (1, 2), result.output
    print(result.output)
    assert re.search(r"^error: .+", result.output, re.M)
    if failure == "injected library error":
        assert "error: write stage failed: ValueError (details withheld" in result.output
    assert not (tmp_path / "release").exists()  # no partial output
    console = console_text(result, caught, caplog, capfd)
    records, found = prefect_records()
    assert found["run"].state.is_failed()
    assert canary_hits(places_searched(tmp_path, created, console, records), compiled()) == {}


def test_value_free_withholds_a_library_message_and_its_chain():
    canary = TEXT_CANARIES[NOTE]
    with pytest.raises(StageFailed) as info, value_free("write"):
        raise pa.ArrowTypeError(f"Expected bytes, got a 'float' object ('{canary}'), "
                                f"Conversion failed for column {NOTE} with type object")
    exc = info.value
    assert str(exc) == (f"write stage failed: ArrowTypeError in column {NOTE} (details withheld: they may quote "
                        "confidential values)")
    assert exc.__cause__ is None and exc.__suppress_context__
    assert canary not in "".join(traceback.format_exception(exc))
    assert canary.encode() not in pickle.dumps(exc)


def test_value_free_withholds_pydantic_input_values():
    class Model(pydantic.BaseModel):
        x: int

    with pytest.raises(StageFailed, match=r"^spec stage failed: ValidationError \(details withheld") as info, \
            value_free("spec"):
        Model(x=TEXT_CANARIES[NAME])
    assert TEXT_CANARIES[NAME] not in str(info.value)


@pytest.mark.parametrize("error", [InputError("column 'X', row 3: not a number"), FileNotFoundError("a/b.csv"),
                                   StageFailed("write stage failed: TypeError")])
def test_value_free_lets_our_errors_and_os_errors_through(error):
    with pytest.raises(type(error)) as info, value_free("validate"):
        raise error
    assert info.value is error


def test_value_free_lets_an_error_our_code_raised_through():
    from sdc_tasks.masking.registry import validate_params

    with pytest.raises(ValueError, match=r"^parameter 'k' of mdav") as info, value_free("mask"):
        validate_params("mdav", {"k": 1})
    assert not isinstance(info.value, StageFailed)


def test_cli_withholds_a_library_message(tmp_path, no_cluster, monkeypatch):
    pd.read_csv(bundled_path("census.csv")).head(60).to_csv(tmp_path / "in.csv", index=False)

    def apply_step(*args, **kwargs):
        """A masking step failing with a message that quotes a value."""
        return quoting_failure(pd.DataFrame())

    monkeypatch.setattr(sdc_tasks.masking.methods, "apply_step", apply_step)
    result = CliRunner().invoke(app, ["mask", "--input", str(tmp_path / "in.csv"), "--method", "mdav",
                                      "--param", "k=3", "--out", str(tmp_path / "out")])
    assert result.exit_code == 1
    assert result.output.strip() == ("error: mask stage failed: ValueError (details withheld: they may quote "
                                     "confidential values)")
    assert not (tmp_path / "out").exists()


def test_dask_workers_log_failed_tasks_without_their_message():
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    worker_log = logging.getLogger("distributed.worker")
    worker_log.addHandler(handler)
    try:
        with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
                dask_client(cluster.scheduler_address), pytest.raises(ValueError):
            frame = dd.from_pandas(pd.DataFrame({"x": [1.0, 2.0]}), npartitions=1)
            frame.map_partitions(quoting_failure, meta=frame._meta).compute()
    finally:
        worker_log.removeHandler(handler)
    failed = [r.getMessage() for r in records if r.getMessage().startswith("Compute Failed")]
    assert failed and all("details withheld" in m and TEXT_CANARIES[NOTE] not in m for m in failed)


def test_messages_of_ours_that_wrap_a_library_error_withhold_what_it_quotes():
    from sdc_tasks.errors import reason_of
    from sdc_tasks.files import reader_reason

    quoted = ValueError(f"could not convert string to float: '{TEXT_CANARIES[NOTE]}' (\"{TEXT_CANARIES[NAME]}\")")
    assert TEXT_CANARIES[NOTE] not in reader_reason(quoted) and TEXT_CANARIES[NAME] not in reader_reason(quoted)
    assert reader_reason(ValueError("Error tokenizing data. C error: Expected 14 fields in line 5, saw 15")) == \
        "Error tokenizing data. C error: Expected 14 fields in line 5, saw 15"
    assert reason_of(quoted) == "ValueError (details withheld: they may quote confidential values)"
    from sdc_tasks.masking.registry import validate_params

    with pytest.raises(ValueError) as ours:
        validate_params("mdav", {"k": 1})
    assert reason_of(ours.value) == str(ours.value)
