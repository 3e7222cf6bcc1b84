"""Categorical methods at scale: recoding, top/bottom coding, PRAM, the three forms of local suppression and the
risk families cat_risk, suda and ldiversity on N generated records, each timed with the peak memory of driver +
workers beside one plain read of the same Parquet files, and the same operations in sdcMicro when R and sdcMicro
are installed.

The records are those of benchmarks/categorical_scale.py (drawn with replacement from data/testdata.csv), with
age, income and expend, each weight 100 (a 1 % sample: the population is 100 x the records), taken from its
masked file: 10 % of the key values replaced by a random category and 0.1 % of roof missing, so that the key
combinations grow with the records as in a real file (16,374 combinations, 5,018 sample uniques at 1e6) rather
than staying the survey's. Every operation reads that file; each masking step writes its output as Parquet, as a
release's step does; each risk family is evaluated on the file alone (the file as its own original, no
before/after figures).

Operations (ours; sdcMicro 5.8.1's equivalent, on the same records written as CSV):

- recode: age cut at 15, 25, 65 with labels and water's 8 codes mapped to 3 (one step); globalRecode + three
  groupAndRename calls (water made a factor first);
- top_bottom_coding: income top-coded at 95,000,000, expend bottom-coded at 5,000,000; topBotCoding twice;
- pram: water, roof and relat, Kooiman matrix theta = 0.5; pram(pd = 0.8, alpha = 0.5) of the three as factors
  (sdcMicro's invariant matrix: another matrix, the same work);
- local_suppression k = 3 on the 8 keys, default importance; kAnon (localSuppression) k = 3;
- local_suppression combs [2, 3] with k [5, 3]; kAnon(k = c(5, 3), combs = c(2, 3));
- local_suppression threshold 0.02 with the weights; localSupp(freqCalc(...), threshold = 0.02, keyVar = relat)
  (sdcMicro suppresses the one key it is given, relat, the least important by default; ours carries on over the
  keys in importance order);
- cat_risk (k-anonymity, individual risk, global risk, PLD_cat); measure_risk;
- suda on the 8 keys; suda2;
- ldiversity of income within the 8 keys; ldiversity(ldiv_index = "income").

``--suda-lattice`` also times SUDA2's search alone (sdc_tasks.metrics.suda.msu_scores) on the table of key
combinations of the first 2, 3, ..., 8 keys and of the 8 keys with age (88 categories), to show its cost growing
with the 2^M - 1 key subsets rather than with the records (docs/categorical.md, "Special uniques").

sdcMicro runs one whole ``Rscript`` process per operation (the data.frame interfaces, no sdcMicroObj): the CSV
read by data.table's fread and the operation each timed with system.time inside R, the process's peak memory
from the operating system; an operation still running after ``--r-timeout`` seconds is stopped and reported so.
sdcMicro is looked for as in benchmarks/small_files.py; where it is missing the benchmark says so.

Usage: python benchmarks/categorical_methods_scale.py --rows 1000000 [--workers 2] [--r-lib DIR]
[--r-max-rows 1000000] [--r-timeout 600] [--only NAME,...] [--skip-ours] [--suda-lattice]
(not part of the test suite)
"""

from __future__ import annotations

import argparse
import os
import re
import tempfile
import time
from pathlib import Path

import pandas as pd
from categorical_scale import KEYS, write_pair
from risk_scale import timed
from small_files import sdcmicro_missing

from sdc_tasks.cluster import dask_client
from sdc_tasks.evaluation.measures import evaluate
from sdc_tasks.io import read_table, write_parquet
from sdc_tasks.masking.apply import StepContext
from sdc_tasks.masking.methods import apply_step
from sdc_tasks.masking.registry import ruled_variables, validate_params
from sdc_tasks.metrics.categorical_risk import combination_counts
from sdc_tasks.metrics.suda import msu_scores

CONTEXT = StepContext(seed=1, step=0, id_column="record_id")
EXTRA = ("age", "income", "expend")
WEIGHT = "sampling_weight"
SENSITIVE = "income"
WATER = {1: "piped", 2: "piped", 3: "well", 4: "well", 5: "other", 6: "other", 7: "other", 9: "other"}
AGE_BREAKS = [15, 25, 65]
AGE_LABELS = ["0-15", "16-25", "26-65", "66+"]
PRAMMED = ["water", "roof", "relat"]
INCOME_TOP, EXPEND_BOTTOM = 95_000_000.0, 5_000_000.0


