"""Tests for sdc_tasks.report: Pareto front, the headline block, metric order, units and definitions, the HTML's
structure (headline first, self-contained, every metric with a unit), per-variable sections, deterministic PNG,
files."""

from __future__ import annotations

import copy
import re
from html.parser import HTMLParser

import numpy as np
import pandas as pd
import pytest

from sdc_tasks import report
from sdc_tasks.metrics.variable_profile import variable_profile

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

RU_POINTS = [
    {"label": "release", "il": 12.0, "dr": 30.0},
    {"label": "mdav k=3", "il": 8.0, "dr": 45.0},
    {"label": "mdav k=10", "il": 20.0, "dr": 15.0},
    {"label": "rankswap p=5", "il": 14.0, "dr": 40.0},
    {"label": "noise 50%", "il": 35.0, "dr": 15.0},
]


def summary(passed: bool = True) -> dict:
    """Return a complete summary dict; with passed=False the DLD check fails and nothing is published."""
    dld = 4.2 if passed else 7.2
    return {
        "title": "Release report: census-demo",
        "run": {"spec_name": "census-demo", "spec_hash": "ab12cd34", "seed": 7,
                "started": "2025-01-01T10:00:00+00:00", "finished": "2025-01-01T10:01:00+00:00",
                "n_records": 1080, "n_masked": 1080, "output_dir": "/tmp/out/census-demo",
                "package_version": "0.1.0"},
        "variables": {"masked": ["AFNLWGT", "AGI"], "key": ["AFNLWGT", "AGI"], "dropped": ["ID"], "strata": None},
        "steps": [{"method": "mdav", "params": {"k": 3}, "variables": ["AFNLWGT", "AGI"], "blocks": 4,
                   "seconds": 0.5}],
        "metrics": {"score_simple": 9.1, "DLD": dld, "IL": 12.0, "ID_2": 20.0, "ID_1": 10.0, "DLD_2": 5.0,
                    "DLD_1": 3.0, "ID": 15.0, "IL1": 11.0, "my_extra": 1.5, "MSE_V": 0.01, "n": 1080,
                    "key_vars": ["AFNLWGT", "AGI"], "method": "mdav"},
        "gate": {"passed": passed,
                 "checks": [{"measure": "DLD", "value": dld, "limit": 5.0, "op": "<=", "passed": passed,
                             "margin": round(5.0 - dld, 12)},
                            {"measure": "IL", "value": 12.0, "limit": 40.0, "op": "<=", "passed": True,
                             "margin": 28.0}],
                 "published": passed},
        "stage_seconds": {"validate": 0.1, "mask": 0.5, "evaluate": 1.2},
        "ru_points": copy.deepcopy(RU_POINTS[:1]),
    }


def test_pareto_front_keeps_non_dominated_points_sorted_by_risk():
    front = report.pareto_front(RU_POINTS)
    assert [p["label"] for p in front] == ["mdav k=10", "release", "mdav k=3"]


def test_pareto_front_drops_non_finite_points_and_handles_one_point():
    points = [{"label": "a", "il": float("nan"), "dr": 1.0}, {"label": "b", "il": 2.0, "dr": 3.0}]
    assert [p["label"] for p in report.pareto_front(points)] == ["b"]
    assert report.pareto_front([]) == []


def test_markdown_headline_refused_names_failing_check_with_its_margin():
    md = report.render_markdown(summary(passed=False))
    assert "**REFUSED**" in md
    assert "DLD = 7.2 > limit 5.0" in md
    assert "| DLD | 7.2 | <= 5.0 | -2.2 | FAIL |" in md
    assert "PUBLISHED" not in md
    assert "IL = 12.0 > limit" not in md


def test_markdown_headline_published_when_gate_passed():
    md = report.render_markdown(summary(passed=True))
    assert "**PUBLISHED**" in md
    assert "REFUSED" not in md
    assert md.startswith("# Release report: census-demo\n\n**PUBLISHED**: all 2 gate checks passed\n")
    assert "| DLD | 4.2 | <= 5.0 | 0.8 | pass |" in md
    assert "**Records in**: 1080" in md and "**Method chain**: mdav (k=3)" in md and "**Run time**: 1.8 s" in md
    assert "| 1 | mdav | k=3 | AFNLWGT, AGI | 4 | 0.50 |" in md


