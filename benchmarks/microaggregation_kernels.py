"""Microaggregation kernels per block, each against the kernel it replaced, side by side on the same blocks, with
the ratio and whether the groups are the same: MD's scan kernel (tests/md_scan_reference.py) against its tree
kernel (sdc_tasks.masking.md.md_groups), and MDAV's row scan (tests/mdav_scan_reference.py) against its column
scan (sdc_tasks.masking.mdav._scan_labels, which mdav uses above 5 attributes).

The blocks are Census-like generated records (sdc_tasks.generate, seed 5) standardized: the first three
attributes (a Mic3mul group), the last four (the 3+3+3+4 grouping's last group) and all 13 (Micmul); for MDAV,
whose tree answers up to 5 attributes, the last six and all 13. Times are
CPU seconds of this process (time.process_time), the best of ``--repeat`` runs, after a warm-up that compiles
both kernels; wall seconds are printed beside them.

Usage: python benchmarks/microaggregation_kernels.py [--method md|mdav] [--rows 12000] [--k 3] [--repeat 3]
(not a test)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from md_scan_reference import scan_md_labels
from mdav_scan_reference import scan_mdav_labels

from sdc_tasks.generate import census_model, census_reference, synthetic_chunk
from sdc_tasks.masking.md import md_groups
from sdc_tasks.masking.mdav import _scan_labels

KERNELS = {  # method: (kernel before, kernel now, names of the two, blocks as column slices)
    "md": (scan_md_labels, md_groups, ("scan", "tree"),
           {"3 attributes": slice(0, 3), "4 attributes": slice(9, 13), "13 attributes": slice(None)}),
    "mdav": (scan_mdav_labels, _scan_labels, ("row scan", "column scan"),
             {"6 attributes": slice(7, 13), "13 attributes": slice(None)}),
}


def best_time(labels_of, block: np.ndarray, repeat: int) -> tuple[float, float, np.ndarray]:
    """Best CPU and wall seconds of ``repeat`` runs of ``labels_of(block)``, and its labels."""
    cpu, wall = np.inf, np.inf
    for _ in range(repeat):
        c, w = time.process_time(), time.perf_counter()
        labels = labels_of(block)
        cpu, wall = min(cpu, time.process_time() - c), min(wall, time.perf_counter() - w)
    return cpu, wall, labels


def main() -> None:
    """Time the kernel before and the kernel now on each block of the method and print the figures."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--method", choices=sorted(KERNELS), default="md")
    ap.add_argument("--rows", type=int, default=12_000)
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    before, now, (before_name, now_name), blocks = KERNELS[args.method]
    x = synthetic_chunk(census_model(census_reference()), args.rows, 5, 0, 0).drop(columns="record_id").to_numpy()
    z = (x - x.mean(axis=0)) / x.std(axis=0)
    before(z[:50].copy(), args.k), now(z[:50].copy(), args.k)
    print(f"{args.method} rows={args.rows} k={args.k} best of {args.repeat}; CPU s (wall s)")
    for name, cols in blocks.items():
        block = np.ascontiguousarray(z[:, cols])
        old_cpu, old_wall, old = best_time(lambda b: before(b, args.k), block, args.repeat)
        new_cpu, new_wall, new = best_time(lambda b: now(b, args.k), block, args.repeat)
        print(
            f"{name:>14}: {before_name} {old_cpu:7.3f} s ({old_wall:7.3f})  {now_name} {new_cpu:7.3f} s "
            f"({new_wall:7.3f})  ratio {old_cpu / new_cpu:5.1f}x  same groups: {bool(np.array_equal(old, new))}",
            flush=True,
        )


if __name__ == "__main__":
    main()
