"""What a command-line run of a flow prints: by default only this project's log lines (stages, the dashboard's
URL, progress) and anyone's warnings and errors; Prefect's own INFO lines (the temporary server, flow and task
run states) only with ``sdc --verbose``."""

from __future__ import annotations

import logging

from prefect.logging.handlers import PrefectConsoleHandler

from sdc_tasks.errors import OUR_CODE


class OwnLinesAndWarnings(logging.Filter):
    """Keep a record when it is a warning or worse, or when this project's code (sdc_tasks/, flows/) logged it."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Whether the console shows ``record``."""
        return record.levelno >= logging.WARNING or record.pathname.startswith(OUR_CODE)


_QUIET = OwnLinesAndWarnings()


def quiet_console() -> None:
    """Install the filter on every Prefect console handler of this process (once)."""
    loggers = [logging.getLogger(), *(logger for logger in logging.Logger.manager.loggerDict.values()
                                      if isinstance(logger, logging.Logger))]
    for logger in loggers:
        for handler in logger.handlers:
            if isinstance(handler, PrefectConsoleHandler) and _QUIET not in handler.filters:
                handler.addFilter(_QUIET)
