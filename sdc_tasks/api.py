"""The public Python API: mask, evaluate, release and compare on pandas DataFrames, Dask DataFrames or files.

Each function checks its arguments itself and raises :class:`sdc_tasks.errors.InputError` (a ``ValueError``)
naming the column, parameter or option at fault before any data work starts; messages name an option as the
``sdc`` command spells it where it differs (``--vars`` is ``vars=``, ``--id-col`` is ``id_column=``). The CLI
commands call these functions, so a file masked or evaluated here and by ``sdc`` gives the same numbers. Where
the graphs run: :mod:`sdc_tasks.scheduling` (the caller's client, the active one, else threads in this process).
A DataFrame given is never modified.
"""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import dask.dataframe as dd
import pandas as pd

from sdc_tasks import scheduling
from sdc_tasks.arguments import (
    PathLike,
    as_given,
    check_household_roles,
    check_kind,
    check_roles,
    checked_orders,
    checked_params,
    column_names,
    dask_frame,
    is_path,
    is_single_file,
    output_of,
    source_of,
    write_single_file,
)
from sdc_tasks.errors import InputError, ReleaseRefused
from sdc_tasks.io import read_table, write_parquet
from sdc_tasks.masking import methods as steps
from sdc_tasks.masking.apply import StepContext
from sdc_tasks.masking.household_outcome import HouseholdOutcome
from sdc_tasks.masking.postmask_outcome import PostMaskOutcome
from sdc_tasks.masking.registry import METHODS, method_catalogue, ruled_variables
from sdc_tasks.masking.swap_outcome import SwapOutcome
from sdc_tasks.metrics.catalogue import DEFAULT_FAMILIES, MEASURES
from sdc_tasks.outputs import scratch_dir
from sdc_tasks.pipeline.spec import ReleaseSpec, column_accounting, load_spec, parse_spec
from sdc_tasks.results import Metrics
from sdc_tasks.validation import check_households, fewest_records, load_checked, numeric_columns

if TYPE_CHECKING:
    from sdc_tasks.comparison.run import Grid
    from sdc_tasks.pipeline.summary import ReleaseSummary

Data = pd.DataFrame | dd.DataFrame | PathLike


@dataclass(frozen=True)
class MaskResult:
    """What :func:`masked` did: the masked data (the kind :func:`mask` returns), the number of blocks or scopes
    the method ran in, what became of each column (``{"AGI": "masked", "REGION": "passed_through",
    "record_id": "id"}``) and, for postmask and synthetic_postmask, what the step reached (E before and after,
    TargetE, IL1 ratio, tries, whether TargetE was met: ``sdc_tasks.masking.postmask_outcome``; for local
    suppression with household-level variables, the extra suppressions: ``sdc_tasks.masking.household_outcome``;
    for record_swap the swap rates reached, risky and unmatched households: ``sdc_tasks.masking.swap_outcome``)."""

    data: pd.DataFrame | dd.DataFrame | Path
    blocks: int
    columns: dict[str, str]
    outcome: PostMaskOutcome | HouseholdOutcome | SwapOutcome | None = None


