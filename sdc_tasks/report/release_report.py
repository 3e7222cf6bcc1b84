"""The report of one release or evaluation: the headline first (headline.py), then per-variable figures, the
linkage curve, correlations, the R-U map, the categorical risk before and after masking, the metric tables, the
run's details and the definitions of every measure shown; written as report.md, report.html (one file, images
inline) and ru_map.png.

Everything rendered here comes from the pipeline's ``summary`` dict, which holds run facts, gate checks,
aggregate metrics and the per-variable profile (sdc_tasks.evaluation.profile): the report computes no measure,
never sees record-level values, and so never prints them.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from sdc_tasks.masking.postmask_outcome import outcome_from_dict
from sdc_tasks.metrics.catalogue import (
    DOCS,
    GROUP_ORDER,
    HIGHER,
    LOWER,
    MEASURES,
    RECORDS,
    Measure,
    anchor_of,
    derived_from,
    measure_of,
    range_text,
    row_anchor,
)
from sdc_tasks.report.document import (
    Picture,
    Section,
    Table,
    format_value,
    html_page,
    markdown_document,
    unit_value_text,
)
from sdc_tasks.report.figures import (
    category_counts_figure,
    correlation_difference_figure,
    distributions_figure,
    dld_curve_figure,
    numbered,
    png_bytes,
    risk_before_after_figure,
)
from sdc_tasks.report.headline import gate_maxima, headline, headline_html, headline_markdown, method_chain, params_text
from sdc_tasks.report.metric_table import metrics_table_rows, risk_changes
from sdc_tasks.report.ru_map import RU_MAP_NAME, gate_limits, pareto_front, ru_map_figure

DEFINITION_PREFIX = "def-"
RELEASE_RISK_WEIGHTS = {"DLD": 0.5, "ID": 0.5}  # the release map's risk axis (DLD + ID) / 2 (summary.ru_points)
RISK_BEFORE_KEYS = ("kanon_violations_2", "kanon_violations_3", "kanon_violations_5", "sample_uniques",
                    "sample_uniques_percent", "indiv_risk_max", "indiv_risk_mean", "expected_reidentifications",
                    "records_risk_above_0.1")
DISTRIBUTION_COLUMNS = ("mean", "sd", "q05", "q25", "q50", "q75", "q95")
VARIABLE_MEASURES = ("IL1", "PIL_Q", "PIL_m1", "PIL_m2", "brMAE", "ID")

def _names(values: list[str]) -> str:
    """A list of variable names as one comma-separated string ("none" when empty)."""
    return ", ".join(values) if values else "none"


def _link(key: str) -> str:
    """The in-page anchor of a key's definition."""
    return DEFINITION_PREFIX + anchor_of(key)


# ---------------------------------------------------------------- pictures


def ru_picture(summary: dict) -> Picture | None:
    """The R-U map with the gate's limits (written beside the report as ru_map.png), None without a point."""
    if not summary["ru_points"]:
        return None
    figure = ru_map_figure(summary["ru_points"], limits=gate_limits(gate_maxima(summary["gate"]),
                                                                    RELEASE_RISK_WEIGHTS))
    return Picture("R-U confidentiality map: information loss IL against disclosure risk (DLD + ID) / 2, with the "
                   "gate's limits", png_bytes(figure), RU_MAP_NAME)


# ---------------------------------------------------------------- sections


def variables_sections(profile: dict | None) -> list[Section]:
    """Per variable: original vs masked distributions (table and picture) and each variable's share of the
    measures (docs/metrics.md, restricted to the variable)."""
    if not profile or not profile["variables"]:
        return []
    variables = profile["variables"]
    rows = [(v["variable"], which, *(format_value(v[which][c]) for c in DISTRIBUTION_COLUMNS))
            for v in variables for which in ("original", "masked")]
    distributions = Section(
        "Per variable: original vs masked", anchor="variables",
        paragraphs=[f"Over the {variables[0]['n']} paired records, in the variables' own units (data units); "
                    "sd is the population sd, q05..q95 the 5 %, 25 %, 50 %, 75 % and 95 % quantiles."],
        table=Table(("Variable", "File", "Mean", "SD", "Q05", "Q25", "Median", "Q75", "Q95"), rows),
        pictures=[Picture("Original (blue) and masked (orange) distribution of each variable on common bins; the "
                          "counts of values outside the shown range (original / masked) are in each title",
                          png_bytes(distributions_figure(variables)))])
    units = {k: measure_of(k).unit for k in VARIABLE_MEASURES}
    measure_rows = [(v["variable"], *(format_value(v["measures"][k]) for k in VARIABLE_MEASURES)) for v in variables]
    shares = Section(
        "Per variable: information loss and disclosure risk", level=3,
        paragraphs=["Each measure computed on this variable alone (docs/metrics.md): IL1 the mean relative cell "
                    "error, PIL_Q/PIL_m1/PIL_m2 the probabilistic loss of its quantiles, mean and variance, brMAE "
                    "its bounded rank error, ID its interval disclosure (mean of ID_1..ID_10). Lower is better; "
                    "n/a: undefined for this variable."],
        table=Table(("Variable", *(f"{k} ({units[k]})" for k in VARIABLE_MEASURES)), measure_rows))
    return [distributions, shares]


