"""Prefect flow ``evaluate``: information loss and disclosure risk of any masked file against its original.

Orchestration only: the numbers come from one call of ``sdc_tasks.evaluation.measures.evaluate_paths`` (every
family asked for at once), the summary and its files from ``sdc_tasks.pipeline.summary``; the flow writes
metrics.json, report.md, report.html and the R-U map atomically into the output directory and publishes UI
artifacts.
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from flows.artifacts import published_with_artifacts
from sdc_tasks.cluster import dask_client
from sdc_tasks.errors import value_free
from sdc_tasks.evaluation.measures import evaluate_paths
from sdc_tasks.metrics.catalogue import DEFAULT_FAMILIES
from sdc_tasks.outputs import atomic_output_dir
from sdc_tasks.pipeline.summary import ReleaseSummary, StageTimes, evaluation_summary, now
from sdc_tasks.tls import TlsFiles

STAGE = dict(cache_policy=NO_CACHE, persist_result=False)


@task(name="evaluate", task_run_name="evaluate", **STAGE)
@value_free("evaluate")
def measures(original: str, masked: str, id_col: str, variables, key_vars, families, pairing,
             categorical: dict) -> dict:
    """The metric families asked for, information loss and disclosure risk, in one evaluation."""
    return evaluate_paths(original, masked, id_col, variables, key_vars, families, pairing, **categorical)


@task(name="report", task_run_name="report", **STAGE)
@value_free("report")
def report(summary: ReleaseSummary, root: str) -> None:
    """Write metrics.json, report.md, report.html and the R-U map; publish UI artifacts."""
    published_with_artifacts(summary, Path(root), "evaluation")


@flow(name="evaluate", log_prints=False, persist_result=False)
@value_free("evaluate")
def evaluate(original: str, masked: str, out_dir: str, id_col: str = "record_id",
             variables: list[str] | None = None, key_vars: list[str] | None = None,
             families: list[str] | None = None, pairing: str = "auto", dask_address: str | None = None,
             workers: int = 2, overwrite: bool = False, categorical: list[str] | None = None,
             ordinal: dict[str, list] | None = None, weight: str | None = None, reference: str | None = None,
             tls_ca_file: str | None = None, tls_cert: str | None = None, tls_key: str | None = None) -> dict:
    """Evaluate ``masked`` against ``original``, write the metrics and report to ``out_dir`` and return the
    metrics (categorical variables, ordinal orders, weight and reference file for the cat_il and cat_risk
    families; the tls_* files for a tls:// ``dask_address``)."""
    log = get_run_logger()
    times, started = StageTimes(), now()
    with dask_client(dask_address, workers, tls=TlsFiles(tls_ca_file, tls_cert, tls_key)), \
            atomic_output_dir(out_dir, overwrite, inputs=[original, masked, reference]) as tmp:
        cat = {"categorical": categorical, "ordinal": ordinal, "weight": weight, "reference": reference}
        with times.timed("evaluate"):
            metrics = measures(original, masked, id_col, variables, key_vars, tuple(families or DEFAULT_FAMILIES),
                               pairing, cat)
        log.info("evaluated %s records (%s pairing)", metrics.get("n_masked"), metrics.get("pairing"))
        summary = evaluation_summary(original, masked, out_dir, metrics, times, started)
        report(summary, str(tmp))
    return summary.metrics