def masked(data: Data, method: str, params: Mapping[str, Any], *, vars: str | Sequence[str] | None = None,
           seed: int = 0, strata: str | None = None, id_column: str = "record_id", original: Data | None = None,
           ordinal: Mapping[str, Sequence] | None = None, out: PathLike | None = None, overwrite: bool = False,
           client: Any = None, workers: int | None = None, household: str | None = None,
           household_vars: str | Sequence[str] | None = None) -> MaskResult:
    """:func:`mask` with the method's parameters as one mapping, and what it did: the number of blocks the
    method ran in and the role of every column (``sdc mask`` reports both)."""
    params = checked_params(method, dict(params))
    variables = column_names(vars) or ruled_variables(params)
    homes = column_names(household_vars) or []
    check_roles(method, variables, id_column, strata, original)
    check_household_roles(method, params, household, homes, variables, id_column, strata)
    orders = checked_orders(ordinal)
    check_kind(data, "data")
    if is_path(data) and out is None:
        raise InputError(f"out: masking a file ({data}) writes the masked file: name it with out= (--out)")
    lazy = isinstance(data, dd.DataFrame) and out is None
    if lazy and workers is not None:
        raise InputError("workers: a Dask DataFrame masked on a cluster started for this call would be lost with "
                         "the cluster: name an output with out=, or pass a client")
    source, original_source = source_of(data, "data"), source_of(original, "original")
    what = f"input {data}" if is_path(data) else "data"
    original_what = f"original file {original}" if is_path(original) else "original"
    categorical = METHODS[method].kind == "categorical"
    with scratch_dir("step") as work, output_of(out, overwrite, [data, original]) as target, \
            scheduling.scheduled([] if lazy else [data, original], client, workers):
        variables = variables or numeric_columns(source, [id_column, strata], what)
        numeric, named = ([], variables) if categorical else (variables, [])
        frame, _ = load_checked(source, id_column, numeric, what, required=[*named, *filter(None, [household]), *homes],
                                strata=strata,
                                group_sizes=[fewest_records(method, params, f"parameter '{{}}' of {method}", method)])
        if household is not None:
            masks_homes = any(v in homes for v in variables)
            check_households(frame, household, homes, what, strata=strata if masks_homes else None)
        reference = frame if original_source is None else \
            load_checked(original_source, id_column, variables, original_what)[0]
        staged = steps.apply_step(frame, method, variables, params, StepContext(
            seed, 0, id_column, strata, reference=reference, category_orders=orders, household=household,
            household_variables=tuple(homes)), work)
        if target is not None and is_single_file(out):
            write_single_file(staged.frame.compute(), target, out, data)
        elif target is not None:
            write_parquet(staged.frame, target)
        if isinstance(data, pd.DataFrame):
            result = as_given(staged.frame.compute(), data)
        elif lazy:
            result = staged.frame.persist()
            from distributed import futures_of, wait  # imported here: 0.15 s that file commands skip

            if futures_of(result):  # a distributed client persists in the background
                wait(result)
    if not isinstance(data, pd.DataFrame) and not lazy:
        result = Path(out) if is_path(data) else read_table(out)
    return MaskResult(result, staged.blocks, column_accounting(frame.columns, id_column, variables, strata),
                      staged.outcome)


