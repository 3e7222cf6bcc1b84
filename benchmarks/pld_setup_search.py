"""Search for the probabilistic linkage setup behind the PLD column of Table 1 of
sdc_methods_comparison_chapter.txt (sec. 3-4) on the Census file: the source of the search table in
docs/reproduction.md.

Each setup links the masked file to the original on the first i keys in the file's column order, i = 1..7, and
averages the percent of correctly paired records (sec. 4: "Similarly, the PLD is the average percentage of
correctly paired records"). Per key, the comparison is cut into agreement levels by thresholds on
d = |x' - x| / sd; m and u come from the project's EM (``pld.fit_fellegi_sunter``) on the pattern counts of the
pairs considered (all pairs, or the K originals nearest to each masked record); the decision is either "max"
(each masked record takes its maximum-weight originals, 1/t credit among t tied: ``pld.tied_max_credit``) or
"one-to-one" (``pld.assign_max_weight``, ties in a random order: the solver's own order, by index, would
favour the true pairs, since both files list the records in the same order). Error: mean absolute difference from the published PLD and Spearman's
rho over 34 rows regenerated with our methods (default grid, its seed).

    .venv/bin/python benchmarks/pld_setup_search.py [--setups all|chosen]
"""

from __future__ import annotations

import argparse

import dask
import numpy as np
from compare_census import CHAPTER, FILE_ORDER_KEYS, published_table_1
from scipy.spatial import cKDTree
from scipy.stats import spearmanr

from sdc_tasks.api import mask
from sdc_tasks.comparison.run import load_grid, prepare_input
from sdc_tasks.generate import bundled_path
from sdc_tasks.io import read_with_ids
from sdc_tasks.metrics import pld

ROWS = ["Noise0.01", "Noise0.04", "Noise0.1", "Noise0.16", "Resamp1", "Resamp3", "Distr", "MicIR03", "MicIR05",
        "MicIR09", "MicZ03", "MicZ08", "MicPCP03", "MicPCP08", "Mic2mul03", "Mic2mul05", "Mic2mul08", "Mic3mul03",
        "Mic3mul05", "Mic3mul07", "Mic3mul10", "Mic4mul04", "Mic4mul08", "Micmul03", "Micmul07", "Rank01",
        "Rank02", "Rank04", "Rank07", "Rank10", "Rank15", "Rank20", "JPEG100", "JPEG080"]
# (candidates per masked record or None for all pairs, thresholds in sd units, decision)
SETUPS = {
    "all": [(None, (t,), "max") for t in (0.005, 0.01, 0.02, 0.03, 0.05, 0.1, 0.15, 0.2, 0.3)]
    + [(None, (0.05, 0.2), "max"), (None, (0.1, 0.5), "max"), (None, (0.1,), "one-to-one")]
    + [(k, (0.1,), "max") for k in (5, 20, 50, 100, 200)] + [(k, (0.1,), "one-to-one") for k in (5, 20, 100)]
    + [(100, (0.08,), "max"), (100, (0.12,), "max")],
    "chosen": [(100, (0.1,), "max")],
    "one-to-one": [(None, (0.1,), "one-to-one")] + [(k, (0.1,), "one-to-one") for k in (5, 20, 100)],
}


def masked_rows(labels: list[str]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The original key values and each labelled configuration's masked key values, masked as ``sdc compare``
    does with the default grid and its seed (records in the original's order)."""
    grid = load_grid()
    source = prepare_input(bundled_path("census.csv"), key_vars=FILE_ORDER_KEYS, grid=grid)
    configs = {c.label: c for c in grid.configurations()}
    with dask.config.set(scheduler="sync"):
        frame = read_with_ids(source.path, "auto", source.id_column, source.create_id).compute()
        original = frame.set_index(source.id_column)
        out = {}
        for label in labels:
            c = configs[label]
            masked = mask(frame, c.method, vars=source.variables, seed=grid.seed, id_column=source.id_column,
                          **c.params)
            out[label] = masked.set_index(source.id_column).loc[original.index][FILE_ORDER_KEYS]
    return original[FILE_ORDER_KEYS].to_numpy(np.float64), {k: v.to_numpy(np.float64) for k, v in out.items()}


def candidate_pairs(x: np.ndarray, xm: np.ndarray, per_record: int | None) -> tuple[np.ndarray, np.ndarray]:
    """(masked row, original row) of every candidate pair: all pairs, or each masked record with its
    ``per_record`` originals nearest in standardized Euclidean distance (the PLD candidates, docs/risk.md)."""
    n = len(x)
    if per_record is None:
        return np.repeat(np.arange(n), n), np.tile(np.arange(n), n)
    sd = x.std(axis=0)
    _, idx = cKDTree(x / sd).query(xm / sd, k=per_record)
    return np.repeat(np.arange(n), per_record), np.asarray(idx).ravel()


def linked_percent(x: np.ndarray, xm: np.ndarray, per_record: int | None, thresholds: tuple[float, ...],
                   decision: str) -> float:
    """Percent of masked records correctly paired by one probabilistic linkage on all columns of ``x``:
    agreement levels of d = |x' - x| / sd, EM m/u on the candidates' patterns, weights sum_j log2(m_j / u_j)
    (sdc_methods_comparison_chapter.txt sec. 3; Jaro 1989), then the decision."""
    rows, cols = candidate_pairs(x, xm, per_record)
    n_levels = len(thresholds) + 1
    levels = pld.agreement_levels(np.abs(xm[rows] - x[cols]) / x.std(axis=0), thresholds)
    codes = pld.pattern_codes(levels, n_levels)
    model = pld.fit_fellegi_sunter(pld.pattern_counts(codes, n_levels ** x.shape[1]), x.shape[1], n_levels,
                                   max_iter=2_000, tol=1e-6)
    weights = model.weights()[codes]
    ids = np.arange(len(x))
    if decision == "max":
        return 100 * pld.tied_max_credit(rows, cols, weights, ids, ids) / len(x)
    relabel = np.random.default_rng(0).permutation(len(x))  # the solver breaks ties by index: shuffle them
    paired = pld.assign_max_weight(rows, relabel[cols], weights, len(x), len(x))
    return 100 * pld.correct_pairs(*paired, ids, np.argsort(relabel)) / len(x)


def prefix_mean(x: np.ndarray, xm: np.ndarray, setup: tuple) -> float:
    """Mean of :func:`linked_percent` over the first i keys, i = 1..7 (chapter 6 sec. 4, DLD and PLD)."""
    return float(np.mean([linked_percent(x[:, :i], xm[:, :i], *setup) for i in range(1, x.shape[1] + 1)]))


def main() -> None:
    """Print each setup's mean absolute error and Spearman rho against the published PLD column."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--setups", choices=sorted(SETUPS), default="chosen")
    args = ap.parse_args()
    x, masked = masked_rows(ROWS)
    published = published_table_1(CHAPTER).set_index("Method").loc[ROWS, "PLD"].to_numpy()
    for setup in SETUPS[args.setups]:
        ours = np.array([prefix_mean(x, masked[label], setup) for label in ROWS])
        print(f"candidates {setup[0] or 'all'}, thresholds {setup[1]}, {setup[2]}: "
              f"MAE {np.abs(ours - published).mean():.2f}, Spearman {spearmanr(ours, published)[0]:.3f}", flush=True)


if __name__ == "__main__":
    main()
