"""The metric catalogue: every key a metrics.json can hold, once, with its family, group, unit and meaning.

A :class:`Measure` row names one key (IL1) or one numbered set of keys (DLD_<i>, matched by a regular
expression), the metric family that computes it, the report group it is shown in, what it measures, its unit
(read from the kernel that computes it), whether lower or higher is better, its range and its source. A
:class:`MetricFamily` row names one family of ``sdc evaluate --families`` and of a release spec's ``metrics``.
Spec validation (the gate), the reports, the Prefect artifacts, the comparison, the CLI help and the key table
of docs/metrics.md all read these rows; definitions and formulas are in docs/metrics.md.

Pure Python: importing this module imports no numeric library.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from functools import cache, lru_cache

GROUP_IL = "Information loss"
GROUP_DR = "Disclosure risk"
GROUP_SCORE = "Score"
GROUP_OTHER = "Other"
GROUP_ORDER = (GROUP_IL, GROUP_DR, GROUP_SCORE, GROUP_OTHER)

# units (the true unit of the value as computed, docs/metrics.md "Units")
PERCENT = "percent"
FRACTION = "fraction"
DATA = "data units"
SQUARED = "squared data units"
FOURTH = "fourth-power data units"
UNITLESS = "unitless"
RECORDS = "records"
RECORDS_PER_CELL = "records per cell"
CELLS = "cells"
NATS = "nats"
COUNT = "count"
FLAG = "flag"
NAMES = "names"
TEXT = "text"
INTEGER = "integer"
OBJECT = "object"
SECONDS = "seconds"

# directions
LOWER = "lower is better"
HIGHER = "higher is better"
NEUTRAL = "none"

# families of keys that no metric family computes
SCORE = "score"
DIAGNOSTIC = "diagnostic"
BOOKKEEPING = "bookkeeping"
COMPARISON = "comparison"
POSTMASK = "postmask"  # what a post-masking step reached (sdc_tasks.masking.postmask_outcome)
POSTMASK_SOURCE = "post_masking_optimization.txt sec. 3 (docs/postmask.md)"
SWAP = "record_swap"  # what a record swapping step reached (sdc_tasks.masking.swap_outcome)
SWAP_SOURCE = "sdcMicro recordSwap (docs/recordswap.md)"
OUTCOME_METHODS = {POSTMASK: ("postmask", "synthetic_postmask"), SWAP: ("record_swap",)}
"""The families of keys a masking step reports, and the methods whose steps report them."""

CONTINUOUS = "continuous"
CATEGORICAL = "categorical"

OPEN = math.inf
BEFORE = "_before"
CHANGE = "_change_percent"
ORIGINAL_FIGURE = "original"  # the family of the rows of a risk figure's original-file value and its change
ORIGINAL_RISK_FAMILIES = ("cat_risk", "suda", "ldiversity")
"""The families whose disclosure-risk figures are also computed on the original file (``<key>_before``) with
their change (``<key>_change_percent``; docs/metrics.md "The original file's risk")."""
CHAPTER = "sdc_methods_comparison_chapter.txt"
SUDA = "Elliot et al. (SUDA); Manning et al. 2008 (SUDA2); sdcMicro suda2"
LDIV = "Machanavajjhala et al. 2007 (l-diversity); sdcMicro ldiversity"
HOUSEHOLD = "sdcMicro measure_risk with hid (hierarchical risk)"
SURVEY_IL = "statistical_databases_survey.txt, Information loss measures for numerical data"
PIL_SOURCE = "pil_measures.txt"
DOCS = "docs/metrics.md"
KEY_TABLE_BEGIN = "<!-- key table: begin -->"
KEY_TABLE_END = "<!-- key table: end -->"


@dataclass(frozen=True)
class MetricFamily:
    """One metric family: its name, the report group of its measures, the kind of variables it evaluates, whether
    an evaluation computes it by default, and what it holds."""

    name: str
    group: str
    kind: str
    default: bool
    description: str


@dataclass(frozen=True)
class Measure:
    """One metrics.json key, or one numbered set of keys (``key`` DLD_<i>, ``pattern`` DLD_(\\d+)).

    ``pattern``: a regular expression the key matches in full; its first group, when there is one, is what
    ``{i}`` stands for in ``description``. ``direction``: LOWER, HIGHER or NEUTRAL (not a quality: a count,
    a fit parameter, a name). ``range``: the (lowest, highest) value the key can take (``math.inf`` when
    unbounded), None for keys that hold no number."""

    key: str
    pattern: str
    family: str
    group: str
    description: str
    unit: str
    direction: str
    range: tuple[float, float] | None
    source: str

    @property
    def derived(self) -> bool:
        """Whether the row describes a figure derived from another key (its original-file value or change)."""
        return self.family == ORIGINAL_FIGURE


FAMILY_ROWS: tuple[MetricFamily, ...] = (
    MetricFamily("il", GROUP_IL, CONTINUOUS, True,
                 "IL1..IL5, IL, IL1s, the survey's matrix measures (MSE, MAE, MV of X..F), brMAE, brMSE"),
    MetricFamily("pil", GROUP_IL, CONTINUOUS, True, "probabilistic information loss: PIL_Q, PIL_m1..PIL_r, PIL"),
    MetricFamily("dld", GROUP_DR, CONTINUOUS, True, "distance-based record linkage: DLD_i, DLD2_i, DLD"),
    MetricFamily("pld", GROUP_DR, CONTINUOUS, True, "probabilistic record linkage: PLD"),
    MetricFamily("id", GROUP_DR, CONTINUOUS, True, "interval disclosure: ID_1..ID_10, ID, SDID"),
    MetricFamily("dld_published", GROUP_DR, CONTINUOUS, False,
                 "distance linkage as the chapter's Table 1 was computed: DLDpub_i, DLDpub"),
    MetricFamily("pld_published", GROUP_DR, CONTINUOUS, False,
                 "probabilistic linkage as the chapter's Table 1 was computed: PLDpub_i, PLDpub"),
    MetricFamily("cat_il", GROUP_IL, CATEGORICAL, False,
                 "categorical information loss: Dist, CTBIL, ACTBIL, EBIL, PRIL"),
    MetricFamily("cat_risk", GROUP_DR, CATEGORICAL, False,
                 "categorical disclosure risk: k-anonymity, sample uniques, individual risk, PLD_cat"),
    MetricFamily("ldiversity", GROUP_DR, CATEGORICAL, False,
                 "l-diversity (distinct, entropy) and t-closeness of sensitive variables within the key "
                 "combinations"),
    MetricFamily("suda", GROUP_DR, CATEGORICAL, False,
                 "special uniques (SUDA2): records with a minimal sample unique, SUDA and DIS scores, key "
                 "contributions"),
)

FAMILIES = tuple(f.name for f in FAMILY_ROWS)
DEFAULT_FAMILIES = tuple(f.name for f in FAMILY_ROWS if f.default)
CATEGORICAL_FAMILIES = tuple(f.name for f in FAMILY_ROWS if f.kind == CATEGORICAL)
DEFAULT_CATEGORICAL_FAMILIES = ("cat_il", "cat_risk")
"""What a release spec with categorical variables computes unless its metrics say otherwise (suda and
ldiversity are asked for)."""
IL_FAMILIES = tuple(f.name for f in FAMILY_ROWS if f.group == GROUP_IL)
RISK_FAMILIES = tuple(f.name for f in FAMILY_ROWS if f.group == GROUP_DR)


def _row(key: str, family: str, description: str, unit: str, direction: str = LOWER,
         range: tuple[float, float] | None = (0.0, OPEN), source: str = DOCS, group: str | None = None,
         pattern: str | None = None) -> Measure:
    """A Measure whose group defaults to its family's and whose pattern defaults to the literal key."""
    if group is None:
        group = next(f.group for f in FAMILY_ROWS if f.name == family)
    return Measure(key, pattern or re.escape(key), family, group, description, unit, direction, range, source)