def mask(data: Data, method: str, *, vars: str | Sequence[str] | None = None, seed: int = 0,
         strata: str | None = None, id_column: str = "record_id", original: Data | None = None,
         ordinal: Mapping[str, Sequence] | None = None, out: PathLike | None = None, overwrite: bool = False,
         client: Any = None, workers: int | None = None, household: str | None = None,
         household_vars: str | Sequence[str] | None = None, **params: Any) -> pd.DataFrame | dd.DataFrame | Path:
    """Mask the variables of a file or DataFrame with one method of the registry, as ``sdc mask`` does.

    Microaggregation follows statistical_databases_survey.txt (Microaggregation) and the chapter's MicIR,
    MicZ, MicPCP and Mic2mul..Micmul; noise, rank swapping, resampling, Distr, JPEG and the categorical methods
    (top and bottom coding, global recoding, PRAM, local suppression) sdc_methods_comparison_chapter.txt
    sec. 2; rescale pil_measures.txt sec. 5; postmask post_masking_optimization.txt sec. 3 and 5.
    :func:`methods` lists every method with its parameters and the section it follows.

    Parameters
    ----------
    data : pandas.DataFrame, dask.dataframe.DataFrame or path
        The records. A path (CSV file, Parquet file or dataset directory) needs ``out``.
    method : str
        A registered method, e.g. ``"mdav"``, ``"rankswap"``, ``"noise"``, ``"pram"``.
    vars : str or list of str, optional
        The variables to mask; default every numeric column but the id and strata ones (refused when a column
        left out mostly holds numbers). Categorical methods need them named; never the id or strata column.
    seed : int, default 0
        Seed of every random draw; the same seed gives the same values on any partitioning or cluster.
    strata : str, optional
        Mask within each value of this column.
    id_column : str, default "record_id"
        The record id; created from the row positions (0-based, first column) when the data has none.
    original : DataFrame or path, optional
        The original records (same ids) that ``rescale`` and ``postmask`` move the masked data toward.
    ordinal : dict, optional
        ``{variable: [categories in order]}`` for ordinal categorical variables (default: sorted values).
    out : path, optional
        Also write the result there, as ``sdc mask --out``: a ``.csv`` file, else a Parquet dataset directory.
    overwrite : bool, default False
        Replace an existing ``out`` (a directory only if sdc wrote it).
    client, workers : distributed.Client, int, optional
        Where the graphs run: on this client, or on a LocalCluster of this many worker processes started for
        the call; default the active client, else threads in this process (:mod:`sdc_tasks.scheduling`).
    household : str, optional
        The household id column: the categorical methods mask the ``household_vars`` once per household, every
        member getting the same result (docs/categorical.md, "Households").
    household_vars : str or list of str, optional
        The household-level variables (checked to be the same for every member of a household); needs
        ``household``.
    **params
        The method's parameters, e.g. ``k=3`` for MDAV or ``p=15`` for rank swapping.

    Returns
    -------
    pandas.DataFrame, dask.dataframe.DataFrame or pathlib.Path
        The kind given: pandas with the input's index and the values ``sdc mask`` writes (masked continuous
        variables as float64, the id column first when created, text columns in their given type); a Dask
        DataFrame read from ``out``, or persisted when no ``out`` is given; for a path, the path written.

    Raises
    ------
    InputError
        A ``ValueError`` naming the method, parameter, column or record at fault.

    References
    ----------
    .. [1] J. Domingo-Ferrer and V. Torra, "A Quantitative Comparison of Disclosure Control Methods for
       Microdata", 2001 (sdc_methods_comparison_chapter.txt).
    .. [2] J. Domingo-Ferrer, "Statistical Databases", 2007 (statistical_databases_survey.txt).
    .. [3] J. M. Mateo-Sanz, J. Domingo-Ferrer and F. Sebé, "Probabilistic Information Loss Measures in
       Confidentiality Protection of Continuous Microdata", 2005 (pil_measures.txt; rescale).
    .. [4] F. Sebé, J. Domingo-Ferrer, J. M. Mateo-Sanz and V. Torra, "Post-Masking Optimization of the
       Tradeoff between Information Loss and Disclosure Risk in Masked Microdata Sets", 2002
       (post_masking_optimization.txt).

    docs/references.md gives the full references.

    Examples
    --------
    >>> from sdc_tasks import load_census, mask
    >>> masked = mask(load_census(), "mdav", k=3)
    """
    return masked(data, method, params, vars=vars, seed=seed, strata=strata, id_column=id_column,
                  original=original, ordinal=ordinal, out=out, overwrite=overwrite, client=client,
                  workers=workers, household=household, household_vars=household_vars).data


