"""The method registry: every row complete, the catalogue and the texts generated from it (docs/methods.md, the
``sdc mask`` help) checked against hand-written values and the parameter models; and every registered method
run with its example parameters on a small synthetic frame: only its variables masked, the input unchanged,
the same values for the same seed on any partitioning, in this process or on worker processes, bad and unknown
parameters refused naming the parameter."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from sdc_tasks.cli import app
from sdc_tasks.generate import Geography, household_chunk
from sdc_tasks.masking.apply import StepContext
from sdc_tasks.masking.methods import apply_step
from sdc_tasks.masking.registry import (
    METHODS,
    ParamInfo,
    example_option,
    method_catalogue,
    method_help,
    methods_markdown,
    param_help,
    parse_cli_params,
    ruled_variables,
    validate_params,
)

DOCS = Path(__file__).resolve().parents[1] / "docs" / "methods.md"
REFERENCES = DOCS.parent / "references.md"


def test_docs_methods_is_what_the_registry_generates():
    assert DOCS.read_text() == methods_markdown(), (
        "docs/methods.md is stale: regenerate it as its header says")


@pytest.mark.parametrize("name", list(METHODS))
def test_every_row_has_a_source_a_summary_and_valid_example_params(name):
    method = METHODS[name]
    assert method.name == name
    assert method.source.strip() and method.summary.strip() and method.scaling.strip()
    # a section of a source paper, or a named software's procedure listed in docs/references.md
    assert ".txt" in method.source or f"### {method.source.split(' (')[0]}\n" in REFERENCES.read_text()
    assert set(method.example) <= set(method.params.model_fields)
    validated = validate_params(name, method.example)
    assert {k: validated[k] for k in method.example} == method.example


@pytest.mark.parametrize("name", list(METHODS))
def test_example_as_cli_options_parses_back(name):
    words = shlex.split(example_option(name))
    assert words[::2] == ["--param"] * (len(words) // 2)
    assert parse_cli_params(words[1::2]) == METHODS[name].example


def test_catalogue_has_every_method_in_registry_order():
    catalogue = method_catalogue()
    assert [m.name for m in catalogue] == list(METHODS)
    assert len(catalogue) == 23
    by_name = {m.name: m for m in catalogue}
    assert {n for n, m in by_name.items() if m.kind == "categorical"} == {
        "top_coding", "bottom_coding", "global_recoding", "pram", "recode", "local_suppression", "record_swap"}
    assert {n for n, m in by_name.items() if m.after_masking} == {"rescale", "postmask"}
    assert {n for n, m in by_name.items() if m.ordinal} == {"top_coding", "bottom_coding"}
    assert by_name["jpeg"].shape == "blocked" and by_name["rankswap"].shape == "column"
    assert by_name["noise"].shape == "record" and by_name["pram"].shape == "categorical"
    assert by_name["record_swap"].shape == "household"


def test_catalogue_parameters_hand_checked():
    by_name = {m.name: m for m in method_catalogue()}
    assert by_name["mdav"].params == [
        ParamInfo("k", "int", None, True, "minimum group size", ">= 2, <= 10000"),
        ParamInfo("group_size", "int | None", None, False, "attributes microaggregated together (None: all)",
                  ">= 1, <= 1000000"),
        ParamInfo("block_size", "int", 12_000, False, "records per data-driven block",
                  ">= 2, <= 10000000, >= 2k"),
    ]
    assert [(p.name, p.bounds) for p in by_name["rankswap"].params] == [("p", "> 0, <= 100"), ("partner", "")]
    assert [(p.name, p.bounds) for p in by_name["pram"].params] == [("theta", "> 0, < 1")]
    correspondence = {p.name: p for p in by_name["postmask"].params}["correspondence"]
    assert (correspondence.type, correspondence.default, correspondence.required) == ("'id' | 'nearest'", "id",
                                                                                      False)
    assert [(p.name, p.bounds) for p in by_name["record_swap"].params if p.bounds] == [
        ("k", ">= 1, <= 10000"), ("swap_rate", ">= 0, <= 1")]
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


# ---- every registered method run with its example parameters ----

CONTINUOUS = ["income", "tax", "wealth", "hours"]
CATEGORICAL = ["size", "region", "tenure"]
ORDERS = {"size": [1, 2, 3, 4, 5]}
BAD = "not-a-value"
TEXT = "string[pyarrow]"


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    """300 records: four continuous variables (correlated, skewed, one integer-valued), three categorical ones
    (ordinal integer codes, two nominal texts, of the string dtype Dask gives text), ids in shuffled order."""
    rng = np.random.default_rng(20)
    n = 300
    base = rng.standard_normal(n)
    return pd.DataFrame({
        "record_id": rng.permutation(np.arange(1000, 1000 + n)),
        "income": np.exp(10 + 0.5 * base + 0.3 * rng.standard_normal(n)),
        "tax": 2000 + 800 * base + 200 * rng.standard_normal(n),
        "wealth": rng.gamma(2.0, 5000.0, n),
        "hours": rng.integers(10, 60, n).astype(np.float64),
        "size": rng.choice([1, 2, 3, 4, 5], n, p=[0.4, 0.3, 0.15, 0.1, 0.05]),
        "region": pd.array(rng.choice(["north", "south", "east", "west"], n, p=[0.4, 0.3, 0.2, 0.1]), TEXT),
        "tenure": pd.array(rng.choice(["owner", "renter", "other"], n, p=[0.6, 0.3, 0.1]), TEXT),
    })


@pytest.fixture(scope="module")
def already_masked(frame) -> pd.DataFrame:
    """The frame with noise added to its continuous variables (sd 0.2 of each variable's), the input of the
    methods that move a masked file toward the original."""
    rng = np.random.default_rng(21)
    out = frame.copy()
    for v in CONTINUOUS:
        out[v] = out[v] + 0.2 * out[v].std() * rng.standard_normal(len(out))
    return out


HOUSEHOLDS = household_chunk(300, 3, 0, 1000, Geography(2, 2, 3)).sample(frac=1.0, random_state=4).reset_index(
    drop=True)
"""300 persons in households (the generator's), rows shuffled: the input of the household-shaped methods."""


def variables_of(method: str) -> list[str]:
    """The variables a method masks in these tests: categorical ones for categorical methods, those its example
    names for a household-shaped one (record swapping's geography)."""
    if METHODS[method].shape == "household":
        return ruled_variables(METHODS[method].example)
    return CATEGORICAL if METHODS[method].kind == "categorical" else CONTINUOUS


def run(method: str, frame: pd.DataFrame, original: pd.DataFrame, nparts: int, seed: int = 9) -> pd.DataFrame:
    """One step of ``method`` with its example parameters on ``frame`` in ``nparts`` partitions (after-masking
    methods on the already masked frame, with ``original`` as the original records), in input row order."""
    ddf = dd.from_pandas(frame, npartitions=nparts, sort=False)
    reference = dd.from_pandas(original, npartitions=2, sort=False) if METHODS[method].after_masking else None
    ctx = StepContext(seed=seed, step=1, id_column="record_id", reference=reference, category_orders=ORDERS)
    result = apply_step(ddf, method, variables_of(method), validate_params(method, METHODS[method].example), ctx)
    return result.frame.compute().reset_index(drop=True)


def changed_values(out: pd.DataFrame, source: pd.DataFrame, variables: list[str]) -> int:
    """How many values of ``variables`` differ between ``out`` and ``source`` (which has none missing); a
    missing value in ``out`` counts as changed."""
    count = 0
    for v in variables:
        missing = out[v].isna().to_numpy()
        count += int(missing.sum())
        count += int((out[v].to_numpy(object)[~missing] != source[v].to_numpy(object)[~missing]).sum())
    return count


def input_of(method: str, frame: pd.DataFrame, already_masked: pd.DataFrame) -> pd.DataFrame:
    """The input a method is run on: the already masked frame for after-masking methods, persons in households
    for household-shaped ones, else the frame."""
    if METHODS[method].shape == "household":
        return HOUSEHOLDS
    return already_masked if METHODS[method].after_masking else frame


@pytest.mark.parametrize("method", list(METHODS))
def test_example_run_masks_only_its_variables(frame, already_masked, sync_dask, method):
    source = input_of(method, frame, already_masked)
    before = source.copy()
    out = run(method, source, frame, nparts=3)
    pd.testing.assert_frame_equal(source, before)  # the caller's frame is not modified
    variables = variables_of(method)
    assert list(out.columns) == list(source.columns)
    others = [c for c in source.columns if c not in variables]
    pd.testing.assert_frame_equal(out[others], source[others])
    assert changed_values(out, source, variables) > 0, f"{method} left every value unchanged"
    if METHODS[method].kind == "continuous":
        assert np.isfinite(out[variables].to_numpy()).all()
    else:
        for v in variables:  # every written category is one of the variable's own
            assert set(out[v].dropna()) <= set(source[v])
        if getattr(METHODS[method].adapter(), "masked_dtype", None) is None:  # one that never writes missing values
            assert out[variables].notna().all().all()


@pytest.mark.parametrize("method", list(METHODS))
def test_example_run_is_deterministic_and_does_not_depend_on_partitions(frame, already_masked, sync_dask, method):
    source = input_of(method, frame, already_masked)
    five = run(method, source, frame, nparts=5)
    pd.testing.assert_frame_equal(run(method, source, frame, nparts=5), five)
    pd.testing.assert_frame_equal(run(method, source, frame, nparts=1), five)


def test_example_runs_are_the_same_on_one_thread_and_on_two_worker_processes(frame, already_masked, dask_scheduler):
    """Bit-identical masked values of every method run in this process on one thread and on the session's cluster
    of two worker processes (two partitions: one for each worker; four took a third longer, 18.1 s against 12.6 s
    for the runs on the cluster)."""
    from sdc_tasks.cluster import dask_client

    def runs() -> list[pd.DataFrame]:
        return [run(m, input_of(m, frame, already_masked), frame, nparts=2) for m in METHODS]

    with dask.config.set(scheduler="synchronous"):
        alone = runs()
    with dask_client(dask_scheduler):
        spread = runs()
    for method, a, b in zip(METHODS, alone, spread):
        pd.testing.assert_frame_equal(a, b, obj=method)


def _outside(bound: str, type_name: str, example: dict) -> Any:
    """A value just outside one bound as docs/methods.md writes it (">= 2", "> 0", "<= 100", "< 1", ">= 2k")."""
    op, value = bound.split(" ")
    if value == "2k":
        return 2 * example["k"] - 1
    limit = float(value)
    step = 1 if type_name.startswith("int") else 0.5
    outside = {">=": limit - step, ">": limit, "<=": limit + step, "<": limit}[op]
    return int(outside) if type_name.startswith("int") else outside


@pytest.mark.parametrize("method", list(METHODS))
def test_bad_parameters_are_refused_naming_the_parameter(method):
    example = METHODS[method].example
    info = {m.name: m for m in method_catalogue()}[method]
    for p in info.params:
        named = rf"^parameter '{p.name}' of {method}\b"
        if not p.type.startswith("str"):  # any text is a column name: it is checked against the input
            with pytest.raises(ValueError, match=named):
                validate_params(method, {**example, p.name: BAD})
        for bound in filter(None, p.bounds.split(", ")):
            with pytest.raises(ValueError, match=named):
                validate_params(method, {**example, p.name: _outside(bound, p.type, example)})
        if p.required:
            with pytest.raises(ValueError, match=named):
                validate_params(method, {k: v for k, v in example.items() if k != p.name})


@pytest.mark.parametrize("method", list(METHODS))
def test_unknown_parameter_is_refused_naming_it(method):
    with pytest.raises(ValueError, match=rf"^parameter 'bogus' of {method}: Extra inputs are not permitted"):
        validate_params(method, {**METHODS[method].example, "bogus": 1})


def test_mask_help_and_methods_doc_list_every_accepted_parameter():
    """Every parameter every method accepts (its model's fields, which validate_params takes) is named for that
    method in the rendered ``sdc mask --help`` and in the method's section of docs/methods.md."""
    result = CliRunner().invoke(app, ["mask", "--help"], env={"COLUMNS": "400", "TERMINAL_WIDTH": "400"})
    assert result.exit_code == 0
    shown = re.sub(r"[\s│]+", " ", result.output)
    listed = shown[shown.index("method parameter name=value"):shown.index("(defaults and bounds")]
    by_method = {}
    for entry in listed.removeprefix("method parameter name=value (repeatable): ").strip().split("; "):
        methods, names = entry.split(": ")
        by_method.update({m: names.split(", ") for m in methods.split(", ")})
    docs = (Path(__file__).parent.parent / "docs" / "methods.md").read_text()
    for name, method in METHODS.items():
        accepted = set(validate_params(name, method.example))
        assert set(by_method.get(name, [])) == accepted, name
        section = docs[docs.index(f"## `{name}`"):]
        section = section[:section.index("\nExample:")]
        rows = section.split("| parameter | type | default | bounds | description |\n|---|---|---|---|---|\n")
        table = rows[1].split("\n\n")[0] if len(rows) > 1 else ""
        assert {row.split("`")[1] for row in table.splitlines()} == accepted, name
