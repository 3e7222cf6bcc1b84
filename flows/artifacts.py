"""Prefect UI artifacts shared by the flows: the Markdown report, one metric table per group (information loss,
disclosure risk, scores), the R-U map and a link to the output (statistics and paths only)."""

from __future__ import annotations

from pathlib import Path

from prefect.artifacts import (
    create_image_artifact,
    create_link_artifact,
    create_markdown_artifact,
    create_table_artifact,
)

from sdc_tasks.metrics.catalogue import GROUP_DR, GROUP_IL, GROUP_SCORE
from sdc_tasks.report import RU_MAP_NAME, metrics_table_rows, render_markdown

TABLES = {"il": GROUP_IL, "dr": GROUP_DR, "scores": GROUP_SCORE}


def publish_artifacts(summary: dict, key: str, name: str) -> None:
    """Publish ``summary`` under ``key``: the Markdown report, a table artifact per metric group that has rows,
    the R-U map and a link to the run's output directory (``summary["run"]["output_dir"]``, where its files
    are once it has finished)."""
    create_markdown_artifact(render_markdown(summary, ru_map_name=None), key=f"{key}-report",
                             description=f"Report for {name}")
    rows = metrics_table_rows(summary["metrics"])
    for suffix, group in TABLES.items():
        table = [{k: r[k] for k in ("measure", "value", "unit", "description")} for r in rows if r["group"] == group]
        if table:
            create_table_artifact(table, key=f"{key}-{suffix}", description=f"{group} of {name}")
    out = Path(summary["run"]["output_dir"]).resolve()
    create_image_artifact((out / RU_MAP_NAME).as_uri(), key=f"{key}-ru-map", description=f"R-U map of {name}")
    create_link_artifact(out.as_uri(), link_text=str(out), key=f"{key}-output", description=f"Output of {name}")
