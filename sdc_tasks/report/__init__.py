"""Reports: the document model and its Markdown and HTML renderers (document.py), the headline block
(headline.py), the metric rows from the catalogue (metric_table.py), the pictures (figures.py, ru_map.py) and the
release or evaluation report (release_report.py)."""

from sdc_tasks.report.document import (
    Picture,
    Section,
    Table,
    format_value,
    html_page,
    markdown_document,
    markdown_section,
)
from sdc_tasks.report.figures import png_bytes
from sdc_tasks.report.headline import headline, headline_html, headline_markdown, metrics_headline, release_status
from sdc_tasks.report.metric_table import metrics_table_rows
from sdc_tasks.report.release_report import render_html, render_markdown, report_sections, ru_picture, write_report
from sdc_tasks.report.ru_map import RU_MAP_NAME, gate_limits, pareto_front, ru_map_figure, ru_map_png

__all__ = [
    "RU_MAP_NAME",
    "Picture",
    "Section",
    "Table",
    "format_value",
    "gate_limits",
    "headline",
    "headline_html",
    "headline_markdown",
    "html_page",
    "markdown_document",
    "markdown_section",
    "metrics_headline",
    "metrics_table_rows",
    "pareto_front",
    "png_bytes",
    "release_status",
    "render_html",
    "render_markdown",
    "report_sections",
    "ru_map_figure",
    "ru_map_png",
    "ru_picture",
    "write_report",
]
