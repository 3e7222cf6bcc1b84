"""Tests for the metric kernels and the evaluation graph against independent values (docs/metrics.md).

Every expected value is either worked out by hand (arithmetic in the comments) or computed by a plain
numpy / fractions reference written here from the docs/metrics.md formulas; nothing is checked by calling the
code under test twice and comparing it with itself.
"""

from __future__ import annotations

import math
import operator
import warnings
from fractions import Fraction

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sdc_tasks.errors import InputError
from sdc_tasks.evaluation.measures import evaluate
from sdc_tasks.evaluation.pairing import with_pairing_ids
from sdc_tasks.kdtree import kd_tree
from sdc_tasks.metrics.information_loss import cell_sums, information_loss
from sdc_tasks.metrics.risk import (
    exact_distances,
    interval_hits,
    last_positions,
    linkage_counts,
    linkage_credit,
    scores,
    sdid_hits,
    window_hits,
)
from sdc_tasks.stats.moments import blocks_moments, column_sums, frame_moments, moments_of, tree_merge

HYPO = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module", autouse=True)
def synchronous_dask():
    """Run every Dask computation of this module in the calling thread (deterministic and fast)."""
    with dask.config.set(scheduler="synchronous"), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # dask's "mixed collections" notice
        yield


# ----------------------------------------------------------------------------------------------------------
# helpers: frames and plain references
# ----------------------------------------------------------------------------------------------------------

def frame(values: np.ndarray, columns: list[str], ids=None) -> pd.DataFrame:
    """A pandas frame with an int64 ``id`` column (0..n-1 unless given) and float columns."""
    values = np.asarray(values, dtype=np.float64)
    df = pd.DataFrame(values, columns=columns)
    df.insert(0, "id", np.arange(len(df), dtype=np.int64) if ids is None else np.asarray(ids, dtype=np.int64))
    return df


def run_evaluate(orig: pd.DataFrame, masked: pd.DataFrame, variables, key_vars, parts: int = 1,
                 masked_parts: int | None = None, families=("il", "dld", "id"), pairing: str = "auto") -> dict:
    """evaluate() on Dask frames made from pandas ones with the given numbers of partitions."""
    return evaluate(dd.from_pandas(orig, npartitions=parts),
                    dd.from_pandas(masked, npartitions=masked_parts or parts),
                    "id", list(variables), list(key_vars), families, pairing)