def test_markdown_names_the_map_file_and_artifacts_inline_every_picture():
    s = summary()
    ru = report.ru_picture(s)
    assert "![R-U confidentiality map: information loss IL" in report.render_markdown(s, ru)
    assert "(ru_map.png)" in report.render_markdown(s, ru)
    inline = report.render_markdown(s, ru, inline=True)
    assert "(ru_map.png)" not in inline and "](data:image/png;base64," in inline


def test_headline_held_when_gate_passed_but_not_published():
    gate = summary()["gate"] | {"published": False}
    assert report.release_status(gate)[0] == "HELD"


def test_headline_key_numbers_carry_unit_and_gate_limit():
    numbers = {n.key: n for n in report.headline(summary()).numbers}
    assert list(numbers) == ["IL", "DLD", "ID", "score_simple"]  # score_simple stands in for score (no PLD)
    assert (numbers["DLD"].unit, numbers["DLD"].limit, numbers["DLD"].anchor) == ("percent", 5.0, "dld")
    assert numbers["ID"].limit is None


def test_metric_rows_follow_catalogue_order_and_skip_bookkeeping():
    rows = report.metrics_table_rows(summary()["metrics"])
    assert [r["measure"] for r in rows] == [
        "IL1", "IL", "MSE_V", "DLD_1", "DLD_2", "DLD", "ID_1", "ID_2", "ID", "score_simple", "my_extra"]
    groups = [r["group"] for r in rows]
    assert groups == ["Information loss"] * 3 + ["Disclosure risk"] * 6 + ["Score", "Other"]
    assert all(r["description"] for r in rows if r["group"] != "Other")
    assert "key variables 1..2" in rows[4]["description"]
    assert [r["unit"] for r in rows[:3]] == ["percent", "percent", "fourth-power data units"]
    assert [r["anchor"] for r in rows[3:6]] == ["dld-i", "dld-i", "dld"]
    assert rows[-1]["unit"] == rows[-1]["description"] == rows[-1]["anchor"] == ""


def test_metric_tables_show_the_catalogue_units_and_the_definitions():
    s = summary()
    s["metrics"] |= {"MAE_X": 2.5, "MSE_X": 6.25, "MV_X": 0.1, "kanon_min_group": 3.0, "IL1_zero_cells": 4.0}
    md = report.render_markdown(s)
    assert "| Measure | Value | Unit | Description |" in md
    assert re.search(r"\| MAE_X \| 2\.5 \| data units \| Mean absolute error", md)
    assert re.search(r"\| MSE_X \| 6\.25 \| squared data units \| Mean square error", md)
    assert re.search(r"\| MV_X \| 0\.1 \| fraction \|", md)
    assert "| IL1_zero_cells | 4 | cells |" in md
    assert "(fraction)" not in md and "(%)" not in md
    assert "k-anonymity) (higher is better)" in md
    assert "| MAE_X | Mean absolute error of the cells of the data matrix; range 0 or more; lower is better | data " \
           "units | statistical_databases_survey.txt" in md
    assert "docs/metrics.md#mae-x |" in md and "METRICS.md" not in md and "shared/" not in md


def test_metric_groups_appear_in_order_in_markdown():
    md = report.render_markdown(summary())
    heads = [md.index(f"### {g}") for g in ("Information loss", "Disclosure risk", "Score", "Other")]
    assert heads == sorted(heads)
    assert "| DLD | 4.2 | percent |" in md


class Page(HTMLParser):
    """The parts of an HTML page the structure tests read: ids, attribute values naming resources, tables."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.ids, self.refs, self.tables, self.order = set(), [], [], []
        self._cell: list[str] | None = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        """Record ids, src/href values, element order and table structure."""
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.add(attrs["id"])
        self.refs += [(tag, k, v) for k, v in attrs.items() if k in ("src", "href", "srcset", "data", "action")]
        self.order.append((tag, attrs.get("class")))
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        """Close a cell."""
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data):
        """Collect a cell's text."""
        if self._cell is not None:
            self._cell.append(data)


