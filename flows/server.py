"""Prefect's temporary local server for a command-line run, started so that a killed run cannot orphan it."""

from __future__ import annotations

import contextlib
from typing import Iterator

from sdc_tasks.errors import InputError
from sdc_tasks.outputs import noted_process, terminal_signals_blocked

SERVER_COMMAND = "prefect.server.api.server:create_app"
HEALTH_SECONDS = 5
"""How long a configured Prefect API has to answer its health check before a run fails naming it."""


@contextlib.contextmanager
def temporary_server() -> Iterator[None]:
    """For the block, Prefect's temporary server when no PREFECT_API_URL is set (the one Prefect would start on
    first use), its process noted in the private scratch directory: stopped on leaving the block, and ended by
    the next run of the tool if this process is killed first. With a server configured, nothing is started."""
    from prefect.settings import PREFECT_API_URL, PREFECT_SERVER_EPHEMERAL_ENABLED

    if PREFECT_API_URL.value() or not PREFECT_SERVER_EPHEMERAL_ENABLED.value():
        check_api(PREFECT_API_URL.value())
        yield
        return
    server = _detached_server()
    server.start()
    try:
        with noted_process(server.server_process.pid, SERVER_COMMAND):
            yield
    finally:
        _delivered()
        server.stop()


def _detached_server():
    """Prefect's temporary server (the instance Prefect's clients find), whose process is started with SIGINT and
    SIGTERM blocked: the terminal's Ctrl-C or a SIGTERM to the whole process group reaches this run, which stops
    the server (SIGKILL) after the run has reported to it."""
    from prefect.server.api.server import SubprocessASGIServer

    class DetachedServer(SubprocessASGIServer):
        """The server process of ``SubprocessASGIServer``, started without the terminal's SIGINT and SIGTERM."""

        def _run_uvicorn_command(self):
            """Start the server process with SIGINT and SIGTERM blocked (its blocked mask survives exec)."""
            with terminal_signals_blocked():
                return super()._run_uvicorn_command()

        def stop(self) -> None:
            """Kill the server process (it does not take SIGTERM), then let Prefect forget the instance."""
            if self.server_process:
                self.server_process.kill()
            super().stop()

    return DetachedServer()


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
