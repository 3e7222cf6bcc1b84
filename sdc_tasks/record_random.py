"""Per-record random numbers keyed by (seed, step, stream, record id, column): a counter-based hash.

Masking methods that perturb each record independently (additive noise) must give a record the same
noise whatever the row order of its block, the block size or the worker that holds it. A stateful
generator (``rng_for`` in :mod:`sdc_tasks.randomness`) cannot promise that once a file is re-partitioned;
a counter-based generator can: every value is a pure function of its keys.

Construction (vectorized over records and columns, uint64 arithmetic modulo 2**64):

- ``mix`` is the SplitMix64 finalizer (Steele, Lea, Flood 2014; the output function of Java's
  SplittableRandom): z ^= z >> 30; z *= 0xBF58476D1CE4E5B9; z ^= z >> 27; z *= 0x94D049BB133111EB;
  z ^= z >> 31. It is a bijection on uint64 with full avalanche.
- key chain: h0 = mix(seed + G), h1 = mix(h0 ^ mix(step_key + C1)), h2 = mix(h1 ^ mix(stream_key + C2)),
  then per record h_id = mix(h2 ^ mix(id + C3)) and per value h = mix(h_id ^ mix(4 * column + slot + C4)),
  with G the golden-ratio increment 0x9E3779B97F4A7C15 and C1..C4 fixed odd constants, so different
  levels of the chain never share an input. ``slot`` 0 and 1 feed the two uniforms of a normal, slot 2 the
  uniforms of :func:`record_uniforms`, so normals and uniforms of the same key are independent.
- a 53-bit uniform is (h >> 11) * 2**-53 in [0, 1) (:func:`record_uniforms`); Box-Muller uses
  u1 = ((h >> 11) + 0.5) * 2**-53 in (0, 1), never 0 nor 1, and u2 = (h >> 11) * 2**-53, and returns
  z = sqrt(-2 ln u1) cos(2 pi u2): one standard normal per pair of uniforms, never 0 in practice and
  bounded by sqrt(-2 ln 2**-54) ~ 8.65 (never inf).

``step`` and ``stream`` go through :func:`sdc_tasks.randomness.stream_key` (non-negative ints as
themselves, anything else by CRC-32 of its text), like the keys of ``rng_for``.
"""

from __future__ import annotations

import numpy as np

from sdc_tasks.randomness import stream_key

_MASK64 = (1 << 64) - 1
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_C1 = np.uint64(0xD1B54A32D192ED03)
_C2 = np.uint64(0xAEF17502108EF2D9)
_C3 = np.uint64(0xDB4F0B9175AE2165)
_C4 = np.uint64(0x8CB92BA72F3D8DD7)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_TWO_M53 = 2.0**-53


def _mix(z: np.ndarray) -> np.ndarray:
    """SplitMix64 finalizer on a uint64 array (wrapping arithmetic)."""
    z = np.asarray(z, dtype=np.uint64)
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def _u64(value: int) -> np.ndarray:
    """A Python int as a 0-d uint64 array, reduced modulo 2**64."""
    return np.array(int(value) & _MASK64, dtype=np.uint64)


def _check_args(seed: object, ids: np.ndarray, columns: object) -> tuple[np.ndarray, int]:
    """Validate the common arguments; return ids as a 1-D uint64 array (two's complement) and columns."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    if isinstance(columns, bool) or not isinstance(columns, (int, np.integer)) or columns < 0:
        raise ValueError(f"columns must be an integer >= 0, got {columns!r}")
    arr = np.asarray(ids)
    if arr.ndim != 1:
        raise ValueError(f"ids must be 1-D, got {arr.ndim} dimensions")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"ids must be integers (record ids), got dtype {arr.dtype}")
    if not arr.size:
        return np.empty(0, np.uint64), int(columns)
    if arr.dtype == np.uint64:
        return arr, int(columns)
    return arr.astype(np.int64, copy=False).view(np.uint64), int(columns)


def _hashes(seed: int, step: object, stream: object, ids: np.ndarray, columns: int, slot: int) -> np.ndarray:
    """uint64 hashes (n, columns) of (seed, step, stream, id, 4 * column + slot); see the module docstring."""
    with np.errstate(over="ignore"):
        h = _mix(_u64(seed) + _GOLDEN)
        h = _mix(h ^ _mix(_u64(stream_key(step)) + _C1))
        h = _mix(h ^ _mix(_u64(stream_key(stream)) + _C2))
        per_record = _mix(h ^ _mix(ids + _C3))
        counters = np.arange(columns, dtype=np.uint64) * np.uint64(4) + np.uint64(slot)
        per_column = _mix(counters + _C4)
        return _mix(per_record[:, None] ^ per_column[None, :])


def record_uniforms(seed: int, step: object, ids: np.ndarray, columns: int, stream: object = 0) -> np.ndarray:
    """Return (n, columns) float64 uniforms in [0, 1) depending only on (seed, step, stream, id, column).

    Each value is (h >> 11) * 2**-53 for h the SplitMix64-finalized hash of its keys (module docstring):
    the same record id gives the same row whatever the order, chunking or partitioning of ``ids``.
    """
    ids64, cols = _check_args(seed, ids, columns)
    h = _hashes(int(seed), step, stream, ids64, cols, slot=2)
    return (h >> np.uint64(11)).astype(np.float64) * _TWO_M53


def record_normals(seed: int, step: object, ids: np.ndarray, columns: int, stream: object = 0) -> np.ndarray:
    """Return (n, columns) standard normals depending only on (seed, step, stream, id, column).

    Box-Muller on two independent 53-bit uniforms per value (slots 0 and 1 of the key chain):
    z = sqrt(-2 ln u1) cos(2 pi u2) with u1 = ((h1 >> 11) + 0.5) 2**-53 in (0, 1) and
    u2 = (h2 >> 11) 2**-53 in [0, 1). Values are finite (|z| < 8.7) and independent of row order.
    """
    ids64, cols = _check_args(seed, ids, columns)
    h1 = _hashes(int(seed), step, stream, ids64, cols, slot=0)
    h2 = _hashes(int(seed), step, stream, ids64, cols, slot=1)
    u1 = ((h1 >> np.uint64(11)).astype(np.float64) + 0.5) * _TWO_M53
    u2 = (h2 >> np.uint64(11)).astype(np.float64) * _TWO_M53
    return np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2)
