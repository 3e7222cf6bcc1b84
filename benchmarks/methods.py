"""Every masking method on N generated records: wall time, records/s and peak memory (driver + workers) per
method, each run as sdc_tasks.api.mask does it (input checks, block, mask and restore) on a local Dask cluster,
output written to Parquet.

Usage: python benchmarks/methods.py --rows 1000000 [--workers 2] [--only mdav,rankswap]   (not a test)
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from peak_memory import PeakRSS

from sdc_tasks.api import mask
from sdc_tasks.cluster import dask_client
from sdc_tasks.generate import CENSUS_VARIABLES, write_synthetic
from sdc_tasks.masking.registry import METHODS

PARAMS = {
    "mdav": {"k": 3, "group_size": 3}, "md": {"k": 3, "group_size": 3}, "mdav_variable": {"k": 3, "group_size": 3}, "mic_ir": {"k": 3},
    "mic_optimal": {"k": 3}, "mic_z": {"k": 3}, "mic_pcp": {"k": 3}, "rankswap": {"p": 15},
    "noise": {"p": 0.1, "correlated": True, "linear_transform": True}, "resample": {"t": 3}, "rescale": {},
    "distr": {}, "jpeg": {"q": 50},
}


def main() -> None:
    """Run each method and print its figures."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    methods = [m for m in PARAMS if not args.only or m in args.only.split(",")]
    with tempfile.TemporaryDirectory() as tmp, dask_client(workers=args.workers):
        data = Path(tmp) / "data"
        write_synthetic(data, args.rows, seed=5, rows_per_file=250_000)
        print(f"rows={args.rows} workers={args.workers}")
        for method in methods:
            original = {"original": data} if METHODS[method].after_masking else {}
            with PeakRSS() as mem:
                t = time.perf_counter()
                mask(data, method, vars=list(CENSUS_VARIABLES), seed=1, out=Path(tmp) / f"out-{method}", **original,
                     **PARAMS[method])
                secs = time.perf_counter() - t
            print(f"{method:>14}: {secs:8.1f} s  {args.rows / secs:10.0f} records/s  peak {mem.peak / 2**30:5.2f} GiB",
                  flush=True)


if __name__ == "__main__":
    main()
