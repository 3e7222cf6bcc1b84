"""The files of a method comparison: the ranking (Parquet, CSV, Markdown report), the R-U map, the HTML
report, every configuration's metrics, and optionally the release spec of the best configuration under risk
limits. ``comparison`` runs a whole comparison into an output directory, atomically."""

from __future__ import annotations

import html
import shutil
from dataclasses import dataclass
from pathlib import Path
from time import perf_counter

import pandas as pd
import yaml

from sdc_tasks import report as R
from sdc_tasks.comparison.categorical_ranking import TABLE_3_COLUMNS, best_in_table, categorical_ranking_table
from sdc_tasks.comparison.run import (
    RISK_SETUPS,
    CompareInput,
    ConfigurationResult,
    Grid,
    best_result,
    check_best_spec,
    check_risk_setup,
    load_grid,
    parallel_mode,
    prepare_input,
    ranking_score,
    ranking_table,
    release_spec,
    run_grid,
)
from sdc_tasks.errors import NoneWithinLimits
from sdc_tasks.files import write_json
from sdc_tasks.outputs import atomic_output_dir, atomic_output_file, scratch_dir
from sdc_tasks.pipeline.spec import load_spec, parse_spec

TABLE_1_COLUMNS = ("Method", "IL", "DLD", "PLD", "ID", "Score", "IL-Rank", "DLD-Rank", "PLD-Rank", "ID-Rank")
FILES = {"parquet": "ranking.parquet", "csv": "ranking.csv", "markdown": "ranking.md", "html": "report.html",
         "ru_map": R.RU_MAP_NAME, "metrics": "metrics.json", "grid": "grid.yaml"}



@dataclass(frozen=True)
class Comparison:
    """What a comparison produced: its input, grid, parallel mode, results, ranking, the best configuration
    with every limited measure at most its limit (the best overall without limits; None when none meets
    them) and the wall-clock seconds."""

    source: CompareInput
    grid: Grid
    mode: str
    results: list[ConfigurationResult]
    table: pd.DataFrame
    limits: dict[str, float]
    best: ConfigurationResult | None
    seconds: float
    risk_setup: str = "metrics"


def risk_label(risk_setup: str = "metrics") -> str:
    """The R-U map's risk axis label, naming the linkage measures of the risk setup (compare.RISK_SETUPS)."""
    dld, pld = RISK_SETUPS[risk_setup]
    return f"Disclosure risk 0.25 {dld} + 0.25 {pld} + 0.5 ID, %"


def ru_points(results: list[ConfigurationResult]) -> list[dict]:
    """One R-U point per configuration, in grid order: IL against the risk axis (0.25 DLD + 0.25 PLD + 0.5 ID,
    the score's risk half; sdc_tasks.comparison.run.risk), grouped by method family for the map's markers."""
    return [{"label": r.config.label, "il": r.metrics["IL"], "dr": r.metrics["risk"], "group": r.config.family}
            for r in results]


def categorical_ru_points(table: pd.DataFrame) -> list[dict]:
    """One R-U point per configuration of a categorical ranking: AIL Rank against PLD (PLD_cat, percent of
    records correctly linked), grouped by method family."""
    return [{"label": row.Method, "il": float(row["AIL Rank"]), "dr": float(row.PLD), "group": row.Family}
            for _, row in table.iterrows()]


def _limits_text(limits: dict[str, float]) -> str:
    """Limits as "DLD <= 10, ID <= 50"."""
    return ", ".join(f"{k} <= {v:g}" for k, v in limits.items())


