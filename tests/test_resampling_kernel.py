"""Resampling (Resamp t) and the pil_measures rescaling transformation.

Reference: sdc_methods_comparison_chapter.txt sec. 2 (Resampling); pil_measures.txt sec. 5 (rescaling).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sdc_tasks.masking.resampling import resample_column, resampled_order_statistics, rescale


def ranks(values, tiebreak):
    order = np.lexsort((tiebreak, values))
    out = np.empty(len(values), dtype=np.int64)
    out[order] = np.arange(len(values))
    return out


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.integers(-5, 5), min_size=1, max_size=60),
    st.integers(1, 4),
    st.integers(0, 2**32 - 1),
)
def test_rank_preserving_replacement(raw, t, seed):
    values = np.array(raw, dtype=np.float64)
    tiebreak = np.random.default_rng(seed).permutation(len(values))
    out = resample_column(values, tiebreak, t, np.random.default_rng(seed))
    # sorting the output by the original (value, tiebreak) order gives a nondecreasing sequence
    assert (np.diff(out[np.lexsort((tiebreak, values))]) >= 0).all()
    # ranks equal the original ranks when the output is ranked with the original ranks as tiebreak
    np.testing.assert_array_equal(ranks(out, ranks(values, tiebreak)), ranks(values, tiebreak))
    assert out.min() >= values.min() and out.max() <= values.max()
    if t == 1:
        assert np.isin(out, values).all()


def test_t1_output_is_a_sample_and_reproducible():
    values = np.random.default_rng(1).lognormal(size=500)
    tiebreak = np.arange(500)
    out = resample_column(values, tiebreak, 1, np.random.default_rng(3))
    assert np.isin(out, values).all()
    np.testing.assert_array_equal(out, resample_column(values, tiebreak, 1, np.random.default_rng(3)))
    # a sample with replacement repeats some values
    assert len(np.unique(out)) < len(values)


def test_order_statistics_hand_example():
    class Fixed:
        def __init__(self, rows):
            self.rows = iter(rows)

        def integers(self, low, high, size):
            return np.array(next(self.rows))

    values = np.array([10.0, 20.0, 30.0])
    # samples [10, 10, 30] and [30, 20, 20] -> sorted [10, 10, 30], [20, 20, 30] -> averages [15, 15, 30]
    np.testing.assert_allclose(resampled_order_statistics(values, 2, Fixed([[0, 0, 2], [2, 1, 1]])), [15, 15, 30])
    # ranks by (value, tiebreak): row 2 (value 1) rank 0, row 0 (value 5, tie 0) rank 1, row 1 rank 2
    out = resample_column(np.array([5.0, 5.0, 1.0]), np.array([0, 1, 0]), 1, Fixed([[2, 0, 0]]))
    np.testing.assert_allclose(out, [5.0, 5.0, 1.0])
    out = resample_column(np.array([5.0, 5.0, 1.0]), np.array([0, 1, 0]), 1, Fixed([[2, 2, 0]]))
    np.testing.assert_allclose(out, [1.0, 5.0, 1.0])


def test_larger_t_shrinks_towards_the_original_order_statistics():
    values = np.random.default_rng(4).normal(size=2000)
    tie = np.arange(2000)
    err = [
        np.mean([np.abs(resample_column(values, tie, t, np.random.default_rng(s)) - values).mean() for s in range(3)])
        for t in (1, 3, 10)
    ]
    assert err[0] > err[1] > err[2]


def test_validation():
    with pytest.raises(ValueError, match=r"\bt\b"):
        resample_column(np.ones(3), np.arange(3), 0, np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"\bt\b"):
        resample_column(np.ones(3), np.arange(3), 1.5, np.random.default_rng(0))
    with pytest.raises(ValueError, match="tiebreak"):
        resample_column(np.ones(3), np.arange(2), 1, np.random.default_rng(0))
    with pytest.raises(ValueError, match="row 1"):
        resample_column(np.array([1.0, np.inf]), np.arange(2), 1, np.random.default_rng(0))
    assert resample_column(np.array([]), np.array([]), 2, np.random.default_rng(0)).shape == (0,)


def test_rescale_restores_mean_and_variance_exactly():
    rng = np.random.default_rng(8)
    x = rng.lognormal(size=(5000, 3))
    xm = x + rng.normal(scale=0.5, size=x.shape) * x.std(axis=0)
    out = rescale(xm, x.mean(axis=0), x.var(axis=0), xm.mean(axis=0), xm.var(axis=0))
    np.testing.assert_allclose(out.mean(axis=0), x.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(out.var(axis=0), x.var(axis=0), rtol=1e-12)
    # blockwise with global moments is the same
    parts = [
        rescale(part, x.mean(axis=0), x.var(axis=0), xm.mean(axis=0), xm.var(axis=0)) for part in np.array_split(xm, 4)
    ]
    np.testing.assert_allclose(np.concatenate(parts), out, rtol=1e-14)
    # a linear map with positive slope: correlations with the masked data are 1
    assert np.corrcoef(out[:, 0], xm[:, 0])[0, 1] == pytest.approx(1.0)


def test_rescale_hand_values_and_constant_column():
    # (x' - 2) * sqrt(9) / sqrt(1) + 10
    np.testing.assert_allclose(rescale(np.array([1.0, 3.0]), 10.0, 9.0, 2.0, 1.0), [7.0, 13.0])
    xm = np.array([[1.0, 4.0], [3.0, 4.0]])
    out = rescale(xm, np.array([0.0, 7.0]), np.array([4.0, 2.0]), np.array([2.0, 4.0]), np.array([1.0, 0.0]))
    np.testing.assert_allclose(out, [[-2.0, 7.0], [2.0, 7.0]])
    with pytest.raises(ValueError, match="masked_var"):
        rescale(xm, np.zeros(2), np.ones(2), np.zeros(2), np.array([1.0, -1.0]))
    with pytest.raises(ValueError, match="orig_mean"):
        rescale(xm, np.zeros(3), np.ones(2), np.zeros(2), np.ones(2))
