"""Shared fixtures: bundled data, a Prefect test harness (once per session) and small Dask clusters."""

from __future__ import annotations

import contextlib
import os

import pandas as pd
import pytest

os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")

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
