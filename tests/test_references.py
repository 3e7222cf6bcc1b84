"""Every source the library, the flows and the documents cite resolves inside the repository.

Scanned: ``sdc_tasks/**/*.py``, ``flows/**/*.py``, ``docs/*.md`` and ``README.md``, for three kinds of citation:

- seed tags, file names such as ``pil_measures.txt`` that name a source paper: each needs an entry in
  docs/references.md, a heading that names the tag;
- author-year citations (``Jaro 1989``, ``Hansen and Mukherjee 2003``, ``Liew et al. 1985``): the surname and
  the year must stand together in one entry (heading and body) of docs/references.md;
- documents: a path with a folder (``docs/risk.md``, ``../shared/x.md``) or a project document named in
  capitals (``README.md``) must be a file inside the repository. A path that starts with ``../`` is read from
  the citing file's folder, any other from the repository root.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REFERENCES = ROOT / "docs" / "references.md"

SEED_TAG = re.compile(r"\b[a-z_]+\.txt\b")
NAME = r"[A-Z][a-z]+(?:-[A-Z][a-z]+)?"
AUTHOR_YEAR = re.compile(rf"\b({NAME})(?: et al\.|,?\s+and\s+{NAME})?(?:'s)?,?\s+\(?((?:19|20)\d\d)[a-z]?\)?(?![\d-])")
DOC_PATH = re.compile(r"(?<![\w./-])((?:\.\./)*(?:[\w-]+/)+[\w.-]+\.(?:md|txt))\b")
CAPS_DOC = re.compile(r"(?<![\w./-])([A-Z][A-Z_]*\.md)\b")
HEADING = re.compile(r"^#+ ", re.MULTILINE)


def scanned_files(root: Path) -> list[Path]:
    """The files whose citations must resolve: library and flow sources, docs/*.md, README.md."""
    files = sorted(root.glob("sdc_tasks/**/*.py")) + sorted(root.glob("flows/**/*.py"))
    return files + sorted(root.glob("docs/*.md")) + [root / "README.md"]


def citations(pattern: re.Pattern, files: list[Path]) -> dict[tuple[str, ...], list[tuple[Path, int]]]:
    """Each distinct match of ``pattern`` (its groups, or the whole match) -> the (file, line) places citing it."""
    found: dict[tuple[str, ...], list[tuple[Path, int]]] = {}
    for path in files:
        text = path.read_text(encoding="utf-8")
        for m in pattern.finditer(text):
            found.setdefault(m.groups() or (m.group(0),), []).append((path, text.count("\n", 0, m.start()) + 1))
    return found


def reference_entries(text: str) -> list[str]:
    """docs/references.md cut at its headings: one string per entry, the heading line first."""
    starts = [m.start() for m in HEADING.finditer(text)]
    return [text[a:b] for a, b in zip(starts, starts[1:] + [len(text)])]


def tags_with_entries(entries: list[str]) -> set[str]:
    """Seed tags named in an entry's heading line."""
    return {tag for entry in entries for tag in SEED_TAG.findall(entry.splitlines()[0])}


def cited_tags(files: list[Path]) -> set[str]:
    """Every seed tag the files cite."""
    return {tag for (tag,) in citations(SEED_TAG, files)}


def is_repository_file(target: str, citing: Path, root: Path) -> bool:
    """Whether a document reference names a file inside ``root`` (``../`` paths read from the citing folder)."""
    path = ((citing.parent if target.startswith("../") else root) / target).resolve()
    return path.is_relative_to(root.resolve()) and path.is_file()


def missing_documents(files: list[Path], root: Path) -> list[str]:
    """'file:line: target' for every document reference that names no file inside ``root``."""
    return sorted(f"{path.relative_to(root)}:{line}: {target}"
                  for pattern in (DOC_PATH, CAPS_DOC) for (target,), places in citations(pattern, files).items()
                  for path, line in places if not is_repository_file(target, path, root))


def unlisted_author_years(files: list[Path], root: Path, entries: list[str]) -> list[str]:
    """'file:line: Surname Year' (first place) for every author-year citation that no entry holds."""
    return sorted(f"{places[0][0].relative_to(root)}:{places[0][1]}: {name} {year}"
                  for (name, year), places in citations(AUTHOR_YEAR, files).items()
                  if not any(name in entry and year in entry for entry in entries))


def test_every_seed_tag_has_an_entry():
    cited = cited_tags(scanned_files(ROOT))
    listed = tags_with_entries(reference_entries(REFERENCES.read_text(encoding="utf-8")))
    assert {"sdc_methods_comparison_chapter.txt", "pil_measures.txt"} <= cited
    assert sorted(cited - listed) == []


def test_every_tag_entry_is_cited():
    listed = tags_with_entries(reference_entries(REFERENCES.read_text(encoding="utf-8")))
    assert len(listed) >= 5
    assert sorted(listed - cited_tags(scanned_files(ROOT))) == []


def test_every_author_year_citation_has_an_entry():
    entries = reference_entries(REFERENCES.read_text(encoding="utf-8"))
    assert ("Jaro", "1989") in citations(AUTHOR_YEAR, scanned_files(ROOT))
    assert unlisted_author_years(scanned_files(ROOT), ROOT, entries) == []


def test_every_cited_document_is_a_file_of_the_repository():
    assert ("docs/risk.md",) in citations(DOC_PATH, scanned_files(ROOT))
    assert missing_documents(scanned_files(ROOT), ROOT) == []


def test_the_checks_find_what_a_hand_written_tree_cites(tmp_path):
    root = tmp_path / "repo"
    (root / "sdc_tasks").mkdir(parents=True)
    (root / "docs").mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "NOTES.md").write_text("a file beside the repository, not in it\n")
    (root / "README.md").write_text("See docs/guide.md, `docs/gone.md` and ../outside/NOTES.md; writes report.md.\n")
    (root / "docs" / "guide.md").write_text("Definitions: ../README.md, METRICS.md, https://host.org/page.md.\n")
    (root / "sdc_tasks" / "kernel.py").write_text(
        '"""Rank swapping (Moore 1996; paper_a.txt sec. 2), PRAM (Kooiman et al. 1998), optimal groups (Hansen and\n'
        "Mukherjee 2003, paper_b.txt eq. (8)), Jaro's (1989) weights, a LocalCluster (2026-11-24), sdc_tasks.masking.md.\n"
        '"""\n')
    references = ("# References\n### `paper_a.txt`\nA. Author, 2001.\n"
                  "### Moore 1996\nR. Moore (1996).\n### Kooiman et al. 1998\nP. Kooiman (1998).\n")
    entries = reference_entries(references)
    files = scanned_files(root)

    assert cited_tags(files) == {"paper_a.txt", "paper_b.txt"}
    assert tags_with_entries(entries) == {"paper_a.txt"}
    assert unlisted_author_years(files, root, entries) == ["sdc_tasks/kernel.py:1: Hansen 2003",
                                                           "sdc_tasks/kernel.py:2: Jaro 1989"]
    assert missing_documents(files, root) == ["README.md:1: ../outside/NOTES.md", "README.md:1: docs/gone.md",
                                              "docs/guide.md:1: METRICS.md"]
