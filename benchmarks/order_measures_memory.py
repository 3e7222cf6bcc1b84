"""Time and peak memory of the order-based measures (brMAE/brMSE ranks, PIL_Q quantiles, ID windows; families il,
pil, id) and the report's variable profiles computed with them, as a release evaluates, gathered on one task per
variable, sorted across the partitions by Dask's shuffle with the sorted columns persisted (as files up to a quarter
of the workers' memory are), and sorted through files (as larger files are: the pairs written as Parquet, each
sort exchanged and kept in files of a work directory; sdc_tasks/evaluation/order_measures.py), on the same
generated Census-like files, each on a fresh 2-worker LocalCluster.

The masked file is the original with Gaussian noise of 0.1 sd on every variable (``--masking noise``, the
default: the memory of these measures does not depend on the masking method), or the original masked by ``sdc
mask`` as scale_record.py's specs mask it (``--masking mdav``: groups of three records sharing their values, so
nearly every masked value ties; ``--masking rankswap``). Prints, per mode, the wall time and the peak RSS of the
driver, of the largest worker and of all processes, and checks that the modes give the same metrics and profiles
(with the noise the files mode joins nothing, the files are zipped, so to the bit).

Usage: python benchmarks/order_measures_memory.py [--rows 4000000] [--workers 2] [--modes gathered sorted files]
[--masking noise|mdav|rankswap] [--json out.json]
Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from evaluation_parts import MASKINGS, masked_by
from peak_memory import PeakRSS

from sdc_tasks.evaluation import order_measures, pairing
from sdc_tasks.evaluation.measures import continuous_measures
from sdc_tasks.generate import CENSUS_VARIABLES, write_synthetic
from sdc_tasks.io import read_table

KEYS = ["FEDTAX", "AFNLWGT", "AGI", "EMCONTRB", "PTOTVAL", "TAXINC", "STATETAX"]
GIB = 2**30
HOLD = pairing.workers_hold


def _noisy(part: pd.DataFrame, partition_info: dict | None = None) -> pd.DataFrame:
    """One partition with 0.1 sd of Gaussian noise on every variable (seeded by the partition number)."""
    rng = np.random.default_rng(1 + (partition_info or {}).get("number", 0))
    out = part.copy()
    for v in CENSUS_VARIABLES:
        out[v] = part[v] + rng.normal(0.0, 0.1 * float(part[v].std() or 1.0), len(part))
    return out


MODES = ("gathered", "sorted", "files")


def measure(original: Path, masked: Path, workers: int, mode: str, work: Path) -> tuple[dict, dict]:
    """The il, pil and id metrics and the variable profiles with the order measures in one of MODES (``work``: the
    work directory of the files mode), and the run's figures."""
    from distributed import Client, LocalCluster

    order_measures.GATHER_ROWS = 10**12 if mode == "gathered" else 0
    pairing.workers_hold = (lambda nbytes: False) if mode == "files" else HOLD
    with LocalCluster(n_workers=workers, threads_per_worker=1, dashboard_address=None) as cluster, \
            Client(cluster), PeakRSS() as mem:
        start = time.time()
        metrics = continuous_measures(read_table(original, "parquet"), read_table(masked, "parquet"), "record_id",
                                      list(CENSUS_VARIABLES), KEYS, ("il", "pil", "id"), profile=True,
                                      work_dir=work if mode == "files" else None)
        end = time.time()
    peak = mem.between(start, end)
    figures = {"mode": mode, "seconds": end - start,
               "rss_driver_gib": peak.driver / GIB, "rss_worker_gib": peak.worker / GIB,
               "rss_all_gib": peak.total / GIB}
    print(f"  {figures['mode']:>8}: {figures['seconds']:7.1f} s  RSS driver {figures['rss_driver_gib']:5.2f}  "
          f"worker {figures['rss_worker_gib']:5.2f}  all {figures['rss_all_gib']:5.2f} GiB", flush=True)
    return metrics, figures


def main() -> None:
    """Generate the files, measure both modes, check they agree."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, nargs="+", default=[4_000_000])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    ap.add_argument("--masking", choices=["noise", *MASKINGS], default="noise", help="how the masked file is made")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()
    out = []
    for rows in args.rows:
        with tempfile.TemporaryDirectory() as tmp:
            original, masked = Path(tmp) / "original", Path(tmp) / "masked"
            write_synthetic(original, rows, seed=7, rows_per_file=250_000)
            if args.masking == "noise":
                frame = read_table(original, "parquet")
                frame.map_partitions(_noisy, meta=frame._meta).to_parquet(masked, write_index=False)
            else:
                masked_by(args.masking, original, masked)
            print(f"rows={rows}, masking {args.masking}", flush=True)
            runs = [measure(original, masked, args.workers, mode, Path(tmp) / "work") for mode in args.modes]
            same = all(metrics == runs[0][0] for metrics, _ in runs)
            print(f"  same metrics and profiles: {same}", flush=True)
            out.append({"rows": rows, "modes": [figures for _, figures in runs], "same_metrics": same})
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