def ref_moments(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Plain numpy mean vector and centred co-moment matrix sum (x - mean)(x - mean)^T."""
    x = np.asarray(x, dtype=np.float64)
    mean = x.mean(axis=0)
    d = x - mean
    return mean, np.einsum("ni,nj->ij", d, d)


def assert_moments_close(mo, mean, comoment, n, rtol):
    """Sketch equals the reference: means relative to |mean| + sd, co-moments relative to sqrt(C_ii C_jj)."""
    assert mo.n == n
    sd = np.sqrt(np.diag(comoment) / n)
    assert np.all(np.abs(mo.mean - mean) <= rtol * (np.abs(mean) + sd) + 1e-300)
    scale = np.sqrt(np.outer(np.diag(comoment), np.diag(comoment)))
    assert np.all(np.abs(mo.comoment - comoment) <= rtol * scale + 1e-300)


def brute_dld(x: np.ndarray, xm: np.ndarray, own: np.ndarray) -> tuple[float, float]:
    """DLD and DLD2 (percent) by an O(n n') brute force, straight from docs/metrics.md.

    Both files standardized with the original's mean and population sd: z = (x - mean) / sd. The distance
    between z'_i and z_k only involves (x'_i - x_k) / sd, so it is computed from raw differences (the mean
    cancels); equal raw distances then give bit-equal standardized distances and ties are exact. A tie is
    |d - d_own| <= 1e-9 d_own. The own original takes the ranks closer+1 .. closer+tied each with
    probability 1/tied, so 'nearest' earns 1/tied if closer == 0 and '2nd nearest' earns 1/tied if
    closer + 1 <= 2 <= closer + tied.
    """
    sd = x.std(axis=0)  # population sd (ddof=0)
    sd = np.where(sd > 0, sd, 1.0)
    diff = (xm[:, None, :] - x[None, :, :]) / sd
    d = np.sqrt((diff ** 2).sum(axis=2))
    d_own = d[np.arange(len(xm)), own][:, None]
    tol = 1e-9 * d_own
    closer = (d < d_own - tol).sum(axis=1)
    tied = (np.abs(d - d_own) <= tol).sum(axis=1)
    first = np.where(closer == 0, 1.0 / tied, 0.0)
    second = np.where((closer + 1 <= 2) & (2 <= closer + tied), 1.0 / tied, 0.0)
    return 100.0 * first.mean(), 100.0 * second.mean()


def brute_id(x: np.ndarray, xm: np.ndarray) -> tuple[list[float], float]:
    """ID_1..ID_10 and SDID (percent) over all columns, by loops, straight from docs/metrics.md.

    The interval is taken in the sorted masked column: R = (number of masked values <= x') - 1, the last
    occurrence of x'; with W = ceil(p n / 100) it runs from sorted[max(0, R - W)] to sorted[min(n - 1, R + W - 1)].
    SDID: |x - x'| <= 0.05 S_j, S_j the original population sd.
    """
    n, p = x.shape
    hits = np.zeros(10)
    sdid = 0
    for j in range(p):
        s = sorted(xm[:, j].tolist())
        sd = float(np.sqrt(np.mean((x[:, j] - x[:, j].mean()) ** 2)))
        for i in range(n):
            r = sum(1 for v in s if v <= xm[i, j]) - 1
            for q, pct in enumerate(range(1, 11)):
                w = math.ceil(pct * n / 100)
                if s[max(0, r - w)] <= x[i, j] <= s[min(n - 1, r + w - 1)]:
                    hits[q] += 1
            sdid += abs(x[i, j] - xm[i, j]) <= 0.05 * sd
    return list(100.0 * hits / (n * p)), 100.0 * sdid / (n * p)


def float_items(d: dict) -> dict:
    """The float-valued entries of a metrics dict."""
    return {k: v for k, v in d.items() if isinstance(v, float)}


def assert_same_metrics(a: dict, b: dict, rel=1e-9):
    """Same keys and every float equal to ``rel`` relative (absolute 1e-12 near zero)."""
    assert set(a) == set(b)
    for k, v in float_items(a).items():
        assert b[k] == pytest.approx(v, rel=rel, abs=1e-12), k


# ----------------------------------------------------------------------------------------------------------
# 1. Moments
# ----------------------------------------------------------------------------------------------------------

@HYPO
@given(seed=st.integers(0, 2 ** 32 - 1), n=st.integers(1, 200), p=st.integers(1, 4),
       cuts=st.lists(st.floats(0, 1), max_size=6))
def test_merge_of_random_splits_equals_whole(seed, n, p, cuts):
    rng = np.random.default_rng(seed)
    # correlated columns, sd of order 1..10, means up to ~150 (mean/sd well below 1e3: rounding of the mean
    # enters the co-moments at eps * mean / sd, so 1e-12 is a fair bound)
    mix = np.eye(p) + 0.3 * np.tril(rng.normal(size=(p, p)), -1)
    x = rng.normal(size=(n, p)) @ mix * rng.uniform(1.0, 10.0, size=p) + rng.normal(size=p) * 50.0
    bounds = sorted({0, n, *(int(c * n) for c in cuts)})
    merged = blocks_moments([x[lo:hi] for lo, hi in zip(bounds[:-1], bounds[1:])])
    assert_identical(merged, moments_of(x))
    mean, comoment = ref_moments(x)
    assert_moments_close(merged, mean, comoment, n, 1e-12)
    assert_moments_close(moments_of(x), mean, comoment, n, 1e-12)
    # population covariance divides by n (docs/metrics.md: moments divide by n)
    np.testing.assert_allclose(merged.cov, np.cov(x.T, bias=True).reshape(p, p), rtol=1e-10, atol=1e-10)


def assert_identical(a, b):
    """Two sketches hold bit-identical counts, means and sums."""
    assert a.n == b.n and a.scaled.keys() == b.scaled.keys()
    np.testing.assert_array_equal(a.mean, b.mean)
    np.testing.assert_array_equal(a.exponent, b.exponent)
    for key in a.scaled:
        np.testing.assert_array_equal(a.scaled[key], b.scaled[key])


def exact_cov(x: np.ndarray) -> list[list[Fraction]]:
    """Population covariance matrix of the float values in ``x``, in exact rational arithmetic."""
    n, p = x.shape
    cols = [[Fraction(float(v)) for v in x[:, j]] for j in range(p)]
    means = [sum(c) / n for c in cols]
    return [[sum((a - means[i]) * (b - means[j]) for a, b in zip(cols[i], cols[j])) / n for j in range(p)]
            for i in range(p)]


def test_shifted_column_keeps_centred_covariance():
    rng = np.random.default_rng(7)
    base = rng.normal(size=(50, 2)) * [1.0, 2.0]
    base[:, 1] += 0.5 * base[:, 0]
    shifted = base.copy()
    shifted[:, 1] += 1e9  # stored values round to multiples of 2**-23 ~ 1.2e-7
    exact = np.array(exact_cov(shifted), dtype=np.float64)
    exact_base = np.array(exact_cov(base), dtype=np.float64)
    # the rounding of the shift moves the true covariance by ~1e-7 relative only
    np.testing.assert_allclose(exact, exact_base, rtol=1e-6)
    whole = moments_of(shifted)
    halves = blocks_moments([shifted[:17], shifted[17:]])
    tree = blocks_moments([shifted[i:i + 5] for i in range(0, 50, 5)])
    for mo in (whole, halves, tree):
        assert mo.n == 50
        np.testing.assert_allclose(mo.cov, exact, rtol=1e-6)
        np.testing.assert_allclose(mo.cov, exact_base, rtol=1e-6)
        assert abs(mo.mean[1] - 1e9 - base[:, 1].mean()) < 1e-5
    # the naive raw-power-sum formula would be off by orders of magnitude here (sanity of the test)
    naive = (shifted[:, 1] ** 2).mean() - shifted[:, 1].mean() ** 2
    assert abs(naive - exact[1, 1]) > 1e-3 * exact[1, 1]


@pytest.mark.parametrize("split_every", [2, 3, 8])
def test_tree_merge_over_1_to_20_partitions(split_every):
    rng = np.random.default_rng(11)
    x = rng.normal(size=(97, 3)) * [1.0, 10.0, 0.1] + [5.0, -300.0, 10.0]
    mean, comoment = ref_moments(x)
    whole = moments_of(x)
    exact = [sum(map(Fraction, x[:, j].tolist()), Fraction(0)) for j in range(3)]
    for k in range(1, 21):
        chunks = [*np.array_split(x, k), np.empty((0, 3))]  # an empty partition too
        sums = dask.compute(tree_merge([column_sums(c) for c in chunks], operator.add, split_every=split_every))[0]
        assert sums.n == 97 and sums.total.fractions() == exact
        assert_identical(blocks_moments(chunks), whole)
    assert_moments_close(whole, mean, comoment, 97, 1e-12)
    with pytest.raises(ValueError):
        tree_merge([], operator.add)


@pytest.mark.parametrize("parts", [1, 3, 7])
def test_moments_graph_on_dask_frame(parts):
    rng = np.random.default_rng(3)
    x = rng.normal(size=(60, 2)) + [1.0, 2.0]
    df = frame(x, ["a", "b"])
    mo = frame_moments(dd.from_pandas(df, npartitions=parts), ["b", "a"])
    mean, comoment = ref_moments(x[:, ::-1])
    assert_moments_close(mo, mean, comoment, 60, 1e-12)


# ----------------------------------------------------------------------------------------------------------
# 2. Information loss
# ----------------------------------------------------------------------------------------------------------
# Hand case, 4 records x 2 variables:
#   a  = [1, 1, 3, 3]   mean 2, deviations (-1,-1,1,1)          v_aa = 4/4 = 1
#   b  = [0, 8, 6, 14]  mean 7, deviations (-7,1,-1,7)          v_bb = 100/4 = 25
#   v_ab = (7 - 1 - 1 + 7)/4 = 3                                  r = 3 / sqrt(1 * 25) = 0.6
#   a' = [1, 2, 2, 3]   mean 2, deviations (-1,0,0,1)            v'_aa = 2/4 = 1/2
#   b' = [0, 8, 9, 7]   mean 6, deviations (-6,2,3,1)            v'_bb = 50/4 = 25/2
#   v'_ab = (6 + 0 + 0 + 1)/4 = 7/4                               r' = (7/4) / sqrt(1/2 * 25/2) = 0.7
# IL1: cell b=0 is a zero cell (left out, IL1_zero_cells = 1); the 7 others:
#   a: 0/1, 1/1, 1/3, 0/3   b: 0/8, 3/6, 7/14   sum = 1 + 1/3 + 1/2 + 1/2 = 7/3  ->  IL1 = 100 (7/3)/7 = 100/3
# IL2: a |2-2|/2 = 0, b |7-6|/7 = 1/7               -> IL2 = 100 (1/14)
# IL3: aa |1-1/2|/1 = 1/2, ab |3-7/4|/3 = 5/12, bb |25-25/2|/25 = 1/2  -> IL3 = 100 (17/12)/3 = 100 * 17/36
# IL4: aa 1/2, bb 1/2                                 -> IL4 = 50
# IL5: |0.6 - 0.7| = 0.1                              -> IL5 = 10
A = np.array([[1, 0], [1, 8], [3, 6], [3, 14]], dtype=float)
AM = np.array([[1, 0], [2, 8], [2, 9], [3, 7]], dtype=float)
IL_A = {"IL1": 100 / 3, "IL2": 100 / 14, "IL3": 100 * 17 / 36, "IL4": 50.0, "IL5": 10.0}

# Constant column c = [5,5,5,5] added, masked c' = [4,5,6,5] (mean 5, v'_cc = 2/4):
# IL1: 4 more nonzero cells 1/5, 0, 1/5, 0     -> IL1 = 100 (7/3 + 2/5) / 11 = 100 * 41/165
# IL2: c term |5-5|/5 = 0                      -> IL2 = 100 (0 + 1/7 + 0)/3 = 100/21
# IL3: v_ac = v_bc = v_cc = 0: 3 undefined terms, the others as above   -> IL3 = 100 * 17/36
# IL4: v_cc = 0: 1 undefined term                                       -> IL4 = 50
# IL5: r_ac, r_bc undefined (s_c = 0): 2 undefined terms, r_ab as above -> IL5 = 10
IL_B = {"IL1": 100 * 41 / 165, "IL2": 100 / 21, "IL3": 100 * 17 / 36, "IL4": 50.0, "IL5": 10.0}


def check_il(out: dict, expected: dict):
    for key, value in expected.items():
        assert out[key] == pytest.approx(value, rel=1e-12), key
    assert out["IL"] == pytest.approx(sum(expected.values()) / 5, rel=1e-12)
    assert out["IL_missing_measures"] == 0.0
    assert all(math.isfinite(v) for v in float_items(out).values())


def test_information_loss_hand_case_kernels():
    out = information_loss(cell_sums(A, AM), moments_of(A), moments_of(AM))
    check_il(out, IL_A)
    assert out["IL1_zero_cells"] == 1.0
    assert not any(k.endswith("_undefined_terms") for k in out)


@pytest.mark.parametrize("parts", [1, 2])
def test_information_loss_hand_case_evaluate(parts):
    out = run_evaluate(frame(A, ["a", "b"]), frame(AM, ["a", "b"]), ["a", "b"], [], parts, families=("il",))
    check_il(out, IL_A)
    assert out["IL1_zero_cells"] == 1.0
    assert out["n"] == 4 and out["n_masked"] == 4 and out["p"] == 2


@pytest.mark.parametrize("parts", [1, 2])
def test_information_loss_constant_column(parts):
    x = np.column_stack([A, [5, 5, 5, 5]])
    xm = np.column_stack([AM, [4, 5, 6, 5]])
    out = run_evaluate(frame(x, list("abc")), frame(xm, list("abc")), list("abc"), [], parts, families=("il",))
    check_il(out, IL_B)
    assert out["IL1_zero_cells"] == 1.0
    assert out["IL3_undefined_terms"] == 3.0
    assert out["IL4_undefined_terms"] == 1.0
    assert out["IL5_undefined_terms"] == 2.0
    assert "IL2_undefined_terms" not in out


def test_information_loss_all_terms_undefined_is_omitted_not_nan():
    # one constant variable: IL3, IL4 have only the v_cc = 0 term, IL5 has no pair at all; IL1, IL2 defined
    # IL1 = 100 (1/5 + 0 + 1/5 + 0)/4 = 10, IL2 = 0 -> IL = mean(10, 0) = 5
    x = np.array([[5.0], [5.0], [5.0], [5.0]])
    xm = np.array([[4.0], [5.0], [6.0], [5.0]])
    out = information_loss(cell_sums(x, xm), moments_of(x), moments_of(xm))
    assert out["IL1"] == pytest.approx(10.0) and out["IL2"] == 0.0
    assert "IL3" not in out and "IL4" not in out and "IL5" not in out
    assert out["IL3_undefined_terms"] == 1.0 and out["IL4_undefined_terms"] == 1.0
    assert out["IL_missing_measures"] == 3.0
    assert out["IL"] == pytest.approx(5.0)
    assert all(math.isfinite(v) for v in out.values())


@pytest.mark.parametrize("parts", [1, 3])
def test_identical_files_have_zero_information_loss(parts):
    rng = np.random.default_rng(5)
    x = rng.normal(size=(40, 3)) * [1.0, 100.0, 0.01] + [3.0, 0.0, -7.0]
    df = frame(x, list("abc"))
    out = run_evaluate(df, df.copy(), list("abc"), ["a", "b"], parts)
    for key in ("IL1", "IL2", "IL3", "IL4", "IL5", "IL"):
        assert out[key] == pytest.approx(0.0, abs=1e-9), key
    for p in range(1, 11):
        assert out[f"ID_{p}"] == 100.0
    assert out["SDID"] == 100.0
    # continuous data, no duplicates: every masked record is its own original -> DLD 100, DLD2 0
    assert out["DLD_1"] == out["DLD_2"] == out["DLD"] == 100.0
    assert out["DLD2_1"] == out["DLD2_2"] == 0.0


def test_microaggregation_preserves_means():
    rng = np.random.default_rng(9)
    x = rng.gamma(2.0, 10.0, size=(60, 2)) + 1.0
    xm = x.copy()
    for j in range(2):  # univariate microaggregation, groups of 3 consecutive ranks replaced by their mean
        order = np.argsort(x[:, j], kind="stable")
        for g in range(0, 60, 3):
            rows = order[g:g + 3]
            xm[rows, j] = x[rows, j].mean()
    out = run_evaluate(frame(x, ["a", "b"]), frame(xm, ["a", "b"]), ["a", "b"], [], 2, families=("il",))
    assert out["IL2"] == pytest.approx(0.0, abs=1e-9)
    assert out["IL1"] > 0 and out["IL4"] > 0  # values and variances do change
    # IL4 against a plain numpy reference: 100 mean_j |v_jj - v'_jj| / v_jj with population variances
    v, vm = x.var(axis=0), xm.var(axis=0)
    assert out["IL4"] == pytest.approx(100 * np.mean(np.abs(v - vm) / v), rel=1e-9)
    assert out["IL1"] == pytest.approx(100 * np.mean(np.abs(x - xm) / np.abs(x)), rel=1e-9)


# ----------------------------------------------------------------------------------------------------------
# 3. Distance-based linkage: tie rule
# ----------------------------------------------------------------------------------------------------------

def credits(originals, masked, own_rows) -> tuple[np.ndarray, np.ndarray]:
    """DLD and DLD2 credits of each masked point (already standardized) against the original points."""
    originals = np.asarray(originals, dtype=np.float64)
    if originals.ndim == 1:
        originals = originals[:, None]
    masked = np.asarray(masked, dtype=np.float64).reshape(-1, originals.shape[1])
    tree = kd_tree(originals)
    closer, tied = linkage_counts(tree, masked, exact_distances(masked, originals[list(own_rows)]))
    return linkage_credit(closer, tied, 1), linkage_credit(closer, tied, 2)


def test_tie_rule_hand_cases_1d():
    orig = [0.0, 2.0, 10.0, 3.5]
    # (a) masked 0.25, own 0: distances 0.25 (own), 1.75, 9.75, 3.25 -> uniquely nearest: DLD 1, DLD2 0
    # (b) masked 1.0, own 0: distances 1 (own), 1 (x=2), 9, 2.5 -> tied t=2 at the minimum: 1/2 and 1/2
    # (c) masked 1.5, own 0: distances 1.5 (own), 0.5 (x=2) -> one strictly closer, own 2nd: DLD 0, DLD2 1
    # (c') masked 3.0, own 0: distances 3 (own), 1 (x=2), 0.5 (x=3.5) -> own 3rd: 0 and 0
    dld, dld2 = credits(orig, [0.25, 1.0, 1.5, 3.0], [0, 0, 0, 0])
    np.testing.assert_array_equal(dld, [1.0, 0.5, 0.0, 0.0])
    np.testing.assert_array_equal(dld2, [0.0, 0.5, 1.0, 0.0])


def test_tie_rule_duplicates():
    # (d) 3 identical originals at 4 and the masked record equal to them: t = 3 at distance 0 -> 1/3, 1/3
    orig = [4.0, 4.0, 4.0, 0.0, 9.0, 4.5]
    dld, dld2 = credits(orig, [4.0, 4.0, 4.0], [0, 1, 2])
    np.testing.assert_allclose(dld, [1 / 3] * 3, rtol=1e-15)
    np.testing.assert_allclose(dld2, [1 / 3] * 3, rtol=1e-15)
    # masked 4.2, own 4.5 (distance 0.3); the three 4's are at 0.2 -> 3 strictly closer: 0 and 0
    dld, dld2 = credits(orig, [4.2], [5])
    assert dld[0] == 0.0 and dld2[0] == 0.0
    # masked 4.4, own one of the 4's (distance 0.4); 4.5 is at 0.1 -> 1 closer, t = 3 tied: DLD 0, DLD2 1/3
    dld, dld2 = credits(orig, [4.4], [1])
    assert dld[0] == 0.0 and dld2[0] == pytest.approx(1 / 3, rel=1e-15)


def test_tie_rule_more_than_three_tied_2d():
    # (e) originals on the circle of radius 5 around the masked point (0, 0): (3,4), (5,0), (-4,3), (0,-5),
    # (-3,-4) all at distance exactly 5 (squares are exact integers), plus far points. t = 5 > 3 nearest
    # returned by the tree, so only the fallback can count them: DLD 1/5, DLD2 1/5.
    orig = [(3, 4), (5, 0), (-4, 3), (0, -5), (-3, -4), (20, 20), (-30, 1), (0, 40)]
    dld, dld2 = credits(orig, [(0, 0)], [0])
    assert dld[0] == pytest.approx(1 / 5, rel=1e-15) and dld2[0] == pytest.approx(1 / 5, rel=1e-15)
    # one more original strictly inside the circle at (1, 1): 1 closer, t = 5 tied -> DLD 0, DLD2 1/5
    dld, dld2 = credits(orig + [(1, 1)], [(0, 0)], [2])
    assert dld[0] == 0.0 and dld2[0] == pytest.approx(1 / 5, rel=1e-15)
    # two strictly inside: own is at rank >= 3 -> 0, 0
    dld, dld2 = credits(orig + [(1, 1), (-1, 0)], [(0, 0)], [2])
    assert dld[0] == 0.0 and dld2[0] == 0.0
    # 5 duplicates of the own record, masked equal to them: t = 5 at distance 0 -> 1/5 each
    dup = [(2, 2)] * 5 + [(0, 0), (9, 9)]
    dld, dld2 = credits(dup, [(2, 2)] * 5, range(5))
    np.testing.assert_allclose(dld, [0.2] * 5, rtol=1e-15)
    np.testing.assert_allclose(dld2, [0.2] * 5, rtol=1e-15)


def test_tie_rule_symmetric_tie_after_standardization_in_evaluate():
    # 1 key variable, originals 0..9 (mean 4.5, population sd sqrt(8.25)); masked = original + 1 for records
    # 1..7, unchanged for records 0, 8, 9. For records 1..7 the masked value x+1 is at distance 1/sd from its
    # own original x and from the original x+2, while the original x+1 itself is at 0 (strictly closer):
    # closer = 1, tied = 2 -> DLD 0, DLD2 1/2. Records 0, 8, 9: own original at distance 0, unique -> 1, 0.
    # DLD_1 = 100 * 3/10 = 30, DLD2_1 = 100 * (7 * 1/2)/10 = 35. The ties must survive the standardization
    # (the rounding of (x - mean)/sd differs between x and x+2), for any partitioning.
    x = np.arange(10.0)[:, None]
    xm = x.copy()
    xm[1:8] += 1.0
    for parts in (1, 2, 3, 5):
        out = run_evaluate(frame(x, ["a"]), frame(xm, ["a"]), ["a"], ["a"], parts, families=("dld",))
        assert out["DLD_1"] == pytest.approx(30.0, rel=1e-12), parts
        assert out["DLD2_1"] == pytest.approx(35.0, rel=1e-12), parts


def test_distances_do_not_depend_on_memory_layout():
    # pandas hands out Fortran-ordered blocks; the own original must come out at exactly the distance of
    # itself, or a record is counted as strictly closer than itself. Continuous data, no ties: DLD_3 is the
    # share of masked records whose nearest original (plain argmin) is their own.
    x, xm = random_files(21)
    z, zm = (x - x.mean(0)) / x.std(0), (xm - x.mean(0)) / x.std(0)
    d = np.sqrt(((zm[:, None, :] - z[None, :, :]) ** 2).sum(axis=2))
    nearest_is_own = (d.argmin(axis=1) == np.arange(len(x))).sum()
    tree = kd_tree(z)
    for a, b in ((zm, z), (np.asfortranarray(zm), np.asfortranarray(z))):
        closer, tied = linkage_counts(tree, a, exact_distances(a, b))
        # the count stops at two strictly closer originals; below that the own original is found and tied with
        # itself
        assert np.all((tied >= 1) | (closer == 2))
        assert linkage_credit(closer, tied, 1).sum() == nearest_is_own


def random_files(seed: int, n: int = 300, integer: bool = False):
    """Original and masked (original + noise) files with 3 variables; rounded to integers if asked."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3)) * [3.0, 1.5, 40.0] + [10.0, -4.0, 1000.0]
    xm = x + rng.normal(size=(n, 3)) * [1.0, 0.8, 15.0]
    if integer:  # many exact duplicates among originals and many masked records equal to originals
        x, xm = np.round(x / [1, 1, 20]) * [1, 1, 20], np.round(xm / [1, 1, 20]) * [1, 1, 20]
    return x, xm


@pytest.mark.parametrize("integer", [False, True])
@pytest.mark.parametrize("parts", [1, 4])
def test_dld_matches_brute_force(integer, parts):
    x, xm = random_files(21 + integer, integer=integer)
    if integer:
        assert len(np.unique(x[:, 0])) < 30  # the duplicates / fallback path are really exercised
    cols = ["k1", "k2", "k3"]
    orig, masked = frame(x, cols), frame(xm, cols)
    # masked rows in another order than the original: pairing is by id, not by position
    masked = masked.sample(frac=1.0, random_state=4).reset_index(drop=True)
    own = np.arange(len(x))
    for m in (1, 2, 3):
        out = run_evaluate(orig, masked, cols, cols[:m], parts, families=("dld",))
        expected = [brute_dld(x[:, :i], xm[:, :i], own) for i in range(1, m + 1)]
        for i, (dld, dld2) in enumerate(expected, start=1):
            assert out[f"DLD_{i}"] == pytest.approx(dld, rel=1e-9, abs=1e-9), (m, i)
            assert out[f"DLD2_{i}"] == pytest.approx(dld2, rel=1e-9, abs=1e-9), (m, i)
        assert out["DLD"] == pytest.approx(np.mean([e[0] for e in expected]), rel=1e-9)
        assert f"DLD_{m + 1}" not in out


# ----------------------------------------------------------------------------------------------------------
# 4. Interval disclosure
# ----------------------------------------------------------------------------------------------------------

def test_interval_hits_hand_case():
    # sorted masked column s = 10, 20, 20, 30, ..., 90 (n = 10, a tie at 20); W = ceil(p n / 100): p = 1, 10 -> 1,
    # p = 11, 15 -> 2. R = (masked values <= x') - 1, the last occurrence; interval [s[R - W], s[R + W - 1]].
    #  x    x'   R   W=1 interval          in?   W=2 interval           in?
    #  10   10   0   [s0, s0] = [10, 10]    yes   [s0, s1] = [10, 20]    yes
    #  15   20   2   [s1, s2] = [20, 20]    no    [s0, s3] = [10, 30]    yes
    #  20   20   2   [20, 20]               yes   [10, 30]               yes
    #  25   30   3   [s2, s3] = [20, 30]    yes   [s1, s4] = [20, 40]    yes
    #  45   40   4   [s3, s4] = [30, 40]    no    [s2, s5] = [20, 50]    yes
    #  35   50   5   [s4, s5] = [40, 50]    no    [s3, s6] = [30, 60]    yes
    #  80   60   6   [s5, s6] = [50, 60]    no    [s4, s7] = [40, 70]    no
    #  62   70   7   [s6, s7] = [60, 70]    yes   [s5, s8] = [50, 80]    yes
    #  95   80   8   [s7, s8] = [70, 80]    no    [s6, s9] = [60, 90]    no
    # 100   90   9   [s8, s9] = [80, 90]    no    [s7, s9] = [70, 90]    no
    # hits: W = 1 -> 4, W = 2 -> 7 (a floor(p n / 100) would give W = 0 for p = 1 and W = 1 for p = 11, 15)
    xm = np.array([10, 20, 20, 30, 40, 50, 60, 70, 80, 90], dtype=float)
    x = np.array([10, 15, 20, 25, 45, 35, 80, 62, 95, 100], dtype=float)
    np.testing.assert_array_equal(interval_hits(np.sort(xm), x, xm, percents=(1, 10, 11, 15)), [4, 4, 7, 7])
    shuffled = np.random.default_rng(3).permutation(10)  # the records' order does not matter
    np.testing.assert_array_equal(interval_hits(np.sort(xm), x[shuffled], xm[shuffled], percents=(1, 15)), [4, 7])
    by_masked = np.array([0, 2, 1, 3, 4, 5, 6, 7, 8, 9])  # a caller's order of xm, its tie the other way round
    np.testing.assert_array_equal(interval_hits(np.sort(xm), x, xm, percents=(1, 15), order=by_masked), [4, 7])


def _windows_brute_force(column: np.ndarray, x: np.ndarray, r: np.ndarray, widths: list[int]) -> list[int]:
    """docs/metrics.md ID_p read literally: per width W, the records whose x lies within the sorted column's values at
    positions R - W .. R + W - 1, clipped to the column; one window of one record at a time."""
    n = len(column)
    return [sum(column[max(ri - w, 0)] <= xi <= column[min(ri + w - 1, n - 1)] for xi, ri in zip(x, r))
            for w in widths]


@HYPO
@given(st.lists(st.integers(0, 12), min_size=1, max_size=40), st.lists(st.integers(-1, 13), min_size=1, max_size=40),
       st.lists(st.integers(1, 45), min_size=1, max_size=7, unique=True), st.integers(0, 2**32 - 1))
def test_window_hits_count_every_window_whatever_the_widths_order(column, x, widths, seed):
    rng = np.random.default_rng(seed)
    column = np.sort(np.asarray(column, dtype=np.float64))
    x = np.asarray(x, dtype=np.float64)
    x[rng.random(len(x)) < 0.1] = np.nan  # never inside a window
    r = np.sort(rng.integers(0, len(column), len(x)))
    expected = _windows_brute_force(column, x, r, widths)
    whole = np.zeros(1, dtype=np.int64)
    got = window_hits(column, whole, whole, len(column), x, r, np.asarray(widths, dtype=np.int64))
    np.testing.assert_array_equal(got, expected)
    cuts = np.sort(rng.choice(np.arange(1, len(column)), size=min(3, len(column) - 1), replace=False))
    starts = np.concatenate([[0], cuts]).astype(np.int64)  # the column as pieces laid end to end (base = starts)
    np.testing.assert_array_equal(window_hits(column, starts, starts, len(column), x, r,
                                              np.asarray(widths, dtype=np.int64)), expected)


def test_last_positions_are_numpys_right_searches():
    column = np.array([-np.inf, 1.0, 2.0, 2.0, 2.0, 5.0, np.inf, np.nan, np.nan])
    queries = np.array([-np.inf, -np.inf, 0.5, 1.0, 2.0, 2.0, 3.0, 5.0, np.inf, np.nan])
    expected = np.maximum(np.searchsorted(column, queries, side="right") - 1, 0)
    np.testing.assert_array_equal(expected, [0, 0, 0, 1, 4, 4, 4, 5, 6, 8])  # by hand: the last value <= q
    np.testing.assert_array_equal(last_positions(column, queries), expected)
    np.testing.assert_array_equal(last_positions(column[1:], np.array([0.0, 0.5])), [0, 0])  # none below: 0


def test_sdid_hits_hand_case():
    # k S = 0.05 * 40 = 2: |x - x'| = 0, 2, 2.5, 1, 3 -> inside for 0, 2 (closed interval) and 1 -> 3
    x = np.array([10.0, 10.0, 10.0, 10.0, 10.0])
    xm = np.array([10.0, 12.0, 7.5, 9.0, 13.0])
    assert sdid_hits(x, xm, 40.0) == 3
    assert sdid_hits(x, xm, 40.0, k=0.1) == 5  # kS = 4


@pytest.mark.parametrize("integer", [False, True, "groups"])
@pytest.mark.parametrize("parts", [1, 3])
def test_interval_disclosure_matches_brute_force(integer, parts):
    x, xm = random_files(31 + (integer is True), n=120, integer=integer is True)
    if integer == "groups":  # microaggregated-like: masked values repeated in runs of 3 that cross window edges
        xm = np.repeat(np.sort(xm, axis=0)[::3], 3, axis=0)[np.argsort(np.argsort(xm, axis=0), axis=0),
                                                            np.arange(3)]
    cols = ["v1", "v2", "v3"]
    masked = frame(xm, cols).iloc[::-1].reset_index(drop=True)  # reversed row order
    out = run_evaluate(frame(x, cols), masked, cols, [], parts, families=("id",))
    ids, sdid = brute_id(x, xm)
    for p in range(1, 11):
        assert out[f"ID_{p}"] == pytest.approx(ids[p - 1], rel=1e-12), p
    assert out["ID"] == pytest.approx(np.mean(ids), rel=1e-12)
    assert out["SDID"] == pytest.approx(sdid, rel=1e-12)
    assert ids[0] < 100.0  # not a trivial case


# ----------------------------------------------------------------------------------------------------------
# 5. Scores
# ----------------------------------------------------------------------------------------------------------

def test_scores_on_given_numbers():
    m = {"IL": 10.0, "DLD": 20.0, "ID": 30.0, "PLD": 40.0, "PIL": 50.0}
    out = scores(m)
    assert out["score_simple"] == pytest.approx(17.5)  # 0.5*10 + 0.25*20 + 0.25*30 = 5 + 5 + 7.5
    assert out["score"] == pytest.approx(20.0)  # 5 + 0.125*20 + 0.125*40 + 7.5 = 5 + 2.5 + 5 + 7.5
    assert out["score_pil"] == pytest.approx(40.0)  # 0.5*50 + 2.5 + 5 + 7.5 = 25 + 15


def test_scores_absent_when_inputs_absent():
    assert set(scores({"IL": 1.0, "DLD": 2.0, "ID": 3.0})) == {"score_simple"}  # no PLD
    assert scores({"DLD": 2.0, "ID": 3.0, "PLD": 4.0}) == {}  # neither IL nor PIL
    assert set(scores({"PIL": 1.0, "DLD": 2.0, "ID": 3.0, "PLD": 4.0})) == {"score_pil"}
    assert scores({"IL": 1.0, "DLD": 2.0}) == {}
    assert scores({}) == {}


def test_evaluate_score_simple_and_families():
    x, xm = random_files(41, n=80)
    cols = ["a", "b", "c"]
    out = run_evaluate(frame(x, cols), frame(xm, cols), cols, cols, 2)
    assert out["score_simple"] == pytest.approx(0.5 * out["IL"] + 0.25 * out["DLD"] + 0.25 * out["ID"], rel=1e-12)
    assert "score" not in out and "score_pil" not in out  # no PLD / PIL computed
    only_il = run_evaluate(frame(x, cols), frame(xm, cols), cols, cols, 2, families=("il",))
    assert "score_simple" not in only_il and "DLD" not in only_il and "ID" not in only_il
    assert only_il["IL"] == pytest.approx(out["IL"], rel=1e-12)


# ----------------------------------------------------------------------------------------------------------
# 6. evaluate: partitions, row order, pairing errors
# ----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("integer", [False, True])
def test_evaluate_independent_of_partitions(integer):
    x, xm = random_files(51 + integer, n=200, integer=integer)
    cols = ["a", "b", "c"]
    orig, masked = frame(x, cols), frame(xm, cols)
    base = run_evaluate(orig, masked, cols, cols, 1)
    for parts, masked_parts in ((2, 2), (5, 5), (2, 5), (5, 1)):
        assert_same_metrics(base, run_evaluate(orig, masked, cols, cols, parts, masked_parts))


def test_evaluate_shuffled_masked_rows():
    x, xm = random_files(61, n=150, integer=True)
    cols = ["a", "b", "c"]
    orig, masked = frame(x, cols), frame(xm, cols)
    shuffled = masked.sample(frac=1.0, random_state=12).reset_index(drop=True)
    base = run_evaluate(orig, masked, cols, cols, 3)
    assert_same_metrics(base, run_evaluate(orig, shuffled, cols, cols, 3))
    assert_same_metrics(base, run_evaluate(orig, shuffled, cols, cols, 1, 4))


def test_evaluate_missing_id_raises_input_error_with_count():
    x, xm = random_files(71, n=10)
    ids = np.arange(10)
    ids[[3, 7]] = [999, 1000]  # two masked ids that the original does not have
    with pytest.raises(InputError, match=r"\b2 of 10 masked records"):
        run_evaluate(frame(x, list("abc")), frame(xm, list("abc"), ids=ids), list("abc"), ["a"], 2, pairing="id")
    ids = np.arange(10)
    ids[0] = -1
    with pytest.raises(InputError, match=r"\b1 of 10 masked records"):
        run_evaluate(frame(x, list("abc")), frame(xm, list("abc"), ids=ids), list("abc"), ["a"], 1, 3,
                     pairing="id")


def test_evaluate_missing_column_raises_input_error():
    x, xm = random_files(72, n=10)
    with pytest.raises(InputError, match="'zz'"):
        run_evaluate(frame(x, list("abc")), frame(xm, list("abc")), ["a", "zz"], ["a"])


def test_with_pairing_ids_by_row_position():
    x, xm = random_files(81, n=30)
    cols = ["a", "b", "c"]
    o = dd.from_pandas(pd.DataFrame(x, columns=cols), npartitions=3)
    m = dd.from_pandas(pd.DataFrame(xm, columns=cols), npartitions=2)
    o2, m2, id_col = with_pairing_ids(o, m, "rid")
    assert id_col == "rid"
    np.testing.assert_array_equal(o2.compute()["rid"].to_numpy(), np.arange(30))
    np.testing.assert_array_equal(m2.compute()["rid"].to_numpy(), np.arange(30))
    out = evaluate(o2, m2, "rid", cols, cols, ("il", "dld", "id"))
    assert_same_metrics(out, run_evaluate(frame(x, cols), frame(xm, cols), cols, cols, 1))
    # a file lacking the id column gets it from its row positions (0-based), the other keeps its own
    o3, m3, _ = with_pairing_ids(o2, m, "rid")
    assert o3 is o2
    np.testing.assert_array_equal(m3.compute()["rid"].to_numpy(), np.arange(30))
