"""A release run end to end, in the library: validate, mask step by step, evaluate, gate and publish.

:func:`run_release` runs the stage functions of ``sdc_tasks.pipeline.stages`` in order, in this process (the Dask
work on the spec's cluster or the caller's client), without Prefect. The Prefect flow ``flows/release.py`` runs
the same sequence (:func:`released`) with each stage wrapped as a task, so both write the same files.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ContextManager, Iterator

from distributed import Client

from sdc_tasks.cluster import WorkersLost, dashboard_link, dask_client
from sdc_tasks.errors import InputError, ReleaseRefused
from sdc_tasks.evaluation.profile import PROFILES_KEY
from sdc_tasks.files import check_input_unchanged, input_identity
from sdc_tasks.io import parquet_row_counts
from sdc_tasks.masking.postmask_outcome import outcome_from_dict, outcome_metrics
from sdc_tasks.outputs import atomic_output_dir, kept_metrics
from sdc_tasks.pipeline.gate import failed_checks, gate_checks, refusal_message
from sdc_tasks.pipeline.spec import ReleaseSpec
from sdc_tasks.pipeline.stages import (
    WORK_DIR,
    ReleasePaths,
    block_stage,
    evaluate_release,
    mask_stage,
    needs_blocks,
    profile_release,
    remove_tree,
    validate_input,
    write_stage,
)
from sdc_tasks.pipeline.summary import ReleaseSummary, StageTimes, StepSummary, now, publish, release_summary
from sdc_tasks.progress import stage as progress_stage

LOG = logging.getLogger("sdc_tasks.pipeline")
LOG.addHandler(logging.NullHandler())  # a library logs only where its caller configured logging


@dataclass(frozen=True)
class Stages:
    """The stage functions a release runs, in the order they run (see ``sdc_tasks.pipeline.stages``); the Prefect
    flow gives each one wrapped as a task."""

    validate: Callable[..., dict] = validate_input
    block: Callable[..., dict] = block_stage
    mask: Callable[..., dict] = mask_stage
    write: Callable[..., dict] = write_stage
    evaluate: Callable[..., dict] = evaluate_release
    profile: Callable[..., dict] = profile_release
    gate: Callable[..., tuple] = gate_checks
    publish: Callable[..., Any] = publish


def run_release(spec: ReleaseSpec, *, client: Client | None = None, out_dir: str | Path | None = None,
                overwrite: bool | None = None) -> ReleaseSummary:
    """Run the release ``spec`` describes and return its summary; raise ``ReleaseRefused`` (its ``checks``: the
    failing gate checks; ``result``: the summary) when the gate refuses publication, after writing the refusal's
    report, metrics and manifest to the output directory (without masked/), as the ``sdc release`` command does.

    ``client``: a Dask client to run on (default: the spec's dask section, a LocalCluster or its scheduler
    address); ``out_dir`` and ``overwrite`` replace the spec's output.dir (resolved against the working
    directory) and output.overwrite."""
    spec = with_output(spec, out_dir, overwrite)
    return released(spec, spec_cluster(spec) if client is None else _current(client), Stages(), LOG)


def spec_cluster(spec: ReleaseSpec) -> ContextManager[Client]:
    """The Dask client the spec's dask section asks for (``cluster.dask_client``: a LocalCluster, or the scheduler
    at its address), closed when the block ends."""
    d = spec.dask
    return dask_client(d.address, d.workers, d.threads_per_worker, d.memory_limit, spec.dask_tls)


def with_output(spec: ReleaseSpec, out_dir: str | Path | None, overwrite: bool | None) -> ReleaseSpec:
    """``spec`` with its output directory (resolved against the working directory) and overwrite flag replaced
    by those given."""
    changes: dict[str, Any] = {}
    if out_dir is not None:
        changes["dir"] = str(Path(out_dir).resolve())
    if overwrite is not None:
        changes["overwrite"] = overwrite
    return spec.model_copy(update={"output": spec.output.model_copy(update=changes)}) if changes else spec


@contextlib.contextmanager
def _current(client: Client) -> Iterator[Client]:
    """``client`` as the Dask client of the block (left open)."""
    with client.as_current():
        yield client


def released(spec: ReleaseSpec, cluster: ContextManager[Client], stages: Stages,
             log: logging.Logger | logging.LoggerAdapter) -> ReleaseSummary:
    """Run the release into a private directory that becomes the spec's output directory (``outputs.
    atomic_output_dir``), on the Dask client ``cluster`` yields; return the summary, or raise ``ReleaseRefused``
    once the refusal's report is in place. InputError, nothing published: when the input changed during the run
    (its identity, taken before validation, is checked again just before publication), when the Dask scheduler
    was lost, or when writing failed (a full, read-only or vanished output), naming where the computed metrics
    were kept (:func:`sdc_tasks.outputs.kept_metrics`)."""
    progress: dict[str, Any] = {}
    try:
        with atomic_output_dir(spec.output_dir, spec.output.overwrite, inputs=[spec.input_path]) as tmp, \
                cluster as client:
            with _watching(client, progress):
                log.info("release %s: dask scheduler %s, %d workers, dashboard %s", spec.name, progress["scheduler"],
                         len(client.scheduler_info()["workers"]), dashboard_link(client) or "none")
                identity = input_identity(spec.input_path, spec.input_format)
                summary = release_into(spec, tmp, stages, log, progress)
            check_input_unchanged(spec.input_path, spec.input_format, identity)
            progress["checked"] = True
    except Exception as exc:
        failure = _environment_failure(spec, exc, progress)
        if failure is None:
            raise
        raise failure from None
    if not summary.published:
        raise ReleaseRefused(f"{refusal_message(summary.checks)} (report: {summary.paths.report_md})",
                             checks=failed_checks(summary.checks), result=summary)
    log.info("release %s published to %s", spec.name, spec.output_dir)
    return summary


def _environment_failure(spec: ReleaseSpec, exc: Exception, progress: dict) -> InputError | None:
    """The InputError that reports ``exc`` as a failure of the run's environment: the Dask scheduler lost, an
    OSError (writing, a vanished output) or a publication refused after the input was checked; None for any
    other failure (bad input, a library's error), reported as it is."""
    if _scheduler_lost(progress):
        return InputError(_not_written(
            spec, f"lost the Dask scheduler {progress['scheduler']} during the run ({type(exc).__name__})", progress))
    if isinstance(exc, WorkersLost):
        return InputError(_not_written(spec, str(exc), progress))
    if isinstance(exc, OSError):
        return InputError(_not_written(spec, _cannot_write(spec, _os_reason(exc)), progress))
    if isinstance(exc, InputError) and progress.get("checked"):
        return InputError(_not_written(spec, _cannot_write(spec, str(exc)), progress))
    return None


def _cannot_write(spec: ReleaseSpec, reason: str) -> str:
    """The head of the error of a release whose output could not be written, for ``reason``."""
    return f"cannot write the release to {spec.output_dir}: {reason}"


def _os_reason(exc: OSError) -> str:
    """What an OSError says: its reason and the file it names."""
    if exc.strerror:
        return f"{exc.strerror} ({exc.filename})" if exc.filename else exc.strerror
    return str(exc) or type(exc).__name__


@contextlib.contextmanager
def _watching(client: Client, progress: dict) -> Iterator[None]:
    """Note the client's scheduler in ``progress`` and, when the block fails, whether the client had lost it
    (before the cluster's block closes the client)."""
    progress["scheduler"] = client.scheduler.address
    try:
        yield
    except Exception:
        progress["lost"] = client.status != "running"
        raise


def _scheduler_lost(progress: dict) -> bool:
    """Whether the run failed after its Dask client had lost the connection to its scheduler."""
    return progress.get("lost", False)


def _not_written(spec: ReleaseSpec, head: str, progress: dict) -> str:
    """The one-line error of a release that could not be written (or lost its scheduler or workers): ``head``,
    what failed, then that nothing was published and, when the metrics had been computed, where they were
    kept."""
    if "metrics" not in progress:
        return f"{head}; nothing was published"
    kept, why = kept_metrics(spec.name, progress["metrics"])
    saved = f"its metrics were kept in {kept}" if kept else f"its metrics could not be kept either ({why})"
    return f"{head}; nothing was published, {saved}"


def release_into(spec: ReleaseSpec, root: Path, stages: Stages, log: logging.Logger | logging.LoggerAdapter,
                 progress: dict) -> ReleaseSummary:
    """Run every stage of the release in ``root`` and publish its files there; return its summary, published or
    refused (a refused release's masked/ is removed). The work directory, with the input's checkpoint, is
    removed before the files are published. The metrics, once computed, go into ``progress`` (kept when writing
    fails)."""
    paths, times, started = ReleasePaths(root), StageTimes(), now()
    with times.timed("validate"), progress_stage("validate"):
        facts = stages.validate(spec, paths.checkpoint)
    log.info("validated %d records in %d partitions in %.1f s", facts["n_records"], facts["partitions"],
             times.seconds["validate"])
    steps = [_masking_step(spec, i, paths, stages, times, log) for i in range(len(spec.steps))]
    with times.timed("evaluate"):
        with progress_stage("evaluate"):
            metrics = {**stages.evaluate(spec, paths), **outcome_metrics(steps)}
        with progress_stage("profile"):
            profile = stages.profile(spec, paths, metrics.pop(PROFILES_KEY, None))
    progress["metrics"] = metrics
    log.info("evaluated in %.1f s", times.seconds["evaluate"])
    checks = stages.gate(spec, metrics)
    records_out = sum(parquet_row_counts(paths.masked))
    if failed_checks(checks):
        log.warning(refusal_message(checks))
        remove_tree(paths.masked)
    remove_tree(root / WORK_DIR)
    summary = release_summary(spec, facts["n_records"], records_out, steps, metrics, checks, times, started,
                              profile)
    stages.publish(summary, root)
    return summary


def _masking_step(spec: ReleaseSpec, i: int, paths: ReleasePaths, stages: Stages, times: StageTimes,
                  log: logging.Logger | logging.LoggerAdapter) -> StepSummary:
    """Run step ``i``'s stages (block when its method needs blocks, mask, write) and return its summary."""
    step = spec.steps[i]
    name = f"step {i} ({step.method})"
    with times.timed(name):
        blocks = None
        if needs_blocks(spec, i):
            with progress_stage(f"block {name}"):
                blocks = stages.block(spec, i, paths)["blocks"]
        with progress_stage(f"mask {name}"):
            masked = stages.mask(spec, i, paths)
            scopes = masked["blocks"]
        with progress_stage(f"write {name}"):
            rows = stages.write(spec, i, paths)["rows"]
    summary = StepSummary(step.method, dict(step.params), spec.step_variables(i),
                          scopes if blocks is None else blocks, round(times.seconds[name], 3), masked.get("outcome"))
    log.info("step %d (%s): %d blocks, %d records written in %.1f s", i, step.method, summary.blocks, rows,
             summary.seconds)
    if summary.outcome is not None:
        outcome = outcome_from_dict(summary.outcome)
        log.info("step %d %s", i, outcome.text())
        if outcome.warning():
            log.warning("step %d %s", i, outcome.warning().removeprefix("warning: "))
    return summary
