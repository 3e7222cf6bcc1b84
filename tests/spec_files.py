"""Spec files the tests write: the bundled demo spec made runnable from anywhere."""

from __future__ import annotations

from pathlib import Path

import yaml

from sdc_tasks.generate import bundled_path


def demo_spec_file(tmp_path: Path, **changes) -> Path:
    """The bundled demo spec (Census, MDAV k = 7 on triples) with its input by absolute path and its output in
    ``tmp_path/release`` (no overwrite), ``changes`` merged in at the top level, written to ``tmp_path/spec.yaml``."""
    spec = yaml.safe_load(bundled_path("demo.yaml").read_text())
    spec["input"]["path"] = str(bundled_path("census.csv"))
    spec["output"] = {"dir": str(tmp_path / "release"), "overwrite": False}
    spec.update(changes)
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path
