"""Exact floating-point sums that merge across partitions: the result cannot depend on how records are split.

Every finite double is an integer multiple of 2^-1074 (the smallest subnormal), below 2^2098 of them, so a
sum of doubles is an integer in those units. Each sum is held as that integer, written in 67 signed 64-bit
chunks of 32 bits (a small superaccumulator, as Neal's xsum, arXiv:1505.05571): the terms' 53-bit significands
are first added in one integer bin per exponent (his large superaccumulator), and each bin's total lands, shifted
by its exponent, on three consecutive chunks, with integer additions only, so no bit is ever rounded away. Two
sums merge by adding their chunks, in any order and grouping with the same integer, and :meth:`ExactSums.values`
rounds that integer once (correctly rounded, as ``math.fsum``). A term that is not finite (an overflowed product)
makes its sum not finite, and a sum beyond the float range rounds to +-inf: never silently to a wrong number.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numba
import numpy as np

CHUNK_BITS = 32
CHUNKS = 67
"""Chunk c holds multiples of 2^(32 c - 1074); a significand shifted by at most 2045 bits reaches chunk 65, and
the last chunk takes the carries (signed)."""
UNIT = Fraction(1, 2 ** 1074)


@numba.njit(cache=True, nogil=True)
def _normalize(chunks: np.ndarray) -> None:
    """Carry every chunk but the last into [0, 2^32) (the same integers; room for BATCH more terms)."""
    for j in range(chunks.shape[0]):
        for c in range(CHUNKS - 1):
            carry = chunks[j, c] >> 32
            chunks[j, c] -= carry << 32
            chunks[j, c + 1] += carry


BATCH = 1 << 30
"""Terms added between two normalizations: each adds below 2^32 to a chunk (a flushed bin, at most one per term,
adds below 2^32 to each of its three chunks), so no int64 chunk can overflow."""


BLOCK = 512
"""Records whose products are added one sum after another: each block's factors are gathered once, contiguous, and
each sum's terms of the block are first added by exponent (:data:`SHIFTS` integer bins), then each bin touched to
the chunks. A bin takes at most BLOCK significands below 2^53 between two such flushes: below 2^62, no int64 bin
can overflow."""
SHIFTS = 2046
"""Binary exponents of a finite double's significand as an integer multiple of 2^-1074: 0 (subnormals) to 2045."""


@numba.njit(cache=True, nogil=True)
def _add_products(chunks: np.ndarray, special: np.ndarray, powers: np.ndarray, spec: np.ndarray) -> None:
    """Add, for every record t and every row (r, i, s, k) of ``spec``, the product powers[r, t, i] *
    powers[s, t, k] (rounded once; s = -1: the factor powers[r, t, i] alone) to sum number row, exactly. A
    product is its signed significand m times 2^shift (units of 2^-1074); within a block of BLOCK records the m
    of each shift are added in the shift's integer bin (Neal's large superaccumulator, arXiv:1505.05571 sec. 3),
    then each bin's total, in two's complement, is split into 32 + 32 bits and a signed rest on three consecutive
    chunks (non-finite products are counted in ``special``; zeros add nothing)."""
    orders, records, columns = powers.shape
    factors = np.empty((orders, columns, BLOCK))
    row = np.empty(BLOCK)
    bits = row.view(np.int64)
    bins = np.zeros(SHIFTS, dtype=np.int64)
    for t0 in range(0, records, BLOCK):
        m = min(BLOCK, records - t0)
        for r in range(orders):
            for u in range(m):
                for i in range(columns):
                    factors[r, i, u] = powers[r, t0 + u, i]
        for a in range(spec.shape[0]):
            first = factors[spec[a, 0], spec[a, 1]]
            if spec[a, 2] >= 0:
                second = factors[spec[a, 2], spec[a, 3]]
                for u in range(m):
                    row[u] = first[u] * second[u]
            else:
                for u in range(m):
                    row[u] = first[u]
            low, high = SHIFTS, -1
            for u in range(m):
                b = bits[u]
                exp = (b >> 52) & 0x7FF
                if exp == 0x7FF:
                    special[a] += 1.0
                    continue
                mant = b & 0xFFFFFFFFFFFFF
                shift = exp - 1
                if exp > 0:
                    mant |= np.int64(1) << 52
                elif mant == 0:  # a zero: left out, so it does not widen the range of bins flushed
                    continue
                else:
                    shift = np.int64(0)
                sign = b >> 63  # 0, or -1 for a negative product: negated without a branch
                bins[shift] += (mant ^ sign) - sign
                low, high = min(low, shift), max(high, shift)
            for shift in range(low, high + 1):
                v = bins[shift]
                if v != 0:
                    bins[shift] = 0
                    c = shift >> 5
                    s = shift & 31
                    chunks[a, c] += (v << s) & 0xFFFFFFFF
                    chunks[a, c + 1] += (v >> (32 - s)) & 0xFFFFFFFF
                    chunks[a, c + 2] += (v >> 32) >> (32 - s)


