"""Prefect flow ``release``: validate, mask, evaluate, gate and publish one protected release.

Orchestration only: every stage is one library call from ``sdc_tasks.release``; tasks pass paths and small
summaries (never records), and the Dask cluster does the data work.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from time import perf_counter
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE

from sdc_tasks import __version__
from sdc_tasks import release as R
from sdc_tasks.cluster import dask_client
from sdc_tasks.io import atomic_output_dir, read_table
from sdc_tasks.metrics.risk import scores
from sdc_tasks.report import metrics_table_rows, render_markdown, write_report
from sdc_tasks.spec import ReleaseSpec, load_spec

STAGE = dict(cache_policy=NO_CACHE, persist_result=False)


@task(name="validate", **STAGE)
def validate(spec: ReleaseSpec) -> dict:
    """Check the original file against the spec."""
    return R.validate_input(spec)


@task(name="mask step", task_run_name="mask step {i}: {method}", retries=1, retry_delay_seconds=5, **STAGE)
def mask(spec: ReleaseSpec, i: int, method: str, source: str | None, target: str) -> dict:
    """Apply masking step ``i`` to the original (step 0) or to the previous step's Parquet output."""
    frame = R.published_frame(spec, R.load_original(spec)) if source is None else read_table(source, "parquet")
    return R.mask_step(spec, i, frame, Path(target))


@task(name="evaluate information loss", **STAGE)
def evaluate_il(spec: ReleaseSpec, masked: str) -> dict:
    """IL1..IL5 and IL of the masked dataset."""
    return R.evaluate_release(spec, Path(masked), ("il",))


@task(name="evaluate disclosure risk", **STAGE)
def evaluate_dr(spec: ReleaseSpec, masked: str) -> dict:
    """DLD and interval disclosure of the masked dataset."""
    families = tuple(f for f in spec.metrics if f != "il")
    return R.evaluate_release(spec, Path(masked), families) if families else {}


@task(name="gate", **STAGE)
def gate(spec: ReleaseSpec, metrics: dict) -> dict:
    """The release gate's decision."""
    return R.gate_decision(spec, metrics)


@task(name="report", **STAGE)
def report(spec: ReleaseSpec, root: str, summary: dict, row_counts: dict) -> dict:
    """Write metrics.json, report.md, report.html, the R-U map and manifest.json; publish UI artifacts."""
    out = Path(root)
    R.write_json(out / "metrics.json", summary["metrics"])
    written = write_report(summary, out)
    R.write_json(out / "manifest.json", R.manifest(spec, out, row_counts))
    create_markdown_artifact(render_markdown(summary, ru_map_name=None), key="release-report",
                             description=f"Release report for {spec.name}")
    rows = [{k: r[k] for k in ("group", "measure", "value")} for r in metrics_table_rows(summary["metrics"])]
    create_table_artifact(rows, key="release-metrics", description=f"Metrics of {spec.name}")
    return {name: str(path) for name, path in written.items()}


def _now() -> str:
    """UTC time, ISO 8601."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@flow(name="release", log_prints=False)
def release(spec_path: str, out_dir: str | None = None, dask_address: str | None = None,
            workers: int | None = None, overwrite: bool | None = None) -> dict:
    """Run one release end to end and return its summary; raise GateRefused if the gate refused publication."""
    overrides: dict[str, Any] = {}
    if out_dir is not None:
        overrides["output.dir"] = str(Path(out_dir).resolve())
    if dask_address is not None:
        overrides["dask.address"] = dask_address
    if workers is not None:
        overrides["dask.workers"] = workers
    if overwrite is not None:
        overrides["output.overwrite"] = overwrite
    spec = load_spec(spec_path, overrides)
    log = get_run_logger()
    started, times = _now(), {}
    d = spec.dask
    with dask_client(d.address, d.workers, d.threads_per_worker, d.memory_limit) as client, \
            atomic_output_dir(spec.output_dir, spec.output.overwrite) as tmp:
        log.info("release %s: dask scheduler %s, %d workers", spec.name, client.scheduler.address,
                 len(client.scheduler_info()["workers"]))
        t = perf_counter()
        facts = validate(spec)
        times["validate"] = perf_counter() - t
        log.info("validated %d records in %d partitions", facts["n_records"], facts["partitions"])
        paths = R.StepPaths(tmp)
        steps, source = [], None
        for i, step in enumerate(spec.steps):
            t = perf_counter()
            target = paths.step(i, last=i == len(spec.steps) - 1)
            steps.append(mask(spec, i, step.method, source, str(target)))
            times[f"mask step {i}"] = perf_counter() - t
            log.info("step %d (%s) done: %d blocks", i, step.method, steps[-1]["blocks"])
            source = str(target)
        masked = str(tmp / R.MASKED_DIR)
        t = perf_counter()
        metrics = evaluate_il(spec, masked) if "il" in spec.metrics else {}
        times["evaluate information loss"] = perf_counter() - t
        t = perf_counter()
        metrics.update(evaluate_dr(spec, masked))
        metrics.update(scores(metrics))
        metrics.update({"seed": spec.seed, "method": "+".join(s.method for s in spec.steps)})
        times["evaluate disclosure risk"] = perf_counter() - t
        decision = gate(spec, metrics)
        published = decision["passed"]
        n_masked = int(read_table(masked, "parquet").map_partitions(len).sum().compute())
        if not published:
            log.warning(R.refusal_message(decision))
            R.remove_tree(tmp / R.MASKED_DIR)
        R.remove_tree(tmp / R.WORK_DIR)
        roles = spec.variables
        summary = {
            "title": f"Release report: {spec.name}",
            "run": {"spec_name": spec.name, "spec_hash": spec.spec_hash(), "seed": spec.seed, "started": started,
                    "finished": _now(), "n_records": facts["n_records"], "n_masked": n_masked,
                    "output_dir": str(spec.output_dir), "package_version": __version__},
            "variables": {"masked": sorted({v for i in range(len(spec.steps)) for v in spec.step_variables(i)}),
                          "key": spec.linkage_keys, "dropped": roles.direct_identifiers, "strata": roles.strata},
            "steps": steps,
            "metrics": metrics,
            "gate": {**decision, "published": published},
            "stage_seconds": {k: round(v, 3) for k, v in times.items()},
            "ru_points": R.ru_points(spec.name, metrics),
        }
        report(spec, str(tmp), summary, {"original": facts["n_records"], "masked": n_masked if published else 0})
    if not published:
        raise R.GateRefused(R.refusal_message(decision) + f" (report: {spec.output_dir / 'report.md'})")
    log.info("release %s published to %s", spec.name, spec.output_dir)
    return summary

