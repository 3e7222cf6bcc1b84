"""Post-masking optimization: hill climbing that restores the original's moments while holding IL1 near a
target (post_masking_optimization.txt, Algorithm 1, sec. 3), used after any masking method (``postmask``) or
from a random start as a synthetic data generator (``synthetic_postmask``, sec. 5), with moments up to any
order m (sec. 5).

Per block of records (data-driven blocks, as for MDAV), with the original records of the same ids:

- objective E (expr. (7), sec. 3.1): sum over the monomials of degree 1..m (m = 2: x_j, x_j^2, x_j x_k with
  j < k, expr. (3)-(5)) of (average over the masked block - average over the original block)^2, on
  variables standardized with the original file's mean and sd (Algorithm 1, step 1);
- constraint (8): IL1 (expr. (6)) of the optimized block against its nearest original records C(i) within
  [0.99, 1.01] x p x IL1 of the input block;
- steps 8(a)-(i): a random value of a random record of M (the ceil(100 q %) records contributing most to
  IL1) gets Gaussian noise; the change is undone when E does not decrease, or when IL1 is outside the band
  and no closer to the target than before; a try that lowers E but leaves IL1 above its band may take a
  compensating second move (docs/postmask.md, "Reaching TargetE").

Each step costs O(number of monomials holding the changed variable) (O(d) for m = 2) for the moment sums and
E, O(d) for IL1, plus one exact nearest-original search in a k-d tree of the original block (warm-started at
the previous nearest record). Choices the paper leaves open are listed in docs/postmask.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations_with_replacement

import numba
import numpy as np

from sdc_tasks.kdtree import kd_tree, nearest_index, nearest_records, tree_arrays

IL1_BAND = 0.01  # post_masking_optimization.txt expr. (8): IL1 within [0.99, 1.01] x TargetIL1


# ---- monomials and moment sums (post_masking_optimization.txt sec. 3.1 expr. (3)-(5); sec. 5 order m) ----


def monomials(d: int, order: int) -> np.ndarray:
    """Every monomial of degree 1..order in d variables as a row of variable indices padded with -1, shape
    (T, order): for order 2 the d first-order sums (3), the d squares (4) and the d(d-1)/2 cross products (5)."""
    rows = [c for deg in range(1, order + 1) for c in combinations_with_replacement(range(d), deg)]
    out = np.full((len(rows), order), -1, dtype=np.int64)
    for t, c in enumerate(rows):
        out[t, :len(c)] = c
    return out


def terms_by_variable(factors: np.ndarray, d: int) -> tuple[np.ndarray, np.ndarray]:
    """CSR lists (start, terms) of the monomials holding each variable: terms[start[j]:start[j + 1]]."""
    lists = [[t for t in range(len(factors)) if j in factors[t]] for j in range(d)]
    start = np.concatenate([[0], np.cumsum([len(a) for a in lists])]).astype(np.int64)
    terms = np.array([t for a in lists for t in a], dtype=np.int64)
    return start, terms


def moment_sums(z: np.ndarray, factors: np.ndarray) -> np.ndarray:
    """Sum over records of each monomial, S_t = sum_i prod_f z_if (the numerators of expr. (3)-(5))."""
    out = np.empty(len(factors))
    for t, row in enumerate(factors):
        out[t] = np.prod(z[:, row[row >= 0]], axis=1).sum()
    return out


def objective(sums_masked: np.ndarray, n_masked: int, sums_original: np.ndarray, n: int) -> float:
    """E of expr. (7): the squared differences of the averages S'_t / n' and S_t / n, summed."""
    return float(np.sum((sums_masked / n_masked - sums_original / n) ** 2))


# ---- IL1 (post_masking_optimization.txt sec. 3.1 expr. (6)) ----


def il1_contributions(z: np.ndarray, original: np.ndarray, denom: np.ndarray, nearest: np.ndarray) -> np.ndarray:
    """Per record i, sum_j |z_ij - z_C(i),j| / denom_C(i),j (expr. (6) before the 100 / (d n') factor) with
    ``denom`` = |x| / sd of the original records, so each term is |x''_ij - x_C(i),j| / |x_C(i),j| on the
    original scale; terms whose original value is 0 are left out (docs/metrics.md IL1 convention)."""
    ref = original[nearest]
    den = denom[nearest]
    return np.where(den > 0, np.abs(z - ref) / np.where(den > 0, den, 1.0), 0.0).sum(axis=1)


def il1(contributions: np.ndarray, d: int) -> float:
    """IL1 of expr. (6): 100 x the summed record contributions / (d n')."""
    return 100.0 * float(contributions.sum()) / (d * len(contributions))


# ---- Algorithm 1, step 8: the hill climb ----


@numba.njit(cache=True, nogil=True)
def _record_contribution(z, i, original, denom, c):
    """sum_j |z_ij - z_cj| / denom_cj over the terms with denom_cj != 0 (expr. (6) on the original scale)."""
    s = 0.0
    for j in range(z.shape[1]):
        if denom[c, j] > 0:
            s += abs(z[i, j] - original[c, j]) / denom[c, j]
    return s


@numba.njit(cache=True, nogil=True)
def _monomial(z, i, factors, t, j, value):
    """Monomial t of record i with z_ij read as ``value``."""
    out = 1.0
    for f in factors[t]:
        if f < 0:
            break
        out *= value if f == j else z[i, f]
    return out


@numba.njit(cache=True, nogil=True)
def _move_delta(z, i, j, value, factors, term_start, terms, diff, n, delta):
    """The change of E (expr. (7)) when z_ij becomes ``value``; the monomials' average changes go into
    ``delta`` (at the positions of variable j's terms)."""
    d_e = 0.0
    old = z[i, j]
    for a in range(term_start[j], term_start[j + 1]):
        t = terms[a]
        delta[a] = (_monomial(z, i, factors, t, j, value) - _monomial(z, i, factors, t, j, old)) / n
        d_e += (diff[t] + delta[a]) ** 2 - diff[t] ** 2
    return d_e


@numba.njit(cache=True, nogil=True)
def _add_delta(diff, j, term_start, terms, delta, sign):
    """Add (sign +1) or take back (-1) the monomial changes ``delta`` of a move of variable j to ``diff``."""
    for a in range(term_start[j], term_start[j + 1]):
        diff[terms[a]] += sign * delta[a]


@numba.njit(cache=True, nogil=True)
def _squared_sum(diff):
    """E of expr. (7) from the kept average differences."""
    e = 0.0
    for t in range(diff.shape[0]):
        e += diff[t] * diff[t]
    return e


@numba.njit(cache=True, nogil=True)
def _refused(il_new, il_prev, lo, hi, target):
    """Step 8(h): IL1 outside [lo, hi] and no closer to the target than before."""
    return (il_new < lo or il_new > hi) and abs(il_new - target) >= abs(il_prev - target)


@numba.njit(cache=True, nogil=True)
def _climb(z, original, denom, nearest, contrib, members, factors, term_start, terms, diff, e, il_sum, target_il,
           target_e, max_iter, step, by_id, compensate, rng, points, perm, ordered, start, stop, dim, split, left,
           right, box_lo, box_hi):
    """Algorithm 1 step 8 in place on ``z`` (standardized masked block), ``nearest``, ``contrib`` and ``diff``
    (average differences of the monomials, masked - original); returns (iterations, E, IL1 sum). With
    ``compensate``, a try that lowers E but leaves IL1 above the band gets a second value of M moved toward
    its nearest original's, by what brings IL1 back to the target, and the pair is judged by 8(g)-(h) as one
    move (docs/postmask.md, "Reaching TargetE")."""
    n, d = z.shape
    il_scale = 100.0 / (d * n)
    lo, hi = (1.0 - IL1_BAND) * target_il, (1.0 + IL1_BAND) * target_il
    delta = np.empty(terms.shape[0])
    delta2 = np.empty(terms.shape[0])
    it = 0
    while e >= target_e and it < max_iter:
        it += 1
        i = members[rng.integers(0, members.shape[0])]
        j = rng.integers(0, d)
        old = z[i, j]
        new = old + step * rng.standard_normal()
        d_e = _move_delta(z, i, j, new, factors, term_start, terms, diff, n, delta)
        if d_e >= 0.0:  # step 8(g)
            continue
        z[i, j] = new
        c = nearest[i] if by_id else nearest_index(z[i], nearest[i], points, perm, ordered, start, stop, dim, split,
                                                   left, right, box_lo, box_hi)  # step 8(b)
        contrib_new = _record_contribution(z, i, original, denom, c)
        il_prev = il_sum * il_scale
        il_new = (il_sum - contrib[i] + contrib_new) * il_scale  # step 8(d)
        if not _refused(il_new, il_prev, lo, hi, target_il):
            _add_delta(diff, j, term_start, terms, delta, 1.0)
            e = _squared_sum(diff)
            il_sum += contrib_new - contrib[i]
            contrib[i] = contrib_new
            nearest[i] = c
            continue
        if not compensate or il_new < hi:
            z[i, j] = old  # step 8(h), 8(i): the previous nearest record is kept
            continue
        # the compensating move: a random value of M toward its nearest original's, IL1 back to the target
        i2 = members[rng.integers(0, members.shape[0])]
        j2 = rng.integers(0, d)
        c2 = c if i2 == i else nearest[i2]
        old2 = z[i2, j2]
        gap = original[c2, j2] - old2
        if denom[c2, j2] <= 0 or gap == 0.0:
            z[i, j] = old
            continue
        shift = min((il_new - target_il) / il_scale * denom[c2, j2], abs(gap))
        new2 = old2 + (shift if gap > 0 else -shift)
        _add_delta(diff, j, term_start, terms, delta, 1.0)
        d_e2 = _move_delta(z, i2, j2, new2, factors, term_start, terms, diff, n, delta2)
        if d_e + d_e2 >= 0.0:  # step 8(g) on the pair
            _add_delta(diff, j, term_start, terms, delta, -1.0)
            z[i, j] = old
            continue
        z[i2, j2] = new2
        c2_new = nearest[i2] if by_id else nearest_index(z[i2], c2, points, perm, ordered, start, stop, dim, split,
                                                         left, right, box_lo, box_hi)
        contrib2 = _record_contribution(z, i2, original, denom, c2_new)
        if i2 == i:
            pair_sum = il_sum - contrib[i] + contrib2
        else:
            pair_sum = il_sum - contrib[i] + contrib_new - contrib[i2] + contrib2
        if _refused(pair_sum * il_scale, il_prev, lo, hi, target_il):  # step 8(h) on the pair
            z[i2, j2] = old2
            z[i, j] = old
            _add_delta(diff, j, term_start, terms, delta, -1.0)
            continue
        _add_delta(diff, j2, term_start, terms, delta2, 1.0)
        e = _squared_sum(diff)
        il_sum = pair_sum
        if i2 != i:
            contrib[i] = contrib_new
            nearest[i] = c
        contrib[i2] = contrib2
        nearest[i2] = c2_new
    return it, e, il_sum


# ---- Algorithm 1 on one block ----


@dataclass(frozen=True)
class PostMaskResult:
    """The optimized records and the run's figures: E (expr. (7), standardized variables) and IL1 (expr. (6),
    percent, original scale) before and after, the IL1 target, the number of perturbations tried and the
    size of M."""

    values: np.ndarray
    e_initial: float
    e_final: float
    il1_initial: float
    il1_target: float
    il1_final: float
    iterations: int
    members: int


def post_mask(original: np.ndarray, masked: np.ndarray, p: float, q: float, target_e: float, max_iter: int,
              perturbation_sd: float, rng: np.random.Generator, order: int = 2, center: np.ndarray | None = None,
              scale: np.ndarray | None = None, correspondence: str = "nearest",
              compensate: bool = True) -> PostMaskResult:
    """PostMaskOptim(X, X', p, q, TargetE) of post_masking_optimization.txt Algorithm 1 on one block:
    ``original`` X (n, d) and ``masked`` X' (n', d); variables standardized with ``center`` and ``scale``
    (default: X's own mean and population sd; an sd of 0 counts as 1). Records outside M keep their input
    values exactly. ``order`` m adds the monomials of degree 3..m to E (sec. 5). ``correspondence``
    "nearest" is the paper's C(i), the nearest original record; "id" pairs masked record i with original
    record i (n' = n), the correspondence of docs/metrics.md's IL1. ``compensate`` adds the compensating
    second move of ``_climb`` (False: the paper's single moves only)."""
    x = np.ascontiguousarray(original, dtype=np.float64)
    xm = np.ascontiguousarray(masked, dtype=np.float64)
    if x.ndim != 2 or xm.ndim != 2 or x.shape[1] != xm.shape[1]:
        raise ValueError(f"original {x.shape} and masked {xm.shape} must be 2-D with the same variables")
    if len(x) == 0 or len(xm) == 0:
        raise ValueError("post-masking optimization needs at least one original and one masked record")
    if correspondence not in ("nearest", "id"):
        raise ValueError(f"correspondence must be 'nearest' or 'id', not {correspondence!r}")
    by_id = correspondence == "id"
    if by_id and len(x) != len(xm):
        raise ValueError(f"correspondence 'id' needs as many masked as original records ({len(xm)} vs {len(x)})")
    center = x.mean(axis=0) if center is None else np.asarray(center, dtype=np.float64)
    scale = x.std(axis=0) if scale is None else np.asarray(scale, dtype=np.float64)
    scale = np.where(scale > 0, scale, 1.0)
    zo = (x - center) / scale  # step 1
    z = (xm - center) / scale
    n, d = z.shape
    tree = kd_tree(zo)
    denom = np.abs(x) / scale  # expr. (6) on the original scale (docs/postmask.md)
    nearest = np.arange(n, dtype=np.int64) if by_id else nearest_records(tree, z)  # steps 2, 6
    contrib = il1_contributions(z, zo, denom, nearest)
    il1_initial = il1(contrib, d)
    target_il = p * il1_initial  # step 3
    size = min(n, max(1, math.ceil(q * n)))
    members = np.sort(np.argsort(-contrib, kind="stable")[:size])  # step 5
    factors = monomials(d, order)
    term_start, terms = terms_by_variable(factors, d)
    diff = moment_sums(z, factors) / n - moment_sums(zo, factors) / len(zo)
    e_initial = float(np.sum(diff ** 2))  # step 7
    iterations, e_final, il_sum = _climb(z, zo, denom, nearest, contrib, members, factors, term_start, terms, diff,
                                         e_initial, il1_initial * d * n / 100.0, target_il, float(target_e),
                                         int(max_iter), float(perturbation_sd), by_id, compensate, rng, zo,
                                         *tree_arrays(tree))
    values = xm.copy()
    values[members] = z[members] * scale + center  # step 9
    return PostMaskResult(values, e_initial, float(e_final), il1_initial, target_il, 100.0 * il_sum / (d * n),
                          int(iterations), size)


def random_start(original: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """A random data set of n records for the synthetic generator (post_masking_optimization.txt sec. 5):
    each variable drawn independently from a normal with the original's mean and population sd."""
    x = np.asarray(original, dtype=np.float64)
    return x.mean(axis=0) + x.std(axis=0) * rng.standard_normal((n, x.shape[1]))
