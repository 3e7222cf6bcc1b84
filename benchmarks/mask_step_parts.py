"""Where a release's mask step spends its time: one ``sdc_tasks.api.masked`` call (MDAV or MD k = 3 on Mic3mul
groups, or rank swapping p = 15: scale_record.py's ``STEPS``) on generated Census-like records, on a LocalCluster,
with Dask's task stream recorded. Prints the wall time, per kind of task the seconds the workers spent in it (busy time,
all workers together) and how many ran, then the step's phases: per second of the run, the kinds of task that
started in it (the block stage's sorts and shuffles, the kernels, the order restored and the output written).

The records are scale_record.py's (``write_records``: seed 7, Parquet files of 250,000 records); ``--keep DIR``
keeps them there for a later run with the same ``--rows`` (evaluation_parts.py's ``--keep`` directory serves too).

Usage: python benchmarks/mask_step_parts.py --rows 2000000 [--method mdav|md|rankswap] [--workers 2] [--keep DIR]
Not part of the test suite.
"""

from __future__ import annotations

import argparse
import collections
import tempfile
from pathlib import Path

from evaluation_parts import busy_by_kind, kinds_report, streamed, task_kind
from scale_record import STEPS, write_records

from sdc_tasks.api import masked


def started_per_second(stream: list[dict]) -> dict[int, collections.Counter]:
    """Per whole second since the first task began: how many tasks of each kind started in it."""
    starts = [(span["start"], task_kind(record["key"])) for record in stream for span in record["startstops"]
              if span["action"] == "compute"]
    first = min(start for start, _ in starts)
    seconds: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
    for start, kind in starts:
        seconds[int(start - first)][kind] += 1
    return seconds


def main() -> None:
    """Mask once on a fresh cluster and print the figures."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--method", choices=sorted(STEPS), default="mdav")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--keep", type=Path, help="directory for the records, kept after")
    args = ap.parse_args()
    step = STEPS[args.method]
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        data = root / "data"
        if not data.exists():
            write_records(data, args.rows)
        _, wall, stream = streamed(args.workers, lambda client: masked(
            data, step["method"], step["params"], id_column="record_id", seed=1, out=Path(tmp) / "masked",
            client=client))
    seconds, count = busy_by_kind(stream)
    total = sum(seconds.values())
    print(f"rows={args.rows} method={args.method} workers={args.workers}: mask step {wall:.1f} s wall, "
          f"{total:.1f} s busy")
    print("\n".join(kinds_report(seconds, count, 0.005)))
    print("tasks started, per second of the step:")
    for second, kinds in sorted(started_per_second(stream).items()):
        print(f"  {second:5d} s  " + ", ".join(f"{kind} {n}" for kind, n in kinds.most_common(4)))


if __name__ == "__main__":
    main()
