"""Prefect flow ``release``: validate, mask, evaluate, gate and publish one protected release.

Orchestration only: every stage is one library call from ``sdc_tasks.pipeline.stages``; tasks pass paths and small
summaries (never records), and the Dask cluster does the data work. No result is persisted, and every task and
the flow itself fail with value-free errors (``sdc_tasks.errors.value_free``): a library's message, which may
quote a confidential value, never reaches Prefect's states, logs or result storage.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from time import perf_counter, time
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from flows.artifacts import publish_artifacts
from sdc_tasks import __version__
from sdc_tasks.cluster import TlsFiles, dask_client
from sdc_tasks.errors import ReleaseRefused, value_free
from sdc_tasks.io import parquet_row_counts
from sdc_tasks.metrics.catalogue import IL_FAMILIES, RISK_FAMILIES
from sdc_tasks.metrics.risk import scores
from sdc_tasks.outputs import atomic_output_dir
from sdc_tasks.pipeline import stages as R
from sdc_tasks.pipeline.spec import ReleaseSpec, columns_by_role, load_spec
from sdc_tasks.report import write_report

STAGE = dict(cache_policy=NO_CACHE, persist_result=False)


def io_error(task, task_run, state) -> bool:
    """Whether a failed stage raised an IO error (OSError: file system, network, a lost Dask connection),
    the kind of failure a retry can cure; bad input (InputError, a ValueError) fails at once."""
    return isinstance(state.result(raise_on_failure=False), OSError)


IO_STAGE = dict(retries=1, retry_delay_seconds=5, retry_condition_fn=io_error, **STAGE)


@task(name="validate", task_run_name="validate", **IO_STAGE)
@value_free("validate")
def validate(spec: ReleaseSpec) -> dict:
    """Check the original file against the spec."""
    return R.validate_input(spec)


@task(name="block", task_run_name="block step {i}", **IO_STAGE)
@value_free("block")
def block(spec: ReleaseSpec, i: int, previous: str | None, work: str) -> dict:
    """Partition step ``i``'s records into data-driven blocks."""
    return R.block_stage(spec, i, previous, Path(work))


@task(name="mask step", task_run_name="mask step {i}: {method}", **IO_STAGE)
@value_free("mask")
def mask(spec: ReleaseSpec, i: int, method: str, previous: str | None, work: str) -> dict:
    """Run masking step ``i`` per block or per scope."""
    return R.mask_stage(spec, i, previous, Path(work))


@task(name="write", task_run_name="write step {i}", **IO_STAGE)
@value_free("write")
def write(spec: ReleaseSpec, i: int, previous: str | None, work: str, target: str) -> dict:
    """Write step ``i``'s output in input order (the last step writes masked/)."""
    return R.write_stage(spec, i, previous, Path(work), Path(target))


@task(name="evaluate information loss", task_run_name="evaluate information loss", **IO_STAGE)
@value_free("evaluate information loss")
def evaluate_il(spec: ReleaseSpec, masked: str) -> dict:
    """The information loss families asked for (IL, matrix measures, brMAE/brMSE, PIL)."""
    families = tuple(f for f in spec.metrics if f in IL_FAMILIES)
    return R.evaluate_release(spec, Path(masked), families) if families else {}


@task(name="evaluate disclosure risk", task_run_name="evaluate disclosure risk", **IO_STAGE)
@value_free("evaluate disclosure risk")
def evaluate_dr(spec: ReleaseSpec, masked: str) -> dict:
    """Distance and probabilistic linkage and interval disclosure of the masked dataset."""
    families = tuple(f for f in spec.metrics if f in RISK_FAMILIES)
    return R.evaluate_release(spec, Path(masked), families) if families else {}


@task(name="gate", task_run_name="gate", **STAGE)
@value_free("gate")
def gate(spec: ReleaseSpec, metrics: dict) -> dict:
    """The release gate's decision."""
    return R.gate_decision(spec, metrics)


@task(name="report", task_run_name="report", **IO_STAGE)
@value_free("report")
def report(spec: ReleaseSpec, root: str, summary: dict, row_counts: dict) -> dict:
    """Write metrics.json, report.md, report.html, the R-U map and manifest.json; publish UI artifacts."""
    out = Path(root)
    R.write_json(out / "metrics.json", summary["metrics"])
    written = write_report(summary, out)
    R.write_json(out / "manifest.json", R.manifest(spec, out, row_counts))
    publish_artifacts(summary, "release", spec.name)
    return {name: str(path) for name, path in written.items()}


def _record(times: dict, spans: dict, stage: str, t: float) -> None:
    """Store a stage's duration since ``perf_counter()`` was ``t`` and its span in wall-clock (Unix) time."""
    times[stage] = perf_counter() - t
    now = time()
    spans[stage] = (now - times[stage], now)