def category_text(code: str, labels: dict[str, str] | None) -> str:
    """A category as a report names it: its code, with its value label beside it when the input file gives one
    ("2 (Female)")."""
    label = (labels or {}).get(code)
    return f"{code} ({label})" if label is not None else code


def labelled_text(value_labels: dict[str, dict[str, str]], variables: list[str]) -> str:
    """Which of ``variables`` carry value labels from the input file, as a sentence."""
    labelled = [v for v in variables if v in value_labels]
    if not labelled:
        return "No categorical variable carries value labels from the input file."
    return (f"Value labels from the input file (SPSS, Stata or SAS) are shown beside the codes of the labelled "
            f"variables: {', '.join(labelled)}.")


def categorical_sections(profile: dict | None, value_labels: dict[str, dict[str, str]]) -> list[Section]:
    """Per categorical variable, its records per category in the original file and in the release (table and
    picture), each category named by its code and, for a labelled variable, its value label."""
    profiles = (profile or {}).get("categories") or []
    if not profiles:
        return []
    names = [[category_text(c["code"], value_labels.get(p["variable"])) for c in p["categories"]] for p in profiles]
    def count(value: float) -> str:
        """A number of records, whole."""
        return unit_value_text(value, RECORDS)

    rows = []
    for p, categories in zip(profiles, names):
        rows += [(p["variable"], name, count(c["original"]), count(c["masked"]))
                 for name, c in zip(categories, p["categories"])]
        if p["other"]:
            rows.append((p["variable"], f"{p['other']['categories']} other categories", count(p["other"]["original"]),
                         count(p["other"]["masked"])))
        if any(p["missing"]):
            rows.append((p["variable"], "missing (suppressed)", *(count(m) for m in p["missing"])))
    variables = [p["variable"] for p in profiles]
    return [Section("Per categorical variable: original vs released", anchor="categories",
                    paragraphs=["Records per category in the original file and in the release. Only categories "
                                "the release holds are named (a category masking removed is confidential); those "
                                "and, for a variable with many categories, all but the most frequent are counted "
                                "together as other categories; missing counts values without a category "
                                "(suppressed ones included). " + labelled_text(value_labels, variables)],
                    pictures=[Picture("Records per category, original (blue) and released (orange)",
                                      png_bytes(category_counts_figure(profiles, names)))],
                    table=Table(("Variable", "Category", "Original (records)", "Released (records)"), rows))]


def linkage_section(metrics: dict, gate: dict | None) -> list[Section]:
    """The DLD_1..DLD_m curve over the number of key variables (when DLD was computed)."""
    curve = numbered(metrics, "DLD")
    if not curve:
        return []
    rows = [(str(i), format_value(v), format_value(metrics.get(f"DLD2_{i}"))) for i, v in curve]
    figure = dld_curve_figure(metrics, gate_maxima(gate).get("DLD"))
    return [Section("Distance-based linkage by key variables", anchor="dld-curve",
                    paragraphs=["Percent of masked records whose nearest original record on the first i key "
                                "variables is their own (DLD_i) or their own is the 2nd nearest (DLD2_i); DLD is "
                                "the mean of DLD_i (docs/metrics.md)."],
                    pictures=[Picture("DLD_i and DLD2_i against the number of key variables, with DLD and its gate "
                                      "limit", png_bytes(figure))],
                    table=Table(("Key variables i", "DLD_i (percent)", "DLD2_i (percent)"), rows))]


def correlation_section(profile: dict | None) -> list[Section]:
    """The heatmap of masked minus original correlations (two or more continuous variables)."""
    if not profile or not profile.get("correlation"):
        return []
    return [Section("Correlations", anchor="correlations",
                    paragraphs=["Masked minus original Pearson correlation of each pair of variables (IL5 is 100 "
                                "times the mean of their absolute values)."],
                    pictures=[Picture("Correlation matrix difference, masked minus original",
                                      png_bytes(correlation_difference_figure(profile["correlation"])))])]


