"""Prefect UI artifacts shared by the flows: the report as Markdown with its pictures inline (data: URIs, so the
UI shows them without reaching any file), and one metric table per group (information loss, disclosure risk,
scores) with values as the reports write them, to 4 significant digits (statistics and paths only)."""

from __future__ import annotations

from pathlib import Path

from prefect.artifacts import create_markdown_artifact, create_table_artifact

from sdc_tasks.metrics.catalogue import GROUP_DR, GROUP_IL, GROUP_SCORE
from sdc_tasks.pipeline.summary import ReleaseSummary, publish
from sdc_tasks.report import Drawn, drawn_report, metrics_table_rows, render_markdown
from sdc_tasks.report.document import unit_value_text

TABLES = {"il": GROUP_IL, "dr": GROUP_DR, "scores": GROUP_SCORE}


def published_with_artifacts(summary: ReleaseSummary, root: Path, key: str) -> None:
    """Write the summary's files into ``root`` (``sdc_tasks.pipeline.summary.publish``) and publish its UI artifacts
    under ``key``, the report's pictures drawn once for both."""
    shown = summary.as_dict()
    drawn = drawn_report(shown)
    publish(summary, root, drawn)
    publish_artifacts(shown, key, summary.name, drawn)


def publish_artifacts(summary: dict, key: str, name: str, drawn: Drawn) -> None:
    """Publish ``summary`` under ``key``: the Markdown report with every picture inline (the output directory,
    ``summary["run"]["output_dir"]``, is named in it as text) and a table artifact per metric group that has
    rows (``drawn``: the report's pictures, :func:`sdc_tasks.report.drawn_report`)."""
    ru, sections = drawn
    create_markdown_artifact(render_markdown(summary, ru, inline=True, sections=sections), key=f"{key}-report",
                             description=f"Report for {name}")
    rows = metrics_table_rows(summary["metrics"])
    for suffix, group in TABLES.items():
        table = [{"measure": r["measure"], "value": unit_value_text(r["value"], r["unit"]), "unit": r["unit"],
                  "description": r["description"]} for r in rows if r["group"] == group]
        if table:
            create_table_artifact(table, key=f"{key}-{suffix}", description=f"{group} of {name}")
