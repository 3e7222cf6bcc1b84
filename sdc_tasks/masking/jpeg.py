"""Lossy compression masking (JPEG q): pure block kernel (numpy in, numpy out).

Source: sdc_methods_comparison_chapter.txt sec. 2 (Lossy compression, "JPEG q"): a numerical microdata
file is regarded as an image, rows being records and columns being variables; the JPEG algorithm is used
on the image and the compressed image is interpreted as the masked file; "appropriate mappings between
variable ranges and color scales will be needed"; q is the JPEG quality (5 to 100 percent).

Mapping (a project decision the chapter leaves open): each variable j is mapped linearly from
[lo_j, hi_j], its GLOBAL minimum and maximum, onto the 8-bit grey scale,
g = round(255 (x - lo_j) / (hi_j - lo_j)), the image is encoded as an 8-bit greyscale (mode "L") baseline
JPEG by Pillow (libjpeg) at quality q, decoded, and mapped back, x' = lo_j + g' (hi_j - lo_j) / 255.
Output values therefore lie in [lo_j, hi_j]; a variable with hi_j == lo_j is constant and is returned
unchanged. libjpeg (JPEG_MAX_DIMENSION) refuses images of more than 65,500 rows ("Maximum supported image
dimension is 65500 pixels"), so blocks are cut into independent row tiles of ``TILE_ROWS`` = 65,496 rows,
the largest multiple of the 8-row DCT block not above 65,500, so tile seams fall on DCT block edges.
Encoding and decoding are deterministic (same input, same quality -> same bytes).
"""

from __future__ import annotations

import io

import numpy as np
from PIL import Image

from sdc_tasks.masking.checks import finite_array
from sdc_tasks.masking.params import TILE_ROWS


def _check_quality(q: object) -> int:
    """Return ``q`` as an int after checking it is an integer in 1..100 (ValueError naming q)."""
    if isinstance(q, bool) or not isinstance(q, (int, np.integer)) or not 1 <= q <= 100:
        raise ValueError(f"q must be an integer JPEG quality in 1..100, got {q!r}")
    return int(q)


def jpeg_roundtrip(grey: np.ndarray, q: int) -> np.ndarray:
    """Encode a (rows, cols) uint8 array as a greyscale JPEG at quality q with Pillow and decode it.

    sdc_methods_comparison_chapter.txt sec. 2 (Lossy compression, JPEG q). rows must be <= 65,500 (libjpeg limit).
    """
    buffer = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(grey, dtype=np.uint8)).save(buffer, format="JPEG", quality=q)
    buffer.seek(0)
    with Image.open(buffer) as image:
        return np.asarray(image.convert("L"), dtype=np.uint8)


def jpeg_block(x: np.ndarray, q: int, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Return the JPEG q masked block: scale to 0..255 per column, JPEG round trip, scale back.

    sdc_methods_comparison_chapter.txt sec. 2 (Lossy compression, JPEG q), mapping of the module
    docstring: g = round(255 (x - lo_j) / (hi_j - lo_j)) (x clipped to [lo_j, hi_j] first),
    x' = lo_j + g' (hi_j - lo_j) / 255 with g' the decoded grey level. ``x`` is (n, p) (records x
    variables), ``lo``/``hi`` have shape (p,) and hold the global minimum/maximum of each variable.
    Raises ValueError naming ``q`` unless q is an integer in 1..100.
    """
    q = _check_quality(q)
    block = finite_array(x, "x", 2)
    width = block.shape[1]
    bounds = []
    for name, value in (("lo", lo), ("hi", hi)):
        arr = np.asarray(value, dtype=np.float64)
        if arr.shape != (width,):
            raise ValueError(f"{name} must have shape ({width},), got {arr.shape}")
        if not np.isfinite(arr).all():
            raise ValueError(f"{name} has a non-finite value")
        bounds.append(arr)
    low, high = bounds
    if (high < low).any():
        raise ValueError(f"hi must be >= lo in every column; column {int(np.argmax(high < low))} is not")
    out = block.copy()
    varying = high > low
    if block.shape[0] == 0 or not varying.any():
        return out
    span = (high - low)[varying]
    base = low[varying]
    scaled = np.clip((np.clip(block[:, varying], base, high[varying]) - base) / span * 255.0, 0.0, 255.0)
    grey = np.rint(scaled).astype(np.uint8)
    decoded = np.empty_like(grey)
    for start in range(0, grey.shape[0], TILE_ROWS):
        stop = min(start + TILE_ROWS, grey.shape[0])
        decoded[start:stop] = jpeg_roundtrip(grey[start:stop], q)
    out[:, varying] = np.clip(base + decoded.astype(np.float64) * (span / 255.0), base, high[varying])
    return out
