"""Categorical comparison grids (sdc_methods_comparison_chapter.txt sec. 5, Table 3): grid validation, the
Table 3 ranking on a hand-computed toy, and a small grid on a subset of testdata.csv through the library, the
CLI and the Prefect flow."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from sdc_tasks.cli import app
from sdc_tasks.comparison import outputs as O
from sdc_tasks.comparison import run as C
from sdc_tasks.comparison.categorical_ranking import TABLE_3_COLUMNS, categorical_ranking_table, scaled_ranks
from sdc_tasks.generate import bundled_path
from sdc_tasks.outputs import MARKER

CATEGORICAL = ["urbrur", "sex", "walls", "roof", "age"]
ORDINAL = {"walls": [2, 3, 9], "age": None}
SETS = {"s": ["urbrur", "sex", "walls"], "o": ["walls", "age"]}


def grid(families: list[dict], **fields) -> dict:
    """A categorical grid mapping with CATEGORICAL, ORDINAL and SETS unless overridden."""
    return {"name": "cat", "seed": 3, "categorical": CATEGORICAL, "ordinal": ORDINAL, "variable_sets": SETS,
            "families": families, **fields}


def fam(label: str, method: str, param: str, values: list, sets: list[str] | None = None) -> dict:
    """A family sweeping one parameter (label_format g), on ``sets`` (None: every set)."""
    out = {"label": label, "method": method, "sweep": {"param": param, "values": values, "label_format": "g"}}
    return {**out, "sets": sets} if sets is not None else out


# ---------------------------------------------------------------- grid


def test_labels_end_with_the_set_name():
    g = C.parse_grid(grid([fam("T", "top_coding", "p", [2, 3], ["o"]), fam("P", "pram", "theta", [0.05])]))
    assert [(c.label, c.variables) for c in g.configurations()] == [
        ("T2o", ("walls", "age")), ("T3o", ("walls", "age")),
        ("P0.05s", ("urbrur", "sex", "walls")), ("P0.05o", ("walls", "age"))]


@pytest.mark.parametrize("data, message", [
    ({"families": [fam("T", "top_coding", "p", [2])]},
     "grid: families.0.method: top_coding masks categorical variables; list them in categorical"),
    ({"variable_sets": SETS, "families": [fam("Rank", "rankswap", "p", [5])]},
     "grid: variable_sets: a grid with variable_sets must list its categorical variables"),
    (grid([fam("T", "top_coding", "p", [2], ["s"])]),
     "grid: families.0.sets: set 's' holds 'urbrur', not listed in ordinal (top_coding needs ordered categories)"),
    (grid([fam("B", "bottom_coding", "p", [2])]), "grid: families.0.sets: set 's' holds 'urbrur'"),
    (grid([fam("G", "global_recoding", "p", [2], ["x"])]), "grid: families.0.sets: unknown variable set 'x'"),
    (grid([fam("G", "global_recoding", "p", [2])], variable_sets={"s": ["urbrur", "income"]}),
     "grid: variable_sets.s: 'income' is not listed in categorical"),
    (grid([fam("G", "global_recoding", "p", [2])], ordinal={"income": None}),
     "grid: ordinal.income: 'income' is not listed in categorical"),
    (grid([fam("Rank", "rankswap", "p", [5])]),
     "grid: families.0.method: rankswap masks continuous variables; a categorical grid ranks categorical methods"),
    (grid([fam("G", "global_recoding", "p", [2])], variable_sets={}),
     "grid: variable_sets: a categorical grid needs at least one named set"),
    (grid([fam("P", "pram", "theta", [1.5])]), "grid field 'families.0': sweep.values.0 = 1.5: parameter 'theta'"),
])
def test_grid_errors_name_the_field(data, message):
    with pytest.raises(C.GridError, match=re.escape(message)):
        C.parse_grid(data)


def test_bundled_categorical_grid_parses():
    g = C.load_grid(bundled_path("categorical_grid.yaml"))
    labels = [c.label for c in g.configurations()]
    assert len(labels) == 18 and {"T2o", "B3o", "G2s", "G3m", "P0.09m"} <= set(labels)


# ---------------------------------------------------------------- Table 3 ranking by hand

# (label, family, set, PLD_cat, Dist, CTBIL, ACTBIL, EBIL_RF, PRIL_RF, EBIL_MF, PRIL_MF)
TOY = [("As", "A", "s", 10, 1, 4, 0.1, 2, 2, 2, 2),
       ("Ao", "A", "o", 40, 3, 2, 0.2, 1, 1, 1, 1),
       ("Bs", "B", "s", 20, 2, 3, 0.3, 4, 3, 4, 3),
       ("Bo", "B", "o", 20, 4, 1, 0.4, 3, 4, 3, 4)]
KEYS = ("PLD_cat", "Dist", "CTBIL", "ACTBIL", "EBIL_RF", "PRIL_RF", "EBIL_MF", "PRIL_MF")


def toy_results() -> list[C.ConfigurationResult]:
    """The four toy configurations: families A and B (one parameter value each) on sets s and o."""
    return [C.ConfigurationResult(C.Configuration(label, family, "pram", {"theta": 0.1 if family == "A" else 0.2},
                                                  ("x",), s), dict(zip(KEYS, values)))
            for label, family, s, *values in TOY]


def test_scaled_ranks_average_ties_and_reach_100():
    assert scaled_ranks(pd.Series([10.0, 40.0, 20.0, 20.0])).tolist() == [25.0, 100.0, 62.5, 62.5]


def test_toy_ranking_matches_the_hand_computation():
    # ranks x 25 (N = 4). PLD: As 25, Bs = Bo 62.5 (ranks 2, 3 averaged), Ao 100.
    # AIL = (Dist + (CTBIL + ACTBIL)/2 + (EBILRF + ILRF + EBILMF + ILMF)/4) / 3:
    #   As (25 + (100 + 25)/2 + (50 + 50 + 50 + 50)/4) / 3 = 137.5/3;  Ao (75 + (50 + 50)/2 + 25) / 3 = 50
    #   Bs (50 + (75 + 75)/2 + (100 + 75 + 100 + 75)/4) / 3 = 212.5/3;  Bo (100 + (25 + 100)/2 + 87.5) / 3 = 250/3
    # Score = (PLD Rank + AIL Rank)/2: As 425/12, Ao 75, Bs 200/3, Bo 875/12
    # Ave. Score: A (425/12 + 75)/2 = 1325/24, B (200/3 + 875/12)/2 = 1675/24
    t = categorical_ranking_table(toy_results())
    assert tuple(t.columns[:13]) == TABLE_3_COLUMNS
    assert t["Method"].tolist() == ["As", "Ao", "Bs", "Bo"]
    assert t["PLD Rank"].tolist() == [25.0, 100.0, 62.5, 62.5]
    assert t["AIL Rank"].tolist() == pytest.approx([137.5 / 3, 50.0, 212.5 / 3, 250 / 3])
    assert t["Score"].tolist() == pytest.approx([425 / 12, 75.0, 200 / 3, 875 / 12])
    assert t["Ave. Score"].tolist() == pytest.approx([1325 / 24, 1325 / 24, 1675 / 24, 1675 / 24])
    assert t[["PLD", "EBILRF", "ILMF"]].iloc[3].tolist() == [20.0, 3.0, 4.0]
    assert t["Set"].tolist() == ["s", "o", "s", "o"]


# ---------------------------------------------------------------- end to end on testdata.csv

SMALL = grid([fam("T", "top_coding", "p", [2], ["o"]), fam("G", "global_recoding", "p", [2], ["s"]),
              fam("P", "pram", "theta", [0.1])])


@pytest.fixture(scope="module")
def subset(tmp_path_factory):
    """600 records of testdata.csv drawn at random (the first ones are all urban)."""
    path = tmp_path_factory.mktemp("cat") / "sub.csv"
    pd.read_csv(bundled_path("testdata.csv")).sample(600, random_state=1).to_csv(path, index=False)
    return path


def test_variables_and_keys_come_from_the_sets(subset):
    with pytest.raises(C.InputError, match="key_vars: grid 'cat' is categorical"):
        C.prepare_input(subset, key_vars=["sex"], grid=C.parse_grid(SMALL))
    source = C.prepare_input(subset, grid=C.parse_grid(SMALL))
    assert source.variables == ["urbrur", "sex", "walls", "age"] and source.key_vars == []
    ages = sorted(pd.read_csv(subset).age.unique().tolist())
    assert source.category_orders == {"walls": [2, 3, 9], "age": ages}


def test_small_categorical_grid_end_to_end(subset, tmp_path):
    out = tmp_path / "out"
    c = O.comparison(subset, out, C.parse_grid(SMALL), limits={"PLD_cat": 50.0})
    assert {p.name for p in out.iterdir()} == {*O.FILES.values(), MARKER}
    table = pd.read_parquet(out / "ranking.parquet")
    assert table["Method"].tolist() == c.table["Method"].tolist()
    assert set(table["Method"]) == {"T2o", "G2s", "P0.1s", "P0.1o"}
    metrics = json.loads((out / "metrics.json").read_text())
    for _, row in table.iterrows():
        m = metrics[row.Method]
        assert m["n"] == 600 and m["categorical"] == list(C.parse_grid(SMALL).variable_sets[row.Set])
        assert (row.PLD, row.Dist, row.EBILRF, row.ILMF) == pytest.approx(
            (m["PLD_cat"], m["Dist"], m["EBIL_RF"], m["PRIL_MF"]))
        assert row.EBILRF == pytest.approx(row.EBILMF)  # the original as reference: RF = MF by Bayes
    # the top-coded ordinal set: walls {3, 9} -> 3 and the two oldest ages into the younger of them
    sub = pd.read_csv(subset)
    top_ages = sorted(sub.age.unique())[-2:]
    changed = (sub.walls == 9).sum() + (sub.age == top_ages[1]).sum()
    t2o = metrics["T2o"]
    assert t2o["Dist"] == pytest.approx((sub.walls == 9).sum() * 0.5 + (sub.age == top_ages[1]).sum()
                                        / (sub.age.nunique() - 1)) and changed > 0
    assert table["Score"].tolist() == pytest.approx(((table["PLD Rank"] + table["AIL Rank"]) / 2).tolist())
    p_rows = table[table.Family == "P"]
    assert p_rows["Ave. Score"].tolist() == pytest.approx([p_rows["Score"].mean()] * 2)
    md = (out / "ranking.md").read_text()
    assert "| " + " | ".join(TABLE_3_COLUMNS) + " |" in md and "Best Ave. Score" in md
    assert (out / "ru_map.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert c.best is not None and c.best.metrics["PLD_cat"] <= 50.0


def test_cli_and_flow_compare_a_categorical_grid(subset, tmp_path, prefect_harness, dask_scheduler):
    from flows.compare import compare

    path = tmp_path / "grid.yaml"
    path.write_text(yaml.safe_dump(SMALL))
    run = CliRunner().invoke(app, ["compare", "--input", str(subset), "--grid", str(path), "--out",
                                   str(tmp_path / "cli"), "--dask-address", dask_scheduler])
    assert run.exit_code == 0, run.output
    assert '"risk": "PLD_cat"' in run.output
    refused = CliRunner().invoke(app, ["compare", "--input", str(subset), "--grid", str(path), "--out",
                                       str(tmp_path / "x"), "--best-spec", str(tmp_path / "best.yaml")])
    assert refused.exit_code == 2 and "--best-spec: grid 'cat' is categorical" in refused.output
    assert not (tmp_path / "x").exists()
    summary = compare(str(subset), str(tmp_path / "flow"), grid=str(path), dask_address=dask_scheduler)
    cli, flow = (pd.read_csv(tmp_path / d / "ranking.csv") for d in ("cli", "flow"))
    pd.testing.assert_frame_equal(cli.drop(columns="Seconds"), flow.drop(columns="Seconds"))
    assert summary["best"]["label"] == cli["Method"].iloc[0]