def _numbered(stem: str, family: str, description: str, unit: str, direction: str = LOWER,
              range: tuple[float, float] | None = (0.0, OPEN), source: str = DOCS,
              group: str | None = None) -> Measure:
    """A Measure for the keys ``stem_1``, ``stem_2``, ... (``{i}`` in the description is the number)."""
    return _row(f"{stem}_<i>", family, description, unit, direction, range, source, group, rf"{re.escape(stem)}_(\d+)")


def _diagnostic(key: str, family: str, description: str, unit: str, direction: str = NEUTRAL,
                range: tuple[float, float] | None = (0.0, OPEN), source: str = DOCS) -> Measure:
    """A Measure of the Other group: a count or a fit parameter that says how another measure was computed."""
    return _row(key, family, description, unit, direction, range, source, GROUP_OTHER)


# The survey's matrix family (statistical_databases_survey.txt, "Information loss measures for numerical data"):
# (matrix, what its cells are, the unit of a cell, the largest absolute difference of two cells or OPEN)
_MATRICES = (
    ("X", "cells of the data matrix", DATA, OPEN),
    ("Xbar", "attribute means", DATA, OPEN),
    ("V", "covariances (i <= j)", SQUARED, OPEN),
    ("S", "variances", SQUARED, OPEN),
    ("R", "correlations (i < j)", UNITLESS, 2.0),
    ("RF", "principal-component loadings (weighted by component variance)", UNITLESS, 2.0),
    ("C", "communalities of the attributes with PC1", UNITLESS, 1.0),
    ("F", "factor score coefficients (weighted by component variance)", UNITLESS, OPEN),
)
_SQUARE = {DATA: SQUARED, SQUARED: FOURTH, UNITLESS: UNITLESS}


