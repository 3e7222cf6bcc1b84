"""Where a release's evaluation spends its time: the full evaluation (IL battery, PIL, DLD_1..DLD_7, ID and the
report's profiles, as a release runs it) of generated Census-like records against their masked copy (MDAV or
rank swapping, as scale_record.py's specs mask them), on a LocalCluster, with Dask's task stream recorded; prints
the wall time and, per kind of task, the seconds the workers spent in it (busy time, all workers together) and
how many ran. Run it at two sizes to see which parts grow faster than the records (docs/performance.md, "The
evaluation's parts at 1e6 and 1e7").

The records are scale_record.py's (``write_records``: seed 7, Parquet files of 250,000 records) and masked by
``sdc mask --method mdav --param k=3 --param group_size=3 --seed 1`` (``--method mdav``, the default) or ``sdc mask
--method rankswap --param p=15 --seed 1`` (``--method rankswap``); ``--keep DIR`` keeps them there for a later run
(with the same ``--rows``), which then skips generating and masking.

Usage: python benchmarks/evaluation_parts.py --rows 1000000 [--method mdav|rankswap] [--workers 2] [--keep DIR]
       [--json parts.json]
Not part of the test suite.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from dask.utils import key_split
from distributed import Client, get_task_stream
from scale_record import FULL_EVALUATION, KEYS, write_records

from sdc_tasks.cluster import dask_client
from sdc_tasks.evaluation.measures import evaluate
from sdc_tasks.generate import CENSUS_VARIABLES
from sdc_tasks.io import read_table

TOKEN = re.compile(r"-[0-9a-f]{32}")
MASKINGS = {"mdav": ["--method", "mdav", "--param", "k=3", "--param", "group_size=3"],
            "rankswap": ["--method", "rankswap", "--param", "p=15"]}
"""The ``sdc mask`` options of each masking the evaluation can be timed on (scale_record.py's specs)."""


def prepared(root: Path, rows: int, method: str) -> tuple[Path, Path]:
    """The generated records and their copy masked by ``method`` in ``root`` (made unless already there)."""
    data, masked = root / "data", root / ("masked" if method == "mdav" else f"masked-{method}")
    if not data.exists():
        write_records(data, rows)
    if not masked.exists():
        masked_by(method, data, masked)
    return data, masked


def masked_by(method: str, data: Path, masked: Path) -> None:
    """``data`` masked by ``method`` (MASKINGS) into ``masked`` by this environment's ``sdc mask``, seed 1."""
    subprocess.run([str(Path(sys.executable).with_name("sdc")), "mask", "--input", str(data), *MASKINGS[method],
                    "--id-col", "record_id", "--seed", "1", "--out", str(masked)], check=True,
                   stdout=subprocess.DEVNULL)


def task_kind(key) -> str:
    """A task's kind: Dask's name of it (``key_split``), a linkage graph's tasks (task_graph.TaskGraph: the token
    inside the name) by label."""
    name = key[0] if isinstance(key, tuple) else key
    return TOKEN.sub("", name) if TOKEN.search(name) else key_split(key)


def busy_by_kind(stream: list[dict]) -> tuple[collections.Counter, collections.Counter]:
    """Seconds computing and number of tasks per kind of task, from a task stream."""
    seconds, count = collections.Counter(), collections.Counter()
    for record in stream:
        for span in record["startstops"]:
            if span["action"] == "compute":
                kind = task_kind(record["key"])
                seconds[kind] += span["stop"] - span["start"]
                count[kind] += 1
    return seconds, count


def kinds_report(seconds: collections.Counter, count: collections.Counter, share: float) -> list[str]:
    """A line (seconds, tasks, kind) per kind of task of :func:`busy_by_kind` that took at least ``share`` of the
    workers' busy seconds, the longest first."""
    total = sum(seconds.values())
    return [f"  {secs:9.1f} s {count[kind]:6d} tasks  {kind}" for kind, secs in seconds.most_common()
            if secs >= share * total]


def streamed(workers: int, run: Callable[[Client], Any]) -> tuple[Any, float, list[dict]]:
    """``run(client)`` on a fresh LocalCluster of ``workers`` processes with Dask's task stream recorded: what it
    returned, its wall seconds and the stream's records."""
    with dask_client(workers=workers) as client:
        start = time.perf_counter()
        with get_task_stream(client) as stream:
            result = run(client)
        return result, time.perf_counter() - start, stream.data


def main() -> None:
    """Evaluate, print the figures, optionally write them as JSON."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--method", choices=sorted(MASKINGS), default="mdav", help="the masking evaluated")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--keep", type=Path, help="directory for the records and their masked copy, kept after")
    ap.add_argument("--json", type=Path, help="also write the figures and the metrics here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        data, masked = prepared(root, args.rows, args.method)
        metrics, wall, stream = streamed(args.workers, lambda client: evaluate(
            read_table(data, "parquet"), read_table(masked, "parquet"), "record_id", list(CENSUS_VARIABLES), KEYS,
            tuple(FULL_EVALUATION), profile=True, work_dir=Path(tmp)))
    seconds, count = busy_by_kind(stream)
    total = sum(seconds.values())
    print(f"rows={args.rows} method={args.method} workers={args.workers}: evaluation {wall:.1f} s wall, {total:.1f} s "
          f"busy; IL {metrics['IL']:.3f} PIL {metrics['PIL']:.3f} DLD {metrics['DLD']:.3f} ID {metrics['ID']:.3f}")
    print("\n".join(kinds_report(seconds, count, 0.001)))
    if args.json:
        numbers = {k: v for k, v in metrics.items() if isinstance(v, (int, float))}
        args.json.write_text(json.dumps({"rows": args.rows, "method": args.method, "wall_s": wall,
                                         "busy_s": dict(seconds), "tasks": dict(count), "metrics": numbers}, indent=1))


if __name__ == "__main__":
    main()
