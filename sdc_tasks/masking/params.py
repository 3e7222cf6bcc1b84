"""The parameter models of the masking methods: names, types, defaults, bounds and descriptions (pydantic)."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_serializer, model_validator
from pydantic_core import PydanticKnownError


class Params(BaseModel):
    """Parameters of a masking method: unknown names, infinite and NaN numbers refused, and every number within the
    range its field declares (each numeric field has a lower and an upper bound: the one rule table that specs,
    grids, ``sdc mask --param`` and the Python API all go through, ``registry.validate_params``)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


DEFAULT_BLOCK_SIZE = 12_000
LARGEST_K = 10_000
"""The largest group size (k) of any method: k-anonymity and microaggregation use k of 2 to a few tens."""
LARGEST_BLOCK = 10_000_000
"""The most records per block of a blocked method (a block is held and worked on in one worker's memory)."""
LARGEST_COUNT = 1_000_000
"""The largest count of categories or attributes a parameter may name."""
TILE_ROWS = 65_496
"""Rows of one JPEG image of the jpeg method (sdc_tasks.masking.jpeg): the largest multiple of the 8-row DCT block
that libjpeg encodes (at most 65,500 rows); the method's fixed block size."""


class MdavParams(Params):
    """MDAV microaggregation (statistical_databases_survey.txt, Microaggregation) and MD, its predecessor (the
    chapter's Mic2mul..Micmul, sdc_tasks.masking.md)."""

    k: int = Field(ge=2, le=LARGEST_K, description="minimum group size")
    group_size: int | None = Field(default=None, ge=1, le=LARGEST_COUNT,
                                   description="attributes microaggregated together (None: all)")
    block_size: int = Field(default=DEFAULT_BLOCK_SIZE, ge=2, le=LARGEST_BLOCK,
                            description="records per data-driven block")


class MdavVariableParams(MdavParams):
    """Variable group size microaggregation, groups of k..2k-1 (V-MDAV)."""

    gamma: float = Field(default=0.2, ge=0, le=10, description="group extension threshold")


class UnivariateParams(Params):
    """Univariate microaggregation of each variable: MicIR (chapter sec. 2) or optimal (Hansen-Mukherjee)."""

    k: int = Field(ge=2, le=LARGEST_K, description="minimum group size")


class ProjectedParams(UnivariateParams):
    """Microaggregation on a projection: MicZ (z-scores) or MicPCP (first principal component)."""

    block_size: int = Field(default=100_000, ge=2, le=LARGEST_BLOCK,
                            description="records per block; blocks hold whole groups")


class RankSwapParams(Params):
    """Rank swapping (statistical_databases_survey.txt, Data swapping and rank swapping)."""

    p: float = Field(gt=0, le=100, description="largest rank displacement, percent of the swap scope's size")
    partner: Literal["uniform", "nearest_free"] = Field(
        default="uniform", description="partner uniform among the free ranks in range (the chapter's Table 1) or "
        "the mu-Argus walk to the nearest free rank from a uniform target")


class NoiseParams(Params):
    """Additive noise N(0, p s) per variable; correlated: N(0, p^2 Sigma); linear_transform: Kim's method."""

    p: float = Field(gt=0, le=100, description="noise sd as a fraction of each variable's sd")
    correlated: bool = Field(default=False, description="noise N(0, p^2 Sigma), Sigma the covariance matrix")
    linear_transform: bool = Field(default=False, description="Kim's linear transformation restoring means and "
                                   "covariances")


class ResampleParams(Params):
    """Resampling with t samples (chapter sec. 2)."""

    t: int = Field(ge=1, le=10_000, description="number of samples averaged")


class NoParams(Params):
    """A method without parameters (Distr; rescale)."""


class JpegParams(Params):
    """JPEG lossy compression of the file as a greyscale image (chapter sec. 2)."""

    q: int = Field(ge=1, le=100, description="JPEG quality, percent")


