"""Where the data files bundled with the package are (the Census and Tarragona files of the papers' tables, the
demo spec, the test data), without importing anything heavy: ``sdc demo`` finds its spec before its release starts."""

from __future__ import annotations

import importlib.resources
from pathlib import Path

from sdc_tasks.errors import InputError


def bundled_path(name: str) -> Path:
    """Return the path of a bundled data file: installed ``sdc_tasks.data`` package data, else the repository's
    ``data/``."""
    try:
        resource = importlib.resources.files("sdc_tasks.data") / name
    except ModuleNotFoundError:
        resource = None
    if isinstance(resource, Path) and resource.is_file():
        return resource
    path = Path(__file__).resolve().parent.parent / "data" / name
    if not path.is_file():
        raise InputError(f"bundled data file {name!r} not found (looked in sdc_tasks.data and {path.parent})")
    return path
