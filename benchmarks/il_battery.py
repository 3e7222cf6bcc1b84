"""Time of the full information loss battery (IL1..IL5, IL, IL1s, matrix measures, brMAE/brMSE, PIL) on N
generated records, and its ratio to one plain pass reading the same Parquet files, both on the same cluster.

Usage: python benchmarks/il_battery.py --rows 1000000 [--workers 2]      (not part of the test suite)
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from sdc_tasks.cluster import dask_client
from sdc_tasks.evaluation.measures import evaluate
from sdc_tasks.generate import CENSUS_VARIABLES, write_synthetic
from sdc_tasks.io import read_table


def write_noisy_copy(src: Path, dst: Path, seed: int) -> None:
    """A masked copy: every value times exp(N(0, 0.1)), file by file (ids kept)."""
    dst.mkdir()
    rng = np.random.default_rng(seed)
    for f in sorted(src.glob("*.parquet")):
        t = pq.read_table(f).to_pandas()
        for v in CENSUS_VARIABLES:
            t[v] = t[v] * np.exp(rng.normal(0, 0.1, len(t)))
        pq.write_table(pa.Table.from_pandas(t, preserve_index=False), dst / f.name)


def main() -> None:
    """Run the benchmark and print its figures."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    variables = list(CENSUS_VARIABLES)
    with tempfile.TemporaryDirectory() as tmp:
        orig, masked = Path(tmp) / "orig", Path(tmp) / "masked"
        write_synthetic(orig, args.rows, seed=3, rows_per_file=250_000)
        write_noisy_copy(orig, masked, seed=4)
        with dask_client(workers=args.workers):
            t = time.perf_counter()
            read_table(orig, "parquet")[variables].sum().compute()
            read_table(masked, "parquet")[variables].sum().compute()
            plain = time.perf_counter() - t
            t = time.perf_counter()
            m = evaluate(read_table(orig, "parquet"), read_table(masked, "parquet"), "record_id", variables,
                         variables[:7], ("il", "pil"))
            battery = time.perf_counter() - t
    print(f"rows={args.rows} workers={args.workers}")
    print(f"plain read of both files: {plain:8.1f} s  {args.rows / plain:12.0f} records/s")
    print(f"IL battery (il + pil):    {battery:8.1f} s  {args.rows / battery:12.0f} records/s")
    print(f"ratio battery / plain read: {battery / plain:.1f}")
    print("IL={IL:.3f} PIL={PIL:.3f} brMAE={brMAE:.4f}".format(**m))


if __name__ == "__main__":
    main()