def test_html_is_self_contained_with_the_headline_first():
    s = summary(passed=False)
    s["title"] = "<script>alert(1)</script> & co"
    text = report.render_html(s, report.ru_picture(s))
    page = Page(text)
    assert "<script>" not in text and "<link" not in text and "@import" not in text and "url(" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; co" in text
    assert page.refs, "the page has pictures and links"
    for tag, attr, value in page.refs:
        if attr == "src":
            assert tag == "img" and value.startswith("data:image/png;base64,"), value[:40]
        else:
            assert attr == "href" and value.startswith("#") and value[1:] in page.ids, value
    first_heading = next(i for i, (tag, _) in enumerate(page.order) if tag == "h2")
    headline = page.order.index(("section", "headline"))
    assert headline < first_heading
    assert text.index("REFUSED") < text.index("<h2")
    checks = page.tables[0]
    assert checks[0] == ["Gate check", "Value", "Limit", "Margin", "Result"]
    assert checks[1] == ["DLD", "7.2", "<= 5.0", "-2.2", "FAIL"]
    assert "@media print" in text


def test_every_metric_row_of_the_html_has_a_unit():
    s = summary()
    s["metrics"] |= {"MAE_X": 2.5, "PIL": 30.0, "kanon_violations_3": 12.0}
    tables = [t for t in Page(report.render_html(s)).tables if t and t[0][:3] == ["Measure", "Value", "Unit"]]
    rows = [r for t in tables for r in t[1:]]
    assert len(rows) == len(report.metrics_table_rows(s["metrics"]))
    assert all(r[2] for r in rows)
    assert {r[0]: r[2] for r in rows}["my_extra"] == "unknown"


def test_reports_without_map_have_no_map_image():
    assert "ru_map.png" not in report.render_markdown(summary())
    text = report.render_html(summary())
    assert 'alt="R-U confidentiality map' not in text and text.count("<img") == 1  # the DLD curve only


def test_profile_sections_show_each_variable_and_its_pictures():
    rng = np.random.default_rng(5)
    x = rng.gamma(2.0, 1000.0, size=(400, 2))
    xm = x + rng.normal(0, 100.0, size=x.shape)
    ids = np.arange(400)
    s = summary()
    s["profile"] = {"variables": [variable_profile(v, x[:, j], xm[:, j], ids) for j, v in enumerate(("AGI", "TAX"))],
                    "correlation": {"variables": ["AGI", "TAX"], "original": [[1.0, 0.2], [0.2, 1.0]],
                                    "masked": [[1.0, 0.25], [0.25, 1.0]]}}
    text = report.render_html(s)
    tables = Page(text).tables
    distributions = next(t for t in tables if t[0][:2] == ["Variable", "File"])
    assert [r[:2] for r in distributions[1:]] == [["AGI", "original"], ["AGI", "masked"], ["TAX", "original"],
                                                   ["TAX", "masked"]]
    assert distributions[1][2] == report.format_value(x[:, 0].mean())
    shares = next(t for t in tables if t[0][:2] == ["Variable", "IL1 (percent)"])
    assert shares[0] == ["Variable", "IL1 (percent)", "PIL_Q (fraction)", "PIL_m1 (fraction)", "PIL_m2 (fraction)",
                         "brMAE (fraction)", "ID (percent)"]
    assert text.count("<img") == 3  # distributions, DLD curve, correlation difference
    assert text.index("Per variable") < text.index("Distance-based linkage") < text.index("All metrics")


