"""One task of the rank-swap fold: seconds per chunk of ``rank_swap_chunk`` (sdc_tasks.masking.rankswap) over a scope
of n ranks, the chunks in order as the fold's chain runs them, each given the carry of the one before.

Each chunk holds ``--chunk`` ranks (the fold's rank-ordered partitions: 250,000 records), uniform values in rank
order; the figure is the mean over the chunks after the first two (the carry of pending partners grows over the
first P / chunk chunks, P = floor(n p / 100), then stays about P / 4 at p = 15), so give at least P / chunk + 2
chunks for a steady figure. Prints, per n, the seconds per chunk and the carry's entries at the end.

Usage: python benchmarks/rank_fold_chunks.py [--n 1e6 1e7 3e7 1e8] [--chunks 4 14 40 70] [--p 15]
       [--chunk 250000] [--partner uniform|nearest_free]
(not a test)
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from sdc_tasks.masking.rankswap import rank_swap_chunk


def seconds_per_chunk(n: int, chunks: int, p: float, size: int, partner: str) -> tuple[float, int]:
    """Mean seconds of the chunks after the first two of a scope of ``n`` ranks, and the carry's entries after the
    last."""
    values = np.random.default_rng(1)
    carry, took = None, []
    for c in range(min(chunks, -(-n // size))):
        first = c * size
        m = min(size, n - first)
        chunk = np.sort(values.random(m))
        start = time.perf_counter()
        _, _, carry = rank_swap_chunk(chunk, np.arange(first, first + m), first, n, p, np.random.default_rng(5),
                                      carry, partner)
        took.append(time.perf_counter() - start)
    steady = took[2:] or took
    return float(np.mean(steady)), int(carry.ranks.size)


def main() -> None:
    """Time the chunks of each scope."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=float, nargs="+", default=[1e6, 1e7, 3e7, 1e8])
    ap.add_argument("--chunks", type=int, nargs="+", default=[4, 14, 40, 70])
    ap.add_argument("--p", type=float, default=15.0)
    ap.add_argument("--chunk", type=int, default=250_000)
    ap.add_argument("--partner", choices=("uniform", "nearest_free"), default="uniform")
    args = ap.parse_args()
    if len(args.chunks) != len(args.n):
        ap.error("give one --chunks per --n")
    seconds_per_chunk(1_000, 2, args.p, 500, args.partner)  # compile or load the kernels
    for n, chunks in zip(args.n, args.chunks):
        seconds, carry = seconds_per_chunk(int(n), chunks, args.p, args.chunk, args.partner)
        print(f"n={int(n):>11,}  {seconds:.3f} s per chunk of {args.chunk:,}  carry {carry:,}", flush=True)


if __name__ == "__main__":
    main()
