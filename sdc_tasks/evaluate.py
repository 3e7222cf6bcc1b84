"""Graph builder for evaluation: information loss and disclosure risk of a masked file against its original.

Records are paired by the id column (masking methods keep ids). Everything is computed from per-partition
partial results combined by tree reductions in one Dask computation; only the sorted original column of one
variable (interval disclosure) and the original key variables (distance linkage) are held whole.
"""

from __future__ import annotations

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
from scipy.spatial import cKDTree

from sdc_tasks.io import InputError
from sdc_tasks.metrics.information_loss import CellSums, cell_sums, information_loss
from sdc_tasks.metrics.risk import (
    ID_PERCENTS,
    interval_hits,
    linkage_counts,
    linkage_credit,
    scores,
    sdid_hits,
)
from sdc_tasks.stats.moments import moments_graph, tree_merge

MASKED_SUFFIX = "__masked"


def check_columns(ddf: dd.DataFrame, columns: list[str], what: str) -> None:
    """Raise InputError naming the first column of ``columns`` missing from ``ddf``."""
    missing = [c for c in columns if c not in ddf.columns]
    if missing:
        raise InputError(f"{what} has no column {missing[0]!r} (columns: {', '.join(map(str, ddf.columns))})")


def _positions(ddf: dd.DataFrame, id_col: str) -> dd.DataFrame:
    """``ddf`` with an int64 id column holding each record's global row position."""
    from sdc_tasks.release import add_row_ids

    return add_row_ids(ddf, id_col)


def with_pairing_ids(original: dd.DataFrame, masked: dd.DataFrame | None, id_col: str):
    """Return (original, masked, id column) where a file lacking ``id_col`` gets it from its row positions
    (0-based, as ``sdc mask`` creates it), so files without ids are paired by row position."""
    fill = [None if f is None or id_col in f.columns else _positions(f, id_col) for f in (original, masked)]
    return fill[0] if fill[0] is not None else original, fill[1] if fill[1] is not None else masked, id_col


def paired(original: dd.DataFrame, masked: dd.DataFrame, id_col: str, variables: list[str]) -> dd.DataFrame:
    """Original and masked values side by side, one row per id present in both (masked columns suffixed)."""
    m = masked[[id_col, *variables]].rename(columns={v: v + MASKED_SUFFIX for v in variables})
    return original[[id_col, *variables]].merge(m, on=id_col, how="inner")


def _tree(parts: list[pd.DataFrame], keys: list[str], center: np.ndarray, scale: np.ndarray) -> cKDTree:
    """k-d tree of the original records on the given key variables, standardized."""
    x = pd.concat(parts, ignore_index=True)[keys].to_numpy(np.float64)
    return cKDTree((x - center) / scale, balanced_tree=False, compact_nodes=False)


def _sorted_column(parts: list[pd.Series]) -> np.ndarray:
    """One original column, sorted (exact; one column at a time on one worker)."""
    return np.sort(pd.concat(parts, ignore_index=True).to_numpy(np.float64), kind="stable")


def _partition_linkage(part: pd.DataFrame, trees: list[cKDTree], keys: list[str], center: np.ndarray,
                       scale: np.ndarray) -> np.ndarray:
    """Summed DLD and DLD2 credits of one paired partition, shape (2, m)."""
    out = np.zeros((2, len(trees)))
    if len(part) == 0:
        return out
    own = (part[keys].to_numpy(np.float64) - center) / scale
    mk = (part[[k + MASKED_SUFFIX for k in keys]].to_numpy(np.float64) - center) / scale
    for i, tree in enumerate(trees):
        closer, tied = linkage_counts(tree, mk[:, : i + 1], own[:, : i + 1])
        out[0, i] = linkage_credit(closer, tied, 1).sum()
        out[1, i] = linkage_credit(closer, tied, 2).sum()
    return out


def _partition_intervals(part: pd.DataFrame, sorted_cols: list[np.ndarray], variables: list[str],
                         sds: np.ndarray) -> np.ndarray:
    """Interval-disclosure hits of one paired partition: rows ID_1..ID_10 then SDID, summed over variables."""
    out = np.zeros(len(ID_PERCENTS) + 1, dtype=np.int64)
    for v, s, sd in zip(variables, sorted_cols, sds):
        x = part[v].to_numpy(np.float64)
        xm = part[v + MASKED_SUFFIX].to_numpy(np.float64)
        out[:-1] += interval_hits(s, x, xm)
        out[-1] += sdid_hits(x, xm, sd)
    return out


