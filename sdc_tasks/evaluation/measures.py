"""Graph builder for evaluation: information loss and disclosure risk of a masked file against its original.

Records are paired by the id column (masking methods keep ids) or, for synthetic and re-sized files, with
their nearest original record. Moments, cell errors and linkage credits are per-partition partial results
combined by tree reductions in one Dask computation. Exact quantiles and ranks (PIL_Q, brMAE/brMSE, ID)
gather one variable of both files at a time on one worker (fine to about 1e8 records); distance linkage and
nearest pairing hold the original key variables in one k-d tree.
"""

from __future__ import annotations

from pathlib import Path

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
from scipy.spatial import cKDTree

from sdc_tasks.errors import InputError
from sdc_tasks.evaluation.categorical import CATEGORICAL_FAMILIES, categorical_measures, check_categorical
from sdc_tasks.evaluation.linkage import (
    DEFAULT_CELL_ROWS,
    MASKED_SUFFIX,
    PLD_CELL_ROWS,
    gathered,
    linkage_graph,
    probabilistic_linkage_graph,
    published_linkage_graph,
    published_probabilistic_linkage_graph,
)
from sdc_tasks.io import add_row_ids
from sdc_tasks.metrics.finite import finite_metrics
from sdc_tasks.metrics.information_loss import CellSums, cell_sums, information_loss
from sdc_tasks.metrics.matrix_measures import CellErrors, cell_errors, effective_sd, matrix_measures
from sdc_tasks.metrics.pil import pil_measures, quantile_pil
from sdc_tasks.metrics.rank_metrics import RankErrors, bounded_rank_metrics, rank_errors, ranks
from sdc_tasks.metrics.risk import ID_PERCENTS, interval_hits, scores, sdid_hits
from sdc_tasks.stats.moments import frames_moments, tree_merge
from sdc_tasks.validation import check_columns, input_name, load_checked, numeric_columns


def with_pairing_ids(original: dd.DataFrame, masked: dd.DataFrame | None, id_col: str):
    """Return (original, masked, id column) where a file lacking ``id_col`` gets it from its row positions
    (0-based, as ``sdc mask`` creates it), so files without ids are paired by row position."""
    fill = [None if f is None or id_col in f.columns else add_row_ids(f, id_col) for f in (original, masked)]
    return fill[0] if fill[0] is not None else original, fill[1] if fill[1] is not None else masked, id_col


def check_pairing_ids(original: dd.DataFrame, masked: dd.DataFrame, id_col: str) -> None:
    """Raise InputError when the id columns of the two files are of kinds that never compare equal (numbers in
    one, text in the other): pairing by id would find no record, and "auto" pairing would fall back to nearest
    records without saying why."""
    kinds = [pd.api.types.is_numeric_dtype(f._meta[id_col].dtype) for f in (original, masked)]
    if kinds[0] != kinds[1]:
        raise InputError(f"id column {id_col!r} holds {'numbers' if kinds[0] else 'text'} in the original file and "
                         f"{'numbers' if kinds[1] else 'text'} in the masked file: the ids cannot pair the records")


def _same_ids(o: pd.DataFrame, m: pd.DataFrame, id_col: str) -> bool:
    """Whether two partitions hold the same ids in the same order."""
    return len(o) == len(m) and np.array_equal(o[id_col].to_numpy(), m[id_col].to_numpy())


def _side_by_side(o: pd.DataFrame, m: pd.DataFrame, id_col: str, variables: list[str]) -> pd.DataFrame:
    """Two partitions with the same ids in the same order as one frame (masked columns suffixed)."""
    out = o[[id_col, *variables]].reset_index(drop=True)
    for v in variables:
        out[v + MASKED_SUFFIX] = m[v].to_numpy()
    return out


def paired(original: dd.DataFrame, masked: dd.DataFrame, id_col: str, variables: list[str]) -> dd.DataFrame:
    """Original and masked values side by side, one row per id present in both (masked columns suffixed).

    When both files have the same partitions with the same ids in the same order (a release's output against
    its input), partitions are zipped; otherwise the files are joined on the id (a shuffle)."""
    if original.npartitions == masked.npartitions:
        checks = [dask.delayed(_same_ids)(o, m, id_col)
                  for o, m in zip(original[[id_col]].to_delayed(), masked[[id_col]].to_delayed())]
        if all(dask.compute(*checks)):
            parts = [dask.delayed(_side_by_side)(o, m, id_col, variables)
                     for o, m in zip(original[[id_col, *variables]].to_delayed(),
                                     masked[[id_col, *variables]].to_delayed())]
            return dd.from_delayed(parts, meta=_side_by_side(original._meta, masked._meta, id_col, variables),
                                   verify_meta=False)
    m = masked[[id_col, *variables]].rename(columns={v: v + MASKED_SUFFIX for v in variables})
    return original[[id_col, *variables]].merge(m, on=id_col, how="inner")


