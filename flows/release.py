"""Prefect flow ``release``: validate, mask, evaluate, gate and publish one protected release.

Orchestration only: the flow runs the library's release sequence (``sdc_tasks.pipeline.run.released``) with each
stage of ``sdc_tasks.pipeline.stages`` wrapped as a task; tasks pass paths and small summaries (never records),
and the Dask cluster does the data work. No result is persisted, and every task and the flow itself fail with
value-free errors (``sdc_tasks.errors.value_free``): a library's message, which may quote a confidential value,
never reaches Prefect's states, logs or result storage.
"""

from __future__ import annotations

import logging
from pathlib import Path

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.states import State

from flows.artifacts import published_with_artifacts
from flows.progress import flow_progress
from flows.states import refused_state
from sdc_tasks.errors import ReleaseRefused, SdcError, StageFailed, value_free
from sdc_tasks.pipeline import stages
from sdc_tasks.pipeline.gate import GateCheck, gate_checks
from sdc_tasks.pipeline.preflight import checked_spec, release_overrides
from sdc_tasks.pipeline.run import Stages, released, spec_cluster
from sdc_tasks.pipeline.spec import ReleaseSpec
from sdc_tasks.pipeline.summary import ReleaseSummary
from sdc_tasks.tls import TlsFiles

STAGE = dict(cache_policy=NO_CACHE, persist_result=False)
FLOW_RUN_LOGGER = "prefect.flow_runs"


class OwnErrorsWithoutTraceback(logging.Filter):
    """Drop the traceback Prefect logs with a failed flow run when the failure is one of our errors (``SdcError``:
    bad input, a full disk, a lost scheduler, a refusal), whose one-line message says what is at fault; a
    library's failure (``StageFailed``) keeps it."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Keep the record, without its traceback when it reports one of our errors."""
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, SdcError) and not isinstance(exc, StageFailed):
            record.exc_info = None
        return True


logging.getLogger(FLOW_RUN_LOGGER).addFilter(OwnErrorsWithoutTraceback())


def io_error(task, task_run, state) -> bool:
    """Whether a failed stage raised an IO error (OSError: file system, network, a lost Dask connection),
    the kind of failure a retry can cure; bad input (InputError, a ValueError) fails at once."""
    return isinstance(state.result(raise_on_failure=False), OSError)


IO_STAGE = dict(retries=1, retry_delay_seconds=5, retry_condition_fn=io_error, **STAGE)


def mask_run_name(parameters: dict) -> str:
    """The mask task's run name: "mask step I: METHOD"."""
    return f"mask step {parameters['i']}: {parameters['spec'].steps[parameters['i']].method}"


@task(name="validate", task_run_name="validate", **IO_STAGE)
@value_free("validate")
def validate(spec: ReleaseSpec, checkpoint: Path) -> dict:
    """Check the original file against the spec, writing its checkpoint."""
    return stages.validate_input(spec, checkpoint)


@task(name="block", task_run_name="block step {i}", **IO_STAGE)
@value_free("block")
def block(spec: ReleaseSpec, i: int, paths: stages.ReleasePaths) -> dict:
    """Partition step ``i``'s records into data-driven blocks."""
    return stages.block_stage(spec, i, paths)


@task(name="mask step", task_run_name=mask_run_name, **IO_STAGE)
@value_free("mask")
def mask(spec: ReleaseSpec, i: int, paths: stages.ReleasePaths) -> dict:
    """Run masking step ``i`` per block or per scope."""
    return stages.mask_stage(spec, i, paths)


@task(name="write", task_run_name="write step {i}", **IO_STAGE)
@value_free("write")
def write(spec: ReleaseSpec, i: int, paths: stages.ReleasePaths) -> dict:
    """Write step ``i``'s output in input order (the last step writes masked/)."""
    return stages.write_stage(spec, i, paths)


@task(name="evaluate", task_run_name="evaluate", **IO_STAGE)
@value_free("evaluate")
def evaluate(spec: ReleaseSpec, paths: stages.ReleasePaths) -> dict:
    """Information loss and disclosure risk of the masked dataset: every metric family of the spec at once."""
    return stages.evaluate_release(spec, paths)


@task(name="profile", task_run_name="profile", **IO_STAGE)
@value_free("profile")
def profile(spec: ReleaseSpec, paths: stages.ReleasePaths, profiles: list[dict] | None = None) -> dict:
    """The report's per-variable figures: distributions, each variable's share of the measures (computed by the
    evaluation when ``profiles`` are given), correlations."""
    return stages.profile_release(spec, paths, profiles)


@task(name="gate", task_run_name="gate", **STAGE)
@value_free("gate")
def gate(spec: ReleaseSpec, metrics: dict) -> tuple[GateCheck, ...]:
    """The release gate's checks."""
    return gate_checks(spec, metrics)


@task(name="report", task_run_name="report", **IO_STAGE)
@value_free("report")
def report(summary: ReleaseSummary, root: Path) -> None:
    """Write metrics.json, report.md, report.html, the R-U map and manifest.json; publish UI artifacts."""
    published_with_artifacts(summary, root, "release")


TASKS = Stages(validate=validate, block=block, mask=mask, write=write, evaluate=evaluate, profile=profile, gate=gate,
               publish=report)


@flow(name="release", log_prints=False, persist_result=False)
@value_free("release")
def release(spec_path: str, out_dir: str | None = None, dask_address: str | None = None,
            workers: int | None = None, overwrite: bool | None = None, tls_ca_file: str | None = None,
            tls_cert: str | None = None, tls_key: str | None = None) -> ReleaseSummary | State:
    """Run one release end to end and return its summary. When the gate refuses publication the flow run ends in
    a Failed state named "Refused" (``refused_state``) and calling the flow raises ReleaseRefused.
    The tls_* files (for a tls:// scheduler) replace the spec's dask.tls files one by one."""
    spec, _ = checked_spec(spec_path, release_overrides(out_dir, dask_address, workers, overwrite,
                                                        TlsFiles(tls_ca_file, tls_cert, tls_key)))
    try:
        with flow_progress():
            return released(spec, spec_cluster(spec), TASKS, get_run_logger())
    except ReleaseRefused as exc:
        return refused_state(exc)
