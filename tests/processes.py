"""What a test gives a subprocess that runs this session's code (``python -m sdc_tasks.cli``, a script), and how
it waits for one."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

import sdc_tasks

SOURCE_ROOT = Path(sdc_tasks.__file__).resolve().parents[1]
"""The directory this session imports sdc_tasks and flows from: the checkout (PYTHONPATH=$PWD), or site-packages
where the package is installed (CI). First on a subprocess's PYTHONPATH, it runs the code under test, and that
code loads the numba kernels this session compiled (numba caches beside the source) instead of compiling a second
copy."""


def held_within(condition: Callable[[], bool], seconds: float) -> bool:
    """Whether ``condition`` held within ``seconds``, polled every 0.1 s."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False
