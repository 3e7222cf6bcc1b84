"""Value-free errors: a library exception (pandas, pyarrow, NumPy, Dask, SciPy, pydantic's ``input_value=...``)
may quote a cell of the confidential input in its message. At the boundary of each stage (the flows' tasks, the
CLI commands) ``value_free`` replaces it with a ``StageFailed`` that names the stage, the exception's type and,
where the library names it, the column, never chained to the original, so no value reaches the console, logs,
Prefect's states, events or result storage. Our own errors (our exception classes, and any exception our code
raised: messages built from names and positions) and OSError (paths only; the flows retry on it) pass
unchanged. ``withhold_compute_failures`` does the same for the "Compute Failed" records Dask workers log (installed
on every worker by ``sdc_tasks.cluster``)."""

from __future__ import annotations

import contextlib
import logging
import os
import re
from pathlib import Path
from typing import Iterator

WITHHELD = "details withheld: they may quote confidential values"
_COLUMN = re.compile(r"Conversion failed for column (\S+) with type")  # pyarrow's names the column, then the value


class SdcError(Exception):
    """Base of every exception this package raises on purpose; its message is built from names and positions
    (files, columns, parameters, record positions and ids), never from a value of the data."""


class InputError(SdcError, ValueError):
    """Bad input: the message names the file, column, record or parameter at fault."""


class SpecError(SdcError, ValueError):
    """An invalid release spec; the message names the field at fault."""


class GridError(SdcError, ValueError):
    """An invalid comparison grid; the message names the field at fault."""


class ReleaseRefused(SdcError, RuntimeError):
    """The release gate refused publication; the message names each measure, its value and its limit.
    ``checks``: the gate's failing checks; ``result``: what the refused run produced (its summary), when known."""

    def __init__(self, message: str, *, checks: tuple = (), result=None):
        super().__init__(message)
        self.checks = tuple(checks)
        self.result = result


class NoneWithinLimits(SdcError, RuntimeError):
    """No configuration of the grid meets every risk limit; the message names the limits."""


class StageFailed(SdcError, RuntimeError):
    """A stage failed inside a library; the message names the stage and the exception's type, never a value."""


OWN_ERRORS = (SdcError, OSError)  # our messages, and OSError (paths only; the flows retry on it)


def reason_of(exc: Exception) -> str:
    """What to say of ``exc`` inside a message of ours: its message when our code raised it, else its type with
    the details withheld."""
    return str(exc) if raised_by_us(exc) else f"{type(exc).__name__} ({WITHHELD})"


def stage_failure(stage: str, exc: Exception) -> StageFailed:
    """The value-free replacement of ``exc`` raised in ``stage``: its type and, where the library names it,
    the column."""
    column = _COLUMN.search(str(exc))
    where = f" in column {column.group(1)}" if column else ""
    return StageFailed(f"{stage} stage failed: {type(exc).__name__}{where} ({WITHHELD})")


OUR_CODE = tuple(str(Path(__file__).resolve().parent.parent / package) + os.sep for package in ("sdc_tasks", "flows"))


def raised_by_us(exc: BaseException) -> bool:
    """Whether ``exc`` was raised by this project's code (its innermost frame is in sdc_tasks/ or flows/), whose
    messages are built from names and positions, not by a library's."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and tb.tb_frame.f_code.co_filename.startswith(OUR_CODE)


@contextlib.contextmanager
def value_free(stage: str) -> Iterator[None]:
    """Let our own errors (our exception classes, anything our code raised) and OSError through; replace any
    other exception by ``stage_failure`` (not chained: tracebacks and Prefect state messages do not carry the
    original). Usable as a decorator too."""
    try:
        yield
    except OWN_ERRORS:
        raise
    except Exception as exc:
        if raised_by_us(exc):
            raise
        failure = stage_failure(stage, exc)
        try:
            raise failure from None
        except StageFailed:
            failure.__context__ = None  # unlinked: a pickle (tblib's reducer, which Dask installs, included) holds
            raise                       # no trace of the original


class _WithheldComputeFailures(logging.Filter):
    """Strip the task, exception and traceback (which may hold or quote data) from "Compute Failed" records."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Keep the record, reduced to its key and state when it reports a failed task."""
        if isinstance(record.msg, str) and record.msg.startswith("Compute Failed"):
            record.msg = f"Compute Failed\nKey:       %s\nState:     %s\n({WITHHELD})"
            record.args = tuple(record.args[:2]) if isinstance(record.args, tuple) else ()
        return True


WORKER_LOGGER = "distributed.worker"
_FILTER = _WithheldComputeFailures()


def withhold_compute_failures() -> None:
    """Install the "Compute Failed" filter on this process's Dask worker logger (once)."""
    logger = logging.getLogger(WORKER_LOGGER)
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
