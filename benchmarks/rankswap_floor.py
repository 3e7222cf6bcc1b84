"""The least a whole process takes to rank-swap a CSV file with the project's compiled kernel: the floor under
``sdc mask --method rankswap`` on a small file (issue 20, goal 2), run by small_files.py beside it.

It reads the CSV with pyarrow, gives the records ids from their row positions (as ``sdc mask`` does for a file
without an id column), rank-swaps every column with ``rankswap.rank_swap_column`` and the random stream ``sdc
mask`` draws for it (seed 0, step 0, the variable's name: ``randomness.rng_for``), and writes the records as one
Parquet file: the values ``sdc mask --method rankswap --param p=P`` writes (small_files.py checks it), without the
input checks, Dask, the CLI or the output's safety (hidden directory, atomic rename). What remains is what any
process using these kernels pays: Python, numpy, pandas and pyarrow's imports, numba's start (its first compiled
call, cached or not, about 0.3 s) and its exit, and the kernels.

Prints, on stderr, the seconds of each phase: imports, read, the first column (numba's start with it), the other
columns, write.

Usage: python benchmarks/rankswap_floor.py INPUT.csv OUTPUT.parquet [--p 15]   (not a test)
"""

from __future__ import annotations

import time

START = time.perf_counter()

import argparse  # noqa: E402
import sys  # noqa: E402

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.csv as pa_csv  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from sdc_tasks.masking.rankswap import rank_swap_column  # noqa: E402
from sdc_tasks.randomness import rng_for  # noqa: E402


def main() -> None:
    """Rank-swap the file and print the seconds of each phase."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("input")
    parser.add_argument("output")
    parser.add_argument("--p", type=float, default=15.0)
    args = parser.parse_args()
    marks = {"imports": time.perf_counter()}
    table = pa_csv.read_csv(args.input)
    ids = np.arange(table.num_rows, dtype=np.int64)
    marks["read"] = time.perf_counter()
    columns = {"record_id": ids}
    for name in table.column_names:
        values = table.column(name).to_numpy().astype(np.float64)
        columns[name] = rank_swap_column(values, ids, args.p, rng_for(0, 0, name))
        marks.setdefault("first column", time.perf_counter())
    marks["other columns"] = time.perf_counter()
    pq.write_table(pa.table(columns), args.output)
    marks["write"] = time.perf_counter()
    times = np.diff([START, *marks.values()])
    print(", ".join(f"{name} {seconds:.3f} s" for name, seconds in zip(marks, times)), file=sys.stderr)


if __name__ == "__main__":
    main()
