"""What a post-masking step reports (docs/postmask.md, "What a run reports"): E before and after, TargetE, the
IL1 ratio, the tries and whether TargetE was met, checked against hand-computed values on a tiny file and
against a recomputation from the output; the warning of ``sdc mask``; the release's metrics.json keys, its
report's warning and the gate on ``postmask_blocks_short``."""

from __future__ import annotations

import json
import math

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from distributed import Client, LocalCluster
from spec_files import demo_spec_file
from typer.testing import CliRunner

from sdc_tasks.api import evaluate, mask
from sdc_tasks.cli import app
from sdc_tasks.errors import ReleaseRefused, SpecError
from sdc_tasks.evaluation.measures import evaluate as measures
from sdc_tasks.masking.apply import StepContext
from sdc_tasks.masking.methods import apply_step
from sdc_tasks.masking.registry import validate_params
from sdc_tasks.pipeline.run import run_release
from sdc_tasks.pipeline.spec import load_spec

TINY_ORIGINAL = pd.DataFrame({"record_id": [0, 1, 2, 3], "a": [1.0, 2.0, 3.0, 4.0], "b": [10.0, 20.0, 30.0, 40.0]})
TINY_MASKED = TINY_ORIGINAL.assign(a=TINY_ORIGINAL["a"] + 1.0)  # a shifted by 1, b unchanged


def outcome_of(masked: pd.DataFrame, original: pd.DataFrame, variables: list[str], **params):
    """The outcome of one postmask step (synchronous Dask)."""
    with dask.config.set(scheduler="synchronous"):
        staged = apply_step(dd.from_pandas(masked, npartitions=1), "postmask", variables,
                            validate_params("postmask", params),
                            StepContext(1, 0, "record_id", reference=dd.from_pandas(original, npartitions=1)))
        return staged.outcome, staged.frame.compute()


def test_tiny_file_without_tries_hand_computed():
    # standardized with a's mean 2.5 and sd sqrt(1.25): the shift adds 1 / sqrt(1.25) to the mean of z_a
    # (squared: 0.8) and (0.25 + 0.25 + 2.25 + 6.25) / 4 / 1.25 - 1 = 0.8 to the mean of z_a^2 (squared: 0.64);
    # b and the cross product z_a z_b (mean of z_b is 0) do not change: E = 1.44. IL1 by id: (1 + 1/2 + 1/3 + 1/4)
    # / (2 x 4) x 100 = 26.0417 percent
    outcome, out = outcome_of(TINY_MASKED, TINY_ORIGINAL, ["a", "b"], p=0.5, q=0.5, target_e=0.5, max_iter=0,
                              correspondence="id")
    assert outcome.e_before == pytest.approx(1.44) and outcome.e_after == pytest.approx(1.44)
    assert outcome.il1_before == pytest.approx(100 * (1 + 1 / 2 + 1 / 3 + 1 / 4) / 8)
    assert outcome.il1_ratio == pytest.approx(1.0)
    assert (outcome.iterations, outcome.blocks, outcome.blocks_met, outcome.records) == (0, 1, 0, 4)
    assert not outcome.met and outcome.warning().startswith("warning: postmask stopped short of TargetE 0.5")
    assert outcome.metrics() == {"postmask_E_before": pytest.approx(1.44), "postmask_E_after": pytest.approx(1.44),
                                 "postmask_target_E": 0.5, "postmask_IL1_ratio": pytest.approx(1.0),
                                 "postmask_iterations": 0, "postmask_target_met": 0, "postmask_blocks_short": 1}
    pd.testing.assert_frame_equal(out.reset_index(drop=True), TINY_MASKED)
    met, _ = outcome_of(TINY_MASKED, TINY_ORIGINAL, ["a", "b"], p=0.5, q=0.5, target_e=2.0, correspondence="id")
    assert met.met and met.iterations == 0 and met.warning() is None and met.metrics()["postmask_target_met"] == 1


def moment_error(original: np.ndarray, masked: np.ndarray) -> float:
    """E of expr. (7) written out: means, squares and cross products of the standardized variables."""
    center, scale = original.mean(axis=0), original.std(axis=0)
    zo, zm = (original - center) / scale, (masked - center) / scale
    d = zo.shape[1]
    e = sum((zm[:, j].mean() - zo[:, j].mean()) ** 2 + (np.mean(zm[:, j] ** 2) - np.mean(zo[:, j] ** 2)) ** 2
            for j in range(d))
    return e + sum((np.mean(zm[:, j] * zm[:, k]) - np.mean(zo[:, j] * zo[:, k])) ** 2
                   for j in range(d) for k in range(j + 1, d))


