"""Reproducible random streams keyed by (seed, step, column, block/stratum), never by worker or partition."""

from __future__ import annotations

import zlib

import numpy as np


def stream_key(part: object) -> int:
    """Return a stable 32-bit integer for one key part (ints as themselves, anything else by CRC-32 of its text)."""
    if isinstance(part, (int, np.integer)) and part >= 0:
        return int(part)
    return zlib.crc32(str(part).encode("utf-8"))


def rng_for(seed: int, *keys: object) -> np.random.Generator:
    """Return a PCG64 generator whose stream depends only on ``seed`` and the given keys."""
    return np.random.default_rng(np.random.SeedSequence([int(seed), *(stream_key(k) for k in keys)]))
