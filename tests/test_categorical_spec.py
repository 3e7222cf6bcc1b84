"""Categorical roles in the release spec (categorical, ordinal, weight), step kinds, input checks of mixed
files, and ``sdc mask`` with categorical methods."""

from __future__ import annotations

import hashlib
import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from sdc_tasks.cli import app
from sdc_tasks.errors import InputError, SpecError
from sdc_tasks.generate import bundled_path
from sdc_tasks.pipeline.spec import load_spec, parse_spec
from sdc_tasks.pipeline.stages import validate_input

MIXED = {
    "input": {"path": "testdata.csv"},
    "create_id": True,
    "variables": {"key": ["roof", "walls", "expend"], "categorical": ["roof", "walls", "age", "sex"],
                  "ordinal": {"age": None, "walls": [2, 3, 9]}, "continuous": ["expend", "income"],
                  "weight": "sampling_weight", "drop": ["ori_hid"],
                  "pass_through": ["urbrur", "water", "electcon", "relat", "hhcivil", "savings",
                                   "household_weights"]},
    "steps": [{"method": "top_coding", "params": {"p": 2}}, {"method": "pram", "params": {"theta": 0.3}},
              {"method": "local_suppression", "params": {"k": 3}}, {"method": "mdav", "params": {"k": 3}}],
    "output": {"dir": "out"},
}


def mixed(**variables) -> dict:
    """MIXED with some variable roles replaced (None removes one)."""
    roles = {k: v for k, v in {**MIXED["variables"], **variables}.items() if v is not None}
    return {**MIXED, "variables": roles}


def test_roles_defaults_and_helpers():
    spec = parse_spec(MIXED)
    assert spec.variables.categorical == ["roof", "walls", "age", "sex"] and spec.variables.weight == "sampling_weight"
    assert [spec.step_variables(i) for i in range(4)] == [["walls", "age"], ["roof", "walls", "age", "sex"],
                                                          ["roof", "walls"], ["expend", "income"]]
    assert spec.linkage_keys == ["expend"] and spec.categorical_keys == ["roof", "walls"]
    assert spec.category_orders() == {"age": None, "walls": [2, 3, 9]}
    assert spec.category_orders({"age": [30, 4, 30, 17]}) == {"age": [4, 17, 30], "walls": [2, 3, 9]}


def test_metric_families_default_to_the_kinds_of_variables_the_spec_has():
    data = {**mixed(continuous=None, key=["roof", "walls"]), "steps": MIXED["steps"][:3]}
    assert parse_spec(data).metrics == ["cat_il", "cat_risk"]
    assert parse_spec(mixed()).metrics == ["il", "pil", "dld", "pld", "id", "cat_il", "cat_risk"]
    with pytest.raises(SpecError, match=r"metrics: family 'il' evaluates continuous variables but "
                                        r"variables.continuous is empty"):
        parse_spec({**data, "metrics": ["il"]})
    continuous_only = {**mixed(categorical=[], ordinal={}, key=["expend"]), "steps": MIXED["steps"][3:]}
    assert parse_spec(continuous_only).metrics == ["il", "pil", "dld", "pld", "id"]
    with pytest.raises(SpecError, match=r"metrics: family 'cat_risk' evaluates categorical variables but "
                                        r"variables.categorical is empty"):
        parse_spec({**continuous_only, "metrics": ["il", "cat_risk"]})


@pytest.mark.parametrize("steps, message", [
    ([{"method": "pram", "params": {"theta": 0.3}, "variables": ["expend"]}],
     r"steps.0.variables: 'expend' is not listed in variables.categorical \(pram masks categorical"),
    ([{"method": "mdav", "params": {"k": 3}, "variables": ["roof"]}],
     r"steps.0.variables: 'roof' is not listed in variables.continuous"),
    ([{"method": "top_coding", "params": {"p": 1}, "variables": ["sex"]}],
     r"steps.0.variables: 'sex' is not listed in variables.ordinal \(top_coding needs ordered categories\)"),
    ([{"method": "pram", "params": {"theta": 1.5}}], r"steps.0.*parameter 'theta' of pram"),
    ([{"method": "top_coding", "params": {"p": 0}}], r"steps.0.*parameter 'p' of top_coding"),
])
def test_a_step_of_the_wrong_kind_names_step_and_variable(steps, message):
    with pytest.raises(SpecError, match=message):
        parse_spec({**MIXED, "steps": steps})