def test_risk_before_and_after_is_a_table_of_every_original_figure_beside_the_release():
    s = summary()
    s["metrics"] |= {"kanon_violations_3": 10.0, "kanon_violations_3_before": 120.0,
                     "kanon_violations_3_change_percent": -100 * 110 / 120, "sample_uniques": 4.0,
                     "sample_uniques_before": 0.0, "sample_uniques_change_percent_not_finite": 1.0,
                     "indiv_risk_max": 0.25, "indiv_risk_max_before": 1.0, "indiv_risk_max_change_percent": -75.0,
                     "kanon_min_group": 3.0, "kanon_min_group_before": 1.0, "kanon_min_group_change_percent": 200.0,
                     "dis_suda_max": 0.1, "dis_suda_max_before": 0.1, "dis_suda_max_change_percent": 0.0}
    s["gate"]["checks"].append({"measure": "indiv_risk_max_change_percent", "value": -75.0, "limit": -50.0,
                                "op": "<=", "passed": True, "margin": 25.0})
    text = report.render_html(s)
    page = Page(text)
    table = next(t for t in page.tables if t and t[0][:2] == ["Figure", "Original file"])
    assert table == [["Figure", "Original file", "Released", "Change", "Unit", "Better"],
                     ["kanon_min_group", "1", "3", "+200 %", "records", "higher"],
                     ["kanon_violations_3", "120", "10", "-91.67 %", "records", "lower"],
                     ["sample_uniques", "0", "4", "new", "records", "lower"],
                     ["indiv_risk_max", "1.0", "0.25", "-75 %", "fraction", "lower"],
                     ["dis_suda_max", "0.1", "0.1", "0 %", "fraction", "lower"]]
    assert text.index('id="risk-before-after"') < text.index('id="metrics"')
    for key in ("kanon-min-group", "kanon-violations-i", "dis-suda-max", "key-before", "key-change-percent"):
        assert f'href="#def-{key}"' in text or f'id="def-{key}"' in text, key
    assert 'id="def-key-before"' in text and 'id="def-key-change-percent"' in text  # defined at the end
    shown = [row[0] for t in page.tables if t and t[0][0] == "Measure" for row in t[1:]]
    assert "kanon_violations_3" in shown and not any(k.endswith(("_before", "_change_percent")) for k in shown)
    md = report.render_markdown(s)
    assert "| kanon_violations_3 | 120 | 10 | -91.67 % | records | lower |" in md
    assert "| kanon_violations_3 | 10 | records, lower is better, original 120, -91.67 % |" in md
    assert "| indiv_risk_max_change_percent | -75.0 | <= -50.0 | 25.0 | pass |" in md


def test_categorical_variables_show_codes_with_their_value_labels():
    s = summary()
    s["profile"] = {"variables": [], "correlation": None, "categories": [
        {"variable": "sex", "categories": [{"code": "1", "original": 60.0, "masked": 55.0},
                                           {"code": "2", "original": 40.0, "masked": 38.0}],
         "other": None, "missing": [0.0, 7.0]},
        {"variable": "age", "categories": [{"code": "7", "original": 30.0, "masked": 30.0}],
         "other": {"categories": 12, "original": 70.0, "masked": 70.0}, "missing": [0.0, 0.0]}]}
    s["value_labels"] = {"sex": {"1": "Male", "2": "Fe<male>"}, "region": {"1": "North"}}
    text = report.render_html(s)
    table = next(t for t in Page(text).tables if t and t[0][:2] == ["Variable", "Category"])
    assert table == [["Variable", "Category", "Original (records)", "Released (records)"],
                     ["sex", "1 (Male)", "60", "55"], ["sex", "2 (Fe<male>)", "40", "38"],
                     ["sex", "missing (suppressed)", "0", "7"], ["age", "7", "30", "30"],
                     ["age", "12 other categories", "70", "70"]]
    assert "2 (Fe&lt;male&gt;)" in text and "<male>" not in text  # a label is text, never markup
    assert "shown beside the codes of the labelled variables: sex." in text  # region is not categorical here
    run = next(t for t in Page(text).tables if t and t[0] == ["Field", "Value"])
    assert ["Value labels", "region, sex"] in run
    assert text.index('id="categories"') < text.index('id="metrics"') and text.count("<img") == 2  # + the R-U map
    s["value_labels"] = {}
    md = report.render_markdown(s)
    assert "| sex | 1 | 60 | 55 |" in md and "No categorical variable carries value labels" in md


