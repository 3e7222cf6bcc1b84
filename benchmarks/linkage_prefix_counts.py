"""Distance linkage's counting per prefix of the key variables: for DLD_1 .. DLD_7 of generated Census-like records
against their masked copy (evaluation_parts.py's records and maskings), the seconds one cell of about
``DEFAULT_CELL_ROWS`` originals takes to count, for the masked records routed to it, the originals strictly nearer
than their own and as near (``metrics.risk.linkage_counts``, the ``linkage-home-counts`` tasks of a release), and
how the counts came out: the share of records with no original nearer than their own (the search had to cover their
whole ball and found nothing in it) and with two or more (the search stopped at the second).

The cell is the first leaf of a split tree grown as the linkage graph grows it (from the hash sample of
``evaluation.linkage.sample_fraction``, ``metrics.spatial_blocks.split_tree``); the variables are standardized by
the originals' mean and sd. Each count is timed twice in this process and the second taken (the first loads the
compiled kernel).

Usage: python benchmarks/linkage_prefix_counts.py --rows 2000000 [--method mdav|rankswap] [--keep DIR]
Not part of the test suite.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
from evaluation_parts import MASKINGS, prepared
from scale_record import KEYS

from sdc_tasks.evaluation.linkage import DEFAULT_CELL_ROWS, n_cells_for, sample_fraction
from sdc_tasks.io import read_table
from sdc_tasks.metrics.risk import exact_distances, linkage_counts
from sdc_tasks.metrics.spatial_blocks import make_cell, sample_mask, split_tree


def paired_keys(data: Path, masked: Path) -> tuple[np.ndarray, np.ndarray]:
    """The key variables of the original and of the masked records, in record id order."""
    original = read_table(data, "parquet").compute().sort_values("record_id")
    copy = read_table(masked, "parquet").compute().sort_values("record_id")
    return original[KEYS].to_numpy(np.float64), copy[KEYS].to_numpy(np.float64)


def main() -> None:
    """Count one cell per prefix and print the figures."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--method", choices=sorted(MASKINGS), default="mdav")
    ap.add_argument("--keep", type=Path, help="directory for the records and their masked copy, kept after")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        original, masked = paired_keys(*prepared(root, args.rows, args.method))
    n_cells = n_cells_for(len(original), DEFAULT_CELL_ROWS)
    ids = np.arange(len(original))
    print(f"rows={args.rows} method={args.method}: one cell of {n_cells}, per prefix of the keys")
    for j in range(1, len(KEYS) + 1):
        center, scale = original[:, :j].mean(axis=0), original[:, :j].std(axis=0)
        o, q = (original[:, :j] - center) / scale, (masked[:, :j] - center) / scale
        tree = split_tree(o[sample_mask(ids, sample_fraction(len(o), n_cells))], n_cells)
        inside, home = tree.leaves_of(o) == 0, tree.leaves_of(q) == 0
        cell, d_own = make_cell(ids[inside], o[inside]), exact_distances(q[home], o[home])
        linkage_counts(cell.tree, q[home], d_own)
        start = time.perf_counter()
        closer, _ = linkage_counts(cell.tree, q[home], d_own)
        took = time.perf_counter() - start
        print(f"  DLD_{j}: {inside.sum():7d} originals, {home.sum():7d} masked records, counted in {took:.3f} s; "
              f"none nearer {np.mean(closer == 0):.3f}, two or more {np.mean(closer >= 2):.3f}")


if __name__ == "__main__":
    main()
