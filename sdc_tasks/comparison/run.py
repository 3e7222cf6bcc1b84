"""Method comparison after sdc_methods_comparison_chapter.txt (chapter 6) sec. 2-4: every (method, parameters)
of a grid masks the same file, each masked file is evaluated (IL, DLD, PLD, ID, PIL, score), and the
configurations are ranked as in Table 1. A categorical grid (sec. 5) runs categorical methods on named variable
sets, evaluates them with the categorical families and is ranked as Table 3 (sdc_tasks.comparison.categorical_ranking).

Parallelism follows the file's size (``parallel_mode``): a small file (the Census file, 1,080 records) runs
one configuration per Dask task with the synchronous scheduler inside the task, so the configurations run
side by side on the workers; a large file runs the configurations one after another with the cluster doing
each one's data work.
"""

from __future__ import annotations

import json
import math
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path
from time import perf_counter, process_time
from typing import Any

import dask
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from sdc_tasks.errors import GridError, InputError, reason_of
from sdc_tasks.evaluation.measures import evaluate
from sdc_tasks.files import check_columns, yaml_document
from sdc_tasks.io import read_table, read_with_ids
from sdc_tasks.masking.apply import StepContext
from sdc_tasks.masking.methods import apply_step
from sdc_tasks.masking.registry import METHODS, is_categorical, validate_params
from sdc_tasks.masking.suppression import largest_k
from sdc_tasks.metrics.catalogue import CATEGORICAL_FAMILIES, DEFAULT_CATEGORICAL_FAMILIES, FAMILIES, gated_families
from sdc_tasks.metrics.finite import finite_measure
from sdc_tasks.scheduling import active_client, input_bytes
from sdc_tasks.stats.frequencies import sorted_categories
from sdc_tasks.validation import load_checked, numeric_columns

DEFAULT_GRID = "default_grid.yaml"
SMALL_INPUT_BYTES = 64 * 2**20
PARALLEL_MODES = ("auto", "configurations", "data")
MEASURES = ("IL", "DLD", "PLD", "ID")
RANK_DIGITS = 9

# Table 1 columns, then ours
RANKING_COLUMNS = ("Method", "IL", "DLD", "PLD", "ID", "Score", "IL-Rank", "DLD-Rank", "PLD-Rank", "ID-Rank",
                   "PIL", "Risk", "Family", "Registry", "Params", "Seconds")
MEASURE_ALIASES = {"Score": "score", "Risk": "risk"}
# The linkage measures a ranking puts in Table 1's DLD and PLD columns: docs/metrics.md's ("metrics") or those of the
# setup the published Table 1 was computed with ("published", docs/reproduction.md)
RISK_SETUPS = {"metrics": ("DLD", "PLD"), "published": ("DLDpub", "PLDpub")}



class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class Sweep(_Strict):
    """The parameter a family varies, its values, and how a value is written in the row label."""

    param: str = Field(min_length=1)
    values: list[Any] = Field(min_length=1)
    label_format: str = Field(default="g", description="format spec of the value in the row label: 02d gives "
                                                       "Rank05, 03d JPEG080, g Noise0.04 (Table 1 labels)")