def _cell(value) -> str:
    """A ranking cell: measures with two decimals (as Table 1), ranks and labels as they are."""
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def ranking_section(table: pd.DataFrame, risk_setup: str = "metrics") -> R.Section:
    """The ranking in Table 1's layout, sorted by score."""
    rows = [tuple(_cell(v) for v in row) for row in table[list(TABLE_1_COLUMNS)].itertuples(index=False)]
    note = ("Score = 0.5 IL + 0.125 DLD + 0.125 PLD + 0.25 ID (sdc_methods_comparison_chapter.txt sec. 4); "
            "the unprotected file scores 50. Rank 1 = lowest value of the measure; equal values share the best "
            "rank.")
    if risk_setup == "published":
        note += (" DLD and PLD are DLDpub and PLDpub, linkage as the published Table 1 was computed "
                 "(docs/reproduction.md).")
    return R.Section("Ranking", paragraphs=[note], table=R.Table(TABLE_1_COLUMNS, rows))


def categorical_ranking_section(table: pd.DataFrame) -> R.Section:
    """The ranking of a categorical grid in Table 3's layout, sorted by Ave. Score."""
    rows = [tuple(_cell(v) for v in row) for row in table[list(TABLE_3_COLUMNS)].itertuples(index=False)]
    note = ("Table 3 of sdc_methods_comparison_chapter.txt sec. 5. PLD = PLD_cat, percent of records correctly "
            "linked on the set's variables; EBILRF and ILRF take the original file as the reference (so they equal "
            "EBILMF and ILMF). Ranks: 100 rank / N, rank 1 = lowest value, equal values share their average rank. "
            "AIL Rank = (DistRank + (CTBILRank + ACTBILRank)/2 + (EBILRFrank + ILRFrank + EBILMFrank + "
            "ILMFrank)/4)/3; Score = (PLD Rank + AIL Rank)/2; Ave. Score = mean Score of the same method and "
            "parameters over the variable sets.")
    return R.Section("Ranking", paragraphs=[note], table=R.Table(TABLE_3_COLUMNS, rows))


def comparison_ranking_section(c: Comparison) -> R.Section:
    """The ranking section of a comparison: Table 3's layout for a categorical grid, Table 1's otherwise."""
    return categorical_ranking_section(c.table) if c.grid.categorical else ranking_section(c.table, c.risk_setup)


def ranking_columns(c: Comparison) -> tuple[str, ...]:
    """The published table's columns of a comparison's ranking (Table 3 or Table 1)."""
    return TABLE_3_COLUMNS if c.grid.categorical else TABLE_1_COLUMNS


def map_points(c: Comparison) -> list[dict]:
    """The R-U points of a comparison (categorical: AIL Rank against PLD)."""
    return categorical_ru_points(c.table) if c.grid.categorical else ru_points(c.results)


def map_labels(c: Comparison) -> dict[str, str]:
    """The R-U map's axis labels of a comparison."""
    if c.grid.categorical:
        return {"risk_label": "Disclosure risk PLD_cat, %", "loss_label": "Information loss AIL Rank"}
    return {"risk_label": risk_label(c.risk_setup)}


def front_section(c: Comparison, picture: R.Picture | None) -> R.Section:
    """The R-U map (``picture``) and the configurations on its Pareto front (lowest risk first)."""
    front = R.pareto_front(map_points(c))
    rows = [(p["label"], p["group"], R.format_value(p["dr"]), R.format_value(p["il"])) for p in front]
    note = (f"Risk axis: {risk_label(c.risk_setup)}, the disclosure-risk half of the score scaled to weights summing "
            "to 1, so score = 0.5 IL + 0.5 risk; the original file sits at (100, 0). ")
    if c.grid.categorical:
        note = "Risk axis: PLD_cat; loss axis: AIL Rank (ranks within this grid). "
    note += ("One marker per method family; the step line is the Pareto front (statistical_databases_survey.txt, "
             "R-U maps); the ringed point is the configuration chosen (the best within the limits, else the best "
             "score); dotted lines are the limits where they bound an axis.")
    return R.Section("R-U confidentiality map", paragraphs=[note], pictures=[picture] if picture else [],
                     table=R.Table(("Pareto configuration", "Family", "Risk, %",
                                    "AIL Rank" if c.grid.categorical else "IL, %"), rows))


