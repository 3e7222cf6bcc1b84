"""The method registry: every row complete, the catalogue and the texts generated from it (docs/methods.md, the
``sdc mask`` help), checked against hand-written values and against the parameter models."""

from __future__ import annotations

from pathlib import Path

import pytest

from sdc_tasks.masking.registry import (
    METHODS,
    ParamInfo,
    example_option,
    method_catalogue,
    method_help,
    methods_markdown,
    param_help,
    parse_cli_params,
    validate_params,
)

DOCS = Path(__file__).resolve().parents[1] / "docs" / "methods.md"


def test_docs_methods_is_what_the_registry_generates():
    assert DOCS.read_text() == methods_markdown(), (
        "docs/methods.md is stale: regenerate it as its header says")


@pytest.mark.parametrize("name", list(METHODS))
def test_every_row_has_a_source_a_summary_and_valid_example_params(name):
    method = METHODS[name]
    assert method.name == name
    assert method.source.strip() and method.summary.strip() and method.scaling.strip()
    assert ".txt" in method.source  # a section of a source paper
    assert set(method.example) <= set(method.params.model_fields)
    validated = validate_params(name, method.example)
    assert {k: validated[k] for k in method.example} == method.example


@pytest.mark.parametrize("name", list(METHODS))
def test_example_as_cli_options_parses_back(name):
    words = example_option(name).split()
    assert words[::2] == ["--param"] * (len(words) // 2)
    assert parse_cli_params(words[1::2]) == METHODS[name].example


def test_catalogue_has_every_method_in_registry_order():
    catalogue = method_catalogue()
    assert [m.name for m in catalogue] == list(METHODS)
    assert len(catalogue) == 20
    by_name = {m.name: m for m in catalogue}
    assert {n for n, m in by_name.items() if m.kind == "categorical"} == {
        "top_coding", "bottom_coding", "global_recoding", "pram", "local_suppression"}
    assert {n for n, m in by_name.items() if m.after_masking} == {"rescale", "postmask"}
    assert {n for n, m in by_name.items() if m.ordinal} == {"top_coding", "bottom_coding"}
    assert by_name["jpeg"].shape == "blocked" and by_name["rankswap"].shape == "column"
    assert by_name["noise"].shape == "record" and by_name["pram"].shape == "categorical"


def test_catalogue_parameters_hand_checked():
    by_name = {m.name: m for m in method_catalogue()}
    assert by_name["mdav"].params == [
        ParamInfo("k", "int", None, True, "minimum group size", ">= 2"),
        ParamInfo("group_size", "int | None", None, False, "attributes microaggregated together (None: all)",
                  ">= 1"),
        ParamInfo("block_size", "int", 12_000, False, "records per data-driven block", ">= 2, >= 2k"),
    ]
    assert [(p.name, p.bounds) for p in by_name["rankswap"].params] == [("p", "> 0, <= 100")]
    assert [(p.name, p.bounds) for p in by_name["pram"].params] == [("theta", "> 0, < 1")]
    correspondence = {p.name: p for p in by_name["postmask"].params}["correspondence"]
    assert (correspondence.type, correspondence.default, correspondence.required) == ("'nearest' | 'id'",
                                                                                      "nearest", False)
    assert by_name["distr"].params == [] and by_name["rescale"].example == {}
    assert by_name["postmask"].example is not METHODS["postmask"].example  # a copy: the row cannot be changed


def test_catalogue_parameters_follow_the_models():
    for info in method_catalogue():
        fields = METHODS[info.name].params.model_fields
        assert [p.name for p in info.params] == list(fields)
        for p in info.params:
            assert p.required == fields[p.name].is_required()
            assert p.description, f"parameter {p.name} of {info.name} has no description"
            if not p.required and p.name not in info.example:
                assert validate_params(info.name, info.example)[p.name] == p.default


def test_method_help_lists_every_method_once():
    text = method_help()
    continuous, categorical = text.removeprefix("masking method: ").split("; categorical: ")
    assert continuous.split(", ") == [n for n, m in METHODS.items() if m.kind == "continuous"]
    assert categorical.split(", ") == [n for n, m in METHODS.items() if m.kind == "categorical"]
    assert "md" in continuous.split(", ")


def test_param_help_lists_each_methods_parameters():
    text = param_help().removeprefix("method parameter name=value (repeatable): ")
    text = text.removesuffix(" (defaults and bounds: docs/methods.md)")
    listed = {}
    for entry in text.split("; "):
        methods, names = entry.split(": ")
        for method in methods.split(", "):
            listed[method] = names.split(", ")
    assert listed["mdav_variable"] == ["k", "group_size", "block_size", "gamma"]
    assert listed["jpeg"] == ["q"] and listed["pram"] == ["theta"]
    assert "rescale" not in listed and "distr" not in listed
    assert listed == {n: list(m.params.model_fields) for n, m in METHODS.items() if m.params.model_fields}
