"""Household risk (cat_risk with a household id): 1 - prod(1 - r_i) over the members, by hand and equal to
sdcMicro's measure_risk with hid on testdata.csv."""

from __future__ import annotations

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

from sdc_tasks.errors import InputError
from sdc_tasks.evaluation.measures import evaluate
from sdc_tasks.generate import bundled_path
from sdc_tasks.metrics.household_risk import MEMBERS, SURVIVAL, add_household_sums, household_measures, household_sums

KEYS = ["urbrur", "roof", "walls", "water", "electcon", "relat", "sex"]


def test_household_figures_by_hand():
    # household a: members with risks 0.1 and 0.2 -> 1 - 0.9 * 0.8 = 0.28; household b: one member, 0.5
    a = pd.DataFrame({SURVIVAL: [0.9 * 0.8], MEMBERS: [2.0]})
    b = pd.DataFrame({SURVIVAL: [0.5], MEMBERS: [1.0]})
    sums = add_household_sums(household_sums(a), household_sums(b))
    np.testing.assert_allclose(sums, household_sums(pd.concat([a, b])))
    measures = household_measures(sums)
    assert measures["household_expected_reidentifications"] == pytest.approx(2 * 0.28 + 0.5)
    assert measures["household_risk_percent"] == pytest.approx(100 * 1.06 / 3)
    assert measures["household_risk_max"] == 0.5 and measures["households_risk_above_0.1"] == 100.0


@pytest.mark.parametrize("partitions", [1, 7])
def test_equal_to_sdcmicro_measure_risk_with_households(sync_dask, partitions):
    """sdcMicro 5.8.1 (github sdcTools/sdcMicro cf32510, built from source here, 2026-11-27) on
    data/testdata.csv: sdc <- createSdcObj(dat, keyVars=c("urbrur", "roof", "walls", "water", "electcon", "relat",
    "sex"), w="sampling_weight", hhId="ori_hid"); sdc@risk$global with options(digits=15): hier_risk_ER
    51.8129274359607, hier_risk_pct 1.13128662523932; from its per-record hier_risk (sdc@risk$individual): the
    largest household risk 0.2270364467777726 and 27 of the 1000 households above 0.1. Households span
    partitions when the file is cut into 7."""
    data = pd.read_csv(bundled_path("testdata.csv")).assign(record_id=lambda d: range(len(d)))
    frame = dd.from_pandas(data, npartitions=partitions, sort=False)
    metrics = evaluate(frame, frame, "record_id", [], KEYS, ("cat_risk",), categorical=KEYS,
                       weight="sampling_weight", household="ori_hid")
    assert metrics["household_expected_reidentifications"] == pytest.approx(51.8129274359607, abs=1e-11)
    assert metrics["household_risk_percent"] == pytest.approx(1.13128662523932, abs=1e-13)
    assert metrics["household_risk_max"] == pytest.approx(0.2270364467777726, abs=1e-15)
    assert metrics["households_risk_above_0.1"] == pytest.approx(100 * 27 / 1000)


def test_a_household_needs_the_weight_column(sync_dask):
    data = pd.read_csv(bundled_path("testdata.csv")).assign(record_id=lambda d: range(len(d)))
    frame = dd.from_pandas(data, npartitions=2, sort=False)
    with pytest.raises(InputError, match="household 'ori_hid': the household risk needs the sampling weight"):
        evaluate(frame, frame, "record_id", [], KEYS, ("cat_risk",), categorical=KEYS, household="ori_hid")


def household_spec(tmp_path, **households) -> object:
    """A release spec of testdata.csv with households (ori_hid dropped from the release)."""
    from sdc_tasks.pipeline.spec import parse_spec

    keys = ["urbrur", "roof", "walls", "water", "sex"]
    return parse_spec({
        "input": {"path": str(bundled_path("testdata.csv"))}, "id_column": "record_id", "create_id": True,
        "variables": {"categorical": keys, "key": keys, "continuous": ["expend", "income", "savings"],
                      "weight": "sampling_weight", "drop": ["ori_hid"],
                      "pass_through": ["electcon", "relat", "age", "hhcivil", "household_weights"]},
        "households": households, "steps": [{"method": "local_suppression", "params": {"k": 3}},
                                            {"method": "mdav", "params": {"k": 3}}],
        "output": {"dir": str(tmp_path / "out")}})


def test_household_level_variables_must_be_constant_within_households(tmp_path, sync_dask):
    from sdc_tasks.pipeline.stages import validate_input

    spec = household_spec(tmp_path, id="ori_hid", variables=["urbrur", "roof", "walls", "water"])
    assert validate_input(spec, tmp_path / "checkpoint")["n_records"] == 4580  # testdata's are constant
    data = pd.read_csv(bundled_path("testdata.csv"))
    broken = int((data.groupby("ori_hid")["sex"].nunique() > 1).sum())
    spec = household_spec(tmp_path, id="ori_hid", variables=["sex"])
    with pytest.raises(InputError, match=f"household-level variable 'sex' differs between the members of {broken} "
                                         "households"):
        validate_input(spec, tmp_path / "checkpoint2")


@pytest.mark.parametrize("households,message", [
    ({"id": "expend"}, "households.id 'expend' must be neither the id column nor a masked variable"),
    ({"id": "nowhere"}, "households.id 'nowhere' has no role"),
    ({"id": "ori_hid", "variables": ["age"]}, "households.variables: 'age' is not listed in variables.categorical"),
])
def test_the_spec_names_a_bad_household_field(tmp_path, households, message):
    with pytest.raises(Exception, match=message):
        household_spec(tmp_path, **households)
