"""Disclosure risk at scale: DLD_1..DLD_m (blocked exact linkage), ID_1..ID_10 + SDID and PLD on N generated
records, each timed with the peak memory of driver + workers, beside one plain read of the same Parquet files.

The masked file is the original with every value times exp(N(0, 0.1)) (ids kept). ``--single-cell`` adds the
unblocked baseline (one cell holding the whole original file on one worker, the design this replaced).

Usage: python benchmarks/risk_scale.py --rows 1000000 [--workers 2] [--cell-rows 250000] [--pld-cell-rows 20000]
[--single-cell] [--skip-pld] [--skip-id] [--skip-combined] [--through-files]
(not part of the test suite)
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from il_battery import write_noisy_copy
from peak_memory import PeakRSS

from sdc_tasks.cluster import dask_client
from sdc_tasks.evaluation import pairing
from sdc_tasks.evaluation.linkage import DEFAULT_CELL_ROWS, PLD_CELL_ROWS
from sdc_tasks.evaluation.measures import evaluate
from sdc_tasks.generate import CENSUS_VARIABLES, write_synthetic
from sdc_tasks.io import read_table


def timed(label: str, rows: int, plain: float, run) -> dict:
    """Run ``run()``, print its wall time, records/s, ratio to the plain read and peak memory; return its result."""
    with PeakRSS() as mem:
        t, start = time.perf_counter(), time.time()
        out = run()
        secs, end = time.perf_counter() - t, time.time()
    worker = mem.between(start, end).worker
    print(f"{label:>28}: {secs:8.1f} s  {rows / secs:10.0f} records/s  {secs / plain:6.1f}x read  "
          f"peak {mem.peak / 2**30:5.2f} GiB, largest worker {worker / 2**30:5.2f} GiB", flush=True)
    return out


def main() -> None:
    """Run the benchmark and print its figures."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--cell-rows", type=int, default=DEFAULT_CELL_ROWS)
    ap.add_argument("--pld-cell-rows", type=int, default=PLD_CELL_ROWS)
    ap.add_argument("--single-cell", action="store_true", help="also time the unblocked one-cell baseline")
    ap.add_argument("--skip-pld", action="store_true")
    ap.add_argument("--skip-id", action="store_true", help="do not time ID (nor DLD + ID together)")
    ap.add_argument("--skip-combined", action="store_true", help="do not time DLD + ID in one evaluation")
    ap.add_argument("--through-files", action="store_true",
                    help="run as a file larger than the workers keep in memory does: the pairs written as Parquet and "
                         "the graphs' intermediate results kept in files of a work directory")
    args = ap.parse_args()
    variables = list(CENSUS_VARIABLES)
    keys = variables[:7]
    with tempfile.TemporaryDirectory() as tmp:
        orig, masked = Path(tmp) / "orig", Path(tmp) / "masked"
        write_synthetic(orig, args.rows, seed=3, rows_per_file=250_000)
        write_noisy_copy(orig, masked, seed=4)
        if args.through_files:
            pairing.workers_hold = lambda nbytes: False
        work = Path(tmp) / "work" if args.through_files else None
        with dask_client(workers=args.workers):
            def run(families, cell_rows=args.cell_rows):
                return lambda: evaluate(read_table(orig, "parquet"), read_table(masked, "parquet"), "record_id",
                                        variables, keys, families, cell_rows=cell_rows,
                                        pld_cell_rows=args.pld_cell_rows, work_dir=work)

            t = time.perf_counter()
            read_table(orig, "parquet")[variables].sum().compute()
            read_table(masked, "parquet")[variables].sum().compute()
            plain = time.perf_counter() - t
            print(f"rows={args.rows} workers={args.workers} keys={len(keys)} cell_rows={args.cell_rows} "
                  f"pld_cell_rows={args.pld_cell_rows}")
            print(f"{'plain read of both files':>28}: {plain:8.1f} s  {args.rows / plain:10.0f} records/s")
            dld = timed(f"DLD_1..DLD_{len(keys)} (blocked)", args.rows, plain, run(("dld",)))
            if args.single_cell:
                one = timed("DLD, one cell (baseline)", args.rows, plain, run(("dld",), args.rows))
                assert one["DLD"] == dld["DLD"], (one["DLD"], dld["DLD"])
            ids = {} if args.skip_id else timed("ID_1..ID_10 + SDID", args.rows, plain, run(("id",)))
            if not args.skip_combined and ids:
                both = timed("DLD + ID together", args.rows, plain, run(("dld", "id")))
                assert both["DLD"] == dld["DLD"] and both["ID"] == ids["ID"]
            pld = {} if args.skip_pld else timed("PLD", args.rows, plain, run(("pld",)))
    print(" ".join(f"DLD_{i}={dld[f'DLD_{i}']:.2f}" for i in range(1, len(keys) + 1)))
    print(f"DLD={dld['DLD']:.3f}" + (f" ID={ids['ID']:.3f} SDID={ids['SDID']:.3f}" if ids else "")
          + (f" PLD={pld['PLD']:.3f} (candidate recall {pld['PLD_candidate_recall']:.2f})" if pld else ""))


if __name__ == "__main__":
    main()
