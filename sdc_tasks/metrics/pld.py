"""Numeric kernels of PLD, the probabilistic linkage disclosure risk (docs/metrics.md;
sdc_methods_comparison_chapter.txt sec. 3 "Probabilistic Record Linkage"; Jaro 1989).

PLD is the percent of masked records correctly paired to their original record by probabilistic linkage:

1. every candidate pair (masked record, original record) from blocking gets, per key variable j, the absolute
   standardized difference |x'_j - x_j| / S_j, cut into agreement levels (:func:`agreement_levels`);
2. the levels of a pair form its agreement pattern, coded as one integer (:func:`pattern_codes`), and only
   the pattern frequencies are kept (:func:`pattern_counts`; partial counts add up across blocks);
3. the Fellegi-Sunter m and u probabilities are estimated by EM on the pattern frequencies under the
   two-class latent class model with conditional independence (:func:`fit_fellegi_sunter`, Jaro 1989);
   the agreement weight of a pattern is sum_j log2(m_j / u_j) (:meth:`FellegiSunterModel.weights`);
4. as in Jaro (1989), the linear sum assignment model pairs the records one-to-one, maximizing the total
   weight; a record may stay unpaired (:func:`assign_max_weight`);
5. PLD counts the pairs whose record ids agree (:func:`correct_pairs`).

Pure numpy/scipy on arrays; candidate generation and the Dask orchestration live elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse
from scipy.special import expit

DEFAULT_THRESHOLDS: tuple[float, ...] = (0.05, 0.25, 1.0)
PROB_FLOOR = 1e-12


def agreement_levels(diff: np.ndarray, thresholds: tuple[float, ...] = DEFAULT_THRESHOLDS) -> np.ndarray:
    """Agreement level (int8) of every candidate pair and key variable (sdc_methods_comparison_chapter.txt
    sec. 3; Jaro (1989)).

    ``diff`` is the (E, m) array of absolute standardized differences |x'_j - x_j| / S_j. Level 0 is the closest
    agreement (diff <= thresholds[0]), level k means thresholds[k-1] < diff <= thresholds[k], and level
    len(thresholds) is disagreement (diff > thresholds[-1]). NaN or negative differences raise ValueError.
    """
    diff = np.asarray(diff, dtype=np.float64)
    cuts = np.asarray(thresholds, dtype=np.float64)
    if cuts.ndim != 1 or cuts.size == 0 or cuts.size > 126 or np.any(np.diff(cuts) <= 0):
        raise ValueError(f"thresholds must be 1 to 126 strictly increasing values, got {thresholds!r}")
    if np.isnan(diff).any():
        raise ValueError("agreement levels of NaN differences are undefined")
    if (diff < 0).any():
        raise ValueError("differences must be absolute values (non-negative)")
    return np.searchsorted(cuts, diff, side="left").astype(np.int8)


def pattern_codes(levels: np.ndarray, n_levels: int) -> np.ndarray:
    """Int64 code of the agreement pattern of every row of ``levels`` (sdc_methods_comparison_chapter.txt sec. 3;
    Jaro (1989)).

    Mixed-radix (base ``n_levels``) row-major code, the FIRST variable MOST significant, exactly
    ``np.ravel_multi_index``: code = sum_j levels[:, j] * n_levels ** (m - 1 - j). Levels outside
    0..n_levels-1 raise ValueError.
    """
    levels = np.asarray(levels)
    if levels.ndim != 2:
        raise ValueError(f"levels must be an (E, m) array, got shape {levels.shape}")
    if levels.shape[0] == 0:
        return np.zeros(0, dtype=np.int64)
    shape = (n_levels,) * levels.shape[1]
    return np.ravel_multi_index(tuple(levels.T.astype(np.intp)), shape).astype(np.int64)


def pattern_levels(codes: np.ndarray, m: int, n_levels: int) -> np.ndarray:
    """(E, m) int8 levels of every pattern code, the inverse of :func:`pattern_codes`
    (sdc_methods_comparison_chapter.txt sec. 3; Jaro (1989)); first variable most significant."""
    codes = np.asarray(codes, dtype=np.int64).reshape(-1)
    if codes.size == 0:
        return np.zeros((0, m), dtype=np.int8)
    return np.column_stack(np.unravel_index(codes, (n_levels,) * m)).astype(np.int8)


def pattern_counts(codes: np.ndarray, n_patterns: int) -> np.ndarray:
    """Int64 frequency of every pattern code 0..n_patterns-1 (sdc_methods_comparison_chapter.txt sec. 3;
    Jaro (1989)); counts of disjoint sets of pairs add up, so blocks can be tree-reduced with ``+``."""
    codes = np.asarray(codes, dtype=np.int64).reshape(-1)
    if codes.size and (codes.min() < 0 or codes.max() >= n_patterns):
        raise ValueError(f"pattern codes must lie in 0..{n_patterns - 1}")
    return np.bincount(codes, minlength=n_patterns).astype(np.int64)


@dataclass(frozen=True)
class FellegiSunterModel:
    """Fitted two-class Fellegi-Sunter model: ``m[j, l]`` = P(level l on variable j | match), ``u[j, l]`` =
    P(level l on variable j | non-match), ``p`` the match prior over candidate pairs, the EM ``iterations``,
    whether it ``converged`` and the final log-likelihood ``loglik`` of the pattern counts (natural log)."""

    m: np.ndarray
    u: np.ndarray
    p: float
    iterations: int
    converged: bool
    loglik: float

    def weights(self) -> np.ndarray:
        """Fellegi-Sunter agreement weight sum_j log2(m_j / u_j) of every pattern code 0..n_levels**m_vars-1
        (sdc_methods_comparison_chapter.txt sec. 3; Jaro (1989))."""
        log_m, log_u = self._all_pattern_log_likelihoods()
        return (log_m - log_u) / np.log(2.0)

    def match_probability(self) -> np.ndarray:
        """Posterior P(match | pattern) of every pattern code 0..n_levels**m_vars-1 under the fitted latent class
        model (sdc_methods_comparison_chapter.txt sec. 3; Jaro (1989))."""
        log_m, log_u = self._all_pattern_log_likelihoods()
        return _posterior(self.p, log_m, log_u)

    def _all_pattern_log_likelihoods(self) -> tuple[np.ndarray, np.ndarray]:
        m_vars, n_levels = self.m.shape
        return _pattern_log_likelihoods(self.m, self.u, np.arange(n_levels**m_vars))


def _pattern_log_likelihoods(
    m: np.ndarray, u: np.ndarray, codes: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Natural-log P(pattern | match) and P(pattern | non-match) of the given codes under conditional
    independence: sums over variables of log m[j, level_j] and log u[j, level_j]."""
    m_vars, n_levels = m.shape
    levels = pattern_levels(codes, m_vars, n_levels)
    var = np.arange(m_vars)
    return np.log(m)[var, levels].sum(axis=1), np.log(u)[var, levels].sum(axis=1)


