"""Method comparison (sdc_methods_comparison_chapter.txt sec. 2-4): grid validation, Table 1 ranks, the R-U
Pareto front, a small grid on the Census file end to end, best-spec selection under limits, the CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from sdc_tasks import report as R
from sdc_tasks.cli import app
from sdc_tasks.comparison import outputs as O
from sdc_tasks.comparison import run as C
from sdc_tasks.files import file_sha256
from sdc_tasks.generate import bundled_path
from sdc_tasks.outputs import MARKER
from sdc_tasks.pipeline.spec import load_spec
from sdc_tasks.report import pareto_front, ru_map

CENSUS_KEYS = ["FEDTAX", "AFNLWGT", "AGI", "EMCONTRB", "PTOTVAL", "TAXINC", "STATETAX"]
CHAPTER = Path(__file__).resolve().parents[2] / "shared" / "seeds" / "sdc_methods_comparison_chapter.txt"
SMALL_GRID = {"name": "small", "seed": 5, "families": [
    {"label": "Rank", "method": "rankswap", "sweep": {"param": "p", "values": [15], "label_format": "02d"}},
    {"label": "Mic3mul", "method": "md", "params": {"group_size": 3},
     "sweep": {"param": "k", "values": [7], "label_format": "02d"}},
    {"label": "Noise", "method": "noise", "sweep": {"param": "p", "values": [0.1], "label_format": "g"}},
]}


def family(label: str, method: str, values: list, fmt: str = "02d", param: str = "k", **params) -> dict:
    """A grid family mapping sweeping one parameter."""
    return {"label": label, "method": method, "params": params,
            "sweep": {"param": param, "values": values, "label_format": fmt}}


# ---------------------------------------------------------------- grid


@pytest.mark.parametrize("families, message", [
    ([{"label": "X", "method": "nope"}], "grid field 'families.0': method: unknown method 'nope'"),
    ([family("Mic", "mdav", [3, 1])], "grid field 'families.0': sweep.values.1 = 1: parameter 'k' of mdav"),
    ([family("Rank", "rankswap", [0.5], param="p")], "sweep.label_format '02d' cannot write sweep.values.0 = 0.5"),
    ([family("Mic", "mdav", [3], k=4)], "sweep.param 'k' is also fixed in params"),
    ([{"label": "Distr", "method": "distr", "typo": 1}], "grid field 'families.0.typo': Extra inputs"),
    ([{"label": "two words", "method": "distr"}], "grid field 'families.0.label'"),
    ([family("Rank", "rankswap", [5], param="p"), family("Rank", "rankswap", [4, 5], param="p")],
     "grid: families.1: row label 'Rank05' repeats one of families.0"),
    ([], "grid field 'families': List should have at least 1 item"),
])
def test_grid_errors_name_the_field(families, message):
    with pytest.raises(C.GridError, match=re.escape(message)):
        C.parse_grid({"families": families})


def test_grid_file_errors(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("families: [")
    with pytest.raises(C.GridError, match="not valid YAML"):
        C.load_grid(bad)
    with pytest.raises(C.GridError, match="not found"):
        C.load_grid(tmp_path / "missing.yaml")
    with pytest.raises(C.GridError, match="mapping"):
        C.parse_grid(["families"])


def test_default_grid_is_chapter_6s():
    configs = C.load_grid().configurations()
    labels = [c.label for c in configs]
    assert len(labels) == len(set(labels)) == 11 + 1 + 2 + 7 * 8 + 20 + 20
    by_label = {c.label: c for c in configs}
    assert by_label["Rank15"].method == "rankswap" and by_label["Rank15"].params == {"p": 15.0, "partner": "uniform"}
    assert by_label["Mic3mul07"].params == {"k": 7, "group_size": 3, "block_size": 12000}
    assert {by_label[f"{f}05"].method for f in ("Mic2mul", "Mic3mul", "Mic4mul", "Micmul")} == {"md"}
    assert by_label["Micmul10"].params["group_size"] is None
    assert by_label["Noise0.04"].params["p"] == 0.04 and "Noise0.2" in by_label
    assert by_label["JPEG080"].params == {"q": 80} and by_label["Resamp3"].params == {"t": 3}
    assert by_label["Distr"].method == "distr" and by_label["MicPCP05"].method == "mic_pcp"
    if CHAPTER.exists():  # every Table 1 row label is a row of the grid; the grid adds JPEG005 only
        text = CHAPTER.read_text()
        table = text[text.index("Table 1: Comparison"):text.index("Figure 1.")]
        published = set(re.findall(r"^([A-Za-z][A-Za-z0-9.]*)\t[\d.]+\t", table, re.M))
        assert len(published) == 109 and set(labels) - published == {"JPEG005"}


# ---------------------------------------------------------------- ranks and front


def result(label: str, il: float, dld: float, pld: float, idv: float, fam: str = "F") -> C.ConfigurationResult:
    """A configuration result with hand-set measures and the chapter's score."""
    metrics = {"IL": il, "DLD": dld, "PLD": pld, "ID": idv, "score": 0.5 * il + 0.125 * dld + 0.125 * pld + 0.25 * idv}
    metrics["risk"] = C.risk(metrics)
    return C.ConfigurationResult(C.Configuration(label, fam, "noise", {"p": 0.1}), metrics, {"mask": 1.0})


