"""Household-consistent masking at scale: PRAM and local suppression of a person file with and without its
households declared, timed with the peak memory of driver + workers, beside one plain read of the same Parquet
files.

Households are drawn whole, with replacement, from the bundled household survey (data/testdata.csv, 1000
households, ori_hid), each drawn household numbered anew; the household-level variables (urbrur, roof, walls,
water, electcon) are the drawn household's, the person-level keys sex and relat are drawn for each person from
their marginal frequencies, so that key combinations vary within households; chunk by chunk from
numpy.random.default_rng([seed, chunk]). PRAM masks water, roof (household-level) and sex; local suppression makes
the 7 keys 3-anonymous (missing: any), the household-level
keys the least important (IMPORTANCE). Each step writes its output as Parquet, as a release's step does.

Usage: python benchmarks/household_masking.py --households 200000 [--workers 2]
(not part of the test suite)
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from risk_scale import timed

from sdc_tasks.cluster import dask_client
from sdc_tasks.generate import bundled_path
from sdc_tasks.io import read_table, write_parquet
from sdc_tasks.masking.apply import StepContext
from sdc_tasks.masking.methods import apply_step
from sdc_tasks.masking.registry import validate_params

HOMES = ["urbrur", "roof", "walls", "water", "electcon"]
PERSONS = ["sex", "relat"]
IMPORTANCE = [*PERSONS, "urbrur", "walls", "electcon", "roof", "water"]  # household-level keys lose values first
CHUNK = 200_000  # households per file


def write_persons(folder: Path, households: int, seed: int) -> int:
    """Write the generated person file as a Parquet dataset (CHUNK households per file); return its records."""
    source = pd.read_csv(bundled_path("testdata.csv"))[["ori_hid", *HOMES, *PERSONS]]
    members = source.groupby("ori_hid").indices
    ids = np.array(sorted(members))
    folder.mkdir(parents=True)
    records = 0
    for i, start in enumerate(range(0, households, CHUNK)):
        rng = np.random.default_rng([seed, i])
        drawn = rng.choice(ids, min(CHUNK, households - start))
        rows = np.concatenate([members[h] for h in drawn])
        part = source.iloc[rows].reset_index(drop=True)
        part["ori_hid"] = np.repeat(np.arange(start, start + len(drawn)), [len(members[h]) for h in drawn])
        for v in PERSONS:
            part[v] = rng.choice(source[v].to_numpy(), len(part))
        part.insert(0, "record_id", np.arange(records, records + len(part)))
        part.to_parquet(folder / f"part-{i:05d}.parquet", index=False)
        records += len(part)
    return records


def main() -> None:
    """Run the benchmark and print its figures."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--households", type=int, default=200_000)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    steps = [("pram", ["water", "roof", "sex"], {"theta": 0.5}),
             ("local_suppression", [*HOMES, *PERSONS],
              validate_params("local_suppression", {"k": 3, "importance": IMPORTANCE}))]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "persons"
        rows = write_persons(folder, args.households, seed=5)
        with dask_client(workers=args.workers):
            t = time.perf_counter()
            read_table(folder, "parquet")[[*HOMES, *PERSONS]].sum().compute()
            plain = time.perf_counter() - t
            print(f"persons={rows} households={args.households} workers={args.workers}")
            print(f"{'plain read':>28}: {plain:8.1f} s  {rows / plain:10.0f} records/s")
            for method, variables, params in steps:
                for homes in ((), tuple(HOMES)):
                    ctx = StepContext(seed=1, step=0, id_column="record_id", household="ori_hid" if homes else None,
                                      household_variables=homes)
                    out = Path(tmp) / f"{method}-{len(homes)}"

                    def run(ctx=ctx, out=out, method=method, variables=variables, params=params):
                        """Mask the file and write the step's output."""
                        staged = apply_step(read_table(folder, "parquet"), method, variables, params, ctx)
                        write_parquet(staged.frame, out)
                        return staged.outcome

                    outcome = timed(f"{method} {'households' if homes else 'persons only'}", rows, plain, run)
                    if outcome is not None:
                        print(f"{'':>30}{outcome.text()}")


if __name__ == "__main__":
    main()