def _column_intervals(pair_parts: list[pd.DataFrame], orig_parts: list[pd.DataFrame] | None, var: str,
                      sd: float) -> np.ndarray:
    """Interval-disclosure hits of one variable over all paired records (ID_1..ID_10 then SDID), the variable's
    original and masked values gathered on one worker: one sort of the original column for the whole file
    (``orig_parts``: the original file's partitions, None when the pairs hold every original record)."""
    x = gathered(pair_parts, var, np.float64)
    xm = gathered(pair_parts, var + MASKED_SUFFIX, np.float64)
    orig = x if orig_parts is None else gathered(orig_parts, var, np.float64)
    return np.append(interval_hits(np.sort(orig), x, xm), sdid_hits(x, xm, sd))


def _partition_cells(part: pd.DataFrame, variables: list[str], sd: np.ndarray) -> tuple[CellSums, CellErrors]:
    """IL1 sums and the matrix-measure cell errors of one paired partition."""
    x = part[variables].to_numpy(np.float64)
    xm = part[[v + MASKED_SUFFIX for v in variables]].to_numpy(np.float64)
    return cell_sums(x, xm), cell_errors(x, xm, sd)


def _add(a, b):
    """a + b (tree reduction of additive partial results, elementwise for tuples)."""
    if isinstance(a, tuple):
        return tuple(x + y for x, y in zip(a, b))
    return a + b


def _column_losses(pair_parts: list[pd.DataFrame], files: tuple[list, list] | None, var: str, id_col: str,
                   quantiles: bool, rank_loss: bool) -> tuple:
    """(pil(Q_q) terms or None, rank errors or None) of one variable, its values gathered on one worker and
    dropped once these few numbers are taken (one variable at a time per worker thread). ``files``: the original
    and the masked file's partitions with the variable, None when the pairs hold every record of both.

    pil(Q_q): exact quantiles of the sorted original and masked columns (pil_measures.txt sec. 4.3-5,
    :func:`quantile_pil`). Rank errors: the paired records' original and masked values each ranked 1..n' among
    themselves, ties by id (bounded_rank_metrics.txt sec. 2 compares two permutations of 1..n')."""
    paired = None
    if rank_loss or files is None:
        paired = gathered(pair_parts, var, np.float64), gathered(pair_parts, var + MASKED_SUFFIX, np.float64)
    terms = None
    if quantiles:
        xo, xm = paired if files is None else tuple(gathered(f, var, np.float64) for f in files)
        terms = quantile_pil(np.sort(xo), np.sort(xm))
    if not rank_loss:
        return terms, None
    ids = gathered(pair_parts, id_col)
    return terms, rank_errors(ranks(paired[0], ids)[:, None], ranks(paired[1], ids)[:, None])


def _concat_errors(errors: list[RankErrors]) -> RankErrors:
    """Rank errors of disjoint sets of attributes side by side."""
    return RankErrors(*(sum((getattr(e, f) for e in errors), ()) for f in ("abs_sum", "sq_sum", "count")))


def _nearest_originals(part: pd.DataFrame, tree: cKDTree, orig_values: np.ndarray, variables: list[str],
                       center: np.ndarray, scale: np.ndarray, id_col: str) -> pd.DataFrame:
    """Pair each masked record with its nearest original record (standardized Euclidean distance over the
    variables; post_masking_optimization.txt sec. 2): original values beside the masked ones."""
    xm = part[variables].to_numpy(np.float64)
    _, idx = tree.query((xm - center) / scale, k=1)
    out = pd.DataFrame(orig_values[np.asarray(idx, dtype=np.int64)], columns=variables)
    out.insert(0, id_col, part[id_col].to_numpy())
    for j, v in enumerate(variables):
        out[v + MASKED_SUFFIX] = xm[:, j]
    return out


