"""The original file's risk beside the release's (docs/metrics.md "The original file's risk"): every figure of
cat_risk, suda and ldiversity computed on the original file as <key>_before, equal to the same families run on
the original as if it were the release (and, for the household risk, to sdcMicro's measure_risk), with
<key>_change_percent, in the catalogue and usable in the gate."""

from __future__ import annotations

import math

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

from sdc_tasks.evaluation.measures import evaluate
from sdc_tasks.generate import bundled_path
from sdc_tasks.metrics import catalogue as cat
from sdc_tasks.metrics.original_risk import change_percent, original_figures
from sdc_tasks.pipeline.gate import gate_checks

KEYS = ["urbrur", "roof", "walls", "water", "electcon", "relat", "sex"]
FAMILIES = ("cat_risk", "suda", "ldiversity")
OPTIONS = {"categorical": KEYS, "weight": "sampling_weight", "sensitive": ["hhcivil"], "household": "ori_hid"}


@pytest.fixture(scope="module")
def files() -> tuple[pd.DataFrame, pd.DataFrame]:
    """data/testdata.csv with a record id, and a masked copy: roof shuffled, 300 sex values suppressed."""
    original = pd.read_csv(bundled_path("testdata.csv")).assign(record_id=lambda d: np.arange(len(d)))
    masked = original.copy()
    masked["roof"] = masked["roof"].sample(frac=1.0, random_state=4).to_numpy()
    masked["sex"] = masked["sex"].astype("Int64").mask(np.random.default_rng(2).random(len(masked)) < 300 / 4580)
    return original, masked


@pytest.fixture(scope="module")
def metrics(files) -> dict:
    """The three risk families of the masked copy against the original, over 3 partitions."""
    import dask

    original, masked = files
    with dask.config.set(scheduler="synchronous"):
        return evaluate(dd.from_pandas(original, npartitions=3), dd.from_pandas(masked, npartitions=3), "record_id",
                        [], KEYS, FAMILIES, **OPTIONS)


def test_every_original_figure_is_the_release_path_applied_to_the_original(files, metrics, sync_dask):
    original = dd.from_pandas(files[0], npartitions=2)
    direct = evaluate(original, original, "record_id", [], KEYS, FAMILIES, **OPTIONS, original_risk=False)
    risk = {k: v for k, v in direct.items() if cat.has_original_figure(k)}
    assert len(risk) == 32  # 16 of cat_risk, 4 of ldiversity (one sensitive variable), 5 + 7 (one per key) of suda
    assert {k[:-len("_before")] for k in metrics if k.endswith("_before")} == set(risk)
    for key, value in risk.items():
        assert metrics[key + "_before"] == pytest.approx(value, rel=1e-12, abs=1e-15), key
        if metrics[key + "_before"] != 0:
            expected = 100 * (metrics[key] - value) / value
            assert metrics[key + "_change_percent"] == pytest.approx(expected, rel=1e-9, abs=1e-12), key
    # independent of the code: sdcMicro 5.8.1's measure_risk with hhId on testdata.csv (test_household_risk.py)
    assert metrics["household_expected_reidentifications_before"] == pytest.approx(51.8129274359607, abs=1e-11)
    assert metrics["household_risk_percent_before"] == pytest.approx(1.13128662523932, abs=1e-13)
    # the original's sample uniques counted by pandas
    sizes = files[0].groupby(KEYS).size()
    assert metrics["sample_uniques_before"] == float((sizes == 1).sum())
    assert metrics["kanon_violations_3_before"] == float(sizes[sizes < 3].sum())
    assert not any(k.endswith("_before") for k in direct)  # original_risk=False leaves them out


def test_a_figure_zero_on_both_files_has_no_change_and_one_new_in_the_release_is_flagged(metrics):
    assert metrics["records_risk_above_0.1_before"] == 0.0 == metrics["records_risk_above_0.1"]
    assert metrics["records_risk_above_0.1_change_percent"] == 0.0
    assert "records_risk_above_0.1_change_percent_not_finite" not in metrics


def test_change_percent_by_hand():
    assert change_percent(4.0, 1.0) == -75.0 and change_percent(2.0, 3.0) == 50.0
    assert change_percent(0.0, 0.0) == 0.0 and change_percent(0.0, 2.0) == math.inf
    out = original_figures({"sample_uniques": 3.0, "DLD": 1.0},
                           {"sample_uniques": 12.0, "PLD_cat_em_iterations": 7.0, "n": 10, "categorical_keys": ["a"]})
    assert out == {"sample_uniques_before": 12.0, "sample_uniques_change_percent": -75.0}


