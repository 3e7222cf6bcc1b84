"""The release spec: validation errors name the field at fault; defaults and overrides."""

from __future__ import annotations

import pytest
import yaml

from sdc_tasks.errors import SpecError
from sdc_tasks.generate import bundled_path
from sdc_tasks.pipeline.spec import load_spec, parse_spec

BASE = {
    "input": {"path": "census.csv"},
    "variables": {"continuous": ["A", "B"], "key": ["A"]},
    "steps": [{"method": "mdav", "params": {"k": 3}}],
    "output": {"dir": "out"},
}


def with_(path: str, value):
    """A copy of BASE with one dotted field replaced."""
    import copy

    data = copy.deepcopy(BASE)
    node = data
    *parents, leaf = path.split(".")
    for part in parents:
        node = node[int(part)] if part.isdigit() else node.setdefault(part, {})
    node[leaf] = value
    return data


def test_bundled_demo_spec_is_valid():
    spec = load_spec(bundled_path("demo.yaml"))
    assert spec.steps[0].method == "md" and spec.steps[0].params["k"] >= 3
    assert spec.input_path.is_file()
    assert spec.linkage_keys[0] == "FEDTAX" and len(spec.linkage_keys) == 7


def test_defaults_filled_in():
    spec = parse_spec(BASE)
    assert spec.steps[0].params == {"k": 3, "group_size": None, "block_size": 12_000}
    assert spec.metrics == ["il", "pil", "dld", "pld", "id"]
    assert spec.dask.workers == 2 and spec.dask.address is None
    assert spec.step_variables(0) == ["A", "B"]


@pytest.mark.parametrize(
    "field, value, expected",
    [
        ("steps.0.params.k", 1, "spec field 'steps.0': parameter 'k' of mdav"),
        ("steps.0.method", "nope", "steps.0.method"),
        ("steps.0.params", {"k": 3, "bogus": 1}, "bogus"),
        ("seed", -1, "seed"),
        ("dask.workers", 0, "dask.workers"),
        ("variables.continuous", [], "variables"),
        ("output", {}, "output.dir"),
    ],
)
def test_errors_name_the_field(field, value, expected):
    with pytest.raises(SpecError) as err:
        parse_spec(with_(field, value))
    assert expected in str(err.value)


def test_rankswap_p_out_of_range_names_p():
    data = with_("steps", [{"method": "rankswap", "params": {"p": 150}}])
    with pytest.raises(SpecError, match="'p'"):
        parse_spec(data)


def test_step_variable_must_be_continuous():
    data = with_("steps", [{"method": "rankswap", "params": {"p": 5}, "variables": ["C"]}])
    with pytest.raises(SpecError, match="steps.0.variables"):
        parse_spec(data)


def test_gate_min_group_size_checks_k():
    data = with_("gate", {"min_group_size": 5})
    with pytest.raises(SpecError, match="min_group_size"):
        parse_spec(data)


@pytest.mark.parametrize("gate,metrics,expected", [
    ({"FOO": 1.0}, None, "gate.max.FOO: unknown measure"),
    ({"PLD": 5.0}, ["il", "dld", "id"], "gate.max.PLD: needs metric family 'pld'"),
    ({"score": 30.0}, ["il", "dld", "id"], "gate.max.score: needs metric family 'pld'"),
    ({"DLD_3": 5.0}, ["il", "id"], "gate.max.DLD_3: needs metric family 'dld'"),
])
def test_gated_measure_must_be_known_and_computed(gate, metrics, expected):
    data = with_("gate.max", gate)
    if metrics is not None:
        data["metrics"] = metrics
    with pytest.raises(SpecError, match=expected):
        parse_spec(data)


def test_gate_accepts_every_risk_measure():
    gate = {"DLD": 5, "DLD2_7": 5, "PLD": 5, "ID": 50, "ID_10": 60, "SDID": 10, "score": 40, "score_simple": 40,
            "score_pil": 40, "IL": 20, "PIL_m1": 0.5}
    assert parse_spec(with_("gate.max", gate)).gate.max == gate