def paired_nearest(original: dd.DataFrame, masked: dd.DataFrame, id_col: str, variables: list[str],
                   center: np.ndarray, scale: np.ndarray) -> dd.DataFrame:
    """Masked records paired with their nearest original record (for synthetic files or n' != n); the k-d
    tree of the standardized original records is built once on one worker."""
    orig_values = dask.delayed(_concat_values)(original[variables].to_delayed(), variables)
    tree = dask.delayed(_standardized_tree)(orig_values, center, scale)
    meta = pd.DataFrame({id_col: masked._meta[id_col], **{v: pd.Series(dtype="float64") for v in variables},
                         **{v + MASKED_SUFFIX: pd.Series(dtype="float64") for v in variables}})
    parts = [dask.delayed(_nearest_originals)(part, tree, orig_values, variables, center, scale, id_col)
             for part in masked[[id_col, *variables]].to_delayed()]
    return dd.from_delayed(parts, meta=meta, verify_meta=False)


def _concat_values(parts: list[pd.DataFrame], variables: list[str]) -> np.ndarray:
    """The given columns of all partitions as one (n, p) array."""
    return pd.concat(parts, ignore_index=True)[variables].to_numpy(np.float64)


def _standardized_tree(values: np.ndarray, center: np.ndarray, scale: np.ndarray) -> cKDTree:
    """k-d tree of standardized records."""
    return cKDTree((values - center) / scale)


FAMILIES = ("il", "pil", "dld", "pld", "id", "dld_published", "pld_published", *CATEGORICAL_FAMILIES)
DEFAULT_FAMILIES = FAMILIES[:5]
IL_FAMILIES = ("il", "pil", "cat_il")
RISK_FAMILIES = ("dld", "pld", "id", "dld_published", "pld_published", "cat_risk")


def _per_prefix(pairs: dd.DataFrame, key_vars: list[str], graph) -> np.ndarray:
    """Summed (linked, linked to 2nd nearest) counts for the first i key variables, i = 1..m, shape (m, 2), from
    ``graph(pair_parts, sizes, i)``: one blocked exact search per prefix, computed one after the other so only
    one prefix's cells are in memory at a time."""
    pair_parts = pairs.to_delayed()
    sizes = list(dask.compute(*[dask.delayed(len)(p) for p in pair_parts]))
    return np.array([dask.compute(graph(pair_parts, sizes, i + 1))[0] for i in range(len(key_vars))])


def distance_linkage(orig_parts: list, pairs: dd.DataFrame, id_col: str, key_vars: list[str],
                     center: np.ndarray, scale: np.ndarray, n: int, cell_rows: int) -> np.ndarray:
    """Summed (DLD, DLD2) credits for the first i key variables, i = 1..m, shape (m, 2) (docs/metrics.md DLD_i);
    ``orig_parts``: delayed partitions of the original file with the id and key columns."""
    return _per_prefix(pairs, key_vars, lambda parts, sizes, i: linkage_graph(
        orig_parts, parts, sizes, id_col, key_vars[:i], center[:i], scale[:i], n, cell_rows))


def published_distance_linkage(pairs: dd.DataFrame, id_col: str, key_vars: list[str], cell_rows: int) -> np.ndarray:
    """Linked counts of the published Table 1 setup for the first i key variables, i = 1..m, shape (m, 2)
    (linkage.published_linkage_graph)."""
    return _per_prefix(pairs, key_vars, lambda parts, sizes, i: published_linkage_graph(
        parts, sizes, id_col, key_vars[:i], cell_rows))


def published_probabilistic_linkage(orig_parts: list, pairs: dd.DataFrame, id_col: str, key_vars: list[str],
                                    center: np.ndarray, scale: np.ndarray, n: int, cell_rows: int) -> np.ndarray:
    """Summed credits of probabilistic linkage as the published Table 1 was computed, for the first i key
    variables, i = 1..m, shape (m,) (linkage.published_probabilistic_linkage_graph; the chapter's sec. 4 averages
    PLD over the number of key variables the intruder knows, as DLD); ``orig_parts`` as in
    :func:`distance_linkage`."""
    return _per_prefix(pairs, key_vars, lambda parts, sizes, i: published_probabilistic_linkage_graph(
        orig_parts, parts, id_col, key_vars[:i], center[:i], scale[:i], n, cell_rows))


def _count(frame: dd.DataFrame):
    """Delayed number of records of a collection."""
    return dask.delayed(sum)([dask.delayed(len)(part) for part in frame.to_delayed()])


