"""The Dask cluster a run uses: a LocalCluster it owns (the default, on loopback only) or an existing scheduler
by address, reached over TLS when the address is ``tls://``."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
from multiprocessing import resource_tracker
from pathlib import Path
from typing import Iterator

import dask
from distributed import Client, LocalCluster
from distributed.client import AllExit
from distributed.security import Security

from sdc_tasks.errors import InputError, withholding_worker_errors
from sdc_tasks.outputs import interruption_deferred, remove_stale_scratch, scratch_dir
from sdc_tasks.progress import counting

LOOPBACK = "127.0.0.1"
TLS_SETTINGS = {"ca_file": "dask.tls.ca_file (--tls-ca-file)", "cert": "dask.tls.cert (--tls-cert)",
                "key": "dask.tls.key (--tls-key)"}
DASK_TLS_CONFIG = ("distributed.comm.tls.ca-file", "distributed.comm.tls.client.cert")
VERBOSE_VARIABLE = "SDC_VERBOSE"
LOG = logging.getLogger("sdc_tasks.cluster")
LOG.addHandler(logging.NullHandler())  # a library logs only where its caller configured logging
CONNECT_SECONDS = 5
"""How long a client tries to reach a scheduler by address before the run fails naming it."""


@dataclasses.dataclass(frozen=True)
class TlsFiles:
    """The client's TLS files for a ``tls://`` scheduler: the CA certificate that signed the cluster's
    certificates, and the client's certificate and private key (PEM files)."""

    ca_file: str | None = None
    cert: str | None = None
    key: str | None = None

    def given(self) -> bool:
        """Whether any of the three files is named."""
        return any(dataclasses.astuple(self))

    def resolved(self) -> "TlsFiles":
        """The same files, relative paths resolved against the working directory."""
        return TlsFiles(*(path if path is None else str(Path(path).resolve()) for path in dataclasses.astuple(self)))


def is_tls(address: str | None) -> bool:
    """Whether a scheduler address uses the ``tls://`` protocol."""
    return bool(address) and address.lower().startswith("tls://")


def dask_config_has_tls() -> bool:
    """Whether Dask's own config (``distributed.comm.tls.*``, or its DASK_DISTRIBUTED__COMM__TLS__* environment
    variables) names a CA file and a client certificate."""
    return all(dask.config.get(key, None) for key in DASK_TLS_CONFIG)


def check_tls_settings(address: str | None, tls: TlsFiles) -> None:
    """Raise InputError, naming the setting, when the scheduler address and the TLS files disagree: TLS files
    without a ``tls://`` address, a ``tls://`` address with some but not all three files, or with none and no
    TLS in Dask's config."""
    options = "dask.tls (--tls-ca-file, --tls-cert, --tls-key)"
    if tls.given() and not is_tls(address):
        where = f"the scheduler address {address}" if address else "the local cluster (no dask.address)"
        raise InputError(f"{options} is for a tls:// scheduler address, but dask.address (--dask-address) is "
                         f"{where}: use tls://host:port, or drop the TLS files")
    missing = [name for field, name in TLS_SETTINGS.items() if getattr(tls, field) is None]
    if tls.given() and missing:
        raise InputError(f"{missing[0]} is missing: a tls:// scheduler needs all of {options}")
    if is_tls(address) and not tls.given() and not dask_config_has_tls():
        raise InputError(f"the Dask scheduler {address} uses TLS but no certificates are given: set {options}, "
                         "or Dask's distributed.comm.tls.ca-file and distributed.comm.tls.client.cert/key")


def client_security(address: str | None, tls: TlsFiles = TlsFiles()) -> Security | None:
    """The Security of a client of ``address``: None for a tcp:// scheduler or the local cluster; for tls://,
    the given files (all three, checked to exist) or else Dask's TLS config, encryption required."""
    check_tls_settings(address, tls)
    if not is_tls(address):
        return None
    if not tls.given():
        return Security(require_encryption=True)
    for field, name in TLS_SETTINGS.items():
        if not Path(getattr(tls, field)).is_file():
            raise InputError(f"{name}: file not found: {getattr(tls, field)}")
    return Security(tls_ca_file=tls.ca_file, tls_client_cert=tls.cert, tls_client_key=tls.key,
                    require_encryption=True)