class SyntheticPostMaskParams(Params):
    """Post-masking optimization from a random start, q = 1 (post_masking_optimization.txt sec. 5)."""

    p: float = Field(gt=0, le=100, description="target IL1 as a multiple of the starting IL1 (expr. (8))")
    target_e: float = Field(ge=0, le=1e6, description="stop once the moment error E (expr. (7)) is below this")
    max_iter: int = Field(default=1_000_000, ge=0, le=10**12, description="most perturbations tried per block")
    perturbation_sd: float = Field(default=0.1, gt=0, le=10, description="sd of one perturbation, in original sds")
    order: int = Field(default=2, ge=1, le=10, description="moments restored up to this order m (sec. 5)")
    compensate: bool = Field(default=True, description="a try that lowers E but puts IL1 above its band may move "
                             "a second value of M toward its nearest original (docs/postmask.md); false: the "
                             "paper's single moves")
    block_size: int = Field(default=DEFAULT_BLOCK_SIZE, ge=2, le=LARGEST_BLOCK,
                            description="records per data-driven block")


class PostMaskParams(SyntheticPostMaskParams):
    """Post-masking optimization, Algorithm 1 (post_masking_optimization.txt sec. 3)."""

    q: float = Field(gt=0, le=1, description="share of records perturbed: those contributing most to IL1")
    correspondence: Literal["id", "nearest"] = Field(
        default="id", description="IL1 (expr. (8)'s band) against the record's own original, as sdc evaluate and "
        "a release pair records (default), or against its nearest original record, the paper's C(i) "
        "(docs/postmask.md)")


class CodingParams(Params):
    """Top or bottom coding: the last (first) p categories of an ordinal variable recoded into one
    (sdc_methods_comparison_chapter.txt sec. 2, Top-coding, Bottom-coding)."""

    p: int = Field(ge=1, le=LARGEST_COUNT, description="number of categories recoded into one")


class GlobalRecodingParams(Params):
    """Global recoding of the p lowest-frequency categories into one (chapter sec. 2, Global recoding)."""

    p: int = Field(ge=1, le=LARGEST_COUNT, description="number of lowest-frequency categories recoded into one")


class PramParams(Params):
    """PRAM with the Kooiman et al. Markov matrix (chapter sec. 2, Post-Randomization Method)."""

    theta: float = Field(gt=0, lt=1, description="the matrix parameter theta, 0 < theta < 1 (chapter's p = 100 theta)")


