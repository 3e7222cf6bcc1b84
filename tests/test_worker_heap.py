"""The heap trim of a run's own workers (sdc_tasks.worker_heap.HeapTrim): a worker above its spill threshold
gives its heap's free pages back, no more often than TRIM_SHARE of its time allows; below it, never."""

from __future__ import annotations

import platform
import time
from types import SimpleNamespace

import pytest

from sdc_tasks import worker_heap
from sdc_tasks.worker_heap import HeapTrim


def worker_with(memory: list[int], limit: int = 1000, spill: float | bool = 0.7, pause: float | bool = 0.8):
    """A stand-in for a Dask worker: its memory manager's limit and fractions; its monitor reports ``memory[0]``."""
    manager = SimpleNamespace(memory_limit=limit, memory_spill_fraction=spill, memory_pause_fraction=pause)
    return SimpleNamespace(memory_manager=manager, monitor=SimpleNamespace(get_process_memory=lambda: memory[0]))


def test_a_worker_trims_its_heap_only_above_its_spill_threshold_and_at_most_its_share_of_the_time():
    memory, trims = [650], []

    def trim(pad: int) -> int:
        trims.append(pad)
        time.sleep(0.01)
        return 1

    check = HeapTrim(worker_with(memory), trim)
    assert check.threshold == 700  # 0.7 of 1000
    check()
    assert trims == []  # below the spill threshold
    memory[0] = 750
    before = time.monotonic()
    check()
    assert trims == [0]  # malloc_trim(0): every free page of the heap
    # a trim of 10 ms (or more, on a busy machine) waits 1 / TRIM_SHARE times as long before the next
    assert check.next_at - before >= 0.01 / worker_heap.TRIM_SHARE
    check()
    assert trims == [0]
    time.sleep(max(0.0, check.next_at - time.monotonic()) + 0.01)
    check()
    assert trims == [0, 0]


@pytest.mark.parametrize("spill, pause, threshold", [(False, 0.8, 800), (0.5, False, 500)])
def test_without_a_spill_threshold_the_pause_threshold_is_the_one(spill, pause, threshold):
    assert HeapTrim(worker_with([0], spill=spill, pause=pause), lambda pad: 1).threshold == threshold


def test_a_worker_without_a_memory_limit_has_no_trim():
    callbacks = {}
    worker = SimpleNamespace(periodic_callbacks=callbacks, **vars(worker_with([0], limit=None)))
    worker_heap.start_heap_trim(worker)
    assert callbacks == {}


def test_a_deployed_worker_preloading_the_module_trims_its_heap():
    """``dask worker --preload sdc_tasks.worker_heap`` (deploy/README.md) starts the trim in the worker."""
    import logging

    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None,
                      memory_limit="1GiB", preload=["sdc_tasks.worker_heap"], silence_logs=logging.ERROR) as cluster, \
            Client(cluster) as client:
        trims = client.run(lambda dask_worker: "sdc-heap-trim" in dask_worker.periodic_callbacks)
    assert list(trims.values()) == [platform.libc_ver()[0] == "glibc"]
