"""Tests for the survey's matrix family (MSE/MAE/MV of X, Xbar, V, S, R, RF, C, F) and IL1s.

Expected values are independent of the code under test: hand arithmetic (in the comments) for a 4 x 2
case, the closed-form principal components of a 2 x 2 correlation matrix, and a plain numpy reference
that defines RF, C and F by what they mean (correlations between attributes and component scores, the
R^2 of an attribute on PC1, the coefficients that give unit-variance scores from standardized data)
rather than by the eigenvector formulas the module uses.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sdc_tasks.metrics import matrix_measures as mmod
from sdc_tasks.metrics.matrix_measures import (
    KEYS,
    SUMS,
    CellErrors,
    align_signs,
    cell_errors,
    effective_sd,
    flat_attributes,
    matrix_measures,
)
from sdc_tasks.stats.moments import blocks_moments, moments_of

HYPO = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def measures(x: np.ndarray, xm: np.ndarray) -> dict[str, float]:
    """All measures of a pair of paired files, through the public sketch API."""
    mo, mm = moments_of(x), moments_of(xm)
    return matrix_measures(cell_errors(x, xm, effective_sd(mo)), mo, mm)


def assert_finite(out: dict[str, float]) -> None:
    for k, v in out.items():
        assert isinstance(v, float) and math.isfinite(v), k


# ----------------------------------------------------------------------------------------------------------
# hand-computed 4 x 2 case
# ----------------------------------------------------------------------------------------------------------

X = np.array([[1, 2], [2, 0], [3, 4], [6, 2]], dtype=float)
XM = np.array([[1, 2], [3, 1], [3, 4], [5, 3]], dtype=float)
# column 1: mean 3, deviations -2 -1 0 3, variance (4+1+0+9)/4 = 3.5
# column 2: mean 2, deviations 0 -2 2 0, variance (0+4+4+0)/4 = 2; covariance (0+2+0+0)/4 = 0.5
# masked column 1: mean 3, deviations -2 0 0 2, variance 8/4 = 2
# masked column 2: mean 2.5, deviations -.5 -1.5 1.5 .5, variance (.25+2.25+2.25+.25)/4 = 1.25
# masked covariance: (1 + 0 + 0 + 1)/4 = 0.5
R_O = 0.5 / math.sqrt(3.5 * 2.0)   # = 0.5 / sqrt(7)
R_M = 0.5 / math.sqrt(2.0 * 1.25)  # = 0.5 / sqrt(2.5)


def test_hand_case_x_xbar_v_s_r():
    out = measures(X, XM)
    # |x - x'|: column 1: 0 1 0 1, column 2: 0 1 0 1 -> 8 cells, sum of squares 4, sum of abs 4
    assert out["MSE_X"] == pytest.approx(4 / 8)
    assert out["MAE_X"] == pytest.approx(4 / 8)
    # MV: column 1: 0/1 + 1/2 + 0/3 + 1/6; column 2: 0/2 + (x = 0: left out) + 0/4 + 1/2 -> 7/6 over 7 cells
    assert out["MV_X"] == pytest.approx((7 / 6) / 7)
    assert out["MV_X_undefined_terms"] == 1.0
    # IL1s: column 1: 2 / (sqrt2 sqrt3.5) = 2 / sqrt7; column 2: 2 / (sqrt2 sqrt2) = 1; mean over 8 cells
    assert out["IL1s"] == pytest.approx(100 * (2 / math.sqrt(7) + 1) / 8)
    # Xbar: (3, 2) vs (3, 2.5): diffs 0, .5
    assert out["MSE_Xbar"] == pytest.approx(0.25 / 2)
    assert out["MAE_Xbar"] == pytest.approx(0.5 / 2)
    assert out["MV_Xbar"] == pytest.approx((0 + 0.5 / 2) / 2)
    # V over v11, v12, v22: (3.5, .5, 2) vs (2, .5, 1.25): diffs 1.5, 0, .75
    assert out["MSE_V"] == pytest.approx((2.25 + 0 + 0.5625) / 3)
    assert out["MAE_V"] == pytest.approx(2.25 / 3)
    assert out["MV_V"] == pytest.approx((1.5 / 3.5 + 0 + 0.75 / 2) / 3)  # = 15/56
    # S over v11, v22: diffs 1.5, .75
    assert out["MSE_S"] == pytest.approx((2.25 + 0.5625) / 2)
    assert out["MAE_S"] == pytest.approx(2.25 / 2)
    assert out["MV_S"] == pytest.approx((3 / 7 + 3 / 8) / 2)  # = 45/112
    # R: the single cell r12
    assert out["MSE_R"] == pytest.approx((R_O - R_M) ** 2)
    assert out["MAE_R"] == pytest.approx(abs(R_O - R_M))
    assert out["MV_R"] == pytest.approx(abs(R_O - R_M) / R_O)
    assert out["matrix_missing_measures"] == 0.0
    assert set(KEYS) | {"IL1s"} <= set(out)
    assert len(KEYS) == 24
    assert_finite(out)


def test_hand_case_rf_c_f_closed_form():
    """2 x 2 correlation matrix [[1, r], [r, 1]], r > 0: eigenvalues 1 + r, 1 - r with eigenvectors
    (1, 1)/sqrt2 and (1, -1)/sqrt2 (up to sign). So rf = (sqrt((1+r)/2), +-sqrt((1-r)/2)) in each row,
    c_i = (1 + r)/2, f = (1/sqrt(2(1+r)), +-1/sqrt(2(1-r))), w = ((1 + r)/2, (1 - r)/2)."""
    out = measures(X, XM)

    def parts(r):
        return (math.sqrt((1 + r) / 2), math.sqrt((1 - r) / 2), (1 + r) / 2,
                1 / math.sqrt(2 * (1 + r)), 1 / math.sqrt(2 * (1 - r)))

    a, b, c, f1, f2 = parts(R_O)
    am, bm, cm, f1m, f2m = parts(R_M)
    w1, w2 = (1 + R_O) / 2, (1 - R_O) / 2
    # each component column has 2 cells with the same |difference|; divisor p^2 = 4
    assert out["MSE_RF"] == pytest.approx((w1 * 2 * (a - am) ** 2 + w2 * 2 * (b - bm) ** 2) / 4)
    assert out["MAE_RF"] == pytest.approx((w1 * 2 * abs(a - am) + w2 * 2 * abs(b - bm)) / 4)
    assert out["MV_RF"] == pytest.approx((w1 * 2 * abs(a - am) / a + w2 * 2 * abs(b - bm) / b) / 4)
    assert out["MSE_C"] == pytest.approx((c - cm) ** 2)
    assert out["MAE_C"] == pytest.approx(abs(c - cm))
    assert out["MV_C"] == pytest.approx(abs(c - cm) / c)
    assert out["MSE_F"] == pytest.approx((w1 * 2 * (f1 - f1m) ** 2 + w2 * 2 * (f2 - f2m) ** 2) / 4)
    assert out["MAE_F"] == pytest.approx((w1 * 2 * abs(f1 - f1m) + w2 * 2 * abs(f2 - f2m)) / 4)
    assert out["MV_F"] == pytest.approx((w1 * 2 * abs(f1 - f1m) / f1 + w2 * 2 * abs(f2 - f2m) / f2) / 4)


# ----------------------------------------------------------------------------------------------------------
# RF, C, F against a direct numpy PCA
# ----------------------------------------------------------------------------------------------------------

def ref_pca(x: np.ndarray, v_orig: np.ndarray | None = None):
    """Eigenvalues, RF, C and F of the correlation PCA of ``x``, defined by what they mean.

    Standardize Z = (x - mean) / sd (population); the SVD Z / sqrt(n) = U s V^T gives the correlation
    eigenvalues s^2 (decreasing) and the components V. The component scores are Z V; RF is the matrix of
    Pearson correlations between each attribute and each score (np.corrcoef); C is the R^2 of regressing
    each attribute on the PC1 score (lstsq); F solves Z F = scores / sd(scores) (least squares). The
    component signs are aligned to ``v_orig`` by the sign of the dot product.
    """
    n, p = x.shape
    z = (x - x.mean(axis=0)) / x.std(axis=0)
    _, s, vt = np.linalg.svd(z / np.sqrt(n), full_matrices=False)
    v = vt.T
    if v_orig is not None:
        v = v * np.where(np.sum(v * v_orig, axis=0) < 0, -1.0, 1.0)
    scores = z @ v
    rf = np.corrcoef(x.T, scores.T)[:p, p:]
    design = np.column_stack([np.ones(n), scores[:, 0]])
    c = np.empty(p)
    for i in range(p):
        coef, *_ = np.linalg.lstsq(design, x[:, i], rcond=None)
        resid = x[:, i] - design @ coef
        c[i] = 1 - resid @ resid / np.sum((x[:, i] - x[:, i].mean()) ** 2)
    f, *_ = np.linalg.lstsq(z, scores / scores.std(axis=0), rcond=None)
    return s ** 2, v, rf, c, f


def ref_weighted(a, b, w):
    """sum_j w_j sum_i t_ij / p^2 for MSE, MAE, MV (survey table)."""
    p = a.shape[0]
    d = np.abs(a - b)
    return (np.sum(w * d ** 2) / p ** 2, np.sum(w * d) / p ** 2, np.sum(w * d / np.abs(a)) / p ** 2)


@HYPO
@given(seed=st.integers(0, 2 ** 32 - 1), p=st.integers(2, 5), noise=st.floats(0.01, 0.5))
def test_rf_c_f_against_numpy_pca(seed, p, noise):
    rng = np.random.default_rng(seed)
    n = 200
    x = rng.normal(size=(n, p)) @ (np.eye(p) + rng.normal(scale=0.6, size=(p, p))) * rng.uniform(1, 5, p) + 10
    xm = x + rng.normal(scale=noise, size=(n, p)) * x.std(axis=0)
    lam, v, rf, c, f = ref_pca(x)
    lam_m, _, rf_m, c_m, f_m = ref_pca(xm, v_orig=v)
    # well separated eigenvalues (so components match by order and are unique); otherwise skip
    gaps = np.diff(np.concatenate([lam, lam_m]).reshape(2, p), axis=1)
    if np.any(-gaps < 0.05) or lam.min() < 1e-3 or lam_m.min() < 1e-3:
        return
    w = lam / p
    # blocks of records: the sketch merges and the sums add
    mo = blocks_moments([x[:70], x[70:]])
    mm = blocks_moments([xm[:130], xm[130:]])
    sd = effective_sd(mo)
    cells = cell_errors(x[:50], xm[:50], sd) + cell_errors(x[50:], xm[50:], sd)
    out = matrix_measures(cells, mo, mm)
    for key, val in zip(("MSE_RF", "MAE_RF", "MV_RF"), ref_weighted(rf, rf_m, w[None, :])):
        assert out[key] == pytest.approx(val, rel=1e-6, abs=1e-12), key
    for key, val in zip(("MSE_F", "MAE_F", "MV_F"), ref_weighted(f, f_m, w[None, :])):
        assert out[key] == pytest.approx(val, rel=1e-6, abs=1e-12), key
    d = np.abs(c - c_m)
    assert out["MSE_C"] == pytest.approx(np.mean(d ** 2), rel=1e-6, abs=1e-12)
    assert out["MAE_C"] == pytest.approx(np.mean(d), rel=1e-6, abs=1e-12)
    assert out["MV_C"] == pytest.approx(np.mean(d / c), rel=1e-6, abs=1e-12)
    # the rest against plain numpy too
    dx = np.abs(x - xm)
    assert out["MSE_X"] == pytest.approx(np.mean(dx ** 2), rel=1e-9)
    assert out["MAE_X"] == pytest.approx(np.mean(dx), rel=1e-9)
    assert out["MV_X"] == pytest.approx(np.mean(dx / np.abs(x)), rel=1e-9)
    assert out["IL1s"] == pytest.approx(100 * np.mean(dx / (np.sqrt(2) * x.std(axis=0))), rel=1e-9)
    vo, vm = np.cov(x.T, bias=True), np.cov(xm.T, bias=True)
    iu, su = np.triu_indices(p), np.triu_indices(p, 1)
    assert out["MV_V"] == pytest.approx(np.mean(np.abs(vo - vm)[iu] / np.abs(vo[iu])), rel=1e-8)
    ro, rm = np.corrcoef(x.T), np.corrcoef(xm.T)
    assert out["MAE_R"] == pytest.approx(np.mean(np.abs(ro - rm)[su]), rel=1e-8)
    assert out["MSE_S"] == pytest.approx(np.mean((np.diag(vo) - np.diag(vm)) ** 2), rel=1e-8)
    assert_finite(out)


# ----------------------------------------------------------------------------------------------------------
# identical files, eigenvector signs
# ----------------------------------------------------------------------------------------------------------

def correlated(seed: int, n: int = 100, p: int = 4) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, p)) @ (np.eye(p) + rng.normal(scale=0.5, size=(p, p))) + 5.0


def test_identical_files_give_zero_everywhere():
    x = correlated(3)
    out = measures(x, x.copy())
    for key in (*KEYS, "IL1s"):
        assert out[key] == 0.0, key


def test_eigenvector_sign_flip_is_aligned(monkeypatch):
    """eigh may return any sign per eigenvector: make every second call return all of them negated, so the
    masked components come out flipped against the original's; identical files must still give 0."""
    real = mmod.eigh
    calls = {"n": 0}

    def flipping(a):
        lam, u = real(a)
        calls["n"] += 1
        return lam, (-u if calls["n"] % 2 == 0 else u)

    monkeypatch.setattr(mmod, "eigh", flipping)
    x = correlated(5)
    out = measures(x, x.copy())
    assert calls["n"] == 2
    for key in ("MSE_RF", "MAE_RF", "MV_RF", "MSE_F", "MAE_F", "MV_F", "MSE_C", "MAE_C", "MV_C"):
        assert out[key] == 0.0, key
    # align_signs itself: any pattern of flipped columns comes back to the original's signs
    u = np.linalg.eigh(np.corrcoef(x.T))[1]
    assert np.array_equal(align_signs(u, -u), u)
    assert np.array_equal(align_signs(u, u * [1, -1, 1, -1]), u)


