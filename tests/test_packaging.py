"""The installed package holds every sub-package of the source tree: a plain (non-editable) install, as CI and
users make it, installs only the packages pyproject.toml lists."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_source_package_is_installed():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {".".join(init.parent.relative_to(ROOT).parts)
               for top in ("sdc_tasks", "flows") for init in (ROOT / top).rglob("__init__.py")}
    assert on_disk - listed == set()
