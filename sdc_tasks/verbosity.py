"""Whether a run shows Dask's and Prefect's INFO logs (``sdc --verbose``), read by the run and the processes it
starts."""

from __future__ import annotations

import os

VERBOSE_VARIABLE = "SDC_VERBOSE"


def verbose() -> bool:
    """Whether Dask's and Prefect's INFO logs are wanted (``sdc --verbose`` sets SDC_VERBOSE=1 for the run and
    the processes it starts); by default a run logs only its own stage lines and warnings."""
    return os.environ.get(VERBOSE_VARIABLE, "") not in ("", "0")