# ----------------------------------------------------------------------------------------------------------
# undefined terms: zero cells, constant columns
# ----------------------------------------------------------------------------------------------------------

def test_zero_cells_are_left_out_and_counted():
    x = np.array([[0.0, 1.0], [2.0, 0.0], [0.0, 3.0], [4.0, 5.0]])
    xm = x + 1.0
    out = measures(x, xm)
    # 3 zero cells; the 5 others: 1/2 + 1/4 + 1/1 + 1/3 + 1/5
    assert out["MV_X_undefined_terms"] == 3.0
    assert out["MV_X"] == pytest.approx((1 / 2 + 1 / 4 + 1 + 1 / 3 + 1 / 5) / 5)
    assert out["MSE_X"] == pytest.approx(1.0) and out["MAE_X"] == pytest.approx(1.0)
    assert "MSE_X_undefined_terms" not in out
    assert_finite(out)


def test_all_zero_original_omits_mv_x():
    x = np.zeros((3, 2))
    out = measures(x, x + 0.5)
    assert "MV_X" not in out and "MV_Xbar" not in out
    assert out["MV_X_undefined_terms"] == 6.0 and out["MV_Xbar_undefined_terms"] == 2.0
    assert out["MSE_X"] == pytest.approx(0.25) and out["MAE_Xbar"] == pytest.approx(0.5)
    assert_finite(out)