def r_vector(values) -> str:
    """An R character vector of ``values``."""
    return "c(" + ", ".join(f'"{v}"' for v in values) + ")"


R_KEYS = r_vector(KEYS)
R_WATER = "; ".join(
    f'd <- groupAndRename(d, var = "water", before = {r_vector(c for c in WATER if WATER[c] == g)}, after = "{g}")'
    for g in dict.fromkeys(WATER.values())
)

MASKING = {
    "recode": (
        {"rules": {"age": {"breaks": AGE_BREAKS, "labels": AGE_LABELS, "closed": "right"}, "water": {"map": WATER}}},
        (
            f'd$water <- factor(d$water); {R_WATER}; d <- globalRecode(d, column = "age", '
            f"breaks = c(-Inf, {', '.join(map(str, AGE_BREAKS))}, Inf), labels = {r_vector(AGE_LABELS)})"
        ),
    ),
    "top_bottom_coding": (
        {"rules": {"income": {"top": INCOME_TOP}, "expend": {"bottom": EXPEND_BOTTOM}}},
        (
            f"d <- topBotCoding(d, value = {INCOME_TOP:.0f}, replacement = {INCOME_TOP:.0f}, "
            f'kind = "top", column = "income"); d <- topBotCoding(d, value = {EXPEND_BOTTOM:.0f}, '
            f'replacement = {EXPEND_BOTTOM:.0f}, kind = "bottom", column = "expend")'
        ),
    ),
    "pram": (
        {"theta": 0.5},
        (
            f"for (v in {r_vector(PRAMMED)}) d[[v]] <- factor(d[[v]]); "
            f"d <- pram(d, variables = {r_vector(PRAMMED)}, pd = 0.8, alpha = 0.5)"
        ),
    ),
    "local_suppression k=3": ({"k": 3}, f"d <- localSuppression(d, k = 3, keyVars = {R_KEYS})"),
    "local_suppression combs": (
        {"k": [5, 3], "combs": [2, 3]},
        f"d <- localSuppression(d, k = c(5, 3), combs = c(2, 3), keyVars = {R_KEYS})",
    ),
    "local_suppression threshold": (
        {"threshold": 0.02, "weight": WEIGHT},
        f'd <- localSupp(freqCalc(d, keyVars = {R_KEYS}, w = "{WEIGHT}"), threshold = 0.02, keyVar = "relat")',
    ),
}
RISK = {
    "cat_risk": ("cat_risk", f'd <- measure_risk(d, keyVars = {R_KEYS}, w = "{WEIGHT}")'),
    "suda": ("suda", f"d <- suda2(d, variables = {R_KEYS})"),
    "ldiversity": ("ldiversity", f'd <- ldiversity(d, keyVars = {R_KEYS}, ldiv_index = "{SENSITIVE}")'),
}


def method_of(name: str) -> str:
    """The registry method an operation of MASKING runs."""
    return name.split()[0]


def step_variables(name: str, params: dict) -> list[str]:
    """The variables a masking operation masks: its rules' variables, the PRAM variables or the keys."""
    return ruled_variables(params) or (PRAMMED if method_of(name) == "pram" else KEYS)


