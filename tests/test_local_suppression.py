"""Local suppression on key combinations (sdcMicro kAnon's ``combs``, listed key sets) and to an individual-risk
threshold (mu-Argus; sdcMicro localSupp): sdcMicro's figures on testdata.csv, hand cases, the property each
reaches, and the errors naming the parameter."""

from __future__ import annotations

import itertools

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

import sdc_tasks
from sdc_tasks.errors import SpecError
from sdc_tasks.generate import bundled_path
from sdc_tasks.masking.apply import StepContext
from sdc_tasks.masking.methods import apply_step
from sdc_tasks.masking.registry import validate_params
from sdc_tasks.metrics.categorical_risk import (
    combination_counts,
    combination_risks,
    combination_rows,
    compatible_frequencies,
    risk_measures,
)
from sdc_tasks.pipeline.spec import parse_spec

KEYS8 = ["urbrur", "roof", "walls", "water", "electcon", "relat", "sex", "hhcivil"]
KEYS5 = ["urbrur", "roof", "walls", "water", "sex"]
WEIGHT = "sampling_weight"


@pytest.fixture(scope="module")
def survey() -> pd.DataFrame:
    """testdata.csv with a record id, in file order (sdcMicro's order: its procedure depends on it)."""
    return pd.read_csv(bundled_path("testdata.csv")).assign(record_id=lambda d: range(len(d)))


def suppressed(df: pd.DataFrame, params: dict, keys: list[str], nparts: int = 3, strata: str | None = None):
    """The frame after one local_suppression step on ``nparts`` partitions, in input row order."""
    ddf = dd.from_pandas(df, npartitions=nparts, sort=False)
    ctx = StepContext(seed=0, step=0, id_column="record_id", strata=strata)
    result = apply_step(ddf, "local_suppression", keys, validate_params("local_suppression", params), ctx)
    return result.frame.compute().reset_index(drop=True)


def records_risk(df: pd.DataFrame, keys: list[str], weight: str | None) -> np.ndarray:
    """Each record's individual risk (a missing value matching any value), weights 1 without ``weight``."""
    frame = df.assign(__w=df[weight] if weight else 1.0)
    table = combination_counts(frame, keys, {k: False for k in keys}, "__w")
    return combination_risks(table, keys, "__w")[combination_rows(frame, table, keys, {k: False for k in keys})]


def test_each_record_finds_its_combination_and_compatible_frequency():
    frame = pd.DataFrame({"a": [1, 1, 2, np.nan, 2], "b": ["x", "x", "y", "y", "x"]})
    text = {"a": False, "b": True}
    table = combination_counts(frame, ["a", "b"], text)
    rows = combination_rows(frame, table, ["a", "b"], text)
    assert rows[0] == rows[1] and len(set(rows)) == 4
    assert table["__count"].to_numpy()[rows].tolist() == [2, 2, 1, 1, 1]
    # compatible: (nan, y) matches (2, y); (1, x) the other (1, x)
    assert compatible_frequencies(frame, text).tolist() == [2, 2, 2, 2, 1]
    with pytest.raises(ValueError, match="2 records have a key combination the combination table lacks"):
        combination_rows(frame, table.iloc[1:], ["a", "b"], text)


# ---- key combinations ----

SDCMICRO_COMBS = {  # sdcMicro 5.8.1 (github sdcTools/sdcMicro cf32510, built from source here) on data/testdata.csv:
    # sdc <- createSdcObj(dat, keyVars=c("urbrur","roof","walls","water","electcon","relat","sex","hhcivil"),
    #                     w="sampling_weight"); sdc <- kAnon(sdc, k=c(5, 3), combs=c(2, 3))
    # unlist(sdc@localSuppression$supps), checked against the NAs it put in manipKeyVars; 111 in total
    "urbrur": 0, "roof": 16, "walls": 0, "water": 38, "electcon": 4, "relat": 45, "sex": 0, "hhcivil": 8}


