"""The masking method registry: one row per method (its parameter model, stage shape, kernel adapter, block plan,
flags, source section, summary and example parameters), parameter validation, and what is generated from the
rows: the method catalogue of the Python API, the ``sdc mask`` help texts and docs/methods.md."""

from __future__ import annotations

import json
import shlex
import types
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Literal, Union, get_args, get_origin

import yaml
from pydantic import ValidationError

from sdc_tasks.masking.params import (
    TILE_ROWS,
    CodingParams,
    GlobalRecodingParams,
    JpegParams,
    LocalSuppressionParams,
    MdavParams,
    MdavVariableParams,
    NoiseParams,
    NoParams,
    Params,
    PostMaskParams,
    PramParams,
    ProjectedParams,
    RankSwapParams,
    RecodeParams,
    RecordSwapParams,
    ResampleParams,
    SyntheticPostMaskParams,
    TopBottomParams,
    UnivariateParams,
)

if TYPE_CHECKING:
    from sdc_tasks.masking.fold import WindowFold


@dataclass(frozen=True)
class BlockPlan:
    """How a blocked method forms blocks: sort keys (``principal``: the first principal axes, one per level;
    ``zsum``: the sum of z-scores; ``id``: the record id) and the number of levels."""

    axes: str = "principal"
    levels: int = 2


SHAPES = {
    "blocked": "per data-driven block: records sorted on a key computed from the data (principal axes, z-score "
               "sum or id) and cut into blocks",
    "column": "one variable at a time over its whole scope (the file, or each stratum), exactly",
    "record": "record by record, with statistics of the whole file",
    "categorical": "exact category or key-combination counts per scope, then each partition's records mapped",
    "household": "a household table (one row per household) planned on the client, the plan then looked up per "
                 "partition by household id, so no household is split",
}


@dataclass(frozen=True)
class Method:
    """A registered masking method: adding one is a row here and a kernel (with its adapter).

    ``shape``: how it runs (``SHAPES``); its ``kind`` follows: "categorical" for the categorical and household
    shapes, "continuous" otherwise. ``kernel``: the name, in ``sdc_tasks.masking.adapters``, of the adapter of its shape
    (``apply.BlockKernel``, ``ColumnKernel``, ``RecordKernel``, an ``apply.CategoryMethod``, or for the household
    shape the mask stage itself, (step input, variables, params, StepContext) -> frame), loaded by
    :meth:`adapter` on first use, so that reading the registry (``sdc --help``, ``sdc validate``) imports no Dask
    or kernel code. ``summary``, ``source`` (the section of the source
    paper it follows), ``example`` (small valid parameters, usable on a file of a few hundred records) and
    ``scaling`` (how it runs at scale) are what the catalogue and docs/methods.md show.

    Blocked methods: ``block``, how blocks are formed; ``unit_k``: blocks made of whole groups of k records;
    ``carries_original``: each record's original values travel beside the masked ones through the block
    stage; ``fixed_block_size``: records per block when the method fixes it (JPEG's tile) rather than the
    ``block_size`` parameter. Record methods: ``record_context``, the name in ``adapters`` of a hook adding what
    the kernel needs besides the input's moments ((step input, variables, params, StepContext, context) -> dict;
    :meth:`context_hook`).

    Column methods: ``fold``, the kernel as a fold over rank-ordered partitions (``fold.ColumnFold``) when its
    state is a bounded window of ranks, used beyond ``apply.COLUMN_MAX_RECORDS`` records, and ``fold_window``, the
    length of that window in a scope of n records (``fold.FoldWindow``).

    Flags: ``reports_outcome``, a method whose step reports what it reached: a blocked method whose kernel
    returns a ``PostMaskResult`` (values and the figures of ``sdc_tasks.masking.postmask_outcome``), or record
    swapping (``sdc_tasks.masking.swap_outcome``); ``after_masking``, a step that
    moves an already masked file toward the original records' statistics, so it needs those records (a
    release's input, or ``sdc mask --original``); ``ordinal``, a
    categorical method that needs an order of the categories; ``on_keys``, a method whose variables default
    to the categorical keys."""

    name: str
    params: type[Params]
    shape: Literal["blocked", "column", "record", "categorical", "household"]
    kernel: str
    summary: str
    source: str
    example: dict[str, Any]
    scaling: str
    block: BlockPlan | None = None
    unit_k: bool = False
    carries_original: bool = False
    fixed_block_size: int | None = None
    record_context: str | None = None
    fold: str | None = None
    fold_window: str | None = None
    reports_outcome: bool = False
    after_masking: bool = False
    ordinal: bool = False
    on_keys: bool = False

    @property
    def kind(self) -> Literal["continuous", "categorical"]:
        """The variables it masks: "categorical" or "continuous"."""
        return "categorical" if self.shape in ("categorical", "household") else "continuous"

    def adapter(self) -> Any:
        """The kernel adapter (or categorical method) that ``kernel`` names."""
        from sdc_tasks.masking import adapters

        return getattr(adapters, self.kernel)

    def fold_adapter(self) -> WindowFold | None:
        """The fold adapter that ``fold`` names with the window that ``fold_window`` names, None when it names
        none."""
        from sdc_tasks.masking import adapters
        from sdc_tasks.masking.fold import WindowFold

        if self.fold is None:
            return None
        return WindowFold(getattr(adapters, self.fold), getattr(adapters, self.fold_window))

    def context_hook(self) -> Callable[..., dict] | None:
        """The record-context hook that ``record_context`` names, None when it names none."""
        from sdc_tasks.masking import adapters

        return None if self.record_context is None else getattr(adapters, self.record_context)