def settings_section(c: Comparison) -> R.Section:
    """Input, variables, grid, parallel mode and timings."""
    keys = "each set's own variables" if c.grid.categorical else ", ".join(c.source.key_vars)
    rows = [("Input", c.source.path), ("Records", str(c.results[0].metrics["n"]) if c.results else "0"),
            ("Masked variables", ", ".join(c.source.variables)), ("Key variables", keys),
            ("Grid", f"{c.grid.name}: {len(c.results)} configurations, seed {c.grid.seed}"),
            ("Parallelism", c.mode), ("Wall-clock seconds", f"{c.seconds:.1f}"),
            ("Configuration seconds (sum)", f"{sum(c.table['Seconds']):.1f}")]
    return R.Section("Settings", table=R.Table(("Field", "Value"), rows))


def headline(c: Comparison) -> str:
    """The best configuration overall and, with limits, the best one that meets them."""
    top = c.table.iloc[0]
    text = f"Best score: {top.Method} ({top.Score:.2f})."
    if c.grid.categorical:
        text = f"Best Ave. Score: {top.Method} ({top['Ave. Score']:.2f}; Score {top.Score:.2f})."
    if not c.limits:
        return text
    if c.best is None:
        return text + f" No configuration meets {_limits_text(c.limits)}."
    return text + f" Best with {_limits_text(c.limits)}: {c.best.config.label} ({best_score(c):.2f})."


def best_score(c: Comparison) -> float:
    """The score of the best configuration under the limits: its Score in the categorical ranking, else
    compare.ranking_score."""
    if c.grid.categorical:
        return float(c.table.set_index("Method").loc[c.best.config.label, "Score"])
    return ranking_score(c.best.metrics, c.risk_setup)


def comparison_sections(c: Comparison, picture: R.Picture | None) -> list[R.Section]:
    """Every report section after the headline (``picture``: the R-U map)."""
    return [settings_section(c), front_section(c, picture), comparison_ranking_section(c)]


def chosen_label(c: Comparison) -> str:
    """The configuration a comparison recommends: the best within its limits, else the best score."""
    return c.best.config.label if c.best is not None else str(c.table.iloc[0].Method)


def map_picture(c: Comparison) -> R.Picture:
    """The comparison's R-U map: every configuration, the chosen one ringed, the limits that bound an axis
    (continuous grids: risk 0.25 DLD + 0.25 PLD + 0.5 ID, sdc_tasks.comparison.run.risk)."""
    dld, pld = RISK_SETUPS[c.risk_setup]
    limits = {} if c.grid.categorical else {"IL": c.limits.get("IL"), dld: c.limits.get(dld),
                                            pld: c.limits.get(pld), "ID": c.limits.get("ID")}
    bounds = R.gate_limits({k: v for k, v in limits.items() if v is not None}, {dld: 0.25, pld: 0.25, "ID": 0.5})
    figure = R.ru_map_figure(map_points(c), label_front_only=True, limits=bounds, chosen=chosen_label(c),
                             **map_labels(c))
    return R.Picture("R-U confidentiality map of every configuration, the chosen one ringed",
                     R.png_bytes(figure), R.RU_MAP_NAME)


def write_comparison(c: Comparison, out_dir: str | Path) -> dict[str, Path]:
    """Write the ranking (Parquet, CSV, Markdown), the R-U map, the HTML report, every configuration's
    metrics and the grid into ``out_dir``; return {kind: path}."""
    out = Path(out_dir)
    paths = {kind: out / name for kind, name in FILES.items()}
    c.table.to_parquet(paths["parquet"], index=False)
    c.table.to_csv(paths["csv"], index=False)
    picture = map_picture(c)
    paths["ru_map"].write_bytes(picture.png)
    title = f"Method comparison: {c.grid.name} on {Path(c.source.path).name}"
    sections = comparison_sections(c, picture)
    paths["markdown"].write_text(R.markdown_document(title, f"**{headline(c)}**", sections), encoding="utf-8")
    paths["html"].write_text(R.html_page(title, f"<p><strong>{html.escape(headline(c))}</strong></p>", sections),
                             encoding="utf-8")
    write_json(paths["metrics"], {r.config.label: {**r.metrics, "method": r.config.method,
                                                   "params": r.config.params, "seconds": r.seconds}
                                  for r in c.results})
    paths["grid"].write_text(yaml.safe_dump(c.grid.model_dump(mode="json"), sort_keys=False))
    return paths