def test_ranks_are_one_for_the_lowest_and_ties_share_the_best_rank():
    values = pd.Series([3.0, 1.0, 3.0 + 1e-12, 2.0, np.nan])
    assert C.ranks(values).tolist() == [3, 1, 3, 2, 5]


def test_ranking_table_on_a_hand_made_table():
    results = [result("A", 10, 20, 30, 40), result("B", 5, 20, 10, 80), result("C", 30, 2, 1, 10),
               result("D", 10, 50, 30, 40)]
    table = C.ranking_table(results)
    # scores: A 0.5*10+2.5+3.75+10 = 21.25, B 2.5+2.5+1.25+20 = 26.25, C 15+0.25+0.125+2.5 = 17.875,
    # D 5+6.25+3.75+10 = 25
    assert table["Method"].tolist() == ["C", "A", "D", "B"]
    assert table["Score"].tolist() == pytest.approx([17.875, 21.25, 25.0, 26.25])
    ranks = table.set_index("Method")[["IL-Rank", "DLD-Rank", "PLD-Rank", "ID-Rank"]]
    assert ranks.loc["A"].tolist() == [2, 2, 3, 2]
    assert ranks.loc["B"].tolist() == [1, 2, 2, 4]
    assert ranks.loc["C"].tolist() == [4, 1, 1, 1]
    assert ranks.loc["D"].tolist() == [2, 4, 3, 2]
    assert list(table.columns[:10]) == ["Method", "IL", "DLD", "PLD", "ID", "Score", "IL-Rank", "DLD-Rank",
                                        "PLD-Rank", "ID-Rank"]
    # score = 0.5 IL + 0.5 risk: the risk axis is the score's risk half
    assert (0.5 * table["IL"] + 0.5 * table["Risk"]).tolist() == pytest.approx(table["Score"].tolist())


def test_a_configuration_missing_a_measure_ranks_last():
    # a measure left out as not finite (metrics/finite.py) is absent: no crash, the configuration ranks last
    short = result("S", 1, 1, 1, 1)
    del short.metrics["IL"]
    table = C.ranking_table([short, result("A", 10, 20, 30, 40)])
    assert table["Method"].tolist() == ["A", "S"]
    assert np.isnan(table.set_index("Method").loc["S", "Score"])
    assert table.set_index("Method").loc["S", "IL-Rank"] == 2


def test_pareto_front_of_the_map_points():
    results = [result("A", 10, 20, 30, 40), result("B", 5, 20, 10, 80), result("C", 30, 2, 1, 10),
               result("D", 10, 50, 30, 40), result("E", 40, 2, 1, 10)]
    points = O.ru_points(results)
    # risk: A 5+7.5+20 = 32.5, B 5+2.5+40 = 47.5, C 0.5+0.25+5 = 5.75, D 12.5+7.5+20 = 40, E = C's risk
    assert [p["label"] for p in pareto_front(points)] == ["C", "A", "B"]
    assert {p["group"] for p in points} == {"F"}