def _posterior(p: float, log_m: np.ndarray, log_u: np.ndarray) -> np.ndarray:
    """P(match | pattern) = p P_m / (p P_m + (1 - p) P_u), evaluated as a logistic of the log odds."""
    return expit(np.log(p) - np.log1p(-p) + log_m - log_u)


def _floor_normalize(prob: np.ndarray) -> np.ndarray:
    """Rows of ``prob`` clipped below at PROB_FLOOR and renormalized to sum to 1 (keeps weights finite)."""
    prob = np.maximum(prob, PROB_FLOOR)
    return prob / prob.sum(axis=1, keepdims=True)


def _initial_parameters(levels: np.ndarray, counts: np.ndarray, n_levels: int) -> tuple[np.ndarray, np.ndarray]:
    """Deterministic EM start: m[j, l] proportional to 2^-l (mass decreasing away from agreement) and u the
    observed marginal level frequencies of every variable."""
    m_vars = levels.shape[1]
    m = np.tile(2.0 ** -np.arange(n_levels), (m_vars, 1))
    u = _level_totals(levels, counts.astype(np.float64), n_levels)
    return _floor_normalize(m), _floor_normalize(u)


def _level_totals(levels: np.ndarray, weights: np.ndarray, n_levels: int) -> np.ndarray:
    """(m_vars, n_levels) sums of ``weights`` over the patterns having level l on variable j."""
    return np.stack([np.bincount(col, weights=weights, minlength=n_levels) for col in levels.T.astype(np.intp)])


