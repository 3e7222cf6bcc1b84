"""The Dask cluster a run uses: a LocalCluster it owns (the default, on loopback only) or an existing scheduler
by address, reached over TLS when the address is ``tls://``."""

from __future__ import annotations

import contextlib
import gc
import logging
from multiprocessing import resource_tracker
from pathlib import Path
from typing import Iterator

import dask
from distributed import Client, LocalCluster
from distributed.client import AllExit
from distributed.diagnostics.plugin import WorkerPlugin
from distributed.scheduler import KilledWorker, NoWorkerError
from distributed.security import Security

from sdc_tasks.errors import InputError, withhold_compute_failures
from sdc_tasks.outputs import interruption_deferred, remove_stale_scratch, scratch_dir
from sdc_tasks.progress import counting
from sdc_tasks.tls import TLS_SETTINGS, TlsFiles, check_tls_settings, is_tls
from sdc_tasks.verbosity import verbose
from sdc_tasks.worker_heap import heap_environment, start_heap_trim

LOOPBACK = "127.0.0.1"
LOG = logging.getLogger("sdc_tasks.cluster")
LOG.addHandler(logging.NullHandler())  # a library logs only where its caller configured logging
CONNECT_SECONDS = 5
"""How long a client tries to reach a scheduler by address before the run fails naming it."""
NO_WORKERS_TIMEOUT = "120s"
"""How long the tasks of a run's own LocalCluster wait with no worker alive (its worker processes and their
nannies killed, e.g. by the kernel's out-of-memory killer) before the run fails: Dask's
``distributed.scheduler.no-workers-timeout``, unless that is set. A worker paused to spill counts as not
running, so the wait is long enough for spilling to free memory."""


class WorkersLost(InputError):
    """The run's Dask workers died: none left for the no-workers timeout, or one task killed a worker each time
    it was tried (``distributed.scheduler.allowed-failures`` + 1 times)."""


def workers_lost(exc: NoWorkerError | KilledWorker) -> WorkersLost:
    """The WorkersLost that says in one line how Dask's ``exc`` ended the run (its task's key, no data)."""
    if isinstance(exc, KilledWorker):
        what = f"task {exc.task!r} killed the Dask worker that ran it, {exc.allowed_failures + 1} times in a row"
    else:
        what = f"no Dask worker was left alive for {exc.timeout:g} s (task {exc.task!r} was waiting)"
    return WorkersLost(f"{what}: workers are killed when their memory runs out; give each worker more memory "
                       "or use fewer, smaller partitions (deploy/README.md, \"Worker memory and spilling\")")


RESTART_SECONDS = 30
"""How long a run that lost workers waits for its LocalCluster's nannies to finish restarting them before it
closes the cluster (closing a nanny in the middle of a restart fails in Dask)."""


@contextlib.contextmanager
def _reporting_lost_workers(client: Client, restarted: int = 0) -> Iterator[None]:
    """For the block, Dask's NoWorkerError and KilledWorker are raised as WorkersLost; with ``restarted``, first
    wait up to RESTART_SECONDS for that many workers to be back (the nannies of the run's own LocalCluster
    restart the killed ones)."""
    try:
        yield
    except (NoWorkerError, KilledWorker) as exc:
        if restarted and isinstance(exc, KilledWorker):
            with contextlib.suppress(Exception):  # nannies that cannot restart: the cluster closes all the same
                client.wait_for_workers(restarted, timeout=RESTART_SECONDS)
        raise workers_lost(exc) from exc


class WithheldWorkerErrors(WorkerPlugin):
    """Worker plugin: each worker's "Compute Failed" log records name the task's key and state only."""

    name = "sdc-withheld-worker-errors"

    def setup(self, worker) -> None:
        """Install the filter in the worker's process."""
        withhold_compute_failures()


class WorkerSetUp(WorkerPlugin):
    """Worker plugin of the run's own LocalCluster: each worker sets numba up on a thread as it starts
    (``scheduling.start_numba_setup``), while the run validates its input, not at its first kernel; gives its
    heap's free pages back whenever it is above its spill threshold (``worker_heap.start_heap_trim``: the workers
    start with the heap of ``worker_heap.HEAP_ENVIRONMENT``); and freezes the objects it holds out of the garbage
    collector's passes (``gc.freeze``, as ``sdc`` itself does: cli.main) as it starts (its imports) and as it
    closes (all of them), so that its process ends without Python's finalization going over them: a 2-worker
    cluster closes in 0.13-0.19 s instead of 0.68-0.74 s."""

    name = "sdc-worker-setup"

    def setup(self, worker) -> None:
        """Start the set-up thread in the worker's process; freeze what the worker has made so far."""
        from sdc_tasks.scheduling import start_numba_setup

        start_numba_setup()
        start_heap_trim(worker)
        gc.freeze()

    def teardown(self, worker) -> None:
        """Freeze everything the closing worker still holds."""
        gc.freeze()