def test_key_combinations_suppress_what_sdcmicro_kanon_with_combs_does(survey, sync_dask):
    out = suppressed(survey, {"k": [5, 3], "combs": [2, 3]}, KEYS8, nparts=3)
    assert out[KEYS8].isna().sum().to_dict() == SDCMICRO_COMBS
    for size, k in ((2, 5), (3, 3)):  # every subset of the size is k-anonymous, missing matching any value
        for subset in itertools.combinations(KEYS8, size):
            assert compatible_frequencies(out[list(subset)]).min() >= k, subset
    kept = out[KEYS8].notna().to_numpy()
    np.testing.assert_array_equal(out[KEYS8].to_numpy(float)[kept], survey[KEYS8].to_numpy(float)[kept])


SDCMICRO_WITH_MISSING = [  # sdcMicro 5.8.1 as above on data/testdata.csv with missing values put in first:
    # dat$roof[seq(7, nrow(dat), by=50)] <- NA; dat$relat[seq(3, nrow(dat), by=70)] <- NA
    # kAnon(createSdcObj(dat, keyVars=c("roof","walls","water","electcon","relat","sex"), w="sampling_weight"), k=3)
    ({"k": 3}, {"roof": 3, "walls": 0, "water": 22, "electcon": 0, "relat": 112, "sex": 0}),
    # kAnon(createSdcObj(dat, keyVars=<the 8 keys>, w="sampling_weight"), k=c(5, 3), combs=c(2, 3))
    ({"k": [5, 3], "combs": [2, 3]},
     {"urbrur": 0, "roof": 4, "walls": 0, "water": 32, "electcon": 4, "relat": 29, "sex": 0, "hhcivil": 8}),
]


@pytest.mark.parametrize("params, expected", SDCMICRO_WITH_MISSING)
def test_missing_input_values_match_any_value_as_in_sdcmicro(survey, sync_dask, params, expected):
    """Values missing in the input are not counted as suppressions and match any value; the suppressions are
    sdcMicro's key by key."""
    data = survey.copy()
    data.loc[np.arange(6, len(data), 50), "roof"] = np.nan
    data.loc[np.arange(2, len(data), 70), "relat"] = np.nan
    keys = list(expected)
    out = suppressed(data, params, keys, nparts=4)
    assert (out[keys].isna().sum() - data[keys].isna().sum()).to_dict() == expected


def test_listed_key_sets_suppress_only_their_keys():
    # on (a, b) the record (3, 1) is alone; its nearest records differ on a only, and a (3 categories) is less
    # important than b (1 category): it loses a. c is a key of the step in no set: every record keeps it though
    # every record is unique on (a, b, c).
    df = pd.DataFrame({"record_id": range(5), "a": [1, 1, 2, 2, 3], "b": [1, 1, 1, 1, 1], "c": [1, 2, 3, 4, 5]})
    out = suppressed(df, {"k": 2, "key_sets": [["a", "b"]]}, ["a", "b", "c"], nparts=2)
    assert out["a"].isna().tolist() == [False, False, False, False, True]
    assert out[["b", "c"]].notna().all().all()


def test_key_sets_listing_every_pair_equal_combs_of_two(survey, sync_dask):
    keys = ["roof", "walls", "water", "relat"]
    pairs = [list(p) for p in itertools.combinations(keys, 2)]
    by_sets = suppressed(survey, {"k": 4, "key_sets": pairs}, keys, nparts=2)
    pd.testing.assert_frame_equal(by_sets, suppressed(survey, {"k": 4, "combs": [2]}, keys, nparts=4))
    assert by_sets[keys].isna().sum().sum() > 0


def test_key_sets_respect_never_and_do_not_depend_on_partitions_or_strata(survey, sync_dask):
    params = {"k": [3, 2], "key_sets": [["roof", "water", "relat"], ["walls", "electcon", "relat"]],
              "never": ["walls"]}
    keys = ["roof", "walls", "water", "electcon", "relat"]
    one = suppressed(survey, params, keys, nparts=1, strata="urbrur")
    pd.testing.assert_frame_equal(suppressed(survey, params, keys, nparts=5, strata="urbrur"), one)
    assert one["walls"].notna().all() and one[keys].isna().sum().sum() > 0
    for _, rows in one.groupby("urbrur"):
        assert compatible_frequencies(rows[["roof", "water", "relat"]]).min() >= 3
        assert compatible_frequencies(rows[["walls", "electcon", "relat"]]).min() >= 2