@pytest.mark.parametrize("const", [0.0, 0.1, 3.7, 123.456, 1e6 + 0.3])
@pytest.mark.parametrize("where", ["original", "masked", "both"])
def test_constant_columns_are_left_out_and_counted(const, where):
    rng = np.random.default_rng(1)
    n, p = 37, 4
    x = correlated(2, n=n, p=p)
    xm = x + rng.normal(scale=0.2, size=(n, p))
    if where in ("original", "both"):
        x[:, 2] = const
    if where in ("masked", "both"):
        xm[:, 2] = const
    # sketches from blocks, as at scale
    mo = blocks_moments([x[:11], x[11:]])
    mm = blocks_moments([xm[:20], xm[20:]])
    assert flat_attributes(mo)[2] == (where != "masked")
    assert flat_attributes(mm)[2] == (where != "original")
    sd = effective_sd(mo)
    out = matrix_measures(cell_errors(x[:5], xm[:5], sd) + cell_errors(x[5:], xm[5:], sd), mo, mm)
    assert_finite(out)
    assert out["matrix_missing_measures"] == 0.0
    # R: the 3 pairs involving attribute 2 are undefined; RF, F: p^2 - q^2 = 16 - 9 cells; C: 1 attribute
    for e in ("MSE", "MAE", "MV"):
        assert out[f"{e}_R_undefined_terms"] == 3.0
        assert out[f"{e}_RF_undefined_terms"] == 7.0
        assert out[f"{e}_F_undefined_terms"] == 7.0
        assert out[f"{e}_C_undefined_terms"] == 1.0
    # the RF/C/F of the 3 live attributes equal those of the file without the constant column
    live = [0, 1, 3]
    sub = measures(x[:, live], xm[:, live])
    for m in ("R", "RF", "C", "F"):
        for e in ("MSE", "MAE", "MV"):
            assert out[f"{e}_{m}"] == pytest.approx(sub[f"{e}_{m}"], rel=1e-9, abs=1e-15), (e, m)
    if where != "masked":
        # IL1s leaves out the n cells of the original constant column (S_j = 0)
        assert out["IL1s_undefined_terms"] == float(n)
        assert out["IL1s"] == pytest.approx(sub["IL1s"], rel=1e-12)
        # S: v_22 = 0 exactly, so its mean variation is undefined; V: the 4 cells of row/column 2
        assert out["MV_S_undefined_terms"] == 1.0
        assert out["MV_V_undefined_terms"] == 4.0
    else:
        assert "IL1s_undefined_terms" not in out
        assert "MV_S_undefined_terms" not in out


