"""Shared fixtures: bundled data, a Prefect test harness and a Dask scheduler (each started once per session, when
first asked for) and small Dask clusters."""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import tempfile

import pandas as pd
import pytest

# Prefect's home (the database of a temporary server, the exceptions of failed flow runs Prefect writes to its local
# storage, the memo of its block registration) is a private directory of this test process, removed when it exits,
# here and in every command a test runs: the suite writes nothing into the developer's ~/.prefect.
os.environ["PREFECT_HOME"] = tempfile.mkdtemp(prefix="sdc-tests-prefect-")
atexit.register(shutil.rmtree, os.environ["PREFECT_HOME"], ignore_errors=True)
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
# a command run by a test (inherits this environment) waits as long as the session harness for its temporary server:
# Prefect's 20 s default is exceeded on a loaded machine ("release stage failed: RuntimeError")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
# Dask's system monitor samples each scheduler, nanny and worker process's CPU, memory, disk and network every 0.5 s
# for the dashboard, which no test reads: about 4 % of the suite's CPU (py-spy). Every 2 s, without disk counters,
# in this process and every process it starts.
os.environ.setdefault("DASK_DISTRIBUTED__ADMIN__SYSTEM_MONITOR__INTERVAL", "2s")
os.environ.setdefault("DASK_DISTRIBUTED__ADMIN__SYSTEM_MONITOR__DISK", "false")

from sdc_tasks.generate import bundled_path  # noqa: E402

CENSUS_KEYS = ["FEDTAX", "AFNLWGT", "AGI", "EMCONTRB", "PTOTVAL", "TAXINC", "STATETAX"]


@pytest.fixture(scope="session")
def census() -> pd.DataFrame:
    """The Census test file with a record_id column (row position)."""
    df = pd.read_csv(bundled_path("census.csv"))
    df.insert(0, "record_id", range(len(df)))
    return df


@pytest.fixture(scope="session")
def prefect_harness():
    """A temporary Prefect server and database for the whole session, stopped at the end."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


@pytest.fixture(scope="session")
def dask_scheduler():
    """The address of a loopback Dask scheduler with two single-threaded worker processes, for the whole session:
    a release given it (``dask_address``) attaches to it instead of starting and stopping a cluster of its own (the
    tests of a run's own cluster start theirs)."""
    import logging

    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None,
                      silence_logs=logging.ERROR) as cluster:
        yield cluster.scheduler_address


@pytest.fixture
def sync_dask():
    """Run Dask graphs in this process, synchronously (no cluster to clean up)."""
    import dask

    with dask.config.set(scheduler="synchronous"):
        yield


@pytest.fixture
def no_cluster(monkeypatch):
    """``sdc mask`` / ``sdc evaluate`` run their graphs synchronously in this process instead of a cluster."""
    import dask

    import sdc_tasks.cluster

    @contextlib.contextmanager
    def synchronous(*args, **kwargs):
        with dask.config.set(scheduler="synchronous"):
            yield None

    monkeypatch.setattr(sdc_tasks.cluster, "dask_client", synchronous)