METHODS: dict[str, Method] = {m.name: m for m in (
    Method("mdav", MdavParams, "blocked", "mdav_on_block",
           "MDAV fixed-size multivariate microaggregation: each pair of groups seeded by the record farthest "
           "from the average record and the record farthest from it",
           "statistical_databases_survey.txt, Microaggregation (MDAV)",
           {"k": 3, "block_size": 100},
           "per data-driven block: records sorted on the first principal axis and cut into slabs, slabs sorted "
           "on the second axis and cut into blocks; SSE/SST 1.022 x global MDAV at 1e5 "
           "(benchmarks/blocked_mdav_quality.py). Up to 5 attributes a k-d tree that follows the removals answers "
           "each question; above, scans of the block held by attributes: 0.18 CPU-s per 12,000-record block of "
           "13 attributes (benchmarks/microaggregation_kernels.py --method mdav)",
           block=BlockPlan("principal", 2)),
    Method("md", MdavParams, "blocked", "md_on_block",
           "MD fixed-size multivariate microaggregation, MDAV's predecessor: each pair of groups seeded by the "
           "two most distant records left; the chapter's Mic2mul..Micmul (reproduces Table 1's IL and DLD, "
           "docs/reproduction.md)",
           "sdc_methods_comparison_chapter.txt sec. 2, Microaggregation (Mic2mul k .. Micmul k; Domingo-Ferrer "
           "and Mateo-Sanz 2002)",
           {"k": 3, "block_size": 100},
           "per block, as mdav; the most distant pair from upper bounds kept in a heap, each most distant record "
           "from the rows listed by distance from the block's average, the k-1 closest from a k-d tree that "
           "follows the removals: 0.1-0.17 CPU-s per 12,000-record block of 3-4 attributes (12x-24x the scan "
           "kernel it replaced, same groups) and about 0.6 s for all 13 (about 10x); Mic3mul k = 3 on 1e6 "
           "generated records in about 66 s as a 2-worker `sdc mask` (benchmarks/microaggregation_kernels.py, "
           "docs/performance.md)",
           block=BlockPlan("principal", 2)),
    Method("mdav_variable", MdavVariableParams, "blocked", "vmdav_on_block",
           "V-MDAV variable group size (k..2k-1) multivariate microaggregation",
           "statistical_databases_survey.txt, Microaggregation (variable group size); Solanas and "
           "Martinez-Balleste 2006 (V-MDAV)",
           {"k": 3, "block_size": 100},
           "per block, as mdav",
           block=BlockPlan("principal", 2)),
    Method("mic_ir", UnivariateParams, "column", "mic_ir_on_column",
           "individual ranking microaggregation (MicIR): each variable sorted and cut into groups of k",
           "sdc_methods_comparison_chapter.txt sec. 2, Microaggregation (MicIR k)",
           {"k": 3},
           "exact, one variable at a time"),
    Method("mic_optimal", UnivariateParams, "column", "mic_optimal_on_column",
           "optimal univariate microaggregation (Hansen-Mukherjee): least SSE groups of k..2k-1 per variable",
           "statistical_databases_survey.txt, Microaggregation (ref. [22], Hansen and Mukherjee 2003)",
           {"k": 3},
           "exact, one variable at a time"),
    Method("mic_z", ProjectedParams, "blocked", "projected_on_block",
           "microaggregation on the z-scores projection (MicZ): groups of k along the sum of z-scores",
           "sdc_methods_comparison_chapter.txt sec. 2, Microaggregation (MicZ k)",
           {"k": 3, "block_size": 90},
           "blocks hold whole groups of k along the projection: equal to the whole-file method",
           block=BlockPlan("zsum", 1), unit_k=True),
    Method("mic_pcp", ProjectedParams, "blocked", "projected_on_block",
           "microaggregation on the first principal component (MicPCP): groups of k along its scores",
           "sdc_methods_comparison_chapter.txt sec. 2, Microaggregation (MicPCP k)",
           {"k": 3, "block_size": 90},
           "as mic_z",
           block=BlockPlan("principal", 1), unit_k=True),
    Method("rankswap", RankSwapParams, "column", "rankswap_on_column",
           "rank swapping (Moore 1996): each value swapped with one at most p percent of the records away in rank",
           "sdc_methods_comparison_chapter.txt sec. 2, Rank swapping; statistical_databases_survey.txt, Data "
           "swapping and rank swapping",
           {"p": 10},
           "exact, one variable at a time per scope; beyond 10,000,000 records (or a column a task's memory "
           "cannot hold) a fold over the variable's rank-ordered partitions (an exact sort by stratum, value "
           "and id through files of the step's work directory, then a chain of tasks each reading its "
           "rank-ordered partition (at least a quarter of the swap window of P ranks) when it runs and carrying "
           "the next P ranks' state), so no task holds the column and no worker holds more than a partition of it",
           fold="rankswap_fold", fold_window="rankswap_window"),
    Method("noise", NoiseParams, "record", "noise_on_records",
           "additive noise N(0, p s) per variable; correlated: N(0, p^2 Sigma); linear_transform: Kim's method",
           "statistical_databases_survey.txt, Additive noise; sdc_methods_comparison_chapter.txt sec. 2, "
           "Additive noise",
           {"p": 0.1},
           "per record; draws keyed by (seed, step, variable, record id)",
           record_context="noise_context"),
    Method("resample", ResampleParams, "column", "resample_on_column",
           "resampling: the average of the order statistics of t samples drawn with replacement, rank preserving",
           "sdc_methods_comparison_chapter.txt sec. 2, Resampling",
           {"t": 3},
           "exact, one variable at a time"),
    Method("rescale", NoParams, "record", "rescale_on_records",
           "rescaling to the original records' means and variances; a step after any method",
           "pil_measures.txt sec. 5 (the rescaling transformation)",
           {},
           "per record",
           record_context="rescale_context", after_masking=True),
    Method("top_bottom_coding", TopBottomParams, "record", "threshold_on_records",
           "top and bottom coding of continuous variables at values: above a variable's top (below its bottom) "
           "replaced by the threshold or a given value, one rule per variable",
           "statistical_databases_survey.txt, Top and bottom coding",
           {"rules": {"income": {"top": 40000.0}, "tax": {"bottom": 1500.0, "bottom_value": 1000.0},
                      "wealth": {"top": 20000.0, "top_value": 25000.0}, "hours": {"bottom": 15.0, "top": 50.0}}},
           "record by record", record_context="threshold_context"),
    Method("distr", NoParams, "column", "distr_on_column",
           "data distortion by probability distribution: the best-fitting distribution per variable, rank "
           "preserving",
           "sdc_methods_comparison_chapter.txt sec. 2, Data distortion by probability distribution (Distr)",
           {},
           "one variable at a time"),
    Method("jpeg", JpegParams, "blocked", "jpeg_on_block",
           "lossy compression: the file as a greyscale image, JPEG at quality q",
           "sdc_methods_comparison_chapter.txt sec. 2, Lossy compression (JPEG q)",
           {"q": 50},
           "tiles of 65,496 records in id order",
           block=BlockPlan("id", 1), fixed_block_size=TILE_ROWS),
    Method("postmask", PostMaskParams, "blocked", "postmask_on_block",
           "post-masking optimization: hill climbing that restores the original's moments while holding IL1 "
           "near p x the input's; a step after any method",
           "post_masking_optimization.txt sec. 3.2 (Algorithm 1)",
           {"p": 0.8, "q": 0.4, "target_e": 0.01, "max_iter": 5000},
           "per data-driven block against the original records of the same ids, each block targeting its own "
           "originals' moments; random streams keyed by (seed, step, block); the paper's open choices and "
           "Census figures: docs/postmask.md",
           block=BlockPlan("principal", 2), carries_original=True, reports_outcome=True, after_masking=True),
    Method("synthetic_postmask", SyntheticPostMaskParams, "blocked", "synthetic_on_block",
           "synthetic data: the post-masking hill climbing from a random start with q = 1",
           "post_masking_optimization.txt sec. 5 (Synthetic microdata generation)",
           {"p": 0.3, "target_e": 0.02, "max_iter": 5000},
           "as postmask",
           block=BlockPlan("principal", 2), carries_original=True, reports_outcome=True),
    Method("top_coding", CodingParams, "categorical",
           "top_coding",
           "top coding: the last p categories of an ordinal variable recoded into one",
           "sdc_methods_comparison_chapter.txt sec. 2, Top-coding",
           {"p": 2},
           "category order declared or the sorted values; mapping applied per partition", ordinal=True),
    Method("bottom_coding", CodingParams, "categorical",
           "bottom_coding",
           "bottom coding: the first p categories of an ordinal variable recoded into one",
           "sdc_methods_comparison_chapter.txt sec. 2, Bottom-coding",
           {"p": 2},
           "category order declared or the sorted values; mapping applied per partition", ordinal=True),
    Method("global_recoding", GlobalRecodingParams, "categorical",
           "global_recoding",
           "global recoding: the p lowest-frequency categories recoded into one, ties by category order",
           "sdc_methods_comparison_chapter.txt sec. 2, Global recoding",
           {"p": 2},
           "exact frequencies per scope by a Dask groupby tree reduction, then per partition"),
    Method("pram", PramParams, "categorical", "pram",
           "PRAM with the Kooiman et al. Markov matrix",
           "sdc_methods_comparison_chapter.txt sec. 2, Post-Randomization Method (PRAM)",
           {"theta": 0.5},
           "frequencies by tree reduction; per record, the draw keyed by (seed, step, variable, record id)"),
    Method("recode", RecodeParams, "categorical", "recode",
           "recoding by the agency's own rules, one per variable: a recode map (many categories into one, inline "
           "or from a file), interval breaks with labels (age bands), or hierarchical codes cut to a prefix",
           "statistical_databases_survey.txt, Global recoding",
           {"rules": {"size": {"map": {"1": 1, "2": 2, "3": 3, "4": 3, "5": 3}},
                      "region": {"map": {"north": "north", "south": "south", "east": "east", "west": "east"}},
                      "tenure": {"map": {"owner": "owner", "renter": "renter", "other": "renter"}}}},
           "exact category counts per scope by a Dask groupby tree reduction, a mapping of the observed categories "
           "per variable, applied per partition"),
    Method("local_suppression", LocalSuppressionParams, "categorical",
           "local_suppression",
           "local suppression: key values set to missing, the least important key first, until every combination "
           "of the keys (or of each key subset of combs, or set of key_sets) is shared by at least k records, a "
           "missing value matching any value (sdcMicro's kAnon), or until no record's individual risk is above "
           "threshold (mu-Argus; sdcMicro localSupp); docs/categorical.md, Local suppression",
           "statistical_databases_survey.txt, Local suppression; k-anonymity; disclosure risk for categorical data",
           {"k": 3},
           "the first k records of each key combination (threshold: the combinations with summed weights) by a "
           "Dask tree reduction, suppressions decided on that table, applied per partition",
           on_keys=True),
    Method("record_swap", RecordSwapParams, "household", "swapped_records",
           "targeted record swapping (TRS): households in a cell of fewer than k persons (risk variables by "
           "geography) at a level swap their whole geography and carry-along variables with a similar household "
           "of another area of that level, then random households up to the swap rate at the lowest level",
           "sdcMicro recordSwap (R/recordSwap.R, src/recordSwap/recordSwap.cpp, vignette \"Targeted Record "
           "Swapping\"); choices: docs/recordswap.md",
           {"hierarchy": ["region", "district", "area"], "risk_variables": ["age_group", "sex", "nationality"],
            "k": 3, "swap_rate": 0.05, "similar": [["hhsize"], []], "carry_along": ["tenure"],
            "household_id": "household_id"},
           "risk counts by a Dask tree reduction, the household table (one row per household) by a grouping on the "
           "household id, the plan made on it on the client, then looked up per partition by household id",
           reports_outcome=True),
)}


