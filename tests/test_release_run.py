"""``run_release``: the release in the library, without Prefect. It writes the same files as the Prefect flow,
returns a typed summary, raises ReleaseRefused carrying the failing checks and the refused summary, evaluates
once, and reads the input file once into a checkpoint (a handful of opens, where every stage used to re-open it)."""

from __future__ import annotations

import builtins
import contextlib
import io
import json
from pathlib import Path

import pytest
from distributed import Client, LocalCluster
from spec_files import demo_spec_file

import sdc_tasks.pipeline.stages
from sdc_tasks.errors import ReleaseRefused
from sdc_tasks.evaluation import pairing
from sdc_tasks.files import tree_checksums
from sdc_tasks.generate import bundled_path
from sdc_tasks.pipeline.run import LOG, Stages, released, run_release
from sdc_tasks.pipeline.spec import load_spec
from sdc_tasks.pipeline.stages import WORK_DIR, block_stage, mask_stage, write_stage
from sdc_tasks.pipeline.summary import ReleaseSummary

MDAV = [{"method": "mdav", "params": {"k": 3}}]


@pytest.fixture(scope="module")
def client():
    """An in-process Dask cluster (threads) shared by this module's runs."""
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster, set_as_default=False) as c:
        yield c


def published_files(out: Path) -> dict[str, str]:
    """Checksums of the files whose bytes do not depend on when the run ran (masked/, metrics.json, the map)."""
    return {k: v for k, v in tree_checksums(out).items()
            if k.startswith("masked/") or k in ("metrics.json", "ru_map.png")}


@pytest.fixture(scope="module")
def published(tmp_path_factory, client):
    """One published run of the demo spec: its output directory and summary."""
    tmp = tmp_path_factory.mktemp("run")
    summary = run_release(load_spec(demo_spec_file(tmp)), client=client)
    return tmp / "release", summary


def test_run_release_publishes_and_summarises(published, census):
    out, summary = published
    assert isinstance(summary, ReleaseSummary)
    assert summary.verdict == "published" and summary.published and summary.kind == "release"
    assert summary.records_in == summary.records_out == len(census)
    assert [(s.method, s.params["k"], s.blocks) for s in summary.steps] == [("md", 7, 1)]
    assert summary.paths.out_dir == out.resolve() and summary.paths.masked == out.resolve() / "masked"
    for path in (summary.paths.metrics, summary.paths.report_md, summary.paths.report_html, summary.paths.ru_map,
                 summary.paths.manifest):
        assert path.is_file()
    assert not [p for p in out.rglob("*") if "_work" in p.parts]  # the checkpoint went with the work directory
    assert json.loads(summary.paths.metrics.read_text()) == summary.metrics
    assert list(summary.stage_seconds) == ["validate", "step 0 (md)", "evaluate"]
    manifest = json.loads(summary.paths.manifest.read_text())
    assert manifest["spec_hash"] == summary.spec_hash and manifest["seed"] == summary.seed == 20261123
    assert manifest["row_counts"] == {"original": 1080, "masked": 1080}


def test_gate_checks_are_typed_with_their_margin(published):
    _, summary = published
    limits = {"DLD": 40.0, "PLD": 80.0, "ID": 80.0}
    assert sorted(c.measure for c in summary.checks) == sorted(limits)
    for c in summary.checks:
        assert c.op == "<=" and c.limit == limits[c.measure] and c.value == summary.metrics[c.measure]
        assert c.passed and c.margin == pytest.approx(c.limit - c.value) and c.margin > 0


def test_run_release_leaves_the_given_client_open(published, client):
    assert client.status == "running"


def test_run_release_writes_the_flows_files(tmp_path, client, prefect_harness, dask_scheduler):
    from flows.release import release

    path, out = demo_spec_file(tmp_path, dask={"address": dask_scheduler}), tmp_path / "out"  # the flow attaches
    by_flow = release(str(path), out_dir=str(out), overwrite=True)
    flow_files, flow_manifest = published_files(out), json.loads((out / "manifest.json").read_text())
    by_run = run_release(load_spec(path), client=client, out_dir=out, overwrite=True)
    assert published_files(out) == flow_files and any(k.startswith("masked/") for k in flow_files)
    assert by_run.metrics == by_flow.metrics and by_run.spec_hash == by_flow.spec_hash
    assert by_run.checks == by_flow.checks and by_run.steps[0].params == by_flow.steps[0].params
    run_manifest = json.loads((out / "manifest.json").read_text())
    assert {k: v for k, v in run_manifest.items() if k != "files"} == \
        {k: v for k, v in flow_manifest.items() if k != "files"}


def test_refusal_raises_with_the_failing_checks_and_the_summary(tmp_path, client):
    spec = load_spec(demo_spec_file(tmp_path, gate={"max": {"DLD": 1.0, "ID": 99.0}}))
    with pytest.raises(ReleaseRefused, match=r"DLD = [0-9.]+ > limit 1 \(report: .*report\.md\)") as refused:
        run_release(spec, client=client, out_dir=tmp_path / "elsewhere")
    (check,) = refused.value.checks
    assert check.measure == "DLD" and not check.passed and check.margin == pytest.approx(1.0 - check.value)
    assert check.margin < 0
    result = refused.value.result
    assert result.verdict == "refused" and result.paths.masked is None
    out = tmp_path / "elsewhere"
    assert result.paths.out_dir == out.resolve()
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == [
        "manifest.json", "metrics.json", "report.html", "report.md", "ru_map.png"]
    assert json.loads((out / "manifest.json").read_text())["row_counts"] == {"original": 1080, "masked": 0}
    assert "REFUSED" in (out / "report.md").read_text()
    assert not (tmp_path / "release").exists()