class LocalSuppressionParams(Params):
    """Local suppression to k-anonymity on the key variables or on sets of them (statistical_databases_survey.txt,
    Local suppression; k-anonymity; sdcMicro kAnon's ``combs``), or until no record's individual risk is above a
    threshold (mu-Argus; sdcMicro localSupp)."""

    k: int | list[int] | None = Field(default=None, ge=2, le=LARGEST_K,
                                      description="every combination of the key variables must "
                                      f"occur at least k times (2 to {LARGEST_K}); with combs or key_sets one k for "
                                      "all, or one per entry; k or threshold is required")
    threshold: float | None = Field(default=None, gt=0, lt=1, description="instead of k: values suppressed until no "
                                    "record's individual risk is above this (mu-Argus; sdcMicro localSupp)")
    weight: str | None = Field(default=None, description="with threshold: the sampling weight column the individual "
                               "risk uses (default: a release's variables.weight, else each record weighs 1)")
    missing: Literal["any", "category"] = Field(
        default="any", description="a suppressed value matches any value (sdcMicro's and mu-Argus' convention; the "
        "procedure of sdcMicro's kAnon) or is a category of its own (a greedy on the key combinations)")
    importance: list[str] | None = Field(default=None, description="the keys from the most to the least important "
                                         "(the least important lose values first; default: fewer categories first)")
    never: list[str] = Field(default_factory=list, description="keys that never lose a value")
    combs: list[int] | None = Field(default=None, description="sizes of key subsets: every subset of each size made "
                                    "k-anonymous in turn instead of all the keys at once (sdcMicro kAnon's combs)")
    key_sets: list[list[str]] | None = Field(default=None, description="sets of keys, each made k-anonymous in turn "
                                             "instead of all the keys at once")

    @field_validator("k", mode="plain")
    @classmethod
    def _k_values(cls, k: Any) -> int | list[int] | None:
        """An integer from 2 to LARGEST_K, or a non-empty list of them (a value out of that range is reported as the
        field's declared range, as pydantic reports it for a plain integer)."""
        if k is None:
            return k
        values = k if isinstance(k, list) else [k]
        if not values or not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            raise ValueError(f"must be an integer from 2 to {LARGEST_K}, or a list of them")
        if min(values) < 2:
            raise PydanticKnownError("greater_than_equal", {"ge": 2})
        if max(values) > LARGEST_K:
            raise PydanticKnownError("less_than_equal", {"le": LARGEST_K})
        return k

    @field_validator("threshold")
    @classmethod
    def _k_or_threshold(cls, threshold: float | None, info: ValidationInfo) -> float | None:
        """Not beside k."""
        if threshold is not None and info.data.get("k") is not None:
            raise ValueError("give k (k-anonymity) or threshold (individual risk), not both")
        return threshold

    @field_validator("weight")
    @classmethod
    def _weight_with_threshold(cls, weight: str | None, info: ValidationInfo) -> str | None:
        """Only with threshold."""
        if weight is not None and info.data.get("threshold") is None:
            raise ValueError("goes with threshold (the individual risk); k-anonymity counts records")
        return weight

    @field_validator("importance", "never")
    @classmethod
    def _ordered_with_any(cls, keys: list[str] | None, info: ValidationInfo) -> list[str] | None:
        """Only with missing: any."""
        if keys and info.data.get("missing") == "category":
            raise ValueError("goes with missing: any")
        return keys

    @field_validator("combs", "key_sets")
    @classmethod
    def _sets_with_k(cls, sets: list | None, info: ValidationInfo) -> list | None:
        """Non-empty entries, at most one of combs and key_sets, with k and missing: any, and one k per entry when
        k is a list."""
        if sets is None:
            return sets
        if not sets or any(not s if isinstance(s, list) else s < 1 for s in sets):
            raise ValueError("must list at least one entry, each a size of at least 1 or a set of at least one key")
        if info.data.get("k") is None or info.data.get("missing") == "category":
            raise ValueError("goes with k and missing: any")
        if info.data.get("combs") is not None:
            raise ValueError("give combs or key_sets, not both")
        k = info.data["k"]
        if isinstance(k, list) and len(k) != len(sets):
            raise ValueError(f"has {len(sets)} entries but k lists {len(k)} values: give one k, or one per entry")
        return sets

    @model_validator(mode="after")
    def _one_target(self) -> LocalSuppressionParams:
        """k or threshold given; a list of k only with combs or key_sets."""
        if self.k is None and self.threshold is None:
            raise ValueError("give k (k-anonymity) or threshold (individual risk)")
        if isinstance(self.k, list) and self.combs is None and self.key_sets is None:
            raise ValueError("a list of k goes with combs or key_sets (one k per entry)")
        return self


def category_text(value: Any) -> str:
    """The text a category is matched by in a recode map: an integer-valued float (a code column read with
    missing values) without its ".0", else ``str``."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


class Rule(Params):
    """A per-variable rule: written without the fields it leaves unset (None), so that a spec's rule reads back as
    it was written."""

    @model_serializer(mode="wrap")
    def _without_unset(self, handler) -> dict:
        """The rule's fields but those that are None."""
        return {k: v for k, v in handler(self).items() if v is not None}