def run_ours(data: Path, tmp: Path, rows: int, workers: int, names: list[str]) -> None:
    """Time each operation of ``names`` on the Parquet dataset ``data`` on a ``workers``-worker LocalCluster."""
    cols = [*KEYS, WEIGHT, *EXTRA]
    with dask_client(workers=workers):
        t = time.perf_counter()
        read_table(data, "parquet")[cols].sum().compute()
        plain = time.perf_counter() - t
        print(f"rows={rows} workers={workers} keys={len(KEYS)}")
        print(f"{'plain read':>28}: {plain:8.1f} s  {rows / plain:10.0f} records/s", flush=True)
        for i, name in enumerate(names):
            if name in MASKING:
                method = method_of(name)
                params = validate_params(method, MASKING[name][0])
                out = tmp / f"ours-{i}"

                def run(method=method, params=params, out=out, name=name):
                    """Mask the file and write the step's output."""
                    staged = apply_step(
                        read_table(data, "parquet"), method, step_variables(name, params), params, CONTEXT
                    )
                    write_parquet(staged.frame, out)
                    return staged.outcome

                outcome = timed(name, rows, plain, run)
                if outcome is not None:
                    print(f"{'':>30}{outcome.text()}")
            else:
                family = RISK[name][0]
                found = timed(
                    name,
                    rows,
                    plain,
                    lambda family=family: evaluate(
                        read_table(data, "parquet"),
                        read_table(data, "parquet"),
                        "record_id",
                        [],
                        [],
                        (family,),
                        categorical=KEYS,
                        weight=WEIGHT,
                        sensitive=[SENSITIVE],
                        original_risk=False,
                    ),
                )
                print(
                    f"{'':>30}"
                    + " ".join(
                        f"{k}={v:.4g}"
                        for k, v in found.items()
                        if isinstance(v, float) and not k.startswith("suda_contribution")
                    )
                )


def suda_lattice(data: Path, rows: int) -> None:
    """Time SUDA2's search on the combination table of M keys, M = 2..8 and the 8 keys with age, and print it
    beside the table's rows C and the 2^M - 1 subsets."""
    frame = pd.read_parquet(data, columns=[*KEYS, "age"])
    print(f"SUDA2 search on the combination table of {rows} records (one process, no Dask)")
    for keys in [KEYS[:m] for m in range(2, len(KEYS) + 1)] + [[*KEYS, "age"]]:
        table = combination_counts(frame, keys, {k: False for k in keys})
        t = time.perf_counter()
        msu_scores(table, keys)
        secs = time.perf_counter() - t
        print(
            f"{len(keys):>4} keys: C = {len(table):7d}  {2 ** len(keys) - 1:5d} subsets  {secs:7.2f} s  "
            f"{1e3 * secs / (2 ** len(keys) - 1):6.2f} ms per subset",
            flush=True,
        )


def r_program(csv: Path, expression: str, r_lib: str | None) -> str:
    """An R program that loads sdcMicro, reads ``csv`` and runs ``expression`` on it as ``d``, printing the
    seconds of each with system.time; it works in ``csv``'s folder, so files R writes (recordSwap's
    TRS_logfile.txt) go there and not into the caller's."""
    libs = f'.libPaths(c("{r_lib}", .libPaths()))\n' if r_lib else ""
    return (
        f'{libs}setwd("{csv.parent}")\nsuppressPackageStartupMessages(library(sdcMicro))\n'
        f'read <- system.time(d <- as.data.frame(data.table::fread("{csv}")))[["elapsed"]]\n'
        f'op <- system.time({{ {expression} }})[["elapsed"]]\ncat("read", read, "op", op, "\\n")\n'
    )


def run_rscript(script: Path, limit: float) -> tuple[str, float, float | None]:
    """Run ``Rscript script``; (its output, wall seconds, peak memory in GiB), the memory None and the output
    empty when it is stopped after ``limit`` seconds; SystemExit with R's last lines when it fails."""
    start = time.perf_counter()
    log = script.with_suffix(".log")
    with open(log, "w") as sink:
        pid = os.posix_spawnp(
            "Rscript",
            ["Rscript", str(script)],
            os.environ,
            file_actions=[(os.POSIX_SPAWN_DUP2, sink.fileno(), 1), (os.POSIX_SPAWN_DUP2, sink.fileno(), 2)],
        )
        while True:
            done, status, usage = os.wait4(pid, os.WNOHANG)
            wall = time.perf_counter() - start
            if done:
                break
            if wall > limit:
                os.kill(pid, 9)
                os.wait4(pid, 0)
                return "", wall, None
            time.sleep(0.5)
    text = log.read_text()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed: Rscript {script}\n{text[-2000:]}")
    return text, wall, usage.ru_maxrss / 2**20


