"""SPSS, Stata and SAS files (pyreadstat): read in row-range partitions equal to a whole read, value labels read as
codes or labels and carried into a release's manifest and a written file, masked files written back."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyreadstat
import pytest
import yaml
from distributed import Client
from typer.testing import CliRunner

import sdc_tasks
from sdc_tasks.cli import app
from sdc_tasks.errors import InputError
from sdc_tasks.files import detect_format, input_columns
from sdc_tasks.generate import bundled_path
from sdc_tasks.io import read_table
from sdc_tasks.statistical_files import read_statistical, value_labels

SEX = {1: "male", 2: "female"}
URBRUR = {1: "rural", 2: "urban"}
WRITE = {"sav": pyreadstat.write_sav, "dta": pyreadstat.write_dta, "xpt": pyreadstat.write_xport}


@pytest.fixture(scope="module")
def testdata() -> pd.DataFrame:
    return pd.read_csv(bundled_path("testdata.csv")).astype(float)


@pytest.fixture(scope="module")
def files(testdata, tmp_path_factory) -> dict:
    """testdata.csv as an SPSS, a Stata and a SAS transport file (sex and urbrur labelled where the format
    holds labels)."""
    folder = tmp_path_factory.mktemp("stat")
    out = {}
    for fmt, write in WRITE.items():
        path = folder / f"testdata.{fmt}"
        labels = {} if fmt == "xpt" else {"variable_value_labels": {"sex": SEX, "urbrur": URBRUR}}
        write(testdata, str(path), **labels)
        out[fmt] = path
    return out


@pytest.mark.parametrize("fmt", list(WRITE))
def test_a_file_reads_in_row_range_partitions_equal_to_the_whole_file(files, testdata, fmt):
    assert detect_format(files[fmt]) == fmt
    assert input_columns(files[fmt]) == list(testdata.columns)
    parts = read_statistical(files[fmt], fmt, chunk_rows=1000)
    assert parts.npartitions == (1 if fmt == "xpt" else 5)  # a transport file does not give its record count
    pd.testing.assert_frame_equal(parts.compute().reset_index(drop=True), testdata, check_dtype=False)
    pd.testing.assert_frame_equal(read_table(files[fmt]).compute().reset_index(drop=True), testdata,
                                  check_dtype=False)


@pytest.mark.parametrize("fmt", ["sav", "dta"])
def test_value_labels_are_read_as_codes_or_as_labels(files, testdata, fmt):
    assert value_labels(files[fmt], fmt) == {"sex": {"1": "male", "2": "female"}, "urbrur": {"1": "rural",
                                                                                                "2": "urban"}}
    labelled = read_statistical(files[fmt], fmt, labels=True, chunk_rows=1000).compute().reset_index(drop=True)
    assert labelled["sex"].tolist() == testdata["sex"].map(SEX).tolist()
    assert labelled["urbrur"].tolist() == testdata["urbrur"].map(URBRUR).tolist()
    pd.testing.assert_series_equal(labelled["age"], testdata["age"], check_dtype=False)


def test_a_file_readstat_cannot_read_is_named(tmp_path):
    bad = tmp_path / "broken.sav"
    bad.write_bytes(b"not an spss file at all")
    with pytest.raises(InputError, match=r"cannot read .*broken.sav as sav: .* \(ReadStat\)"):
        input_columns(bad)
    (tmp_path / "dir.sav").mkdir()
    with pytest.raises(InputError, match="is a directory: a sav input is one file"):
        input_columns(tmp_path / "dir.sav", "sav")


def test_sdc_mask_writes_the_input_s_format_back_with_the_labels_still_true(files, tmp_path):
    out = tmp_path / "masked.sav"
    result = CliRunner().invoke(app, ["mask", "--input", str(files["sav"]), "--method", "recode", "--param",
                                      'rules={"water": {"prefix": 1}, "urbrur": {"map": {"1": 1, "2": 1}}}',
                                      "--out", str(out), "--id-col", "record_id"])
    assert result.exit_code == 0, result.output
    masked, meta = pyreadstat.read_sav(str(out))
    assert (masked["urbrur"] == 1).all()
    # sex passed through with its codes: labelled as before; urbrur holds only code 1 still: still labelled
    assert meta.variable_value_labels["sex"] == {1.0: "male", 2.0: "female"}
    assert meta.variable_value_labels["urbrur"] == {1.0: "rural", 2.0: "urban"}


def test_a_release_of_an_spss_file_keys_by_label_or_keeps_the_labels_in_its_manifest(files, tmp_path,
                                                                                     dask_scheduler):
    base = {"input": {"path": str(files["sav"])}, "id_column": "record_id", "create_id": True,
            "variables": {"categorical": ["sex", "urbrur", "walls"], "key": ["sex", "urbrur", "walls"],
                          "continuous": ["expend", "income", "savings"],
                          "pass_through": ["roof", "water", "electcon", "relat", "age", "hhcivil", "sampling_weight",
                                           "household_weights"], "drop": ["ori_hid"]},
            "steps": [{"method": "recode", "params": {"rules": {"sex": {"map": {"male": "person",
                                                                                 "female": "person"}}}}},
                      {"method": "local_suppression", "params": {"k": 3}},
                      {"method": "mdav", "params": {"k": 3}}],
            "metrics": ["il", "cat_il", "cat_risk"], "output": {"dir": str(tmp_path / "labels")}}
    by_label = {**base, "input": {**base["input"], "value_labels": "labels"}}
    (tmp_path / "labels.yaml").write_text(yaml.safe_dump(by_label))
    with Client(dask_scheduler, set_as_default=False) as client:
        summary = sdc_tasks.release(tmp_path / "labels.yaml", client=client)
    masked = pd.read_parquet(summary.paths.masked)
    assert set(masked["sex"]) == {"person"} and set(masked["urbrur"].dropna()) <= {"rural", "urban"}
    manifest = json.loads(summary.paths.manifest.read_text())
    assert "value_labels" not in manifest  # the labels are in the values

    codes = {**base, "steps": base["steps"][1:], "output": {"dir": str(tmp_path / "codes")}}
    (tmp_path / "codes.yaml").write_text(yaml.safe_dump(codes))
    with Client(dask_scheduler, set_as_default=False) as client:
        summary = sdc_tasks.release(tmp_path / "codes.yaml", client=client)
    manifest = json.loads(summary.paths.manifest.read_text())
    assert manifest["value_labels"] == {"sex": {"1": "male", "2": "female"}, "urbrur": {"1": "rural", "2": "urban"}}
    masked = pd.read_parquet(summary.paths.masked)
    assert np.isin(masked["sex"].dropna(), [1.0, 2.0]).all()
    # the report names each labelled variable's categories by code and label, and says which variables are labelled
    report = summary.paths.report_md.read_text()
    original = pd.read_csv(bundled_path("testdata.csv"))
    for variable, labels in (("sex", SEX), ("urbrur", URBRUR)):
        for code, label in labels.items():
            counts = ((original[variable] == code).sum(), (masked[variable] == code).sum())
            assert f"| {variable} | {code} ({label}) | {counts[0]} | {counts[1]} |" in report
    assert "| walls | 9 | 50 |" in report  # no labels: the code alone
    assert "| sex | missing" not in report and not masked["sex"].isna().any()  # 3-anonymous already: none suppressed
    assert "shown beside the codes of the labelled variables: sex, urbrur." in report
    assert "| Value labels | sex, urbrur |" in report
    assert "2 (female)" in summary.paths.report_html.read_text()
