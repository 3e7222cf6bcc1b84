"""The report of one release or evaluation: the gate wording, the sections (run, gate, variables, steps, metrics,
timings, R-U map) and the files report.md, report.html and ru_map.png.

Everything rendered here comes from the pipeline's ``summary`` dict, which holds run facts, gate checks and
aggregate metrics only: the report never sees, and so never prints, record-level values.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from sdc_tasks.metrics.catalogue import GROUP_ORDER
from sdc_tasks.report.document import Section, Table, format_value, html_page, markdown_document
from sdc_tasks.report.metric_table import metrics_table_rows
from sdc_tasks.report.ru_map import ORIGINAL_LABEL, RU_MAP_NAME, pareto_front, ru_map_png

NEGATED_OPS = {"<=": ">", "<": ">=", ">=": "<", ">": "<=", "==": "!="}


def failing_check_text(check: dict) -> str:
    """Return a failed gate check as a sentence such as "DLD = 7.2 > limit 5.0"."""
    op = NEGATED_OPS.get(check["op"], f"fails {check['op']}")
    return f"{check['measure']} = {format_value(check['value'])} {op} limit {format_value(check['limit'])}"


def failing_checks(gate: dict) -> list[dict]:
    """Return the gate checks that did not pass."""
    return [c for c in gate["checks"] if not c["passed"]]


def release_status(gate: dict | None) -> tuple[str, str]:
    """Return (PUBLISHED | REFUSED | HELD | EVALUATED, explanation) for the release gate's outcome
    (``gate`` None: an evaluation of two files, which publishes nothing)."""
    if gate is None:
        return "EVALUATED", "evaluation only: no release gate applies and nothing is published"
    failed = "; ".join(failing_check_text(c) for c in failing_checks(gate)) or "none recorded"
    all_passed = f"all {len(gate['checks'])} gate checks passed"
    if gate["published"] and gate["passed"]:
        return "PUBLISHED", all_passed
    if gate["published"]:
        return "PUBLISHED", f"the output was published although the gate failed: {failed}"
    if not gate["passed"]:
        return "REFUSED", f"failing checks: {failed}"
    return "HELD", f"{all_passed}, but the output was not published"


# ---------------------------------------------------------------- sections


def _names(values: list[str]) -> str:
    """Return a list of variable names as one comma-separated string ("none" when empty)."""
    return ", ".join(values) if values else "none"


def _params_text(params: dict) -> str:
    """Return method parameters as "k=3, p=15" (nested values as compact JSON)."""
    return ", ".join(
        f"{key}={value if isinstance(value, (str, int, float)) else json.dumps(value, sort_keys=True)}"
        for key, value in params.items()
    ) or "none"


def run_section(run: dict) -> Section:
    """Return the run-facts section."""
    rows = [
        ("Specification", run["spec_name"]),
        ("Specification hash", run["spec_hash"]),
        ("Seed", str(run["seed"])),
        ("Started", run["started"]),
        ("Finished", run["finished"]),
        ("Records (original)", str(run["n_records"])),
        ("Records (masked)", str(run["n_masked"])),
        ("Output directory", run["output_dir"]),
        ("Package version", run["package_version"]),
    ]
    return Section("Run", table=Table(("Field", "Value"), rows))


def gate_section(gate: dict) -> Section:
    """Return the release-gate section: one row per check."""
    rows = [
        (c["measure"], format_value(c["value"]), f"{c['op']} {format_value(c['limit'])}",
         "pass" if c["passed"] else "FAIL")
        for c in gate["checks"]
    ]
    summary = f"Gate {'passed' if gate['passed'] else 'failed'}; output {'' if gate['published'] else 'not '}published."
    return Section("Release gate", paragraphs=[summary],
                   table=Table(("Measure", "Value", "Limit", "Result"), rows) if rows else None)


def variables_section(variables: dict) -> Section:
    """Return the variables section (masked, key, dropped, passed through, strata)."""
    rows = [
        ("Masked", _names(variables["masked"])),
        ("Key (intruder's)", _names(variables["key"])),
        ("Dropped", _names(variables["dropped"])),
        ("Passed through unchanged", _names(variables.get("passed_through", []))),
        ("Strata", variables["strata"] or "none"),
    ]
    return Section("Variables", table=Table(("Role", "Variables"), rows))


def steps_section(steps: list[dict]) -> Section:
    """Return the masking-steps section: one row per step in application order."""
    rows = [
        (str(i), s["method"], _params_text(s["params"]), _names(s["variables"]), str(s["blocks"]),
         f"{s['seconds']:.2f}")
        for i, s in enumerate(steps, start=1)
    ]
    if not rows:
        return Section("Masking steps", paragraphs=["No masking steps were recorded."])
    return Section("Masking steps", table=Table(("#", "Method", "Parameters", "Variables", "Blocks", "Seconds"), rows))


def metric_sections(metrics: dict) -> list[Section]:
    """Return the metrics heading and one table section per metric group (docs/metrics.md definitions)."""
    rows = metrics_table_rows(metrics)
    note = ("Definitions: docs/metrics.md in the project's documentation. Lower is better for every loss, risk "
            "and score measure unless its description says otherwise.")
    intro = Section("Metrics", paragraphs=[note if rows else "No metrics were recorded."])
    groups = [
        Section(group, level=3, table=Table(
            ("Measure", "Value", "Unit", "Description"),
            [(r["measure"], format_value(r["value"]), r["unit"], r["description"]) for r in rows
             if r["group"] == group]))
        for group in GROUP_ORDER
        if any(r["group"] == group for r in rows)
    ]
    return [intro, *groups]


def timings_section(stage_seconds: dict) -> Section:
    """Return the stage-timings section with a total row."""
    rows = [(stage, f"{seconds:.2f}") for stage, seconds in stage_seconds.items()]
    rows.append(("total", f"{sum(stage_seconds.values()):.2f}"))
    return Section("Stage timings", table=Table(("Stage", "Seconds"), rows))


def ru_section(points: list[dict], ru_map_name: str | None) -> Section:
    """Return the R-U map section: the image (when named) and the plotted points with Pareto membership."""
    if not points:
        return Section("R-U confidentiality map", paragraphs=["No R-U points were recorded."])
    front = {id(p) for p in pareto_front(points)}
    rows = [(str(p["label"]), format_value(p["dr"]), format_value(p["il"]), "yes" if id(p) in front else "no")
            for p in points]
    note = ("Disclosure risk against information loss per release strategy; lower-left is better, the "
            f"reference is the {ORIGINAL_LABEL} (statistical_databases_survey.txt, R-U maps).")
    return Section("R-U confidentiality map", paragraphs=[note], image=ru_map_name,
                   table=Table(("Point", "Disclosure risk, %", "Information loss, %", "Pareto front"), rows))


def report_sections(summary: dict, ru_map_name: str | None) -> list[Section]:
    """Return every report section after the headline, in reading order."""
    return [
        run_section(summary["run"]),
        *([gate_section(summary["gate"])] if summary["gate"] is not None else []),
        variables_section(summary["variables"]),
        steps_section(summary["steps"]),
        *metric_sections(summary["metrics"]),
        timings_section(summary["stage_seconds"]),
        ru_section(summary["ru_points"], ru_map_name),
    ]


# ---------------------------------------------------------------- documents and files


def render_markdown(summary: dict, ru_map_name: str | None = RU_MAP_NAME) -> str:
    """Return the release report as Markdown: headline, run, gate, variables, steps, metrics, timings, R-U map."""
    status, detail = release_status(summary["gate"])
    return markdown_document(summary["title"], f"**{status}**: {detail}", report_sections(summary, ru_map_name))


def render_html(summary: dict, ru_map_name: str | None = RU_MAP_NAME) -> str:
    """Return the release report as a standalone HTML page (inline CSS, no scripts or external assets)."""
    status, detail = release_status(summary["gate"])
    status_html, detail_html = html.escape(status, quote=True), html.escape(detail, quote=True)
    headline = f'<p class="status status-{status_html}"><strong>{status_html}</strong>: {detail_html}</p>'
    return html_page(summary["title"], headline, report_sections(summary, ru_map_name))


def write_report(summary: dict, out_dir) -> dict[str, Path]:
    """Write report.md, report.html and (when there are R-U points) ru_map.png into ``out_dir``.

    Returns {"markdown": path, "html": path} plus "ru_map": path when the map was drawn.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    if summary["ru_points"]:
        paths["ru_map"] = ru_map_png(summary["ru_points"], out / RU_MAP_NAME)
    map_name = RU_MAP_NAME if "ru_map" in paths else None
    paths["markdown"] = out / "report.md"
    paths["markdown"].write_text(render_markdown(summary, map_name), encoding="utf-8")
    paths["html"] = out / "report.html"
    paths["html"].write_text(render_html(summary, map_name), encoding="utf-8")
    return paths
