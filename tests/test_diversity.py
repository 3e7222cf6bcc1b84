"""l-diversity and t-closeness of sensitive variables (family ``ldiversity``) and the global risk: hand-computed
groups, testdata.csv against pandas' own group counts, the family through evaluate, the spec's rules."""

from __future__ import annotations

import math
from pathlib import Path

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

from sdc_tasks.errors import InputError
from sdc_tasks.evaluation.measures import evaluate
from sdc_tasks.generate import bundled_path
from sdc_tasks.metrics.categorical_risk import COUNT, combination_counts
from sdc_tasks.metrics.diversity import diversity_measures, emd_distance, group_diversity
from sdc_tasks.pipeline.spec import parse_spec

KEYS = ["urbrur", "roof", "walls", "electcon", "relat", "sex"]


@pytest.fixture(scope="module")
def testdata() -> pd.DataFrame:
    return pd.read_csv(bundled_path("testdata.csv")).assign(record_id=lambda d: range(len(d)))


def hand_table() -> pd.DataFrame:
    """Groups A = 1: x, x, y; A = 2: z; A = 3: x and a missing value; A = 4: two missing values."""
    frame = pd.DataFrame({"A": [1, 1, 1, 2, 3, 3, 4, 4], "S": ["x", "x", "y", "z", "x", None, None, None]})
    return combination_counts(frame, ["A", "S"], {"A": False, "S": True})


def test_distinct_and_entropy_l_by_hand():
    groups = group_diversity(hand_table(), ["A"], "S")
    by_size = {(size, distinct): entropy for size, distinct, entropy in groups[[COUNT, "distinct", "entropy"]]
               .itertuples(index=False)}
    entropy_1 = math.exp(-(2 / 3 * math.log(2 / 3) + 1 / 3 * math.log(1 / 3)))
    assert by_size[(3.0, 2.0)] == pytest.approx(entropy_1)  # x, x, y
    assert by_size[(1.0, 1.0)] == 1.0  # z alone
    assert by_size[(2.0, 2.0)] == pytest.approx(2.0)  # x and a missing value: missing counts as a category
    assert by_size[(2.0, 0.0)] == 1.0  # only missing values: no category (as sdcMicro counts it)
    measures = diversity_measures(hand_table(), ["A"], "S")
    assert measures["ldiversity_distinct_min_S"] == 0.0 and measures["ldiversity_entropy_min_S"] == 1.0
    assert measures["ldiversity_records_below_2_S"] == 3.0  # z alone and the two missing values


def test_t_closeness_by_hand():
    # the file without missing values: x 3, y 1, z 1 -> (0.6, 0.2, 0.2); group A = 2 is (0, 0, 1)
    assert diversity_measures(hand_table(), ["A"], "S")["tcloseness_S"] == pytest.approx(0.8)
    assert diversity_measures(hand_table(), ["A"], "S", order=["x", "y", "z"])["tcloseness_S"] == pytest.approx(0.7)
    assert emd_distance(np.array([1.0, 0.0]), np.array([0.0, 1.0]), ordered=True) == 1.0
    assert emd_distance(np.array([0.5, 0.5]), np.array([0.5, 0.5]), ordered=False) == 0.0


def test_testdata_equals_pandas_group_counts(testdata):
    table = combination_counts(testdata, [*KEYS, "water"], {k: False for k in [*KEYS, "water"]})
    measures = diversity_measures(table, KEYS, "water")
    distinct = testdata.groupby(KEYS)["water"].transform("nunique")
    assert measures["ldiversity_distinct_min_water"] == distinct.min()
    assert measures["ldiversity_records_below_2_water"] == (distinct < 2).sum()
    entropy = testdata.groupby(KEYS)["water"].apply(
        lambda s: math.exp(-sum(p * math.log(p) for p in s.value_counts(normalize=True))))
    assert measures["ldiversity_entropy_min_water"] == pytest.approx(entropy.min(), rel=1e-12)


