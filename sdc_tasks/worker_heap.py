"""How the worker processes of a run's own LocalCluster use glibc's malloc: arrays below 32 MiB come from its
heap instead of fresh pages (:data:`HEAP_ENVIRONMENT`), and a worker near its memory limit gives the heap's free
pages back to the system (:func:`start_heap_trim`), so that memory it no longer uses never holds it paused.

Dask's nanny starts its workers with ``MALLOC_TRIM_THRESHOLD_=65536`` (``distributed.nanny.pre-spawn-environ``),
which in glibc also fixes the mmap threshold at 128 KiB: every array of 16,384 values or more is then mapped
afresh, its pages zeroed by the kernel on first touch and unmapped when freed, and the workers ran the same tasks
1.6-2.4x slower than one process did (docs/performance.md, "Worker processes and malloc")."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import platform
import time
from typing import Any, Callable, Iterator

import dask

HEAP_ENVIRONMENT = {"MALLOC_MMAP_THRESHOLD_": 32 * 2**20}
"""Environment of the run's own workers beside Dask's: glibc's malloc takes blocks below 32 MiB, its most, from
its heap. Dask's trim threshold is kept (free memory at the heap's top still goes back at once); a value in the
environment of the process that starts the cluster takes precedence (Dask's rule)."""
TRIM_EVERY_S = 0.2
"""How often a worker compares its process memory with its spill threshold."""
TRIM_CALLBACK = "sdc-heap-trim"
"""The name of the trim among the worker's periodic callbacks."""
TRIM_SHARE = 0.05
"""The most of a worker's time its heap trims may take: after a trim of d seconds the next waits 20 d."""


@contextlib.contextmanager
def heap_environment() -> Iterator[None]:
    """For the block (the life of a LocalCluster), HEAP_ENVIRONMENT added to the environment Dask's nannies give
    the workers they spawn or restart; after it, this process's own environment as before (a nanny writes what
    it gives into it, and every process started later from here would inherit it)."""
    environ = dask.config.get("distributed.nanny.pre-spawn-environ", {})
    before = {key: os.environ.get(key) for key in HEAP_ENVIRONMENT}
    try:
        with dask.config.set({"distributed.nanny.pre-spawn-environ": {**HEAP_ENVIRONMENT, **environ}}):
            yield
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, None on another C library."""
    if platform.libc_ver()[0] != "glibc":
        return None
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim


def _trim_threshold(manager: Any) -> float | None:
    """The process memory above which a worker's heap is trimmed: its spill threshold, else its pause threshold
    (fractions of its memory limit, Dask's ``WorkerMemoryManager``); None without a limit or either fraction."""
    fraction = manager.memory_spill_fraction or manager.memory_pause_fraction
    return manager.memory_limit * fraction if manager.memory_limit and fraction else None


class HeapTrim:
    """The periodic check of one worker: when its process memory is above Dask's spill threshold (where spilling
    starts; pausing comes later), ``malloc_trim(0)`` returns the heap's free pages, at most TRIM_SHARE of the
    time. Without it, memory a worker had freed but its heap kept counts as unmanaged: spilling cannot lower it
    and a worker above the pause threshold stayed paused, its run waiting without end."""

    def __init__(self, worker: Any, trim: Callable[[int], int]):
        self.monitor, self.trim = worker.monitor, trim
        self.threshold = _trim_threshold(worker.memory_manager)
        self.next_at = 0.0

    def __call__(self) -> None:
        """Trim the heap if the process holds more than the threshold and the last trim is long enough ago."""
        now = time.monotonic()
        if now < self.next_at or self.monitor.get_process_memory() <= self.threshold:
            return
        self.trim(0)
        self.next_at = now + (time.monotonic() - now) / TRIM_SHARE


def start_heap_trim(worker: Any) -> None:
    """Run :class:`HeapTrim` on ``worker``'s event loop every TRIM_EVERY_S while it runs (stopped with its other
    periodic callbacks); nothing for a worker without a memory limit, spill and pause thresholds, or glibc."""
    from tornado.ioloop import PeriodicCallback

    trim = _malloc_trim()
    if trim is None or _trim_threshold(worker.memory_manager) is None:
        return
    previous = worker.periodic_callbacks.get(TRIM_CALLBACK)
    if previous is not None:  # set up again (a plugin registered twice): one trim per worker
        previous.stop()
    callback = PeriodicCallback(HeapTrim(worker, trim), TRIM_EVERY_S * 1000)
    worker.periodic_callbacks[TRIM_CALLBACK] = callback
    callback.start()


def dask_setup(worker: Any) -> None:
    """Dask's preload hook: ``dask worker --preload sdc_tasks.worker_heap`` runs :func:`start_heap_trim` in each
    worker of a deployed cluster whose environment sets HEAP_ENVIRONMENT (deploy/README.md, "Worker memory and
    spilling")."""
    start_heap_trim(worker)