def ruled_variables(params: dict[str, Any]) -> list[str] | None:
    """The variables a method's parameters name, which a step masks unless told otherwise: those of its
    per-variable ``rules`` (recode, top_bottom_coding), or its ``hierarchy`` and ``carry_along`` (record_swap);
    None for a method whose parameters name none."""
    rules = params.get("rules")
    if isinstance(rules, dict):
        return list(rules)
    if isinstance(params.get("hierarchy"), list):
        return [*params["hierarchy"], *params.get("carry_along", [])]
    return None


def household_suppression_error(method: str, params: dict[str, Any], homes: list[str]) -> str | None:
    """Why a step may not mask the household-level variables ``homes`` (those among its variables) once per
    household: local suppression with missing values as a category of their own, where suppressing a value for a
    whole household can leave a member's former group below k; None when it may."""
    if method == "local_suppression" and params.get("missing") == "category" and homes:
        return (f"local_suppression with missing: category cannot suppress the household-level variable {homes[0]!r} "
                "for whole households and stay k-anonymous (a missing value is then a category of its own); use "
                "missing: any")
    return None


def is_categorical(method: str) -> bool:
    """Whether a registered method masks categorical variables."""
    return METHODS[method].kind == "categorical"


RANGE_ERRORS = {"greater_than", "greater_than_equal", "less_than", "less_than_equal"}