def write_release_spec(c: Comparison, path: str | Path) -> Path:
    """Write the best configuration under the limits as a release spec YAML, validated by load_spec's rules
    before and after writing; its output directory sits beside the spec."""
    check_best_spec(c.grid, path)
    if c.best is None:
        raise NoneWithinLimits(f"no configuration of {c.grid.name} meets {_limits_text(c.limits) or 'the limits'}")
    path = Path(path)
    spec = release_spec(c.source, c.best, c.limits, c.grid, f"{path.stem}-release")
    parse_spec(spec, base_dir=path.resolve().parent)
    with atomic_output_file(path, overwrite=True, inputs=[c.source.path]) as tmp:
        tmp.write_text(yaml.safe_dump(spec, sort_keys=False))
    load_spec(path)
    return path


def comparison(input_path: str | Path, out_dir: str | Path | None, grid: Grid | str | Path | None = None,
               id_col: str = "record_id", variables: list[str] | None = None, key_vars: list[str] | None = None,
               limits: dict[str, float] | None = None, parallel: str = "auto", overwrite: bool = False,
               risk_setup: str = "metrics") -> Comparison:
    """Run every configuration of the grid (a Grid, a YAML path, or None for chapter 6's) on the input and write
    the outputs to ``out_dir`` atomically (None: write nothing, scratch files in a private scratch directory,
    ``sdc_tasks.outputs.scratch_dir``); the caller provides the Dask client ("configurations" mode runs in
    this process without one). ``risk_setup`` (compare.RISK_SETUPS) picks the linkage measures the ranking
    scores with."""
    check_risk_setup(risk_setup)
    t0 = perf_counter()
    grid = grid if isinstance(grid, Grid) else load_grid(grid)
    source = prepare_input(input_path, id_col, variables, key_vars, grid)
    mode = parallel_mode(source, parallel)
    limits = dict(limits or {})
    if out_dir is None:
        with scratch_dir("compare") as work:
            return compared(source, grid, mode, limits, Path(work) / "_work", t0, risk_setup)
    with atomic_output_dir(out_dir, overwrite, inputs=[input_path]) as tmp:
        result = compared(source, grid, mode, limits, tmp / "_work", t0, risk_setup)
        write_comparison(result, tmp)
    return result


def compared(source: CompareInput, grid: Grid, mode: str, limits: dict[str, float], work_dir: str | Path,
             started: float, risk_setup: str = "metrics") -> Comparison:
    """Run every configuration (scratch files under ``work_dir``, removed after), rank them after
    ``risk_setup`` and pick the best under the limits; ``started`` is the perf_counter() the wall-clock seconds
    count from."""
    results = run_grid(source, grid, mode, work_dir, risk_setup=risk_setup)
    shutil.rmtree(work_dir, ignore_errors=True)
    if grid.categorical:
        table = categorical_ranking_table(results)
        return Comparison(source, grid, mode, results, table, limits, best_in_table(results, table, limits),
                          perf_counter() - started, risk_setup)
    return Comparison(source, grid, mode, results, ranking_table(results, risk_setup), limits,
                      best_result(results, limits, risk_setup), perf_counter() - started, risk_setup)


def comparison_summary(c: Comparison) -> dict:
    """A JSON-able summary: counts, mode, seconds, the best overall and under the limits."""
    top = c.table.iloc[0]
    return {"configurations": len(c.results), "mode": c.mode, "risk": "PLD_cat" if c.grid.categorical else c.risk_setup,
            "seconds": round(c.seconds, 2), "best": {"label": top.Method, "score": float(top.Score)},
            "limits": c.limits,
            "best_within_limits": None if c.best is None else {"label": c.best.config.label, "score": best_score(c)}}