class Family(_Strict):
    """One method family of the grid: a row-label prefix, a registry method, fixed parameters, a sweep."""

    label: str = Field(pattern=r"^\S+$", description="row label prefix, e.g. Mic3mul")
    method: str
    params: dict[str, Any] = Field(default_factory=dict)
    sweep: Sweep | None = None
    sets: list[str] | None = Field(default=None, min_length=1,
                                   description="categorical grids: the variable sets the family masks, one row "
                                               "each (default: every set of the grid)")

    @model_validator(mode="after")
    def _valid_configurations(self) -> "Family":
        if self.method not in METHODS:
            raise ValueError(f"method: unknown method {self.method!r}; known: {', '.join(sorted(METHODS))}")
        if self.sweep is None:
            validate_params(self.method, self.params)
            return self
        if self.sweep.param in self.params:
            raise ValueError(f"sweep.param {self.sweep.param!r} is also fixed in params")
        for i, value in enumerate(self.sweep.values):
            try:
                format(value, self.sweep.label_format)
            except (TypeError, ValueError):
                raise ValueError(f"sweep.label_format {self.sweep.label_format!r} cannot write sweep.values.{i} "
                                 f"= {value!r}") from None
            try:
                validate_params(self.method, {**self.params, self.sweep.param: value})
            except ValueError as exc:
                raise ValueError(f"sweep.values.{i} = {value!r}: {exc}") from None
        return self

    def swept(self) -> list[tuple[str, dict[str, Any]]]:
        """(label, validated parameters) of the family, one per sweep value."""
        if self.sweep is None:
            return [(self.label, validate_params(self.method, self.params))]
        return [(f"{self.label}{format(v, self.sweep.label_format)}",
                 validate_params(self.method, {**self.params, self.sweep.param: v})) for v in self.sweep.values]

    def configurations(self, variable_sets: dict[str, list[str]] | None = None) -> list["Configuration"]:
        """The family's configurations, one per sweep value; with ``variable_sets`` (a categorical grid), one per
        sweep value and set of :attr:`sets`, the set's name ending the label (T5o: top coding, p = 5, set o)."""
        if not variable_sets:
            return [Configuration(label, self.label, self.method, params) for label, params in self.swept()]
        return [Configuration(f"{label}{name}", self.label, self.method, params, tuple(variable_sets[name]), name)
                for label, params in self.swept() for name in (self.sets or variable_sets)]


class Grid(_Strict):
    """A comparison grid: method families, each run for every value of its sweep, with one seed. A categorical
    grid (``categorical`` listed) runs categorical methods on named variable sets, as chapter 6 sec. 5 does."""

    name: str = "comparison"
    seed: int = Field(default=0, ge=0)
    categorical: list[str] = Field(default_factory=list, description="the categorical variables (a categorical grid)")
    ordinal: dict[str, list[Any] | None] = Field(
        default_factory=dict, description="ordinal variables -> categories in order (null: the sorted values)")
    variable_sets: dict[str, list[str]] = Field(default_factory=dict, description="set name -> variables")
    families: list[Family] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_labels(self) -> "Grid":
        check_variable_roles(self)
        seen: dict[str, int] = {}
        for i, fam in enumerate(self.families):
            for config in fam.configurations(self.variable_sets):
                if config.label in seen:
                    raise ValueError(f"families.{i}: row label {config.label!r} repeats one of "
                                     f"families.{seen[config.label]}")
                seen[config.label] = i
        return self

    def configurations(self) -> list["Configuration"]:
        """Every configuration of the grid, in grid order."""
        return [c for fam in self.families for c in fam.configurations(self.variable_sets)]


def check_variable_roles(grid: Grid) -> None:
    """Raise ValueError naming the field when a grid mixes roles: a continuous grid with variable sets or a
    categorical method, a categorical grid with a continuous method, a set or family set that is unknown or
    holds a variable that is not categorical (ordinal for top and bottom coding)."""
    if not grid.categorical:
        stray = "ordinal" if grid.ordinal else "variable_sets" if grid.variable_sets else None
        if stray:
            raise ValueError(f"{stray}: a grid with {stray} must list its categorical variables (categorical)")
        for i, fam in enumerate(grid.families):
            if is_categorical(fam.method):
                raise ValueError(f"families.{i}.method: {fam.method} masks categorical variables; list them in "
                                 "categorical and variable_sets to make a categorical grid")
            if fam.sets is not None:
                raise ValueError(f"families.{i}.sets: only a categorical grid has variable sets")
        return
    for v in grid.ordinal:
        if v not in grid.categorical:
            raise ValueError(f"ordinal.{v}: {v!r} is not listed in categorical")
    if not grid.variable_sets:
        raise ValueError("variable_sets: a categorical grid needs at least one named set of variables")
    for name, variables in grid.variable_sets.items():
        stray = [v for v in variables if v not in grid.categorical]
        if not variables or stray:
            raise ValueError(f"variable_sets.{name}: " + (f"{stray[0]!r} is not listed in categorical" if stray
                                                          else "a set needs at least one variable"))
    for i, fam in enumerate(grid.families):
        method = METHODS[fam.method]
        if not is_categorical(fam.method):
            raise ValueError(f"families.{i}.method: {fam.method} masks continuous variables; a categorical grid "
                             "ranks categorical methods")
        for name in fam.sets or grid.variable_sets:
            if name not in grid.variable_sets:
                raise ValueError(f"families.{i}.sets: unknown variable set {name!r}; known: "
                                 f"{', '.join(grid.variable_sets)}")
            plain = [v for v in grid.variable_sets[name] if v not in grid.ordinal]
            if method.ordinal and plain:
                raise ValueError(f"families.{i}.sets: set {name!r} holds {plain[0]!r}, not listed in ordinal "
                                 f"({fam.method} needs ordered categories)")


