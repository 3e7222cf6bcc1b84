"""Release reports: Markdown and standalone HTML summaries of one release, and its R-U confidentiality map.

Everything rendered here comes from the pipeline's ``summary`` dict, which holds run facts, gate checks and
aggregate metrics only: the report never sees, and so never prints, record-level values.
Metric keys, groups and descriptions follow docs/metrics.md; the R-U map follows
statistical_databases_survey.txt, "R-U maps" (pairs of disclosure risk and information loss per release strategy).
"""

from __future__ import annotations

import html
import json
import math
import numbers
import re
from dataclasses import dataclass, field
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

RU_MAP_NAME = "ru_map.png"
FIGSIZE_IN = (7.0, 5.0)
DPI = 100
ORIGINAL_LABEL = "original data (IL=0, DR=100)"

GROUP_IL = "Information loss"
GROUP_DR = "Disclosure risk"
GROUP_SCORE = "Score"
GROUP_OTHER = "Other"
GROUP_ORDER = (GROUP_IL, GROUP_DR, GROUP_SCORE, GROUP_OTHER)

BOOKKEEPING_KEYS = frozenset({"n", "n_masked", "p", "key_vars", "seed", "method", "params", "categorical",
                              "categorical_keys"})

MATRICES = (
    ("X", "data matrix X"),
    ("Xbar", "attribute means"),
    ("V", "covariance matrix"),
    ("S", "variances"),
    ("R", "correlation matrix"),
    ("RF", "PC loadings (RF)"),
    ("C", "PC communalities"),
    ("F", "factor score coefficients"),
)
MATRIX_ERRORS = (("MSE", "Mean square error"), ("MAE", "Mean absolute error"), ("MV", "Mean variation"))


@dataclass(frozen=True)
class MetricSpec:
    """One docs/metrics.md key (or numbered family of keys): a full-match regex, its group and a description."""

    pattern: str
    group: str
    description: str


def _exact(key: str, group: str, description: str) -> MetricSpec:
    """Return the spec for one literal metric key."""
    return MetricSpec(re.escape(key), group, description)