def ru_section(points: list[dict], picture: Picture | None) -> Section:
    """The R-U map section: the picture (with the gate's limits) and the plotted points with Pareto membership."""
    if not points:
        return Section("R-U confidentiality map", paragraphs=["No R-U points were recorded."])
    front = {id(p) for p in pareto_front(points)}
    rows = [(str(p["label"]), format_value(p["dr"]), format_value(p["il"]), "yes" if id(p) in front else "no")
            for p in points]
    note = ("Disclosure risk = (DLD + ID) / 2 against information loss IL, both in percent "
            "(statistical_databases_survey.txt, R-U maps); the original data sits at (100, 0); dotted lines are the "
            "gate's limits. Lower-left is better.")
    return Section("R-U confidentiality map", anchor="ru-map", paragraphs=[note],
                   pictures=[picture] if picture else [],
                   table=Table(("Point", "Disclosure risk (percent)", "Information loss (percent)", "Pareto front"),
                               rows))


def risk_before_after_section(metrics: dict) -> list[Section]:
    """Every categorical disclosure-risk figure of the original file (before masking) beside the release's (after)
    and its change, as sdcMicro prints the risk before and after (the ``<key>_before`` and ``<key>_change_percent``
    keys of the metrics, :func:`~sdc_tasks.report.metric_table.risk_changes`); the main figures drawn."""
    changes = risk_changes(metrics)
    if not changes:
        return []
    rows = [(c.key, unit_value_text(c.original, c.unit), unit_value_text(c.released, c.unit), c.change_text(),
             c.unit, "higher" if c.direction == HIGHER else "lower") for c in changes]
    drawn = [c for c in changes if c.key in RISK_BEFORE_KEYS and c.released is not None]
    pictures = [Picture("Risk before and after masking", png_bytes(risk_before_after_figure(
        [(f"{c.key} ({c.unit})", c.original, c.released) for c in drawn])))] if drawn else []
    return [Section("Categorical disclosure risk before and after masking", anchor="risk-before-after",
                    paragraphs=["Each disclosure-risk figure of the categorical keys computed on the original file "
                                "as it is computed on the release (metrics.json: <key>_before) beside the "
                                "release's, and the change in percent of the original's value (<key>_change_percent; "
                                "\"new\" where the original's was 0); the gate can limit both (docs/metrics.md, "
                                "docs/categorical.md)."],
                    pictures=pictures,
                    table=Table(("Figure", "Original file", "Released", "Change", "Unit", "Better"), rows,
                                links=[DEFINITION_PREFIX + c.anchor for c in changes]))]


def metric_sections(metrics: dict) -> list[Section]:
    """The metrics heading and one table section per metric group, each measure linking to its definition."""
    rows = [r for r in metrics_table_rows(metrics) if derived_from(r["measure"]) is None]
    note = ("Every number with its unit; each measure links to its definition at the end of this report and in "
            f"{DOCS}. Lower is better for every loss, risk and score measure unless its description says "
            "otherwise. The original file's risk figures and their changes are in the before-and-after table.")
    intro = Section("All metrics", anchor="metrics", paragraphs=[note if rows else "No metrics were recorded."])
    groups = []
    for group in GROUP_ORDER:
        members = [r for r in rows if r["group"] == group]
        if members:
            groups.append(Section(group, level=3, table=Table(
                ("Measure", "Value", "Unit", "Description"),
                [(r["measure"], unit_value_text(r["value"], r["unit"]), r["unit"] or "unknown", r["description"])
                 for r in members],
                links=[DEFINITION_PREFIX + r["anchor"] if r["anchor"] else None for r in members])))
    return [intro, *groups]


def run_section(summary: dict) -> Section:
    """The run's details: specification, seed, times, output, variables' roles and version."""
    run, variables = summary["run"], summary["variables"]
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
        ("Masked variables", _names(variables["masked"])),
        ("Key variables (intruder's)", _names(variables["key"])),
        ("Dropped", _names(variables["dropped"])),
        ("Passed through unchanged", _names(variables.get("passed_through", []))),
        ("Strata", variables["strata"] or "none"),
        ("Value labels", _names(sorted(summary.get("value_labels") or {}))),
    ]
    return Section("Run details", anchor="run", table=Table(("Field", "Value"), rows, numbers_right=False))


def steps_section(steps: list[dict]) -> Section:
    """The masking steps in application order, with their blocks and seconds, and what a post-masking step
    reached (E before and after, TargetE, IL1 ratio, tries)."""
    rows = [(str(i), s["method"], params_text(s["params"]), _names(s["variables"]), str(s["blocks"]),
             f"{s['seconds']:.2f}", outcome_from_dict(s["outcome"]).text() if s.get("outcome") else "")
            for i, s in enumerate(steps, start=1)]
    if not rows:
        return Section("Masking steps", paragraphs=["No masking steps were recorded."])
    return Section("Masking steps", paragraphs=[f"Method chain: {method_chain(steps)}."],
                   table=Table(("#", "Method", "Parameters", "Variables", "Blocks", "Seconds", "Reached"), rows))


