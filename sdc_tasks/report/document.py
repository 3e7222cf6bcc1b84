"""The report document model (a Section holds paragraphs, pictures and a Table of formatted cells) and its two
renderers, Markdown and standalone HTML (inline CSS and images, no scripts or external resources; every cell
escaped).
"""

from __future__ import annotations

import base64
import html
import numbers
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Table:
    """A table of already formatted cells; ``links``: per row, the in-page anchor its first cell links to, and
    ``ids``: per row, the anchor the row itself carries (HTML only; None or "" for none); ``numbers_right``:
    whether number cells are right-aligned (a column of numbers; not a list of fields and values)."""

    headers: tuple[str, ...]
    rows: list[tuple[str, ...]]
    links: list[str | None] | None = None
    ids: list[str | None] | None = None
    numbers_right: bool = True


@dataclass(frozen=True)
class Picture:
    """A PNG picture with its caption; ``file``: the name of the copy written beside the report, if any."""

    caption: str
    png: bytes
    file: str | None = None

    def data_uri(self) -> str:
        """The picture as a data: URI (base64), for a page that must load nothing else."""
        return "data:image/png;base64," + base64.b64encode(self.png).decode("ascii")


@dataclass(frozen=True)
class Section:
    """One report section: heading, anchor (HTML id), paragraphs, pictures and an optional table."""

    heading: str
    level: int = 2
    paragraphs: list[str] = field(default_factory=list)
    pictures: list[Picture] = field(default_factory=list)
    table: Table | None = None
    anchor: str | None = None


COUNT_UNITS = ("records", "cells", "count", "flag")


def unit_value_text(value, unit: str) -> str:
    """A measure's value as a report shows it: a whole number of records, cells, terms or a flag without
    decimals, anything else by :func:`format_value`."""
    if unit in COUNT_UNITS and isinstance(value, numbers.Real) and float(value).is_integer():
        return str(int(value))
    return format_value(value)