def _matrix_rows() -> tuple[Measure, ...]:
    """MSE_M, MAE_M, MV_M for each matrix M of the survey's table: the mean square error is in the square of the
    cells' unit, the mean absolute error in their unit, the mean variation |a - a'| / |a| a fraction."""
    rows = []
    for matrix, cells, unit, spread in _MATRICES:
        rows += [
            _row(f"MSE_{matrix}", "il", f"Mean square error of the {cells}", _SQUARE[unit],
                 range=(0.0, spread * spread), source=SURVEY_IL),
            _row(f"MAE_{matrix}", "il", f"Mean absolute error of the {cells}", unit, range=(0.0, spread),
                 source=SURVEY_IL),
            _row(f"MV_{matrix}", "il", f"Mean variation |a - a'| / |a| of the {cells}", FRACTION, source=SURVEY_IL),
        ]
    return tuple(rows)


# In report order: a key is shown in its group, in the order of these rows. The first row whose pattern matches a
# key describes it, so the specific rows come before the general ones at the end.
MEASURES: tuple[Measure, ...] = (
    _row("IL1", "il", "Mean relative error of the cells, |x - x'| / |x| (cells with x = 0 left out)", PERCENT,
         source=f"{CHAPTER} sec. 4"),
    _row("IL2", "il", "Mean relative error of the attribute means", PERCENT, source=f"{CHAPTER} sec. 4"),
    _row("IL3", "il", "Mean relative error of the covariances (i <= j)", PERCENT, source=f"{CHAPTER} sec. 4"),
    _row("IL4", "il", "Mean relative error of the variances", PERCENT, source=f"{CHAPTER} sec. 4"),
    _row("IL5", "il", "Mean absolute error of the correlations (i < j)", PERCENT, range=(0.0, 200.0),
         source=f"{CHAPTER} sec. 4"),
    _row("IL", "il", "Mean of IL1..IL5", PERCENT, source=f"{CHAPTER} sec. 4"),
    _row("IL1s", "il", "Mean absolute cell error scaled by sqrt(2) x the original sd", PERCENT,
         source=f"{PIL_SOURCE} sec. 2"),
    *_matrix_rows(),
    *(_row(f"PIL_{name}", "pil", f"Probabilistic information loss of the {what}", FRACTION, range=(0.0, 1.0),
           source=f"{PIL_SOURCE} sec. {section}")
      for name, what, section in (("Q", "quantiles 5 %..95 %", "4.3, 5"), ("m1", "means", "4.3"),
                                  ("m2", "variances", "4.3"), ("m11", "covariances", "4.3"),
                                  ("r", "correlations", "4.3"))),
    _row("PIL", "pil", "100 x mean of the five PIL measures", PERCENT, range=(0.0, 100.0),
         source=f"{PIL_SOURCE} sec. 5"),
    _row("brMAE", "il", "Bounded rank-based mean absolute error (ties ranked by record id)", FRACTION,
         range=(0.0, 1.0), source="bounded_rank_metrics.txt eq. 8"),
    _row("brMSE", "il", "Bounded rank-based mean square error (ties ranked by record id)", FRACTION,
         range=(0.0, 1.0), source="bounded_rank_metrics.txt eq. 9"),
    _numbered("DLD", "dld", "Distance linkage on key variables 1..{i}: masked records linked to their own original",
              PERCENT, range=(0.0, 100.0), source=f"{CHAPTER} sec. 3-4"),
    _numbered("DLD2", "dld", "Distance linkage on key variables 1..{i}: masked records whose own original is the "
              "2nd nearest", PERCENT, range=(0.0, 100.0), source=f"{CHAPTER} sec. 3"),
    _row("DLD", "dld", "Mean of DLD_1..DLD_m over the key variables", PERCENT, range=(0.0, 100.0),
         source=f"{CHAPTER} sec. 4"),
    _numbered("DLDpub", "dld_published", "Distance linkage as the chapter's Table 1 was computed, key variables "
              "1..{i}: records linked", PERCENT, range=(0.0, 100.0), source="docs/reproduction.md"),
    _row("DLDpub", "dld_published", "Mean of DLDpub_1..DLDpub_m", PERCENT, range=(0.0, 100.0),
         source="docs/reproduction.md"),
    _row("PLD", "pld", "Probabilistic record linkage on the key variables: masked records correctly paired", PERCENT,
         range=(0.0, 100.0), source=f"{CHAPTER} sec. 3 (Jaro 1989)"),
    _numbered("PLDpub", "pld_published", "Probabilistic linkage as the chapter's Table 1 was computed, key "
              "variables 1..{i}: records linked", PERCENT, range=(0.0, 100.0), source="docs/reproduction.md"),
    _row("PLDpub", "pld_published", "Mean of PLDpub_1..PLDpub_m", PERCENT, range=(0.0, 100.0),
         source="docs/reproduction.md"),
    _numbered("ID", "id", "Interval disclosure: original values inside the interval of {i} % of the records on either "
              "side of their masked value in the sorted masked column", PERCENT, range=(0.0, 100.0), source=f"{CHAPTER} sec. 3 (calibrated)"),
    _row("ID", "id", "Mean of ID_1..ID_10", PERCENT, range=(0.0, 100.0), source=f"{CHAPTER} sec. 4"),
    _row("SDID", "id", "Original values within +-0.05 original sd of their masked value", PERCENT,
         range=(0.0, 100.0), source="bounded_rank_metrics.txt ref. [10]"),
    _row("Dist", "cat_il", "Categorical: sum of original-to-masked category distances over records and variables "
         "(nominal 0 or 1, ordinal |rank difference| / (K - 1))", CELLS, source=f"{CHAPTER} sec. 5"),
    _row("Dist_mean", "cat_il", "Categorical: Dist per cell (records x variables)", FRACTION, range=(0.0, 1.0),
         source=f"{CHAPTER} sec. 5"),
    _row("CTBIL", "cat_il", "Categorical: absolute count differences over every cell of the one- and two-variable "
         "contingency tables", RECORDS, source=f"{CHAPTER} sec. 5"),
    _row("ACTBIL", "cat_il", "Categorical: CTBIL per cell of those tables", RECORDS_PER_CELL,
         source=f"{CHAPTER} sec. 5"),
    _row("EBIL_MF", "cat_il", "Categorical: sum of H(V | V') over records and variables, P(V) from the evaluated "
         "file", NATS, source=f"{CHAPTER} sec. 5"),
    _row("PRIL_MF", "cat_il", "Categorical: sum of -ln P(V = original | V' = masked), P(V) from the evaluated file",
         NATS, source=f"{CHAPTER} sec. 5"),
    _row("EBIL_RF", "cat_il", "Categorical: EBIL with P(V) from the reference file", NATS,
         source=f"{CHAPTER} sec. 5"),
    _row("PRIL_RF", "cat_il", "Categorical: PRIL with P(V) from the reference file", NATS,
         source=f"{CHAPTER} sec. 5"),
    _row("kanon_min_group", "cat_risk", "Categorical keys: smallest group of compatible records (the k of "
         "k-anonymity)", RECORDS, HIGHER, range=(1.0, OPEN), source="statistical_databases_survey.txt, k-anonymity"),
    _numbered("kanon_violations", "cat_risk", "Categorical keys: records in groups smaller than {i}", RECORDS,
              source="statistical_databases_survey.txt, k-anonymity"),
    _row("sample_uniques", "cat_risk", "Categorical keys: records unique on the keys", RECORDS,
         source="statistical_databases_survey.txt, sample uniques"),
    _row("sample_uniques_percent", "cat_risk", "Categorical keys: records unique on the keys", PERCENT,
         range=(0.0, 100.0), source="statistical_databases_survey.txt, sample uniques"),
    _row("indiv_risk_max", "cat_risk", "Largest individual re-identification risk (Benedetti-Franconi)", FRACTION,
         range=(0.0, 1.0), source="sdcMicro indivRisk (Benedetti and Franconi)"),
    _row("indiv_risk_mean", "cat_risk", "Mean individual re-identification risk", FRACTION, range=(0.0, 1.0),
         source="sdcMicro indivRisk (Benedetti and Franconi)"),
    _row("expected_reidentifications", "cat_risk", "Sum of the individual risks", RECORDS,
         source="sdcMicro indivRisk (Benedetti and Franconi)"),
    _row("records_risk_above_0.1", "cat_risk", "Records with an individual risk above 0.1", PERCENT,
         range=(0.0, 100.0), source="sdcMicro indivRisk (Benedetti and Franconi)"),
    _row("PLD_cat", "cat_risk", "Probabilistic linkage on the categorical keys: masked records correctly paired",
         PERCENT, range=(0.0, 100.0), source=f"{CHAPTER} sec. 3, 5 (Jaro 1989)"),
    _row("global_risk_percent", "cat_risk", "Expected re-identifications in percent of the records (sdcMicro's "
         "global risk)", PERCENT, range=(0.0, 100.0), source="sdcMicro measure_risk (Benedetti and Franconi)"),
    _row("household_expected_reidentifications", "cat_risk", "Sum over persons of their household's risk, 1 - "
         "prod(1 - r_i) over its members (sdcMicro's hier_risk_ER)", RECORDS, source=HOUSEHOLD),
    _row("household_risk_percent", "cat_risk", "household_expected_reidentifications in percent of the persons "
         "(sdcMicro's hier_risk_pct)", PERCENT, range=(0.0, 100.0), source=HOUSEHOLD),
    _row("household_risk_max", "cat_risk", "Largest household risk", FRACTION, range=(0.0, 1.0), source=HOUSEHOLD),
    _row("households_risk_above_0.1", "cat_risk", "Households with a risk above 0.1", PERCENT, range=(0.0, 100.0),
         source=HOUSEHOLD),
    _row(f"<key>{BEFORE}", ORIGINAL_FIGURE, "{i} of the original file (the risk before masking), computed as for "
         "the release", "unit of <key>", NEUTRAL, None, group=GROUP_DR, pattern=rf"(.+){BEFORE}"),
    _row(f"<key>{CHANGE}", ORIGINAL_FIGURE, "Change of {i} from the original file to the release, in percent of "
         "the original's value (0 when both are 0)", PERCENT, NEUTRAL, (-100.0, OPEN), group=GROUP_DR,
         pattern=rf"(.+){CHANGE}"),
    _row("ldiversity_distinct_min_<var>", "ldiversity", "Smallest number of distinct values of a sensitive "
         "variable in a key combination (distinct l-diversity)", COUNT, HIGHER, source=LDIV,
         pattern=r"ldiversity_distinct_min_(.+)"),
    _row("ldiversity_entropy_min_<var>", "ldiversity", "Smallest exp(entropy) of a sensitive variable in a key "
         "combination (entropy l-diversity)", UNITLESS, HIGHER, range=(1.0, OPEN), source=LDIV,
         pattern=r"ldiversity_entropy_min_(.+)"),
    _row("ldiversity_records_below_2_<var>", "ldiversity", "Records whose key combination holds one value of a "
         "sensitive variable (disclosed by the keys)", RECORDS, source=LDIV,
         pattern=r"ldiversity_records_below_2_(.+)"),
    _row("tcloseness_<var>", "ldiversity", "Largest Earth Mover's Distance between a key combination's distribution "
         "of a sensitive variable and the file's (t-closeness)", FRACTION, range=(0.0, 1.0),
         source="Li, Li and Venkatasubramanian 2007 (t-closeness)", pattern=r"tcloseness_(.+)"),
    _row("suda_special_uniques", "suda", "Categorical keys: records with a minimal sample unique (SUDA2)", RECORDS,
         source=SUDA),
    _row("suda_score_max", "suda", "Largest SUDA score: sum over a record's minimal sample uniques of (M - size)!",
         UNITLESS, source=SUDA),
    _row("suda_score_mean", "suda", "Mean SUDA score over the records", UNITLESS, source=SUDA),
    _row("dis_suda_max", "suda", "Largest DIS score (the probability that a unique match is correct, by SUDA "
         "score)", FRACTION, range=(0.0, 1.0), source=SUDA),
    _row("dis_suda_mean", "suda", "Mean DIS score over the records", FRACTION, range=(0.0, 1.0), source=SUDA),
    _row("suda_contribution_<key>", "suda", "A key's share of the file's SUDA scores (of the MSUs holding it)",
         PERCENT, range=(0.0, 100.0), source=SUDA, pattern=r"suda_contribution_(.+)"),
    _row("risk", COMPARISON, "Risk axis of a method comparison: 0.25 DLD + 0.25 PLD + 0.5 ID (PLD_cat for a "
         "categorical configuration)", PERCENT, range=(0.0, 100.0), source=f"{CHAPTER} sec. 4", group=GROUP_DR),
    _row("score", SCORE, "0.5 IL + 0.125 DLD + 0.125 PLD + 0.25 ID", PERCENT, source=f"{CHAPTER} sec. 4",
         group=GROUP_SCORE),
    _row("score_simple", SCORE, "0.5 IL + 0.25 DLD + 0.25 ID", PERCENT, source="post_masking_optimization.txt eq. (2)",
         group=GROUP_SCORE),
    _row("score_pil", SCORE, "score with PIL in place of IL", PERCENT, range=(0.0, 100.0),
         source=f"{PIL_SOURCE} sec. 3", group=GROUP_SCORE),
    _diagnostic("IL1_zero_cells", "il", "Cells with x = 0, left out of IL1 and MV_X", CELLS),
    _diagnostic("IL_missing_measures", "il", "How many of IL1..IL5 are left out (no defined term, or not finite)",
                COUNT, range=(0.0, 5.0)),
    _diagnostic("matrix_missing_measures", "il", "How many of the 24 matrix measures and IL1s are left out (no "
                "defined term, or not finite)", COUNT, range=(0.0, 25.0)),
    _diagnostic("PIL_small_sample", "pil", "1 when the masked file has fewer than 100 records (the normal "
                "approximation behind PIL is weak)", FLAG, range=(1.0, 1.0), source=f"{PIL_SOURCE} sec. 4.1"),
    _diagnostic("PLD_candidate_recall", "pld", "Masked records whose own original is among their linkage candidates "
                "(PLD cannot exceed it)", PERCENT, LOWER, range=(0.0, 100.0)),
    _diagnostic("PLD_match_prior", "pld", "Share of true matches among the candidate pairs, fitted by EM", FRACTION,
                range=(0.0, 1.0)),
    _diagnostic("PLD_em_iterations", "pld", "EM iterations of the Fellegi-Sunter fit", COUNT),
    _diagnostic("PRIL_RF_undefined_terms", "cat_il", "Records left out of EBIL_RF and PRIL_RF: their category has "
                "no mass in the reference file", RECORDS, source="docs/categorical.md"),
    _diagnostic("PLD_cat_candidate_recall", "cat_risk", "Masked records whose own original key combination is "
                "among their linkage candidates (PLD_cat cannot exceed it)", PERCENT, LOWER, range=(0.0, 100.0),
                source="docs/categorical.md"),
    _diagnostic("PLD_cat_match_prior", "cat_risk", "Share of true matches among the candidate pairs of PLD_cat, "
                "fitted by EM", FRACTION, range=(0.0, 1.0), source="docs/categorical.md"),
    _diagnostic("PLD_cat_em_iterations", "cat_risk", "EM iterations of the Fellegi-Sunter fit of PLD_cat", COUNT,
                source="docs/categorical.md"),
    _row("<key>_undefined_terms", DIAGNOSTIC, "Terms of {i} left out as undefined (zero denominator or not finite)",
         COUNT, NEUTRAL, group=GROUP_OTHER, pattern=r"(\w+)_undefined_terms"),
    _row("<key>_not_finite", DIAGNOSTIC, "1 when {i} is left out: its value is not finite (beyond the float range)",
         FLAG, NEUTRAL, range=(1.0, 1.0), group=GROUP_OTHER, pattern=r"(\w+)_not_finite"),
    _row("postmask_E_before", POSTMASK, "Post-masking: moment error E (expr. (7), standardized variables) of the "
         "step's input against the original records (over blocks: record-weighted mean)", UNITLESS, NEUTRAL,
         source=POSTMASK_SOURCE, group=GROUP_OTHER),
    _row("postmask_E_after", POSTMASK, "Post-masking: moment error E of the step's output (over blocks: "
         "record-weighted mean, an upper bound of the file's E)", UNITLESS, source=POSTMASK_SOURCE, group=GROUP_OTHER),
    _row("postmask_target_E", POSTMASK, "Post-masking: TargetE, the E the step stops below", UNITLESS, NEUTRAL,
         source=POSTMASK_SOURCE, group=GROUP_OTHER),
    _row("postmask_IL1_ratio", POSTMASK, "Post-masking: IL1 (expr. (6)) after / before the step; within 1 % of p "
         "when the band of expr. (8) holds", UNITLESS, NEUTRAL, source=POSTMASK_SOURCE, group=GROUP_OTHER),
    _row("postmask_iterations", POSTMASK, "Post-masking: perturbations tried, all blocks", COUNT, NEUTRAL,
         source=POSTMASK_SOURCE, group=GROUP_OTHER),
    _row("postmask_target_met", POSTMASK, "Post-masking: 1 when every block reached E < TargetE, 0 when max_iter "
         "stopped a block first", FLAG, HIGHER, range=(0.0, 1.0), source=POSTMASK_SOURCE, group=GROUP_OTHER),
    _row("postmask_blocks_short", POSTMASK, "Post-masking: blocks whose E stayed at or above TargetE (every "
         "post-masking step of the release); gate it at 0 to refuse such a release", COUNT,
         source=POSTMASK_SOURCE, group=GROUP_OTHER),
    _row("trs_swap_rate", SWAP, "Record swapping: share of the households swapped, both households of each pair, "
         "all levels", FRACTION, NEUTRAL, range=(0.0, 1.0), source=SWAP_SOURCE, group=GROUP_OTHER),
    _row("trs_swap_rate_target", SWAP, "Record swapping: the swap rate asked for at the lowest level", FRACTION,
         NEUTRAL, range=(0.0, 1.0), source=SWAP_SOURCE, group=GROUP_OTHER),
    _row("trs_level_swap_rate_<level>", SWAP, "Record swapping: share of the households swapped in pairs formed at "
         "geographic level {i} (its risky households; at the lowest level also those drawn up to the swap rate)",
         FRACTION, NEUTRAL, range=(0.0, 1.0), source=SWAP_SOURCE, group=GROUP_OTHER,
         pattern=r"trs_level_swap_rate_(.+)"),
    _row("trs_risky_households_before", SWAP, "Record swapping: households with a member in a cell of fewer than "
         "k persons (risk variables by geography) at some level, before swapping", COUNT, NEUTRAL,
         source=SWAP_SOURCE, group=GROUP_OTHER),
    _row("trs_risky_households_after", SWAP, "Record swapping: the same count on the swapped file", COUNT,
         source=SWAP_SOURCE, group=GROUP_OTHER),
    _row("trs_unmatched_households", SWAP, "Record swapping: risky households that found no donor household and "
         "kept their geography (counted, never listed); gate it at 0 to refuse such a release", COUNT,
         source=SWAP_SOURCE, group=GROUP_OTHER),
    _row("trs_persons_swapped", SWAP, "Record swapping: persons whose geography was exchanged", RECORDS, NEUTRAL,
         source=SWAP_SOURCE, group=GROUP_OTHER),
    _row("n", BOOKKEEPING, "Records of the original file", RECORDS, NEUTRAL, group=GROUP_OTHER),
    _row("n_masked", BOOKKEEPING, "Records of the masked file", RECORDS, NEUTRAL, group=GROUP_OTHER),
    _row("p", BOOKKEEPING, "Continuous variables evaluated", COUNT, NEUTRAL, group=GROUP_OTHER),
    _row("key_vars", BOOKKEEPING, "Key variables of the linkage measures, in order", NAMES, NEUTRAL, None,
         group=GROUP_OTHER),
    _row("pairing", BOOKKEEPING, "How the records were paired: id, nearest or paper", TEXT, NEUTRAL, None,
         group=GROUP_OTHER),
    _row("categorical", BOOKKEEPING, "Categorical variables evaluated", NAMES, NEUTRAL, None, group=GROUP_OTHER),
    _row("categorical_keys", BOOKKEEPING, "Key variables of the categorical risk measures, in order", NAMES, NEUTRAL,
         None, group=GROUP_OTHER),
    _row("seed", BOOKKEEPING, "Seed of the release", INTEGER, NEUTRAL, None, group=GROUP_OTHER),
    _row("method", BOOKKEEPING, "Masking method (a release's steps joined by +)", TEXT, NEUTRAL, None,
         group=GROUP_OTHER),
    _row("params", BOOKKEEPING, "Parameters of a comparison configuration's method", OBJECT, NEUTRAL, None,
         group=GROUP_OTHER),
    _row("seconds", BOOKKEEPING, "Seconds a comparison configuration took to mask and evaluate, and its CPU seconds",
         SECONDS, NEUTRAL, None, group=GROUP_OTHER),
)