def check_options(families: tuple[str, ...], pairing: str) -> None:
    """Raise InputError naming an unknown metric family or pairing."""
    unknown = sorted(set(families) - set(FAMILIES))
    if unknown:
        raise InputError(f"unknown metric family {unknown[0]!r}; known: {', '.join(FAMILIES)}")
    if pairing not in ("auto", "id", "nearest"):
        raise InputError(f"pairing must be auto, id or nearest, not {pairing!r}")


def categorical_keys(key_vars: list[str], categorical: list[str]) -> list[str]:
    """The key variables of the categorical risk measures: the categorical ones among ``key_vars`` in their order,
    or every categorical variable when no key variable is categorical."""
    return [k for k in key_vars if k in categorical] or list(categorical)


def evaluate(original: dd.DataFrame, masked: dd.DataFrame, id_col: str, variables: list[str],
             key_vars: list[str], families: tuple[str, ...] = DEFAULT_FAMILIES, pairing: str = "auto",
             cell_rows: int = DEFAULT_CELL_ROWS, pld_cell_rows: int = PLD_CELL_ROWS, categorical: list[str] = (),
             ordinal: dict[str, list] | None = None, weight: str | None = None,
             reference: dd.DataFrame | None = None) -> dict:
    """Return the metric keys of ``masked`` against ``original`` for the families asked for: the continuous
    families on ``variables`` and ``key_vars`` (:func:`continuous_measures`) and the categorical families
    ``cat_il`` (Dist, Dist_mean, CTBIL, ACTBIL, EBIL_MF, PRIL_MF, EBIL_RF, PRIL_RF) on the ``categorical``
    variables and ``cat_risk`` (kanon_*, sample_uniques, PLD_cat and, with a ``weight`` column of the masked file,
    indiv_risk_*) on the categorical key variables (:func:`categorical_keys`); docs/categorical.md.

    ``ordinal``: category order of each ordinal categorical variable (others are nominal); ``reference``: the
    file whose category distribution gives EBIL_RF/PRIL_RF (default: the original). Categorical measures pair
    records by id."""
    check_options(families, pairing)
    categorical, ordinal = list(categorical), dict(ordinal or {})
    keys = categorical_keys(key_vars, categorical)
    cat_families = tuple(f for f in families if f in CATEGORICAL_FAMILIES)
    other = tuple(f for f in families if f not in CATEGORICAL_FAMILIES)
    out = continuous_measures(original, masked, id_col, variables, [k for k in key_vars if k not in categorical],
                              other, pairing, cell_rows, pld_cell_rows) if other else {}
    if not cat_families:
        return out
    check_categorical(categorical, keys, ordinal, cat_families)
    if pairing == "nearest":
        raise InputError("categorical metric families pair records by id: use pairing 'id' or 'auto'")
    cols = list(dict.fromkeys([*categorical, *keys]))
    check_columns(original, [id_col, *cols], "original file")
    check_columns(masked, [id_col, *cols, *([weight] if weight else [])], "masked file")
    if reference is not None:
        check_columns(reference, categorical, "reference file")
    pairs = paired(original, masked, id_col, cols).persist()
    n, n_masked, matched = (int(x) for x in dask.compute(_count(original), _count(masked), _count(pairs)))
    if matched != n_masked or n_masked == 0:
        raise InputError(f"{n_masked - matched} of {n_masked} masked records have no original record with the same "
                         f"{id_col!r} (categorical measures pair records by id)")
    out.update({"n": n, "n_masked": n_masked, "categorical": categorical, "categorical_keys": keys})
    out.update(categorical_measures(pairs, original, masked, id_col, categorical, keys, ordinal, weight, reference,
                                    cat_families, n_masked))
    return finite_metrics(out)


