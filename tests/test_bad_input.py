"""Bad input: every error names the column, row or parameter at fault, leaves no output behind and never
changes the input. Cases run through ``sdc mask`` / ``sdc evaluate`` (on a synchronous Dask scheduler, so no
cluster starts), the spec loader, ``validate_input`` and two ``sdc release`` runs."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from sdc_tasks.cli import app
from sdc_tasks.errors import InputError, SpecError
from sdc_tasks.files import tree_checksums
from sdc_tasks.generate import bundled_path
from sdc_tasks.outputs import MARKER
from sdc_tasks.pipeline.spec import load_spec, parse_spec
from sdc_tasks.pipeline.stages import validate_input

runner = CliRunner()
ROWS = 40


@pytest.fixture
def small(census) -> pd.DataFrame:
    """The first 40 Census records with their record_id."""
    return census.iloc[:ROWS].reset_index(drop=True).copy()


def write_csv(path: Path, df: pd.DataFrame) -> Path:
    df.to_csv(path, index=False)
    return path


def invoke(*args) -> tuple[int, str]:
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result.exit_code, result.output


class Workspace:
    """A directory of inputs whose checksums are taken before the command and compared after it."""

    def __init__(self, root: Path):
        self.root = root
        self.before: dict[str, str] = {}

    def freeze(self) -> None:
        self.before = tree_checksums(self.root)

    def assert_untouched(self) -> None:
        """Inputs byte-identical, nothing added (no output, no hidden temporary file or directory)."""
        assert tree_checksums(self.root) == self.before
        assert sorted(p.name for p in self.root.iterdir()) == sorted({k.split("/")[0] for k in self.before})


@pytest.fixture
def ws(tmp_path) -> Workspace:
    root = tmp_path / "ws"
    root.mkdir()
    return Workspace(root)


def fails(ws: Workspace, *args, code: int = 2) -> str:
    """Run the command and return its message, after checking the exit code and that nothing was written."""
    ws.freeze()
    exit_code, output = invoke(*args)
    assert exit_code == code, output
    ws.assert_untouched()
    return output


def mask_fails(ws: Workspace, source: Path, *args, out: str = "out") -> str:
    return fails(ws, "mask", "--input", source, "--out", ws.root / out, *args)


# ---- reading the file ----


def test_missing_input_file(ws, no_cluster):
    msg = mask_fails(ws, ws.root / "absent.csv", "--method", "mdav", "--param", "k=3")
    assert "input not found" in msg and "absent.csv" in msg


def test_unknown_file_format(ws, no_cluster):
    path = ws.root / "data.json"
    path.write_text('{"a": 1}')
    msg = mask_fails(ws, path, "--method", "mdav", "--param", "k=3")
    assert "cannot tell the format" in msg and "data.json" in msg


def test_text_file_that_is_no_table(ws, no_cluster):
    path = ws.root / "notes.txt"
    path.write_text("hello\nworld\n")
    msg = mask_fails(ws, path, "--method", "mdav", "--param", "k=3")
    assert "notes.txt has no numeric column" in msg and "hello" in msg


def test_corrupt_parquet(ws, no_cluster):
    path = ws.root / "broken.parquet"
    path.write_bytes(b"PAR1 this is not a parquet file")
    msg = mask_fails(ws, path, "--method", "mdav", "--param", "k=3")
    assert "cannot read" in msg and "broken.parquet as parquet" in msg and "\n" not in msg.strip()


def test_header_only_file_has_no_records(ws, small, no_cluster):
    path = write_csv(ws.root / "empty.csv", small.iloc[:0])
    msg = mask_fails(ws, path, "--method", "mdav", "--param", "k=3")
    assert "empty.csv has no records" in msg


# ---- values ----


def test_duplicate_ids_name_the_id_and_rows(ws, small, no_cluster):
    small.loc[5, "record_id"] = 7
    msg = mask_fails(ws, write_csv(ws.root / "dup.csv", small), "--method", "mdav", "--param", "k=3")
    assert "'record_id'" in msg and "not unique" in msg and "record_id = 7 in rows 5 and 7" in msg


@pytest.mark.parametrize("row", [3, 25])  # early and late in the file
def test_text_in_a_variable_names_column_and_row(ws, small, no_cluster, row):
    small = small.astype({"AGI": object})
    small.loc[row, "AGI"] = "12,5OO"
    msg = mask_fails(ws, write_csv(ws.root / "text.csv", small), "--method", "mdav", "--param", "k=3",
                     "--vars", "AGI,FEDTAX")
    assert "column 'AGI'" in msg and f"row {row} holds text" in msg


def test_text_in_a_parquet_string_column(ws, small, no_cluster):
    small = small.astype({"FICA": str})
    small.loc[11, "FICA"] = "unknown"
    path = ws.root / "text.parquet"
    small.to_parquet(path, index=False)
    msg = mask_fails(ws, path, "--method", "rankswap", "--param", "p=10", "--vars", "FICA,AGI")
    assert "column 'FICA'" in msg and "row 11 holds text" in msg


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_missing_and_infinite_values_name_column_row_and_id(ws, small, no_cluster, value):
    small = small.astype({"TAXINC": float})
    small.loc[14, "TAXINC"] = value
    small["record_id"] += 1000
    msg = mask_fails(ws, write_csv(ws.root / "gap.csv", small), "--method", "mdav", "--param", "k=3")
    assert "variable 'TAXINC'" in msg and "missing or infinite in row 14 (record_id = 1014" in msg


def test_empty_cell_late_in_an_integer_column(ws, small, no_cluster):
    path = write_csv(ws.root / "gap.csv", small)
    lines = path.read_text().splitlines()
    cells = lines[1 + 30].split(",")
    cells[small.columns.get_loc("STATETAX")] = ""
    lines[1 + 30] = ",".join(cells)
    path.write_text("\n".join(lines) + "\n")
    msg = mask_fails(ws, path, "--method", "mdav", "--param", "k=3")
    assert "variable 'STATETAX'" in msg and "missing or infinite in row 30" in msg


# ---- parameters ----


@pytest.mark.parametrize("args, message", [
    (["--method", "mdav", "--param", "k=1"], "parameter 'k' of mdav = 1 is out of range: allowed >= 2, <= 10000"),
    (["--method", "mic_ir", "--param", "k=0"], "parameter 'k' of mic_ir"),
    (["--method", "rankswap", "--param", "p=0"], "parameter 'p' of rankswap = 0 is out of range: allowed > 0, <= 100"),
    (["--method", "rankswap", "--param", "p=100.5"], "parameter 'p' of rankswap = 100.5 is out of range"),
    (["--method", "mdav", "--param", "k=3", "--param", "block_size=0"], "parameter 'block_size' of mdav"),
    (["--method", "mdav", "--param", "k=3", "--param", "block_size=-5"], "parameter 'block_size' of mdav"),
    (["--method", "mdav", "--param", "k=3", "--param", "block_size=4"], "'block_size' of mdav must be at least 2k = 6"),
    (["--method", "mdav", "--param", "k=3", "--param", "size=4"], "parameter 'size' of mdav: Extra inputs"),
    (["--method", "mdav", "--param", "k"], "--param 'k' must look like name=value"),
    (["--method", "shuffle"], "unknown method 'shuffle'; known:"),
    (["--method", "jpeg", "--param", "q=101"], "parameter 'q' of jpeg"),
    (["--method", "noise", "--param", "p=inf"], "parameter 'p' of noise: Input should be a finite number"),
    (["--method", "noise", "--param", "p=nan"], "parameter 'p' of noise: Input should be a finite number"),
    (["--method", "noise", "--param", "p=1e400"], "parameter 'p' of noise: Input should be a finite number"),
    (["--method", "mdav", "--param", f"k={10**30}"], f"parameter 'k' of mdav = {10**30} is out of range"),
])
def test_bad_method_parameters_name_the_parameter(ws, small, no_cluster, args, message):
    msg = mask_fails(ws, write_csv(ws.root / "in.csv", small), *args)
    assert message in msg


def test_fewer_records_than_k(ws, small, no_cluster):
    msg = mask_fails(ws, write_csv(ws.root / "few.csv", small.iloc[:4]), "--method", "mdav", "--param", "k=5")
    assert "parameter 'k' of mdav = 5 needs at least 5 records but input " in msg and msg.strip().endswith(" has 4")


def test_variable_not_in_file(ws, small, no_cluster):
    msg = mask_fails(ws, write_csv(ws.root / "in.csv", small), "--method", "mdav", "--param", "k=3",
                     "--vars", "AGI,WEALTH")
    assert "has no column 'WEALTH'" in msg


def test_strata_column_not_in_file(ws, small, no_cluster):
    msg = mask_fails(ws, write_csv(ws.root / "in.csv", small), "--method", "rankswap", "--param", "p=10",
                     "--strata", "region")
    assert "has no column 'region'" in msg


def test_stratum_with_fewer_than_k_records(ws, small, no_cluster):
    small["region"] = ["north"] * (ROWS - 2) + ["south"] * 2
    msg = mask_fails(ws, write_csv(ws.root / "in.csv", small), "--method", "mic_ir", "--param", "k=3",
                     "--strata", "region")
    assert ("parameter 'k' of mic_ir = 3 needs at least 3 records per stratum but the stratum of 'region' holding "
            "row 38 has 2 records (1 of the 2 strata have fewer than 3)") in msg and "south" not in msg


def test_stratum_without_a_value(ws, small, no_cluster):
    small["region"] = ["north"] * 20 + [None] + ["south"] * (ROWS - 21)
    msg = mask_fails(ws, write_csv(ws.root / "in.csv", small), "--method", "rankswap", "--param", "p=10",
                     "--strata", "region")
    assert "strata column 'region'" in msg and "no value in row 20" in msg


def test_stratum_of_one_record_is_refused_for_rank_swapping(ws, small, no_cluster):
    small["region"] = ["north"] * (ROWS - 1) + ["south"]
    msg = mask_fails(ws, write_csv(ws.root / "in.csv", small), "--method", "rankswap", "--param", "p=10",
                     "--strata", "region")
    assert ("parameter 'p' of rankswap = 10 needs at least 10 records per stratum but the stratum of 'region' "
            "holding row 39 has 1 record (1 of the 2 strata have fewer than 10)") in msg and "south" not in msg


@pytest.mark.parametrize("column, cells", [
    ("AGI", {7: "1e400"}),                                            # overflows a float: read as text
    ("FLAG", {i: ("True" if i % 2 else "False") for i in range(ROWS - 1)}),  # booleans with a gap: text
    ("FLAG", {i: bool(i % 2) for i in range(ROWS)}),                   # booleans throughout: bool type
])
def test_default_variables_refuse_a_mostly_numeric_column_left_out(ws, small, no_cluster, column, cells):
    small[column] = small[column].astype(object) if column in small else None
    for row, cell in cells.items():
        small.loc[row, column] = cell
    msg = mask_fails(ws, write_csv(ws.root / "in.csv", small), "--method", "mdav", "--param", "k=3")
    assert f"column {column!r} of input" in msg and "left out of the default variables" in msg
    assert "name the variables with --vars" in msg and "1e400" not in msg


def test_a_text_column_empty_in_the_first_file_of_a_directory_is_one_type_change_error(ws, small, no_cluster):
    (ws.root / "in").mkdir()
    small["name"] = [f"person {i}" for i in range(ROWS)]  # a text column: the default variables look into it
    first, second = small.iloc[:20].assign(note=None), small.iloc[20:].assign(note="seen")
    write_csv(ws.root / "in" / "part-0.csv", first)
    write_csv(ws.root / "in" / "part-1.csv", second)
    msg = mask_fails(ws, ws.root / "in", "--method", "mdav", "--param", "k=3")
    assert msg.strip() == f"error: input {ws.root / 'in'}: a column changes type after its first rows (e.g. whole " \
                          "numbers, then decimals); write it with one type throughout"


def test_default_variables_pass_text_through_and_say_so(ws, small, no_cluster):
    small["name"] = [f"person {i}" for i in range(ROWS)]
    out = ws.root / "out.csv"
    code, output = invoke("mask", "--input", write_csv(ws.root / "in.csv", small), "--method", "mdav",
                          "--param", "k=3", "--out", out)
    assert code == 0, output
    assert f"columns: masked {', '.join(small.columns[1:-1])}; passed_through name; id record_id" in output
    assert pd.read_csv(out)["name"].tolist() == small["name"].tolist()


@pytest.mark.parametrize("args, message", [
    (["--method", "mdav", "--param", "k=3", "--vars", "AGI,record_id"],
     "--vars names the id column 'record_id' (--id-col): ids are not masked"),
    (["--method", "rankswap", "--param", "p=10", "--vars", "AGI,FICA", "--strata", "FICA"],
     "--strata 'FICA' is also named in --vars: the strata column is not masked"),
])
def test_vars_naming_the_id_or_strata_column_is_refused(ws, small, no_cluster, args, message):
    assert message in mask_fails(ws, write_csv(ws.root / "in.csv", small), *args)


def test_mask_output_that_exists_is_left_alone(ws, small, no_cluster):
    source = write_csv(ws.root / "in.csv", small)
    (ws.root / "out").mkdir()
    (ws.root / "out" / "keep.txt").write_text("earlier release")
    msg = mask_fails(ws, source, "--method", "mdav", "--param", "k=3")
    assert "already exists" in msg
    csv_out = write_csv(ws.root / "out.csv", small.iloc[:3])
    msg = mask_fails(ws, source, "--method", "mdav", "--param", "k=3", out=csv_out.name)
    assert "already exists" in msg


# ---- evaluate: two files that must match ----


@pytest.fixture
def pair(ws, small) -> tuple[Path, pd.DataFrame]:
    """The original file in the workspace and its frame (to derive masked files from)."""
    return write_csv(ws.root / "original.csv", small), small


def evaluate_fails(ws, original, masked, *args) -> str:
    return fails(ws, "evaluate", "--original", original, "--masked", masked, "--out", ws.root / "metrics.json", *args)


def test_masked_file_missing_a_column(ws, pair, no_cluster):
    original, df = pair
    masked = write_csv(ws.root / "masked.csv", df.drop(columns=["AGI"]))
    msg = evaluate_fails(ws, original, masked)
    assert "masked file" in msg and "has no column 'AGI'" in msg


def test_masked_column_of_another_type(ws, pair, no_cluster):
    original, df = pair
    df = df.astype({"PTOTVAL": str})
    df["PTOTVAL"] = "$" + df["PTOTVAL"]
    masked = write_csv(ws.root / "masked.csv", df)
    msg = evaluate_fails(ws, original, masked)
    assert "column 'PTOTVAL' of masked file" in msg and "row 0 holds text" in msg


def test_missing_value_in_the_masked_file(ws, pair, no_cluster):
    original, df = pair
    df = df.astype({"FICA": float})
    df.loc[9, "FICA"] = np.nan
    msg = evaluate_fails(ws, original, write_csv(ws.root / "masked.csv", df))
    assert "variable 'FICA' of masked file" in msg and "row 9" in msg


def test_duplicate_ids_in_the_masked_file(ws, pair, no_cluster):
    original, df = pair
    df.loc[12, "record_id"] = 3
    msg = evaluate_fails(ws, original, write_csv(ws.root / "masked.csv", df))
    assert "of masked file" in msg and "record_id = 3 in rows 3 and 12" in msg


def test_empty_masked_file(ws, pair, no_cluster):
    original, df = pair
    msg = evaluate_fails(ws, original, write_csv(ws.root / "masked.csv", df.iloc[:0]))
    assert "masked file" in msg and "has no records" in msg


@pytest.mark.parametrize("row, weight", [(0, 0.0), (27, -3.5)])
def test_weight_at_or_below_zero_names_the_column_and_row(ws, pair, no_cluster, row, weight):
    original, df = pair
    df = df.assign(w=10.0)
    df.loc[row, "w"] = weight
    masked = write_csv(ws.root / "masked.csv", df)
    msg = evaluate_fails(ws, original, masked, "--weight", "w")
    assert f"weight column 'w' of masked file {masked} must hold sampling weights above zero but row {row}" in msg
    assert str(weight) not in msg


@pytest.mark.parametrize("args, message", [
    (["--families", "il,privacy"], "unknown metric family 'privacy'"),
    (["--pairing", "closest"], "pairing must be auto, id, nearest or paper, not 'closest'"),
    (["--key-vars", "AGI,INCOME"], "original file"),
    (["--vars", "AGI,INCOME"], "has no column 'INCOME'"),
])
def test_bad_evaluate_options(ws, pair, no_cluster, args, message):
    original, _ = pair
    msg = evaluate_fails(ws, original, original, *args)
    assert message in msg


# ---- constant columns are accepted and never give NaN ----


def test_constant_column_is_masked_and_evaluated_without_nan(tmp_path, small, no_cluster):
    small["AGI"] = 5000
    source = write_csv(tmp_path / "const.csv", small)
    for method, params in (("mdav", ["k=3"]), ("rankswap", ["p=10"]), ("mic_optimal", ["k=3"])):
        out = tmp_path / f"{method}.csv"
        code, output = invoke("mask", "--input", source, "--method", method,
                              *[a for p in params for a in ("--param", p)], "--out", out)
        assert code == 0, output
        assert (pd.read_csv(out)["AGI"] == 5000).all()
    result = runner.invoke(app, ["evaluate", "--original", str(source), "--masked", str(tmp_path / "mdav.csv")])
    assert result.exit_code == 0, result.output
    metrics = json.loads(result.stdout)
    assert all(math.isfinite(v) for v in metrics.values() if isinstance(v, float))
    # the constant variable's relative terms (denominator s = 0 or mean = 0 of its variance) are left out
    assert metrics["IL5_undefined_terms"] > 0 and metrics["MSE_R_undefined_terms"] > 0


# ---- the release spec ----


def demo_spec(**changes) -> dict:
    spec = yaml.safe_load(bundled_path("demo.yaml").read_text())
    spec.update(changes)
    return spec


@pytest.mark.parametrize("changes, field, message", [
    ({"metrics": ["il", "utility"]}, "metrics.1",
     "Input should be 'il', 'pil', 'dld', 'pld', 'id', 'dld_published', 'pld_published', 'cat_il', 'cat_risk', "
     "'ldiversity' or 'suda'"),
    ({"gate": {"max": {"RISK": 1.0}}}, "(spec)", "gate.max.RISK: unknown measure"),
    ({"metrics": ["il"], "gate": {"max": {"DLD": 40.0}}}, "(spec)", "needs metric family 'dld'"),
    ({"steps": [{"method": "mdav", "params": {"k": 3, "block_size": -1}}]}, "steps.0", "parameter 'block_size'"),
    ({"steps": [{"method": "mdav", "params": {"k": 1}}]}, "steps.0", "parameter 'k' of mdav"),
    ({"steps": [{"method": "rankswap", "params": {"p": 150}}]}, "steps.0", "parameter 'p' of rankswap"),
    ({"steps": [{"method": "swap"}]}, "steps.0.method", "unknown method 'swap'"),
    ({"steps": [{"method": "mdav", "params": {"k": 2}}]}, "(spec)", "below gate.min_group_size = 3"),
    ({"steps": []}, "steps", "at least 1 item"),
    ({"seed": -4}, "seed", "greater than or equal to 0"),
    ({"extra": 1}, "extra", "Extra inputs are not permitted"),
])
def test_spec_errors_name_the_field(changes, field, message):
    with pytest.raises(SpecError) as err:
        parse_spec(demo_spec(**changes))
    assert f"spec field '{field}'" in str(err.value) and message in str(err.value)


@pytest.mark.parametrize("text, message", [
    ("- a\n- b\n", "must hold a YAML mapping"),
    ("name: [unclosed\n", "is not valid YAML"),
])
def test_spec_file_that_is_not_a_mapping(tmp_path, text, message):
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    with pytest.raises(SpecError, match=message):
        load_spec(path)
    with pytest.raises(SpecError, match="spec file not found"):
        load_spec(tmp_path / "absent.yaml")


# ---- release input checks (validate_input, on the synchronous scheduler) ----


def release_spec(tmp_path: Path, df: pd.DataFrame, **changes):
    path = write_csv(tmp_path / "input.csv", df)
    spec = demo_spec(input={"path": str(path)}, create_id=False, output={"dir": str(tmp_path / "release")},
                     **changes)
    return parse_spec(spec, tmp_path), path


@pytest.mark.parametrize("change, message", [
    (lambda d, s: s["variables"].update(key=["AGI", "NETWORTH"], continuous=["AGI", "NETWORTH"],
                                        pass_through=[c for c in d.columns[1:] if c != "AGI"]),
     "has no column 'NETWORTH'"),
    (lambda d, s: s["variables"].update(strata="county"), "has no column 'county'"),
    (lambda d, s: s["variables"].update(direct_identifiers=["name"]), "has no column 'name'"),
    (lambda d, s: s.update(create_id=True), "cannot create id column 'record_id'"),
    (lambda d, s: s["steps"][0]["params"].update(k=41, block_size=100),
     "steps.0.params.k = 41 needs at least 41 records but input"),
    (lambda d, s: (d.__setitem__("region", ["a"] * 36 + ["b"] * 4), s["variables"].update(strata="region")),
     "steps.0.params.k = 7 needs at least 7 records per stratum but the stratum of 'region' holding row 36 has 4 "
     "records"),
    (lambda d, s: d.__setitem__("record_id", [0] * ROWS), "39 repeated ids (e.g. record_id = 0 in rows 0 and 1)"),
    (lambda d, s: d.__setitem__("name", ["x"] * ROWS), "column 'name' has no role in the spec: list each under "
     "variables (continuous or categorical to mask it, pass_through to publish it unchanged, drop or "
     "direct_identifiers to leave it out)"),
    (lambda d, s: (d.__setitem__("name", ["x"] * ROWS), d.__setitem__("note", ["y"] * ROWS)),
     "columns 'name', 'note' have no role in the spec"),
    (lambda d, s: s["variables"].update(pass_through=["region"]), "has no column 'region'"),
    (lambda d, s: s["variables"].update(drop=["note"]), "has no column 'note'"),
    (lambda d, s: (d.__setitem__("region", ["a"] * 39 + ["b"]), s["variables"].update(strata="region"),
                   s.update(steps=[{"method": "rankswap", "params": {"p": 10}}])),
     "steps.0.params.p = 10 needs at least 10 records per stratum but the stratum of 'region' holding row 39 has 1 "
     "record"),
    (lambda d, s: (d.__setitem__("w", [5.0] * 30 + [-1.0] + [5.0] * 9), s["variables"].update(weight="w")),
     "weight column 'w' of input"),
    (lambda d, s: (d.__setitem__("w", [0.0] + [5.0] * 39), s["variables"].update(weight="w")),
     "must hold sampling weights above zero but row 0 does not (1 rows in all)"),
])
def test_release_input_errors(tmp_path, tmp_path_factory, small, sync_dask, change, message):
    spec = demo_spec(input={"path": str(tmp_path / "input.csv")}, create_id=False,
                     output={"dir": str(tmp_path / "release")})
    change(small, spec)
    write_csv(tmp_path / "input.csv", small)
    before = tree_checksums(tmp_path)
    with pytest.raises(InputError) as err:
        validate_input(parse_spec(spec, tmp_path), tmp_path_factory.mktemp("checkpoint"))
    assert message in str(err.value)
    assert tree_checksums(tmp_path) == before


def test_release_input_facts_name_constant_variables(tmp_path, small, sync_dask):
    small["FICA"] = 0
    spec, _ = release_spec(tmp_path, small)
    facts = validate_input(spec, tmp_path / "checkpoint")
    assert facts["n_records"] == ROWS and facts["constant_variables"] == ["FICA"]


# ---- two whole releases through the command line ----


def test_release_refuses_existing_output_and_bad_values(tmp_path, small, prefect_harness):
    out = tmp_path / "release"
    out.mkdir()
    (out / "metrics.json").write_text("{}")
    (out / MARKER).write_text('{"written_by": "sdc-pipeline"}')  # a release of this tool, replaceable
    small = small.astype({"INTVAL": float})
    small.loc[33, "INTVAL"] = np.nan
    spec = demo_spec(input={"path": "input.csv"}, create_id=False, output={"dir": "release", "overwrite": False},
                     dask={"workers": 1})
    write_csv(tmp_path / "input.csv", small)
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    before = tree_checksums(tmp_path)
    code, output = invoke("release", tmp_path / "spec.yaml")
    assert code == 2 and "already exists" in output
    assert tree_checksums(tmp_path) == before
    code, output = invoke("release", tmp_path / "spec.yaml", "--overwrite")
    assert code == 2 and "variable 'INTVAL'" in output and "row 33 (record_id = 33" in output
    assert tree_checksums(tmp_path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["input.csv", "release", "spec.yaml"]


# ---- the files themselves: caught before Dask reads them ----


def write_parquet_table(path: Path, table) -> Path:
    import pyarrow.parquet as pq

    pq.write_table(table, path)
    return path


@pytest.mark.parametrize("inside", [False, True])
def test_fifo_input_is_refused_not_read(ws, small, no_cluster, inside):
    dataset = ws.root / "dataset"
    dataset.mkdir()
    write_csv(dataset / "a.csv", small)
    fifo = dataset / "pipe.csv"
    os.mkfifo(fifo)
    msg = mask_fails(ws, dataset if inside else fifo, "--method", "mdav", "--param", "k=3")
    assert f"input {fifo} is not a regular file" in msg


def test_parquet_files_of_one_dataset_with_different_columns(ws, small, no_cluster):
    dataset = ws.root / "dataset"
    dataset.mkdir()
    small.iloc[:20].to_parquet(dataset / "a.parquet", index=False)
    small.iloc[20:].drop(columns=["AGI"]).to_parquet(dataset / "b.parquet", index=False)
    msg = mask_fails(ws, dataset, "--method", "mdav", "--param", "k=3")
    assert "b.parquet and" in msg and "different columns: column 'AGI' is in one of them only" in msg


def test_a_corrupt_page_in_one_parquet_file_of_a_dataset_names_that_file(ws, small, no_cluster):
    """The footers read (so the file checks pass), a page header of b.parquet does not: the scan names it."""
    dataset = ws.root / "dataset"
    dataset.mkdir()
    for i, name in enumerate(("a", "b", "c")):
        small.iloc[13 * i: 13 * i + 13].to_parquet(dataset / f"{name}.parquet", index=False)
    corrupt = bytearray((dataset / "b.parquet").read_bytes())
    corrupt[4:30] = b"\xff" * 26  # the first page header, after the PAR1 magic
    (dataset / "b.parquet").write_bytes(bytes(corrupt))
    msg = mask_fails(ws, dataset, "--method", "mdav", "--param", "k=3")
    assert f"its Parquet file {dataset / 'b.parquet'} has a page that cannot be decoded" in msg
    assert "a.parquet" not in msg and "Traceback" not in msg


def test_parquet_files_of_one_dataset_with_different_types(ws, small, no_cluster):
    dataset = ws.root / "dataset"
    dataset.mkdir()
    small.iloc[:20].to_parquet(dataset / "a.parquet", index=False)
    small.iloc[20:].astype({"FICA": str}).to_parquet(dataset / "b.parquet", index=False)
    msg = mask_fails(ws, dataset, "--method", "rankswap", "--param", "p=10", "--vars", "AGI")
    assert "column 'FICA' has type string in one, int64 in the other" in msg


def test_csv_files_of_one_dataset_with_different_headers(ws, small, no_cluster):
    dataset = ws.root / "dataset"
    dataset.mkdir()
    write_csv(dataset / "a.csv", small.iloc[:20])
    write_csv(dataset / "b.csv", small.iloc[20:].rename(columns={"AGI": "INCOME"}))
    msg = mask_fails(ws, dataset, "--method", "mdav", "--param", "k=3")
    assert "b.csv and" in msg and "column 'INCOME'" in msg


@pytest.mark.parametrize("header, message", [
    ("record_id,AGI,AGI", "column 'AGI' appears twice in"),
    ("record_id,,AGI", "column number 2 of"),
])
def test_csv_header_that_a_reader_would_rename(ws, no_cluster, header, message):
    path = ws.root / "in.csv"
    path.write_text(header + "\n" + "\n".join(f"{i},{i * 3},{i * 7}" for i in range(8)) + "\n")
    msg = mask_fails(ws, path, "--method", "mdav", "--param", "k=3")
    assert message in msg and "in.csv" in msg


def test_empty_csv_file(ws, no_cluster):
    path = ws.root / "empty.csv"
    path.write_text("")
    msg = mask_fails(ws, path, "--method", "mdav", "--param", "k=3")
    assert "empty.csv is empty" in msg


@pytest.mark.parametrize("name", ["_block", "_pos", "_proj0", "_orig_AGI", "_suppress", "__count", "__weight",
                                  "AGI__masked", "_partitions"])
def test_column_named_like_an_internal_one(ws, small, no_cluster, name):
    msg = mask_fails(ws, write_csv(ws.root / "in.csv", small.rename(columns={"FICA": name})), "--method", "mdav",
                     "--param", "k=3", "--vars", "AGI,TAXINC")
    assert f"column {name!r} of" in msg and "reserved" in msg


def test_reserved_names_are_the_modules_own():
    from sdc_tasks import blocking
    from sdc_tasks.evaluation import linkage
    from sdc_tasks.masking import apply, categorical
    from sdc_tasks.metrics import categorical_risk
    from sdc_tasks.reserved import reserved_role
    from sdc_tasks.stats import frequencies

    internal = [blocking.BLOCK_COL, blocking.POS_COL, f"{blocking.PROJ_COL}3", apply.ORIGINAL_PREFIX + "x",
                categorical.SUPPRESS_COL, categorical_risk.COUNT, categorical_risk.WEIGHT, frequencies.COUNT_COL,
                "x" + linkage.MASKED_SUFFIX]
    assert all(reserved_role(name) for name in internal)
    assert not any(reserved_role(name) for name in ["AGI", "_id", "count", "m", "1", "a b", "é"])


@pytest.mark.parametrize("which", ["input", "masked"])
def test_null_ids_name_the_column_row_and_count(ws, pair, no_cluster, which):
    original, df = pair
    df = df.astype({"record_id": float})
    df.loc[[6, 17], "record_id"] = np.nan
    broken = write_csv(ws.root / "nullid.csv", df)
    if which == "input":
        msg = mask_fails(ws, broken, "--method", "mdav", "--param", "k=3")
    else:  # a null id is an error, not a reason for --pairing auto to pair by nearest records
        msg = evaluate_fails(ws, original, broken)
    assert "id column 'record_id'" in msg and "no value in row 6 (2 rows in all)" in msg


def test_ids_of_different_kinds_do_not_silently_pair_by_nearest(ws, pair, no_cluster):
    original, df = pair
    df["record_id"] = "r" + df["record_id"].astype(str)
    msg = evaluate_fails(ws, original, write_csv(ws.root / "masked.csv", df))
    assert "id column 'record_id' holds numbers in the original file and text in the masked file" in msg


def test_masked_ids_absent_from_the_original_pair_by_nearest(tmp_path, small, no_cluster):
    original = write_csv(tmp_path / "original.csv", small)
    write_csv(tmp_path / "synthetic.csv", small.assign(record_id=small["record_id"] + 1000))
    code, output = invoke("evaluate", "--original", original, "--masked", tmp_path / "synthetic.csv", "--families",
                          "il")
    assert code == 0, output
    assert json.loads(output)["pairing"] == "nearest"


# ---- column types: each passes through masking unchanged, or is refused by name ----


def _type_table():
    import datetime
    import decimal

    import pyarrow as pa

    n = 6
    return {
        "int32_with_null": (pa.array([1, None, 3, 4, 5, 6], pa.int32()), True),
        "uint8": (pa.array(range(n), pa.uint8()), True),
        "uint64": (pa.array([2**63 + i for i in range(n)], pa.uint64()), True),
        "float16": (pa.array(np.arange(n, dtype=np.float16)), True),
        "float32": (pa.array(np.arange(n, dtype=np.float32) / 3), True),
        "bool": (pa.array([True, False, None, True, False, True]), True),
        "decimal": (pa.array([decimal.Decimal(f"{i}.10") for i in range(n)], pa.decimal128(10, 2)), True),
        "date": (pa.array([datetime.date(2020, 1, i + 1) for i in range(n)]), True),
        "timestamp_tz": (pa.array([datetime.datetime(2020, 1, 1, i) for i in range(n)],
                                  pa.timestamp("us", tz="Europe/Paris")), True),
        "timestamp": (pa.array([datetime.datetime(2020, 1, 1, i) for i in range(n)], pa.timestamp("ns")), True),
        "duration": (pa.array(range(n), pa.duration("s")), True),
        "string": (pa.array(["s", None, "t", "é", "", "w"]), True),
        "large_string": (pa.array(["s", "t", None, "u", "v", "w"], pa.large_string()), True),
        "dictionary": (pa.array(["x", "y", "x", "z", "y", "x"]).dictionary_encode(), True),  # read decoded
        "binary": (pa.array([b"ab"] * n, pa.binary()), False),
        "time": (pa.array([datetime.time(1, i) for i in range(n)]), False),
        "null": (pa.nulls(n), False),
        "struct": (pa.array([{"a": i} for i in range(n)]), False),
        "list": (pa.array([[i, 2] for i in range(n)]), False),
        "map": (pa.array([[("k", i)] for i in range(n)], pa.map_(pa.string(), pa.int64())), False),
    }


@pytest.mark.parametrize("name", list(_type_table()))
def test_parquet_column_types_pass_through_unchanged_or_are_refused(ws, no_cluster, name):
    import pyarrow as pa
    import pyarrow.parquet as pq

    column, kept = _type_table()[name]
    table = pa.table({"v": pa.array(np.linspace(0.0, 1.0, len(column))), name: column})
    source = write_parquet_table(ws.root / "in.parquet", table)
    args = ("--method", "noise", "--param", "p=50", "--vars", "v")
    if not kept:
        msg = mask_fails(ws, source, *args)
        assert f"column {name!r} of {source} has Parquet type" in msg
        return
    code, output = invoke("mask", "--input", source, "--out", ws.root / "out", *args)
    assert code == 0, output
    out = pq.read_table(ws.root / "out").column(name)
    text = pa.types.is_string(column.type) or pa.types.is_dictionary(column.type)  # back as large_string
    assert out.type == (pa.large_string() if text else column.type)
    assert out.to_pylist() == column.to_pylist()


def test_csv_and_its_parquet_copy_give_identical_releases(tmp_path, no_cluster):
    import pyarrow as pa

    rng = np.random.default_rng(3)
    x = {c: rng.random(60) * 10.0 ** rng.integers(-5, 6, 60) for c in ("a", "b")}
    lines = ["a,b", *(f"{u:.17g},{v:.17g}" for u, v in zip(x["a"], x["b"]))]
    (tmp_path / "in.csv").write_text("\n".join(lines) + "\n")
    write_parquet_table(tmp_path / "in.parquet", pa.table(x))
    released = {}
    for fmt in ("csv", "parquet"):
        code, output = invoke("mask", "--input", tmp_path / f"in.{fmt}", "--method", "noise", "--param", "p=10",
                              "--out", tmp_path / f"out-{fmt}")
        assert code == 0, output
        released[fmt] = pd.read_parquet(tmp_path / f"out-{fmt}")
    for c in ("a", "b"):
        assert released["csv"][c].to_numpy().tobytes() == released["parquet"][c].to_numpy().tobytes()


@pytest.mark.parametrize("order", [[[1], [2]], [{"a": 1}, {"b": 2}], 5, {"low": 1}])
def test_ordinal_categories_of_a_wrong_type_name_the_field(order):
    spec = demo_spec()
    spec["variables"].update(categorical=["edu"], ordinal={"edu": order})
    with pytest.raises(SpecError) as err:
        parse_spec(spec)
    assert "ordinal.edu" in str(err.value)


def test_a_column_pandas_stored_as_the_index_stays_a_column(tmp_path, small, no_cluster):
    small["record_id"] += 1000  # not the row positions ids created for a file without them would be
    small.set_index("record_id").to_parquet(tmp_path / "indexed.parquet")
    code, output = invoke("mask", "--input", tmp_path / "indexed.parquet", "--method", "noise", "--param", "p=10",
                          "--vars", "AGI", "--out", tmp_path / "out")
    assert code == 0, output
    assert pd.read_parquet(tmp_path / "out")["record_id"].tolist() == small["record_id"].tolist()


def test_categorical_variables_named_like_old_internal_columns(tmp_path, no_cluster):
    rng = np.random.default_rng(0)
    names = ["count", "m", "code", "o"]  # the names frequency tables and categorical linkage once used
    write_csv(tmp_path / "in.csv", pd.DataFrame({c: rng.integers(0, 3, 60) for c in names}))
    code, output = invoke("mask", "--input", tmp_path / "in.csv", "--method", "local_suppression", "--param", "k=3",
                          "--vars", "count,m,code", "--out", tmp_path / "out.csv")
    assert code == 0, output
    code, output = invoke("evaluate", "--original", tmp_path / "in.csv", "--masked", tmp_path / "out.csv",
                          "--families", "cat_il,cat_risk", "--categorical", ",".join(names), "--key-vars",
                          ",".join(names))
    assert code == 0, output
    assert json.loads(output)["categorical_keys"] == names


@pytest.mark.parametrize("flaw, message", [
    (b"1,2,3,4", "Error tokenizing data"),
    ("7,caf\u00e9".encode("latin-1"), "it holds bytes that are not UTF-8 text"),
])
def test_unreadable_row_beyond_the_sampled_rows(ws, no_cluster, monkeypatch, flaw, message):
    import sdc_tasks.io

    monkeypatch.setattr(sdc_tasks.io, "WHOLE_SAMPLE_BYTES", 0)  # Dask samples only the first rows
    path = ws.root / "late.csv"
    rows = [f"{i},{i * 3}".encode() for i in range(60)]
    path.write_bytes(b"\n".join([b"AGI,TAXINC", *rows[:40], flaw, *rows[40:]]) + b"\n")
    msg = mask_fails(ws, path, "--method", "mdav", "--param", "k=3", "--vars", "AGI")
    assert "late.csv as csv: " in msg and message in msg and "caf" not in msg and "0xe9" not in msg