def test_unknown_top_level_field_rejected():
    with pytest.raises(SpecError, match="colour"):
        parse_spec({**BASE, "colour": "blue"})


def test_load_spec_resolves_paths_and_overrides(tmp_path):
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(BASE))
    spec = load_spec(tmp_path / "spec.yaml", {"output.dir": "/abs/out", "dask.workers": 4})
    assert spec.input_path == (tmp_path / "census.csv").resolve()
    assert str(spec.output_dir) == "/abs/out"
    assert spec.dask.workers == 4


def test_spec_hash_is_stable_and_sensitive():
    a, b = parse_spec(BASE), parse_spec(BASE)
    assert a.spec_hash() == b.spec_hash()
    assert parse_spec(with_("seed", 7)).spec_hash() != a.spec_hash()


def test_bad_yaml_and_missing_file(tmp_path):
    with pytest.raises(SpecError, match="not found"):
        load_spec(tmp_path / "missing.yaml")
    (tmp_path / "bad.yaml").write_text("a: [1, 2\n")
    with pytest.raises(SpecError, match="not valid YAML"):
        load_spec(tmp_path / "bad.yaml")


# ---- every column has one role ----


def roles(**changes) -> dict:
    """BASE with its variable roles updated."""
    return with_("variables", {**BASE["variables"], **changes})


@pytest.mark.parametrize("changes, message", [
    ({"pass_through": ["B"]}, r"pass_through \['B'\] cannot also be key, continuous, categorical, weight or strata"),
    ({"drop": ["A"]}, r"drop \['A'\] cannot also be key, continuous, categorical, weight, strata or pass_through"),
    ({"drop": ["C"], "pass_through": ["C"]}, r"drop \['C'\] cannot also be .* or pass_through"),
    ({"direct_identifiers": ["C"], "drop": ["C"]}, r"direct_identifiers \['C'\] cannot also be .*drop"),
    ({"weight": "C", "strata": "C"}, r"weight \['C'\] cannot also be key, continuous, categorical or strata"),
    ({"strata": "B"}, r"strata \['B'\] cannot also be continuous"),
    ({"pass_through": ["C", "C"]}, "pass_through lists a variable twice"),
    ({"key": ["A", "C"]}, "key variable 'C' must also be listed under continuous or categorical"),
])
def test_roles_are_disjoint_and_keys_are_masked(changes, message):
    with pytest.raises(SpecError, match=r"spec field 'variables'") as err:
        parse_spec(roles(**changes))
    assert err.match(message)


@pytest.mark.parametrize("changes, message", [
    ({"variables": {**BASE["variables"], "pass_through": ["record_id"]}},
     "id_column 'record_id' cannot also be listed under variables.pass_through"),
    ({"variables": {**BASE["variables"], "strata": "record_id"}},
     "id_column 'record_id' cannot also be listed under variables.strata"),
    ({"steps": [{"method": "mdav", "params": {"k": 3}, "variables": ["A"]}]},
     "variables.continuous: 'B' is masked by no step: mask it in a step, or list it under variables.pass_through"),
])
def test_id_column_has_no_other_role_and_every_variable_is_masked(changes, message):
    with pytest.raises(SpecError, match=message):
        parse_spec({**BASE, **changes})


def test_column_accounting_covers_every_role():
    data = roles(continuous=["A", "B"], categorical=["R", "S"], key=["A", "S"], strata="R", weight="W",
                 pass_through=["REGION"], drop=["NOTE"], direct_identifiers=["NAME"])
    spec = parse_spec({**data, "steps": [*BASE["steps"], {"method": "pram", "params": {"theta": 0.3}}]})
    assert spec.column_accounting() == {"REGION": "passed_through", "NAME": "dropped", "NOTE": "dropped",
                                        "A": "masked", "B": "masked", "S": "masked", "W": "weight",
                                        "R": "strata", "record_id": "id"}
    assert spec.masked_variables() == ["A", "B", "S"]  # the strata column R is categorical but never masked
