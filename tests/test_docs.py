"""The Python walkthrough (docs/python.md) and the README's Python section run as written: their ```python blocks
are executed in order in one namespace, in a temporary working directory, so the documents cannot rot; the list of
fault-injection tests (docs/faults.md) names tests that exist, and every test of the fault-injection files."""

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


FAULT_TEST = re.compile(r"`(tests/test_\w+\.py)::(test_\w+)`")
FAULT_FILES = ("tests/test_interruption.py", "tests/test_environment_faults.py", "tests/test_spec_rules.py",
               "tests/test_killed_release.py")


def defined_tests(path: Path) -> set[str]:
    """The names of the test functions defined at the top level of a test file."""
    return set(re.findall(r"^(?:async )?def (test_\w+)\(", path.read_text(), re.MULTILINE))


def test_the_fault_list_names_existing_tests_and_all_of_the_fault_files():
    listed = FAULT_TEST.findall((ROOT / "docs" / "faults.md").read_text())
    assert len(listed) >= 60 and len(set(listed)) == len(listed)
    missing = [f"{file}::{name}" for file, name in listed
               if not (ROOT / file).is_file() or name not in defined_tests(ROOT / file)]
    assert missing == [], "docs/faults.md names tests that do not exist"
    unlisted = [f"{file}::{name}" for file in FAULT_FILES for name in sorted(defined_tests(ROOT / file))
                if (file, name) not in listed]
    assert unlisted == [], "tests of the fault-injection files missing from docs/faults.md"
    assert "docs/faults.md" in (ROOT / "README.md").read_text()