@dataclass(frozen=True)
class Configuration:
    """One row of the comparison: its label (Table 1 style), family label, registry method and parameters; in a
    categorical grid also the variables it masks and the name of their set."""

    label: str
    family: str
    method: str
    params: dict[str, Any]
    variables: tuple[str, ...] | None = None
    variable_set: str | None = None


def parse_grid(data: Any) -> Grid:
    """Return the validated grid for a mapping; raise GridError naming each bad field."""
    if not isinstance(data, dict):
        raise GridError("a comparison grid must be a YAML mapping at the top level")
    try:
        return Grid.model_validate(data)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            loc = ".".join(str(x) for x in err["loc"])
            lines.append(f"grid field '{loc}': " if loc else "grid: ")
            lines[-1] += err["msg"].removeprefix("Value error, ")
        raise GridError("\n".join(lines)) from None


def load_grid(path: str | Path | None = None) -> Grid:
    """Return the grid read from a YAML file (None: the bundled chapter 6 grid, data/default_grid.yaml)."""
    from sdc_tasks.bundled import bundled_path

    return parse_grid(yaml_document(Path(path) if path is not None else bundled_path(DEFAULT_GRID), "grid", GridError))


# ---------------------------------------------------------------- input and parallelism


@dataclass(frozen=True)
class CompareInput:
    """The file compared and the roles of its columns."""

    path: str
    id_column: str
    create_id: bool
    variables: list[str]
    key_vars: list[str]
    input_bytes: int
    category_orders: dict[str, list] = field(default_factory=dict)


def prepare_input(path: str | Path, id_col: str = "record_id", variables: list[str] | None = None,
                  key_vars: list[str] | None = None, grid: Grid | None = None) -> CompareInput:
    """Resolve the columns and check the file once: variables default to every numeric column but the id,
    keys to the first seven variables; every key must be masked (an unmasked key is not protected by any
    configuration); values must be finite numbers, ids unique, and the file must hold at least the largest k
    of the grid's configurations. A categorical grid's input: :func:`categorical_input` (its variables and keys
    come from the grid's sets; giving them here is an error naming the option)."""
    what = f"input {path}"
    if grid is not None and grid.categorical:
        given = "variables" if variables else "key_vars" if key_vars else None
        if given:
            raise InputError(f"{given}: grid {grid.name!r} is categorical; its variable_sets name the variables "
                             "(and the keys of PLD_cat)")
        return categorical_input(path, id_col, grid)
    variables = list(variables or numeric_columns(path, [id_col], what))
    keys = list(key_vars or variables[:7])
    check_columns(read_table(path).columns, [*variables, *keys], what)
    if id_col in variables:
        raise InputError(f"id column {id_col!r} cannot be a masked variable")
    unmasked = [k for k in keys if k not in variables]
    if unmasked:
        raise InputError(f"key variable {unmasked[0]!r} is not among the masked variables")
    ks = [(f"parameter 'k' of {c.label} = {c.params['k']}", largest_k(c.params))
          for c in (grid.configurations() if grid else []) if c.params.get("k") is not None]
    load_checked(path, id_col, variables, what, group_sizes=[max(ks, key=lambda x: x[1])] if ks else [])
    return CompareInput(str(Path(path).resolve()), id_col, id_col not in read_table(path).columns, variables, keys,
                        input_bytes(path))