# ---- individual-risk threshold ----

SDCMICRO_LOCALSUPP = {  # sdcMicro 5.8.1 as above on data/testdata.csv:
    # sdc <- createSdcObj(dat, keyVars=c("urbrur","roof","walls","water","sex"), w="sampling_weight")
    # sdc <- localSupp(sdc, keyVar="water", threshold=0.02)
    # which(is.na(get.sdcMicroObj(sdc, "manipKeyVars")$water)) (1-based rows), and on the risk it recomputes,
    # max(get.sdcMicroObj(sdc, "risk")$individual[, 1]) and get.sdcMicroObj(sdc, "risk")$global$risk_ER
    "rows": [211, 1547, 2485, 2501, 2508, 2667, 2879, 2880, 3461, 3462, 3481, 4094],
    "risk_max": 0.0096311427215602409, "expected_reidentifications": 0.925898208441572}


def test_threshold_suppresses_what_sdcmicro_localsupp_does(survey, sync_dask):
    """With water the least important key, one pass brings every record to the threshold: the records sdcMicro's
    localSupp(keyVar = "water") suppresses, and the same risk afterwards."""
    params = {"threshold": 0.02, "weight": WEIGHT, "importance": ["urbrur", "roof", "walls", "sex", "water"]}
    out = suppressed(survey, params, KEYS5, nparts=3)
    assert (np.flatnonzero(out["water"].isna()) + 1).tolist() == SDCMICRO_LOCALSUPP["rows"]
    assert out[["urbrur", "roof", "walls", "sex"]].notna().all().all()
    table = combination_counts(out, KEYS5, {k: False for k in KEYS5}, WEIGHT)
    risk = risk_measures(table, KEYS5, WEIGHT)
    assert risk["indiv_risk_max"] == pytest.approx(SDCMICRO_LOCALSUPP["risk_max"], rel=1e-14)
    assert risk["expected_reidentifications"] == pytest.approx(SDCMICRO_LOCALSUPP["expected_reidentifications"],
                                                               rel=1e-12)


def test_threshold_takes_the_keys_in_importance_order_until_every_risk_is_below(survey, sync_dask):
    keys = KEYS8[:7]
    order = ["sex", "urbrur", "walls", "electcon", "roof", "water", "relat"]  # relat the least important
    params = {"threshold": 0.02, "weight": WEIGHT, "importance": order, "never": ["walls"]}
    before = survey.copy()
    out = suppressed(survey, params, keys, nparts=4)
    pd.testing.assert_frame_equal(survey, before)
    assert records_risk(out, keys, WEIGHT).max() <= 0.02
    assert (records_risk(survey, keys, WEIGHT) > 0.02).sum() > 0 and out["walls"].notna().all()
    lost = out[order].isna().to_numpy()
    assert lost.any() and lost.sum(axis=1).max() > 1  # some records needed more than one pass
    spared = [c for c in reversed(order) if c != "walls"]  # a record that lost a key lost every less important one
    losing = out[spared].isna().to_numpy()
    assert (np.diff(losing.astype(int), axis=1) <= 0).all()
    assert (records_risk(survey, keys, WEIGHT)[losing.any(axis=1)] > 0.02).all()  # only risky records lose values
    pd.testing.assert_frame_equal(suppressed(survey, params, keys, nparts=1), out)


def test_threshold_without_weights_is_k_anonymity_of_its_inverse(survey, sync_dask):
    """Each record weighing 1, a record's risk is 1 / f_k for f_k >= 3 and 1/2 for f_k = 2 (sdcMicro indivRisk
    with F_k = f_k): a threshold of 0.34 leaves every record with at least 3 compatible records."""
    keys = ["roof", "walls", "water", "electcon", "relat", "sex"]
    out = suppressed(survey, {"threshold": 0.34}, keys, nparts=3, strata="urbrur")
    for _, rows in out.groupby("urbrur"):
        assert compatible_frequencies(rows[keys]).min() >= 3
    assert 0 < out[keys].isna().sum().sum() < 0.1 * out[keys].size