def _param_error(method: str, error: dict) -> str:
    """One pydantic error of a method's parameters as our message: the parameter named and, for a value out of
    range, the allowed range its field declares (``_bounds``)."""
    name = ".".join(str(x) for x in error["loc"])
    if error["type"] in RANGE_ERRORS and name in METHODS[method].params.model_fields:
        allowed = _bounds(METHODS[method].params, name)
        return f"parameter '{name}' of {method} = {error['input']} is out of range: allowed {allowed}"
    message = error["msg"].removeprefix("Value error, ")
    return f"parameter '{name}' of {method}: {message}" if name else f"parameters of {method}: {message}"


def validate_params(method: str, params: dict[str, Any], base_dir: str | Path = ".") -> dict[str, Any]:
    """Return the method's parameters with defaults filled in; raise ValueError naming the bad parameter (unknown,
    of the wrong type, infinite or NaN, or outside the range its field declares, the range stated). Files a
    parameter names (a recode map, a rules file) are read relative to ``base_dir`` (a spec's directory)."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; known: {', '.join(sorted(METHODS))}")
    try:
        model = METHODS[method].params.model_validate(params, context={"base_dir": str(base_dir)})
    except ValidationError as exc:
        raise ValueError("; ".join(_param_error(method, e) for e in exc.errors())) from None
    values = model.model_dump()
    if _blocks_of_groups(values) and values["block_size"] < 2 * values["k"]:
        raise ValueError(f"parameter 'block_size' of {method} must be at least 2k = {2 * values['k']}")
    return values


def _blocks_of_groups(names) -> bool:
    """Whether parameters with these names have blocks of groups of k, so that ``block_size`` must be >= 2k."""
    return "block_size" in names and "k" in names


def parse_cli_params(pairs: list[str]) -> dict[str, Any]:
    """Return {name: value} from ``k=v`` strings, values parsed as int, float or text."""
    out: dict[str, Any] = {}
    for pair in pairs:
        if "=" not in pair:
            raise ValueError(f"--param {pair!r} must look like name=value")
        name, raw = pair.split("=", 1)
        out[name.strip()] = _scalar(raw.strip())
    return out


def parse_category_orders(pairs: list[str]) -> dict[str, list]:
    """Return {variable: categories in order} from ``VAR=c1,c2,...`` strings, categories parsed as ``--param``
    values; raise ValueError naming the option at fault."""
    out: dict[str, list] = {}
    for pair in pairs:
        name, _, raw = pair.partition("=")
        categories = [_scalar(c.strip()) for c in raw.split(",") if c.strip()]
        if not name.strip() or not categories:
            raise ValueError("--ordinal must look like VAR=c1,c2,... (a variable, then its categories in order)")
        if len(set(categories)) != len(categories):
            raise ValueError(f"--ordinal {name.strip()} lists a category twice")
        out[name.strip()] = categories
    return out


def _scalar(raw: str) -> Any:
    """Return ``raw`` as int, float, bool/None or the string itself; a value in braces or brackets as the YAML (or
    JSON) mapping or list it writes, e.g. ``rules={"age": {"breaks": [15, 65]}}``."""
    if raw.startswith(("{", "[")):
        try:
            return yaml.safe_load(raw)
        except yaml.YAMLError:
            raise ValueError(f"--param value {raw[:20]!r}... is not a YAML or JSON mapping or list") from None
    for cast in (int, float):
        try:
            return cast(raw)
        except ValueError:
            pass
    return {"true": True, "false": False, "none": None, "null": None}.get(raw.lower(), raw)


# ---- the catalogue of the Python API ----


@dataclass(frozen=True)
class ParamInfo:
    """One parameter of a method: name, type (as written in Python), default (None when required),
    whether it is required, description, and bounds ("" for none; e.g. ">= 2", "> 0, <= 100", ">= 2k")."""

    name: str
    type: str
    default: Any
    required: bool
    description: str
    bounds: str


@dataclass(frozen=True)
class MethodInfo:
    """One masking method as the Python API lists it (see ``Method`` for the meaning of the fields)."""

    name: str
    kind: str
    shape: str
    summary: str
    source: str
    params: list[ParamInfo]
    example: dict[str, Any]
    after_masking: bool
    ordinal: bool


def _type_name(annotation: Any) -> str:
    """A parameter's type as written in Python: ``int``, ``int | None``, ``'nearest' | 'id'``."""
    if get_origin(annotation) is Literal:
        return " | ".join(repr(a) for a in get_args(annotation))
    if get_origin(annotation) in (Union, types.UnionType):
        return " | ".join(_type_name(a) for a in get_args(annotation))
    return "None" if annotation is type(None) else annotation.__name__


