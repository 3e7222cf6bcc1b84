"""Lossy compression (JPEG q): per-variable grey-scale mapping, Pillow JPEG round trip, row tiles.

Reference: sdc_methods_comparison_chapter.txt sec. 2 (Lossy compression, JPEG q).
"""

from __future__ import annotations

import numpy as np
import pytest

from sdc_tasks.masking import jpeg
from sdc_tasks.masking.jpeg import jpeg_block


@pytest.fixture(scope="module")
def block():
    rng = np.random.default_rng(12)
    x = np.column_stack([rng.lognormal(3.0, 1.0, 4000), rng.normal(50, 10, 4000), rng.uniform(-5, 5, 4000)])
    return x, x.min(axis=0), x.max(axis=0)


def test_quality_100_error_is_within_two_grey_levels(block):
    x, lo, hi = block
    out = jpeg_block(x, 100, lo, hi)
    assert (np.abs(out - x) <= 2.0 / 255.0 * (hi - lo) + 1e-9).all()


def test_lower_quality_larger_error(block):
    x, lo, hi = block
    errors = [np.mean(np.abs(jpeg_block(x, q, lo, hi) - x) / (hi - lo)) for q in (10, 50, 90, 100)]
    assert errors[0] > errors[1] > errors[2] > errors[3] > 0


def test_output_within_bounds_and_deterministic(block):
    x, lo, hi = block
    for q in (5, 30):
        out = jpeg_block(x, q, lo, hi)
        assert (out >= lo).all() and (out <= hi).all()
        np.testing.assert_array_equal(out, jpeg_block(x, q, lo, hi))
    # global bounds wider than the block's own range: still within [lo, hi]
    out = jpeg_block(x[:100], 20, lo - 10, hi + 10)
    assert (out >= lo - 10).all() and (out <= hi + 10).all()


def test_constant_column_unchanged(block):
    x, lo, hi = block
    y = x.copy()
    y[:, 1] = 7.25
    lo2, hi2 = lo.copy(), hi.copy()
    lo2[1] = hi2[1] = 7.25
    out = jpeg_block(y, 40, lo2, hi2)
    np.testing.assert_array_equal(out[:, 1], y[:, 1])
    # all columns constant and empty blocks pass through
    np.testing.assert_array_equal(jpeg_block(np.full((5, 2), 1.0), 50, np.ones(2), np.ones(2)), np.ones((5, 2)))
    assert jpeg_block(np.empty((0, 3)), 50, np.zeros(3), np.ones(3)).shape == (0, 3)


def test_row_tiles(monkeypatch):
    # tiles are independent images of TILE_ROWS rows: shrink the tile to check the seams cheaply
    rng = np.random.default_rng(1)
    x = rng.uniform(size=(50, 4))
    lo, hi = np.zeros(4), np.ones(4)
    monkeypatch.setattr(jpeg, "TILE_ROWS", 16)
    tiled = jpeg_block(x, 60, lo, hi)
    pieces = [jpeg_block(x[s : s + 16], 60, lo, hi) for s in range(0, 50, 16)]
    np.testing.assert_array_equal(tiled, np.concatenate(pieces))
    assert jpeg.TILE_ROWS % 8 == 0


def test_tile_size_is_valid_for_jpeg():
    # libjpeg refuses more than 65,500 rows; TILE_ROWS is the largest multiple of 8 below that
    assert jpeg.TILE_ROWS % 8 == 0 and jpeg.TILE_ROWS <= 65_500 < jpeg.TILE_ROWS + 8
    grey = np.random.default_rng(0).integers(0, 256, size=(jpeg.TILE_ROWS, 2), dtype=np.uint8)
    assert jpeg.jpeg_roundtrip(grey, 100).shape == grey.shape
    with pytest.raises(OSError):
        jpeg.jpeg_roundtrip(np.zeros((65_501, 1), dtype=np.uint8), 90)


def test_block_longer_than_one_tile():
    rng = np.random.default_rng(2)
    x = rng.uniform(size=(jpeg.TILE_ROWS + 100, 2))
    out = jpeg_block(x, 100, np.zeros(2), np.ones(2))
    assert out.shape == x.shape
    assert np.abs(out - x).max() <= 2.0 / 255.0 + 1e-9


@pytest.mark.parametrize("bad", [0, 101, 50.0, True, "90", -3])
def test_quality_validation(bad):
    with pytest.raises(ValueError, match=r"\bq\b"):
        jpeg_block(np.zeros((2, 1)), bad, np.zeros(1), np.ones(1))


def test_shape_validation():
    with pytest.raises(ValueError, match="lo"):
        jpeg_block(np.zeros((2, 2)), 50, np.zeros(3), np.ones(2))
    with pytest.raises(ValueError, match="hi"):
        jpeg_block(np.zeros((2, 2)), 50, np.zeros(2), -np.ones(2))
    with pytest.raises(ValueError, match="row 1"):
        jpeg_block(np.array([[0.0], [np.nan]]), 50, np.zeros(1), np.ones(1))
    with pytest.raises(ValueError, match="2-D"):
        jpeg_block(np.zeros(3), 50, np.zeros(1), np.ones(1))
