"""Prefect flow ``evaluate``: information loss and disclosure risk of any masked file against its original.

Orchestration only: the numbers come from ``sdc_tasks.evaluation.measures``; the flow writes metrics.json, report.md,
report.html and the R-U map atomically into the output directory and publishes UI artifacts.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from flows.artifacts import publish_artifacts
from sdc_tasks import __version__
from sdc_tasks.cluster import TlsFiles, dask_client
from sdc_tasks.errors import value_free
from sdc_tasks.evaluation.measures import evaluate_paths
from sdc_tasks.metrics.catalogue import DEFAULT_FAMILIES, IL_FAMILIES, RISK_FAMILIES
from sdc_tasks.metrics.risk import scores
from sdc_tasks.outputs import atomic_output_dir
from sdc_tasks.pipeline.stages import ru_points, write_json
from sdc_tasks.report import write_report

STAGE = dict(cache_policy=NO_CACHE, persist_result=False)


@task(name="evaluate information loss", task_run_name="evaluate information loss", **STAGE)
@value_free("evaluate information loss")
def information_loss(original: str, masked: str, id_col: str, variables, key_vars, families, pairing,
                     categorical: dict) -> dict:
    """The information loss families (IL, matrix measures, brMAE/brMSE, PIL, categorical IL)."""
    asked = tuple(f for f in families if f in IL_FAMILIES)
    return evaluate_paths(original, masked, id_col, variables, key_vars, asked, pairing, **categorical) if asked else {}


@task(name="evaluate disclosure risk", task_run_name="evaluate disclosure risk", **STAGE)
@value_free("evaluate disclosure risk")
def disclosure_risk(original: str, masked: str, id_col: str, variables, key_vars, families, pairing,
                    categorical: dict) -> dict:
    """Distance and probabilistic linkage, interval disclosure and the categorical risk measures."""
    asked = tuple(f for f in families if f in RISK_FAMILIES)
    return evaluate_paths(original, masked, id_col, variables, key_vars, asked, pairing, **categorical) if asked else {}


@task(name="report", task_run_name="report", **STAGE)
@value_free("report")
def report(root: str, summary: dict, name: str) -> dict:
    """Write metrics.json, report.md, report.html and the R-U map; publish UI artifacts."""
    out = Path(root)
    write_json(out / "metrics.json", summary["metrics"])
    written = write_report(summary, out)
    publish_artifacts(summary, "evaluation", name)
    return {k: str(v) for k, v in written.items()}


@flow(name="evaluate", log_prints=False, persist_result=False)
@value_free("evaluate")
def evaluate(original: str, masked: str, out_dir: str, id_col: str = "record_id",
             variables: list[str] | None = None, key_vars: list[str] | None = None,
             families: list[str] | None = None, pairing: str = "auto", dask_address: str | None = None,
             workers: int = 2, overwrite: bool = False, categorical: list[str] | None = None,
             ordinal: dict[str, list] | None = None, weight: str | None = None, reference: str | None = None,
             tls_ca_file: str | None = None, tls_cert: str | None = None, tls_key: str | None = None) -> dict:
    """Evaluate ``masked`` against ``original`` and write the metrics and report to ``out_dir`` (categorical
    variables, ordinal orders, weight and reference file for the cat_il and cat_risk families; the tls_* files
    for a tls:// ``dask_address``)."""
    log = get_run_logger()
    fams = tuple(families or DEFAULT_FAMILIES)
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    name = f"{Path(masked).name} vs {Path(original).name}"
    with dask_client(dask_address, workers, tls=TlsFiles(tls_ca_file, tls_cert, tls_key)), \
            atomic_output_dir(out_dir, overwrite, inputs=[original, masked, reference]) as tmp:
        cat = {"categorical": categorical, "ordinal": ordinal, "weight": weight, "reference": reference}
        metrics = information_loss(original, masked, id_col, variables, key_vars, fams, pairing, cat)
        metrics.update(disclosure_risk(original, masked, id_col, variables, key_vars, fams, pairing, cat))
        metrics.update(scores(metrics))
        log.info("evaluated %s records (%s pairing)", metrics.get("n_masked"), metrics.get("pairing"))
        summary = {
            "title": f"Evaluation: {name}",
            "run": {"spec_name": name, "spec_hash": "", "seed": 0, "started": started,
                    "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                    "n_records": metrics.get("n", 0), "n_masked": metrics.get("n_masked", 0),
                    "output_dir": str(Path(out_dir).resolve()), "package_version": __version__},
            "variables": {"masked": [], "key": metrics.get("key_vars", []), "dropped": [], "strata": None},
            "steps": [],
            "metrics": metrics,
            "gate": None,
            "stage_seconds": {},
            "ru_points": ru_points(Path(masked).name, metrics),
        }
        report(str(tmp), summary, name)
    return metrics