def _aligned(m: np.ndarray, u: np.ndarray, p: float) -> tuple[np.ndarray, np.ndarray, float]:
    """Guard against label switching: the match class is the one with more mass on level 0 (closest agreement)
    summed over variables; swap the classes if the non-match class has more."""
    if m[:, 0].sum() >= u[:, 0].sum():
        return m, u, p
    return u, m, 1.0 - p


def fit_fellegi_sunter(
    counts: np.ndarray,
    m_vars: int,
    n_levels: int,
    max_iter: int = 500,
    tol: float = 1e-10,
    prior: float = 0.1,
    fixed_u: np.ndarray | None = None,
) -> FellegiSunterModel:
    """Fitted :class:`FellegiSunterModel`: m, u and the match prior estimated by EM from pattern frequencies
    (sdc_methods_comparison_chapter.txt sec. 3; Jaro (1989); Fellegi and Sunter (1969)).

    Two-class latent class model with conditional independence between the key variables, fitted on the
    frequencies ``counts`` of the n_levels**m_vars pattern codes (:func:`pattern_counts`), so one iteration costs
    O(n_patterns) whatever the number of pairs. Start: m proportional to 2^-level, u the observed marginal
    level frequencies, match prior ``prior``. Stops when no parameter moves more than ``tol``
    (``converged=True``) or after ``max_iter`` iterations. Probabilities are floored at 1e-12 so that every
    weight is finite; the match class is the one with more mass on level 0 summed over variables. ``fixed_u``
    ((m_vars, n_levels) rows summing to 1): u held at these values (estimated from all record pairs, where
    non-matches are nearly every pair) and only m and the prior fitted.
    """
    counts = np.asarray(counts, dtype=np.float64).reshape(-1)
    if counts.size != n_levels**m_vars:
        raise ValueError(f"expected {n_levels ** m_vars} pattern counts, got {counts.size}")
    if np.any(counts < 0) or not np.isfinite(counts).all():
        raise ValueError("pattern counts must be finite and non-negative")
    if counts.sum() == 0:
        raise ValueError("cannot fit the Fellegi-Sunter model on empty counts")
    if not 0.0 < prior < 1.0:
        raise ValueError(f"prior must lie in (0, 1), got {prior}")
    codes = np.flatnonzero(counts)
    counts = counts[codes]
    levels = pattern_levels(codes, m_vars, n_levels)
    m, u = _initial_parameters(levels, counts, n_levels)
    if fixed_u is not None:
        u = _floor_normalize(np.asarray(fixed_u, dtype=np.float64))
    p = prior
    converged, iteration = False, 0
    while iteration < max_iter and not converged:
        iteration += 1
        m_new, u_new, p_new = _em_step(m, u, p, codes, counts, levels)
        u_new = u if fixed_u is not None else u_new
        delta = max(np.abs(m_new - m).max(), np.abs(u_new - u).max(), abs(p_new - p))
        m, u, p, converged = m_new, u_new, p_new, delta <= tol
    loglik = _log_likelihood(m, u, p, codes, counts)
    m, u, p = (m, u, p) if fixed_u is not None else _aligned(m, u, p)
    return FellegiSunterModel(m=m, u=u, p=p, iterations=iteration, converged=converged, loglik=loglik)


def _em_step(
    m: np.ndarray, u: np.ndarray, p: float, codes: np.ndarray, counts: np.ndarray, levels: np.ndarray
) -> tuple[np.ndarray, np.ndarray, float]:
    """One EM iteration on pattern frequencies: E-step posterior match probability per pattern, M-step
    count-weighted level frequencies per class and the match share."""
    n_levels = m.shape[1]
    log_m, log_u = _pattern_log_likelihoods(m, u, codes)
    match = counts * _posterior(p, log_m, log_u)
    nonmatch = counts - match
    p_new = float(np.clip(match.sum() / counts.sum(), PROB_FLOOR, 1.0 - PROB_FLOOR))
    m_new = _floor_normalize(_level_totals(levels, match, n_levels))
    u_new = _floor_normalize(_level_totals(levels, nonmatch, n_levels))
    return m_new, u_new, p_new