def test_category_profile_counts_both_files_and_lists_the_most_frequent():
    from sdc_tasks.evaluation.profile import category_profile
    from sdc_tasks.metrics.categorical_loss import MISSING_TEXT

    original = pd.Series({"10": 5.0, "2": 9.0, "3": 1.0, "x": 4.0, "y": 2.0, "rare": 1.0})
    masked = pd.Series({"10": 5.0, "2": 8.0, "x": 4.0, "y": 1.0, "new": 1.0, MISSING_TEXT: 3.0})
    out = category_profile("v", original, masked, shown=3)
    assert out["categories"] == [{"code": "2", "original": 9.0, "masked": 8.0},
                                 {"code": "10", "original": 5.0, "masked": 5.0},
                                 {"code": "x", "original": 4.0, "masked": 4.0}]
    assert out["other"] == {"categories": 4, "original": 4.0, "masked": 2.0} and out["missing"] == [0.0, 3.0]
    every = category_profile("v", original, masked)  # "3" and "rare" left the release: counted, never named
    assert [c["code"] for c in every["categories"]] == ["2", "10", "new", "x", "y"]
    assert every["other"] == {"categories": 2, "original": 2.0, "masked": 0.0}


def test_no_before_and_after_table_without_original_figures():
    text = report.render_html(summary())
    assert 'id="risk-before-after"' not in text and "Original file" not in text


def test_gate_limits_bound_the_map_axes_and_the_chosen_point_is_ringed():
    limits = report.gate_limits({"DLD": 40.0, "ID": 80.0, "IL": 20.0, "PLD": 90.0}, {"DLD": 0.5, "ID": 0.5})
    assert [(lim.axis, lim.value) for lim in limits] == [("dr", 60.0), ("il", 20.0)]
    assert report.gate_limits({"DLD": 40.0}, {"DLD": 0.5, "ID": 0.5}) == ()  # ID unbounded: the axis is too
    fig = report.ru_map_figure(RU_POINTS, limits=limits, chosen="mdav k=3")
    ax = fig.axes[0]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "chosen: mdav k=3" in legend and any(t.startswith("limits DLD <= 40 and ID <= 80") for t in legend)
    ring = next(c for c in ax.collections if c.get_label() == "chosen: mdav k=3")
    assert ring.get_offsets().tolist() == [[45.0, 8.0]]
    assert [line.get_xdata()[0] for line in ax.lines if line.get_label().startswith("limits")] == [60.0]


def test_ru_map_png_is_valid_and_deterministic(tmp_path):
    first = report.ru_map_png(RU_POINTS, tmp_path / "a.png")
    second = report.ru_map_png(copy.deepcopy(RU_POINTS), tmp_path / "b.png")
    assert first == tmp_path / "a.png"
    assert first.read_bytes()[:8] == PNG_MAGIC
    assert first.read_bytes() == second.read_bytes()


@pytest.mark.parametrize("ru_points, expected", [
    (RU_POINTS[:1], {"markdown", "html", "ru_map"}),
    ([], {"markdown", "html"}),
])
def test_write_report_writes_files(tmp_path, ru_points, expected):
    s = summary()
    s["ru_points"] = ru_points
    paths = report.write_report(s, tmp_path / "out")
    assert set(paths) == expected
    if "ru_map" in paths:  # the page holds the map itself, the same picture as the file beside it
        assert report.Picture("", paths["ru_map"].read_bytes()).data_uri() in paths["html"].read_text()
    assert all(p.is_file() and p.parent == tmp_path / "out" for p in paths.values())
    assert {p.name for p in (tmp_path / "out").iterdir()} == {p.name for p in paths.values()}
    assert paths["markdown"].name == "report.md" and paths["html"].name == "report.html"


def test_the_method_chain_names_the_parameters_that_are_set():
    """Unset parameters (None, an empty list) are left out of a step's text; a recode map is shown by its size."""
    from sdc_tasks.report.headline import method_chain

    steps = [{"method": "local_suppression", "params": {"k": 3, "threshold": None, "never": [], "missing": "any"}},
             {"method": "recode", "params": {"rules": {"roof": {"map": {1: "a", 2: "a", 3: "b"}}}}},
             {"method": "mdav", "params": {"group_size": None}}]
    assert method_chain(steps) == ("local_suppression (k=3, missing=any) -> recode (rules: roof map=3 categories "
                                   "into 2) -> mdav (none)")
