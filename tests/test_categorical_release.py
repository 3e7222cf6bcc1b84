"""A mixed release of the household survey (deploy/specs/household-mixed.yaml): categorical and continuous
variables masked in one run, dtypes kept, k-anonymity reached, the same bytes on 1 and 2 workers."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from sdc_tasks.files import tree_checksums
from sdc_tasks.generate import bundled_path
from sdc_tasks.metrics.categorical_risk import combination_counts, compatible_totals

pytestmark = pytest.mark.usefixtures("prefect_harness")

SPEC = Path(__file__).resolve().parents[1] / "deploy" / "specs" / "household-mixed.yaml"
KEYS = ["urbrur", "roof", "walls", "water", "electcon", "relat", "sex"]


def release_to(tmp: Path, workers: int) -> tuple[Path, dict]:
    """The household-mixed release written under ``tmp`` by a cluster of ``workers`` workers."""
    from flows.release import release

    spec = yaml.safe_load(SPEC.read_text())
    spec["input"]["path"] = str(bundled_path("testdata.csv"))
    spec["output"] = {"dir": str(tmp / "release"), "overwrite": False}
    spec["dask"]["workers"] = workers
    path = tmp / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return tmp / "release", release(str(path))


@pytest.fixture(scope="module")
def releases(tmp_path_factory):
    """The mixed release on one and on two workers."""
    return [release_to(tmp_path_factory.mktemp(f"workers{w}"), w) for w in (1, 2)]


def test_mixed_release_masks_both_kinds_and_keeps_dtypes(releases):
    out, summary = releases[0]
    original = pd.read_csv(bundled_path("testdata.csv"))
    masked = pd.read_parquet(out / "masked").sort_values("record_id").reset_index(drop=True)
    assert len(masked) == len(original)
    assert str(masked["age"].dtype) == "int64"  # recoded, no missing value: the integer codes stay
    assert all(str(masked[k].dtype) == "Int64" for k in KEYS)  # suppressed values are nulls
    ages = sorted(original["age"].unique())
    assert masked["age"].max() == ages[-15] and set(masked["age"]) <= set(ages)
    assert masked[KEYS].isna().any(axis=None)
    table = combination_counts(masked, KEYS, {k: False for k in KEYS})  # a suppressed value matches any value
    assert compatible_totals(table, KEYS)["__count"].min() >= 3
    assert masked.groupby(["expend", "income", "savings"]).size().min() >= 3
    for passed in ("hhcivil", "sampling_weight", "household_weights"):
        pd.testing.assert_series_equal(masked[passed], original[passed], check_dtype=False)
    assert "ori_hid" not in masked.columns  # dropped: the household id is not published
    columns = json.loads((out / "manifest.json").read_text())["columns"]
    assert set(columns) == {"record_id", *original.columns}
    assert {c: columns[c] for c in ("hhcivil", "household_weights", "sampling_weight", "ori_hid", "age")} == {
        "hhcivil": "passed_through", "household_weights": "passed_through", "sampling_weight": "weight",
        "ori_hid": "dropped", "age": "masked"}
    assert [s.method for s in summary.steps] == ["top_coding", "pram", "local_suppression", "mdav"]
    report = (out / "report.md").read_text()
    assert all(m in report for m in ("top_coding", "pram", "local_suppression", "mdav"))
    metrics = json.loads((out / "metrics.json").read_text())
    assert {"IL", "DLD", "ID"} <= set(metrics)


def test_mixed_release_measures_the_categorical_side_and_gates_on_it(releases):
    out, summary = releases[0]
    metrics = json.loads((out / "metrics.json").read_text())
    for key in ("Dist", "CTBIL", "ACTBIL", "EBIL_MF", "PRIL_MF", "kanon_min_group", "kanon_violations_3",
                "sample_uniques", "indiv_risk_max", "expected_reidentifications", "PLD_cat"):
        assert isinstance(metrics[key], float), key
    assert metrics["categorical_keys"] == KEYS
    assert metrics["kanon_violations_3"] == 0.0 and metrics["kanon_min_group"] >= 3  # local suppression, k = 3
    assert metrics["Dist"] > 0 and metrics["CTBIL"] > 0  # top coding, PRAM and suppression changed categories
    assert {c.measure: c.passed for c in summary.checks} == {"DLD": True, "kanon_violations_3": True,
                                                             "expected_reidentifications_change_percent": True}
    report = (out / "report.md").read_text()
    assert "CTBIL" in report and "kanon_violations_3" in report


def test_mixed_release_puts_the_original_files_risk_beside_the_release(releases):
    out, summary = releases[0]
    metrics = json.loads((out / "metrics.json").read_text())
    original = pd.read_csv(bundled_path("testdata.csv"))
    sizes = original.groupby(KEYS).size()  # the original's key combinations, no value suppressed
    assert metrics["sample_uniques_before"] == float((sizes == 1).sum())
    assert metrics["kanon_violations_3_before"] == float(sizes[sizes < 3].sum()) > 0 == metrics["kanon_violations_3"]
    assert metrics["kanon_violations_3_change_percent"] == -100.0
    er = metrics["expected_reidentifications"], metrics["expected_reidentifications_before"]
    assert metrics["expected_reidentifications_change_percent"] == pytest.approx(100 * (er[0] - er[1]) / er[1])
    check = next(c for c in summary.checks if c.measure == "expected_reidentifications_change_percent")
    assert check.value == metrics["expected_reidentifications_change_percent"] <= -50.0
    report = (out / "report.md").read_text()
    section = report[report.index("## Categorical disclosure risk before and after"):report.index("## All metrics")]
    assert "| Figure | Original file | Released | Change | Unit | Better |" in section
    assert f"| kanon_violations_3 | {sizes[sizes < 3].sum()} | 0 | -100 % | records | lower |" in section


def test_mixed_release_bytes_do_not_depend_on_workers(releases):
    (one, _), (two, _) = releases
    sums = [{k: v for k, v in tree_checksums(out).items() if k.startswith("masked/")} for out in (one, two)]
    assert sums[0] and sums[0] == sums[1]
