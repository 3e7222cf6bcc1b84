"""The survey's matrix family of information loss measures (MSE, MAE, MV of X, Xbar, V, S, R, RF, C, F) and IL1s.

Sources (docs/references.md):
- statistical_databases_survey.txt, "Information loss measures for numerical data" (the table of X - X',
  V - V', R - R', RF - RF', C - C', F - F' by mean square error / mean absolute error / mean variation, and
  the Xbar - Xbar' and S - S' variants described just above it); the same table is pil_measures.txt sec. 2,
  Table 1.
- pil_measures.txt sec. 2, last paragraph: IL1s, the scaled mean variation of Yancey et al. (2002).
- docs/metrics.md: key names ``E_M`` (fractions, not percent), IL1s in percent, population moments
  (divide by n), and the rule for undefined terms.

Scale: the X measures and IL1s come from :class:`CellErrors`, sums over paired records that are computed
per block by :func:`cell_errors` and merged with ``+``; every other measure comes from two
:class:`~sdc_tasks.stats.moments.Moments` sketches (original and masked). Nothing here needs the data twice.

Decisions on points the papers leave open (all documented at the formula they concern):

- Mean variation is |a - a'| / |a| (a fraction, "percent variation" without the factor 100, as docs/metrics.md
  asks for fractions). A term whose original component a is 0 is left out of the mean and counted in
  ``MV_<M>_undefined_terms``.
- A column is *constant* ("flat") when its population sd is 0 up to rounding: sd <= FLAT_RTOL * |mean|
  (the exact sketch gives a constant column an sd of exactly 0; the tolerance also takes columns whose spread
  is below the rounding of their values, e.g. 1e9 + 1e-8 noise). Flat columns have
  no correlation: R, RF, C and F are computed on the q attributes that are non-flat in BOTH files, and
  the terms of the other attributes are left out and counted. Their covariances are set to exactly 0, so
  the V and S mean variations count them as undefined instead of dividing by rounding noise.
- Principal components are those of the correlation matrix (numpy ``eigh``, sorted by decreasing
  eigenvalue; negative rounding residues clipped to 0). Masked component j is matched to original
  component j by that order, and its eigenvector sign, which ``eigh`` leaves arbitrary, is aligned to the
  original's: flipped when the dot product of the two eigenvectors is negative.
- RF = correlations between attributes and components: rf_ij = u_ij sqrt(lambda_j).
  C = communality of each attribute with PC1: c_i = rf_i1^2, a FRACTION (the survey says "the percent of
  each attribute explained by PC1"; we drop the factor 100, like every other key of this family).
  F = factor score coefficients: f_ij = u_ij / sqrt(lambda_j), the coefficients that turn the standardized
  attributes into unit-variance component scores; a component with eigenvalue 0 (<= q eps max lambda, in
  either file) has none, and its cells are left out and counted.
- Weights of RF and F: w_j = lambda_j / q, the share of variance of component j of the ORIGINAL
  correlation matrix (sum w_j = 1). The weighted measures are sum_j w_j sum_i term_ij divided by the number
  of cells, exactly as in the table (p^2 when every cell is defined); when cells are left out the divisor
  is the number of cells kept.
- A measure with no defined term at all (e.g. R when p = 1, MV_X when every x is 0) is left out of the
  result and counted in ``matrix_missing_measures``; nothing is ever NaN or inf. ``<key>_undefined_terms``
  appears only when it is not 0 (as in information_loss.py). A term that is not finite (data near the float
  range: a square that overflows) is left out and counted like a zero denominator, and a measure whose value
  is not finite (MSE_X of such data) is left out, counted, and flagged ``<key>_not_finite`` (metrics/finite.py).
- Correlations come from the sketches' scaled covariances (powers of two per column, exact), which stay
  finite where the covariances themselves overflow.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.linalg import eigh

from sdc_tasks.metrics.finite import finite_measure
from sdc_tasks.metrics.paired_blocks import paired_columns
from sdc_tasks.stats.exact_sum import ExactSums, exact_sums
from sdc_tasks.stats.moments import Moments

#: A column is constant when its sd is at most this fraction of |mean| (or exactly 0).
FLAT_RTOL = 1e-12

MATRICES = ("X", "Xbar", "V", "S", "R", "RF", "C", "F")
ERRORS = ("MSE", "MAE", "MV")
KEYS = tuple(f"{e}_{m}" for m in MATRICES for e in ERRORS)


# ----------------------------------------------------------------------------------------------------------
# flat (constant) columns
# ----------------------------------------------------------------------------------------------------------

def flat_attributes(m: Moments) -> np.ndarray:
    """Boolean mask of the constant columns of a sketch: population sd <= FLAT_RTOL * |mean| (sd 0 up to
    rounding; docs/metrics.md: a constant column makes the terms that divide by its variance undefined)."""
    return m.sd <= FLAT_RTOL * np.abs(m.mean)


def effective_sd(m: Moments) -> np.ndarray:
    """Population sd S_j of each column (docs/metrics.md: moments divide by n), exactly 0 for flat columns.

    Pass ``effective_sd(original_moments)`` to :func:`cell_errors` so IL1s leaves constant columns out.
    """
    return np.where(flat_attributes(m), 0.0, m.sd)


def _clean_cov(v: np.ndarray, flat: np.ndarray) -> np.ndarray:
    """A covariance matrix with the rows and columns of flat attributes set to exactly 0 (their value up to
    rounding)."""
    v = v.copy()
    v[flat, :] = 0.0
    v[:, flat] = 0.0
    return v


# ----------------------------------------------------------------------------------------------------------
# X - X' and IL1s: mergeable sums over paired records
# ----------------------------------------------------------------------------------------------------------

SUMS = ("sq_err", "abs_err", "rel_abs_err", "scaled_abs_err")


@dataclass(frozen=True)
class CellErrors:
    """Sums over paired cells (x_ij, x'_ij), mergeable with ``+`` (``CellErrors()`` is the identity).

    ``sq_err`` = sum (x - x')^2 and ``abs_err`` = sum |x - x'| over all ``cells`` (survey table, X - X',
    mean square / mean absolute error); ``rel_abs_err`` = sum |x - x'| / |x| over the cells with x != 0,
    ``zero_cells`` the cells with x = 0 (mean variation of X - X'); ``scaled_abs_err`` =
    sum |x_ij - x'_ij| / (sqrt(2) S_j) over the cells with S_j > 0, ``flat_cells`` the cells with S_j = 0
    (IL1s, pil_measures.txt sec. 2). The four sums are exact (``sums``, in the order of SUMS), so they do not
    depend on how the records are split into blocks; each is rounded once when read.
    """

    sums: ExactSums = field(default_factory=lambda: ExactSums.zero(len(SUMS)))
    cells: int = 0
    zero_cells: int = 0
    flat_cells: int = 0

    def __getattr__(self, name: str) -> float:
        """The sums of SUMS by name, rounded once."""
        if name not in SUMS:
            raise AttributeError(name)
        return float(self.sums.values()[SUMS.index(name)])

    def __add__(self, other: "CellErrors") -> "CellErrors":
        """Sums of two disjoint blocks of paired records."""
        if not isinstance(other, CellErrors):
            return NotImplemented
        return CellErrors(self.sums + other.sums, self.cells + other.cells, self.zero_cells + other.zero_cells,
                          self.flat_cells + other.flat_cells)


def cell_errors(x: np.ndarray, xm: np.ndarray, sd: np.ndarray) -> CellErrors:
    """Sums of one block of paired records (row i of ``x`` paired with row i of ``xm``).

    ``sd`` is the vector of ORIGINAL population standard deviations S_j of the whole file (use
    :func:`effective_sd` of the original sketch); columns with S_j = 0 are left out of the IL1s sum and
    counted in ``flat_cells`` (pil_measures.txt sec. 2; docs/metrics.md IL1s and undefined terms).
    """
    x, xm = paired_columns(x, xm)
    sd = np.asarray(sd, dtype=np.float64).reshape(-1)
    if sd.shape[0] != x.shape[1]:
        raise ValueError(f"sd has {sd.shape[0]} entries for {x.shape[1]} columns")
    with np.errstate(over="ignore", invalid="ignore"):
        diff = np.abs(x - xm)
        # survey table, X - X', mean variation: |x_ij - x'_ij| / |x_ij|, only where x_ij != 0
        nonzero = x != 0
        rel = diff[nonzero] / np.abs(x[nonzero])
        # pil_measures.txt sec. 2 (Yancey et al. 2002): |x_ij - x'_ij| / (sqrt(2) S_j), only where S_j > 0
        live = sd > 0
        scaled = diff[:, live] / (np.sqrt(2.0) * sd[live])
        square = diff * diff
    return CellErrors(
        sums=exact_sums(square, diff, rel, scaled),
        cells=int(diff.size),
        zero_cells=int(diff.size - np.count_nonzero(nonzero)),
        flat_cells=int(x.shape[0] * np.count_nonzero(~live)),
    )


# ----------------------------------------------------------------------------------------------------------
# the three discrepancies of a pair of matrices
# ----------------------------------------------------------------------------------------------------------

def _discrepancies(a: np.ndarray, b: np.ndarray, defined: np.ndarray,
                   weights: np.ndarray | None = None) -> dict[str, tuple[float | None, int]]:
    """MSE, MAE and MV of matrix ``b`` (masked) against ``a`` (original) over the cells where ``defined``.

    Survey table ("divided by the number of cells in either matrix"):
    MSE = sum w (a - b)^2 / N, MAE = sum w |a - b| / N, MV = sum w |a - b| / |a| / N, N the number of cells
    kept and w = 1, or w_j of the column for RF and F. MV also leaves out the cells with a = 0, and each
    error the cells whose term is not finite. Returns,
    per error, (value or None when no cell is kept, number of cells left out).
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    w = np.ones_like(a) if weights is None else np.broadcast_to(weights, a.shape)
    out: dict[str, tuple[float | None, int]] = {}
    with np.errstate(over="ignore", invalid="ignore"):
        diff = np.abs(a - b)
        mv_defined = defined & (a != 0)
        mv = np.divide(diff, np.abs(a), out=np.zeros_like(diff), where=mv_defined)
        found = (("MSE", w * (diff * diff), defined), ("MAE", w * diff, defined), ("MV", w * mv, mv_defined))
    for name, terms, defined_terms in found:
        keep = defined_terms & np.isfinite(terms)
        kept = int(np.count_nonzero(keep))
        value = float(np.sum(terms[keep]) / kept) if kept else None
        out[name] = (value, int(keep.size - kept))
    return out


# ----------------------------------------------------------------------------------------------------------
# correlations and principal components
# ----------------------------------------------------------------------------------------------------------

def _correlation(v: np.ndarray, live: np.ndarray) -> np.ndarray:
    """Correlation matrix r_ij = v_ij / (s_i s_j) of the ``live`` attributes (pil_measures.txt sec. 4.2,
    rho = mu_11 / sqrt(mu_20 mu_02)), clipped to [-1, 1] against rounding, unit diagonal."""
    vs = v[np.ix_(live, live)]
    s = np.sqrt(np.diag(vs))
    r = np.clip(vs / np.outer(s, s), -1.0, 1.0)
    np.fill_diagonal(r, 1.0)
    return r


def principal_components(r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues (decreasing, clipped at 0) and unit eigenvectors (columns) of a correlation matrix:
    the principal components PC_1..PC_q of the survey's RF, C and F (survey, "Information loss measures
    for numerical data"). Ties between equal eigenvalues keep eigh's order (a stable sort)."""
    lam, u = eigh(r)
    order = np.argsort(-lam, kind="stable")
    return np.clip(lam[order], 0.0, None), u[:, order]


def align_signs(u_orig: np.ndarray, u_masked: np.ndarray) -> np.ndarray:
    """Masked eigenvectors with each sign chosen to agree with the original's: column j is negated when
    u_orig[:, j] . u_masked[:, j] < 0 (eigenvector signs are arbitrary; without this RF and F would
    report a loss for identical files)."""
    dots = np.einsum("ij,ij->j", u_orig, u_masked)
    return u_masked * np.where(dots < 0, -1.0, 1.0)


# ----------------------------------------------------------------------------------------------------------
# all measures
# ----------------------------------------------------------------------------------------------------------

def matrix_measures(cells: CellErrors, mo: Moments, mm: Moments) -> dict[str, float]:
    """The 24 keys ``E_M`` (E in MSE, MAE, MV; M in X, Xbar, V, S, R, RF, C, F; fractions) and ``IL1s``
    (percent), with ``<key>_undefined_terms`` counts (only where not 0) and ``matrix_missing_measures``
    (how many of these 25 keys were left out because none of their terms is defined).

    ``cells``: the merged :class:`CellErrors` of all paired records; ``mo`` / ``mm``: the sketches of the
    original and the masked file. Definitions (statistical_databases_survey.txt, "Information loss
    measures for numerical data", table and the Xbar / S variants; docs/metrics.md):

    - X: over the n p paired cells; MV over the cells with x_ij != 0.
    - Xbar: over the p attribute means.
    - V: over the p(p+1)/2 covariances v_ij, 1 <= i <= j <= p (population covariances, divide by n).
    - S: over the p variances v_jj.
    - R: over the p(p-1)/2 correlations r_ij, i < j.
    - RF: sum_j w_j sum_i term(rf_ij) / p^2, rf_ij = u_ij sqrt(lambda_j).
    - C: over the p communalities c_i = rf_i1^2.
    - F: sum_j w_j sum_i term(f_ij) / p^2, f_ij = u_ij / sqrt(lambda_j).
    - IL1s = 100 mean over i, j of |x_ij - x'_ij| / (sqrt(2) S_j) (pil_measures.txt sec. 2).
    """
    if mo.n == 0 or mm.n == 0:
        raise ValueError("matrix measures need at least one record in each file")
    p = mo.mean.shape[0]
    if mm.mean.shape[0] != p:
        raise ValueError(f"the files have {p} and {mm.mean.shape[0]} attributes")
    results: dict[str, tuple[float | None, int]] = {}

    def put(matrix: str, found: dict[str, tuple[float | None, int]]) -> None:
        for err, pair in found.items():
            results[f"{err}_{matrix}"] = pair

    # X - X' (survey table, first row): sums over paired records
    results["MSE_X"] = (cells.sq_err / cells.cells if cells.cells else None, 0)
    results["MAE_X"] = (cells.abs_err / cells.cells if cells.cells else None, 0)
    kept = cells.cells - cells.zero_cells
    results["MV_X"] = (cells.rel_abs_err / kept if kept else None, cells.zero_cells)
    # IL1s (pil_measures.txt sec. 2), percent; constant columns (S_j = 0) left out
    kept = cells.cells - cells.flat_cells
    il1s = (100.0 * cells.scaled_abs_err / kept if kept else None, cells.flat_cells)

    # Xbar - Xbar' (survey, the "averages of attributes" variant of X - X'): p means
    put("Xbar", _discrepancies(mo.mean, mm.mean, np.ones(p, dtype=bool)))

    flat_o, flat_m = flat_attributes(mo), flat_attributes(mm)
    with np.errstate(over="ignore", invalid="ignore"):
        vo, vm = _clean_cov(mo.cov, flat_o), _clean_cov(mm.cov, flat_m)
    # V - V' (survey table): the p(p+1)/2 cells 1 <= i <= j <= p (the table's divisor p(p+1)/2 includes
    # the diagonal; pil_measures.txt Table 1 prints p(p-1)/2 there, docs/metrics.md IL3 settles on i <= j)
    upper = np.triu_indices(p)
    put("V", _discrepancies(vo[upper], vm[upper], np.ones(upper[0].size, dtype=bool)))
    # S - S' (survey, the "diagonals of the covariance matrices" variant of V - V'): p variances
    put("S", _discrepancies(np.diag(vo), np.diag(vm), np.ones(p, dtype=bool)))

    # R - R' (survey table): the p(p-1)/2 cells i < j; undefined where either attribute is flat in
    # either file
    live = ~(flat_o | flat_m)
    q = int(np.count_nonzero(live))
    strict = np.triu_indices(p, k=1)
    ro, rm = np.zeros((p, p)), np.zeros((p, p))
    if q:
        grid = np.ix_(live, live)
        ro[grid] = _correlation(mo.scaled_cov(), live)
        rm[grid] = _correlation(mm.scaled_cov(), live)
    put("R", _discrepancies(ro[strict], rm[strict], (live[:, None] & live[None, :])[strict]))

    # RF, C, F (survey table): principal components of the correlation matrices of the q live attributes
    if q:
        lam_o, u_o = principal_components(ro[np.ix_(live, live)])
        lam_m, u_m = principal_components(rm[np.ix_(live, live)])
        u_m = align_signs(u_o, u_m)
        w = lam_o / q  # share of variance of original component j (eigenvalues of a correlation sum to q)
        # RF: correlation of attribute i with component j, rf_ij = u_ij sqrt(lambda_j)
        rf_o, rf_m = u_o * np.sqrt(lam_o), u_m * np.sqrt(lam_m)
        found = _discrepancies(rf_o, rf_m, np.ones((q, q), dtype=bool), w[None, :])
        put("RF", {e: (v, k + p * p - q * q) for e, (v, k) in found.items()})
        # C: communality of attribute i with PC1, c_i = rf_i1^2 (a fraction, not a percent)
        found = _discrepancies(rf_o[:, 0] ** 2, rf_m[:, 0] ** 2, np.ones(q, dtype=bool))
        put("C", {e: (v, k + p - q) for e, (v, k) in found.items()})
        # F: factor score coefficients f_ij = u_ij / sqrt(lambda_j); none for a zero eigenvalue
        tol_o, tol_m = q * np.finfo(float).eps * lam_o.max(), q * np.finfo(float).eps * lam_m.max()
        comp = (lam_o > tol_o) & (lam_m > tol_m)
        f_o = np.divide(u_o, np.sqrt(lam_o), out=np.zeros_like(u_o), where=comp[None, :])
        f_m = np.divide(u_m, np.sqrt(lam_m), out=np.zeros_like(u_m), where=comp[None, :])
        found = _discrepancies(f_o, f_m, np.broadcast_to(comp[None, :], (q, q)), w[None, :])
        put("F", {e: (v, k + p * p - q * q) for e, (v, k) in found.items()})
    else:
        for matrix, size in (("RF", p * p), ("C", p), ("F", p * p)):
            put(matrix, {e: (None, size) for e in ERRORS})

    out: dict[str, float] = {}
    missing = 0
    for key in (*KEYS, "IL1s"):
        value, undefined = il1s if key == "IL1s" else results[key]
        if value is not None:
            out.update(finite_measure(key, value))
        if key not in out:
            missing += 1
        if undefined:
            out[f"{key}_undefined_terms"] = float(undefined)
    out["matrix_missing_measures"] = float(missing)
    return out
