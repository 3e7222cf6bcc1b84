"""The masking method registry: one name, one parameter model and one call shape per method."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid")


DEFAULT_BLOCK_SIZE = 12_000


class MdavParams(_Params):
    """MDAV microaggregation (statistical_databases_survey.txt, Microaggregation) and MD, its predecessor (the
    chapter's Mic2mul..Micmul, sdc_tasks.masking.md)."""

    k: int = Field(ge=2, description="minimum group size")
    group_size: int | None = Field(default=None, ge=1, description="attributes microaggregated together (None: all)")
    block_size: int = Field(default=DEFAULT_BLOCK_SIZE, ge=2, description="records per data-driven block (>= 2k)")


class MdavVariableParams(MdavParams):
    """Variable group size microaggregation, groups of k..2k-1 (V-MDAV)."""

    gamma: float = Field(default=0.2, ge=0, description="group extension threshold")


class UnivariateParams(_Params):
    """Univariate microaggregation of each variable: MicIR (chapter sec. 2) or optimal (Hansen-Mukherjee)."""

    k: int = Field(ge=2, description="minimum group size")


class ProjectedParams(UnivariateParams):
    """Microaggregation on a projection: MicZ (z-scores) or MicPCP (first principal component)."""

    block_size: int = Field(default=100_000, ge=2, description="records per block; blocks hold whole groups")


class RankSwapParams(_Params):
    """Rank swapping (statistical_databases_survey.txt, Data swapping and rank swapping)."""

    p: float = Field(gt=0, le=100, description="largest rank displacement, percent of the swap scope's size")


class NoiseParams(_Params):
    """Additive noise N(0, p s) per variable; correlated: N(0, p^2 Sigma); linear_transform: Kim's method."""

    p: float = Field(gt=0, description="noise sd as a fraction of each variable's sd")
    correlated: bool = False
    linear_transform: bool = False


class ResampleParams(_Params):
    """Resampling with t samples (chapter sec. 2)."""

    t: int = Field(ge=1, description="number of samples averaged")


class NoParams(_Params):
    """A method without parameters (Distr; rescale)."""


class JpegParams(_Params):
    """JPEG lossy compression of the file as a greyscale image (chapter sec. 2)."""

    q: int = Field(ge=1, le=100, description="JPEG quality, percent")


class SyntheticPostMaskParams(_Params):
    """Post-masking optimization from a random start, q = 1 (post_masking_optimization.txt sec. 5)."""

    p: float = Field(gt=0, description="target IL1 as a multiple of the starting IL1 (expr. (8))")
    target_e: float = Field(ge=0, description="stop once the moment error E (expr. (7)) is below this")
    max_iter: int = Field(default=1_000_000, ge=0, description="most perturbations tried per block")
    perturbation_sd: float = Field(default=0.1, gt=0, description="sd of one perturbation, in original sds")
    order: int = Field(default=2, ge=1, description="moments restored up to this order m (sec. 5)")
    block_size: int = Field(default=DEFAULT_BLOCK_SIZE, ge=2, description="records per data-driven block")


class PostMaskParams(SyntheticPostMaskParams):
    """Post-masking optimization, Algorithm 1 (post_masking_optimization.txt sec. 3)."""

    q: float = Field(gt=0, le=1, description="share of records perturbed: those contributing most to IL1")
    correspondence: Literal["nearest", "id"] = Field(
        default="nearest", description="IL1 against the nearest original record (paper) or the record's own")


class CodingParams(_Params):
    """Top or bottom coding: the last (first) p categories of an ordinal variable recoded into one
    (sdc_methods_comparison_chapter.txt sec. 2, Top-coding, Bottom-coding)."""

    p: int = Field(ge=1, description="number of categories recoded into one")


class GlobalRecodingParams(_Params):
    """Global recoding of the p lowest-frequency categories into one (chapter sec. 2, Global recoding)."""

    p: int = Field(ge=1, description="number of lowest-frequency categories recoded into one")


class PramParams(_Params):
    """PRAM with the Kooiman et al. Markov matrix (chapter sec. 2, Post-Randomization Method)."""

    theta: float = Field(gt=0, lt=1, description="the matrix parameter theta, 0 < theta < 1 (chapter's p = 100 theta)")


class LocalSuppressionParams(_Params):
    """Local suppression to k-anonymity on the key variables (statistical_databases_survey.txt, Local
    suppression; k-anonymity)."""

    k: int = Field(ge=2, description="every combination of the key variables must occur at least k times")


@dataclass(frozen=True)
class Method:
    """A registered masking method; ``after_masking``: a step that moves an already masked file toward the
    original records' statistics, so it needs those records (a release's input, or ``sdc mask --original``);
    ``kind``: the variables it masks, "continuous" or "categorical"; ``ordinal``: categorical methods that
    need an order of the categories; ``on_keys``: a method whose variables default to the categorical keys."""

    name: str
    params: type[_Params]
    summary: str
    after_masking: bool = False
    kind: Literal["continuous", "categorical"] = "continuous"
    ordinal: bool = False
    on_keys: bool = False


METHODS: dict[str, Method] = {m.name: m for m in (
    Method("mdav", MdavParams, "MDAV fixed-size multivariate microaggregation, blocked"),
    Method("md", MdavParams, "MD fixed-size multivariate microaggregation, the two most distant records seed each "
           "pair of groups (chapter 6 Table 1's Mic2mul..Micmul), blocked"),
    Method("mdav_variable", MdavVariableParams, "variable group size (k..2k-1) microaggregation, blocked"),
    Method("mic_ir", UnivariateParams, "individual ranking microaggregation (MicIR), exact per variable"),
    Method("mic_optimal", UnivariateParams, "optimal univariate microaggregation (Hansen-Mukherjee), exact"),
    Method("mic_z", ProjectedParams, "microaggregation on the z-scores projection (MicZ), exact"),
    Method("mic_pcp", ProjectedParams, "microaggregation on the first principal component (MicPCP), exact"),
    Method("rankswap", RankSwapParams, "rank swapping (Moore 1996), exact within each scope"),
    Method("noise", NoiseParams, "additive noise, uncorrelated or correlated, optionally Kim's transformation"),
    Method("resample", ResampleParams, "resampling with t samples, exact per variable"),
    Method("rescale", NoParams, "rescale to the original means and variances (pil_measures sec. 5)",
           after_masking=True),
    Method("distr", NoParams, "best-fitting distribution per variable, rank preserving"),
    Method("jpeg", JpegParams, "JPEG compression of the file as a greyscale image, tiles in id order"),
    Method("postmask", PostMaskParams, "post-masking optimization: restore the original moments, IL1 near p x",
           after_masking=True),
    Method("synthetic_postmask", SyntheticPostMaskParams, "synthetic data by post-masking optimization"),
    Method("top_coding", CodingParams, "top coding: the last p categories of an ordinal variable into one",
           kind="categorical", ordinal=True),
    Method("bottom_coding", CodingParams, "bottom coding: the first p categories of an ordinal variable into one",
           kind="categorical", ordinal=True),
    Method("global_recoding", GlobalRecodingParams, "global recoding of the p lowest-frequency categories into one",
           kind="categorical"),
    Method("pram", PramParams, "PRAM with the Kooiman et al. matrix, draws keyed by record id", kind="categorical"),
    Method("local_suppression", LocalSuppressionParams, "local suppression of key values to k-anonymity, greedy",
           kind="categorical", on_keys=True),
)}


def is_categorical(method: str) -> bool:
    """Whether a registered method masks categorical variables."""
    return METHODS[method].kind == "categorical"


def validate_params(method: str, params: dict[str, Any]) -> dict[str, Any]:
    """Return the method's parameters with defaults filled in; raise ValueError naming the bad parameter."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; known: {', '.join(sorted(METHODS))}")
    try:
        model = METHODS[method].params.model_validate(params)
    except ValidationError as exc:
        bad = "; ".join(
            f"parameter '{'.'.join(str(x) for x in e['loc'])}' of {method}: {e['msg']}" for e in exc.errors()
        )
        raise ValueError(bad) from None
    values = model.model_dump()
    if "block_size" in values and "k" in values and values["block_size"] < 2 * values["k"]:
        raise ValueError(f"parameter 'block_size' of {method} must be at least 2k = {2 * values['k']}")
    return values


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
    """Return ``raw`` as int, float, bool/None or the string itself."""
    for cast in (int, float):
        try:
            return cast(raw)
        except ValueError:
            pass
    return {"true": True, "false": False, "none": None, "null": None}.get(raw.lower(), raw)

