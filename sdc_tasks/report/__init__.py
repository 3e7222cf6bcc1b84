"""Reports: the document model and its Markdown and HTML renderers (document.py), the headline block
(headline.py), the metric rows from the catalogue (metric_table.py), the pictures (figures.py, ru_map.py) and the
release or evaluation report (release_report.py). The names of the modules that draw are imported on first use, so
that the text parts (headline, tables) do not load matplotlib: a command that writes no picture starts faster."""

import importlib

from sdc_tasks.report.document import (
    Picture,
    Section,
    Table,
    format_value,
    html_page,
    markdown_document,
    markdown_section,
)
from sdc_tasks.report.headline import headline, headline_html, headline_markdown, metrics_headline, release_status
from sdc_tasks.report.metric_table import metrics_table_rows

DRAWING = {
    **dict.fromkeys(["png_bytes"], "figures"),
    **dict.fromkeys(["Drawn", "drawn_report", "render_html", "render_markdown", "report_sections", "ru_picture",
                     "write_report"], "release_report"),
    **dict.fromkeys(["RU_MAP_NAME", "gate_limits", "pareto_front", "ru_map_figure", "ru_map_png"], "ru_map"),
}
"""The names this package exports from modules that import matplotlib, by module."""

__all__ = [
    "Drawn",
    "RU_MAP_NAME",
    "Picture",
    "Section",
    "Table",
    "drawn_report",
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


def __getattr__(name: str):
    """A name of :data:`DRAWING`, imported from its module on first use."""
    if name not in DRAWING:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{DRAWING[name]}"), name)