# docs/metrics.md order; "{i}" in a description is the key's number.
METRIC_SPECS: tuple[MetricSpec, ...] = (
    _exact("IL1", GROUP_IL, "Mean variation of cells, X vs X' (%)"),
    _exact("IL2", GROUP_IL, "Mean variation of attribute means (%)"),
    _exact("IL3", GROUP_IL, "Mean variation of covariances (%)"),
    _exact("IL4", GROUP_IL, "Mean variation of variances (%)"),
    _exact("IL5", GROUP_IL, "Mean absolute error of correlations (%)"),
    _exact("IL", GROUP_IL, "Mean of IL1..IL5 (%)"),
    _exact("IL1s", GROUP_IL, "Mean absolute cell error scaled by sqrt(2) x original sd (%)"),
    *(
        _exact(f"{err}_{mat}", GROUP_IL, f"{err_name}, {mat_name} (fraction)")
        for mat, mat_name in MATRICES
        for err, err_name in MATRIX_ERRORS
    ),
    _exact("PIL_Q", GROUP_IL, "Probabilistic IL of quantiles 5-95 % (fraction)"),
    _exact("PIL_m1", GROUP_IL, "Probabilistic IL of means (fraction)"),
    _exact("PIL_m2", GROUP_IL, "Probabilistic IL of variances (fraction)"),
    _exact("PIL_m11", GROUP_IL, "Probabilistic IL of covariances (fraction)"),
    _exact("PIL_r", GROUP_IL, "Probabilistic IL of correlations (fraction)"),
    _exact("PIL", GROUP_IL, "100 x mean of the five PIL measures (%)"),
    _exact("brMAE", GROUP_IL, "Bounded rank-based MAE (fraction)"),
    _exact("brMSE", GROUP_IL, "Bounded rank-based MSE (fraction)"),
    MetricSpec(r"DLD_(\d+)", GROUP_DR, "Distance linkage on key variables 1..{i}: % correctly linked"),
    MetricSpec(r"DLD2_(\d+)", GROUP_DR, "Distance linkage on key variables 1..{i}: % linked to 2nd nearest"),
    _exact("DLD", GROUP_DR, "Mean of DLD_1..DLD_m over the key variables (%)"),
    MetricSpec(r"DLDpub_(\d+)", GROUP_DR, "Distance linkage as in chapter 6 Table 1, keys 1..{i}: % linked"),
    _exact("DLDpub", GROUP_DR, "Mean of DLDpub_1..DLDpub_m (Table 1 setup, docs/reproduction.md)"),
    _exact("PLD", GROUP_DR, "Probabilistic record linkage: % correctly paired"),
    MetricSpec(r"PLDpub_(\d+)", GROUP_DR, "Probabilistic linkage as in chapter 6 Table 1, keys 1..{i}: % linked"),
    _exact("PLDpub", GROUP_DR, "Mean of PLDpub_1..PLDpub_m (Table 1 setup, docs/reproduction.md)"),
    MetricSpec(r"ID_(\d+)", GROUP_DR, "Interval disclosure, rank interval +-{i} % of n (%)"),
    _exact("ID", GROUP_DR, "Mean of ID_1..ID_10 (%)"),
    _exact("SDID", GROUP_DR, "Original values within +-k x sd of their masked value (%)"),
    _exact("Dist", GROUP_IL, "Categorical: sum of original-to-masked category distances (ordinal |rank diff|/(K-1))"),
    _exact("Dist_mean", GROUP_IL, "Categorical: Dist per cell (fraction)"),
    _exact("CTBIL", GROUP_IL, "Categorical: absolute cell differences of all 1- and 2-variable contingency tables"),
    _exact("ACTBIL", GROUP_IL, "Categorical: CTBIL per cell of those tables"),
    _exact("EBIL_MF", GROUP_IL, "Categorical: sum of H(V | V'), natural log, P(V) from the evaluated file"),
    _exact("PRIL_MF", GROUP_IL, "Categorical: sum of -ln P(V = i | V' = j), P(V) from the evaluated file"),
    _exact("EBIL_RF", GROUP_IL, "Categorical: EBIL with P(V) from the reference file"),
    _exact("PRIL_RF", GROUP_IL, "Categorical: PRIL with P(V) from the reference file"),
    _exact("kanon_min_group", GROUP_DR, "Categorical keys: smallest group of compatible records (k of k-anonymity)"),
    MetricSpec(r"kanon_violations_(\d+)", GROUP_DR, "Categorical keys: records in groups smaller than {i} (count)"),
    _exact("sample_uniques", GROUP_DR, "Categorical keys: records unique on the keys (count)"),
    _exact("sample_uniques_percent", GROUP_DR, "Categorical keys: records unique on the keys (%)"),
    _exact("indiv_risk_max", GROUP_DR, "Largest individual re-identification risk (Benedetti-Franconi, fraction)"),
    _exact("indiv_risk_mean", GROUP_DR, "Mean individual re-identification risk (fraction)"),
    _exact("expected_reidentifications", GROUP_DR, "Sum of the individual risks (records)"),
    _exact("records_risk_above_0.1", GROUP_DR, "Records with individual risk above 0.1 (%)"),
    _exact("PLD_cat", GROUP_DR, "Probabilistic linkage on the categorical keys: % correctly paired"),
    _exact("score", GROUP_SCORE, "0.5 IL + 0.125 DLD + 0.125 PLD + 0.25 ID"),
    _exact("score_simple", GROUP_SCORE, "0.5 IL + 0.25 DLD + 0.25 ID"),
    _exact("score_pil", GROUP_SCORE, "score with PIL in place of IL"),
    _exact("IL1_zero_cells", GROUP_OTHER, "Cells with x_ij = 0, left out of IL1"),
    MetricSpec(r"(\w+)_undefined_terms", GROUP_OTHER,
               "Terms of {i} left out as undefined (zero denominator or not finite)"),
    MetricSpec(r"(\w+)_not_finite", GROUP_OTHER, "{i} left out: its value is not finite (beyond the float range)"),
)


@dataclass(frozen=True)
class Table:
    """A table of already formatted cells."""

    headers: tuple[str, ...]
    rows: list[tuple[str, ...]]


@dataclass(frozen=True)
class Section:
    """One report section: heading, paragraphs, an optional image and an optional table."""

    heading: str
    level: int = 2
    paragraphs: list[str] = field(default_factory=list)
    image: str | None = None
    table: Table | None = None


