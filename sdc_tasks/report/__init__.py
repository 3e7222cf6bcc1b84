"""Reports: the document model and its Markdown and HTML renderers (document.py), the metric rows from the
catalogue (metric_table.py), the R-U map (ru_map.py) and the release or evaluation report (release_report.py)."""

from sdc_tasks.report.document import Section, Table, format_value, html_page, markdown_document, markdown_section
from sdc_tasks.report.metric_table import metrics_table_rows
from sdc_tasks.report.release_report import release_status, render_html, render_markdown, write_report
from sdc_tasks.report.ru_map import RU_MAP_NAME, pareto_front, ru_map_png

__all__ = [
    "RU_MAP_NAME",
    "Section",
    "Table",
    "format_value",
    "html_page",
    "markdown_document",
    "markdown_section",
    "metrics_table_rows",
    "pareto_front",
    "release_status",
    "render_html",
    "render_markdown",
    "ru_map_png",
    "write_report",
]