@pytest.mark.parametrize("roles, message", [
    ({"ordinal": {"income": None}}, r"'variables': Value error, ordinal.income: 'income' is not listed in categorical"
     r"|ordinal.income: 'income' is not listed in categorical"),
    ({"ordinal": {"age": [1, 2, 1]}}, r"ordinal.age lists a category twice"),
    ({"categorical": ["roof", "walls", "age", "expend"]}, r"\['expend'\] cannot be both continuous and categorical"),
    ({"weight": "income"}, r"weight \['income'\] cannot also be key, continuous, categorical or strata: give each "
     r"column one role"),
    ({"continuous": [], "categorical": []}, r"continuous must name at least one variable"),
])
def test_role_errors_name_the_field(roles, message):
    with pytest.raises(SpecError, match=r"spec field 'variables'") as err:
        parse_spec(mixed(**roles))
    assert err.match(message)


def test_a_spec_without_categorical_roles_keeps_its_hash():
    spec = load_spec(bundled_path("demo.yaml"))
    data = spec.model_dump(mode="json")
    for role in ("categorical", "ordinal", "weight", "pass_through", "drop", "sensitive"):
        del data["variables"][role]
    del data["households"], data["input"]["value_labels"]  # optional fields added later, left out when unset
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"))
    assert spec.spec_hash() == hashlib.sha256(canonical.encode()).hexdigest()
    assert parse_spec(MIXED).spec_hash() != parse_spec(mixed(weight=None)).spec_hash()


# ---- input checks: categorical columns may hold text and gaps, continuous ones may not ----


def _spec_for(tmp_path, frame: pd.DataFrame):
    path = tmp_path / "testdata.csv"
    frame.to_csv(path, index=False)
    return parse_spec(MIXED, base_dir=tmp_path)


@pytest.fixture
def household() -> pd.DataFrame:
    return pd.read_csv(bundled_path("testdata.csv")).iloc[:60].reset_index(drop=True)


def test_categorical_text_and_gaps_pass_validation(tmp_path, household, sync_dask):
    household = household.astype({"roof": object, "sex": float})
    household.loc[3, "roof"] = "thatch"
    household.loc[5, "sex"] = None
    assert validate_input(_spec_for(tmp_path, household), tmp_path / "checkpoint")["n_records"] == 60


def test_text_in_a_continuous_variable_is_still_refused(tmp_path, household, sync_dask):
    household = household.astype({"income": object})
    household.loc[7, "income"] = "12,5OO"
    with pytest.raises(InputError, match=r"column 'income' .* row 7 holds text"):
        validate_input(_spec_for(tmp_path, household), tmp_path / "checkpoint")


# ---- sdc mask ----


def test_cli_top_coding_with_a_declared_order(tmp_path, no_cluster):
    out = tmp_path / "masked.csv"
    result = CliRunner().invoke(app, ["mask", "--input", str(bundled_path("testdata.csv")), "--method", "top_coding",
                                      "--param", "p=2", "--vars", "walls,water", "--ordinal", "walls=9,3,2",
                                      "--out", str(out)])
    assert result.exit_code == 0, result.output
    masked, original = pd.read_csv(out), pd.read_csv(bundled_path("testdata.csv"))
    assert masked["walls"].value_counts().to_dict() == {3: 4530, 9: 50}  # order 9, 3, 2: 3 and 2 become 3
    assert masked["water"].max() == 7 and (masked["water"] == 7).sum() == ((original["water"] >= 7).sum())


@pytest.mark.parametrize("args, message", [
    (["--method", "pram", "--param", "theta=0.5"], "masks categorical variables: name them with --vars"),
    (["--method", "top_coding", "--param", "p=4", "--vars", "walls"],
     "parameter 'p' of top_coding = 4 exceeds the 3 categories of variable 'walls'"),
    (["--method", "top_coding", "--param", "p=1", "--vars", "walls", "--ordinal", "walls"],
     "--ordinal must look like VAR=c1,c2,..."),
    (["--method", "local_suppression", "--param", "k=1", "--vars", "walls"], "parameter 'k' of local_suppression"),
    (["--method", "pram", "--param", "theta=0.5", "--vars", "walls,sex", "--strata", "sex"],
     "--strata 'sex' is also named in --vars"),
])
def test_cli_categorical_errors(tmp_path, no_cluster, args, message):
    result = CliRunner().invoke(app, ["mask", "--input", str(bundled_path("testdata.csv")), *args,
                                      "--out", str(tmp_path / "o.csv")])
    assert result.exit_code == 2 and message in result.output
    assert not (tmp_path / "o.csv").exists()


def test_a_small_csv_has_its_types_inferred_from_every_row():
    from sdc_tasks.io import read_table

    # income holds whole numbers in its first rows and decimals later on
    assert str(read_table(bundled_path("testdata.csv")).dtypes["income"]) == "float64"
