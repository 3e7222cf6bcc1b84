"""Small files as a user runs them: whole ``sdc mask`` processes on 1e5 Census-like records, beside the same
command on a 2-worker LocalCluster (the old default, the baseline of this run) and beside sdcMicro's
``microaggregation``/``rankSwap`` in whole ``Rscript`` processes when R and sdcMicro are installed.

The records are the bundled Census file resampled with replacement and multiplied by 1 + N(0, 0.05) noise per
value (seed 1), written as CSV. Methods: MDAV with k = 3 (sdcMicro ``microaggregation(method = "mdav",
aggr = 3)``) and rank swapping with p = 15 (``rankSwap(P = 15)``). Wall seconds of each whole process, the best
of ``--repeat`` runs, and its peak memory (max RSS of the process and its children). One untimed run of each
command comes first: it fills the numba cache and, as installing the package does, writes the bytecode of the
project's modules (the benchmark's processes run without PYTHONDONTWRITEBYTECODE, which would make every run
compile them from source, about 0.15 s).

sdcMicro is looked for with ``Rscript`` on the PATH and the library in ``--r-lib`` (or $SDCMICRO_LIB) or R's
own library paths; where it is missing the benchmark says so and prints the project's figures only.

Then the floor under the rank swap's process (``benchmarks/rankswap_floor.py``: the CSV read with pyarrow, the
project's kernel on each column, one Parquet file written; no checks, no Dask, no CLI), checked to write the values
``sdc mask`` wrote, and sdcMicro's time over it: the most any process using these kernels could reach here.

Last, ``sdc --help`` and ``sdc demo`` (the bundled 1,080-record release: Prefect's temporary server, a
2-worker LocalCluster, the full evaluation and the report) as whole processes (best of ``--repeat``, after one
untimed run that also creates the Prefect database where there is none).

Usage: python benchmarks/small_files.py [--rows 100000] [--repeat 1] [--r-repeat 1] [--r-lib DIR]   (not a test)
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from sdc_tasks.datasets import load_census

METHODS = {"mdav": (["--method", "mdav", "--param", "k=3"],
                    'microaggregation(d, variables = names(d), method = "mdav", aggr = 3)$mx'),
           "rankswap": (["--method", "rankswap", "--param", "p=15"],
                        "rankSwap(d, variables = names(d), P = 15)")}


def census_like(rows: int, path: Path, seed: int = 1) -> None:
    """``rows`` Census records drawn with replacement, each value times 1 + N(0, 0.05), as CSV (no id column)."""
    census = load_census().drop(columns="record_id", errors="ignore")
    rng = np.random.default_rng(seed)
    frame = census.iloc[rng.integers(0, len(census), rows)].reset_index(drop=True)
    (frame * rng.normal(1.0, 0.05, frame.shape)).to_csv(path, index=False)


ENVIRONMENT = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def timed(command: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (GiB) of one whole process (its children included); the command must succeed."""
    start = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENVIRONMENT)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed: {' '.join(command)}\n{proc.stderr.read()[-2000:]}")
    return wall, usage.ru_maxrss / 2**20


def best(command: list[str], repeat: int, warm_up: bool = True) -> tuple[float, float]:
    """The best wall time of ``repeat`` runs (after one untimed run when ``warm_up``) and the largest peak memory
    seen."""
    if warm_up:
        timed(command)
    runs = [timed(command) for _ in range(repeat)]
    return min(r[0] for r in runs), max(r[1] for r in runs)


def r_script(expression: str, data: Path, out: Path, r_lib: str | None) -> str:
    """An R program that loads sdcMicro, reads ``data``, masks it with ``expression`` and writes ``out``."""
    libs = f'.libPaths(c("{r_lib}", .libPaths()))\n' if r_lib else ""
    return (f"{libs}suppressPackageStartupMessages(library(sdcMicro))\n"
            f'd <- read.csv("{data}")\nm <- {expression}\nwrite.csv(m, "{out}", row.names = FALSE)\n')


def sdcmicro_missing(r_lib: str | None) -> str | None:
    """Why sdcMicro cannot be run here, or None when it can."""
    if shutil.which("Rscript") is None:
        return "Rscript is not on the PATH"
    libs = f'.libPaths(c("{r_lib}", .libPaths())); ' if r_lib else ""
    probe = subprocess.run(["Rscript", "-e", f"{libs}cat(requireNamespace('sdcMicro', quietly = TRUE))"],
                           capture_output=True, text=True)
    return None if probe.stdout.strip() == "TRUE" else "the R package sdcMicro is not installed"


def main() -> None:
    """Time each method as a whole process in every setting and print the figures and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--r-repeat", type=int, default=1, help="runs of each sdcMicro script (about 1-2 min each)")
    parser.add_argument("--r-lib", default=os.environ.get("SDCMICRO_LIB"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "census_like.csv"
        census_like(args.rows, data)
        missing = sdcmicro_missing(args.r_lib)
        print(f"{args.rows} records x 13, whole processes, best of {args.repeat} (sdcMicro {args.r_repeat}); "
              f"sdcMicro: {'missing (' + missing + ')' if missing else 'found'}")
        print("| method | sdc mask (threads) | sdc mask --workers 2 | sdcMicro | x cluster run | x sdcMicro |")
        print("|---|---|---|---|---|---|")
        peers = {}
        for name, (options, expression) in METHODS.items():
            sdc = [sys.executable, "-m", "sdc_tasks.cli", "mask", "--input", str(data), *options, "--overwrite",
                   "--out", str(Path(tmp) / f"{name}.parquet")]
            own, own_mem = best(sdc, args.repeat)
            cluster, cluster_mem = best([*sdc, "--workers", "2"], args.repeat)
            peer = "n/a"
            ratio = "n/a"
            if missing is None:
                script = Path(tmp) / f"{name}.R"
                script.write_text(r_script(expression, data, Path(tmp) / f"{name}_r.csv", args.r_lib))
                r_wall, r_mem = best(["Rscript", str(script)], args.r_repeat, warm_up=False)
                peer, ratio = f"{r_wall:.1f} s, {r_mem:.2f} GiB", f"{r_wall / own:.1f}"
                peers[name] = r_wall
            print(f"| {name} | {own:.1f} s, {own_mem:.2f} GiB | {cluster:.1f} s, {cluster_mem:.2f} GiB | {peer} | "
                  f"{cluster / own:.1f} | {ratio} |")

        floor_out = Path(tmp) / "floor.parquet"
        floor, _ = best([sys.executable, str(Path(__file__).with_name("rankswap_floor.py")), str(data), str(floor_out)],
                        args.repeat)
        same = pd.read_parquet(Path(tmp) / "rankswap.parquet").equals(pd.read_parquet(floor_out))
        versus = f"{peers['rankswap'] / floor:.1f}" if "rankswap" in peers else "n/a"
        print(f"rank swap floor (benchmarks/rankswap_floor.py: the CSV read, the kernel on each column, Parquet "
              f"written; no checks, no Dask): {floor:.2f} s, {'the' if same else 'NOT the'} values sdc mask wrote; "
              f"sdcMicro / floor: {versus}")

        helped, _ = best([sys.executable, "-m", "sdc_tasks.cli", "--help"], args.repeat)
        print(f"sdc --help: {helped:.2f} s")
        demo, demo_mem = best([sys.executable, "-m", "sdc_tasks.cli", "demo", "--out", str(Path(tmp) / "demo")],
                              args.repeat)
        print(f"sdc demo: {demo:.1f} s, {demo_mem:.2f} GiB")


if __name__ == "__main__":
    main()