def categorical_input(path: str | Path, id_col: str, grid: Grid) -> CompareInput:
    """The input of a categorical grid: its set variables (in any type) must be in the file, ids unique, and each
    ordinal variable gets its declared order or else its sorted values in the file; the keys of PLD_cat are each
    configuration's own variables (chapter 6 sec. 5 links on the set it masks)."""
    what = f"input {path}"
    variables = list(dict.fromkeys(v for vs in grid.variable_sets.values() for v in vs))
    ks = [(f"parameter 'k' of {c.label} = {c.params['k']}", largest_k(c.params)) for c in grid.configurations()
          if c.params.get("k") is not None]
    if id_col in variables:
        raise InputError(f"id column {id_col!r} cannot be a masked variable")
    frame, _ = load_checked(path, id_col, [], what, required=variables,
                            group_sizes=[max(ks, key=lambda x: x[1])] if ks else [])
    undeclared = [v for v, order in grid.ordinal.items() if order is None and v in variables]
    orders = {v: list(order) for v, order in grid.ordinal.items() if order is not None}
    orders.update(sorted_categories(frame, undeclared))
    return CompareInput(str(Path(path).resolve()), id_col, id_col not in read_table(path).columns, variables, [],
                        input_bytes(path), orders)


def parallel_mode(source: CompareInput, requested: str = "auto") -> str:
    """"configurations" (one Dask task per configuration, synchronous inside) for inputs up to
    SMALL_INPUT_BYTES on disk, where a configuration takes about a second and graph overhead would dominate;
    "data" (configurations one after another, the cluster doing the data work) above."""
    if requested not in PARALLEL_MODES:
        raise InputError(f"parallel must be one of {', '.join(PARALLEL_MODES)}, not {requested!r}")
    if requested != "auto":
        return requested
    return "configurations" if source.input_bytes <= SMALL_INPUT_BYTES else "data"


# ---------------------------------------------------------------- running


@dataclass(frozen=True)
class ConfigurationResult:
    """A configuration's metrics (metrics.json keys) and seconds: wall-clock "mask" and "evaluate", and "cpu",
    this process's CPU time for both (all of the work in "configurations" mode, the client's share in "data")."""

    config: Configuration
    metrics: dict[str, Any]
    seconds: dict[str, float] = field(default_factory=dict)


_SYNC_LOCK = threading.Lock()  # dask.config is process-global: one synchronous configuration per process


def _masked_and_measured(source: CompareInput, config: Configuration, seed: int, work_dir: Path | None,
                         risk_setup: str = "metrics") -> ConfigurationResult:
    """Mask the input with one configuration (as ``sdc mask``) and evaluate it: the families of
    :func:`families_for` with the risk axis of ``risk_setup`` (RISK_SETUPS) as "risk"; a categorical
    configuration (one variable set) with cat_il and cat_risk on its set, PLD_cat as "risk", and the original
    file as the reference of EBIL_RF and PRIL_RF (chapter 6 sec. 5; docs/comparison.md, Categorical grids)."""
    t0, cpu0 = perf_counter(), process_time()
    frame = read_with_ids(source.path, "auto", source.id_column, source.create_id)
    variables = list(config.variables or source.variables)
    try:
        staged = apply_step(frame, config.method, variables, config.params,
                            StepContext(seed, 0, source.id_column, None, reference=frame,
                                        category_orders=source.category_orders), work_dir)
        t1 = perf_counter()
        if config.variables is None:
            metrics = evaluate(frame, staged.frame, source.id_column, variables, source.key_vars,
                               families_for(risk_setup))
        else:
            metrics = evaluate(frame, staged.frame, source.id_column, [], [], DEFAULT_CATEGORICAL_FAMILIES,
                               categorical=variables, reference=frame,
                               ordinal={v: o for v, o in source.category_orders.items() if v in variables},
                               original_risk=False)  # the same original for every configuration
    except (ValueError, RuntimeError) as exc:
        raise InputError(f"configuration {config.label} ({config.method} {config.params}): {reason_of(exc)}") \
            from None
    metrics.update(finite_measure("risk", metrics.get("PLD_cat", math.nan) if config.variables is not None
                                  else risk(metrics, risk_setup)))
    return ConfigurationResult(config, metrics, {"mask": t1 - t0, "evaluate": perf_counter() - t1,
                                                 "cpu": process_time() - cpu0})


def evaluate_configuration(config: Configuration, source: CompareInput, seed: int,
                           risk_setup: str = "metrics") -> ConfigurationResult:
    """One configuration as one task: everything on the synchronous scheduler in the calling process."""
    with _SYNC_LOCK, dask.config.set(scheduler="sync"):
        return _masked_and_measured(source, config, seed, None, risk_setup)