# ---------------------------------------------------------------- R-U map


def _finite_points(points: list[dict]) -> list[dict]:
    """Return the points whose il and dr are both finite numbers (the only ones that can be placed on a map)."""
    return [p for p in points if math.isfinite(float(p["il"])) and math.isfinite(float(p["dr"]))]


def _dominates(a: dict, b: dict) -> bool:
    """Return whether ``a`` is no worse than ``b`` in both il and dr and strictly better in one (minimising)."""
    return a["il"] <= b["il"] and a["dr"] <= b["dr"] and (a["il"] < b["il"] or a["dr"] < b["dr"])


def pareto_front(points: list[dict]) -> list[dict]:
    """Return the non-dominated points, minimising both il and dr, sorted by dr then il.

    The best trade-offs of an R-U confidentiality map (statistical_databases_survey.txt, "R-U maps"); points
    with a non-finite il or dr are left out, equal points are all kept.
    """
    finite = _finite_points(points)
    front = [p for p in finite if not any(_dominates(q, p) for q in finite)]
    return sorted(front, key=lambda p: (p["dr"], p["il"], str(p.get("label", ""))))


def _axis_top(values: list[float], floor: float) -> float:
    """Return an upper axis limit leaving headroom above the largest value (at least ``floor``)."""
    return max([floor, *values]) * 1.12


LABEL_GAP = 0.06
MARKERS = ("o", "s", "^", "v", "D", "P", "X", "*", "<", ">", "h", "p")


def _marker_groups(points: list[dict]) -> list[tuple[str, list[dict], dict]]:
    """Return (legend name, points, scatter style) per marker group: one group per distinct ``group`` key in
    first-seen order, or a single "release strategies" group when no point names a group."""
    names = list(dict.fromkeys(p.get("group") for p in points))
    if names in ([], [None]):
        return [("release strategies", points, {"marker": "o", "color": "tab:blue"})]
    return [(str(g), [p for p in points if p.get("group") == g],
             {"marker": MARKERS[i % len(MARKERS)], "color": f"C{i % 10}"}) for i, g in enumerate(names)]


def _spaced(points: list[dict], x_span: float, y_span: float) -> list[dict]:
    """Return the points, in order, that lie at least LABEL_GAP (a fraction of the axes) from every point kept
    before them, so that their labels do not overlap."""
    kept: list[dict] = []
    for p in points:
        if all(math.hypot((p["dr"] - q["dr"]) / x_span, (p["il"] - q["il"]) / y_span) >= LABEL_GAP for q in kept):
            kept.append(p)
    return kept


def ru_map_png(
    points: list[dict],
    path,
    risk_label: str = "Disclosure risk (DLD+ID)/2, %",
    loss_label: str = "Information loss IL, %",
    label_front_only: bool = False,
) -> Path:
    """Write the R-U confidentiality map of :func:`ru_map_figure` as a deterministic PNG; return its path.

    Rendered with the Agg canvas at a fixed size and dpi, and saved without a Software tag, so equal inputs
    give equal bytes.
    """
    path = Path(path)
    fig = ru_map_figure(points, risk_label, loss_label, label_front_only)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", metadata={"Software": None})
    return path


