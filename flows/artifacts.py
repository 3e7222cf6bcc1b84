"""Prefect UI artifacts shared by the flows: the Markdown report and the metric table (statistics only)."""

from __future__ import annotations

from prefect.artifacts import create_markdown_artifact, create_table_artifact

from sdc_tasks.report import metrics_table_rows, render_markdown


def publish_artifacts(summary: dict, key: str, name: str) -> None:
    """Publish ``summary`` as a Markdown report artifact and a metric table artifact under ``key``."""
    create_markdown_artifact(render_markdown(summary, ru_map_name=None), key=f"{key}-report",
                             description=f"Report for {name}")
    rows = [{k: r[k] for k in ("group", "measure", "value")} for r in metrics_table_rows(summary["metrics"])]
    create_table_artifact(rows, key=f"{key}-metrics", description=f"Metrics of {name}")