def format_value(value) -> str:
    """Return a number with 4 significant digits (f"{v:.4g}", floats keep a ".0": 5.0), other values as text."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        text = f"{float(value):.4g}"
        return text if any(c in text for c in ".enai") else text + ".0"
    return "n/a" if value is None else str(value)


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


def markdown_pictures(pictures: list[Picture], inline: bool) -> list[str]:
    """Markdown image lines: ``inline`` every picture as a data: URI (a Prefect artifact, which can load nothing
    else); otherwise the pictures written beside the document by file name, the others named as in report.html."""
    lines = []
    for picture in pictures:
        if inline or picture.file:
            lines += [f"![{_md_cell(picture.caption)}]({picture.data_uri() if inline else picture.file})", ""]
        else:
            lines += [f"*Figure in report.html: {picture.caption}.*", ""]
    return lines


def markdown_section(section: Section, inline: bool = False) -> list[str]:
    """Return one section as Markdown lines, ending with a blank line (``inline``: pictures as data: URIs)."""
    lines = ["#" * section.level + " " + section.heading, ""]
    for paragraph in section.paragraphs:
        lines += [paragraph, ""]
    lines += markdown_pictures(section.pictures, inline)
    if section.table:
        lines += [*markdown_table(section.table), ""]
    return lines


def markdown_document(title: str, headline: str | list[str], sections: list[Section], inline: bool = False) -> str:
    """Return a Markdown document: the title, the headline (a paragraph or lines), then the sections."""
    lines = [f"# {title}", "", *([headline, ""] if isinstance(headline, str) else headline)]
    for section in sections:
        lines += markdown_section(section, inline)
    return "\n".join(lines).rstrip("\n") + "\n"


# ---------------------------------------------------------------- HTML


HEADLINE_CSS = """
.status { padding: .6rem 1rem; border-radius: 4px; font-size: 1.25rem; margin: .4rem 0 .8rem; }
.status-PUBLISHED { background: #e3f4e3; border: 1px solid #7bbf7b; }
.status-REFUSED { background: #fbe3e3; border: 1px solid #d27b7b; }
.status-HELD { background: #fdf3d8; border: 1px solid #d8b45a; }
.status-EVALUATED { background: #e8eef8; border: 1px solid #8aa4cc; }
.warning { padding: .4rem 1rem; background: #fdf3d8; border: 1px solid #d8b45a; border-radius: 4px; }
.headline { border: 1px solid #ccc; border-radius: 6px; padding: .3rem 1rem .6rem; margin-bottom: 1.5rem; }
.headline table.checks tr.fail td { background: #fbe3e3; font-weight: 600; }
.headline table.checks tr.pass td:last-child { color: #2d7a2d; }
.cards { display: flex; flex-wrap: wrap; gap: .6rem; margin: .6rem 0; }
.card { border: 1px solid #ccc; border-radius: 5px; padding: .35rem .7rem; min-width: 7.5rem; background: #fafafa; }
.card .key { font-weight: 600; font-size: .9rem; } .card .value { font-size: 1.45rem; }
.card .note { font-size: .72rem; color: #555; }
table.facts th { width: 9rem; }
""".strip()
"""The headline block's style (also sent with the Jupyter view of Metrics, which has no page style)."""

HTML_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 1.5rem auto; max-width: 68rem;
       padding: 0 1rem; color: #222; line-height: 1.4; }
h1 { font-size: 1.6rem; margin-bottom: .6rem; } h2 { margin-top: 2rem; border-bottom: 1px solid #ddd; }
h3 { margin-bottom: .3rem; }
table { border-collapse: collapse; margin: .5rem 0 1rem; font-size: .92rem; }
th, td { border: 1px solid #ccc; padding: .2rem .55rem; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
th { background: #f3f3f3; }
a { color: #1a4f8b; text-decoration: none; } a:hover { text-decoration: underline; }
figure { margin: .8rem 0; } figcaption { font-size: .85rem; color: #555; }
img { max-width: 100%; border: 1px solid #ddd; }
{HEADLINE_CSS}
@media print {
  body { max-width: none; margin: 0; font-size: 10pt; }
  h2 { break-after: avoid; } table, figure, .headline, .card { break-inside: avoid; }
  a { color: inherit; } .status { border-width: 2px; }
  * { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
}
""".strip().replace("{HEADLINE_CSS}", HEADLINE_CSS)


def html_text(text) -> str:
    """Return text HTML-escaped (quotes included)."""
    return html.escape(str(text), quote=True)


def _is_numeric_text(text: str) -> bool:
    """Whether a formatted cell is a number (right-aligned in HTML)."""
    try:
        float(text)
    except ValueError:
        return False
    return True


def html_cell(text: str, link: str | None = None, numbers_right: bool = True) -> str:
    """One escaped table cell, a number right-aligned (``numbers_right``), linking to the in-page anchor ``link``
    when given."""
    inner = f'<a href="#{html_text(link)}">{html_text(text)}</a>' if link else html_text(text)
    return f'<td class="num">{inner}</td>' if numbers_right and _is_numeric_text(str(text)) else f"<td>{inner}</td>"


def html_table(table: Table) -> str:
    """Return a table as HTML with every cell escaped (first cells linked as ``table.links`` says)."""
    head = "".join(f"<th>{html_text(h)}</th>" for h in table.headers)
    links = table.links or [None] * len(table.rows)
    ids = [f' id="{html_text(i)}"' if i else "" for i in (table.ids or [None] * len(table.rows))]
    body = "".join(f"<tr{row_id}>" + "".join(html_cell(c, link if i == 0 else None, table.numbers_right)
                                             for i, c in enumerate(row))
                   + "</tr>\n" for row, link, row_id in zip(table.rows, links, ids))
    return f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}</tbody>\n</table>"


def html_picture(picture: Picture) -> str:
    """A picture as an inline (data: URI) image with its caption."""
    return (f'<figure><img src="{picture.data_uri()}" alt="{html_text(picture.caption)}">'
            f"<figcaption>{html_text(picture.caption)}</figcaption></figure>")


def html_section(section: Section) -> str:
    """Return one section as HTML."""
    anchor = f' id="{html_text(section.anchor)}"' if section.anchor else ""
    parts = [f"<h{section.level}{anchor}>{html_text(section.heading)}</h{section.level}>"]
    parts += [f"<p>{html_text(p)}</p>" for p in section.paragraphs]
    parts += [html_picture(p) for p in section.pictures]
    if section.table:
        parts.append(html_table(section.table))
    return "\n".join(parts)


def html_page(title: str, headline_html: str, sections: list[Section]) -> str:
    """Return a standalone HTML page (inline CSS and images, no scripts or external resources): the escaped
    title, an already escaped headline, then the sections."""
    body = "\n".join(html_section(s) for s in sections)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        f"<title>{html_text(title)}</title>\n<style>\n{HTML_CSS}\n</style>\n</head>\n<body>\n"
        f"<h1>{html_text(title)}</h1>\n{headline_html}\n{body}\n</body>\n</html>\n"
    )
