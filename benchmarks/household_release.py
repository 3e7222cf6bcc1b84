"""A census household release at scale: N generated persons in households (``sdc generate --households``:
region > district > area, 8 x 10 x 20 areas), released with targeted record swapping (k = 3 on age group, sex and
nationality by geography, swap rate 0.05, donors of the same household size, else any; tenure carried along)
and the categorical risk with household risk (keys district, age group, sex, nationality; sampling weight), timed
with the peak memory of driver + workers; then the swap's figures and the household risk. The keys stop at the
district: with the area among them, cat_risk's PLD_cat (a transport LP over pairs of key combinations) needed
more than 9 GB at 30,000 persons on this machine.

Usage: python benchmarks/household_release.py --rows 100000 [--workers 2] [--rows-per-file 1000000]
(not part of the test suite; docs/recordswap.md)
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from peak_memory import PeakRSS

from sdc_tasks.cluster import dask_client
from sdc_tasks.generate import write_households
from sdc_tasks.pipeline.run import run_release
from sdc_tasks.pipeline.spec import parse_spec

HIERARCHY = ["region", "district", "area"]
RISK = ["age_group", "sex", "nationality"]
SHOWN = ("trs_swap_rate", "trs_swap_rate_target", *(f"trs_level_swap_rate_{c}" for c in HIERARCHY),
         "trs_risky_households_before", "trs_risky_households_after", "trs_unmatched_households",
         "trs_persons_swapped", "household_expected_reidentifications", "household_risk_max",
         "households_risk_above_0.1", "kanon_violations_3")


def release_spec(data: Path, out: Path) -> object:
    """The release spec of the generated household file."""
    return parse_spec({
        "input": {"path": str(data)}, "id_column": "record_id",
        "variables": {"categorical": [*HIERARCHY, "tenure", *RISK], "key": ["district", *RISK], "weight": "weight",
                      "pass_through": ["household_id", "hhsize", "age"]},
        "households": {"id": "household_id", "variables": [*HIERARCHY, "tenure"]},
        "steps": [{"method": "record_swap", "params": {"hierarchy": HIERARCHY, "risk_variables": RISK, "k": 3,
                                                      "swap_rate": 0.05, "similar": [["hhsize"], []],
                                                      "carry_along": ["tenure"]}}],
        "metrics": ["cat_risk"], "output": {"dir": str(out)}})


def main() -> None:
    """Generate, release, print the timings and the release's figures."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rows-per-file", type=int, default=1_000_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data, out = Path(tmp) / "households", Path(tmp) / "release"
        t = time.perf_counter()
        write_households(data, args.rows, seed=1, rows_per_file=args.rows_per_file)
        print(f"generate: {time.perf_counter() - t:.1f} s for {args.rows:,} persons", flush=True)
        with dask_client(workers=args.workers) as client, PeakRSS() as mem:
            t = time.perf_counter()
            summary = run_release(release_spec(data, out), client=client)
            secs = time.perf_counter() - t
        print(f"release: {secs:.1f} s ({args.rows / secs:,.0f} persons/s), peak {mem.peak / 2**30:.2f} GiB "
              f"(driver + workers), {args.workers} workers", flush=True)
        for stage, seconds in summary.stage_seconds.items():
            print(f"  {stage}: {seconds:.1f} s")
        metrics = json.loads((out / "metrics.json").read_text())
        for key in SHOWN:
            print(f"  {key} = {metrics[key]}")


if __name__ == "__main__":
    main()