def continuous_measures(original: dd.DataFrame, masked: dd.DataFrame, id_col: str, variables: list[str],
                        key_vars: list[str], families: tuple[str, ...] = DEFAULT_FAMILIES, pairing: str = "auto",
                        cell_rows: int = DEFAULT_CELL_ROWS, pld_cell_rows: int = PLD_CELL_ROWS) -> dict:
    """Return docs/metrics.md keys for ``masked`` against ``original`` for the continuous families asked for: ``il``
    (IL1..IL5, IL, IL1s, the survey's matrix measures, brMAE, brMSE), ``pil`` (PIL_*, PIL), ``dld`` (DLD_i,
    DLD2_i, DLD), ``pld`` (PLD, with PLD_candidate_recall, the share of records whose own original is among
    their candidates, and the EM fit's PLD_match_prior and PLD_em_iterations), ``id`` (ID_p, ID, SDID) and, not
    by default, ``dld_published`` (DLDpub_i, DLDpub: distance linkage as the chapter's Table 1 was computed,
    docs/reproduction.md) and ``pld_published`` (PLDpub_i, PLDpub: probabilistic linkage as Table 1 was
    computed, docs/reproduction.md), the scores, and bookkeeping keys n, n_masked, p, key_vars, pairing.

    ``pairing``: "id" pairs records by id (every masked id must be in the original), "nearest" pairs each
    masked record with its nearest original record (synthetic files, n' != n; disclosure risk then has no
    ground truth and is not computed), "auto" uses ids when every masked id is found, else nearest.
    ``cell_rows``: about how many original records one spatial cell of the blocked distance linkage holds;
    ``pld_cell_rows``: the same for the blocks of probabilistic linkage.
    """
    check_options(families, pairing)
    check_columns(original, [id_col, *variables, *key_vars], "original file")
    check_columns(masked, [id_col, *variables, *key_vars], "masked file")
    cols = list(dict.fromkeys([*variables, *key_vars]))
    # PIL's variances need the original's fourth moments; of the masked file it takes means and covariances only
    order = 4 if "pil" in families else 2
    by_id = paired(original, masked, id_col, cols).persist() if pairing != "nearest" else None
    mo, mm = frames_moments([original, masked], cols, [order, 2])
    n, n_masked = mo.n, mm.n
    if n == 0 or n_masked == 0:
        raise InputError(f"cannot evaluate an empty file: the original has {n} and the masked file {n_masked} "
                         "records")
    idx = {c: i for i, c in enumerate(cols)}
    vi = [idx[v] for v in variables]
    ki = [idx[k] for k in key_vars]
    sd = mo.sd
    scale = np.where(sd > 0, sd, 1.0)
    matched = int(dask.compute(_count(by_id))[0]) if by_id is not None else 0
    if pairing == "id" and matched != n_masked:
        raise InputError(f"{n_masked - matched} of {n_masked} masked records have no original record with the "
                         f"same {id_col!r} (use pairing 'nearest' for synthetic or re-sized files)")
    use_id = by_id is not None and matched == n_masked
    pairs = by_id if use_id else paired_nearest(original, masked, id_col, variables, mo.mean[vi], scale[vi]).persist()
    pair_parts = pairs.to_delayed()
    # every original record paired: the persisted pairs stand for both files (no second read of either)
    whole = use_id and matched == n == n_masked
    orig_key_parts = pair_parts if whole else original[[id_col, *key_vars]].to_delayed()
    tasks: dict[str, object] = {}
    if "il" in families:
        flat_sd = effective_sd(mo.subset(vi))
        tasks["cells"] = tree_merge([dask.delayed(_partition_cells)(p, variables, flat_sd) for p in pair_parts], _add)
    if "pil" in families or ("il" in families and use_id):
        tasks["columns"] = [dask.delayed(_column_losses)(
            pair_parts, None if whole else (original[[v]].to_delayed(), masked[[v]].to_delayed()), v, id_col,
            "pil" in families, "il" in families and use_id) for v in variables]
    if "id" in families and use_id:
        hits = [dask.delayed(_column_intervals)(pair_parts, None if whole else original[[v]].to_delayed(), v, sd[i])
                for v, i in zip(variables, vi)]
        tasks["hits"] = tree_merge(hits, _add)
    results = dict(zip(tasks, dask.compute(*tasks.values()))) if tasks else {}
    if "dld" in families and key_vars and use_id:
        results["link"] = distance_linkage(orig_key_parts, pairs, id_col, key_vars, mo.mean[ki], scale[ki], n,
                                           cell_rows)
    if "dld_published" in families and key_vars and use_id:
        results["published"] = published_distance_linkage(pairs, id_col, key_vars, cell_rows)
    if "pld_published" in families and key_vars and use_id:
        results["pld_published"] = published_probabilistic_linkage(orig_key_parts, pairs, id_col, key_vars,
                                                                   mo.mean[ki], scale[ki], n, pld_cell_rows)
    if "pld" in families and key_vars and use_id:
        results["pld"] = probabilistic_linkage_graph(orig_key_parts, pair_parts, id_col, key_vars, mo.mean[ki],
                                                     scale[ki], n, pld_cell_rows).compute()
    out: dict = {"n": n, "n_masked": n_masked, "p": len(variables), "key_vars": list(key_vars),
                 "pairing": "id" if use_id else "nearest"}
    mov, mmv = mo.subset(vi), mm.subset(vi)
    if "cells" in results:
        sums, errors = results["cells"]
        out.update(information_loss(sums, mov, mmv))
        out.update(matrix_measures(errors, mov, mmv))
    terms, rank_errs = zip(*results["columns"]) if "columns" in results else ((), ())
    if "il" in families and use_id:
        out.update(bounded_rank_metrics(_concat_errors(list(rank_errs)), n_masked))
    if "pil" in families:
        out.update(pil_measures(mov, mmv, list(terms)))
    if "link" in results:
        dld = 100.0 * results["link"] / n_masked
        for i in range(len(key_vars)):
            out[f"DLD_{i + 1}"] = float(dld[i, 0])
            out[f"DLD2_{i + 1}"] = float(dld[i, 1])
        out["DLD"] = float(dld[:, 0].mean())
    if "published" in results:
        pub = 100.0 * results["published"][:, 0] / n_masked
        out.update({f"DLDpub_{i + 1}": float(v) for i, v in enumerate(pub)})
        out["DLDpub"] = float(pub.mean())
    if "pld_published" in results:
        pub = 100.0 * results["pld_published"] / n_masked
        out.update({f"PLDpub_{i + 1}": float(v) for i, v in enumerate(pub)})
        out["PLDpub"] = float(pub.mean())
    if "pld" in results:
        model, (correct, reachable) = results["pld"]
        out["PLD"] = 100.0 * float(correct) / n_masked
        out["PLD_candidate_recall"] = 100.0 * float(reachable) / n_masked
        out["PLD_match_prior"] = float(model.p)
        out["PLD_em_iterations"] = float(model.iterations)
    if "hits" in results:
        pct = 100.0 * results["hits"] / (n_masked * len(variables))
        for j, p in enumerate(ID_PERCENTS):
            out[f"ID_{p}"] = float(pct[j])
        out["ID"] = float(pct[:-1].mean())
        out["SDID"] = float(pct[-1])
    out.update(scores(out))
    return finite_metrics(out)