def test_reported_figures_are_those_of_the_output():
    rng = np.random.default_rng(3)
    original = pd.DataFrame(rng.lognormal(size=(300, 3)) + 1.0, columns=["a", "b", "c"])
    original.insert(0, "record_id", np.arange(300))
    masked = original.copy()
    masked[["a", "b", "c"]] += rng.normal(scale=0.4, size=(300, 3))
    outcome, out = outcome_of(masked, original, ["a", "b", "c"], p=0.8, q=0.4, target_e=0.002, correspondence="id")
    x, before, after = (f[["a", "b", "c"]].to_numpy() for f in (original, masked, out.sort_values("record_id")))
    assert outcome.met and outcome.iterations > 0
    assert outcome.e_before == pytest.approx(moment_error(x, before), rel=1e-9)
    assert outcome.e_after == pytest.approx(moment_error(x, after), rel=1e-9) and outcome.e_after < 0.002
    il1 = 100 * np.mean(np.abs(after - x) / np.abs(x))
    assert outcome.il1_after == pytest.approx(il1, rel=1e-9)
    assert outcome.il1_ratio == pytest.approx(il1 / (100 * np.mean(np.abs(before - x) / np.abs(x))), rel=1e-9)


def test_sdc_mask_warns_in_one_line_when_target_is_not_met(tmp_path):
    original, masked = tmp_path / "original.csv", tmp_path / "masked.csv"
    TINY_ORIGINAL.to_csv(original, index=False)
    TINY_MASKED.to_csv(masked, index=False)
    result = CliRunner().invoke(app, ["mask", "--input", str(masked), "--original", str(original), "--method",
                                      "postmask", "--param", "p=0.5", "--param", "q=0.5", "--param", "target_e=0.5",
                                      "--param", "max_iter=0", "--out", str(tmp_path / "out.csv")])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert "postmask: E 1.44 -> 1.44, TargetE 0.5 NOT met in 1 of 1 blocks; IL1 ratio 1 (p = 0.5); 0 tries" in lines
    warnings = [line for line in lines if line.startswith("warning:")]
    assert len(warnings) == 1 and "stopped short of TargetE 0.5" in warnings[0]
    assert "Traceback" not in result.output


@pytest.fixture(scope="module")
def client():
    """An in-process Dask cluster (threads) shared by this module's releases."""
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster, set_as_default=False) as c:
        yield c


def postmask_spec(tmp_path, max_iter: int, gate: dict, target_e: float = 0.01):
    """The demo spec with noise then postmask and the IL family only."""
    path = demo_spec_file(tmp_path, steps=[{"method": "noise", "params": {"p": 0.3}},
                                           {"method": "postmask", "params": {"p": 0.8, "q": 0.3, "target_e": target_e,
                                                                             "max_iter": max_iter}}],
                          metrics=["il"], gate={"max": gate})
    return load_spec(path)


def test_release_reports_and_gates_on_the_target(tmp_path, client):
    spec = postmask_spec(tmp_path, 0, {"postmask_blocks_short": 0})
    with pytest.raises(ReleaseRefused):
        run_release(spec, client=client)
    metrics = json.loads((tmp_path / "release" / "metrics.json").read_text())
    assert metrics["postmask_target_met"] == 0 and metrics["postmask_blocks_short"] == 1
    assert metrics["postmask_iterations"] == 0 and metrics["postmask_E_after"] == metrics["postmask_E_before"] > 0.01
    assert math.isclose(metrics["postmask_IL1_ratio"], 1.0)
    report = (tmp_path / "release" / "report.md").read_text()
    assert "**Warning**: step 2: postmask stopped short of TargetE 0.01" in report
    assert "postmask_blocks_short = 1 > limit 0" in report
    assert '<p class="warning">' in (tmp_path / "release" / "report.html").read_text()