def run_grid(source: CompareInput, grid: Grid, mode: str, work_dir: str | Path | None = None,
             configurations: list[Configuration] | None = None, risk_setup: str = "metrics") -> list[ConfigurationResult]:
    """Results of every configuration, in grid order, risk and ranking score after ``risk_setup``. ``mode``
    "configurations": one task per configuration on the active Dask client (in this process, one after another,
    without a client); "data": one after another here, each configuration's graphs on the cluster, scratch
    files under ``work_dir``."""
    check_risk_setup(risk_setup)
    configs = configurations if configurations is not None else grid.configurations()
    if mode == "configurations":
        client = active_client()
        if client is None:
            return [evaluate_configuration(c, source, grid.seed, risk_setup) for c in configs]
        futures = client.map(evaluate_configuration, configs, source=source, seed=grid.seed, risk_setup=risk_setup,
                             pure=False, key=[f"compare-{c.label}" for c in configs])
        return client.gather(futures)
    results = []
    for c in configs:
        scratch = Path(work_dir) / c.label if work_dir is not None else None
        results.append(_masked_and_measured(source, c, grid.seed, scratch, risk_setup))
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    return results


# ---------------------------------------------------------------- ranking and selection


def families_for(risk_setup: str) -> tuple[str, ...]:
    """The metric families a comparison of continuous masking evaluates: every continuous family of the
    catalogue's FAMILIES, but pld_published (seven probabilistic linkages) only when the ranking uses it (risk
    setup "published")."""
    skip = {*CATEGORICAL_FAMILIES, *(() if risk_setup == "published" else ("pld_published",))}
    return tuple(f for f in FAMILIES if f not in skip)


def check_risk_setup(risk_setup: str) -> None:
    """Raise InputError naming an unknown risk setup."""
    if risk_setup not in RISK_SETUPS:
        raise InputError(f"risk must be one of {', '.join(RISK_SETUPS)}, not {risk_setup!r}")


def risk(metrics: dict, risk_setup: str = "metrics") -> float:
    """The disclosure-risk half of the chapter 6 score, normalised to weights summing to 1:
    0.25 DLD + 0.25 PLD + 0.5 ID, so that score = 0.5 IL + 0.5 risk (sdc_methods_comparison_chapter.txt
    sec. 4, Score); the unprotected file has risk 100. DLD and PLD are the linkage measures of ``risk_setup``
    (RISK_SETUPS: docs/metrics.md's DLD and PLD, or DLDpub and PLDpub, the setup of the published Table 1). NaN when
    a measure is missing (left out as not finite): such a configuration ranks last."""
    dld, pld = RISK_SETUPS[risk_setup]
    return 0.25 * metrics.get(dld, math.nan) + 0.25 * metrics.get(pld, math.nan) + 0.5 * metrics.get("ID", math.nan)


def ranking_score(metrics: dict, risk_setup: str = "metrics") -> float:
    """The chapter 6 score 0.5 IL + 0.125 DLD + 0.125 PLD + 0.25 ID = 0.5 IL + 0.5 risk
    (sdc_methods_comparison_chapter.txt sec. 4, Score) with the linkage measures of ``risk_setup``; with
    "metrics" it equals docs/metrics.md's score; NaN (ranked last) when a measure is missing."""
    return 0.5 * metrics.get("IL", math.nan) + 0.5 * risk(metrics, risk_setup)


def ranks(values: pd.Series) -> pd.Series:
    """Rank 1 = lowest value (chapter 6 sec. 4: "the lower the rank, the better"); equal values (compared
    to RANK_DIGITS decimals) share the best of their ranks, the next value skipping the tied places."""
    return values.round(RANK_DIGITS).rank(method="min", ascending=True, na_option="bottom").astype("int64")