def test_map_has_a_marker_per_family_and_spaced_front_labels(tmp_path):
    close = [{"label": f"P{i}", "il": 10 - 0.01 * i, "dr": 0.01 * i, "group": "AB"[i % 2]} for i in range(20)]
    far = {"label": "far", "il": 1.0, "dr": 80.0, "group": "C"}
    front = pareto_front([*close, far])
    assert len(front) == 21
    assert [p["label"] for p in ru_map._spaced(front, 100.0, 11.0)] == ["P0", "far"]
    groups = ru_map._marker_groups([*close, far])
    assert [g[0] for g in groups] == ["A", "B", "C"]
    assert len({g[2]["marker"] for g in groups}) == 3
    first, second = (ru_map.ru_map_png([*close, far], tmp_path / name, label_front_only=True)
                     for name in ("a.png", "b.png"))
    assert first.read_bytes() == second.read_bytes()


def test_limits_parse_and_name_the_bad_measure():
    assert C.parse_limits(["DLD=10", "Score=30", "ID_3=5.5", "risk=40"]) == {"DLD": 10.0, "score": 30.0,
                                                                             "ID_3": 5.5, "risk": 40.0}
    for bad, message in (("FOO=1", "unknown measure 'FOO'"), ("DLD", "MEASURE=LIMIT"),
                         ("DLD=x", "limit 'x' is not a number")):
        with pytest.raises(ValueError, match=re.escape(message)):
            C.parse_limits([bad])


def test_best_result_respects_every_limit():
    results = [result("A", 10, 20, 30, 40), result("B", 5, 20, 10, 80), result("C", 30, 2, 1, 10)]
    assert C.best_result(results, {}).config.label == "C"
    assert C.best_result(results, {"IL": 20}).config.label == "A"
    assert C.best_result(results, {"IL": 20, "ID": 50}).config.label == "A"
    assert C.best_result(results, {"IL": 20, "PLD": 20}).config.label == "B"
    assert C.best_result(results, {"IL": 20, "DLD": 10}) is None


def test_published_risk_setup_ranks_on_dldpub_and_pldpub():
    a, b = result("A", 10, 20, 30, 40), result("B", 12, 1, 1, 40)
    a.metrics.update(DLDpub=2.0, PLDpub=4.0)
    b.metrics.update(DLDpub=30.0, PLDpub=50.0)
    # docs/metrics.md measures: A 5 + 2.5 + 3.75 + 10 = 21.25, B 6 + 0.125 + 0.125 + 10 = 16.25
    assert C.ranking_table([a, b])["Method"].tolist() == ["B", "A"]
    # published setup: A 5 + 0.25 + 0.5 + 10 = 15.75, B 6 + 3.75 + 6.25 + 10 = 26
    table = C.ranking_table([a, b], "published")
    assert table["Method"].tolist() == ["A", "B"]
    assert table["Score"].tolist() == pytest.approx([15.75, 26.0])
    assert (table["DLD"].tolist(), table["PLD"].tolist()) == ([2.0, 30.0], [4.0, 50.0])
    assert C.risk(a.metrics, "published") == pytest.approx(0.5 + 1.0 + 20.0)
    assert C.best_result([a, b], {}).config.label == "B"
    assert C.best_result([a, b], {}, "published").config.label == "A"
    assert O.risk_label("published") == "Disclosure risk 0.25 DLDpub + 0.25 PLDpub + 0.5 ID, %"
    with pytest.raises(ValueError, match="risk must be one of metrics, published"):
        C.check_risk_setup("both")
    assert "pld_published" not in C.families_for("metrics") and "pld_published" in C.families_for("published")
    assert C.release_families({"DLD": 1.0}) == ["il", "pil", "dld", "pld", "id", "dld_published"]
    assert C.release_families({"PLDpub": 1.0, "risk": 2.0})[-1] == "pld_published"


def test_parallel_mode_follows_input_size():
    small = C.prepare_input(bundled_path("census.csv"), key_vars=CENSUS_KEYS)
    assert C.parallel_mode(small) == "configurations"
    large = C.CompareInput(**{**small.__dict__, "input_bytes": C.SMALL_INPUT_BYTES + 1})
    assert C.parallel_mode(large) == "data" and C.parallel_mode(large, "configurations") == "configurations"
    with pytest.raises(ValueError, match="parallel must be one of"):
        C.parallel_mode(small, "threads")


