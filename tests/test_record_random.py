"""Counter-based per-record random numbers: keyed only by (seed, step, stream, id, column)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from sdc_tasks.record_random import record_normals, record_uniforms


@pytest.mark.parametrize("draw", [record_normals, record_uniforms])
def test_same_id_same_values_whatever_order_and_chunking(draw):
    ids = np.arange(1000, 3000, dtype=np.int64)
    whole = draw(7, 3, ids, 4)
    perm = np.random.default_rng(0).permutation(ids.shape[0])
    np.testing.assert_array_equal(draw(7, 3, ids[perm], 4), whole[perm])
    chunks = [draw(7, 3, part, 4) for part in np.array_split(ids, [1, 17, 900])]
    np.testing.assert_array_equal(np.concatenate(chunks), whole)
    # a row depends on the record id alone, not on its neighbours
    np.testing.assert_array_equal(draw(7, 3, ids[[5]], 4), whole[[5]])
    # more columns extend the row without changing the first ones
    np.testing.assert_array_equal(draw(7, 3, ids, 6)[:, :4], whole)
    # the same id with another integer dtype gives the same values
    np.testing.assert_array_equal(draw(7, 3, ids.astype(np.int32), 4), whole)


@pytest.mark.parametrize("draw", [record_normals, record_uniforms])
def test_keys_change_the_values(draw):
    ids = np.arange(500)
    base = draw(1, 0, ids, 2)
    for other in (draw(2, 0, ids, 2), draw(1, 1, ids, 2), draw(1, 0, ids, 2, stream=1), draw(1, 0, ids + 500, 2)):
        assert np.isclose(other, base).mean() < 0.01
    assert np.isclose(base[:, 0], base[:, 1]).mean() < 0.01
    # string keys go through stream_key and are stable
    np.testing.assert_array_equal(draw(1, "noise", ids, 1, stream="AGI"), draw(1, "noise", ids, 1, stream="AGI"))
    assert not np.array_equal(draw(1, "noise", ids, 1, stream="AGI"), draw(1, "noise", ids, 1, stream="FEDTAX"))


def test_normal_moments_and_ks():
    z = record_normals(20240601, 0, np.arange(1_000_000), 1)[:, 0]
    assert abs(z.mean()) < 0.005
    assert abs(z.std() - 1.0) < 0.005
    assert stats.kstest(z, "norm").pvalue > 1e-3
    assert np.isfinite(z).all() and (z != 0).all()
    other = record_normals(20240601, 0, np.arange(200_000), 2)
    assert abs(np.corrcoef(other[:, 0], other[:, 1])[0, 1]) < 0.01


def test_uniforms_range_and_ks():
    u = record_uniforms(3, 1, np.arange(500_000), 1)[:, 0]
    assert (u >= 0).all() and (u < 1).all()
    assert stats.kstest(u, "uniform").pvalue > 1e-3
    # uniforms and normals of the same key are not the same stream
    z = record_normals(3, 1, np.arange(500_000), 1)[:, 0]
    assert abs(np.corrcoef(stats.norm.cdf(z), u)[0, 1]) < 0.01


def test_validation_and_empty():
    assert record_normals(1, 0, np.array([], dtype=np.int64), 3).shape == (0, 3)
    assert record_uniforms(1, 0, np.arange(4), 0).shape == (4, 0)
    with pytest.raises(ValueError, match="ids"):
        record_normals(1, 0, np.array([1.5, 2.0]), 1)
    with pytest.raises(ValueError, match="ids"):
        record_normals(1, 0, np.zeros((2, 2), dtype=np.int64), 1)
    with pytest.raises(ValueError, match="columns"):
        record_normals(1, 0, np.arange(3), -1)
    with pytest.raises(ValueError, match="seed"):
        record_uniforms(1.5, 0, np.arange(3), 1)
