"""Quality and speed of blocked MDAV against the survey's global MDAV on N generated records: SSE/SST of both
(goal: blocked <= 1.03 x global at 1e5) and the time per 1e6 records (sdc_tasks.api.mask: the input checks,
then block, mask and restore).

Usage: python benchmarks/blocked_mdav_quality.py --rows 100000 [--k 3] [--block-size 10000]   (not a test)
"""

from __future__ import annotations

import argparse
import time

import dask
import numpy as np

from sdc_tasks.api import masked
from sdc_tasks.generate import CENSUS_VARIABLES, census_model, census_reference, synthetic_chunk
from sdc_tasks.masking.mdav import mdav_groups
from sdc_tasks.masking.microaggregation import group_means


def sse_over_sst(x: np.ndarray, xm: np.ndarray) -> float:
    """Within-group SSE over total SS on standardized data (statistical_databases_survey.txt, Microaggregation)."""
    mean, sd = x.mean(axis=0), x.std(axis=0)
    z, zm = (x - mean) / sd, (xm - mean) / sd
    return float(((z - zm) ** 2).sum() / (z ** 2).sum())


def main() -> None:
    """Run the comparison and print its figures."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--block-size", type=int, default=10_000)
    args = ap.parse_args()
    df = synthetic_chunk(census_model(census_reference()), args.rows, seed=11, chunk_index=0, first_id=0)
    variables = list(CENSUS_VARIABLES)
    x = df[variables].to_numpy(np.float64)
    t = time.perf_counter()
    z = (x - x.mean(axis=0)) / x.std(axis=0)
    global_masked = group_means(x, mdav_groups(z, args.k))
    t_global = time.perf_counter() - t
    with dask.config.set(scheduler="synchronous"):
        t = time.perf_counter()
        staged = masked(df, "mdav", {"k": args.k, "block_size": args.block_size}, vars=variables)
        blocked = staged.data[variables].to_numpy(np.float64)
        t_blocked = time.perf_counter() - t
    g, b = sse_over_sst(x, global_masked), sse_over_sst(x, blocked)
    print(f"rows={args.rows} k={args.k} block_size={args.block_size} blocks={staged.blocks}")
    print(f"global MDAV : SSE/SST = {g:.5f}  time {t_global:7.1f} s")
    print(f"blocked MDAV: SSE/SST = {b:.5f}  time {t_blocked:7.1f} s  ({t_blocked / args.rows * 1e6:.1f} s per 1e6 "
          f"records, one process)")
    print(f"ratio blocked / global: {b / g:.4f}  (goal <= 1.03)")


if __name__ == "__main__":
    main()
