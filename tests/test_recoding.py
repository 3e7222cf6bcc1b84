"""Recodes an agency writes itself (``recode``: maps, interval breaks, code prefixes; ``top_bottom_coding`` of
continuous variables at values), checked on hand-computed cases and on testdata.csv against pandas' own
computation of the same rule."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import sdc_tasks
from sdc_tasks.cli import app
from sdc_tasks.generate import bundled_path
from sdc_tasks.masking.params import category_text
from sdc_tasks.masking.recoding import (
    category_mapping,
    interval_index,
    interval_labels,
    recoded_dtype,
    threshold_coded,
    truncated_code,
)
from sdc_tasks.masking.registry import parse_cli_params, validate_params
from sdc_tasks.pipeline.spec import parse_spec

TEXT = pd.api.types.pandas_dtype("string[pyarrow]")


@pytest.fixture(scope="module")
def testdata() -> pd.DataFrame:
    return pd.read_csv(bundled_path("testdata.csv"))


# ---- the rules, by hand ----


def test_interval_labels_name_each_interval_with_its_closed_end():
    assert interval_labels([15, 25, 65], "left") == ["< 15", "[15, 25)", "[25, 65)", ">= 65"]
    assert interval_labels([15, 25, 65], "right") == ["<= 15", "(15, 25]", "(25, 65]", "> 65"]
    assert interval_labels([0.5], "left") == ["< 0.5", ">= 0.5"]


def test_a_value_on_a_break_opens_the_next_interval_when_closed_left_and_closes_the_previous_when_right():
    values = np.array([0, 14, 15, 24.9, 25, 64, 65, 95])
    assert interval_index(values, [15, 25, 65], "left").tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    assert interval_index(values, [15, 25, 65], "right").tolist() == [0, 0, 0, 1, 1, 2, 2, 3]


def test_categories_are_matched_by_their_text():
    assert [category_text(v) for v in (11, np.int64(11), 11.0, np.float64(11.0), "11", 11.5)] == \
        ["11", "11", "11", "11", "11", "11.5"]
    rule = validate_params("recode", {"rules": {"r": {"map": {11: "north", "12": "north", 21: "south"}}}})
    assert rule["rules"]["r"] == {"map": {"11": "north", "12": "north", "21": "south"}}
    assert category_mapping([11.0, 12.0, 21.0], rule["rules"]["r"], "r") == {11.0: "north", 12.0: "north",
                                                                              21.0: "south"}


def test_a_map_that_leaves_categories_unmapped_says_how_many_never_which():
    with pytest.raises(ValueError) as err:
        category_mapping([1, 2, 37, 41], {"map": {"1": 1, "2": 1}}, "roof")
    assert str(err.value).startswith("recode map of variable 'roof' leaves 2 of its 4 observed categories unmapped")
    assert "37" not in str(err.value) and "41" not in str(err.value)


def test_breaks_map_numeric_categories_to_their_labels():
    rule = {"breaks": [15.0, 65.0], "labels": ["child", "adult", "senior"]}
    assert category_mapping([3, 15, 40, 65, 90], rule, "age") == {3: "child", 15: "adult", 40: "adult", 65: "senior",
                                                                  90: "senior"}
    assert category_mapping([15, 65], {"breaks": [15.0, 65.0], "closed": "right"}, "age") == \
        {15: "<= 15", 65: "(15, 65]"}
    with pytest.raises(ValueError, match="variable 'sex': breaks need numbers"):
        category_mapping(["f", "m"], {"breaks": [1.0]}, "sex")


def test_a_prefix_cuts_codes_and_keeps_their_type():
    assert truncated_code(4711, 2, "nace") == 47 and isinstance(truncated_code(4711, 2, "nace"), int)
    assert truncated_code(np.int64(4711), 3, "nace") == np.int64(471)
    assert type(truncated_code(np.int64(4711), 3, "nace")) is np.int64
    assert truncated_code(4711.0, 1, "nace") == 4.0 and isinstance(truncated_code(4711.0, 1, "nace"), float)
    assert truncated_code("C1012", 2, "nace") == "C1" and truncated_code(5, 2, "nace") == 5
    with pytest.raises(ValueError, match="variable 'nace': prefix needs integer or text codes"):
        truncated_code(47.5, 1, "nace")


def test_the_recoded_dtype_follows_the_rule():
    i8, f8 = np.dtype("int64"), np.dtype("float64")
    assert recoded_dtype(i8, {"prefix": 2}) == i8 and recoded_dtype(TEXT, {"prefix": 2}) == TEXT
    assert recoded_dtype(i8, {"breaks": [1.0]}) == TEXT
    assert recoded_dtype(i8, {"map": {"1": 1}}) == i8 and recoded_dtype(f8, {"map": {"1": 1}}) == f8
    assert recoded_dtype(i8, {"map": {"1": 1.5}}) == f8 and recoded_dtype(i8, {"map": {"1": "a"}}) == TEXT
    assert recoded_dtype(TEXT, {"map": {"a": 1}}) == pd.Int64Dtype()


def test_threshold_coding_replaces_values_beyond_each_threshold():
    x = np.array([-5.0, 0.0, 3.0, 10.0, 10.5, 99.0, np.nan])
    out = threshold_coded(x, {"top": 10.0, "bottom": 0.0})
    np.testing.assert_array_equal(out, [0.0, 0.0, 3.0, 10.0, 10.0, 10.0, np.nan])
    out = threshold_coded(x, {"top": 10.0, "top_value": 12.0, "bottom": 0.0, "bottom_value": -1.0})
    np.testing.assert_array_equal(out, [-1.0, 0.0, 3.0, 10.0, 12.0, 12.0, np.nan])
    assert np.isnan(x[-1]) and x[0] == -5.0  # the input is not modified


@pytest.mark.parametrize("rule,message", [
    ({"breaks": [15, 15]}, "breaks must increase: break 1 is not greater than break 0"),
    ({"breaks": [15, 25], "labels": ["a", "b"]}, "2 breaks make 3 intervals, and 2 labels are given"),
    ({"breaks": [15], "labels": ["a", "a"]}, "labels must differ"),
    ({"map": {1: 1}, "prefix": 2}, "give exactly one of map, map_file, breaks, prefix (given: map, prefix)"),
    ({}, "give exactly one of map, map_file, breaks, prefix"),
    ({"prefix": 2, "labels": ["a"]}, "labels and closed go with breaks"),
    ({"map": {1: "a", 2: 3}}, "mix numbers and text"),
    ({"map": {1: "a", "1": "b"}}, "lists one category twice"),
    ({"prefix": 0}, "greater than or equal to 1"),
])
def test_a_bad_rule_is_named_by_variable(rule, message):
    with pytest.raises(ValueError) as err:
        validate_params("recode", {"rules": {"age": rule}})
    assert "parameter 'rules.age" in str(err.value) and message in str(err.value)


@pytest.mark.parametrize("rule,message", [
    ({}, "give top, bottom or both"), ({"bottom": 5.0, "top": 5.0}, "bottom must be below top"),
    ({"top_value": 3.0, "bottom": 1.0}, "top_value goes with top"),
])
def test_a_bad_threshold_is_named_by_variable(rule, message):
    with pytest.raises(ValueError, match=f"parameter 'rules.income' of top_bottom_coding: {message}"):
        validate_params("top_bottom_coding", {"rules": {"income": rule}})


def test_maps_and_rules_come_from_files_relative_to_the_spec(tmp_path):
    (tmp_path / "maps").mkdir()
    (tmp_path / "maps" / "roof.csv").write_text("code,group\n2,2\n4,4\n5,4\n6,4\n9,9\n")
    (tmp_path / "maps" / "water.yaml").write_text("1: piped\n2: piped\n3: well\n")
    spec = parse_spec({
        "input": {"path": "testdata.csv"}, "id_column": "record_id", "create_id": True,
        "variables": {"categorical": ["roof", "water"], "key": ["roof", "water"]},
        "steps": [{"method": "recode", "variables": ["roof", "water"],
                   "params": {"rules": {"roof": {"map_file": "maps/roof.csv"},
                                        "water": {"map_file": "maps/water.yaml"}}}}],
        "output": {"dir": "out"}}, base_dir=tmp_path)
    assert spec.steps[0].params["rules"] == {"roof": {"map": {"2": 2, "4": 4, "5": 4, "6": 4, "9": 9}},
                                             "water": {"map": {"1": "piped", "2": "piped", "3": "well"}}}
    (tmp_path / "rules.json").write_text(json.dumps({"age": {"breaks": [18, 65]}}))
    assert validate_params("recode", {"rules": "rules.json"}, tmp_path)["rules"] == {"age": {"breaks": [18.0, 65.0]}}
    with pytest.raises(ValueError, match="map_file file not found: .*absent.csv"):
        validate_params("recode", {"rules": {"roof": {"map_file": "absent.csv"}}}, tmp_path)
    (tmp_path / "bad.csv").write_text("code,group\n2,2,9\n")
    with pytest.raises(ValueError, match="row 1 after the header does not hold two columns"):
        validate_params("recode", {"rules": {"roof": {"map_file": "bad.csv"}}}, tmp_path)


def test_structured_cli_values_parse_as_yaml():
    assert parse_cli_params(['rules={"age": {"breaks": [15, 65]}}', "k=3"]) == \
        {"rules": {"age": {"breaks": [15, 65]}}, "k": 3}
    with pytest.raises(ValueError, match="is not a YAML or JSON mapping"):
        parse_cli_params(["rules={age: [15"])


# ---- on testdata.csv, against pandas' own computation of each rule ----


def test_recode_on_testdata_equals_pandas(testdata):
    water = {1: "piped", 2: "piped", 3: "well", 4: "well", 5: "other", 6: "other", 7: "other", 9: "other"}
    rules = {"age": {"breaks": [15, 25, 65], "labels": ["0-14", "15-24", "25-64", "65+"]},
             "roof": {"map": {2: 2, 4: 4, 5: 4, 6: 4, 9: 9}}, "water": {"map": water},
             "hhcivil": {"prefix": 1}}
    before = testdata.copy()
    out = sdc_tasks.mask(testdata, "recode", vars=list(rules), rules=rules)
    pd.testing.assert_frame_equal(testdata, before)
    bands = pd.cut(testdata.age, [-np.inf, 15, 25, 65, np.inf], right=False, labels=["0-14", "15-24", "25-64", "65+"])
    assert out.age.tolist() == bands.astype(str).tolist() and out.age.dtype == TEXT
    assert out.roof.tolist() == testdata.roof.replace({5: 4, 6: 4}).tolist() and out.roof.dtype == np.int64
    assert out.water.tolist() == testdata.water.map(water).tolist()
    assert out.hhcivil.tolist() == [int(str(v)[:1]) for v in testdata.hhcivil]
    others = [c for c in testdata.columns if c not in rules]
    pd.testing.assert_frame_equal(out[others], testdata[others])


def test_top_bottom_coding_on_testdata_equals_numpy(testdata):
    top = float(testdata.income.quantile(0.99))
    rules = {"income": {"top": top}, "expend": {"bottom": 1e7, "bottom_value": 0.0}}
    out = sdc_tasks.mask(testdata, "top_bottom_coding", vars=list(rules), rules=rules)
    np.testing.assert_array_equal(out.income, np.minimum(testdata.income, top))
    np.testing.assert_array_equal(out.expend, np.where(testdata.expend < 1e7, 0.0, testdata.expend))
    assert (out.income == top).sum() == (testdata.income >= top).sum() > 1


def test_sdc_mask_reads_rules_from_a_file(tmp_path):
    (tmp_path / "rules.yaml").write_text("age:\n  breaks: [18, 65]\nsex:\n  map: {1: male, 2: female}\n")
    out = tmp_path / "out.csv"
    result = CliRunner().invoke(app, ["mask", "--input", str(bundled_path("testdata.csv")), "--method", "recode",
                                      "--param", f"rules={tmp_path / 'rules.yaml'}", "--vars", "age,sex",
                                      "--out", str(out)])
    assert result.exit_code == 0, result.output
    masked = pd.read_csv(out)
    assert set(masked.age) == {"< 18", "[18, 65)", ">= 65"} and set(masked.sex) == {"male", "female"}


def test_a_step_variable_without_a_rule_is_named(testdata):
    with pytest.raises(ValueError, match="recode: variable 'sex' of the step has no rule in parameter 'rules'"):
        sdc_tasks.mask(testdata, "recode", vars=["age", "sex"], rules={"age": {"prefix": 1}})
    with pytest.raises(ValueError, match="parameter 'rules' names variable 'sex', which the step does not mask"):
        sdc_tasks.mask(testdata, "top_bottom_coding", vars=["income"], rules={"income": {"top": 1.0},
                                                                               "sex": {"top": 1.0}})


def test_categorical_risk_links_to_the_original_seen_through_the_published_recodes(testdata, sync_dask, tmp_path):
    """A release's cat_risk links the masked records to the original with its keys recoded by the release's own
    rules (an intruder applies the published recode to what they know); cat_il measures against the original."""
    import dask.dataframe as dd

    from sdc_tasks.evaluation.measures import evaluate
    from sdc_tasks.pipeline.stages import intruder_view

    rules = {"age": {"breaks": [15, 25, 65]}, "water": {"map": {1: 1, 2: 1, 3: 3, 4: 3, 5: 5, 6: 5, 7: 5, 9: 5}}}
    keys = ["urbrur", "roof", "walls", "water", "sex", "age"]
    data = testdata.assign(record_id=range(len(testdata)))
    spec = parse_spec({
        "input": {"path": str(bundled_path("testdata.csv"))}, "id_column": "record_id", "create_id": True,
        "variables": {"categorical": keys, "key": keys, "continuous": ["expend", "income", "savings"],
                      "pass_through": ["electcon", "relat", "hhcivil", "household_weights", "ori_hid",
                                       "sampling_weight"]},
        "steps": [{"method": "recode", "params": {"rules": rules}}, {"method": "local_suppression",
                                                                    "params": {"k": 3}, "variables": keys},
                  {"method": "mdav", "params": {"k": 3}}],
        "output": {"dir": str(tmp_path / "out")}})
    original = dd.from_pandas(data, npartitions=3, sort=False)
    seen = intruder_view(spec, original)
    by_hand = data.assign(age=pd.cut(data.age, [-np.inf, 15, 25, 65, np.inf], right=False,
                                     labels=["< 15", "[15, 25)", "[25, 65)", ">= 65"]).astype(str),
                          water=data.water.map({1: 1, 2: 1, 3: 3, 4: 3, 5: 5, 6: 5, 7: 5, 9: 5}))
    pd.testing.assert_frame_equal(seen.frame.compute().reset_index(drop=True), by_hand, check_dtype=False)
    masked = sdc_tasks.mask(sdc_tasks.mask(data, "recode", rules=rules), "local_suppression", vars=keys, k=3)
    risk = evaluate(original, dd.from_pandas(masked, npartitions=2, sort=False), "record_id", [], keys,
                    ("cat_il", "cat_risk"), categorical=keys, intruder_original=seen.frame)
    reference = evaluate(dd.from_pandas(by_hand, npartitions=2, sort=False),
                         dd.from_pandas(masked, npartitions=2, sort=False), "record_id", [], keys, ("cat_risk",),
                         categorical=keys)
    assert risk["PLD_cat"] == reference["PLD_cat"] > 0
    assert risk["Dist"] > 0  # information loss still against the original: the recoded ages count as changed