# The keys each score is computed from (sdc_tasks.metrics.risk.scores; docs/metrics.md "Scores")
_SCORE_INPUTS = {"score": ("IL", "DLD", "PLD", "ID"), "score_simple": ("IL", "DLD", "ID"),
                 "score_pil": ("PIL", "DLD", "PLD", "ID")}


def families() -> tuple[MetricFamily, ...]:
    """Every metric family, in the order of FAMILIES."""
    return FAMILY_ROWS


def has_original_figure(key: str) -> bool:
    """Whether the metrics.json key ``key`` is a disclosure-risk figure of ORIGINAL_RISK_FAMILIES, which an
    evaluation also computes on the original file."""
    try:
        measure = MEASURES[_match(key)[0]]
    except KeyError:
        return False
    return measure.family in ORIGINAL_RISK_FAMILIES and measure.group == GROUP_DR


@lru_cache(maxsize=None)
def _match(key: str) -> tuple[int, str]:
    """(row index, the part ``{i}`` stands for) of the first row matching ``key`` (a derived row only when the
    part is a key :func:`has_original_figure`); KeyError naming an unknown key."""
    for index, measure in enumerate(MEASURES):
        found = re.fullmatch(measure.pattern, key)
        if found and not (measure.derived and not has_original_figure(found.group(1))):
            return index, found.group(1) if found.groups() else ""
    raise KeyError(f"{key!r} is not a metrics.json key of the catalogue (sdc_tasks.metrics.catalogue, {DOCS})")