def _now() -> str:
    """UTC time, ISO 8601."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def release_overrides(out_dir: str | None = None, dask_address: str | None = None, workers: int | None = None,
                      overwrite: bool | None = None, tls: TlsFiles = TlsFiles()) -> dict[str, Any]:
    """The spec fields a release run's parameters replace (those given), as load_spec's dotted overrides; the
    output directory and the TLS files resolved against the working directory."""
    overrides: dict[str, Any] = {}
    if out_dir is not None:
        overrides["output.dir"] = str(Path(out_dir).resolve())
    if dask_address is not None:
        overrides["dask.address"] = dask_address
    for field, path in vars(tls.resolved()).items():
        if path is not None:
            overrides[f"dask.tls.{field}"] = path
    if workers is not None:
        overrides["dask.workers"] = workers
    if overwrite is not None:
        overrides["output.overwrite"] = overwrite
    return overrides


@flow(name="release", log_prints=False, persist_result=False)
@value_free("release")
def release(spec_path: str, out_dir: str | None = None, dask_address: str | None = None,
            workers: int | None = None, overwrite: bool | None = None, tls_ca_file: str | None = None,
            tls_cert: str | None = None, tls_key: str | None = None) -> dict:
    """Run one release end to end and return its summary; raise ReleaseRefused if the gate refused publication.
    The tls_* files (for a tls:// scheduler) replace the spec's dask.tls files one by one."""
    spec = load_spec(spec_path, release_overrides(out_dir, dask_address, workers, overwrite,
                                                  TlsFiles(tls_ca_file, tls_cert, tls_key)))
    log = get_run_logger()
    started, times, spans = _now(), {}, {}
    d = spec.dask
    with atomic_output_dir(spec.output_dir, spec.output.overwrite, inputs=[spec.input_path]) as tmp, \
            dask_client(d.address, d.workers, d.threads_per_worker, d.memory_limit, spec.dask_tls) as client:
        log.info("release %s: dask scheduler %s, %d workers", spec.name, client.scheduler.address,
                 len(client.scheduler_info()["workers"]))
        t = perf_counter()
        facts = validate(spec)
        _record(times, spans, "validate", t)
        log.info("validated %d records in %d partitions in %.1f s", facts["n_records"], facts["partitions"],
                 times["validate"])
        paths = R.StepPaths(tmp)
        steps, previous = [], None
        for i, step in enumerate(spec.steps):
            t = perf_counter()
            work, target = str(paths.work(i)), str(paths.output(i, last=i == len(spec.steps) - 1))
            blocks = block(spec, i, previous, work)["blocks"] if R.needs_blocks(spec, i) else None
            facts_i = mask(spec, i, step.method, previous, work)
            facts_i["blocks"] = facts_i["blocks"] if blocks is None else blocks
            n_written = write(spec, i, previous, work, target)["rows"]
            facts_i["seconds"] = round(perf_counter() - t, 3)
            steps.append(facts_i)
            _record(times, spans, f"step {i} ({step.method})", t)
            log.info("step %d (%s): %d blocks, %d records written in %.1f s", i, step.method, facts_i["blocks"],
                     n_written, facts_i["seconds"])
            previous = target
        masked = str(tmp / R.MASKED_DIR)
        t = perf_counter()
        metrics = evaluate_il(spec, masked)
        _record(times, spans, "evaluate information loss", t)
        log.info("information loss evaluated in %.1f s", times["evaluate information loss"])
        t = perf_counter()
        metrics.update(evaluate_dr(spec, masked))
        metrics.update(scores(metrics))
        metrics.update({"seed": spec.seed, "method": "+".join(s.method for s in spec.steps)})
        _record(times, spans, "evaluate disclosure risk", t)
        log.info("disclosure risk evaluated in %.1f s", times["evaluate disclosure risk"])
        decision = gate(spec, metrics)
        published = decision["passed"]
        n_masked = sum(parquet_row_counts(masked))
        if not published:
            log.warning(R.refusal_message(decision))
            R.remove_tree(tmp / R.MASKED_DIR)
        R.remove_tree(tmp / R.WORK_DIR)
        columns = spec.column_accounting()
        by_role = columns_by_role(columns)
        summary = {
            "title": f"Release report: {spec.name}",
            "run": {"spec_name": spec.name, "spec_hash": spec.spec_hash(), "seed": spec.seed, "started": started,
                    "finished": _now(), "n_records": facts["n_records"], "n_masked": n_masked,
                    "output_dir": str(spec.output_dir), "package_version": __version__},
            "variables": {"masked": sorted(by_role["masked"]), "key": [*spec.linkage_keys, *spec.categorical_keys],
                          "dropped": by_role["dropped"], "passed_through": by_role["passed_through"],
                          "strata": spec.variables.strata, "columns": columns},
            "steps": steps,
            "metrics": metrics,
            "gate": {**decision, "published": published},
            "stage_seconds": {k: round(v, 3) for k, v in times.items()},
            "stage_spans": spans,
            "ru_points": R.ru_points(spec.name, metrics),
        }
        report(spec, str(tmp), summary, {"original": facts["n_records"], "masked": n_masked if published else 0})
    if not published:
        raise ReleaseRefused(R.refusal_message(decision) + f" (report: {spec.output_dir / 'report.md'})")
    log.info("release %s published to %s", spec.name, spec.output_dir)
    return summary

