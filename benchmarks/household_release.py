"""A census household release at scale: N generated persons in households (``sdc generate --households``:
region > district > area, 8 x 10 x 20 areas), released with targeted record swapping (k = 3 on age group, sex and
nationality by geography, swap rate 0.05, donors of the same household size, else any; tenure carried along)
and the categorical risk with household risk (keys district, age group, sex, nationality; sampling weight), timed
with the peak memory of driver + workers; then the swap's figures and the household risk. The keys stop at the
district: with the area among them, cat_risk's PLD_cat (a transport LP over pairs of key combinations) would
weigh 12.5 million candidate pairs at 30,000 persons, about 15 GB and many minutes of its transportation LP
(docs/categorical.md).

Beside it, when R and sdcMicro are installed (looked for as in benchmarks/small_files.py) and the file has at
most ``--r-max-rows`` persons: sdcMicro's ``recordSwap`` on the same persons written as CSV (tenure as its codes
1 owner, 2 renter, 3 other: recordSwap takes integer columns), with the same hierarchy, risk variables, k, swap
rate, carry-along and seed, and ``similar = list("hhsize")`` (recordSwap refuses an empty profile, so where no
household of the same size is left it swaps none, where ours falls back to any donor), in a whole Rscript process: the
fread of the CSV and the swap timed by system.time inside R, the process's peak memory from the operating system.
sdcMicro has no household release to compare the rest with.

Usage: python benchmarks/household_release.py --rows 100000 [--workers 2] [--rows-per-file 1000000]
[--r-lib DIR] [--r-max-rows 10000000] [--r-timeout 1800] [--skip-ours] (not part of the test suite; docs/recordswap.md)
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import pandas as pd
from categorical_methods_scale import add_sdcmicro_options, r_program, sdcmicro_skipped, timed_r
from peak_memory import PeakRSS

from sdc_tasks.cluster import dask_client
from sdc_tasks.generate import TENURES, write_households
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


def sdcmicro_swap(data: Path, tmp: Path, rows: int, r_lib: str | None, limit: float) -> None:
    """Write the persons as CSV (tenure as its codes) and time sdcMicro's recordSwap on them in one Rscript."""
    csv = tmp / "persons.csv"
    codes = {name: code for code, name in enumerate(TENURES, start=1)}
    for i, part in enumerate(sorted(data.glob("*.parquet"))):
        frame = pd.read_parquet(part)
        frame.assign(tenure=frame["tenure"].map(codes)).to_csv(csv, mode="a" if i else "w", header=not i,
                                                                index=False)
    r_vector = ", ".join(f'"{c}"' for c in HIERARCHY)
    risk = ", ".join(f'"{c}"' for c in RISK)
    expression = (f'swapped <- recordSwap(d, hid = "household_id", hierarchy = c({r_vector}), similar = '
                  f'list("hhsize"), risk_variables = c({risk}), k_anonymity = 3, swaprate = 0.05, '
                  'carry_along = "tenure", seed = 1)')
    script = tmp / "record_swap.R"
    script.write_text(r_program(csv, expression, r_lib))
    wall, peak, read, op = timed_r(script, limit)
    if peak is None:
        print(f"sdcMicro recordSwap: stopped after {wall:.0f} s", flush=True)
        return
    print(f"sdcMicro recordSwap: {op:.1f} s ({rows / op:,.0f} persons/s), fread {read:.1f} s, whole process "
          f"{wall:.1f} s, peak {peak:.2f} GiB", flush=True)


def release(data: Path, out: Path, rows: int, workers: int) -> None:
    """Release the persons on a LocalCluster of ``workers``; print its time, peak memory and figures."""
    with dask_client(workers=workers) as client, PeakRSS() as mem:
        t = time.perf_counter()
        summary = run_release(release_spec(data, out), client=client)
        secs = time.perf_counter() - t
    print(f"release: {secs:.1f} s ({rows / secs:,.0f} persons/s), peak {mem.peak / 2**30:.2f} GiB "
          f"(driver + workers), {workers} workers", flush=True)
    for stage, seconds in summary.stage_seconds.items():
        print(f"  {stage}: {seconds:.1f} s")
    metrics = json.loads((out / "metrics.json").read_text())
    for key in SHOWN:
        print(f"  {key} = {metrics[key]}")


def main() -> None:
    """Generate, release, print the timings and the release's figures."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rows-per-file", type=int, default=1_000_000)
    add_sdcmicro_options(ap, max_rows=10_000_000, timeout=1800.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data, out = Path(tmp) / "households", Path(tmp) / "release"
        t = time.perf_counter()
        write_households(data, args.rows, seed=1, rows_per_file=args.rows_per_file)
        print(f"generate: {time.perf_counter() - t:.1f} s for {args.rows:,} persons", flush=True)
        if not args.skip_ours:
            release(data, out, args.rows, args.workers)
        skipped = sdcmicro_skipped(args)
        if skipped:
            print(f"sdcMicro: {skipped}")
        else:
            sdcmicro_swap(data, Path(tmp), args.rows, args.r_lib, args.r_timeout)


if __name__ == "__main__":
    main()