@contextlib.contextmanager
def attached_client(address: str, tls: TlsFiles = TlsFiles()) -> Iterator[Client]:
    """Yield a client of the scheduler at ``address``; raise InputError naming the address when it cannot be
    reached (down, a wrong address, or a TLS handshake the scheduler or the client refuses)."""
    security = client_security(address, tls)
    try:
        client = Client(address, security=security, set_as_default=True, timeout=CONNECT_SECONDS)
    except OSError as exc:  # TimeoutError and ssl.SSLError are OSErrors
        raise InputError(f"could not connect to the Dask scheduler at {address} within {CONNECT_SECONDS} s "
                         f"({type(exc).__name__}): check the "
                         "address, that the scheduler runs and, for tls://, that its CA signed the client "
                         "certificate and key given") from exc
    with client:
        yield client


class _InterruptedGathers(logging.Filter):
    """Drop asyncio's "Task exception was never retrieved" for a gather the client ended (``AllExit``) because the
    run was interrupted while it waited: nothing is lost, and the traceback would only alarm."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Keep every record but that of an abandoned gather."""
        return not (record.exc_info and isinstance(record.exc_info[1], AllExit))


_GATHERS_FILTER = _InterruptedGathers()


@contextlib.contextmanager
def dask_client(address: str | None = None, workers: int = 2, threads_per_worker: int = 1,
                memory_limit: str = "auto", tls: TlsFiles = TlsFiles()) -> Iterator[Client]:
    """Yield a client whose workers log failed tasks without their data or messages; a LocalCluster started
    here listens on 127.0.0.1 only, keeps its workers' files in a private scratch directory, is started without
    the terminal's SIGINT (an interrupted run stops it; a SIGINT or SIGTERM during its start ends the run right
    after) and is closed on exit, the scratch directories its stopped workers left then removed; an attached
    scheduler (over TLS with ``tls``) is left running. The dashboard's URL is logged when the client connects
    (``_announce``); Dask's own INFO and WARNING logs only when ``verbose()``, and the local workers' logs only then
    (the run reports failed tasks and a lost scheduler itself; a worker outliving the scheduler of an interrupted
    run prints no heartbeat traceback); its tasks are counted for the progress display (``progress.counting``)."""
    if address:
        with attached_client(address, tls) as client, counting(client):
            _announce(client)
            yield withholding_worker_errors(client)
        return
    check_tls_settings(address, tls)
    logging.getLogger("asyncio").addFilter(_GATHERS_FILTER)
    level, worker_level = (logging.INFO, logging.INFO) if verbose() else (logging.ERROR, logging.CRITICAL)
    resource_tracker.ensure_running()  # started later, it would unblock SIGINT in the thread that spawns workers
    with scratch_dir("dask") as local_directory, _dask_log_level(level), contextlib.ExitStack() as started:
        started.callback(remove_stale_scratch)  # after the cluster closed: what its killed workers left
        with interruption_deferred():  # a Ctrl-C meanwhile is raised after, the cluster then closed
            cluster = started.enter_context(LocalCluster(
                n_workers=workers, threads_per_worker=threads_per_worker, memory_limit=memory_limit, processes=True,
                host=LOOPBACK, dashboard_address=f"{LOOPBACK}:0",
                silence_logs=worker_level,
                local_directory=local_directory))
        with Client(cluster, set_as_default=True) as client, counting(client):
            _announce(client)
            yield withholding_worker_errors(client)


def verbose() -> bool:
    """Whether Dask's and Prefect's INFO logs are wanted (``sdc --verbose`` sets SDC_VERBOSE=1 for the run and
    the processes it starts); by default a run logs only its own stage lines and warnings."""
    return os.environ.get(VERBOSE_VARIABLE, "") not in ("", "0")


def dashboard_link(client: Client) -> str | None:
    """The URL of the Dask dashboard of ``client``'s scheduler, None when it serves none."""
    return client.dashboard_link if client.scheduler_info().get("services", {}).get("dashboard") else None


def _announce(client: Client) -> None:
    """Log the scheduler the run uses and its dashboard's URL (INFO, logger ``sdc_tasks.cluster``)."""
    LOG.info("dask dashboard: %s (scheduler %s, %d workers)", dashboard_link(client) or "none",
             client.scheduler.address, len(client.scheduler_info()["workers"]))


@contextlib.contextmanager
def _dask_log_level(level: int) -> Iterator[None]:
    """For the block, Dask's ``distributed`` loggers in this process log from ``level`` up (ERROR unless
    ``verbose()``: no scheduler and nanny INFO lines, no "Lost all workers" or nanny "still alive ..., killing" at a
    normal close, no P2P shuffle chatter)."""
    logger = logging.getLogger("distributed")
    previous = logger.level
    logger.setLevel(level)
    try:
        yield
    finally:
        logger.setLevel(previous)
