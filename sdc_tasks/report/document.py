"""The report document model (a Section holds paragraphs, an image and a Table of formatted cells) and its two
renderers, Markdown and standalone HTML (inline CSS, no scripts or external assets; every cell escaped).
"""

from __future__ import annotations

import html
import numbers
from dataclasses import dataclass, field


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


def html_page(title: str, headline_html: str, sections: list[Section]) -> str:
    """Return a standalone HTML page (inline CSS, no scripts or external assets): the escaped title, an
    already escaped headline, then the sections."""
    body = "\n".join(html_section(s) for s in sections)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<title>{_esc(title)}</title>\n<style>\n{HTML_CSS}\n</style>\n</head>\n<body>\n"
        f"<h1>{_esc(title)}</h1>\n{headline_html}\n{body}\n</body>\n</html>\n"
    )
