"""Resident memory of this process (the driver, which also hosts a LocalCluster's scheduler) and of its children
(the Dask worker processes), sampled in a thread every 0.2 s: the peak of the sum, and a timeline for per-stage
peaks."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import psutil


@dataclass(frozen=True)
class Sample:
    """One sample: wall time (time.time()), driver RSS, the largest worker RSS and the sum over all processes."""

    at: float
    driver: int
    worker: int
    total: int


class PeakRSS:
    """Samples the RSS of this process and its children (the Dask workers) every 0.2 s."""

    def __init__(self) -> None:
        self.peak = 0
        self.samples: list[Sample] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        me = psutil.Process()
        while not self._stop.is_set():
            try:
                driver = me.memory_info().rss
            except psutil.Error:
                driver = 0
            workers = []
            for p in me.children(recursive=True):
                try:
                    workers.append(p.memory_info().rss)
                except psutil.Error:
                    pass
            sample = Sample(time.time(), driver, max(workers, default=0), driver + sum(workers))
            self.samples.append(sample)
            self.peak = max(self.peak, sample.total)
            time.sleep(0.2)

    def between(self, start: float, end: float) -> Sample:
        """Peak driver, largest worker and total RSS over the samples taken from ``start`` to ``end``."""
        inside = [s for s in self.samples if start <= s.at <= end] or self.samples[-1:]
        return Sample(end, max(s.driver for s in inside), max(s.worker for s in inside),
                      max(s.total for s in inside))

    def __enter__(self) -> "PeakRSS":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