def withholding_worker_errors(client):
    """``client``, its cluster's workers (present and future) now logging failed tasks by key and state only."""
    client.register_plugin(WithheldWorkerErrors())
    return client


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


class _ReleasedWorkReports(logging.Filter):
    """Drop Dask's reports of work the run released while it still ran (interrupted, or ended by a failure):
    asyncio's "Task exception was never retrieved" for a gather the client ended (``AllExit``), and the in-process
    scheduler's "Exception while handling op shuffle_..." for a worker's request about a P2P shuffle (its
    restriction, barrier or state) that failed because the run released the shuffle or its workers stopped: a
    ``KeyError`` for a shuffle the scheduler already forgot, a ``RuntimeError`` for a worker gone from a barrier.
    Nothing is lost: the worker whose request failed fails its task with the same error, and the run reports failed
    tasks itself; the scheduler's tracebacks would only alarm after the run's own report."""

    LOGGERS = ("asyncio", "distributed.core")
    SHUFFLE_OPS = "Exception while handling op shuffle_"

    def filter(self, record: logging.LogRecord) -> bool:
        """Keep every record but the report of an ended gather or of a failed request about a P2P shuffle."""
        error = record.exc_info[1] if record.exc_info else None
        return not (isinstance(error, AllExit) or record.getMessage().startswith(self.SHUFFLE_OPS))


_RELEASED_WORK_FILTER = _ReleasedWorkReports()


@contextlib.contextmanager
def dask_client(address: str | None = None, workers: int = 2, threads_per_worker: int = 1,
                memory_limit: str = "auto", tls: TlsFiles = TlsFiles()) -> Iterator[Client]:
    """Yield a client whose workers log failed tasks without their data or messages; a LocalCluster started
    here listens on 127.0.0.1 only, keeps its workers' files in a private scratch directory, gives its workers the
    heap of ``worker_heap`` (reused for arrays below 32 MiB, trimmed near their spill threshold), is started without
    the terminal's SIGINT (an interrupted run stops it; a SIGINT or SIGTERM during its start ends the run right
    after) and is closed on exit, the scratch directories its stopped workers left then removed; an attached
    scheduler (over TLS with ``tls``) is left running. The dashboard's URL is logged when the client connects
    (``_announce``); Dask's own INFO and WARNING logs only when ``verbose()``, and the local workers' logs only then
    (the run reports failed tasks and a lost scheduler itself; a worker outliving the scheduler of an interrupted
    run prints no heartbeat traceback); its tasks are counted for the progress display (``progress.counting``).
    Workers that die under the run end it with WorkersLost (on the LocalCluster, also when none is left for
    ``NO_WORKERS_TIMEOUT``) instead of a wait without end."""
    if address:
        with attached_client(address, tls) as client, counting(client), _reporting_lost_workers(client):
            _announce(client)
            yield withholding_worker_errors(client)
        return
    check_tls_settings(address, tls)
    for name in _ReleasedWorkReports.LOGGERS:
        logging.getLogger(name).addFilter(_RELEASED_WORK_FILTER)
    level, worker_level = (logging.INFO, logging.INFO) if verbose() else (logging.ERROR, logging.CRITICAL)
    resource_tracker.ensure_running()  # started later, it would unblock SIGINT in the thread that spawns workers
    with scratch_dir("dask") as local_directory, _dask_log_level(level), contextlib.ExitStack() as started:
        started.callback(remove_stale_scratch)  # after the cluster closed: what its killed workers left
        started.enter_context(heap_environment())
        with interruption_deferred(), _failing_without_workers():  # a Ctrl-C meanwhile is raised after
            cluster = started.enter_context(LocalCluster(
                n_workers=workers, threads_per_worker=threads_per_worker, memory_limit=memory_limit, processes=True,
                host=LOOPBACK, dashboard_address=f"{LOOPBACK}:0",
                silence_logs=worker_level,
                local_directory=local_directory))
        with Client(cluster, set_as_default=True) as client, counting(client), \
                _reporting_lost_workers(client, workers):
            _announce(client)
            client.register_plugin(WorkerSetUp())
            yield withholding_worker_errors(client)


def _failing_without_workers() -> contextlib.AbstractContextManager:
    """Dask's configuration while a LocalCluster's scheduler starts: ``NO_WORKERS_TIMEOUT`` unless the user's
    configuration sets ``distributed.scheduler.no-workers-timeout``."""
    if dask.config.get("distributed.scheduler.no-workers-timeout", None) is not None:
        return contextlib.nullcontext()
    return dask.config.set({"distributed.scheduler.no-workers-timeout": NO_WORKERS_TIMEOUT})


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
