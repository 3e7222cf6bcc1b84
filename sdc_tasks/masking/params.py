"""The parameter models of the masking methods: names, types, defaults, bounds and descriptions (pydantic)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


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
    """Local suppression to k-anonymity on the key variables (statistical_databases_survey.txt, Local
    suppression; k-anonymity)."""

    k: int = Field(ge=2, le=LARGEST_K, description="every combination of the key variables must occur at least k times")