def test_the_family_through_evaluate(testdata, sync_dask):
    frame = dd.from_pandas(testdata, npartitions=3, sort=False)
    metrics = evaluate(frame, frame, "record_id", [], KEYS, ("ldiversity", "cat_risk"), categorical=KEYS,
                       weight="sampling_weight", sensitive=["water", "hhcivil"])
    for s in ("water", "hhcivil"):
        table = combination_counts(testdata, [*KEYS, s], {k: False for k in [*KEYS, s]})
        direct = diversity_measures(table, KEYS, s)
        assert {k: metrics[k] for k in direct} == pytest.approx(direct, rel=1e-12)
    assert metrics["global_risk_percent"] == pytest.approx(100 * metrics["expected_reidentifications"] / len(testdata))
    with pytest.raises(InputError, match="sensitive variable 'sex' is also a key variable"):
        evaluate(frame, frame, "record_id", [], KEYS, ("ldiversity",), categorical=KEYS, sensitive=["sex"])
    with pytest.raises(InputError, match="metric family 'ldiversity' needs sensitive variables"):
        evaluate(frame, frame, "record_id", [], KEYS, ("ldiversity",), categorical=KEYS)


@pytest.mark.parametrize("sensitive,message", [
    (["sex"], "sensitive variable 'sex' is also a key"),
    (["nowhere"], "sensitive variable 'nowhere' must also have a role"),
])
def test_the_spec_refuses_a_sensitive_key_or_a_roleless_sensitive_variable(sensitive, message):
    with pytest.raises(Exception, match=message):
        parse_spec({"input": {"path": "testdata.csv"}, "id_column": "record_id", "create_id": True,
                    "variables": {"categorical": ["sex", "water"], "key": ["sex"], "sensitive": sensitive},
                    "steps": [{"method": "pram", "params": {"theta": 0.5}}], "output": {"dir": "out"}})


SDCMICRO = Path(__file__).parent / "data" / "sdcmicro" / "ldiversity_testdata.csv"
"""sdcMicro 5.8.1's ldiversity on testdata.csv, per key combination (how it was made: the file's header)."""


@pytest.mark.parametrize("sensitive", ["income", "water"])
def test_equal_to_sdcmicro_ldiversity_on_testdata(testdata, sensitive):
    """Every record's distinct l equal to sdcMicro's, its entropy l within 1e-13 relative (summation order)."""
    table = combination_counts(testdata, [*KEYS, sensitive], {k: False for k in [*KEYS, sensitive]})
    groups = group_diversity(table, KEYS, sensitive)
    group_of = table[KEYS].assign(group=table.groupby(KEYS, sort=False).ngroup().to_numpy()).drop_duplicates(KEYS)
    ours = testdata[KEYS].astype(float).merge(group_of, on=KEYS, how="left")["group"].to_numpy()
    reference = testdata[KEYS].merge(pd.read_csv(SDCMICRO, comment="#"), on=KEYS, how="left")
    np.testing.assert_array_equal(groups["distinct"].to_numpy()[ours], reference[f"{sensitive}_distinct"])
    np.testing.assert_allclose(groups["entropy"].to_numpy()[ours], reference[f"{sensitive}_entropy"], rtol=1e-13)


def test_global_risk_equal_to_sdcmicro(testdata, sync_dask):
    """sdcMicro 5.8.1 (as above), measure_risk of createSdcObj(dat, keyVars=c("urbrur", "roof", "walls", "water",
    "electcon", "relat", "sex"), w="sampling_weight"): global_risk_ER 10.7782989187348, global_risk_pct
    0.235334037526961 (printed with options(digits=15))."""
    keys = ["urbrur", "roof", "walls", "water", "electcon", "relat", "sex"]
    frame = dd.from_pandas(testdata, npartitions=3, sort=False)
    metrics = evaluate(frame, frame, "record_id", [], keys, ("cat_risk",), categorical=keys, weight="sampling_weight")
    assert metrics["expected_reidentifications"] == pytest.approx(10.7782989187348, abs=1e-12)
    assert metrics["global_risk_percent"] == pytest.approx(0.235334037526961, abs=1e-14)