def test_threshold_through_the_python_api(survey):
    out = sdc_tasks.mask(survey, "local_suppression", vars=KEYS5, threshold=0.02, weight=WEIGHT,
                         importance=["urbrur", "roof", "walls", "sex", "water"])
    assert out[KEYS5].isna().sum().to_dict() == {"urbrur": 0, "roof": 0, "walls": 0, "water": 12, "sex": 0}


def test_a_release_threshold_step_uses_the_release_weight():
    spec = {"input": {"path": "testdata.csv"}, "create_id": True, "output": {"dir": "out"},
            "variables": {"key": KEYS5, "categorical": KEYS5, "weight": WEIGHT, "pass_through": ["relat"]},
            "steps": [{"method": "local_suppression", "params": {"threshold": 0.02}},
                      {"method": "local_suppression", "params": {"threshold": 0.05, "weight": "household_weights"}}]}
    parsed = parse_spec(spec)
    assert [s.params["weight"] for s in parsed.steps] == [WEIGHT, "household_weights"]
    unweighted = parse_spec({**spec, "variables": {**spec["variables"], "weight": None}})
    assert unweighted.steps[0].params["weight"] is None
    combs = {**spec, "steps": [{"method": "local_suppression", "params": {"k": [5, 3], "combs": [2, 3]}}]}
    with pytest.raises(SpecError, match=r"steps.0.params.k = \[5, 3\] is below gate.min_group_size = 4"):
        parse_spec({**combs, "gate": {"min_group_size": 4}})


# ---- errors name the parameter, never a value ----


@pytest.mark.parametrize("params, message", [
    ({"k": 3, "combs": [9]}, r"parameter 'combs' of local_suppression asks for subsets of 9 keys but the step has 8"),
    ({"k": 3, "key_sets": [["roof", "age"]]}, r"parameter 'key_sets' of local_suppression names 'age', which is not"),
    ({"threshold": 0.1, "weight": "region"}, r"parameter 'weight' of local_suppression names 'region', which is not"),
    ({"threshold": 0.1, "weight": "relat"}, r"parameter 'weight' of local_suppression names 'relat', which is not"),
    ({"threshold": 1e-6, "never": KEYS8[1:]},
     (r"parameter 'threshold' of local_suppression = 1e-06: \d+ records of a scope stay above it with every key "
      r"suppressed but those of 'never'")),
])
def test_bad_key_sets_and_thresholds_name_the_parameter(survey, sync_dask, params, message):
    with pytest.raises(ValueError, match=message):
        suppressed(survey, params, KEYS8, nparts=2)


@pytest.mark.parametrize("params, name", [
    ({"threshold": 0}, "threshold"), ({"threshold": 1}, "threshold"), ({"threshold": 1.5}, "threshold"),
    ({"threshold": -0.1}, "threshold"), ({"k": 3, "threshold": 0.1}, "threshold"), ({"k": 3, "weight": "w"}, "weight"),
    ({"k": [3, 1], "combs": [2, 3]}, "k"), ({"k": 3, "combs": [0]}, "combs"), ({"k": 3, "key_sets": [[]]}, "key_sets"),
    ({"k": 3, "combs": [2], "key_sets": [["a"]]}, "key_sets"), ({"threshold": 0.1, "combs": [2]}, "combs"),
    ({"k": 3, "missing": "category", "combs": [2]}, "combs"), ({"k": [3, 2, 5], "combs": [2, 3]}, "combs"),
    ({"k": [3, 2], "key_sets": [["a"]]}, "key_sets"),
])
def test_parameters_out_of_place_name_the_parameter(params, name):
    with pytest.raises(ValueError, match=rf"^parameter '{name}' of local_suppression"):
        validate_params("local_suppression", params)


def test_neither_k_nor_threshold_and_a_list_of_k_alone_are_refused():
    with pytest.raises(ValueError, match="give k .* or threshold"):
        validate_params("local_suppression", {})
    with pytest.raises(ValueError, match="a list of k goes with combs or key_sets"):
        validate_params("local_suppression", {"k": [3, 5]})