def evaluate(original: Data, masked: Data, *, vars: str | Sequence[str] | None = None,
             key_vars: str | Sequence[str] | None = None, families: Sequence[str] | None = None,
             id_column: str = "record_id", pairing: str = "auto", categorical: str | Sequence[str] | None = None,
             ordinal: Mapping[str, Sequence] | None = None, weight: str | None = None, reference: Data | None = None,
             sensitive: str | Sequence[str] | None = None, household: str | None = None, client: Any = None,
             workers: int | None = None) -> Metrics:
    """Measure the information loss and disclosure risk of masked records against the originals, as
    ``sdc evaluate`` does (the same metrics.json keys and values).

    Information loss: IL1..IL5 and IL (sdc_methods_comparison_chapter.txt sec. 3), the matrix measures and IL1s
    (statistical_databases_survey.txt), PIL (pil_measures.txt sec. 4-5), brMAE and brMSE
    (bounded_rank_metrics.txt sec. 2); disclosure risk: DLD, PLD and ID (chapter sec. 3-4); categorical
    families (chapter sec. 5): docs/categorical.md. :func:`measures` lists every key.

    Parameters
    ----------
    original, masked : pandas.DataFrame, dask.dataframe.DataFrame or path
        The two files or frames; one without ``id_column`` gets ids from its row positions.
    vars : str or list of str, optional
        Continuous variables; default the original's numeric columns but the categorical and weight ones.
    key_vars : str or list of str, optional
        The intruder's key variables in order (default: the first seven variables).
    families : list of str, optional
        Metric families (default il, pil, dld, pld, id; also dld_published, pld_published, cat_il, cat_risk, suda,
        ldiversity).
    id_column : str, default "record_id"
        The column pairing the records.
    pairing : {"auto", "id", "nearest", "paper"}, default "auto"
        Pair by id, by nearest original record (synthetic or re-sized files), or by id when every masked id is
        found; "paper": post_masking_optimization.txt sec. 2's setup, each masked record standing for its
        nearest original record c(i) in IL1, ID and the linkage measures, the keys taken in the original's
        column order (docs/postmask.md).
    categorical : str or list of str, optional
        Categorical variables (codes or text) of cat_il and cat_risk.
    ordinal : dict, optional
        ``{variable: [categories in order]}`` for ordinal categorical variables.
    weight : str, optional
        Sampling weight column of the masked data (individual risk).
    reference : DataFrame or path, optional
        Reference records for EBIL_RF and PRIL_RF.
    sensitive : str or list of str, optional
        Sensitive variables of the ldiversity family (l-diversity and t-closeness within the key combinations).
    household : str, optional
        Household id column of the masked data: with ``weight``, cat_risk adds the household risk (the probability
        that at least one member is re-identified, as sdcMicro's measure_risk with hid).
    client, workers : distributed.Client, int, optional
        Where the graphs run: on this client, or on a LocalCluster of this many worker processes started for
        the call; default the active client, else threads in this process (:mod:`sdc_tasks.scheduling`).

    Returns
    -------
    Metrics
        A read-only mapping of the metrics.json keys, with ``to_frame()``, ``summary()`` and figures.

    Raises
    ------
    InputError
        A ``ValueError`` naming the column, family, option or record at fault (e.g. masked ids missing from
        the original with ``pairing="id"``).

    References
    ----------
    .. [1] J. Domingo-Ferrer and V. Torra, "A Quantitative Comparison of Disclosure Control Methods for
       Microdata", 2001 (sdc_methods_comparison_chapter.txt).
    .. [2] J. M. Mateo-Sanz, J. Domingo-Ferrer and F. Sebé, "Probabilistic Information Loss Measures in
       Confidentiality Protection of Continuous Microdata", 2005 (pil_measures.txt).
    .. [3] E. Chaibub Neto, "A note on bounded distance-based information loss metrics for statistical
       disclosure control of numeric microdata" (bounded_rank_metrics.txt).

    docs/references.md gives the full references; docs/metrics.md the definitions.
    """
    for data, name in ((original, "original"), (masked, "masked")):
        check_kind(data, name)
    sources = [source_of(d, n) for d, n in ((original, "original"), (masked, "masked"), (reference, "reference"))]
    from sdc_tasks.evaluation.measures import evaluate_paths  # imported here: 0.1 s that masking skips

    with scheduling.scheduled([original, masked, reference], client, workers):
        values = evaluate_paths(sources[0], sources[1], id_column, column_names(vars), column_names(key_vars),
                                DEFAULT_FAMILIES if families is None else tuple(column_names(families) or ()), pairing,
                                categorical=column_names(categorical), ordinal=checked_orders(ordinal), weight=weight,
                                reference=sources[2], sensitive=column_names(sensitive), household=household)
    return Metrics(values)


