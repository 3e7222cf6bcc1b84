"""MD kernel per block: the scan kernel it replaced (tests/md_scan_reference.py) against the tree kernel
(sdc_tasks.masking.md.md_groups), side by side on the same 12,000-record blocks, with the ratio and whether the
groups are the same.

The blocks are Census-like generated records (sdc_tasks.generate, seed 5) standardized: the first three
attributes (a Mic3mul group), the last four (the 3+3+3+4 grouping's last group) and all 13 (Micmul). Times are
CPU seconds of this process (time.process_time), the best of ``--repeat`` runs, after a warm-up that compiles
both kernels; wall seconds are printed beside them.

Usage: python benchmarks/md_kernel.py [--rows 12000] [--k 3] [--repeat 3]   (not a test)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from md_scan_reference import scan_md_labels

from sdc_tasks.generate import census_model, census_reference, synthetic_chunk
from sdc_tasks.masking.md import md_groups


def best_time(labels_of, block: np.ndarray, repeat: int) -> tuple[float, float, np.ndarray]:
    """Best CPU and wall seconds of ``repeat`` runs of ``labels_of(block)``, and its labels."""
    cpu, wall = np.inf, np.inf
    for _ in range(repeat):
        c, w = time.process_time(), time.perf_counter()
        labels = labels_of(block)
        cpu, wall = min(cpu, time.process_time() - c), min(wall, time.perf_counter() - w)
    return cpu, wall, labels


def main() -> None:
    """Time both kernels on each block and print the figures."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=12_000)
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    x = synthetic_chunk(census_model(census_reference()), args.rows, 5, 0, 0).drop(columns="record_id").to_numpy()
    z = (x - x.mean(axis=0)) / x.std(axis=0)
    scan_md_labels(z[:50, :3].copy(), args.k), md_groups(z[:50, :3].copy(), args.k)
    print(f"rows={args.rows} k={args.k} best of {args.repeat}; CPU s (wall s)")
    for name, cols in (("3 attributes", slice(0, 3)), ("4 attributes", slice(9, 13)), ("13 attributes", slice(None))):
        block = np.ascontiguousarray(z[:, cols])
        scan_cpu, scan_wall, scan = best_time(lambda b: scan_md_labels(b, args.k), block, args.repeat)
        tree_cpu, tree_wall, tree = best_time(lambda b: md_groups(b, args.k), block, args.repeat)
        print(
            f"{name:>14}: scan {scan_cpu:7.3f} s ({scan_wall:7.3f})  tree {tree_cpu:7.3f} s ({tree_wall:7.3f})  "
            f"ratio {scan_cpu / tree_cpu:5.1f}x  same groups: {bool(np.array_equal(scan, tree))}",
            flush=True,
        )


if __name__ == "__main__":
    main()