def test_single_attribute_and_all_constant():
    x = np.array([[1.0], [2.0], [4.0]])
    out = measures(x, x * 1.1)
    # p = 1: R has no cell at all -> MSE_R, MAE_R, MV_R left out; RF, C, F of a 1 x 1 correlation are 1
    assert out["matrix_missing_measures"] == 3.0
    assert not {"MSE_R", "MAE_R", "MV_R"} & set(out)
    assert out["MAE_RF"] == 0.0 and out["MAE_C"] == 0.0 and out["MAE_F"] == 0.0
    const = np.full((4, 2), 2.5)
    out = measures(const, const + [[0.0, 0.0], [0.1, 0.0], [0.0, 0.2], [0.0, 0.0]])
    assert_finite(out)
    # R, RF, C, F all undefined (12 measures); IL1s too (S_j = 0); MV_V, MV_S divide by v = 0 only
    missing = {f"{e}_{m}" for e in ("MSE", "MAE", "MV") for m in ("R", "RF", "C", "F")} | {"IL1s", "MV_V", "MV_S"}
    assert not missing & set(out)
    assert out["matrix_missing_measures"] == float(len(missing))
    assert out["MSE_RF_undefined_terms"] == 4.0 and out["MV_C_undefined_terms"] == 2.0
    assert out["IL1s_undefined_terms"] == 8.0


