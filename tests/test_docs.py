"""The Python walkthrough (docs/python.md) and the README's Python section run as written: their ```python blocks
are executed in order in one namespace, in a temporary working directory, so the documents cannot rot."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def python_blocks(text: str) -> list[str]:
    """The ```python code blocks of a Markdown text, in order."""
    return BLOCK.findall(text)


def section(text: str, heading: str) -> str:
    """The text of the ``## heading`` section, up to the next heading of that level."""
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else len(text)]


def run_blocks(blocks: list[str], where: str) -> dict:
    """Execute the blocks in order in one namespace; return the namespace."""
    namespace: dict = {"__name__": "docs"}
    for i, code in enumerate(blocks):
        exec(compile(code, f"{where} block {i + 1}", "exec"), namespace)
    return namespace


def test_the_python_walkthrough_runs(tmp_path, monkeypatch):
    blocks = python_blocks((ROOT / "docs" / "python.md").read_text())
    monkeypatch.chdir(tmp_path)
    done = run_blocks(blocks, "docs/python.md")
    assert len(blocks) >= 10
    assert (tmp_path / "census-micir.csv").is_file() and (tmp_path / "variables.png").is_file()
    assert (tmp_path / "census-release" / "masked").is_dir() and not (tmp_path / "census-refused" / "masked").exists()
    assert done["summary"].verdict == "published" and isinstance(done["ranking"], pd.DataFrame)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["census-micir.csv", "census-noise", "census-refused",
                                                          "census-release", "variables.png"]


def test_the_readme_python_section_runs(tmp_path, monkeypatch, capsys):
    blocks = python_blocks(section((ROOT / "README.md").read_text(), "Python"))
    assert len(blocks) == 1 and len(blocks[0].strip().splitlines()) == 3
    monkeypatch.chdir(tmp_path)
    run_blocks(blocks, "README.md")
    printed = capsys.readouterr().out
    assert "IL" in printed and "DLD" in printed and list(tmp_path.iterdir()) == []
