"""Prefect's temporary local server for a command-line run, started so that a killed run cannot orphan it."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from typing import Callable, Iterator

from sdc_tasks.errors import InputError
from sdc_tasks.outputs import noted_process, terminal_signals_blocked

SERVER_COMMAND = "prefect.server.api.server:create_app"
LOOPBACK = "127.0.0.1"
PORT_TAKEN = 3  # uvicorn's exit status when it cannot bind its port (taken since it was found free): try another
HEALTH_SECONDS = 5
"""How long a configured Prefect API has to answer its health check before a run fails naming it."""


@contextlib.contextmanager
def temporary_server(meanwhile: Callable[[], None] = lambda: None) -> Iterator[None]:
    """For the block, Prefect's temporary server when no PREFECT_API_URL is set (the one Prefect would start on
    first use), its process noted in the private scratch directory: stopped on leaving the block, and ended by
    the next run of the tool if this process is killed first. With a server configured, nothing is started.
    ``meanwhile``: work done while the server starts (the run's imports), before the block."""
    from prefect.settings import (
        PREFECT_API_URL,
        PREFECT_FLOWS_HEARTBEAT_FREQUENCY,
        PREFECT_SERVER_EPHEMERAL_ENABLED,
        PREFECT_UI_URL,
        temporary_settings,
    )

    if PREFECT_API_URL.value() or not PREFECT_SERVER_EPHEMERAL_ENABLED.value():
        check_api(PREFECT_API_URL.value())
        meanwhile()
        yield
        return
    process, url = _server_process()
    try:
        meanwhile()
    except BaseException:
        _stopped(process)
        raise
    process, url = _server_answering(process, url)
    try:
        # no UI is served: an empty UI URL keeps Prefect from printing links to it; no heartbeats: they let a
        # server that outlives a crashed run mark it crashed, and this one ends with the run (Prefect's flow engine
        # waits up to 1 s for its heartbeat thread as each flow run ends)
        settings = {PREFECT_API_URL: url, PREFECT_UI_URL: "", PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}
        with noted_process(process.pid, SERVER_COMMAND), temporary_settings(settings):
            try:
                yield
            finally:
                _delivered()
    finally:
        _stopped(process)


def _server_answering(process: subprocess.Popen, url: str) -> tuple[subprocess.Popen, str]:
    """The server ``process`` of API ``url`` once it answers its health check, started again on another port when
    its port was taken since it was found free; TimeoutError, the process stopped, when it does not answer within
    PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS."""
    import httpx
    from prefect.settings import PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS

    timeout = PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.value()
    deadline = time.monotonic() + timeout
    while True:
        try:
            with httpx.Client() as client:
                while (code := process.poll()) is None and time.monotonic() < deadline:
                    with contextlib.suppress(httpx.TransportError):
                        if client.get(f"{url}/health").status_code == 200:
                            return process, url
                    time.sleep(0.1)
        except BaseException:
            _stopped(process)
            raise
        if code != PORT_TAKEN:
            _stopped(process)
            state = "still starting" if code is None else f"it exited with status {code}"
            raise TimeoutError(f"Prefect's temporary server did not answer within {timeout} s ({state}); set "
                               "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS higher on a loaded machine, or "
                               "PREFECT_API_URL to use a running server")
        process, url = _server_process()


def _stopped(process: subprocess.Popen) -> None:
    """Kill the server ``process`` (it does not take SIGTERM) and reap it."""
    process.kill()
    process.wait()


def _server_process() -> tuple[subprocess.Popen, str]:
    """Prefect's server app (uvicorn, without its UI, in Prefect's ephemeral mode) starting in a process of its own
    on a free loopback port, the current Prefect settings in its environment, and its API URL. It is started with
    SIGINT and SIGTERM blocked (its blocked mask survives exec): the terminal's Ctrl-C or a SIGTERM to the whole
    process group reaches this run, which stops the server after the run has reported to it. The app is not
    imported here (Prefect's own launcher, in the server's module, costs this process 2.5 s of imports before the
    server starts)."""
    import prefect
    from prefect.settings import get_current_settings

    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1", "PREFECT__SERVER_FINAL": "1",
           **get_current_settings().to_environment_variables(exclude_unset=True)}
    command = [sys.executable, "-m", "uvicorn", "--app-dir", str(prefect.__module_path__.parent), "--factory",
               SERVER_COMMAND, "--host", LOOPBACK, "--port", str(port), "--log-level", "error", "--lifespan", "on"]
    with terminal_signals_blocked():
        return subprocess.Popen(command, env=env), f"http://{LOOPBACK}:{port}/api"


def check_api(url: str | None) -> None:
    """Raise InputError naming the configured Prefect API (PREFECT_API_URL) when it does not answer its health
    check within :data:`HEALTH_SECONDS` (one try: a server that accepts connections but never replies would
    otherwise hold the run through Prefect's request timeout and retries), before a run starts anything."""
    import httpx
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_CLIENT_MAX_RETRIES, temporary_settings

    if not url:
        return
    with temporary_settings({PREFECT_CLIENT_MAX_RETRIES: 0}), \
            get_client(httpx_settings={"timeout": httpx.Timeout(HEALTH_SECONDS)}, sync_client=True) as client:
        failure = client.api_healthcheck()
    if failure is not None:
        raise InputError(f"the Prefect API at {url} (PREFECT_API_URL) does not answer within {HEALTH_SECONDS} s "
                         f"({type(failure).__name__}): start that server, or unset PREFECT_API_URL to use a "
                         "temporary one")


def _delivered() -> None:
    """Send the run's logs and events still queued to the server before it stops."""
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogHandler

    APILogHandler().flush()
    EventsWorker.drain_all()