@cache
def measure_of(key: str) -> Measure:
    """The catalogue row of a metrics.json key; KeyError naming the key when no row describes it. The row of an
    original-file figure or change takes the family, direction and (for ``<key>_before``) unit and range of the
    key it derives from, so that the gate and the reports treat it as that key's family."""
    index, part = _match(key)
    measure = MEASURES[index]
    if not measure.derived:
        return measure
    source = MEASURES[_match(part)[0]]
    if key.endswith(BEFORE):
        return replace(measure, family=source.family, unit=source.unit, direction=source.direction,
                       range=source.range)
    return replace(measure, family=source.family, direction=source.direction)


def derived_from(key: str) -> str | None:
    """The key an original-file figure or change derives from (sample_uniques for sample_uniques_before), None
    for any other key (one the catalogue does not know included)."""
    try:
        index, part = _match(key)
    except KeyError:
        return None
    return part if MEASURES[index].derived else None


def description_of(key: str) -> str:
    """The description of a key, its number (or the key it qualifies) in place of ``{i}``."""
    index, part = _match(key)
    return MEASURES[index].description.format(i=part)


def key_order(key: str) -> tuple[int, int, int, str]:
    """Where a key sorts in a report: (group in GROUP_ORDER, catalogue row, its number, the key); an original-file
    figure or change sorts right after the key it derives from."""
    source = derived_from(key)
    if source is not None:
        return (*key_order(source)[:3], key)
    index, part = _match(key)
    return GROUP_ORDER.index(MEASURES[index].group), index, int(part) if part.isdigit() else 0, key