class RecodeRule(Rule):
    """How one variable is recoded (statistical_databases_survey.txt, Global recoding): exactly one of a recode
    map (inline, or a file), interval breaks (with labels) or a code prefix length."""

    map: dict[str, Any] | None = Field(default=None, description="category -> recoded category, every observed "
                                       "category listed (many-to-one; keys matched by their text)")
    map_file: str | None = Field(default=None, description="the map from a file: CSV with a header and two "
                                 "columns (category, recoded), or a YAML/JSON mapping; relative to the spec")
    breaks: list[float] | None = Field(default=None, min_length=1, max_length=LARGEST_COUNT,
                                       description="increasing cut points of numeric categories into intervals")
    labels: list[str] | None = Field(default=None, description="one label per interval, len(breaks) + 1 "
                                     "(default: '< 15', '[15, 25)', '>= 65')")
    closed: Literal["left", "right"] | None = Field(default=None, description="which end of an interval holds a "
                                                    "value equal to a break (default: left, [15, 25))")
    prefix: int | None = Field(default=None, ge=1, le=LARGEST_COUNT, description="hierarchical codes cut to this "
                               "many leading characters (4711 -> 47)")

    @field_validator("map", mode="before")
    @classmethod
    def _map_by_text(cls, v: Any) -> Any:
        """A map's keys as the text categories are matched by; its targets all numbers or all text."""
        if not isinstance(v, dict):
            return v
        out = {category_text(k): t for k, t in v.items()}
        if len(out) != len(v):
            raise ValueError("the map lists one category twice (as a number and as text)")
        if len({isinstance(t, str) for t in out.values()}) > 1:
            raise ValueError("the map's recoded categories mix numbers and text: write them all one way")
        if any(t is None or isinstance(t, (dict, list)) for t in out.values()):
            raise ValueError("each recoded category must be one number or one text")
        return out

    @model_validator(mode="after")
    def _one_rule(self, info: ValidationInfo) -> "RecodeRule":
        """Exactly one kind of rule; breaks strictly increasing, with len(breaks) + 1 distinct labels; a map
        file read into ``map``."""
        given = [name for name in ("map", "map_file", "breaks", "prefix") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of map, map_file, breaks, prefix" + (f" (given: {', '.join(given)})"
                                                                                   if given else ""))
        if (self.labels is not None or self.closed is not None) and self.breaks is None:
            raise ValueError("labels and closed go with breaks")
        if self.breaks is not None:
            for i in range(1, len(self.breaks)):
                if not self.breaks[i] > self.breaks[i - 1]:
                    raise ValueError(f"breaks must increase: break {i} is not greater than break {i - 1}")
            if self.labels is not None and len(self.labels) != len(self.breaks) + 1:
                raise ValueError(f"{len(self.breaks)} breaks make {len(self.breaks) + 1} intervals, and "
                                 f"{len(self.labels)} labels are given")
            if self.labels is not None and len(set(self.labels)) != len(self.labels):
                raise ValueError("labels must differ from each other")
        if self.map_file is not None:
            self.map = self._map_by_text(map_file_entries(self.map_file, base_dir_of(info)))
            self.map_file = None
        return self


class RuledParams(Params):
    """Parameters of a method with one rule per variable (``rules``: variable -> rule), given inline or as the name
    of a YAML/JSON file of that mapping (relative to the spec)."""

    @field_validator("rules", mode="before", check_fields=False)
    @classmethod
    def _rules_file(cls, v: Any, info: ValidationInfo) -> Any:
        """Rules given as a file name read from that file."""
        return structured_file(v, base_dir_of(info), "rules") if isinstance(v, str) else v


class RecodeParams(RuledParams):
    """Recoding of categorical variables by the user's rules, one per variable (statistical_databases_survey.txt,
    Global recoding)."""

    rules: dict[str, RecodeRule] = Field(description="variable -> its rule (map, map_file, breaks with labels and "
                                         "closed, or prefix); or a YAML/JSON file of that mapping")


class ThresholdRule(Rule):
    """Top and bottom coding of one continuous variable at a value (statistical_databases_survey.txt, Top and
    bottom coding)."""

    top: float | None = Field(default=None, description="values above this are top-coded")
    top_value: float | None = Field(default=None, description="what a top-coded value becomes (default: top)")
    bottom: float | None = Field(default=None, description="values below this are bottom-coded")
    bottom_value: float | None = Field(default=None, description="what a bottom-coded value becomes (default: "
                                       "bottom)")

    @model_validator(mode="after")
    def _thresholds(self) -> "ThresholdRule":
        """A threshold at least; a replacement only with its threshold; bottom below top."""
        if self.top is None and self.bottom is None:
            raise ValueError("give top, bottom or both")
        for end in ("top", "bottom"):
            if getattr(self, f"{end}_value") is not None and getattr(self, end) is None:
                raise ValueError(f"{end}_value goes with {end}")
        if self.top is not None and self.bottom is not None and not self.bottom < self.top:
            raise ValueError("bottom must be below top")
        return self


