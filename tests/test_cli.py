"""The ``sdc`` command: mask, evaluate and generate (the release commands are covered by the flow tests)."""

from __future__ import annotations

import gc
import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from sdc_tasks.cli import app
from sdc_tasks.generate import bundled_path

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, [str(a) for a in args])


def test_help_lists_every_command():
    result = invoke("--help")
    assert result.exit_code == 0
    for name in ("demo", "release", "evaluate", "mask", "generate", "compare"):
        assert name in result.output
    for name in ("demo", "release", "evaluate", "mask", "generate", "compare"):
        assert invoke(name, "--help").exit_code == 0


def test_mask_then_evaluate_census(tmp_path):
    """Also: commands run through ``app`` in a Python process leave its garbage collector as it was (only ``sdc``'s
    own process, ``cli.main``, holds and freezes it)."""
    collector = gc.isenabled(), gc.get_freeze_count()
    census = bundled_path("census.csv")
    out = tmp_path / "masked.csv"
    result = invoke("mask", "--input", census, "--method", "mdav", "--param", "k=3", "--param", "group_size=3",
                    "--out", out)
    assert result.exit_code == 0, result.output
    masked = pd.read_csv(out)
    original = pd.read_csv(census)
    assert len(masked) == len(original) and "record_id" in masked.columns
    metrics_path = tmp_path / "metrics.json"
    result = invoke("evaluate", "--original", census, "--masked", out, "--out", metrics_path,
                    "--key-vars", "FEDTAX,AFNLWGT,AGI,EMCONTRB,PTOTVAL,TAXINC,STATETAX",
                    "--vars", ",".join(original.columns))
    assert result.exit_code == 0, result.output
    metrics = json.loads(metrics_path.read_text())
    assert metrics["n"] == 1080 and metrics["IL2"] < 1e-9
    assert 0 < metrics["DLD"] < 100 and 0 < metrics["ID"] < 100
    assert (gc.isenabled(), gc.get_freeze_count()) == collector


def test_evaluate_of_a_file_against_itself(tmp_path, dask_scheduler):
    census = bundled_path("census.csv")
    result = invoke("evaluate", "--original", census, "--masked", census, "--dask-address", dask_scheduler)
    assert result.exit_code == 0, result.output
    metrics = json.loads(result.stdout)  # logs may go to stderr
    assert metrics["IL"] == 0.0 and metrics["ID"] == 100.0 and metrics["DLD_7"] == 100.0


def test_mask_rankswap_parquet_output(tmp_path):
    out = tmp_path / "swapped"
    result = invoke("mask", "--input", bundled_path("tarragona.csv"), "--method", "rankswap", "--param", "p=15",
                    "--seed", "3", "--out", out)
    assert result.exit_code == 0, result.output
    swapped = pd.read_parquet(out)
    original = pd.read_csv(bundled_path("tarragona.csv"))
    for c in original.columns:
        assert sorted(swapped[c]) == sorted(original[c].astype(float))


@pytest.mark.parametrize(
    "args, message",
    [
        (["--method", "nope"], "unknown method 'nope'"),
        (["--method", "mdav", "--param", "k=1"], "parameter 'k' of mdav"),
        (["--method", "rankswap", "--param", "p=101"], "parameter 'p' of rankswap"),
        (["--method", "mdav"], "parameter 'k' of mdav"),
    ],
)
def test_mask_bad_parameters_name_the_parameter(tmp_path, args, message):
    out = tmp_path / "never"
    result = invoke("mask", "--input", bundled_path("census.csv"), "--out", out, *args)
    assert result.exit_code == 2
    assert message in result.output
    assert not out.exists()


def test_mask_missing_input_is_a_clear_error(tmp_path):
    result = invoke("mask", "--input", tmp_path / "nope.csv", "--method", "mdav", "--param", "k=3",
                    "--out", tmp_path / "o")
    assert result.exit_code == 2 and "input not found" in result.output


def test_generate_writes_partitioned_dataset(tmp_path):
    out = tmp_path / "gen"
    result = invoke("generate", "--rows", "2500", "--out", out, "--seed", "4", "--strata", "3",
                    "--rows-per-file", "1000")
    assert result.exit_code == 0, result.output
    df = pd.read_parquet(out)
    assert len(df) == 2500 and df["record_id"].is_unique and df["stratum"].nunique() == 3
    assert len(list(out.glob("*.parquet"))) == 3


def test_rescale_after_noise_restores_the_originals_moments_given_by_original(tmp_path):
    census = bundled_path("census.csv")
    noisy, rescaled = tmp_path / "noisy.csv", tmp_path / "rescaled.csv"
    assert invoke("mask", "--input", census, "--method", "noise", "--param", "p=0.5", "--out", noisy).exit_code == 0
    refused = invoke("mask", "--input", noisy, "--method", "rescale", "--out", rescaled)
    assert refused.exit_code == 2 and "--original" in refused.output and not rescaled.exists()
    result = invoke("mask", "--input", noisy, "--method", "rescale", "--original", census, "--out", rescaled)
    assert result.exit_code == 0, result.output
    original, out = pd.read_csv(census), pd.read_csv(rescaled)
    cols = list(original.columns)
    pd.testing.assert_series_equal(out[cols].mean(), original[cols].mean(), rtol=1e-9)
    pd.testing.assert_series_equal(out[cols].std(ddof=0), original[cols].std(ddof=0), rtol=1e-9)


def test_mask_takes_a_parameter_named_like_an_option_as_a_method_parameter(tmp_path):
    out = tmp_path / "never"
    result = invoke("mask", "--input", bundled_path("census.csv"), "--method", "mdav", "--param", "k=3",
                    "--param", "seed=4", "--out", out)
    assert result.exit_code == 2 and "parameter 'seed' of mdav" in result.output and not out.exists()


def test_mask_and_evaluate_report_what_they_did(tmp_path, no_cluster):
    source = tmp_path / "in.csv"
    pd.read_csv(bundled_path("census.csv")).head(120).assign(region="north").to_csv(source, index=False)
    result = invoke("mask", "--input", source, "--method", "mic_z", "--param", "k=4", "--param", "block_size=40",
                    "--vars", "AGI,FICA,FEDTAX", "--out", tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert "wrote" in result.output and "(mic_z, 3 blocks)" in result.output
    others = ", ".join(c for c in pd.read_csv(source).columns if c not in ("AGI", "FICA", "FEDTAX"))
    assert f"columns: masked AGI, FEDTAX, FICA; passed_through {others}; id record_id" in result.output  # file order
    metrics = json.loads(invoke("evaluate", "--original", source, "--masked", tmp_path / "out", "--vars",
                                "AGI,FICA,FEDTAX", "--families", "il").stdout)
    assert metrics["p"] == 3 and metrics["key_vars"] == ["AGI", "FICA", "FEDTAX"] and "DLD" not in metrics
