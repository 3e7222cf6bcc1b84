"""Categorical metrics at scale: cat_il (Dist, CTBIL, ACTBIL, EBIL/PRIL) and cat_risk (k-anonymity, sample uniques,
individual risk, PLD_cat) on N generated records, timed with the peak memory of driver + workers, beside one plain
read of the same Parquet files.

Records are drawn with replacement from the bundled household survey (data/testdata.csv: its 8 categorical keys
and sampling weight, the weight scaled so it still sums to the population size, 1000 x the survey's), chunk by chunk
from numpy.random.default_rng([seed, chunk]); the masked file replaces each key value with probability 0.1 by a random
category of the same column (an invariant-PRAM-like masking) and suppresses 0.1 % of the roof values.

Usage: python benchmarks/categorical_scale.py --rows 1000000 [--workers 2]
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
from sdc_tasks.evaluation.measures import evaluate
from sdc_tasks.generate import bundled_path
from sdc_tasks.io import read_table

KEYS = ["urbrur", "roof", "walls", "water", "electcon", "relat", "sex", "hhcivil"]
CHUNK = 1_000_000


def write_pair(orig: Path, masked: Path, rows: int, seed: int, extra: tuple[str, ...] = (),
               population: float | None = None) -> None:
    """Write the generated original file and its masked copy as Parquet datasets, CHUNK records per file: the keys,
    the sampling weight and the ``extra`` columns of testdata.csv, the weights scaled to sum to ``population``
    (default 1000 x the survey's population)."""
    source = pd.read_csv(bundled_path("testdata.csv"))[[*KEYS, "sampling_weight", *extra]]
    scale = (population or 1000 * source["sampling_weight"].sum()) / source["sampling_weight"].sum()
    for d in (orig, masked):
        d.mkdir(parents=True)
    for i, start in enumerate(range(0, rows, CHUNK)):
        rng = np.random.default_rng([seed, i])
        size = min(CHUNK, rows - start)
        part = source.iloc[rng.integers(0, len(source), size)].reset_index(drop=True)
        part["sampling_weight"] = part["sampling_weight"] * len(source) / rows * scale
        part.insert(0, "record_id", np.arange(start, start + size))
        part.to_parquet(orig / f"part-{i:05d}.parquet", index=False)
        out = part.astype({k: np.float64 for k in KEYS})
        for k in KEYS:
            flip = rng.random(size) < 0.1
            out.loc[flip, k] = rng.choice(source[k].unique(), flip.sum())
        out.loc[rng.random(size) < 0.001, "roof"] = np.nan
        out.to_parquet(masked / f"part-{i:05d}.parquet", index=False)


def main() -> None:
    """Run the benchmark and print its figures."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        orig, masked = Path(tmp) / "orig", Path(tmp) / "masked"
        write_pair(orig, masked, args.rows, seed=5)
        with dask_client(workers=args.workers):
            t = time.perf_counter()
            read_table(orig, "parquet")[KEYS].sum().compute()
            read_table(masked, "parquet")[KEYS].sum().compute()
            plain = time.perf_counter() - t
            print(f"rows={args.rows} workers={args.workers} keys={len(KEYS)}")
            print(f"{'plain read of both':>22}: {plain:8.1f} s  {args.rows / plain:10.0f} records/s")

            def run(families):
                return lambda: evaluate(read_table(orig, "parquet"), read_table(masked, "parquet"), "record_id", [],
                                        [], families, categorical=KEYS, ordinal={"walls": [2, 3, 9]},
                                        weight="sampling_weight")

            loss = timed("cat_il", args.rows, plain, run(("cat_il",)))
            risk = timed("cat_risk", args.rows, plain, run(("cat_risk",)))
    print(" ".join(f"{k}={v:.4g}" for k, v in {**loss, **risk}.items() if isinstance(v, float)))


if __name__ == "__main__":
    main()
