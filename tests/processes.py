"""What a test gives a subprocess that runs this session's code (``python -m sdc_tasks.cli``, a script)."""

from __future__ import annotations

from pathlib import Path

import sdc_tasks

SOURCE_ROOT = Path(sdc_tasks.__file__).resolve().parents[1]
"""The directory this session imports sdc_tasks and flows from: the checkout (PYTHONPATH=$PWD), or site-packages
where the package is installed (CI). First on a subprocess's PYTHONPATH, it runs the code under test, and that
code loads the numba kernels this session compiled (numba caches beside the source) instead of compiling a second
copy."""
