"""Scale run of the release flow: generate N Census-like records, release them with blocked MDAV (Mic3mul,
k = 3) and print per-stage wall time, records/s and peak memory of the cluster's processes.

Usage: python benchmarks/release_scale.py --rows 1000000 [--workers 2] [--block-size 10000] [--method mdav]
Not part of the test suite.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import yaml

from peak_memory import PeakRSS
from sdc_tasks.generate import CENSUS_VARIABLES, write_synthetic


def spec_for(data: Path, out: Path, workers: int, method: str, block_size: int) -> dict:
    """A release spec over the generated dataset."""
    params = {"k": 3, "group_size": 3, "block_size": block_size} if method == "mdav" else {"p": 15}
    return {
        "name": f"scale-{method}",
        "input": {"path": str(data), "format": "parquet"},
        "id_column": "record_id",
        "variables": {"key": ["FEDTAX", "AFNLWGT", "AGI", "EMCONTRB", "PTOTVAL", "TAXINC", "STATETAX"],
                      "continuous": list(CENSUS_VARIABLES)},
        "steps": [{"method": method, "params": params}],
        "gate": {"max": {"DLD": 100.0}},
        "output": {"dir": str(out), "overwrite": True},
        "seed": 1,
        "dask": {"workers": workers, "threads_per_worker": 1},
    }


def main() -> None:
    """Run the benchmark and print its figures."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--block-size", type=int, default=10_000)
    ap.add_argument("--method", choices=["mdav", "rankswap"], default="mdav")
    args = ap.parse_args()
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    from flows.release import release

    with tempfile.TemporaryDirectory() as tmp:
        data, out = Path(tmp) / "data", Path(tmp) / "release"
        t = time.perf_counter()
        write_synthetic(data, args.rows, seed=7, rows_per_file=250_000)
        gen = time.perf_counter() - t
        spec = Path(tmp) / "spec.yaml"
        spec.write_text(yaml.safe_dump(spec_for(data, out, args.workers, args.method, args.block_size)))
        with PeakRSS() as mem:
            t = time.perf_counter()
            summary = release(str(spec))
            total = time.perf_counter() - t
    print(f"rows={args.rows} workers={args.workers} method={args.method} block_size={args.block_size}")
    print(f"generate: {gen:.1f} s")
    for stage, secs in summary["stage_seconds"].items():
        print(f"{stage:>28}: {secs:8.1f} s  {args.rows / max(secs, 1e-9):12.0f} records/s")
    print(f"{'release total':>28}: {total:8.1f} s  {args.rows / total:12.0f} records/s")
    print(f"peak RSS (driver + workers): {mem.peak / 2**30:.2f} GiB")
    m = summary["metrics"]
    print("metrics: " + " ".join(f"{k}={m[k]:.2f}" for k in ("IL", "DLD", "ID", "score_simple") if k in m))


if __name__ == "__main__":
    main()
