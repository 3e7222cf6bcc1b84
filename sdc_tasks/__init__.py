"""Statistical disclosure control for microdata: mask, evaluate, release and compare on pandas or Dask
DataFrames or files (:mod:`sdc_tasks.api`), on Dask graphs of block kernels. The library never imports Prefect.

The public names below are loaded on first use (PEP 562), so ``import sdc_tasks`` and the ``sdc`` command stay
quick; ``from sdc_tasks import mask`` works as with an eager import.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_HOMES = {
    **dict.fromkeys(("mask", "evaluate", "release", "compare", "methods", "measures"), "sdc_tasks.api"),
    "Metrics": "sdc_tasks.results",
    **dict.fromkeys(("load_census", "load_tarragona", "load_testdata"), "sdc_tasks.datasets"),
    **dict.fromkeys(("SdcError", "InputError", "SpecError", "GridError", "ReleaseRefused", "NoneWithinLimits",
                     "StageFailed"), "sdc_tasks.errors"),
}
__all__ = list(_HOMES)

if TYPE_CHECKING:
    from sdc_tasks.api import compare, evaluate, mask, measures, methods, release
    from sdc_tasks.datasets import load_census, load_tarragona, load_testdata
    from sdc_tasks.errors import (
        GridError,
        InputError,
        NoneWithinLimits,
        ReleaseRefused,
        SdcError,
        SpecError,
        StageFailed,
    )
    from sdc_tasks.results import Metrics


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use."""
    if name not in _HOMES:
        raise AttributeError(f"module 'sdc_tasks' has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOMES[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The module's names, the public ones included before their first use."""
    return sorted({*globals(), *_HOMES})