def timed_r(script: Path, limit: float) -> tuple[float, float | None, float, float]:
    """``run_rscript`` of an ``r_program``: (wall seconds, peak GiB, the read's and the operation's seconds R
    printed); the peak None and both seconds 0 when it was stopped after ``limit`` seconds."""
    text, wall, peak = run_rscript(script, limit)
    if peak is None:
        return wall, None, 0.0, 0.0
    seconds = re.search(r"read ([0-9.]+) op ([0-9.]+)", text)
    return wall, peak, float(seconds.group(1)), float(seconds.group(2))


def run_sdcmicro(data: Path, tmp: Path, rows: int, names: list[str], r_lib: str | None, limit: float) -> None:
    """Write the records as CSV and time each operation of ``names`` in its own Rscript process."""
    csv = tmp / "records.csv"
    for i, part in enumerate(sorted(data.glob("*.parquet"))):
        pd.read_parquet(part).to_csv(csv, mode="a" if i else "w", header=not i, index=False)
    print(f"sdcMicro on {rows} records (whole Rscript processes; read and operation by system.time)", flush=True)
    for name in names:
        script = tmp / f"{re.sub(r'[^a-z0-9]+', '_', name)}.R"
        script.write_text(r_program(csv, MASKING[name][1] if name in MASKING else RISK[name][1], r_lib))
        wall, peak, read, op = timed_r(script, limit)
        if peak is None:
            print(f"{name:>28}: stopped after {wall:.0f} s", flush=True)
            continue
        print(
            f"{name:>28}: {op:8.1f} s  {rows / max(op, 1e-3):10.0f} records/s  read {read:5.1f} s  "
            f"process {wall:6.1f} s  peak {peak:5.2f} GiB",
            flush=True,
        )


def add_sdcmicro_options(ap: argparse.ArgumentParser, max_rows: int, timeout: float) -> None:
    """The options of a benchmark that runs sdcMicro beside ours: --r-lib, --r-max-rows, --r-timeout and
    --skip-ours."""
    ap.add_argument("--r-lib", default=os.environ.get("SDCMICRO_LIB"))
    ap.add_argument("--r-max-rows", type=int, default=max_rows, help="run sdcMicro only up to this many records")
    ap.add_argument("--r-timeout", type=float, default=timeout, help="stop an sdcMicro operation after this long")
    ap.add_argument("--skip-ours", action="store_true", help="generate and run sdcMicro only")


def sdcmicro_skipped(args: argparse.Namespace) -> str | None:
    """Why sdcMicro is not run for these options (``add_sdcmicro_options``), or None when it is: too many records,
    or sdcMicro missing (checked only when the size allows it)."""
    if args.rows > args.r_max_rows:
        return f"not run above {args.r_max_rows} records (--r-max-rows)"
    missing = sdcmicro_missing(args.r_lib)
    return f"missing ({missing})" if missing else None


def main() -> None:
    """Generate the records, then run ours and sdcMicro's operations and print the figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--workers", type=int, default=2)
    add_sdcmicro_options(ap, max_rows=1_000_000, timeout=600.0)
    ap.add_argument("--only", default="", help="comma-separated operations (default: all)")
    ap.add_argument("--suda-lattice", action="store_true", help="also time SUDA2's search for 2 to 9 keys")
    args = ap.parse_args()
    names = [n.strip() for n in args.only.split(",") if n.strip()] or [*MASKING, *RISK]
    unknown = [n for n in names if n not in MASKING and n not in RISK]
    if unknown:
        raise SystemExit(f"unknown operation {unknown[0]!r}; known: {', '.join([*MASKING, *RISK])}")
    with tempfile.TemporaryDirectory() as tmp:
        orig, data = Path(tmp) / "drawn", Path(tmp) / "records"
        write_pair(orig, data, args.rows, seed=5, extra=EXTRA, population=100.0 * args.rows)
        if not args.skip_ours:
            run_ours(data, Path(tmp), args.rows, args.workers, names)
        if args.suda_lattice:
            suda_lattice(data, args.rows)
        skipped = sdcmicro_skipped(args)
        if skipped:
            print(f"sdcMicro: {skipped}")
        else:
            run_sdcmicro(data, Path(tmp), args.rows, names, args.r_lib, args.r_timeout)


if __name__ == "__main__":
    main()
