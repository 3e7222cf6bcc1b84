"""Prefect task retries of the release stages: a transient IO error is retried once, bad input is not."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

import flows.release as F
from sdc_tasks.errors import InputError
from sdc_tasks.files import tree_checksums
from sdc_tasks.generate import bundled_path
from sdc_tasks.pipeline import stages as R
from sdc_tasks.pipeline import summary as S
from sdc_tasks.pipeline.run import Stages

pytestmark = pytest.mark.usefixtures("prefect_harness")


@pytest.fixture(scope="module")
def address(dask_scheduler):
    """The session's Dask scheduler, shared by this module's releases (no cluster start per run)."""
    return dask_scheduler


@pytest.fixture
def no_retry_wait(monkeypatch):
    """The release stages as they are (same retries and retry condition) without the 5 s wait between tries."""
    tasks = {f.name: getattr(F.TASKS, f.name) for f in dataclasses.fields(Stages)}
    monkeypatch.setattr(F, "TASKS", Stages(**{n: t.with_options(retry_delay_seconds=0) for n, t in tasks.items()}))


def spec_file(tmp_path: Path) -> Path:
    """The bundled demo spec with an absolute input path and its output under tmp_path, measuring information loss
    only (a retry does not depend on the measures; the disclosure-risk ones take most of a demo run)."""
    spec = yaml.safe_load(bundled_path("demo.yaml").read_text())
    spec["input"]["path"] = str(bundled_path("census.csv"))
    spec["output"] = {"dir": str(tmp_path / "release"), "overwrite": False}
    spec.update(metrics=["il"], gate={"max": {"IL": 100.0}, "min_group_size": 3})
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def masked_checksums(out: Path) -> dict[str, str]:
    """SHA-256 of every file of the masked dataset of a release."""
    return {k: v for k, v in tree_checksums(out).items() if k.startswith("masked/")}


def task_run_counts(flow_run_id) -> dict[str, int]:
    """How many times Prefect ran each task of a flow run (2 for a stage that was retried once)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId
    from prefect.client.schemas.sorting import TaskRunSort

    with get_client(sync_client=True) as client:
        runs = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])),
                                     sort=TaskRunSort.EXPECTED_START_TIME_ASC, limit=200)
    return {r.name: r.run_count for r in runs}


def failing_once(real, exc: Exception):
    """``real`` wrapped to raise ``exc`` on its first call only; ``calls`` counts the calls."""
    def wrapper(*args, **kwargs):
        wrapper.calls += 1
        if wrapper.calls == 1:
            raise exc
        return real(*args, **kwargs)

    wrapper.calls = 0
    return wrapper


@pytest.fixture(scope="module")
def undisturbed(tmp_path_factory, address):
    """Checksums of the masked files of a release without injected errors."""
    tmp = tmp_path_factory.mktemp("undisturbed")
    F.release(str(spec_file(tmp)), dask_address=address)
    return masked_checksums(tmp / "release")


@pytest.mark.parametrize("module,function,stage", [
    (R, "validate_input", "validate"),      # reading the input
    (R, "mask_stage", "mask step 0: md"), # a Dask stage writing Parquet
    (S, "write_report", "report"),          # writing the report files
])
def test_transient_io_error_is_retried_and_the_release_completes(
        tmp_path, monkeypatch, no_retry_wait, address, undisturbed, module, function, stage):
    flaky = failing_once(getattr(module, function), OSError(f"transient: {function}"))
    monkeypatch.setattr(module, function, flaky)
    state = F.release(str(spec_file(tmp_path)), dask_address=address, return_state=True)
    assert state.is_completed()
    runs = task_run_counts(state.state_details.flow_run_id)
    assert runs[stage] == 2 and flaky.calls == 2
    assert all(n == 1 for name, n in runs.items() if name != stage)
    assert masked_checksums(tmp_path / "release") == undisturbed
    assert (tmp_path / "release" / "report.md").is_file()


def test_bad_input_is_not_retried(tmp_path, monkeypatch, no_retry_wait, address):
    broken = failing_once(R.validate_input, InputError("variable 'AGI' is broken"))
    monkeypatch.setattr(R, "validate_input", broken)
    with pytest.raises(InputError, match="'AGI' is broken"):
        F.release(str(spec_file(tmp_path)), dask_address=address)
    assert broken.calls == 1
    assert not (tmp_path / "release").exists()
