"""The evaluator: information loss and disclosure risk of a masked file against its original, for the metric
families asked for.

Records are paired by the id column (masking methods keep ids) or, for synthetic and re-sized files, with their
nearest original record (pairing.py). Each family is a :class:`~sdc_tasks.evaluation.family.Family` (tasks, then
finish: continuous.py, linkage_families.py, categorical.py); the evaluator checks the options and the columns,
pairs the records and sketches the moments once, and loops over the requested families.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import dask
import dask.dataframe as dd

from sdc_tasks.errors import InputError
from sdc_tasks.evaluation.categorical import (
    CAT_IL,
    CAT_RISK,
    LDIVERSITY,
    SUDA,
    CategoricalContext,
    check_categorical,
    original_context,
)
from sdc_tasks.evaluation.continuous import ID, IL, PIL, PROFILE, ContinuousContext, standard_scale
from sdc_tasks.evaluation.family import family_measures
from sdc_tasks.evaluation.linkage import DEFAULT_CELL_ROWS, PLD_CELL_ROWS
from sdc_tasks.evaluation.linkage_families import DLD, DLD_PUBLISHED, PLD, PLD_PUBLISHED, file_key_order
from sdc_tasks.evaluation.pairing import (
    check_pairing_ids,
    held,
    paired,
    paired_nearest,
    pairs_fit,
    pairs_home,
    record_count,
    with_nearest_original_ids,
)
from sdc_tasks.files import check_columns
from sdc_tasks.metrics.catalogue import CATEGORICAL_FAMILIES, DEFAULT_FAMILIES, FAMILIES, ORIGINAL_RISK_FAMILIES
from sdc_tasks.metrics.finite import finite_metrics
from sdc_tasks.metrics.original_risk import original_figures
from sdc_tasks.metrics.risk import scores
from sdc_tasks.outputs import scratch_area
from sdc_tasks.stats.moments import frame_moments, frames_moments
from sdc_tasks.validation import input_name, load_checked, numeric_columns

FAMILY_UNITS = {f.name: f for f in (IL, PIL, DLD, PLD, ID, DLD_PUBLISHED, PLD_PUBLISHED, CAT_IL, CAT_RISK, LDIVERSITY,
                                    SUDA)}


PAIRINGS = ("auto", "id", "nearest", "paper")


def _units(families: tuple[str, ...]) -> list:
    """The units of the requested families, in catalogue order (FAMILIES)."""
    return [FAMILY_UNITS[f] for f in FAMILIES if f in families]


def check_options(families: tuple[str, ...], pairing: str) -> None:
    """Raise InputError naming an unknown metric family or pairing."""
    unknown = sorted(set(families) - set(FAMILIES))
    if unknown:
        raise InputError(f"unknown metric family {unknown[0]!r}; known: {', '.join(FAMILIES)}")
    if pairing not in PAIRINGS:
        raise InputError(f"pairing must be auto, id, nearest or paper, not {pairing!r}")


def categorical_keys(key_vars: list[str], categorical: list[str]) -> list[str]:
    """The key variables of the categorical risk measures: the categorical ones among ``key_vars`` in their order,
    or every categorical variable when no key variable is categorical."""
    return [k for k in key_vars if k in categorical] or list(categorical)


def evaluate(original: dd.DataFrame, masked: dd.DataFrame, id_col: str, variables: list[str],
             key_vars: list[str], families: tuple[str, ...] = DEFAULT_FAMILIES, pairing: str = "auto",
             cell_rows: int = DEFAULT_CELL_ROWS, pld_cell_rows: int = PLD_CELL_ROWS, categorical: list[str] = (),
             ordinal: dict[str, list] | None = None, weight: str | None = None,
             reference: dd.DataFrame | None = None, intruder_original: dd.DataFrame | None = None,
             sensitive: list[str] = (), household: str | None = None, original_risk: bool = True,
             profile: bool = False, work_dir: str | Path | None = None,
             sources: tuple[Path, Path] | None = None) -> dict:
    """Return the metric keys of ``masked`` against ``original`` for the families asked for: the continuous
    families on ``variables`` and ``key_vars`` (:func:`continuous_measures`) and the categorical families
    ``cat_il`` (Dist, Dist_mean, CTBIL, ACTBIL, EBIL_MF, PRIL_MF, EBIL_RF, PRIL_RF) on the ``categorical``
    variables and ``cat_risk`` (kanon_*, sample_uniques, PLD_cat and, with a ``weight`` column of the masked file,
    indiv_risk_*) on the categorical key variables (:func:`categorical_keys`); docs/categorical.md.

    ``ordinal``: category order of each ordinal categorical variable (others are nominal); ``reference``: the
    file whose category distribution gives EBIL_RF/PRIL_RF (default: the original); ``intruder_original``: the
    original as an intruder sees it through the release's published recodes (its keys recoded by the same
    rules), which ``cat_risk`` links the masked records to (default: the original; ``cat_il`` always measures
    against the original); ``sensitive``: the variables ``ldiversity`` measures within the key combinations
    (none of them a key); ``household``: the household id column of the masked file, which with ``weight`` adds
    the household risk to ``cat_risk``; ``original_risk``: also compute the figures of the risk families
    (cat_risk, suda, ldiversity) on the original file, as ``<key>_before`` with ``<key>_change_percent``
    (:func:`original_risk_figures`); ``profile``: also return the report's per-variable figures of the continuous
    variables under PROFILES_KEY (:func:`continuous_measures`); ``work_dir``: where the paired records of files
    larger than the workers keep in memory are written (pairing.pairs_home), removed after; a private scratch
    directory when None; ``sources``: the Parquet datasets ``original`` and ``masked`` were read from, which such a
    pairing reads side by side instead of writing, where their files zip (pairing.zipped_files). Categorical
    measures pair records by id."""
    check_options(families, pairing)
    categorical, ordinal = list(categorical), dict(ordinal or {})
    with scratch_area("evaluate", work_dir) as work:
        keys = categorical_keys(key_vars, categorical)
        cat_families = tuple(f for f in families if f in CATEGORICAL_FAMILIES)
        other = tuple(f for f in families if f not in CATEGORICAL_FAMILIES)
        out = continuous_measures(original, masked, id_col, variables, [k for k in key_vars if k not in categorical],
                                  other, pairing, cell_rows, pld_cell_rows, profile, work, sources) if other else {}
        if not cat_families:
            return out
        sensitive = list(sensitive) if "ldiversity" in cat_families else []
        check_categorical(categorical, keys, ordinal, cat_families, sensitive)
        if pairing in ("nearest", "paper"):
            raise InputError("categorical metric families pair records by id: use pairing 'id' or 'auto'")
        cols = list(dict.fromkeys([*categorical, *keys]))
        check_columns(original.columns, [id_col, *cols], "original file")
        if household and not weight:
            raise InputError(f"household {household!r}: the household risk needs the sampling weight column (weight)")
        check_columns(masked.columns, [id_col, *cols, *([weight] if weight else []), *sensitive,
                                       *([household] if household else [])], "masked file")
        if reference is not None:
            check_columns(reference.columns, categorical, "reference file")
        n = int(dask.compute(record_count(original))[0])
        pairs = paired(original, masked, id_col, cols, pairs_home(work, original, [id_col, *cols], n), sources)
        n_masked, matched = (int(x) for x in dask.compute(record_count(masked), record_count(pairs)))
        if matched != n_masked or n_masked == 0:
            raise InputError(f"{n_masked - matched} of {n_masked} masked records have no original record with the same "
                             f"{id_col!r} (categorical measures pair records by id)")
        out.update({"n": n, "n_masked": n_masked, "categorical": categorical, "categorical_keys": keys})
        ctx = CategoricalContext(pairs, original, masked, reference, categorical, keys, ordinal, weight, n_masked,
                                 sensitive=tuple(sensitive), household=household)
        seen_through_recodes = intruder_original is not None and "cat_risk" in cat_families
        out.update(family_measures(_units(tuple(f for f in cat_families
                                                if not (seen_through_recodes and f == "cat_risk"))), ctx))
        if seen_through_recodes:
            seen = paired(intruder_original, masked, id_col, cols,
                          pairs_home(work, intruder_original, [id_col, *cols], n))
            out.update(family_measures(_units(("cat_risk",)), replace(ctx, pairs=seen, original=intruder_original)))
        risk = tuple(f for f in cat_families if f in ORIGINAL_RISK_FAMILIES)
        if original_risk and risk:
            out.update(original_risk_figures(ctx, risk, id_col, cols, n, out, work))
        return finite_metrics(out)


def original_risk_figures(ctx: CategoricalContext, families: tuple[str, ...], id_col: str, cols: list[str], n: int,
                          released: dict, work: Path) -> dict:
    """The risk ``families`` computed on the original file of ``ctx`` exactly as on a release of it unmasked (the
    same family units, the original paired with itself), as ``<key>_before`` beside the ``released`` figures, with
    ``<key>_change_percent`` (sdc_tasks.metrics.original_risk; docs/metrics.md "The original file's risk");
    ``work``: the scratch directory of the pairing (pairing.pairs_home)."""
    pairs = paired(ctx.original, ctx.original, id_col, cols, pairs_home(work, ctx.original, [id_col, *cols], n))
    return original_figures(released, family_measures(_units(families), original_context(ctx, pairs, n)))


def continuous_measures(original: dd.DataFrame, masked: dd.DataFrame, id_col: str, variables: list[str],
                        key_vars: list[str], families: tuple[str, ...] = DEFAULT_FAMILIES, pairing: str = "auto",
                        cell_rows: int = DEFAULT_CELL_ROWS, pld_cell_rows: int = PLD_CELL_ROWS,
                        profile: bool = False, work_dir: str | Path | None = None,
                        sources: tuple[Path, Path] | None = None) -> dict:
    """Return docs/metrics.md keys for ``masked`` against ``original`` for the continuous families asked for: ``il``
    (IL1..IL5, IL, IL1s, the survey's matrix measures, brMAE, brMSE), ``pil`` (PIL_*, PIL), ``dld`` (DLD_i,
    DLD2_i, DLD), ``pld`` (PLD, with PLD_candidate_recall, the share of records whose own original is among
    their candidates, and the EM fit's PLD_match_prior and PLD_em_iterations), ``id`` (ID_p, ID, SDID) and, not
    by default, ``dld_published`` (DLDpub_i, DLDpub: distance linkage as the chapter's Table 1 was computed,
    docs/reproduction.md) and ``pld_published`` (PLDpub_i, PLDpub: probabilistic linkage as Table 1 was
    computed, docs/reproduction.md), the scores, and bookkeeping keys n, n_masked, p, key_vars, pairing.

    ``pairing``: "id" pairs records by id (every masked id must be in the original), "nearest" pairs each
    masked record with its nearest original record (synthetic files, n' != n; disclosure risk then has no
    ground truth and is not computed), "auto" uses ids when every masked id is found, else nearest; "paper"
    is post_masking_optimization.txt sec. 2's setup: each masked record stands for its nearest original
    record c(i) (standardized Euclidean distance on ``variables``) in IL1, ID and correct linkage, the risk
    measures computed as by id with c(i)'s id (pairing.with_nearest_original_ids), against the whole original
    file, and the first i keys of DLD_i taken in the original file's column order (docs/postmask.md).
    ``cell_rows``: about how many original records one spatial cell of the blocked distance linkage holds;
    ``pld_cell_rows``: the same for the blocks of probabilistic linkage. ``profile``: also return each variable's
    report figures under PROFILES_KEY (sdc_tasks/evaluation/profile.py), from the same gathering or sorts of the
    variable as the order-based measures, when the records pair one to one by id (left out otherwise).
    ``work_dir``: where the paired records of files larger than the workers keep in memory are written
    (pairing.pairs_home), removed after; a private scratch directory when None; ``sources``: the Parquet datasets
    the two files were read from, read side by side instead where the pairing is written and their files zip
    (pairing.zipped_files).
    """
    check_options(families, pairing)
    check_columns(original.columns, [id_col, *variables, *key_vars], "original file")
    check_columns(masked.columns, [id_col, *variables, *key_vars], "masked file")
    if pairing == "paper":
        m = frame_moments(original, variables)
        masked = with_nearest_original_ids(original, masked, id_col, variables, m.mean, standard_scale(m.sd))
        sources = None
        key_vars = [key_vars[k] for k in file_key_order(list(original.columns), key_vars)]
    units = _units(families) + ([PROFILE] if profile else [])
    cols = list(dict.fromkeys([*variables, *key_vars]))
    # the original's moments up to the highest order a family reads (PIL: 4); of the masked file means and
    # covariances only
    order = max((u.moment_order for u in units), default=2)
    mo, mm = frames_moments([original, masked], cols, [order, 2])
    n, n_masked = mo.n, mm.n
    if n == 0 or n_masked == 0:
        raise InputError(f"cannot evaluate an empty file: the original has {n} and the masked file {n_masked} "
                         "records")
    with scratch_area("pairs", work_dir) as work:
        scratch = pairs_home(work, original, [id_col, *cols], max(n, n_masked))
        by_id = paired(original, masked, id_col, cols, scratch, sources) if pairing != "nearest" else None
        matched = int(dask.compute(record_count(by_id))[0]) if by_id is not None else 0
        if pairing in ("id", "paper") and matched != n_masked:
            raise InputError(f"{n_masked - matched} of {n_masked} masked records have no original record with the "
                             f"same {id_col!r} (use pairing 'nearest' for synthetic or re-sized files)")
        use_id = by_id is not None and matched == n_masked
        if use_id:
            pairs = by_id
        else:
            vi = [cols.index(v) for v in variables]
            pairs = held(paired_nearest(original, masked, id_col, variables, mo.mean[vi], standard_scale(mo.sd)[vi]),
                         pairs_home(work, masked, [id_col, *cols], n_masked))
        large = not pairs_fit(max(n, n_masked), len(cols) + 1)
        return _continuous(ContinuousContext(original, masked, pairs, id_col, list(variables), list(key_vars), cols,
                                             (mo, mm), use_id, cell_rows, pld_cell_rows, tuple(u.name for u in units),
                                             pairing == "paper", work if large else None), units)


def _continuous(ctx: ContinuousContext, units: list) -> dict:
    """The metrics of the continuous family ``units`` on ``ctx`` with the bookkeeping keys and the scores."""
    out: dict = {"n": ctx.n, "n_masked": ctx.n_masked, "p": len(ctx.variables), "key_vars": list(ctx.key_vars),
                 "pairing": "paper" if ctx.nearest_ids else "id" if ctx.by_id else "nearest"}
    out.update(family_measures(units, ctx))
    out.update(scores(out))
    return finite_metrics(out)


def evaluate_paths(original: str | Path | dd.DataFrame, masked: str | Path | dd.DataFrame,
                   id_col: str = "record_id", variables: list[str] | None = None, key_vars: list[str] | None = None,
                   families: tuple[str, ...] = DEFAULT_FAMILIES, pairing: str = "auto",
                   cell_rows: int = DEFAULT_CELL_ROWS, pld_cell_rows: int = PLD_CELL_ROWS,
                   categorical: list[str] | None = None, ordinal: dict[str, list] | None = None,
                   weight: str | None = None, reference: str | Path | dd.DataFrame | None = None,
                   sensitive: list[str] | None = None, household: str | None = None) -> dict:
    """Evaluate two files (CSV or Parquet) or Dask DataFrames after checking both (validation.load_checked).
    One without ``id_col`` gets ids from its row positions; variables default to the original's numeric columns
    but the categorical and weight columns (the masked file must have them all; none are needed when only
    categorical families are asked for), keys to the first seven variables. Categorical columns may hold codes
    or text and, in the masked file, missing values; ``reference``: a file with the categorical columns (EBIL_RF,
    PRIL_RF); ``sensitive``: the variables of ``ldiversity``; ``household``: the household id column (household
    risk); the masked file must have them."""
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
                        required=[*categorical, *(sensitive or []), *([household] if household else [])],
                        weight=weight)
    check_pairing_ids(a, b, id_col)
    ref = load_checked(reference, id_col, [], input_name("reference", reference), required=categorical)[0] \
        if reference is not None else None
    return evaluate(a, b, id_col, variables, key_vars, families, pairing, cell_rows, pld_cell_rows, categorical,
                    ordinal, weight, ref, sensitive=list(sensitive or []), household=household)