def test_singular_correlation_leaves_f_components_out():
    # column 3 = column 1 + column 2: the correlation matrix has a zero eigenvalue, F's last column is undefined
    rng = np.random.default_rng(4)
    x = rng.normal(size=(50, 2)) * [1.0, 2.0] + 3.0
    x = np.column_stack([x, x[:, 0] + x[:, 1]])
    out = measures(x, x.copy())
    assert_finite(out)
    assert out["MSE_F_undefined_terms"] == 3.0  # the 3 cells of the component with lambda = 0
    assert out["MSE_F"] == 0.0
    assert "MSE_RF_undefined_terms" not in out


# ----------------------------------------------------------------------------------------------------------
# CellErrors additivity
# ----------------------------------------------------------------------------------------------------------

@HYPO
@given(seed=st.integers(0, 2 ** 32 - 1), n=st.integers(1, 60), p=st.integers(1, 4),
       cuts=st.lists(st.floats(0, 1), max_size=6))
def test_cell_errors_add_over_random_splits(seed, n, p, cuts):
    rng = np.random.default_rng(seed)
    x = rng.integers(-3, 4, size=(n, p)).astype(float)  # zeros included
    xm = x + rng.normal(size=(n, p))
    sd = np.where(rng.random(p) < 0.3, 0.0, rng.uniform(0.5, 2.0, p))
    bounds = sorted({0, n, *(int(c * n) for c in cuts)})
    total = CellErrors()
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        total = total + cell_errors(x[lo:hi], xm[lo:hi], sd)
    # plain numpy over the whole
    d = np.abs(x - xm)
    nz = x != 0
    assert total.cells == n * p
    assert total.zero_cells == int((~nz).sum())
    assert total.flat_cells == n * int((sd == 0).sum())
    assert total.sq_err == pytest.approx(np.sum(d ** 2), rel=1e-12)
    assert total.abs_err == pytest.approx(np.sum(d), rel=1e-12)
    assert total.rel_abs_err == pytest.approx(np.sum(d[nz] / np.abs(x[nz])), rel=1e-12)
    live = sd > 0
    assert total.scaled_abs_err == pytest.approx(np.sum(d[:, live] / (np.sqrt(2) * sd[live])), rel=1e-12)
    whole = cell_errors(x, xm, sd)
    assert (whole.cells, whole.zero_cells, whole.flat_cells) == (total.cells, total.zero_cells, total.flat_cells)
    # exact sums: the split changes no bit
    assert [getattr(whole, k) for k in SUMS] == [getattr(total, k) for k in SUMS]


def test_cell_errors_rejects_mismatched_shapes():
    with pytest.raises(ValueError):
        cell_errors(np.zeros((3, 2)), np.zeros((2, 2)), np.ones(2))
    with pytest.raises(ValueError):
        cell_errors(np.zeros((3, 2)), np.zeros((3, 2)), np.ones(3))