def evaluate_paths(original: str | Path | dd.DataFrame, masked: str | Path | dd.DataFrame,
                   id_col: str = "record_id", variables: list[str] | None = None, key_vars: list[str] | None = None,
                   families: tuple[str, ...] = DEFAULT_FAMILIES, pairing: str = "auto",
                   cell_rows: int = DEFAULT_CELL_ROWS, pld_cell_rows: int = PLD_CELL_ROWS,
                   categorical: list[str] | None = None, ordinal: dict[str, list] | None = None,
                   weight: str | None = None, reference: str | Path | dd.DataFrame | None = None) -> dict:
    """Evaluate two files (CSV or Parquet) or Dask DataFrames after checking both (validation.load_checked).
    One without ``id_col`` gets ids from its row positions; variables default to the original's numeric columns
    but the categorical and weight columns (the masked file must have them all; none are needed when only
    categorical families are asked for), keys to the first seven variables. Categorical columns may hold codes
    or text and, in the masked file, missing values; ``reference``: a file with the categorical columns (EBIL_RF,
    PRIL_RF)."""
    check_options(families, pairing)
    categorical = list(categorical or [])
    continuous = [f for f in families if f not in CATEGORICAL_FAMILIES]
    exclude = [id_col, *categorical, *([weight] if weight else [])]
    if not variables and continuous:
        variables = numeric_columns(original, exclude, input_name("original", original))
    variables = list(variables or [])
    key_vars = key_vars or variables[:7]
    numeric = [*variables, *(k for k in key_vars if k not in categorical)]
    a, _ = load_checked(original, id_col, numeric, input_name("original", original), required=categorical)
    b, _ = load_checked(masked, id_col, [*numeric, *([weight] if weight else [])], input_name("masked", masked),
                        required=categorical)
    check_pairing_ids(a, b, id_col)
    ref = load_checked(reference, id_col, [], input_name("reference", reference), required=categorical)[0] \
        if reference is not None else None
    return evaluate(a, b, id_col, variables, key_vars, families, pairing, cell_rows, pld_cell_rows, categorical,
                    ordinal, weight, ref)
