"""The Prefect release flow end to end on the Census file: outputs, gate, atomicity and reruns."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from spec_files import demo_spec_file

from sdc_tasks.errors import ReleaseRefused
from sdc_tasks.files import tree_checksums
from sdc_tasks.generate import CENSUS_VARIABLES
from sdc_tasks.outputs import MARKER

pytestmark = pytest.mark.usefixtures("prefect_harness")


@pytest.fixture
def run(dask_scheduler):
    """The release flow on a spec file, attached to the session's Dask scheduler (a run's own cluster is tested by
    the command-line tests: test_operations, test_interruption)."""
    from flows.release import release

    def on_the_scheduler(spec_path: Path, **kw):
        return release(str(spec_path), dask_address=dask_scheduler, **kw)

    return on_the_scheduler


@pytest.fixture(scope="module")
def published_state(tmp_path_factory, dask_scheduler):
    """The final state of one published demo release (module-scoped: the flow takes a few seconds) and its
    output directory."""
    from flows.release import release

    tmp = tmp_path_factory.mktemp("published")
    state = release(str(demo_spec_file(tmp)), dask_address=dask_scheduler, return_state=True)
    return state, tmp / "release"


@pytest.fixture(scope="module")
def published(published_state):
    """The output directory and summary of the published demo release."""
    state, out = published_state
    return out, state.result()


def test_release_writes_every_output(published, census):
    out, summary = published
    names = {p.name for p in out.iterdir()}
    assert names == {"masked", "metrics.json", "report.md", "report.html", "ru_map.png", "manifest.json", MARKER}
    masked = pd.read_parquet(out / "masked").sort_values("record_id").reset_index(drop=True)
    assert list(masked.columns) == list(census.columns)
    assert len(masked) == 1080
    assert masked["record_id"].tolist() == census["record_id"].tolist()
    variables = [c for c in census.columns if c != "record_id"]
    for i in range(0, 13, 3):
        sizes = masked.groupby(variables[i:i + 3]).size()
        assert sizes.min() >= 3
    np.testing.assert_allclose(masked[variables].mean(), census[variables].mean(), rtol=1e-12)


def test_metrics_json_has_metrics_md_keys(published):
    out, summary = published
    metrics = json.loads((out / "metrics.json").read_text())
    for key in ["IL1", "IL2", "IL3", "IL4", "IL5", "IL", "DLD", "PLD", "ID", "score", "score_simple", "score_pil",
                "SDID",
                *[f"DLD_{i}" for i in range(1, 8)], *[f"DLD2_{i}" for i in range(1, 8)],
                *[f"ID_{p}" for p in range(1, 11)]]:
        assert isinstance(metrics[key], float), key
    assert metrics["IL2"] < 1e-9  # microaggregation preserves means
    assert metrics["score_simple"] == pytest.approx(0.5 * metrics["IL"] + 0.25 * metrics["DLD"]
                                                    + 0.25 * metrics["ID"])
    assert metrics["score"] == pytest.approx(0.5 * metrics["IL"] + 0.125 * metrics["DLD"]
                                             + 0.125 * metrics["PLD"] + 0.25 * metrics["ID"])
    assert 0 < metrics["PLD"] <= metrics["PLD_candidate_recall"] <= 100
    assert metrics["n"] == metrics["n_masked"] == 1080
    assert summary.published and all(c.passed for c in summary.checks)


def test_manifest_checksums_match_files(published):
    out, _ = published
    manifest = json.loads((out / "manifest.json").read_text())
    actual = {k: v for k, v in tree_checksums(out).items() if k != "manifest.json"}
    assert manifest["files"] == actual
    assert any(k.startswith("masked/") for k in actual)
    assert manifest["row_counts"] == {"original": 1080, "masked": 1080}
    assert manifest["seed"] == 20261123 and len(manifest["spec_hash"]) == 64
    assert manifest["packages"]["dask"]
    assert manifest["columns"] == {"record_id": "id", **{c: "masked" for c in CENSUS_VARIABLES}}


def test_report_says_published_and_holds_no_record_values(published, census):
    out, _ = published
    text = (out / "report.md").read_text()
    assert "PUBLISHED" in text and "ru_map.png" in text
    html = (out / "report.html").read_text()
    assert "<img" in html
    for value in census["AFNLWGT"].head(50):
        assert str(value) not in text


def test_the_report_s_pictures_are_drawn_once_for_its_files_and_its_artifact(published, tmp_path, monkeypatch):
    """The report task draws the R-U map and the sections once, for report.md, report.html and the Prefect
    artifact (which shows the same sections, its pictures inline)."""
    import flows.artifacts
    import sdc_tasks.report.release_report as release_report

    calls = {"sections": 0, "ru": 0}
    sections, ru_picture = release_report.report_sections, release_report.ru_picture

    def counted(name, draw):
        def drawing(*args):
            calls[name] += 1
            return draw(*args)
        return drawing

    monkeypatch.setattr(release_report, "report_sections", counted("sections", sections))
    monkeypatch.setattr(release_report, "ru_picture", counted("ru", ru_picture))
    shown: list[str] = []
    monkeypatch.setattr(flows.artifacts, "create_markdown_artifact", lambda markdown, **kw: shown.append(markdown))
    _, summary = published
    flows.artifacts.published_with_artifacts(summary, tmp_path, "release")
    assert calls == {"sections": 1, "ru": 1}
    headings = [line for line in (tmp_path / "report.md").read_text().splitlines() if line.startswith("## ")]
    assert len(headings) > 5 and [line for line in shown[0].splitlines() if line.startswith("## ")] == headings
    assert "data:image/png;base64," in shown[0]


def test_rerun_gives_identical_files(published, tmp_path, run):
    out, _ = published
    run(demo_spec_file(tmp_path))
    first = {k: v for k, v in tree_checksums(out).items() if k.startswith("masked/")}
    second = {k: v for k, v in tree_checksums(tmp_path / "release").items() if k.startswith("masked/")}
    assert first == second


@pytest.mark.parametrize("limits,failing,message", [({"DLD": 1.0, "ID": 99.0}, "DLD", r"DLD = [0-9.]+ > limit 1 "),
                                                    ({"PLD": 5.0, "DLD": 99.0}, "PLD", r"PLD = [0-9.]+ > limit 5 ")])
def test_gate_refusal_publishes_nothing_but_reports_why(tmp_path, limits, failing, message, run):
    spec = demo_spec_file(tmp_path, gate={"max": limits})
    with pytest.raises(ReleaseRefused, match=message) as refused:
        run(spec)
    assert [c.measure for c in refused.value.checks] == [failing]
    assert refused.value.result.verdict == "refused" and refused.value.result.paths.masked is None
    out = tmp_path / "release"
    assert not (out / "masked").exists()
    assert "REFUSED" in (out / "report.md").read_text()
    assert json.loads((out / "manifest.json").read_text())["row_counts"]["masked"] == 0


def test_bad_input_leaves_no_output(tmp_path, run):
    spec = demo_spec_file(tmp_path, variables={"key": ["FEDTAX"], "continuous": ["FEDTAX", "NOPE"],
                                           "pass_through": [c for c in CENSUS_VARIABLES if c != "FEDTAX"]})
    with pytest.raises(Exception, match="NOPE"):
        run(spec)
    assert not (tmp_path / "release").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".release")]


def test_rank_swap_release_accounts_for_every_column(tmp_path, census, run):
    data = census.copy()
    data["name"] = [f"person-{i}" for i in range(len(data))]
    data["note"] = "interviewer remark"
    src = tmp_path / "with_names.csv"
    data.to_csv(src, index=False)
    masked_vars, passed = ["FEDTAX", "AGI", "PTOTVAL"], [c for c in census.columns[1:] if c not in {"FEDTAX", "AGI",
                                                                                                    "PTOTVAL"}]
    spec = demo_spec_file(
        tmp_path,
        input={"path": str(src), "format": "csv"},
        create_id=False,
        variables={"direct_identifiers": ["name"], "key": ["FEDTAX", "AGI"], "continuous": masked_vars,
                   "pass_through": passed, "drop": ["note"]},
        steps=[{"method": "rankswap", "params": {"p": 10}}],
        gate={"max": {"ID": 95.0}},
    )
    summary = run(spec)
    out = tmp_path / "release"
    masked = pd.read_parquet(out / "masked").sort_values("record_id").reset_index(drop=True)
    assert list(masked.columns) == ["record_id", *census.columns[1:]]  # name and note are not published
    for v in masked_vars:
        assert sorted(masked[v]) == sorted(census[v].astype(float))
    pd.testing.assert_frame_equal(masked[passed], census[passed])  # same values and types
    expected = {"record_id": "id", "name": "dropped", "note": "dropped", **{v: "masked" for v in masked_vars},
                **{v: "passed_through" for v in passed}}
    assert json.loads((out / "manifest.json").read_text())["columns"] == expected == summary.columns
    variables = summary.as_dict()["variables"]
    assert variables["passed_through"] == passed and variables["dropped"] == ["name", "note"]
    assert "Passed through unchanged" in (out / "report.md").read_text()


def test_prefect_shows_each_stage_as_a_named_task(published_state):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, FlowRunFilter, FlowRunFilterId, TaskRunFilter
    from prefect.client.schemas.sorting import ArtifactSort, TaskRunSort

    state, _ = published_state
    assert state.is_completed()
    flow_run_id = state.state_details.flow_run_id
    with get_client(sync_client=True) as client:
        this_run = FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id]))
        runs = client.read_task_runs(flow_run_filter=this_run,
                                     sort=TaskRunSort.EXPECTED_START_TIME_ASC, limit=200)
        artifacts = {a.key: a for a in client.read_artifacts(
            artifact_filter=ArtifactFilter(), flow_run_filter=this_run, task_run_filter=TaskRunFilter(),
            limit=200, offset=0, sort=ArtifactSort.CREATED_DESC)}
    names = {r.name for r in runs}
    assert {"validate", "block step 0", "mask step 0: md", "write step 0", "evaluate", "profile", "gate",
            "report"} <= names
    assert all(r.state.is_completed() and r.total_run_time.total_seconds() > 0 for r in runs)
    assert set(artifacts) == {"release-report", "release-il", "release-dr", "release-scores"}
    # the UI shows what an artifact holds: pictures inline, never a link to a file on the run's machine
    assert not any("file:" in str(a.data) for a in artifacts.values())
    report = artifacts["release-report"].data
    assert report.startswith("# Release report: census-demo\n\n**PUBLISHED**")
    assert report.count("](data:image/png;base64,") == 4
    rows = json.loads(artifacts["release-dr"].data)
    assert {"DLD", "PLD", "ID"} <= {row["measure"] for row in rows} and "IL" not in {row["measure"] for row in rows}
    dld = next(row for row in rows if row["measure"] == "DLD")
    assert dld["value"] == f"{state.result().metrics['DLD']:.4g}" and dld["unit"] == "percent"


def test_stage_spans_follow_each_other_and_match_the_stage_seconds(published):
    _, summary = published
    spans, seconds = summary.stage_spans, summary.stage_seconds
    assert list(spans) == list(seconds)
    ends = [end for _, end in spans.values()]
    starts = [start for start, _ in spans.values()]
    assert all(a <= b for a, b in zip(ends, starts[1:]))
    for stage, (start, end) in spans.items():
        assert end - start == pytest.approx(seconds[stage], abs=1e-3)