def gated_families(key: str) -> tuple[str, ...] | None:
    """The metric families a release gate on ``key`` needs computed (none for a post-masking or record swapping
    key, which needs such a step, ``OUTCOME_METHODS``); None when ``key`` is no measure a maximum can limit (unknown, bookkeeping, a diagnostic
    count, or a measure where higher is better)."""
    try:
        measure = measure_of(key)
    except KeyError:
        return None
    if measure.direction != LOWER:
        return None
    if measure.family == SCORE:
        return tuple(dict.fromkeys(measure_of(k).family for k in _SCORE_INPUTS[key]))
    if measure.family in OUTCOME_METHODS:
        return ()  # reported by a masking step, not by a metric family
    return (measure.family,) if measure.family in FAMILIES else None


def row_anchor(measure: Measure) -> str:
    """The anchor of a catalogue row in docs/metrics.md's key table ("dld-i" for DLD_<i>, "il1" for IL1): its key in
    lower case, every run of characters other than letters and digits a hyphen."""
    return re.sub(r"[^a-z0-9]+", "-", measure.key.lower()).strip("-")


def anchor_of(key: str) -> str:
    """The anchor of the catalogue row that describes a metrics.json key (DLD_3: "dld-i")."""
    return row_anchor(measure_of(key))


def docs_link(key: str) -> str:
    """Where a key is defined: docs/metrics.md#ANCHOR."""
    return f"{DOCS}#{anchor_of(key)}"