def timings_section(stage_seconds: dict) -> Section:
    """The stage timings with a total row."""
    rows = [(stage, f"{seconds:.2f}") for stage, seconds in stage_seconds.items()]
    rows.append(("total", f"{sum(stage_seconds.values()):.2f}"))
    return Section("Stage timings", table=Table(("Stage", "Seconds"), rows))


def definition_text(measure: Measure) -> str:
    """A catalogue row's description ("i" for the number or key it is about), range and direction."""
    better = {LOWER: "lower is better", HIGHER: "higher is better"}.get(measure.direction)
    extra = [f"range {range_text(measure.range)}" if measure.range else "", better or ""]
    return "; ".join([measure.description.format(i="i"), *(e for e in extra if e)])


def definitions_section(metrics: dict) -> Section:
    """One row per catalogue entry of the measures shown: its definition in short, unit, direction, range,
    source and its entry in docs/metrics.md."""
    shown = {anchor_of(r["measure"]) for r in metrics_table_rows(metrics) if r["anchor"]}
    entries = [m for m in MEASURES if row_anchor(m) in shown]
    rows = [(m.key, definition_text(m), m.unit, m.source, f"{DOCS}#{row_anchor(m)}") for m in entries]
    return Section("Definitions", anchor="definitions",
                   paragraphs=[f"The measures shown, as the metric catalogue describes them; the formulas are in "
                               f"{DOCS} of the sdc-pipeline documentation (entry named in the last column)."],
                   table=Table(("Key", "Definition", "Unit", "Source", "Entry"), rows,
                               ids=[DEFINITION_PREFIX + row_anchor(m) for m in entries]))


def report_sections(summary: dict, ru: Picture | None) -> list[Section]:
    """Every report section after the headline, in reading order (``ru``: the R-U map picture)."""
    metrics, profile = summary["metrics"], summary.get("profile")
    return [
        *variables_sections(profile),
        *categorical_sections(profile, summary.get("value_labels") or {}),
        *linkage_section(metrics, summary["gate"]),
        *correlation_section(profile),
        ru_section(summary["ru_points"], ru),
        *risk_before_after_section(metrics),
        *metric_sections(metrics),
        steps_section(summary["steps"]),
        run_section(summary),
        timings_section(summary["stage_seconds"]),
        definitions_section(metrics),
    ]


# ---------------------------------------------------------------- documents and files


def render_markdown(summary: dict, ru: Picture | None = None, inline: bool = False,
                    sections: list[Section] | None = None) -> str:
    """The report as Markdown: headline, then the sections (``inline``: every picture as a data: URI, for a
    Prefect artifact; otherwise only pictures written beside it, by file name; ``sections``: those
    :func:`report_sections` gives for ``summary`` and ``ru``, when already drawn)."""
    return markdown_document(summary["title"], headline_markdown(headline(summary)),
                             report_sections(summary, ru) if sections is None else sections, inline)


def render_html(summary: dict, ru: Picture | None = None, sections: list[Section] | None = None) -> str:
    """The report as one standalone HTML page (inline CSS and images; no script, no external resource;
    ``sections`` as for :func:`render_markdown`)."""
    return html_page(summary["title"], headline_html(headline(summary)),
                     report_sections(summary, ru) if sections is None else sections)


class Drawn(NamedTuple):
    """A report's pictures, drawn once for every document of it: the R-U map (None without R-U points) and the
    sections after the headline."""

    ru: Picture | None
    sections: list[Section]


def drawn_report(summary: dict) -> Drawn:
    """The R-U map and the sections of ``summary``'s report (:func:`report_sections`)."""
    ru = ru_picture(summary)
    return Drawn(ru, report_sections(summary, ru))


def write_report(summary: dict, out_dir, drawn: Drawn | None = None) -> dict[str, Path]:
    """Write report.md, report.html and (when there are R-U points) ru_map.png into ``out_dir`` (``drawn``: the
    summary's pictures when already drawn, :func:`drawn_report`).

    Returns {"markdown": path, "html": path} plus "ru_map": path when the map was drawn.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    ru, sections = drawn or drawn_report(summary)  # the pictures drawn once for both documents
    if ru is not None:
        paths["ru_map"] = out / RU_MAP_NAME
        paths["ru_map"].write_bytes(ru.png)
    paths["markdown"] = out / "report.md"
    paths["markdown"].write_text(render_markdown(summary, ru, sections=sections), encoding="utf-8")
    paths["html"] = out / "report.html"
    paths["html"].write_text(render_html(summary, ru, sections=sections), encoding="utf-8")
    return paths