def test_release_that_meets_the_target_passes_the_gate(tmp_path, client):
    summary = run_release(postmask_spec(tmp_path, 1_000_000, {"postmask_blocks_short": 0}, 0.05), client=client)
    assert summary.published and summary.metrics["postmask_target_met"] == 1
    assert summary.metrics["postmask_E_after"] < 0.05 < summary.metrics["postmask_E_before"]
    assert summary.steps[1].outcome["blocks_met"] == 1 and summary.steps[0].outcome is None
    assert "Warning" not in summary.paths.report_md.read_text()


def test_a_postmask_gate_needs_a_postmask_step(tmp_path):
    path = demo_spec_file(tmp_path, gate={"max": {"postmask_blocks_short": 0}})
    with pytest.raises(SpecError, match="gate.max.postmask_blocks_short: needs a postmask or synthetic_postmask"):
        load_spec(path)


# ---- the paper's evaluation setup (sec. 2): each masked record stands for its nearest original record ----


def test_paper_pairing_measures_against_the_nearest_original_hand_computed():
    original = pd.DataFrame({"record_id": [0, 1, 2], "a": [1.0, 2.0, 4.0], "b": [1.0, 2.0, 4.0]})
    masked = pd.DataFrame({"record_id": [0, 1, 2], "a": [2.2, 1.1, 4.0], "b": [2.2, 1.1, 4.0]})
    # nearest originals: record 0 -> 1, 1 -> 0, 2 -> 2; IL1 = (2 x 0.2 / 2 + 2 x 0.1 / 1) / 6 x 100; by id the
    # cells are 1.2 / 1 and 0.9 / 2 (twice each): (2.4 + 0.9) / 6 x 100 = 55
    paper = evaluate(original, masked, vars=["a", "b"], key_vars=["a", "b"], families=["il"], pairing="paper")
    by_id = evaluate(original, masked, vars=["a", "b"], key_vars=["a", "b"], families=["il"], pairing="id")
    assert paper["IL1"] == pytest.approx(100 * 0.4 / 6) and by_id["IL1"] == pytest.approx(55.0)
    assert paper["pairing"] == "paper" and by_id["pairing"] == "id"


def test_sdc_evaluate_pairing_paper_gives_the_papers_risk_measures(tmp_path, census, dask_scheduler):
    cols = [c for c in census.columns if c != "record_id"]
    with dask.config.set(scheduler="synchronous"):
        swapped = mask(census, "rankswap", p=14, seed=1)
        expected = measures(dd.from_pandas(census, 1), dd.from_pandas(swapped, 1), "record_id", cols, cols[:7],
                            ("il", "dld", "id"), pairing="paper")  # the API route of the benchmark
    swapped.to_csv(tmp_path / "swapped.csv", index=False)
    census.to_csv(tmp_path / "census.csv", index=False)
    result = CliRunner().invoke(app, ["evaluate", "--original", str(tmp_path / "census.csv"), "--masked",
                                      str(tmp_path / "swapped.csv"), "--families", "il,dld,id", "--pairing",
                                      "paper", "--dask-address", dask_scheduler])
    assert result.exit_code == 0, result.output
    got = json.loads(result.output[result.output.index("{"):])
    assert got["pairing"] == "paper"
    for key in ("IL", "DLD", "ID", "score_simple", "DLD_7", "ID_10"):
        assert got[key] == pytest.approx(expected[key], rel=1e-9), key


def test_published_linkage_takes_the_keys_in_the_files_column_order(census):
    """DLDpub and PLDpub (docs/reproduction.md) take their first i keys in the file's column order, so the
    chapter's key order (FEDTAX first) gives the same figures as the file's (AFNLWGT first)."""
    cols = [c for c in census.columns if c != "record_id"]
    chapter = ["FEDTAX", "AFNLWGT", "AGI", "EMCONTRB", "PTOTVAL", "TAXINC", "STATETAX"]
    file_order = [c for c in cols if c in chapter]
    assert file_order != chapter
    with dask.config.set(scheduler="synchronous"):
        swapped = mask(census, "rankswap", p=14, seed=1)
        given = [evaluate(census, swapped, vars=cols, key_vars=keys, families=["dld_published", "pld_published"])
                 for keys in (chapter, file_order)]
    published = [k for k in given[1] if k.startswith(("DLDpub", "PLDpub"))]
    assert len(published) == 16 and all(given[0][k] == given[1][k] for k in published)
