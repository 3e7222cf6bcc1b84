"""Prefect UI artifacts shared by the flows: the report as Markdown with its pictures inline (data: URIs, so the
UI shows them without reaching any file), and one metric table per group (information loss, disclosure risk,
scores) with values as the reports write them, to 4 significant digits (statistics and paths only)."""

from __future__ import annotations

from prefect.artifacts import create_markdown_artifact, create_table_artifact

from sdc_tasks.metrics.catalogue import GROUP_DR, GROUP_IL, GROUP_SCORE
from sdc_tasks.report import metrics_table_rows, render_markdown, ru_picture
from sdc_tasks.report.document import unit_value_text

TABLES = {"il": GROUP_IL, "dr": GROUP_DR, "scores": GROUP_SCORE}


def publish_artifacts(summary: dict, key: str, name: str) -> None:
    """Publish ``summary`` under ``key``: the Markdown report with every picture inline (the output directory,
    ``summary["run"]["output_dir"]``, is named in it as text) and a table artifact per metric group that has
    rows."""
    create_markdown_artifact(render_markdown(summary, ru_picture(summary), inline=True), key=f"{key}-report",
                             description=f"Report for {name}")
    rows = metrics_table_rows(summary["metrics"])
    for suffix, group in TABLES.items():
        table = [{"measure": r["measure"], "value": unit_value_text(r["value"], r["unit"]), "unit": r["unit"],
                  "description": r["description"]} for r in rows if r["group"] == group]
        if table:
            create_table_artifact(table, key=f"{key}-{suffix}", description=f"{group} of {name}")