def ru_map_figure(
    points: list[dict],
    risk_label: str = "Disclosure risk (DLD+ID)/2, %",
    loss_label: str = "Information loss IL, %",
    label_front_only: bool = False,
) -> Figure:
    """An R-U confidentiality map (risk on x, information loss on y) as a matplotlib Figure (Agg canvas, fixed
    size and dpi; nothing is written or shown).

    Layout after statistical_databases_survey.txt, "R-U maps": one labelled marker per release strategy (one
    marker and colour per ``group`` when points name one, e.g. a method family), the unprotected original data
    as a reference at (DR=100, IL=0), and the Pareto front as a step line when there are two points or more;
    ``label_front_only`` labels only Pareto points, at least LABEL_GAP of the axes apart (for maps of many
    points). Lower-left is better.
    """
    placed = _finite_points(points)
    fig = Figure(figsize=FIGSIZE_IN, dpi=DPI)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    groups = _marker_groups(placed)
    for name, members, style in groups:
        ax.scatter([p["dr"] for p in members], [p["il"] for p in members], s=40, zorder=3, label=name, **style)
    front = pareto_front(placed)
    x_top = _axis_top([p["dr"] for p in placed], 100.0)
    y_top = _axis_top([p["il"] for p in placed], 1.0)
    for p in (_spaced(front, x_top, y_top) if label_front_only else placed):
        ax.annotate(str(p.get("label", "")), (p["dr"], p["il"]), xytext=(5, 5), textcoords="offset points",
                    fontsize=8)
    if len(front) >= 2:
        ax.step([p["dr"] for p in front], [p["il"] for p in front], where="post", color="tab:orange",
                linewidth=1.5, zorder=2, label="Pareto front")
    ax.scatter([100.0], [0.0], marker="X", s=90, color="black", zorder=4, clip_on=False, label=ORIGINAL_LABEL)
    ax.set_xlim(-0.02 * x_top, x_top)
    ax.set_ylim(-0.03 * y_top, y_top)
    ax.set_xlabel(risk_label)
    ax.set_ylabel(loss_label)
    ax.set_title("R-U confidentiality map (lower-left is better)")
    ax.grid(True, color="0.9")
    ax.legend(loc="best", fontsize=8, ncol=2 if len(groups) > 4 else 1)
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------- metrics


def _is_metric_value(key: str, value) -> bool:
    """Return whether a metrics entry is a reportable number (not bookkeeping, not a bool, list or string)."""
    return (
        key not in BOOKKEEPING_KEYS
        and isinstance(value, numbers.Real)
        and not isinstance(value, bool)
    )


@dataclass(frozen=True)
class MetricRow:
    """A metric key resolved against METRIC_SPECS, with its sort position."""

    measure: str
    value: float | int
    group: str
    description: str
    position: tuple[int, int, int, str]


def metric_row(key: str, value: numbers.Real) -> MetricRow:
    """Return a metric resolved to its group, description and position (group, docs/metrics.md order, number, key).

    Counts (integers, such as IL1_zero_cells) stay integers; every other value becomes a float.
    """
    value = value if isinstance(value, numbers.Integral) else float(value)
    for index, spec in enumerate(METRIC_SPECS):
        match = re.fullmatch(spec.pattern, key)
        if match:
            part = match.group(1) if match.groups() else ""
            number = int(part) if part.isdigit() else 0
            position = (GROUP_ORDER.index(spec.group), index, number, key)
            return MetricRow(key, value, spec.group, spec.description.format(i=part), position)
    return MetricRow(key, value, GROUP_OTHER, "", (GROUP_ORDER.index(GROUP_OTHER), len(METRIC_SPECS), 0, key))


def metrics_table_rows(metrics: dict) -> list[dict]:
    """Return rows {"measure", "value", "group", "description"} for the numeric metrics, in docs/metrics.md order.

    Groups come in the order Information loss, Disclosure risk, Score, Other; unknown numeric keys close the
    list under "Other" sorted by name, and non-numeric bookkeeping keys are skipped (docs/metrics.md).
    """
    rows = sorted(
        (metric_row(key, value) for key, value in metrics.items() if _is_metric_value(key, value)),
        key=lambda row: row.position,
    )
    return [{"measure": r.measure, "value": r.value, "group": r.group, "description": r.description} for r in rows]


# ---------------------------------------------------------------- gate


NEGATED_OPS = {"<=": ">", "<": ">=", ">=": "<", ">": "<=", "==": "!="}


def format_value(value) -> str:
    """Return a number with 4 significant digits (f"{v:.4g}", floats keep a ".0": 5.0), other values as text."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        text = f"{float(value):.4g}"
        return text if any(c in text for c in ".enai") else text + ".0"
    return "n/a" if value is None else str(value)


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
    note = ("Definitions: docs/metrics.md. Percent unless marked (fraction); lower is better for every loss, "
            "risk and score measure.")
    intro = Section("Metrics", paragraphs=[note if rows else "No metrics were recorded."])
    groups = [
        Section(group, level=3, table=Table(
            ("Measure", "Value", "Description"),
            [(r["measure"], format_value(r["value"]), r["description"]) for r in rows if r["group"] == group]))
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


# ---------------------------------------------------------------- Markdown


def _md_cell(text: str) -> str:
    """Return text safe inside a Markdown table cell (pipes escaped, line breaks flattened)."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown_table(table: Table) -> list[str]:
    """Return a Markdown pipe table as lines."""
    return [
        "| " + " | ".join(_md_cell(h) for h in table.headers) + " |",
        "|" + "|".join("---" for _ in table.headers) + "|",
        *("| " + " | ".join(_md_cell(c) for c in row) + " |" for row in table.rows),
    ]


