"""The progress of a flow run in Prefect: per stage, a progress artifact (percent of the stage's Dask tasks done,
its description the stage's line: tasks done/total, elapsed, remaining) and plain lines in the run's log."""

from __future__ import annotations

import contextlib
from typing import Iterator

from prefect import get_run_logger
from prefect.artifacts import create_progress_artifact, update_progress_artifact

from sdc_tasks.progress import StageProgress, TerminalProgress, tracking

UPDATE_SECONDS = 2.0  # a stage's artifact is updated at most this often (and when the stage ends)


class ProgressArtifacts:
    """One progress artifact per stage of the flow run, created when the stage is first shown."""

    def __init__(self, every: float = UPDATE_SECONDS):
        self.every = every
        self.artifacts: dict[str, object] = {}
        self.updated: dict[str, float] = {}

    def __call__(self, progress: StageProgress) -> None:
        """Create the stage's artifact (not for a stage that failed before it was shown), or update it when it is
        older than ``every`` seconds or the stage ended."""
        percent, text = round(100 * progress.fraction(), 1), progress.line()
        if progress.failed and progress.stage not in self.artifacts:
            return
        if progress.stage not in self.artifacts:
            self.artifacts[progress.stage] = create_progress_artifact(percent, description=text)
            self.updated[progress.stage] = progress.elapsed
        elif progress.finished or progress.elapsed - self.updated[progress.stage] >= self.every:
            update_progress_artifact(self.artifacts[progress.stage], percent, description=text)
            self.updated[progress.stage] = progress.elapsed


@contextlib.contextmanager
def flow_progress() -> Iterator[None]:
    """For the block (inside a flow run), each named stage's progress as a progress artifact and as the stage's
    line on the terminal: redrawn in place on a terminal, otherwise logged every 10 s and at the stage's end."""
    with tracking([TerminalProgress(log=get_run_logger()), ProgressArtifacts()]):
        yield