@dataclass(frozen=True)
class ExactSums:
    """k exact sums, mergeable with ``+`` in any order and grouping with the same result (chunks normalized)."""

    chunks: np.ndarray
    special: np.ndarray

    @classmethod
    def zero(cls, k: int) -> "ExactSums":
        """k empty sums (the identity of ``+``)."""
        return cls(np.zeros((k, CHUNKS), dtype=np.int64), np.zeros(k))

    @classmethod
    def stack(cls, parts: list["ExactSums"]) -> "ExactSums":
        """The sums of ``parts`` one after the other."""
        if not parts:
            return cls.zero(0)
        return cls(np.concatenate([p.chunks for p in parts]), np.concatenate([p.special for p in parts]))

    def __add__(self, other: "ExactSums") -> "ExactSums":
        """The sums of the terms of both (disjoint blocks of terms)."""
        chunks = self.chunks + other.chunks
        _normalize(chunks)
        return ExactSums(chunks, self.special + other.special)

    def fractions(self) -> list[Fraction | None]:
        """Each exact sum as a Fraction (None where a term was not finite)."""
        return [None if s != 0.0 else UNIT * sum(int(v) << (CHUNK_BITS * c) for c, v in enumerate(row.tolist()))
                for row, s in zip(self.chunks, self.special)]

    def values(self) -> np.ndarray:
        """Each exact sum correctly rounded to a float (+-inf beyond the float range, NaN where a term was not
        finite)."""
        return np.array([np.nan if f is None else _rounded(f) for f in self.fractions()])


def _rounded(f: Fraction) -> float:
    """``f`` correctly rounded to a float, +-inf when it is beyond the float range."""
    try:
        return float(f)
    except OverflowError:
        return float("inf") if f > 0 else float("-inf")


def exact_sums(*terms: np.ndarray) -> ExactSums:
    """One exact sum per array of ``terms`` (each summed over all its entries)."""
    alone = np.array([[0, 0, -1, 0]])
    return ExactSums.stack([product_sums(np.asarray(t, dtype=np.float64).reshape(1, -1, 1), alone) for t in terms])


def product_sums(powers: np.ndarray, spec: np.ndarray) -> ExactSums:
    """Exact sums over records t of powers[r, t, i] * powers[s, t, k] (powers[r, t, i] where s = -1), one per
    row (r, i, s, k) of ``spec``; ``powers`` is (orders, records, columns), each product rounded once, as numpy
    would round it."""
    spec = np.ascontiguousarray(spec, dtype=np.int64).reshape(-1, 4)
    out = ExactSums.zero(spec.shape[0])
    powers = np.ascontiguousarray(powers, dtype=np.float64)
    for start in range(0, powers.shape[1], BATCH):
        _add_products(out.chunks, out.special, np.ascontiguousarray(powers[:, start:start + BATCH]), spec)
        _normalize(out.chunks)
    return out
