"""The mask step alone at scale: time and peak memory of one rank-swapping step (p = 15, all 13 Census-like
variables) on a 2-worker LocalCluster, by the whole-column path (each variable gathered into one task) or by the
fold over rank-ordered partitions (``sdc_tasks.masking.fold``), and whether both give the same file.

For each size: generate the records (Parquet files of 250,000 records), run ``apply_step`` (mask and restore
stages, the result written to Parquet) with each path asked for, and print the wall time and the peak RSS of the
driver, of the largest worker and of all processes (benchmarks/peak_memory.py); with both paths, whether the two
written files are equal.

Usage: python benchmarks/mask_step_memory.py [--rows 1000000 10000000] [--paths column fold] [--strata 0]
       [--variables 13] [--json figures.json]
Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import pandas as pd
from peak_memory import PeakRSS

from sdc_tasks.cluster import dask_client
from sdc_tasks.generate import CENSUS_VARIABLES, write_synthetic
from sdc_tasks.io import read_table, write_parquet
from sdc_tasks.masking import apply as A
from sdc_tasks.masking.methods import apply_step
from sdc_tasks.masking.registry import validate_params

GIB = 2**30
THRESHOLDS = {"column": 2**62, "fold": 0}


def step_figures(data: Path, out: Path, rows: int, path: str, strata: bool, workers: int, variables: list[str]) -> dict:
    """Run the rank-swapping step on ``variables`` by one path and return its time and peak memory."""
    A.COLUMN_MAX_RECORDS = THRESHOLDS[path]
    ctx = A.StepContext(seed=1, step=0, id_column="record_id", strata="stratum" if strata else None)
    with dask_client(workers=workers), PeakRSS() as mem:
        start = time.time()
        staged = apply_step(read_table(data, "parquet"), "rankswap", variables,
                            validate_params("rankswap", {"p": 15}), ctx, work_dir=out.parent / f"scratch-{path}")
        write_parquet(staged.frame, out)
        end = time.time()
    peak = mem.between(start, end)
    figures = {"rows": rows, "path": path, "strata": strata, "variables": len(variables), "seconds": end - start,
               "rss_driver_gib": peak.driver / GIB, "rss_worker_gib": peak.worker / GIB,
               "rss_all_gib": peak.total / GIB}
    print(f"rows={rows} path={path} strata={strata} variables={len(variables)}: {end - start:8.1f} s  RSS driver {peak.driver / GIB:5.2f}  "
          f"largest worker {peak.worker / GIB:5.2f}  all {peak.total / GIB:5.2f} GiB", flush=True)
    return figures


def main() -> None:
    """Run the mask step at each size by each path and print its figures."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, nargs="+", default=[1_000_000])
    ap.add_argument("--paths", nargs="+", choices=sorted(THRESHOLDS), default=["column", "fold"])
    ap.add_argument("--strata", type=int, default=0, help="number of strata in the generated records (0: none)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--variables", type=int, default=len(CENSUS_VARIABLES), help="swap the first N variables")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()
    figures = []
    for rows in args.rows:
        with tempfile.TemporaryDirectory() as tmp:
            data = Path(tmp) / "data"
            write_synthetic(data, rows, seed=7, strata=args.strata, rows_per_file=250_000)
            outs = {p: Path(tmp) / f"out-{p}" for p in args.paths}
            variables = list(CENSUS_VARIABLES)[:args.variables]
            figures += [step_figures(data, outs[p], rows, p, args.strata > 0, args.workers, variables)
                        for p in args.paths]
            if len(outs) == 2:
                a, b = (pd.read_parquet(o) for o in outs.values())
                print(f"rows={rows}: the two paths' files are {'equal' if a.equals(b) else 'DIFFERENT'}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1, allow_nan=False))


if __name__ == "__main__":
    main()