def test_one_evaluation_per_release(tmp_path, client, monkeypatch):
    real, calls = sdc_tasks.pipeline.stages.evaluate, []

    def counted(*args, **kwargs):
        calls.append(args[5])
        return real(*args, **kwargs)

    monkeypatch.setattr(sdc_tasks.pipeline.stages, "evaluate", counted)
    summary = run_release(load_spec(demo_spec_file(tmp_path, steps=MDAV)), client=client)
    assert calls == [("il", "pil", "dld", "pld", "id")]
    assert {"IL", "PIL", "DLD", "PLD", "ID", "score"} <= set(summary.metrics)


def test_the_input_file_is_opened_at_most_four_times(tmp_path, client, monkeypatch):
    """A one-step MDAV release of the Census CSV with create_id: true (every stage used to re-open the input and
    count its rows again: 46 opens before the checkpoint); the input's identity is taken from the file system,
    without opening it."""
    census = str(bundled_path("census.csv"))
    opens = []
    real = builtins.open

    def counting(file, *args, **kwargs):
        if str(file) == census:
            opens.append(file)
        return real(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", counting)
    monkeypatch.setattr(io, "open", counting)
    summary = run_release(load_spec(demo_spec_file(tmp_path, steps=MDAV)), client=client)
    assert summary.published and summary.records_out == 1080
    assert 1 <= len(opens) <= 4


def test_the_release_report_opens_with_the_headline_and_shows_each_variable(published):
    _, summary = published
    text = summary.paths.report_html.read_text()
    assert text.index('<section class="headline"') < text.index("<h2") and "PUBLISHED" in text[:text.index("<h2")]
    variables = summary.profile["variables"]
    assert [v["variable"] for v in variables] == load_spec(bundled_path("demo.yaml")).variables.continuous
    # every variable holds all n paired records: the means of the per-variable ID and brMAE are the release's
    assert sum(v["measures"]["ID"] for v in variables) / len(variables) == pytest.approx(summary.metrics["ID"])
    assert sum(v["measures"]["brMAE"] for v in variables) / len(variables) == pytest.approx(summary.metrics["brMAE"])
    assert text.count('<img src="data:image/png;base64,') == 4  # distributions, DLD curve, correlations, R-U map
    assert 'src="ru_map.png"' not in text


def test_an_evaluation_kept_out_of_memory_reads_the_checkpoint_and_output_side_by_side(published, tmp_path, client,
                                                                                        monkeypatch):
    """A release whose pairs the workers could not hold (forced here) pairs its input's checkpoint (ids from row
    positions: the Census file has none) with its output by reading both, writing no copy of them: the same
    metrics.json as the run that held its pairs in memory."""
    zipped, written = [], []
    monkeypatch.setattr(pairing, "workers_hold", lambda nbytes: False)
    monkeypatch.setattr(pairing, "zipped_files",
                        lambda *a, _z=pairing.zipped_files: zipped.append(_z(*a)) or zipped[-1])
    monkeypatch.setattr(pairing, "_read_pairs", lambda path, _r=pairing._read_pairs: written.append(path) or _r(path))
    run_release(load_spec(demo_spec_file(tmp_path)), client=client)
    assert len(zipped) == 1 and zipped[0] is not None and written == []
    metrics = {k: v for k, v in published_files(tmp_path / "release").items() if k == "metrics.json"}
    assert metrics == {k: v for k, v in published_files(published[0]).items() if k == "metrics.json"}


def test_each_stage_removes_the_scratch_that_only_it_read(tmp_path, client):
    """A release of two steps (MDAV on blocks, then rank swapping): the mask stage removes the blocks it read, the
    write stage the masked values it read and the output of the step before (its input), so that a large release
    keeps no copy of the file that no later stage reads; what later stages read stays until they have run."""
    seen = []

    def noted(stage):
        def run(spec, i, paths):
            out = stage(spec, i, paths)
            work = paths.root / WORK_DIR
            seen.append((stage.__name__, i, sorted(str(p.relative_to(work)) for p in work.glob("step-*/*"))))
            return out
        return run

    @contextlib.contextmanager
    def on_client():
        with client.as_current():
            yield client

    steps = [{"method": "mdav", "params": {"k": 3}}, {"method": "rankswap", "params": {"p": 15}}]
    spec = load_spec(demo_spec_file(tmp_path, steps=steps, metrics=["il"], gate={"max": {"IL": 100.0}}))
    summary = released(spec, on_client(), Stages(block=noted(block_stage), mask=noted(mask_stage),
                                                 write=noted(write_stage)), LOG)
    assert summary.published and summary.records_out == 1080
    assert seen == [("block_stage", 0, ["step-00/blocks"]),
                    ("mask_stage", 0, ["step-00/masked-values"]),
                    ("write_stage", 0, ["step-00/output"]),
                    ("mask_stage", 1, ["step-00/output", "step-01/masked-values"]),
                    ("write_stage", 1, [])]