def release(spec: ReleaseSpec | Mapping[str, Any] | PathLike, *, out_dir: PathLike | None = None,
            overwrite: bool | None = None, client: Any = None, workers: int | None = None) -> ReleaseSummary:
    """Run a release spec, as ``sdc release`` does: validate the input, mask it step by step, evaluate, apply the
    release gate and publish the masked file, metrics.json, the report and the manifest atomically.

    The masking methods and measures are those of :func:`mask` and :func:`evaluate`; the gate compares the
    measures with the spec's limits (sdc_methods_comparison_chapter.txt sec. 4 for the scores).

    Parameters
    ----------
    spec : ReleaseSpec, dict or path
        The spec: a YAML file (paths in it relative to the file), a mapping of the same fields (paths relative to
        the working directory) or a parsed ``ReleaseSpec``.
    out_dir : path, optional
        The output directory, in place of the spec's ``output.dir``.
    overwrite : bool, optional
        In place of the spec's ``output.overwrite``: replace an output directory sdc wrote.
    client, workers : distributed.Client, int, optional
        Where the graphs run: on this client, or on a LocalCluster of this many worker processes started for
        the call; default the active client, else the spec's ``dask`` section for a scheduler address or a
        large input, else a cluster of threads in this process (:func:`sdc_tasks.scheduling.release_client`).

    Returns
    -------
    ReleaseSummary
        The verdict ("published"), the gate's checks, the metrics as :class:`~sdc_tasks.results.Metrics`, the
        steps, what became of each column, and ``paths`` (masked/, metrics.json, report, manifest).

    Raises
    ------
    ReleaseRefused
        When the gate refuses publication: ``.checks`` the failing checks, ``.result`` the summary (the report
        and metrics are written, masked/ is not).
    SpecError, InputError
        ``ValueError`` subclasses naming the spec field, column or record at fault.

    References
    ----------
    .. [1] J. Domingo-Ferrer and V. Torra, "A Quantitative Comparison of Disclosure Control Methods for
       Microdata", 2001 (sdc_methods_comparison_chapter.txt).
    .. [2] J. Domingo-Ferrer, "Statistical Databases", 2007 (statistical_databases_survey.txt; R-U maps).

    docs/references.md gives the full references.
    """
    from sdc_tasks.pipeline.run import run_release  # on use: it binds sdc_tasks.cluster.dask_client when imported

    chosen = _release_spec(spec)
    try:
        with scheduling.release_client(chosen.dask.address, chosen.input_path, client, workers) as running:
            summary = run_release(chosen, client=running, out_dir=out_dir, overwrite=overwrite)
    except ReleaseRefused as exc:
        exc.result = _with_metrics(exc.result)
        raise
    return _with_metrics(summary)


def _release_spec(spec: Any) -> ReleaseSpec:
    """A spec given as a ReleaseSpec, a mapping (paths relative to the working directory) or a YAML path, parsed;
    InputError for anything else."""
    if isinstance(spec, ReleaseSpec):
        return spec
    if isinstance(spec, Mapping):
        return parse_spec(dict(spec))
    if is_path(spec):
        return load_spec(spec)
    raise InputError(f"spec must be a ReleaseSpec, a mapping or a path, not {type(spec).__name__}")


def _with_metrics(summary: ReleaseSummary) -> ReleaseSummary:
    """The summary with its metrics as a :class:`~sdc_tasks.results.Metrics`."""
    return dataclasses.replace(summary, metrics=Metrics(summary.metrics))


