"""Information loss for categorical variables: Dist, CTBIL, ACTBIL, EBIL and PRIL (sdc_methods_comparison_chapter.txt
sec. 5, "Information Loss Metrics"; Kooiman et al. 1998). Choices and sources: docs/categorical.md.

Kernels turn one paired partition (original column ``v`` beside its masked column) into count tables
(:class:`LossCounts`) that add up across partitions, so a tree reduction gives the exact totals of the whole
file; the finishers compute every measure from the merged tables. Categories are canonical values
(:func:`canonical`): float codes for numeric columns, text otherwise, missing values (local suppression) as
the category MISSING.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np
import pandas as pd

from sdc_tasks.errors import InputError

MISSING_CODE = -np.inf
MISSING_TEXT = "\x00missing"


def canonical(col: pd.Series, text: bool) -> np.ndarray:
    """Category values of one column as comparable values: float64 codes (missing -> MISSING_CODE), or with
    ``text`` strings (whole numbers written without decimals, missing -> MISSING_TEXT)."""
    missing = col.isna().to_numpy()
    if not text:
        return np.where(missing, MISSING_CODE, col.to_numpy(np.float64, na_value=np.nan))
    if pd.api.types.is_numeric_dtype(col.dtype):
        x = col.to_numpy(np.float64, na_value=np.nan)
        whole = np.isfinite(x) & (x == np.round(x))
        out = np.where(whole, pd.Series(np.where(whole, x, 0)).astype(np.int64).astype(str), col.astype(str))
    else:
        out = col.astype(str).to_numpy(object)
    return np.where(missing, MISSING_TEXT, out).astype(object)


def _counts(*columns: np.ndarray) -> pd.Series:
    """Frequencies of the distinct values (one column) or value tuples (MultiIndex) of equal-length columns."""
    if len(columns) == 1:
        return pd.Series(columns[0]).value_counts(sort=False).astype(np.float64)
    return pd.DataFrame(dict(enumerate(columns))).value_counts(sort=False).astype(np.float64)


def add_counts(a: pd.Series, b: pd.Series) -> pd.Series:
    """The sum of two frequency tables (categories missing from one count 0)."""
    return a.add(b, fill_value=0.0)


@dataclass(frozen=True)
class LossCounts:
    """Additive count tables of the masked categorical variables: ``cross[v]`` the original-by-masked table of
    ``v``; ``orig_pairs[(v, w)]`` and ``masked_pairs[(v, w)]`` the two-way tables of each pair v < w in the
    original and in the masked file."""

    cross: dict
    orig_pairs: dict
    masked_pairs: dict

    def __add__(self, other: "LossCounts") -> "LossCounts":
        return LossCounts(*({k: add_counts(x[k], y[k]) for k in x} for x, y in
                            ((self.cross, other.cross), (self.orig_pairs, other.orig_pairs),
                             (self.masked_pairs, other.masked_pairs))))


def loss_counts(part: pd.DataFrame, variables: list[str], text: dict[str, bool], suffix: str) -> LossCounts:
    """The count tables of one paired partition, masked columns named variable + ``suffix`` (kernel; partial
    tables add up across partitions)."""
    orig = {v: canonical(part[v], text[v]) for v in variables}
    masked = {v: canonical(part[v + suffix], text[v]) for v in variables}
    pairs = list(combinations(variables, 2))
    return LossCounts({v: _counts(orig[v], masked[v]) for v in variables},
                      {p: _counts(orig[p[0]], orig[p[1]]) for p in pairs},
                      {p: _counts(masked[p[0]], masked[p[1]]) for p in pairs})


def value_counts(part: pd.DataFrame, variables: list[str], text: dict[str, bool]) -> dict:
    """Per variable, the frequency of each category in one partition of a reference file (kernel)."""
    return {v: _counts(canonical(part[v], text[v])) for v in variables}


def _cross_matrix(cross: pd.Series) -> pd.DataFrame:
    """The original-by-masked table as a dense frame: rows original categories, columns masked categories."""
    return cross.unstack(fill_value=0.0)


def category_distance(orig: np.ndarray, masked: np.ndarray, order: list | None, variable: str = "") -> np.ndarray:
    """Distance between original and masked categories (sdc_methods_comparison_chapter.txt sec. 5, "Direct
    Comparison of Categorical Values"): nominal (``order`` None) 0 if equal else 1; ordinal |rank(a) - rank(b)| /
    (K - 1) with K = len(order), the number of categories between a and b scaled to [0, 1] like the nominal
    distance; a missing (suppressed) masked value is at distance 1. A category outside ``order`` raises
    InputError naming ``variable``."""
    if order is None:
        return (orig != masked).astype(np.float64)
    rank = {c: i for i, c in enumerate(order)}
    span = max(len(order) - 1, 1)
    ro = np.array([rank.get(c, np.nan) for c in orig], dtype=np.float64)
    rm = np.array([rank.get(c, np.nan) for c in masked], dtype=np.float64)
    suppressed = np.array([c in (MISSING_CODE, MISSING_TEXT) for c in masked], dtype=bool)
    if np.isnan(ro).any() or (np.isnan(rm) & ~suppressed).any():
        raise InputError(f"ordinal variable {variable!r} has a category that its given order does not list")
    return np.where(suppressed, 1.0, np.abs(ro - rm) / span)


def dist(counts: LossCounts, orders: dict[str, list | None]) -> float:
    """Dist: sum over records and masked variables of the distance between original and masked category
    (sdc_methods_comparison_chapter.txt sec. 5; Table 3 reports this total)."""
    total = 0.0
    for v, cross in counts.cross.items():
        orig, masked = (cross.index.get_level_values(i).to_numpy() for i in (0, 1))
        total += float(cross.to_numpy() @ category_distance(orig, masked, orders.get(v), v))
    return total


def _domain(orig: pd.Series, masked: pd.Series) -> int:
    """Number of categories of a variable: those in the original or the masked file (missing included)."""
    return len(orig.index.union(masked.index))


def contingency_loss(counts: LossCounts) -> tuple[float, float]:
    """(CTBIL, number of cells) over all tables of one and two masked variables (sdc_methods_comparison_chapter.txt
    sec. 5, "Comparison of Contingency Tables"): CTBIL sums |original cell count - masked cell count| over every
    cell of every table; a table has the product of its variables' category counts as cells (categories of
    either file). Table 3's B9s row (CTBIL 20000 = 10 tables x 2000 on 4 variables, 1000 records) and G1 rows
    (CTBIL = 2 (1 + (m - 1)) Dist) fix the tables as these."""
    margins = {v: (c.groupby(level=0).sum(), c.groupby(level=1).sum()) for v, c in counts.cross.items()}
    ctbil = sum(float(o.sub(m, fill_value=0.0).abs().sum()) for o, m in margins.values())
    sizes = {v: _domain(o, m) for v, (o, m) in margins.items()}
    cells = sum(sizes.values())
    for (v, w), table in counts.orig_pairs.items():
        ctbil += float(table.sub(counts.masked_pairs[(v, w)], fill_value=0.0).abs().sum())
        cells += sizes[v] * sizes[w]
    return ctbil, float(cells)


def posterior(cross: pd.Series, prior: pd.Series) -> pd.DataFrame:
    """P(V = i | V' = j) by Bayes from the transition matrix P(V' = j | V = i) = n_ij / n_i (the empirical matrix
    of the original-by-masked table; PRAM's Markov matrix, estimated) and the distribution ``prior`` of V
    (sdc_methods_comparison_chapter.txt sec. 5, "Entropy-Based Measures"). Rows i, columns j; a column whose
    denominator sum_k P(j | k) P(k) is 0 is NaN."""
    table = _cross_matrix(cross)
    transition = table.div(table.sum(axis=1), axis=0)
    pi = prior.reindex(table.index, fill_value=0.0)
    joint = transition.mul(pi / max(float(prior.sum()), 1e-300), axis=0)
    total = joint.sum(axis=0)
    return joint.div(total.where(total > 0), axis=1)


def entropy_loss(cross: pd.Series, prior: pd.Series) -> tuple[float, float, int]:
    """(EBIL, PRIL, undefined terms) of one variable (sdc_methods_comparison_chapter.txt sec. 5): EBIL = sum over
    records r of H(V | V' = j_r), H(V | V' = j) = -sum_i p(i | j) ln p(i | j); PRIL (the chapter's IL) = sum over
    records of -ln P(V = i_r | V' = j_r), natural logs. Records whose P(i_r | j_r) is 0 or undefined (the prior
    gives their categories no mass) are left out of PRIL and counted as undefined terms; EBIL leaves out the
    records of a masked category j whose posterior is undefined."""
    table = _cross_matrix(cross)
    post = posterior(cross, prior).to_numpy()
    n = table.to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        h = -np.nansum(np.where(post > 0, post * np.log(post), 0.0), axis=0)
        defined = np.isfinite(post).all(axis=0)
        ebil = float(n.sum(axis=0)[defined] @ h[defined])
        ok = (n > 0) & (post > 0)
        pril = float(-(n[ok] * np.log(post[ok])).sum())
    undefined = int(n[(n > 0) & ~ok].sum())
    return ebil, pril, undefined


def categorical_loss(counts: LossCounts, orders: dict[str, list | None], n: int,
                     reference: dict | None = None) -> dict:
    """Metric keys of the cat_il family from the merged tables of ``n`` paired records: Dist, Dist_mean (per
    cell), CTBIL, ACTBIL and EBIL/PRIL with V's distribution from the evaluated file (_MF: then P(i | j) =
    n_ij / n_j and EBIL_MF = PRIL_MF, as in every non-PRAM row of Table 3) and, when ``reference`` category
    counts per variable are given, from the reference file (_RF, with PRIL_RF_undefined_terms); docs/categorical.md."""
    variables = list(counts.cross)
    total = dist(counts, orders)
    ctbil, cells = contingency_loss(counts)
    out = {"Dist": total, "Dist_mean": total / (n * len(variables)), "CTBIL": ctbil, "ACTBIL": ctbil / cells}
    priors = {"MF": {v: c.groupby(level=0).sum() for v, c in counts.cross.items()}}
    if reference is not None:
        priors["RF"] = reference
    for tag, prior in priors.items():
        parts = np.array([entropy_loss(counts.cross[v], prior[v]) for v in variables])
        out[f"EBIL_{tag}"], out[f"PRIL_{tag}"] = float(parts[:, 0].sum()), float(parts[:, 1].sum())
        if tag == "RF":
            out["PRIL_RF_undefined_terms"] = int(parts[:, 2].sum())
    return out