def _log_likelihood(m: np.ndarray, u: np.ndarray, p: float, codes: np.ndarray, counts: np.ndarray) -> float:
    """Natural-log likelihood sum_patterns count * log(p P_m + (1 - p) P_u) of the observed frequencies."""
    log_m, log_u = _pattern_log_likelihoods(m, u, codes)
    return float(counts @ np.logaddexp(np.log(p) + log_m, np.log1p(-p) + log_u))


def _edge_arrays(rows: np.ndarray, cols: np.ndarray,
                 weights: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Edges as flat int64 rows, int64 cols and float64 weights; raise ValueError when their lengths differ."""
    rows = np.asarray(rows, dtype=np.int64).reshape(-1)
    cols = np.asarray(cols, dtype=np.int64).reshape(-1)
    weights = np.asarray(weights, dtype=np.float64).reshape(-1)
    if not rows.size == cols.size == weights.size:
        raise ValueError(f"{rows.size} rows, {cols.size} cols and {weights.size} weights differ in length")
    return rows, cols, weights


def _positive_unique_edges(
    rows: np.ndarray, cols: np.ndarray, weights: np.ndarray, n_rows: int, n_cols: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validated edges with weight > 0 only, duplicates (same row and col) reduced to their largest weight."""
    rows, cols, weights = _edge_arrays(rows, cols, weights)
    if rows.size and (rows.min() < 0 or rows.max() >= n_rows or cols.min() < 0 or cols.max() >= n_cols):
        raise ValueError(f"edge endpoints must lie in 0..{n_rows - 1} x 0..{n_cols - 1}")
    if not np.isfinite(weights).all():
        raise ValueError("edge weights must be finite")
    keep = weights > 0
    rows, cols, weights = rows[keep], cols[keep], weights[keep]
    key = rows * n_cols + cols
    order = np.lexsort((-weights, key))
    first = np.ones(order.size, dtype=bool)
    first[1:] = key[order][1:] != key[order][:-1]
    chosen = order[first]
    return rows[chosen], cols[chosen], weights[chosen]


def _augmented_costs(r: np.ndarray, c: np.ndarray, w: np.ndarray, n_r: int, n_c: int) -> sparse.csr_array:
    """(n_r, n_c + n_r) cost matrix whose full matchings (every row matched) are exactly the matchings of the
    edges (r, c), each with cost K n_r - its total weight.

    Columns 0..n_c-1 are the real columns, column n_c + r is row r's private dummy ("r unpaired", cost K);
    a real edge costs K - w. A full matching of a rectangular graph must cover every row but may leave
    columns free, so unpaired columns need no dummies. K = max w + 1 keeps every cost strictly positive
    (scipy ignores explicit zeros).
    """
    k = w.max() + 1.0
    own = np.arange(n_r)
    row = np.concatenate([r, own])
    col = np.concatenate([c, n_c + own])
    cost = np.concatenate([k - w, np.full(n_r, k)])
    return sparse.csr_array((cost, (row, col)), shape=(n_r, n_c + n_r))


def assign_max_weight(
    rows: np.ndarray, cols: np.ndarray, weights: np.ndarray, n_rows: int, n_cols: int
) -> tuple[np.ndarray, np.ndarray]:
    """(row, col) int64 arrays of a one-to-one pairing maximizing the total weight, records allowed to stay
    unpaired (sdc_methods_comparison_chapter.txt sec. 3: Jaro (1989) linear sum assignment model).

    Edge i joins masked record ``rows[i]`` and original record ``cols[i]`` with weight ``weights[i]``; of duplicate
    edges the largest weight counts; edges with weight <= 0 are never taken. Exact: scipy's LAPJVsp
    (``min_weight_full_bipartite_matching``) on the positive edges plus one dummy column per row
    (:func:`_augmented_costs`), restricted to the records that have a positive edge. Pairs come sorted by row.
    """
    from scipy.sparse.csgraph import min_weight_full_bipartite_matching  # 0.09 s a run that pairs nothing skips

    r, c, w = _positive_unique_edges(rows, cols, weights, n_rows, n_cols)
    if w.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    row_ids, r_local = np.unique(r, return_inverse=True)
    col_ids, c_local = np.unique(c, return_inverse=True)
    n_r, n_c = row_ids.size, col_ids.size
    match_r, match_c = min_weight_full_bipartite_matching(_augmented_costs(r_local, c_local, w, n_r, n_c))
    real = match_c < n_c  # scipy returns match_r sorted and row_ids is sorted, so the pairs come sorted by row
    return row_ids[match_r[real]].astype(np.int64), col_ids[match_c[real]].astype(np.int64)


def transport_max_weight(rows: np.ndarray, cols: np.ndarray, weights: np.ndarray, supply: np.ndarray,
                         demand: np.ndarray) -> np.ndarray:
    """Flow of every edge of a maximum-weight transportation between groups of identical records: edge i joins
    row group ``rows[i]`` (``supply`` records) and column group ``cols[i]`` (``demand`` records) at ``weights[i]``
    per pair (sdc_methods_comparison_chapter.txt sec. 3: Jaro (1989) linear sum assignment model, aggregated).

    The one-to-one maximum-weight assignment of the records (:func:`assign_max_weight`) when every record of a
    group has the same edges: pair totals are the flows, at most ``supply`` per row group and ``demand`` per
    column group, records allowed to stay unpaired; edges with weight <= 0 carry no flow. Exact and integral: the
    constraint matrix is totally unimodular and HiGHS dual simplex returns a vertex of the LP. Edges must be
    distinct (row, col) pairs."""
    rows, cols, weights = _edge_arrays(rows, cols, weights)
    supply = np.asarray(supply, dtype=np.float64)
    demand = np.asarray(demand, dtype=np.float64)
    flow = np.zeros(rows.size)
    keep = np.flatnonzero(weights > 0)
    if keep.size == 0:
        return flow
    e = np.arange(keep.size)
    n_r, n_c = supply.size, demand.size
    a = sparse.csr_array((np.ones(2 * keep.size), (np.concatenate([rows[keep], n_r + cols[keep]]),
                                                   np.concatenate([e, e]))), shape=(n_r + n_c, keep.size))
    from scipy.optimize import linprog  # imported here: 0.1 s that commands which never pair records skip

    result = linprog(-weights[keep], A_ub=a, b_ub=np.concatenate([supply, demand]), bounds=(0, None),
                     method="highs-ds")
    if result.status != 0:
        raise RuntimeError(f"transportation LP failed: {result.message}")
    flow[keep] = np.round(result.x)
    return flow


def correct_pairs(rows: np.ndarray, cols: np.ndarray, row_ids: np.ndarray, col_ids: np.ndarray) -> int:
    """Number of assigned pairs linking a masked record to its own original record, row_ids[rows] ==
    col_ids[cols] (sdc_methods_comparison_chapter.txt sec. 3: "percentage of correctly paired records")."""
    rows = np.asarray(rows, dtype=np.int64).reshape(-1)
    cols = np.asarray(cols, dtype=np.int64).reshape(-1)
    if rows.size != cols.size:
        raise ValueError(f"{rows.size} rows but {cols.size} cols")
    return int(np.count_nonzero(np.asarray(row_ids)[rows] == np.asarray(col_ids)[cols]))


def tied_max_credit(rows: np.ndarray, cols: np.ndarray, weights: np.ndarray, row_ids: np.ndarray,
                    col_ids: np.ndarray) -> float:
    """Summed linkage credit of every masked record that takes its maximum-weight candidate: 1/t when its own
    original is among the t candidates sharing its largest weight, else 0 (the decision rule behind the PLD
    column of sdc_methods_comparison_chapter.txt Table 1, sec. 4, found by calibration on the Census file:
    docs/reproduction.md; ties are shared as for DLD_i in docs/metrics.md).

    Edge i joins masked record ``rows[i]`` and original ``cols[i]`` with weight ``weights[i]``; records without
    an edge earn nothing. Equal weights come from equal agreement patterns, so they compare exactly.
    """
    rows, cols, weights = _edge_arrays(rows, cols, weights)
    if rows.size == 0:
        return 0.0
    best = np.full(int(rows.max()) + 1, -np.inf)
    np.maximum.at(best, rows, weights)
    top = weights == best[rows]
    tied = np.bincount(rows[top], minlength=best.size)
    own = top & (np.asarray(row_ids)[rows] == np.asarray(col_ids)[cols])
    return float((1.0 / tied[rows[own]]).sum())