def test_figures_of_columns_the_original_lacks_are_not_computed_on_it(files, sync_dask):
    original, masked = files
    a = dd.from_pandas(original.drop(columns=["sampling_weight"]), npartitions=1)
    out = evaluate(a, dd.from_pandas(masked, npartitions=1), "record_id", [], KEYS, ("cat_risk",), categorical=KEYS,
                   weight="sampling_weight")
    assert "indiv_risk_max" in out and "indiv_risk_max_before" not in out and "sample_uniques_before" in out


def test_the_catalogue_describes_original_figures_by_the_key_they_derive_from():
    before = cat.measure_of("kanon_violations_3_before")
    assert (before.family, before.group, before.unit, before.direction) == ("cat_risk", cat.GROUP_DR, cat.RECORDS,
                                                                            cat.LOWER)
    assert cat.description_of("kanon_violations_3_before").startswith("kanon_violations_3 of the original file")
    change = cat.measure_of("ldiversity_distinct_min_hhcivil_change_percent")
    assert (change.family, change.unit, change.direction, change.range) == ("ldiversity", cat.PERCENT, cat.HIGHER,
                                                                            (-100.0, math.inf))
    assert cat.anchor_of("sample_uniques_before") == "key-before"
    assert cat.measure_of("postmask_E_before").family == cat.POSTMASK  # a key of its own, not a derived figure
    for key in ("DLD_before", "IL_change_percent", "n_before", "PLD_cat_match_prior_before"):
        with pytest.raises(KeyError):
            cat.measure_of(key)
    keys = ["sample_uniques_percent", "sample_uniques_change_percent", "sample_uniques", "sample_uniques_before"]
    assert sorted(keys, key=cat.key_order) == ["sample_uniques", "sample_uniques_before",
                                               "sample_uniques_change_percent", "sample_uniques_percent"]


def release_spec(tmp_path, gate: dict, metrics: list[str]):
    """A categorical release spec of testdata.csv with ``gate.max`` and ``metrics``."""
    from sdc_tasks.pipeline.spec import parse_spec

    keys = ["urbrur", "roof", "walls", "water", "sex"]
    return parse_spec({
        "input": {"path": str(bundled_path("testdata.csv"))}, "id_column": "record_id", "create_id": True,
        "variables": {"categorical": keys, "key": keys, "weight": "sampling_weight",
                      "pass_through": ["electcon", "relat", "age", "hhcivil", "household_weights", "expend",
                                       "income", "savings", "ori_hid"]},
        "steps": [{"method": "local_suppression", "params": {"k": 3}}], "metrics": metrics,
        "gate": {"max": gate}, "output": {"dir": str(tmp_path / "out")}})


def test_the_gate_limits_a_reduction_and_an_original_figure(tmp_path, metrics):
    spec = release_spec(tmp_path, {"sample_uniques_change_percent": -50.0, "dis_suda_max_change_percent": -99.0,
                                   "kanon_violations_3_before": 10.0}, ["cat_risk", "suda"])
    checks = {c.measure: c for c in gate_checks(spec, metrics)}
    change = metrics["sample_uniques_change_percent"]
    assert change > -50.0  # shuffling roof and suppressing sex made more uniques, not fewer
    assert not checks["sample_uniques_change_percent"].passed
    assert checks["sample_uniques_change_percent"].margin == pytest.approx(-50.0 - change)
    assert not checks["kanon_violations_3_before"].passed
    suda = checks["dis_suda_max_change_percent"]
    assert suda.value == metrics["dis_suda_max_change_percent"] and suda.passed == (suda.value <= -99.0)
    passing = release_spec(tmp_path, {"sample_uniques_change_percent": change}, ["cat_risk"])
    assert all(c.passed for c in gate_checks(passing, metrics))


@pytest.mark.parametrize("gate,message", [
    ({"sample_uniques_change_percent": -50.0}, "sample_uniques_change_percent: needs metric family 'cat_risk'"),
    ({"kanon_min_group_change_percent": 10.0}, "kanon_min_group_change_percent: unknown measure, or one a maximum"),
    ({"DLD_change_percent": 10.0}, "gate.max.DLD_change_percent: unknown measure"),
])
def test_the_gate_refuses_an_original_figure_it_cannot_limit(tmp_path, gate, message):
    with pytest.raises(Exception, match=message):
        release_spec(tmp_path, gate, ["cat_il"])