def markdown_section(section: Section) -> list[str]:
    """Return one section as Markdown lines, ending with a blank line."""
    lines = ["#" * section.level + " " + section.heading, ""]
    for paragraph in section.paragraphs:
        lines += [paragraph, ""]
    if section.image:
        lines += [f"![R-U confidentiality map]({section.image})", ""]
    if section.table:
        lines += [*markdown_table(section.table), ""]
    return lines


def render_markdown(summary: dict, ru_map_name: str | None = RU_MAP_NAME) -> str:
    """Return the release report as Markdown: headline, run, gate, variables, steps, metrics, timings, R-U map."""
    status, detail = release_status(summary["gate"])
    return markdown_document(summary["title"], f"**{status}**: {detail}", report_sections(summary, ru_map_name))


def markdown_document(title: str, headline: str, sections: list[Section]) -> str:
    """Return a Markdown document: the title, a headline paragraph, then the sections."""
    lines = [f"# {title}", "", headline, ""]
    for section in sections:
        lines += markdown_section(section)
    return "\n".join(lines).rstrip("\n") + "\n"


# ---------------------------------------------------------------- HTML


HTML_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto; max-width: 60rem;
       padding: 0 1rem; color: #222; line-height: 1.4; }
h1 { font-size: 1.6rem; } h2 { margin-top: 2rem; border-bottom: 1px solid #ddd; } h3 { margin-bottom: .3rem; }
table { border-collapse: collapse; margin: .5rem 0 1rem; }
th, td { border: 1px solid #ccc; padding: .25rem .6rem; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
.status { padding: .6rem 1rem; border-radius: 4px; font-size: 1.1rem; }
.status-PUBLISHED { background: #e3f4e3; border: 1px solid #7bbf7b; }
.status-REFUSED { background: #fbe3e3; border: 1px solid #d27b7b; }
.status-HELD { background: #fdf3d8; border: 1px solid #d8b45a; }
img { max-width: 100%; border: 1px solid #ddd; }
""".strip()


def _esc(text) -> str:
    """Return text HTML-escaped (quotes included)."""
    return html.escape(str(text), quote=True)


def html_table(table: Table) -> str:
    """Return a table as HTML with every cell escaped."""
    head = "".join(f"<th>{_esc(h)}</th>" for h in table.headers)
    body = "".join("<tr>" + "".join(f"<td>{_esc(c)}</td>" for c in row) + "</tr>\n" for row in table.rows)
    return f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}</tbody>\n</table>"


def html_section(section: Section) -> str:
    """Return one section as HTML."""
    parts = [f"<h{section.level}>{_esc(section.heading)}</h{section.level}>"]
    parts += [f"<p>{_esc(p)}</p>" for p in section.paragraphs]
    if section.image:
        parts.append(f'<p><img src="{_esc(section.image)}" alt="R-U confidentiality map"></p>')
    if section.table:
        parts.append(html_table(section.table))
    return "\n".join(parts)


def render_html(summary: dict, ru_map_name: str | None = RU_MAP_NAME) -> str:
    """Return the release report as a standalone HTML page (inline CSS, no scripts or external assets)."""
    status, detail = release_status(summary["gate"])
    headline = f'<p class="status status-{_esc(status)}"><strong>{_esc(status)}</strong>: {_esc(detail)}</p>'
    return html_page(summary["title"], headline, report_sections(summary, ru_map_name))


def html_page(title: str, headline_html: str, sections: list[Section]) -> str:
    """Return a standalone HTML page (inline CSS, no scripts or external assets): the escaped title, an
    already escaped headline, then the sections."""
    body = "\n".join(html_section(s) for s in sections)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<title>{_esc(title)}</title>\n<style>\n{HTML_CSS}\n</style>\n</head>\n<body>\n"
        f"<h1>{_esc(title)}</h1>\n{headline_html}\n{body}\n</body>\n</html>\n"
    )


# ---------------------------------------------------------------- files


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