def ranking_table(results: list[ConfigurationResult], risk_setup: str = "metrics") -> pd.DataFrame:
    """Table 1 of chapter 6 for our results: Method, IL, DLD, PLD, ID, Score and the four rank columns, then
    PIL, Risk, Family, Registry (method name), Params (JSON) and Seconds (wall clock); sorted by Score (ties
    in grid order). The DLD and PLD columns hold the linkage measures of ``risk_setup`` (RISK_SETUPS), Score
    is :func:`ranking_score`."""
    columns = dict(zip(MEASURES, ("IL", *RISK_SETUPS[risk_setup], "ID")))
    rows = [{"Method": r.config.label, **{m: float(r.metrics.get(key, math.nan)) for m, key in columns.items()},
             "Score": ranking_score(r.metrics, risk_setup), "PIL": float(r.metrics.get("PIL", math.nan)),
             "Risk": float(r.metrics.get("risk", math.nan)), "Family": r.config.family, "Registry": r.config.method,
             "Params": json.dumps(r.config.params, sort_keys=True),
             "Seconds": round(r.seconds.get("mask", 0.0) + r.seconds.get("evaluate", 0.0), 3)}
            for r in results]
    table = pd.DataFrame(rows, columns=[c for c in RANKING_COLUMNS if not c.endswith("-Rank")])
    for m in MEASURES:
        table[f"{m}-Rank"] = ranks(table[m])
    return table.sort_values("Score", kind="stable").reset_index(drop=True)[list(RANKING_COLUMNS)]


def parse_limits(pairs: list[str]) -> dict[str, float]:
    """{metrics key: limit} from MEASURE=LIMIT strings (Score and Risk stand for score and risk); a measure
    no metric family computes, or a limit that is not a number, is an error naming it."""
    limits: dict[str, float] = {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        key = MEASURE_ALIASES.get(name.strip(), name.strip())
        if not sep or not key:
            raise InputError(f"--max {pair!r} must look like MEASURE=LIMIT (e.g. DLD=10)")
        if key != "risk" and (gated_families(key) is None or gated_families(key) == ()):
            raise InputError(f"--max {pair!r}: unknown measure {key!r}, or one a maximum cannot limit (use a "
                             "metrics.json key where lower is better, such as DLD, PLD, ID, IL, PIL, score or risk; "
                             "docs/metrics.md)")
        try:
            limits[key] = float(raw)
        except ValueError:
            raise InputError(f"--max {pair!r}: limit {raw.strip()!r} is not a number") from None
    return limits


def best_result(results: list[ConfigurationResult], limits: dict[str, float],
                risk_setup: str = "metrics") -> ConfigurationResult | None:
    """The configuration of lowest :func:`ranking_score` (after ``risk_setup``) whose every limited measure is at
    most its limit (None if none is); ties go to the first in grid order."""
    allowed = [r for r in results
               if all(key in r.metrics and r.metrics[key] <= limit for key, limit in limits.items())]
    return min(allowed, key=lambda r: ranking_score(r.metrics, risk_setup)) if allowed else None


def check_best_spec(grid: Grid, best_spec: str | Path | None) -> None:
    """Raise InputError, before anything runs, when a best release spec is asked of a categorical grid (a
    release spec of a categorical configuration is not written yet)."""
    if best_spec and grid.categorical:
        raise InputError(f"--best-spec: grid {grid.name!r} is categorical; a release spec of a categorical "
                         "configuration is not written yet")


def release_families(limits: dict[str, float]) -> list[str]:
    """The metric families a release spec computes: those of a "metrics" comparison and any family a gated
    limit needs (a PLDpub limit brings pld_published), in the catalogue's FAMILIES order."""
    gated = {f for key in limits if key != "risk" for f in gated_families(key) or ()}
    return [f for f in FAMILIES if f in {*families_for("metrics"), *gated}]


def release_spec(source: CompareInput, result: ConfigurationResult, limits: dict[str, float], grid: Grid,
                 output_dir: str) -> dict:
    """A release spec (sdc_tasks/pipeline/spec.py) applying the chosen configuration to the compared file, with the
    limits as its release gate (the risk axis is no metrics.json key and is left out of the gate)."""
    return {
        "name": f"{grid.name}-{result.config.label}",
        "input": {"path": source.path, "format": "auto"},
        "id_column": source.id_column,
        "create_id": source.create_id,
        "variables": {"key": list(source.key_vars), "continuous": list(source.variables)},
        "steps": [{"method": result.config.method, "params": dict(result.config.params)}],
        "metrics": release_families(limits),
        "max_key_vars": len(source.key_vars),
        "gate": {"max": {k: v for k, v in limits.items() if k != "risk"}},
        "output": {"dir": output_dir},
        "seed": grid.seed,
    }
