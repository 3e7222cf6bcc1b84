"""A spec means one thing: a key given twice, a parameter that is infinite, NaN or outside the range its field
declares, and a stratum too small for a method are refused with the key, field or stratum named (issue #29, item
4), by the spec and grid loaders, the registry's ``validate_params`` (``sdc mask --param``, the Python API, specs,
grids) and the input checks, the same rule for every method of the registry."""

from __future__ import annotations

import math
import re
import time
from pathlib import Path
from typing import get_args

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from typer.testing import CliRunner

from sdc_tasks import api
from sdc_tasks.cli import app
from sdc_tasks.comparison.run import GridError, load_grid
from sdc_tasks.errors import InputError, SpecError
from sdc_tasks.files import tree_checksums
from sdc_tasks.generate import bundled_path
from sdc_tasks.masking.rankswap import fewest_swapped_records, rank_swap_permutation
from sdc_tasks.masking.registry import METHODS, validate_params
from sdc_tasks.pipeline.spec import load_spec, parse_spec
from sdc_tasks.pipeline.stages import validate_input

DEMO = bundled_path("demo.yaml").read_text()


def written(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# ---- keys given twice ----


def test_a_spec_mapping_gate_twice_is_refused_with_the_key_and_lines(tmp_path):
    path = written(tmp_path, "spec.yaml", DEMO + "gate:\n  max: {DLD: 99.0}\n")
    first = 1 + DEMO.splitlines().index(next(line for line in DEMO.splitlines() if line.startswith("gate:")))
    last = len(DEMO.splitlines()) + 1
    with pytest.raises(SpecError) as err:
        load_spec(path)
    assert str(err.value) == (f"spec file {path} is not valid YAML: key 'gate' appears twice (lines {first} and "
                              f"{last}): give each key once")


def test_a_key_given_twice_deep_in_the_spec_is_refused(tmp_path):
    path = written(tmp_path, "spec.yaml", "steps:\n  - method: mdav\n    params: {k: 3, k: 5}\n")
    with pytest.raises(SpecError, match="key 'k' appears twice \\(lines 3 and 3\\)"):
        load_spec(path)


def test_a_grid_family_given_twice_is_refused(tmp_path):
    path = written(tmp_path, "grid.yaml", "families:\n  - label: Rank\n    method: rankswap\n    method: noise\n")
    with pytest.raises(GridError, match="key 'method' appears twice \\(lines 3 and 4\\)"):
        load_grid(path)


def test_bundled_specs_and_grids_have_no_key_twice():
    load_spec(bundled_path("demo.yaml"))
    for name in ("default_grid.yaml", "categorical_grid.yaml"):
        assert load_grid(bundled_path(name)).families


def test_sdc_compare_with_a_repeated_grid_key_exits_2_and_writes_nothing(tmp_path, census, no_cluster):
    census.iloc[:40].to_csv(tmp_path / "in.csv", index=False)
    grid = written(tmp_path, "grid.yaml", "seed: 1\nseed: 2\nfamilies:\n  - {label: Rank, method: rankswap, "
                                          "sweep: {param: p, values: [5]}}\n")
    before = tree_checksums(tmp_path)
    result = CliRunner().invoke(app, ["compare", "--input", str(tmp_path / "in.csv"), "--grid", str(grid),
                                      "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert "key 'seed' appears twice (lines 1 and 2)" in result.output
    assert tree_checksums(tmp_path) == before and sorted(p.name for p in tmp_path.iterdir()) == ["grid.yaml",
                                                                                                  "in.csv"]


# ---- values that overflow or make no sense ----


@pytest.mark.parametrize("method, params, message", [
    ("noise", {"p": float("inf")}, "parameter 'p' of noise: Input should be a finite number"),
    ("noise", {"p": float("nan")}, "parameter 'p' of noise: Input should be a finite number"),
    ("rankswap", {"p": "inf"}, "parameter 'p' of rankswap: Input should be a finite number"),
    ("postmask", {"p": 0.8, "q": 0.4, "target_e": float("inf")}, "parameter 'target_e' of postmask"),
    ("mdav", {"k": 2**63}, f"parameter 'k' of mdav = {2**63} is out of range: allowed >= 2, <= 10000"),
    ("resample", {"t": 10**40}, f"parameter 't' of resample = {10**40} is out of range: allowed >= 1, <= 10000"),
    ("mdav", {"k": 3, "block_size": 2**64}, f"parameter 'block_size' of mdav = {2**64} is out of range"),
    ("noise", {"p": 1e308}, "parameter 'p' of noise = 1e+308 is out of range: allowed > 0, <= 100"),
    ("mdav", {"k": 10**15}, "parameter 'k' of mdav = 1000000000000000 is out of range: allowed >= 2, <= 10000"),
    ("rankswap", {"p": 1e300}, "parameter 'p' of rankswap = 1e+300 is out of range: allowed > 0, <= 100"),
])
def test_validate_params_refuses_infinite_nan_and_overflowing_values(method, params, message):
    with pytest.raises(ValueError) as err:
        validate_params(method, params)
    assert message in str(err.value)


def numeric_ranges() -> list[tuple[str, str, type, dict]]:
    """(method, parameter, int or float, its declared bounds {"ge"|"gt": low, "le"|"lt": high}) of every numeric
    parameter of every registered method, read from the parameter models."""
    found = []
    for name, method in METHODS.items():
        for field, info in method.params.model_fields.items():
            kind = next((t for t in (int, float) if t in (info.annotation, *get_args(info.annotation))), None)
            if kind is not None:
                bounds = {attr: getattr(c, attr) for c in info.metadata for attr in ("ge", "gt", "le", "lt")
                          if getattr(c, attr, None) is not None}
                found.append((name, field, kind, bounds))
    return found


def just_beyond(kind: type, attr: str, bound) -> int | float:
    """The value next to ``bound`` on its wrong side: the bound itself for a strict one, else one step past it (a
    whole number, or the next float)."""
    if attr in ("gt", "lt"):
        return bound
    outward = -1 if attr == "ge" else 1
    return bound + outward if kind is int else math.nextafter(bound, outward * math.inf)


def test_every_numeric_parameter_declares_a_finite_range():
    ranges = numeric_ranges()
    assert len(ranges) >= 25 and ("noise", "p", float, {"gt": 0, "le": 100}) in ranges
    for method, field, _, bounds in ranges:
        assert len(bounds) == 2 and bounds.keys() & {"ge", "gt"} and bounds.keys() & {"le", "lt"}, (method, field)
        assert all(math.isfinite(b) and abs(b) < 2**63 for b in bounds.values()), (method, field)


def at_bound(method: str, field: str, bound) -> dict:
    """The method's example parameters with ``field`` at one of its bounds (a block size of 2k beside a k)."""
    params = {**METHODS[method].example, field: bound}
    if field == "k" and "block_size" in METHODS[method].params.model_fields:
        params["block_size"] = 2 * bound
    return params


@pytest.mark.parametrize("method, field, kind, bounds", numeric_ranges(), ids=str)
def test_a_parameter_just_beyond_its_range_is_refused_naming_it_and_the_range(method, field, kind, bounds):
    allowed = ", ".join(f"{symbol} {bounds[attr]}" for attr, symbol in (("ge", ">="), ("gt", ">"), ("le", "<="),
                                                                       ("lt", "<")) if attr in bounds)
    for attr, bound in bounds.items():
        value = just_beyond(kind, attr, bound)
        with pytest.raises(ValueError) as err:
            validate_params(method, {**METHODS[method].example, field: value})
        assert str(err.value).startswith(f"parameter '{field}' of {method} = {value} is out of range: allowed "
                                         f"{allowed}"), str(err.value)
        if attr == "le" or attr == "ge" and field != "block_size":  # the bound itself is inside (block_size >= 2k)
            assert validate_params(method, at_bound(method, field, bound))[field] == bound


def test_huge_finite_parameters_are_refused_by_the_cli_spec_and_python_api(tmp_path, census, no_cluster):
    census.iloc[:40].to_csv(tmp_path / "in.csv", index=False)
    result = CliRunner().invoke(app, ["mask", "--input", str(tmp_path / "in.csv"), "--method", "noise", "--param",
                                      "p=1e308", "--out", str(tmp_path / "out.csv")])
    assert result.exit_code == 2
    assert result.output == "error: parameter 'p' of noise = 1e+308 is out of range: allowed > 0, <= 100\n"
    spec = yaml.safe_load(DEMO)
    text = yaml.safe_dump({**spec, "steps": [{"method": "rankswap", "params": {"p": 1e300}}]})
    with pytest.raises(SpecError, match=r"spec field 'steps.0'.*parameter 'p' of rankswap = 1e\+300 is out of "
                                        r"range: allowed > 0, <= 100"):
        load_spec(written(tmp_path, "spec.yaml", text))
    with pytest.raises(ValueError, match=r"^parameter 'k' of mdav = 1000000000000000 is out of range"):
        api.mask(census.iloc[:40], "mdav", k=10**15)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv", "spec.yaml"]


@pytest.mark.parametrize("step, field", [
    ("{method: noise, params: {p: .inf}}", "parameter 'p' of noise: Input should be a finite number"),
    ("{method: noise, params: {p: .nan}}", "parameter 'p' of noise: Input should be a finite number"),
    ("{method: mdav, params: {k: 99999999999999999999999}}", "parameter 'k' of mdav = 99999999999999999999999 is "
     "out of range"),
])
def test_a_spec_step_with_infinite_nan_or_huge_parameters_is_refused(tmp_path, step, field):
    spec = yaml.safe_load(DEMO)
    text = yaml.safe_dump({**spec, "steps": "STEP"}).replace("STEP", f"[{step}]")
    with pytest.raises(SpecError) as err:
        load_spec(written(tmp_path, "spec.yaml", text))
    assert "spec field 'steps.0'" in str(err.value) and field in str(err.value)


def test_a_gate_limit_that_is_nan_is_refused(tmp_path):
    spec = yaml.safe_load(DEMO)
    text = yaml.safe_dump({**spec, "gate": {"max": {"DLD": "NAN"}}}).replace("'NAN'", ".nan")
    with pytest.raises(SpecError) as err:
        load_spec(written(tmp_path, "spec.yaml", text))
    assert "spec field 'gate.max.DLD'" in str(err.value) and "finite number" in str(err.value)


def test_a_grid_sweep_value_that_is_infinite_is_refused(tmp_path):
    path = written(tmp_path, "grid.yaml", "families:\n  - {label: Noise, method: noise, "
                                          "sweep: {param: p, values: [0.1, .inf]}}\n")
    with pytest.raises(GridError, match="parameter 'p' of noise: Input should be a finite number"):
        load_grid(path)


def test_the_python_api_refuses_an_infinite_parameter_before_reading(census, tmp_path):
    with pytest.raises(ValueError, match="parameter 'p' of noise: Input should be a finite number"):
        api.mask(census.iloc[:40], "noise", p=float("inf"))


# ---- a stratum too small: the same rule for every method of the registry ----


def with_small_stratum(census, small: int) -> pd.DataFrame:
    """50 Census records: 'north' holds all but the last ``small``, which are 'south'; a text column 'grade'."""
    df = census.iloc[:50].reset_index(drop=True).copy()
    df["region"] = ["north"] * (50 - small) + ["south"] * small
    df["grade"] = [f"g{i % 4}" for i in range(50)]
    return df


def call_for(name: str, df: pd.DataFrame) -> dict:
    """Arguments of api.mask that let the registry method ``name`` run on ``df`` (``with_small_stratum``)."""
    method = METHODS[name]
    args = {"vars": ["AGI", "FICA"], **method.example}
    if method.kind == "categorical":
        args["vars"] = ["grade"]
    if "rules" in method.example:  # per-variable rules (recode, top_bottom_coding) written for these variables
        args["rules"] = {v: {"prefix": 1} if method.kind == "categorical" else {"top": float(df[v].min())}
                         for v in args["vars"]}
    if method.ordinal:
        args["ordinal"] = {"grade": ["g0", "g1", "g2", "g3"]}
    if method.after_masking:
        args["original"] = df
    return args


def fewest(name: str) -> int:
    """The fewest records a stratum may hold for the method's example parameters, computed apart from the code
    under test: k for a method with a group size; for rank swapping the least n with floor(n p / 100) >= 1 (the
    survey: ranks of swapped values differ by at most p percent of the records), found by counting up; else 2."""
    params = METHODS[name].example
    if "k" in params:
        return params["k"]
    if name == "rankswap":
        return next(n for n in range(2, 10_000) if math.floor(n * params["p"] / 100) >= 1)
    return 2


@pytest.mark.parametrize("name", sorted(METHODS))
def test_every_method_refuses_a_stratum_too_small_the_same_way(census, sync_dask, name):
    """What MDAV refuses (a stratum under k), no method publishes: a stratum it could not change (no group, no
    partner within p percent of its ranks, no spread, no frequency to recode) is refused before any masking, in
    the same words for every method, naming the strata variable, the row holding the stratum and its size, never
    its label (a value of the data)."""
    least = fewest(name)
    df = with_small_stratum(census, least - 1)
    with pytest.raises(InputError) as err:
        api.mask(df, name, strata="region", **call_for(name, df))
    first = 50 - (least - 1)
    size = f"{least - 1} record{'s' if least - 1 > 1 else ''}"
    assert re.fullmatch(rf"(parameter '[kp]' of {name} = \S+|{name}) needs at least {least} records per stratum "
                        rf"but the stratum of 'region' holding row {first} has {size} \(1 of the 2 strata have "
                        rf"fewer than {least}\)", str(err.value)), str(err.value)
    assert "south" not in str(err.value) and "north" not in str(err.value)


@pytest.mark.parametrize("name", [n for n in sorted(METHODS) if METHODS[n].kind == "continuous"])
def test_a_stratum_of_exactly_the_fewest_records_is_masked(census, sync_dask, name):
    least = fewest(name)
    df = with_small_stratum(census, least)
    out = api.mask(df, name, strata="region", **call_for(name, df))
    south = df.index[df["region"] == "south"]
    assert not out.loc[south, ["AGI", "FICA"]].equals(df.loc[south, ["AGI", "FICA"]])


@pytest.mark.parametrize("p", [0.5, 1, 7, 10, 15, 33.3, 50, 100])
def test_rank_swapping_moves_nothing_in_a_scope_under_its_fewest_records(p):
    """The kernel's own behaviour behind the rule: under ``fewest_swapped_records(p)`` records every value stays
    in place (the scope would be published unchanged), at it values move."""
    least = fewest_swapped_records(p)
    rng = np.random.default_rng(0)
    assert math.floor(least * p / 100) >= 1 and (least == 2 or math.floor((least - 1) * p / 100) == 0)
    for _ in range(20):
        assert (rank_swap_permutation(least - 1, p, rng.random(least - 1)) == np.arange(least - 1)).all()
    assert any((rank_swap_permutation(least, p, rng.random(least)) != np.arange(least)).any() for _ in range(20))


def test_a_release_step_refuses_a_stratum_too_small_for_rank_swapping(tmp_path, census, sync_dask):
    """A release: five records in a stratum, rank swapping with p = 10 (which would swap none of them)."""
    df = with_small_stratum(census, 5)
    df.to_csv(tmp_path / "in.csv", index=False)
    spec = yaml.safe_load(DEMO)
    spec.update(input={"path": str(tmp_path / "in.csv")}, create_id=False, output={"dir": str(tmp_path / "out")},
                steps=[{"method": "rankswap", "params": {"p": 10}}])
    spec["variables"].update(strata="region", pass_through=["grade"])
    with pytest.raises(InputError) as err:
        validate_input(parse_spec(spec, tmp_path), tmp_path / "checkpoint")
    assert str(err.value) == ("steps.0.params.p = 10 needs at least 10 records per stratum but the stratum of "
                              "'region' holding row 45 has 5 records (1 of the 2 strata have fewer than 10)")


# ---- files as a data engineer expects (issue #29, item 5) ----


def test_many_small_files_mask_in_bounded_time_as_one_file(tmp_path):
    """2,000 CSV files of 5 records: each pass over a partition per file opened every file again (measured on the
    2-core development machine: 290 s to mask with mdav, 180 s for the same as Parquet files; 15 s and 14 s with
    the files' partitions merged and read once; the same records as one CSV file: 3.5 s)."""
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({"a": rng.normal(size=10_000), "b": rng.normal(size=10_000)})
    many = tmp_path / "many"
    many.mkdir()
    for i in range(2000):
        frame.iloc[5 * i: 5 * i + 5].to_csv(many / f"part-{i:05d}.csv", index=False)
    frame.to_csv(tmp_path / "one.csv", index=False)
    start = time.perf_counter()
    api.mask(many, "mdav", k=3, out=tmp_path / "many.parquet")
    seconds = time.perf_counter() - start
    api.mask(tmp_path / "one.csv", "mdav", k=3, out=tmp_path / "one.parquet")
    assert seconds < 60
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "many.parquet"), pd.read_parquet(tmp_path / "one.parquet"))


@pytest.mark.parametrize("method, params", [("global_recoding", {"p": 2}), ("pram", {"theta": 0.5})])
def test_a_dictionary_encoded_column_masks_like_the_plain_one(tmp_path, census, sync_dask, method, params):
    """A Parquet column of dictionary-encoded text (pyarrow's dictionary type, as Spark or pandas categoricals
    write it) is read decoded: masked as a categorical variable and passed through as text, with the values the
    same column written plainly gives."""
    df = census.iloc[:60].reset_index(drop=True)[["record_id", "AGI"]]
    df["grade"] = [f"g{i % 5}" for i in range(60)]
    df["town"] = [f"t{i % 3}" for i in range(60)]
    plain = pa.Table.from_pandas(df, preserve_index=False)
    encoded = plain.set_column(2, "grade", plain.column("grade").dictionary_encode()) \
        .set_column(3, "town", plain.column("town").dictionary_encode())
    assert pa.types.is_dictionary(encoded.schema.field("grade").type)
    out = {}
    for name, table in (("plain", plain), ("encoded", encoded)):
        pq.write_table(table, tmp_path / f"{name}.parquet")
        out[name] = api.mask(tmp_path / f"{name}.parquet", method, vars=["grade"], out=tmp_path / f"{name}-out",
                             **params)
    pd.testing.assert_frame_equal(pd.read_parquet(out["encoded"]), pd.read_parquet(out["plain"]))


def test_a_release_input_with_a_corrupt_page_names_the_file(tmp_path, census, sync_dask):
    """The release reads its input once, into its checkpoint: a page that cannot be decoded names its file."""
    dataset = tmp_path / "input"
    dataset.mkdir()
    df = census.iloc[:60].reset_index(drop=True)
    for i in range(3):
        df.iloc[20 * i: 20 * i + 20].to_parquet(dataset / f"part-{i}.parquet", index=False)
    corrupt = bytearray((dataset / "part-2.parquet").read_bytes())
    corrupt[4:30] = b"\xff" * 26
    (dataset / "part-2.parquet").write_bytes(bytes(corrupt))
    spec = yaml.safe_load(DEMO)
    spec.update(input={"path": str(dataset)}, create_id=False, output={"dir": str(tmp_path / "release")})
    with pytest.raises(InputError) as err:
        validate_input(parse_spec(spec, tmp_path), tmp_path / "checkpoint")
    assert f"its Parquet file {dataset / 'part-2.parquet'} has a page that cannot be decoded" in str(err.value)


def test_text_in_one_of_many_small_files_names_the_column_and_row(tmp_path):
    """Reading many small files at once does not hide what the input checks say of a bad row."""
    many = tmp_path / "many"
    many.mkdir()
    for i in range(150):
        b = ["x", "y", "z"] if i == 120 else [1.5, 2.5, 3.5]
        pd.DataFrame({"a": [1, 2, 3], "b": b}).to_csv(many / f"part-{i:04d}.csv", index=False)
    with pytest.raises(InputError) as err:
        api.mask(many, "mdav", k=3, out=tmp_path / "out.parquet")
    assert str(err.value) == (f"column 'b' of input {many} must be numeric but row 360 holds text that is not a "
                              "number (3 rows in all)")
    assert not (tmp_path / "out.parquet").exists()