def compare(data: Data, grid: Grid | Mapping[str, Any] | PathLike | None = None, *,
            vars: str | Sequence[str] | None = None, key_vars: str | Sequence[str] | None = None,
            limits: Mapping[str, float] | None = None, risk: str = "metrics", id_column: str = "record_id",
            parallel: str = "auto", out: PathLike | None = None, overwrite: bool = False, client: Any = None,
            workers: int | None = None) -> pd.DataFrame:
    """Rank masking methods and parameters on one data set by the score of information loss and disclosure
    risk, as ``sdc compare`` does (sdc_methods_comparison_chapter.txt sec. 6, Table 1; categorical grids:
    Table 3).

    Parameters
    ----------
    data : pandas.DataFrame, dask.dataframe.DataFrame or path
        The records compared.
    grid : Grid, dict or path, optional
        The configurations (a grid mapping as in data/default_grid.yaml, its YAML file or a parsed ``Grid``);
        default the chapter's grid.
    vars, key_vars : str or list of str, optional
        The variables masked (default: every numeric column but the id) and the key variables in order
        (default: the first seven variables).
    limits : dict, optional
        Risk limits ``{measure: limit}`` (e.g. ``{"DLD": 10}``, as ``sdc compare --max``); a column
        ``within_limits`` then says which configurations meet them all.
    risk : {"metrics", "published"}, default "metrics"
        The linkage measures the score ranks on (docs/reproduction.md).
    id_column : str, default "record_id"
        The record id (created from row positions when absent).
    parallel : {"auto", "configurations", "data"}, default "auto"
        One task per configuration, or the cluster on each configuration's data (auto: by input size).
    out : path, optional
        Also write the comparison's files there (ranking, R-U map, report), as ``sdc compare --out``.
    overwrite : bool, default False
        Replace an existing ``out`` written by sdc.
    client, workers : distributed.Client, int, optional
        Where the graphs run: on this client, or on a LocalCluster of this many worker processes started for
        the call; default the active client, else threads in this process (:mod:`sdc_tasks.scheduling`).

    Returns
    -------
    pandas.DataFrame
        The ranking, best first: one row per configuration (``Method``, its label) with its IL, DLD, PLD, ID,
        score and ranks (categorical grids: the columns of the chapter's Table 3).

    Raises
    ------
    InputError, GridError
        ``ValueError`` subclasses naming the option, grid field, column or record at fault.

    References
    ----------
    .. [1] J. Domingo-Ferrer and V. Torra, "A Quantitative Comparison of Disclosure Control Methods for
       Microdata", 2001 (sdc_methods_comparison_chapter.txt).

    docs/references.md gives the full references; docs/comparison.md the grids and the ranking.
    """
    from sdc_tasks.comparison.outputs import comparison  # on use: it draws with matplotlib
    from sdc_tasks.comparison.run import Grid, load_grid, parse_grid, parse_limits

    check_kind(data, "data")
    chosen = grid if isinstance(grid, Grid) else parse_grid(dict(grid)) if isinstance(grid, Mapping) else \
        load_grid(grid)
    bounds = parse_limits([f"{name}={limit}" for name, limit in (limits or {}).items()])
    with contextlib.ExitStack() as stack:
        path = Path(data) if is_path(data) else _scratch_copy(dask_frame(data, "data"), stack)
        stack.enter_context(scheduling.scheduled([data], client, workers))
        result = comparison(path, out, chosen, id_column, column_names(vars), column_names(key_vars), bounds, parallel,
                            overwrite, risk)
    if not bounds:
        return result.table
    meets = {r.config.label: all(k in r.metrics and r.metrics[k] <= v for k, v in bounds.items())
             for r in result.results}
    return result.table.assign(within_limits=result.table["Method"].map(meets))


def _scratch_copy(frame: dd.DataFrame, stack: contextlib.ExitStack) -> Path:
    """``frame`` written as a Parquet dataset in a private scratch directory that lives as long as ``stack``."""
    path = Path(stack.enter_context(scratch_dir("data"))) / "data"
    write_parquet(frame, path)
    return path


def methods() -> pd.DataFrame:
    """Every registered masking method, as :func:`mask` takes them.

    Returns
    -------
    pandas.DataFrame
        One row per method: ``method``, ``kind`` (continuous or categorical), ``shape`` (how it runs),
        ``summary``, ``source`` (the section of the source paper it follows), ``parameters`` (name -> default,
        or "required"), ``example`` (valid parameters), ``after_masking`` (needs the original records) and
        ``ordinal`` (needs an order of the categories); docs/methods.md is generated from the same rows.
    """
    return pd.DataFrame([{
        "method": m.name, "kind": m.kind, "shape": m.shape, "summary": m.summary, "source": m.source,
        "parameters": {p.name: "required" if p.required else p.default for p in m.params},
        "example": m.example, "after_masking": m.after_masking, "ordinal": m.ordinal,
    } for m in method_catalogue()])


def measures() -> pd.DataFrame:
    """The metric catalogue: every key :func:`evaluate` can give.

    Returns
    -------
    pandas.DataFrame
        One row per metrics.json key or numbered set of keys (``DLD_<i>``): ``key``, ``pattern``, ``family``,
        ``group``, ``description``, ``unit``, ``direction`` (lower or higher is better), ``range`` and
        ``source`` (the paper and section); docs/metrics.md's key table is generated from the same rows.
    """
    return pd.DataFrame([dataclasses.asdict(m) for m in MEASURES])
