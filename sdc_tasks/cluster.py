"""The Dask cluster a run uses: a LocalCluster it owns (the default) or an existing scheduler by address."""

from __future__ import annotations

import contextlib
import logging
from typing import Iterator

from distributed import Client, LocalCluster


@contextlib.contextmanager
def dask_client(address: str | None = None, workers: int = 2, threads_per_worker: int = 1,
                memory_limit: str = "auto") -> Iterator[Client]:
    """Yield a client; a LocalCluster started here is closed on exit, an attached scheduler is left running."""
    if address:
        with Client(address, set_as_default=True) as client:
            yield client
        return
    with LocalCluster(n_workers=workers, threads_per_worker=threads_per_worker, memory_limit=memory_limit,
                      processes=True, dashboard_address=None, silence_logs=logging.ERROR) as cluster:
        with Client(cluster, set_as_default=True) as client:
            yield client
