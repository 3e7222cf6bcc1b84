"""The performance record: full releases of generated Census-like records (13 continuous variables) at each
size asked for, with the figures the scale issue asks for.

For every size: generate the records (Parquet files of 250,000 records), time one plain read of them (every
column summed), then run the release flow with each spec (blocked MDAV k = 3 on Mic3mul groups; rank swapping
p = 15; on request blocked MD k = 3 on Mic3mul groups), each with the full evaluation (IL battery, PIL,
DLD_1..DLD_7, ID; ``--metrics`` names fewer) and the report. Per stage it prints wall time, records/s, the ratio to
the plain read, and the peak RSS of the driver (which hosts the LocalCluster's scheduler), of the largest worker
and of all processes together; at the end, the ratio of each release's time at the largest size to its time at
the smallest (goal at 1e7 / 1e6: <= 11).

Usage: python benchmarks/scale_record.py [--rows 1000000 10000000] [--workers 2] [--specs mdav rankswap md]
       [--metrics il pil dld id] [--memory-limit auto] [--json figures.json]
Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import yaml
from peak_memory import PeakRSS

from sdc_tasks.generate import CENSUS_VARIABLES, write_synthetic
from sdc_tasks.io import read_table

KEYS = ["FEDTAX", "AFNLWGT", "AGI", "EMCONTRB", "PTOTVAL", "TAXINC", "STATETAX"]
STEPS = {
    "mdav": {"method": "mdav", "params": {"k": 3, "group_size": 3}},
    "md": {"method": "md", "params": {"k": 3, "group_size": 3}},
    "rankswap": {"method": "rankswap", "params": {"p": 15}},
}
GIB = 2**30


FULL_EVALUATION = ["il", "pil", "dld", "id"]


def spec_for(data: Path, out: Path, workers: int, name: str, metrics: list[str], memory_limit: str) -> dict:
    """A release spec over the generated records with the evaluation of ``metrics``, each worker limited to
    ``memory_limit``."""
    return {
        "name": f"scale-{name}",
        "input": {"path": str(data), "format": "parquet"},
        "id_column": "record_id",
        "variables": {"key": KEYS, "continuous": list(CENSUS_VARIABLES)},
        "steps": [STEPS[name]],
        "metrics": metrics,
        "gate": {"max": {"DLD": 100.0}} if "dld" in metrics else {},
        "output": {"dir": str(out), "overwrite": True},
        "seed": 1,
        "dask": {"workers": workers, "threads_per_worker": 1, "memory_limit": memory_limit},
    }


def write_records(data: Path, rows: int) -> None:
    """The record's generated records: ``rows`` Census-like records, seed 7, Parquet files of 250,000 records."""
    write_synthetic(data, rows, seed=7, rows_per_file=250_000)


def plain_read_seconds(data: Path) -> float:
    """Seconds for one read of every column of the Parquet files (summed, so every value is decoded)."""
    t = time.perf_counter()
    read_table(data, "parquet").sum().compute(scheduler="threads")
    return time.perf_counter() - t


def row(label: str, secs: float, rows: int, plain: float, mem) -> dict:
    """Print one stage's figures and return them."""
    print(f"  {label:>28}: {secs:8.1f} s {rows / max(secs, 1e-9):11.0f} rec/s {secs / plain:7.1f}x read  "
          f"RSS driver {mem.driver / GIB:5.2f}  worker {mem.worker / GIB:5.2f}  all {mem.total / GIB:5.2f} GiB",
          flush=True)
    return {"stage": label, "seconds": secs, "records_per_s": rows / max(secs, 1e-9), "x_read": secs / plain,
            "rss_driver_gib": mem.driver / GIB, "rss_worker_gib": mem.worker / GIB, "rss_all_gib": mem.total / GIB}


def release_figures(data: Path, tmp: Path, rows: int, workers: int, name: str, plain: float,
                    metrics: list[str], memory_limit: str) -> dict:
    """Run one release and return its per-stage and total figures."""
    from flows.release import release

    spec = tmp / f"{name}.yaml"
    spec.write_text(yaml.safe_dump(spec_for(data, tmp / f"release-{name}", workers, name, metrics,
                                           memory_limit)))
    with PeakRSS() as mem:
        start = time.time()
        summary = release(str(spec))
        end = time.time()
    print(f"rows={rows} spec={name} workers={workers}")
    stages = [row(stage, end_ - start_, rows, plain, mem.between(start_, end_))
              for stage, (start_, end_) in summary.stage_spans.items()]
    total = row("release total (with Prefect)", end - start, rows, plain, mem.between(start, end))
    m = summary.metrics
    print("  metrics: " + " ".join(f"{k}={m[k]:.3f}" for k in ("IL", "PIL", "DLD", "ID") if k in m), flush=True)
    return {"rows": rows, "spec": name, "stages": stages, "total": total}


def main() -> None:
    """Run the record and print its figures."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--specs", nargs="+", choices=sorted(STEPS), default=["mdav", "rankswap"])
    ap.add_argument("--metrics", nargs="+", choices=FULL_EVALUATION, default=FULL_EVALUATION,
                    help="the evaluation's metric families (default: all; fewer to time the mask step at scale)")
    ap.add_argument("--memory-limit", default="auto",
                    help="each worker's memory limit (Dask's: 'auto' shares the machine's memory among them)")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    figures = []
    for rows in args.rows:
        with tempfile.TemporaryDirectory() as tmp:
            data = Path(tmp) / "data"
            t = time.perf_counter()
            write_records(data, rows)
            print(f"rows={rows}: generated in {time.perf_counter() - t:.1f} s", flush=True)
            plain = plain_read_seconds(data)
            print(f"rows={rows}: plain read {plain:.1f} s ({rows / plain:.0f} rec/s)", flush=True)
            for name in args.specs:
                figures.append({**release_figures(data, Path(tmp), rows, args.workers, name, plain, args.metrics,
                                                  args.memory_limit),
                                "plain_read_s": plain})
    small, large = min(args.rows), max(args.rows)
    if small != large:
        for name in args.specs:
            mine = {f["rows"]: f for f in figures if f["spec"] == name}
            total = {r: f["total"]["seconds"] for r, f in mine.items()}
            stages = {r: sum(s["seconds"] for s in f["stages"]) for r, f in mine.items()}
            print(f"{name}: time({large:.0e}) / time({small:.0e}) = {total[large] / total[small]:.2f} with Prefect's "
                  f"start, {stages[large] / stages[small]:.2f} over the stages (records x {large / small:.0f})")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1, allow_nan=False))


if __name__ == "__main__":
    main()
