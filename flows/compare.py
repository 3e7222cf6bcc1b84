"""Prefect flow ``compare``: rank masking methods and parameters on one file (chapter 6 methodology).

Orchestration only: grid, runs, ranking and files come from ``sdc_tasks.comparison.run`` and
``sdc_tasks.comparison.outputs``; the flow writes the comparison atomically, optionally the best release spec,
and publishes the ranking as Markdown and table artifacts (statistics only, no record values).
"""

from __future__ import annotations

import numbers
from pathlib import Path
from time import perf_counter

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.states import State

from flows.states import refused_state
from sdc_tasks.cluster import dask_client
from sdc_tasks.comparison.outputs import (
    Comparison,
    compared,
    comparison_ranking_section,
    comparison_summary,
    front_section,
    headline,
    map_picture,
    ranking_columns,
    write_comparison,
    write_release_spec,
)
from sdc_tasks.comparison.run import (
    CompareInput,
    Grid,
    check_best_spec,
    load_grid,
    parallel_mode,
    parse_limits,
    prepare_input,
)
from sdc_tasks.errors import NoneWithinLimits, value_free
from sdc_tasks.outputs import atomic_output_dir
from sdc_tasks.report import format_value, markdown_section
from sdc_tasks.tls import TlsFiles

STAGE = dict(cache_policy=NO_CACHE, persist_result=False)


@task(name="plan", task_run_name="plan", **STAGE)
@value_free("plan")
def plan(input_path: str, grid_path: str | None, id_col: str, variables, key_vars, parallel: str,
         best_spec: str | None = None):
    """Validate the grid, the best-spec request and the input's columns; choose the parallel mode by input
    size."""
    grid = load_grid(grid_path)
    check_best_spec(grid, best_spec)
    source = prepare_input(input_path, id_col, variables, key_vars, grid)
    return grid, source, parallel_mode(source, parallel)


@task(name="mask and evaluate every configuration", task_run_name="mask and evaluate {mode}", **STAGE)
@value_free("mask and evaluate every configuration")
def evaluate_grid(source: CompareInput, grid: Grid, mode: str, limits: dict, work_dir: str,
                  started: float) -> Comparison:
    """Every configuration masked and evaluated on the Dask cluster, ranked, the best under the limits picked."""
    return compared(source, grid, mode, limits, work_dir, started)


@task(name="report", task_run_name="report", **STAGE)
@value_free("report")
def report(c: Comparison, root: str, final_dir: str) -> dict:
    """Write the ranking, map and report into ``root`` (renamed to ``final_dir`` when the flow succeeds);
    publish the ranking as Markdown and table artifacts, with the map's final path."""
    written = {k: str(v) for k, v in write_comparison(c, root).items()}
    map_path = Path(final_dir) / Path(written["ru_map"]).name
    text = "\n".join([f"**{headline(c)}**", "", f"Written to `{Path(final_dir)}` (R-U map: `{map_path.name}`)", "",
                      *markdown_section(front_section(c, map_picture(c)), inline=True),
                      *markdown_section(comparison_ranking_section(c))])
    create_markdown_artifact(text, key="comparison-ranking", description=f"Ranking of {c.grid.name}")
    rows = [{k: format_value(v) if isinstance(v, numbers.Real) and not isinstance(v, bool) else v
             for k, v in row.items()} for row in c.table[list(ranking_columns(c))].to_dict("records")]
    create_table_artifact(rows, key="comparison-table", description=f"Ranking of {c.grid.name}")
    return written


@flow(name="compare", log_prints=False, persist_result=False)
@value_free("compare")
def compare(input_path: str, out_dir: str, grid: str | None = None, id_col: str = "record_id",
            variables: list[str] | None = None, key_vars: list[str] | None = None,
            limits: list[str] | None = None, best_spec: str | None = None, parallel: str = "auto",
            dask_address: str | None = None, workers: int = 2, overwrite: bool = False,
            tls_ca_file: str | None = None, tls_cert: str | None = None, tls_key: str | None = None) -> dict | State:
    """Run the grid (default: chapter 6's) on ``input_path``, write the comparison to ``out_dir``, and the best
    configuration under ``limits`` (MEASURE=LIMIT strings) as a release spec to ``best_spec``; the tls_* files
    are for a tls:// ``dask_address``. When no configuration meets the limits and a best spec was asked for, the
    comparison is written, no spec is, and the flow run ends in a Failed state named "Refused"
    (``flows.states.refused_state``; calling the flow raises NoneWithinLimits)."""
    log = get_run_logger()
    bounds = parse_limits(limits or [])
    chosen, source, mode = plan(input_path, grid, id_col, variables, key_vars, parallel, best_spec)
    log.info("%d configurations, parallel mode %s", len(chosen.configurations()), mode)
    with dask_client(dask_address, workers, tls=TlsFiles(tls_ca_file, tls_cert, tls_key)), \
            atomic_output_dir(out_dir, overwrite, inputs=[input_path]) as tmp:
        c = evaluate_grid(source, chosen, mode, bounds, str(tmp / "_work"), perf_counter())
        report(c, str(tmp), str(Path(out_dir).resolve()))
    if best_spec:
        try:
            write_release_spec(c, best_spec)
        except NoneWithinLimits as exc:
            return refused_state(exc)
    return comparison_summary(c)