def _bounds(model: type[Params], name: str) -> str:
    """The bounds of one parameter, from its model's constraints and the 2k rule of ``validate_params``."""
    ops = (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<"))
    parts = [f"{symbol} {getattr(c, attr)}" for c in model.model_fields[name].metadata for attr, symbol in ops
             if getattr(c, attr, None) is not None]
    if name == "block_size" and _blocks_of_groups(model.model_fields):
        parts.append(">= 2k")
    return ", ".join(parts)


def param_infos(method: str) -> list[ParamInfo]:
    """The parameters of a registered method, in the order of its model."""
    model = METHODS[method].params
    return [ParamInfo(name, _type_name(f.annotation),
                      None if f.is_required() else f.get_default(call_default_factory=True), f.is_required(),
                      f.description or "", _bounds(model, name)) for name, f in model.model_fields.items()]


def method_catalogue() -> list[MethodInfo]:
    """One record per registered method, in registry order: name, kind, shape, summary, source, parameters
    (defaults, descriptions, bounds), example parameters and flags."""
    return [MethodInfo(m.name, m.kind, m.shape, m.summary, m.source, param_infos(m.name), dict(m.example),
                       m.after_masking, m.ordinal) for m in METHODS.values()]


# ---- texts generated from the table: CLI help, docs/methods.md ----


def method_help() -> str:
    """The help of ``sdc mask --method``: every registered method, the continuous ones first."""
    names = {kind: [m.name for m in METHODS.values() if m.kind == kind] for kind in ("continuous", "categorical")}
    return f"masking method: {', '.join(names['continuous'])}; categorical: {', '.join(names['categorical'])}"


def param_help() -> str:
    """The help of ``sdc mask --param``: each method's parameter names, methods with the same names together."""
    by_names: dict[tuple[str, ...], list[str]] = {}
    for m in METHODS.values():
        by_names.setdefault(tuple(m.params.model_fields), []).append(m.name)
    listed = "; ".join(f"{', '.join(methods)}: {', '.join(names)}" for names, methods in by_names.items() if names)
    return f"method parameter name=value (repeatable): {listed} (defaults and bounds: docs/methods.md)"


def example_option(method: str) -> str:
    """The example parameters of a method as ``sdc mask`` options (``--param k=3 ...``)."""
    return " ".join(f"--param {shlex.quote(f'{name}={_option_text(value)}')}"
                    for name, value in METHODS[method].example.items())


def _option_text(value: Any) -> str:
    """A parameter value as ``--param`` reads it back: booleans lower case, mappings and lists as compact JSON."""
    if isinstance(value, bool):
        return str(value).lower()
    return json.dumps(value, separators=(",", ":")) if isinstance(value, (dict, list)) else str(value)


def _cell(text: str) -> str:
    """``text`` for a Markdown table cell: its pipes escaped."""
    return text.replace("|", "\\|")


def _markdown_default(p: ParamInfo) -> str:
    """A parameter's default as docs/methods.md writes it."""
    return "required" if p.required else f"`{p.default}`"


_FLAG_TEXTS = (
    ("after_masking", "needs the original records (a release's input, or `sdc mask --original`)"),
    ("ordinal", "needs an order of the categories (declared, or the sorted values)"),
    ("on_keys", "masks the categorical key variables unless told otherwise"),
)


def _method_section(m: Method) -> list[str]:
    """The lines of a method's section of docs/methods.md: summary, source, scaling, flags, parameters, example."""
    lines = ["", f"## `{m.name}`", "", f"{m.summary[0].upper()}{m.summary[1:]}.", "", f"Source: {m.source}.", "",
             f"How it runs: {m.scaling}."]
    flags = [text for flag, text in _FLAG_TEXTS if getattr(m, flag)]
    if flags:
        lines += ["", f"It {'; '.join(flags)}."]
    infos = param_infos(m.name)
    if infos:
        lines += ["", "| parameter | type | default | bounds | description |", "|---|---|---|---|---|"]
        lines += [f"| `{p.name}` | `{_cell(p.type)}` | {_markdown_default(p)} | {p.bounds} | {p.description} |"
                  for p in infos]
    for rule in _rule_models(m.params):
        lines += ["", f"Each rule: {' '.join(rule.__doc__.split())}", "",
                  "| field | type | default | bounds | description |", "|---|---|---|---|---|"]
        lines += [f"| `{name}` | `{_cell(_type_name(f.annotation))}` | "
                  f"{'required' if f.is_required() else f'`{f.default}`'} | {_bounds(rule, name)} | {f.description} |"
                  for name, f in rule.model_fields.items()]
    example = f"sdc mask --method {m.name} {example_option(m.name)}".strip()
    return lines + ["", f"Example: `{example}`"]


def _rule_models(model: type[Params]) -> list[type[Params]]:
    """The per-variable rule models of a method's parameters: the value type of each parameter that maps
    variables to rules."""
    return [args[1] for f in model.model_fields.values() for args in [get_args(f.annotation)]
            if get_origin(f.annotation) is dict and len(args) == 2 and isinstance(args[1], type)
            and issubclass(args[1], Params)]


def methods_markdown() -> str:
    """docs/methods.md: the table of methods and, per method, its parameters, as generated from the registry."""
    lines = [
        "# Masking methods",
        "",
        "Generated from the method registry (`sdc_tasks/masking/registry.py`); do not edit by hand. After changing",
        "the registry, regenerate it from the repository root with",
        "",
        "```",
        "python -c \"from sdc_tasks.masking.registry import methods_markdown; print(methods_markdown(), end='')\" "
        "> docs/methods.md",
        "```",
        "",
        "(`tests/test_method_registry.py` fails while this file differs from what the registry generates.) Every",
        "method is a step of a release spec and `sdc mask --method NAME`; any method runs within strata when a",
        "strata column is named.",
        "",
        "| method | kind | shape | parameters (default; bounds) | source |",
        "|---|---|---|---|---|",
    ]
    for m in METHODS.values():
        params = "<br>".join(f"`{p.name}` ({'; '.join(x for x in (_markdown_default(p), p.bounds) if x)})"
                             for p in param_infos(m.name)) or "none"
        lines.append(f"| `{m.name}` | {m.kind} | {m.shape} | {params} | {m.source} |")
    lines += ["", "Shapes:", ""] + [f"- {shape}: {text}." for shape, text in SHAPES.items()]
    for m in METHODS.values():
        lines += _method_section(m)
    return "\n".join(lines) + "\n"