def range_text(bounds: tuple[float, float] | None) -> str:
    """A range as "0 to 100", "0 or more" or "" (no number)."""
    if bounds is None:
        return ""
    low, high = (f"{b:g}" for b in bounds)
    if bounds[0] == bounds[1]:
        return low
    return f"{low} or more" if math.isinf(bounds[1]) else f"{low} to {high}"


def _md_cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return text.replace("|", "\\|")


def markdown_key_table() -> str:
    """The catalogue as a Markdown table, one line per row (the key table of docs/metrics.md)."""
    lines = ["| key | family | group | description | unit | better | range | source |",
             "|---|---|---|---|---|---|---|---|"]
    for m in MEASURES:
        better = {LOWER: "lower", HIGHER: "higher"}.get(m.direction, "")
        lines.append("| " + " | ".join(_md_cell(t) for t in (
            f'<a id="{row_anchor(m)}"></a>`{m.key}`', m.family, m.group, m.description, m.unit, better,
            range_text(m.range), m.source)) + " |")
    return "\n".join(lines) + "\n"


def with_key_table(text: str) -> str:
    """``text`` (docs/metrics.md) with what lies between its key-table markers replaced by
    :func:`markdown_key_table`; ValueError when a marker is missing."""
    begin, end = text.find(KEY_TABLE_BEGIN), text.find(KEY_TABLE_END)
    if begin < 0 or end < begin:
        raise ValueError(f"the text has no {KEY_TABLE_BEGIN!r} ... {KEY_TABLE_END!r} markers")
    return text[:begin + len(KEY_TABLE_BEGIN)] + "\n" + markdown_key_table() + text[end:]