def test_prepare_input_names_bad_columns():
    census = bundled_path("census.csv")
    with pytest.raises(ValueError, match="no column 'NOPE'"):
        C.prepare_input(census, key_vars=["NOPE"])
    with pytest.raises(ValueError, match="key variable 'FEDTAX' is not among the masked variables"):
        C.prepare_input(census, variables=["AGI", "TAXINC"], key_vars=["FEDTAX"])


# ---------------------------------------------------------------- end to end on the Census file


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    """The small grid (Rank15, Mic3mul07, Noise0.1) on the Census file through the library, in this process."""
    out = tmp_path_factory.mktemp("cmp") / "out"
    census = bundled_path("census.csv")
    before = file_sha256(census)
    c = O.comparison(census, out, C.parse_grid(SMALL_GRID), key_vars=CENSUS_KEYS, limits={"DLD": 30.0})
    assert file_sha256(census) == before
    return c, out


def test_small_grid_writes_every_output(small_run):
    c, out = small_run
    assert {p.name for p in out.iterdir()} == {*O.FILES.values(), MARKER}
    table = pd.read_parquet(out / "ranking.parquet")
    assert table["Method"].tolist() == c.table["Method"].tolist()
    assert set(table["Method"]) == {"Rank15", "Mic3mul07", "Noise0.1"}
    assert table["Score"].is_monotonic_increasing
    expected = 0.5 * table["IL"] + 0.125 * table["DLD"] + 0.125 * table["PLD"] + 0.25 * table["ID"]
    assert table["Score"].tolist() == pytest.approx(expected.tolist())
    pd.testing.assert_frame_equal(pd.read_csv(out / "ranking.csv"), table, check_dtype=False)
    assert (out / "ru_map.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (out / "ranking.md").read_text()
    assert "| Method | IL | DLD | PLD | ID | Score | IL-Rank | DLD-Rank | PLD-Rank | ID-Rank |" in md
    assert "![R-U confidentiality map of every configuration, the chosen one ringed](ru_map.png)" in md
    page = (out / "report.html").read_text()
    assert R.Picture("", (out / "ru_map.png").read_bytes()).data_uri() in page and 'src="ru_map.png"' not in page
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["Mic3mul07"]["params"] == {"k": 7, "group_size": 3, "block_size": 12000}
    assert metrics["Rank15"]["n"] == 1080 and "PIL" in metrics["Rank15"]
    assert C.parse_grid(yaml.safe_load((out / "grid.yaml").read_text())) == C.parse_grid(SMALL_GRID)
    # Mic3mul07's IL is Table 1's 11.06 (docs/reproduction.md)
    assert round(table.set_index("Method").loc["Mic3mul07", "IL"], 2) == 11.06


def test_data_mode_gives_the_configurations_modes_metrics(small_run, tmp_path, sync_dask):
    c, _ = small_run
    source = C.prepare_input(bundled_path("census.csv"), key_vars=CENSUS_KEYS)
    configs = [r.config for r in c.results[:1]]
    [again] = C.run_grid(source, C.parse_grid(SMALL_GRID), "data", tmp_path / "work", configs)
    assert again.metrics == c.results[0].metrics
    assert not any((tmp_path / "work").iterdir())


def test_best_spec_meets_the_limits_and_loads(small_run, tmp_path):
    c, _ = small_run
    allowed = c.table[c.table["DLD"] <= 30.0]
    assert c.best.config.label == allowed.iloc[0]["Method"]
    path = O.write_release_spec(c, tmp_path / "best.yaml")
    spec = load_spec(path)
    assert spec.steps[0].method == c.best.config.method and spec.steps[0].params == c.best.config.params
    assert spec.gate.max == {"DLD": 30.0} and spec.input_path == Path(bundled_path("census.csv")).resolve()
    assert spec.create_id and spec.variables.key == CENSUS_KEYS and spec.seed == SMALL_GRID["seed"]
    strict = O.Comparison(**{**c.__dict__, "limits": {"DLD": 0.0}, "best": C.best_result(c.results, {"DLD": 0.0})})
    with pytest.raises(O.NoneWithinLimits, match="DLD <= 0"):
        O.write_release_spec(strict, tmp_path / "none.yaml")
    assert not (tmp_path / "none.yaml").exists()


def test_bad_input_is_named_before_any_configuration_runs(tmp_path):
    census = bundled_path("census.csv")
    grid = C.parse_grid({"families": [family("Mic3mul", "mdav", [3, 2000], "d", group_size=3)]})
    with pytest.raises(ValueError, match="parameter 'k' of Mic3mul2000 = 2000 needs at least 2000 records but"):
        O.comparison(census, tmp_path / "out", grid, key_vars=CENSUS_KEYS)
    holed = pd.read_csv(census)
    holed.loc[17, "AGI"] = np.nan
    holed.to_csv(tmp_path / "holed.csv", index=False)
    with pytest.raises(ValueError, match="variable 'AGI' .* row 17"):
        O.comparison(tmp_path / "holed.csv", tmp_path / "out", C.parse_grid(SMALL_GRID), key_vars=CENSUS_KEYS)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["holed.csv"]


def test_failing_configuration_is_named_and_leaves_no_output(tmp_path, monkeypatch):
    def failing(*args, **kwargs):
        raise ValueError("kernel failed")

    monkeypatch.setattr(C, "apply_step", failing)
    with pytest.raises(ValueError, match=r"configuration Rank15 \(rankswap \{'p': 15.0, 'partner': 'uniform'\}\): "
                                         r"ValueError \(details "
                                         "withheld"):  # an error not raised by our code may quote a value
        O.comparison(bundled_path("census.csv"), tmp_path / "out", C.parse_grid(SMALL_GRID), key_vars=CENSUS_KEYS)
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------- CLI


def test_cli_compare_with_a_tiny_grid(tmp_path, dask_scheduler):
    grid = tmp_path / "grid.yaml"
    grid.write_text(yaml.safe_dump({"name": "tiny", "families": [family("Rank", "rankswap", [10, 15], param="p")]}))
    out, best = tmp_path / "out", tmp_path / "best.yaml"
    args = ["compare", "--input", str(bundled_path("census.csv")), "--grid", str(grid), "--out", str(out),
            "--key-vars", ",".join(CENSUS_KEYS), "--max", "PLD=100", "--best-spec", str(best),
            "--dask-address", dask_scheduler]
    run = CliRunner().invoke(app, args)
    assert run.exit_code == 0, run.output
    assert set(pd.read_csv(out / "ranking.csv")["Method"]) == {"Rank10", "Rank15"}
    assert load_spec(best).steps[0].method == "rankswap"
    bad = CliRunner().invoke(app, [*args[:5], "--out", str(tmp_path / "x"), "--max", "NOPE=1"])
    assert bad.exit_code == 2 and "unknown measure 'NOPE'" in bad.output and not (tmp_path / "x").exists()


def test_cli_compare_ranks_on_the_published_setup(tmp_path, dask_scheduler):
    grid = tmp_path / "grid.yaml"
    grid.write_text(yaml.safe_dump({"name": "tiny", "families": [family("Rank", "rankswap", [15], param="p")]}))
    out = tmp_path / "out"
    args = ["compare", "--input", str(bundled_path("census.csv")), "--grid", str(grid), "--out", str(out),
            "--key-vars", ",".join(CENSUS_KEYS), "--dask-address", dask_scheduler, "--risk", "published"]
    run = CliRunner().invoke(app, args)
    assert run.exit_code == 0, run.output
    assert '"risk": "published"' in run.output
    row = pd.read_csv(out / "ranking.csv").iloc[0]
    m = json.loads((out / "metrics.json").read_text())["Rank15"]
    assert (row["DLD"], row["PLD"]) == pytest.approx((m["DLDpub"], m["PLDpub"]))
    assert row["Score"] == pytest.approx(0.5 * m["IL"] + 0.125 * m["DLDpub"] + 0.125 * m["PLDpub"] + 0.25 * m["ID"])
    assert "0.25 DLDpub + 0.25 PLDpub" in (out / "ranking.md").read_text()
    bad = CliRunner().invoke(app, [*args[:-1], "both"])
    assert bad.exit_code == 2 and "risk must be one of metrics, published, not 'both'" in bad.output