def _partition_cells(part: pd.DataFrame, variables: list[str]) -> CellSums:
    """IL1 sums of one paired partition."""
    return cell_sums(part[variables].to_numpy(np.float64),
                     part[[v + MASKED_SUFFIX for v in variables]].to_numpy(np.float64))


def _add(a, b):
    """a + b (tree reduction of additive partial results)."""
    return a + b


def evaluate(original: dd.DataFrame, masked: dd.DataFrame, id_col: str, variables: list[str],
             key_vars: list[str], families: tuple[str, ...] = ("il", "dld", "id")) -> dict:
    """Return METRICS.md keys for ``masked`` against ``original``: IL1..IL5, IL, DLD_i, DLD2_i, DLD, ID_p, ID,
    SDID and score_simple (for the families asked for), with bookkeeping keys n, n_masked, p, key_vars."""
    check_columns(original, [id_col, *variables, *key_vars], "original file")
    check_columns(masked, [id_col, *variables, *key_vars], "masked file")
    cols = list(dict.fromkeys([*variables, *key_vars]))
    pairs = paired(original, masked, id_col, cols).persist()
    pair_parts = pairs.to_delayed()
    mo_d = moments_graph(original, cols)
    mm_d = moments_graph(masked, cols)
    counts_d = [dask.delayed(sum)([dask.delayed(len)(part) for part in frame.to_delayed()])
                for frame in (original, masked, pairs)]
    mo, mm, n, n_masked, n_pairs = dask.compute(mo_d, mm_d, *counts_d)
    if n == 0 or n_masked == 0:
        raise InputError("cannot evaluate an empty file: the original has %d and the masked file %d records"
                         % (n, n_masked))
    if n_pairs != n_masked:
        raise InputError(f"{n_masked - n_pairs} of {n_masked} masked records have no original record with the "
                         f"same {id_col!r} (pairing by nearest record is not available yet)")
    idx = {c: i for i, c in enumerate(cols)}
    vi = [idx[v] for v in variables]
    ki = [idx[k] for k in key_vars]
    sd = mo.sd
    tasks: dict[str, object] = {}
    if "il" in families:
        cells = [dask.delayed(_partition_cells)(p, variables) for p in pair_parts]
        tasks["cells"] = tree_merge(cells, _add)
    if "dld" in families and key_vars:
        center, scale = mo.mean[ki], np.where(sd[ki] > 0, sd[ki], 1.0)
        key_parts = original[key_vars].to_delayed()
        trees = [dask.delayed(_tree)(key_parts, key_vars[: i + 1], center[: i + 1], scale[: i + 1])
                 for i in range(len(key_vars))]
        link = [dask.delayed(_partition_linkage)(p, trees, key_vars, center, scale) for p in pair_parts]
        tasks["link"] = tree_merge(link, _add)
    if "id" in families:
        sorted_cols = [dask.delayed(_sorted_column)(original[v].to_delayed()) for v in variables]
        hits = [dask.delayed(_partition_intervals)(p, sorted_cols, variables, sd[vi]) for p in pair_parts]
        tasks["hits"] = tree_merge(hits, _add)
    results = dict(zip(tasks, dask.compute(*tasks.values()))) if tasks else {}
    out: dict = {"n": n, "n_masked": n_masked, "p": len(variables), "key_vars": list(key_vars)}
    if "cells" in results:
        out.update(information_loss(results["cells"], mo.subset(vi), mm.subset(vi)))
    if "link" in results:
        dld = 100.0 * results["link"] / n_masked
        for i in range(len(key_vars)):
            out[f"DLD_{i + 1}"] = float(dld[0, i])
            out[f"DLD2_{i + 1}"] = float(dld[1, i])
        out["DLD"] = float(dld[0].mean())
    if "hits" in results:
        pct = 100.0 * results["hits"] / (n_pairs * len(variables))
        for j, p in enumerate(ID_PERCENTS):
            out[f"ID_{p}"] = float(pct[j])
        out["ID"] = float(pct[:-1].mean())
        out["SDID"] = float(pct[-1])
    out.update(scores(out))
    return out
