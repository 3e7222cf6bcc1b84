"""Tests for sdc_tasks.report: Pareto front, headline, metric order and units, HTML escaping, deterministic PNG,
files."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest

from sdc_tasks import report

ROOT = Path(__file__).resolve().parents[1]

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
                 "checks": [{"measure": "DLD", "value": dld, "limit": 5.0, "op": "<=", "passed": passed},
                            {"measure": "IL", "value": 12.0, "limit": 40.0, "op": "<=", "passed": True}],
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


def test_markdown_headline_refused_names_failing_check():
    md = report.render_markdown(summary(passed=False))
    assert "**REFUSED**" in md
    assert "DLD = 7.2 > limit 5.0" in md
    assert "PUBLISHED" not in md
    assert "IL = 12.0 > limit" not in md


def test_markdown_headline_published_when_gate_passed():
    md = report.render_markdown(summary(passed=True))
    assert "**PUBLISHED**" in md
    assert "REFUSED" not in md
    assert md.startswith("# Release report: census-demo\n")
    assert "![R-U confidentiality map](ru_map.png)" in md
    assert "| 1 | mdav | k=3 | AFNLWGT, AGI | 4 | 0.50 |" in md


def test_headline_held_when_gate_passed_but_not_published():
    gate = summary()["gate"] | {"published": False}
    assert report.release_status(gate)[0] == "HELD"


def test_metric_rows_follow_catalogue_order_and_skip_bookkeeping():
    rows = report.metrics_table_rows(summary()["metrics"])
    assert [r["measure"] for r in rows] == [
        "IL1", "IL", "MSE_V", "DLD_1", "DLD_2", "DLD", "ID_1", "ID_2", "ID", "score_simple", "my_extra"]
    groups = [r["group"] for r in rows]
    assert groups == ["Information loss"] * 3 + ["Disclosure risk"] * 6 + ["Score", "Other"]
    assert all(r["description"] for r in rows if r["group"] != "Other")
    assert "key variables 1..2" in rows[4]["description"]
    assert [r["unit"] for r in rows[:3]] == ["percent", "percent", "fourth-power data units"]
    assert rows[-1]["unit"] == rows[-1]["description"] == ""


def test_metric_tables_show_the_catalogue_units_and_name_the_definitions_file():
    s = summary()
    s["metrics"] |= {"MAE_X": 2.5, "MV_X": 0.1, "kanon_min_group": 3.0}
    md = report.render_markdown(s)
    assert "| Measure | Value | Unit | Description |" in md
    assert re.search(r"\| MAE_X \| 2\.5 \| data units \| Mean absolute error", md)
    assert re.search(r"\| MV_X \| 0\.1 \| fraction \|", md)
    assert "(fraction)" not in md and "(%)" not in md
    assert "k-anonymity) (higher is better)" in md
    cited = re.search(r"Definitions: (\S+)", md).group(1)
    assert (ROOT / cited).is_file()


def test_metric_groups_appear_in_order_in_markdown():
    md = report.render_markdown(summary())
    heads = [md.index(f"### {g}") for g in ("Information loss", "Disclosure risk", "Score", "Other")]
    assert heads == sorted(heads)
    assert "| DLD | 4.2 |" in md


def test_html_escapes_title_and_is_standalone():
    s = summary()
    s["title"] = "<script>alert(1)</script> & co"
    page = report.render_html(s)
    assert "<script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; co" in page
    assert '<img src="ru_map.png"' in page
    assert "http" not in page


def test_reports_without_map_name_have_no_image():
    assert "ru_map.png" not in report.render_markdown(summary(), ru_map_name=None)
    assert "<img" not in report.render_html(summary(), ru_map_name=None)


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
    assert all(p.is_file() and p.parent == tmp_path / "out" for p in paths.values())
    assert {p.name for p in (tmp_path / "out").iterdir()} == {p.name for p in paths.values()}
    assert paths["markdown"].name == "report.md" and paths["html"].name == "report.html"
