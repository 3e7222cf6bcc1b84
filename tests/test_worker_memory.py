"""Worker memory on the run's own LocalCluster: a worker whose data outgrow its memory limit spills them to disk
in the run's private scratch directory instead of being killed, and the spilled records are removed with the
cluster (deploy/README.md, "Worker memory and spilling")."""

from __future__ import annotations

import tempfile

import dask.array as da
from distributed import wait

from sdc_tasks.cluster import dask_client

LIMIT = 600 * 2**20
N = 100_000_000  # 800 MB of float64 in 100 chunks of 8 MB: more than the worker may hold


def _spill_state(dask_worker) -> tuple[int, int, str]:
    """Keys on disk, the process's memory and the worker's local directory."""
    return len(dask_worker.data.disk), dask_worker.monitor.get_process_memory(), dask_worker.local_directory


def test_a_worker_spills_to_its_private_scratch_before_it_is_killed(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # what TMPDIR sets for a run
    with dask_client(workers=1, memory_limit=f"{LIMIT}B") as client:
        worker = list(client.scheduler_info()["workers"])
        column = da.arange(N, chunks=N // 100, dtype="float64").persist()
        wait(column)
        ((on_disk, process_memory, directory),) = client.run(_spill_state).values()
        assert on_disk > 0 and process_memory < LIMIT
        assert directory.startswith(str(tmp_path / "sdc-scratch-"))
        assert any(p.is_file() for p in tmp_path.rglob("*"))  # the spilled chunks
        assert float(column.sum().compute()) == N * (N - 1) / 2  # every spilled chunk comes back whole
        assert list(client.scheduler_info()["workers"]) == worker  # the same worker: none was restarted
    assert not [p.name for p in tmp_path.rglob("*") if p.is_file() and p.stat().st_size]  # Dask's empty locks stay
    assert not [p.name for root in tmp_path.glob("sdc-scratch-*") for p in root.iterdir()]