class TopBottomParams(RuledParams):
    """Top and bottom coding of continuous variables at values, one rule per variable."""

    rules: dict[str, ThresholdRule] = Field(description="variable -> its thresholds (top, top_value, bottom, "
                                            "bottom_value); or a YAML/JSON file of that mapping")


def base_dir_of(info: ValidationInfo) -> Path:
    """The directory relative file names in parameters resolve against: the spec's (validation context
    ``base_dir``), else the working directory."""
    return Path((info.context or {}).get("base_dir", "."))


def _named_file(name: str, base_dir: Path, what: str) -> Path:
    """The file a parameter names, resolved; ValueError naming the parameter when it is not a file."""
    path = Path(name) if Path(name).is_absolute() else base_dir / name
    if not path.is_file():
        raise ValueError(f"{what} file not found: {path}")
    return path


def structured_file(name: str, base_dir: Path, what: str) -> Any:
    """The YAML or JSON document of the file a parameter names."""
    path = _named_file(name, base_dir, what)
    try:
        return yaml.safe_load(path.read_text())
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ValueError(f"{what} file {path} is not YAML or JSON ({type(exc).__name__})") from None


def map_file_entries(name: str, base_dir: Path) -> dict:
    """The recode map of a file: a CSV file's rows (a header, then category and recoded category; recoded
    categories read as integers, else numbers, else text, all alike), or a YAML/JSON mapping."""
    path = _named_file(name, base_dir, "map_file")
    if path.suffix.lower() != ".csv":
        entries = structured_file(name, base_dir, "map_file")
        if not isinstance(entries, dict):
            raise ValueError(f"map_file {path} must hold a mapping of category to recoded category")
        return entries
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))[1:]
    bad = next((i for i, row in enumerate(rows) if len(row) != 2), None)
    if bad is not None:
        raise ValueError(f"map_file {path}: row {bad + 1} after the header does not hold two columns")
    targets = [row[1] for row in rows]
    for cast in (int, float):
        try:
            targets = [cast(t) for t in targets]
            break
        except ValueError:
            continue
    return {row[0]: t for row, t in zip(rows, targets)}


class RecordSwapParams(Params):
    """Targeted record swapping (sdcMicro recordSwap; docs/recordswap.md): households whose risk variables are in a
    cell of fewer than k persons at some geographic level swap their geography with a similar household of another
    area of that level, then random households up to the swap rate at the lowest level."""

    hierarchy: list[str] = Field(min_length=1, max_length=100, description="geographic columns, coarse to fine "
                                 "(e.g. region, district, area), each level nested in the one above")
    risk_variables: list[str] = Field(min_length=1, max_length=100, description="person variables whose "
                                      "combinations with the geography define the risk (e.g. age, sex, nationality)")
    k: int = Field(default=3, ge=1, le=LARGEST_K, description="a household is risky at a level when a member's "
                   "combination of the risk variables and the geography down to that level counts fewer than k "
                   "persons")
    swap_rate: float = Field(default=0.05, ge=0, le=1, description="share of the households swapped at the lowest "
                             "level (both households of a pair counted), risky households included, 0 to 1")
    similar: list[list[str]] = Field(default_factory=lambda: [[]], min_length=1, max_length=100,
                                     description="similarity profiles, tried in order: a donor household matches "
                                     "the swapped one on every column of the profile (e.g. [[hhsize, tenure], "
                                     "[hhsize]]; [] matches any household)")
    carry_along: list[str] = Field(default_factory=list, description="household-level columns swapped with the "
                                   "geography")
    household_id: str | None = Field(default=None, description="household id column (default: the spec's "
                                      "households.id)")

    @model_validator(mode="after")
    def _distinct_columns(self) -> RecordSwapParams:
        """Geography, carry-along and household id are distinct columns."""
        named = [*self.hierarchy, *self.carry_along, *([self.household_id] if self.household_id else [])]
        twice = sorted({c for c in named if named.count(c) > 1})
        if twice:
            raise ValueError(f"column {twice[0]!r} is named twice among hierarchy, carry_along and household_id")
        return self
