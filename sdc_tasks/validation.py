"""Checks of an input file before masking or evaluation: one scan that names the column and the row at fault.

Rows are counted from 0 after the header, as the ids ``create_id`` gives. Messages name columns, rows, ids
and the row holding a stratum, never a value (values are confidential, a stratum's label included).
"""

from __future__ import annotations

from pathlib import Path

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pyarrow as pa

from sdc_tasks.blocking import offsets_of
from sdc_tasks.errors import InputError
from sdc_tasks.files import check_columns, input_format, reader_reason
from sdc_tasks.io import (
    add_row_ids,
    check_new_id,
    corrupt_parquet_file,
    read_checkpoint,
    read_input,
    read_table,
    read_with_ids,
    write_scratch_parquet,
)
from sdc_tasks.masking.rankswap import fewest_swapped_records
from sdc_tasks.masking.suppression import largest_k
from sdc_tasks.scheduling import held_in_process

CSV_TYPE_CHANGE = "Mismatched dtypes found"  # dask's error when a CSV column changes type after the sampled rows
NUMBER_LIKE = r"\s*([+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|[+-]?inf(inity)?|true|false)\s*"
FACT_COLUMNS = ["column", "text", "first_text", "bad", "first_bad", "first_bad_id", "min", "max", "not_positive",
                "first_not_positive"]


def _as_numbers(col: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(float64 values, mask of cells that hold text that is not a number) of one column."""
    if pd.api.types.is_numeric_dtype(col.dtype):
        return col.to_numpy(np.float64, na_value=np.nan), np.zeros(len(col), dtype=bool)
    parsed = pd.to_numeric(col, errors="coerce")
    return parsed.to_numpy(np.float64, na_value=np.nan), (col.notna() & parsed.isna()).to_numpy()


def _first(mask: np.ndarray) -> int:
    """Position of the first True of ``mask``, -1 if none."""
    return int(np.argmax(mask)) if mask.any() else -1


def _scan_partition(part: pd.DataFrame, columns: list[str], numeric: set[str], id_col: str,
                    strata: str | None) -> tuple[int, pd.DataFrame, pd.Series, int, tuple[int, int]]:
    """One partition's (rows, per-column facts, records per stratum, first row without a stratum, (rows without
    an id, the first of them)) where the facts are: text cells that are not numbers, missing or infinite values
    (numeric variables only), the first row and id of each, the finite minimum and maximum, and the values at or
    below zero and the first of them."""
    facts = []
    for c in columns:
        x, text = _as_numbers(part[c])
        bad = ~np.isfinite(x) & ~text if c in numeric else np.zeros(len(x), dtype=bool)
        ok = np.isfinite(x)
        first_bad = _first(bad)
        not_positive = ok & (x <= 0)
        facts.append({"column": c, "text": int(text.sum()), "first_text": _first(text), "bad": int(bad.sum()),
                      "first_bad": first_bad, "first_bad_id": str(part[id_col].iloc[first_bad]) if first_bad >= 0 else "",
                      "min": float(x[ok].min()) if ok.any() else np.inf,
                      "max": float(x[ok].max()) if ok.any() else -np.inf,
                      "not_positive": int(not_positive.sum()), "first_not_positive": _first(not_positive)})
    sizes = _stratum_sizes(part[strata]) if strata else pd.DataFrame(columns=["size", "first"], dtype=np.int64)
    no_stratum = _first(part[strata].isna().to_numpy()) if strata else -1
    no_id = part[id_col].isna().to_numpy()
    facts = pd.DataFrame(facts, columns=FACT_COLUMNS)
    return len(part), facts, sizes, no_stratum, (int(no_id.sum()), _first(no_id))


def _stratum_sizes(labels: pd.Series) -> pd.DataFrame:
    """Per stratum label of one partition (missing labels left out): its records (``size``) and the position of
    its first record (``first``)."""
    positions = pd.Series(np.arange(len(labels)), index=labels.to_numpy())[labels.notna().to_numpy()]
    return positions.groupby(level=0, sort=False).agg(size="size", first="min")


def _duplicate_ids(part: pd.DataFrame, id_col: str) -> pd.DataFrame:
    """Number of repeated ids in one hash partition and one example."""
    dup = part[id_col][part[id_col].duplicated()]
    return pd.DataFrame({"dups": [len(dup)], "example": [dup.iloc[0] if len(dup) else None]})


def _rows_of(part: pd.DataFrame, id_col: str, value) -> np.ndarray:
    """Positions within one partition of the records whose id is ``value``."""
    return np.flatnonzero(part[id_col].to_numpy() == value)


def _repeated_id_message(ddf: dd.DataFrame, id_col: str, dups: pd.DataFrame, what: str) -> str:
    """A message naming one repeated id and the rows that hold it (``dups``: the ``_duplicate_ids`` frames)."""
    count = int(dups["dups"].sum())
    example = dups.dropna(subset=["example"])["example"].iloc[0]
    parts = ddf[[id_col]].to_delayed()
    found = dask.compute(*[dask.delayed(_rows_of)(p, id_col, example) for p in parts],
                         *[dask.delayed(len)(p) for p in parts])
    offsets = offsets_of(list(found[len(parts):]))
    rows = [int(offsets[i] + r) for i, local in enumerate(found[: len(parts)]) for r in local]
    return (f"id column {id_col!r} of {what} is not unique: {count} repeated ids (e.g. {id_col} = {example} in rows "
            f"{rows[0]} and {rows[1]})")


def _checked_facts(ddf: dd.DataFrame, columns: list[str], numeric: list[str], id_col: str, what: str,
                   strata: str | None, group_sizes: list[tuple[str, int]], unique_ids: bool,
                   typed: bool = True, weight: str | None = None) -> dict:
    """Scan ``ddf`` once (values and, when ``unique_ids``, repeated ids in the same computation), raise
    InputError for the first problem found and return the file's facts (``typed``: the columns have their
    inferred types, not the text type of a re-read; ``weight``: a numeric column of sampling weights, which must
    all be above zero)."""
    scans = [dask.delayed(_scan_partition)(p, columns, set(numeric), id_col, strata) for p in ddf.to_delayed()]
    dups = ddf[[id_col]].shuffle(id_col).map_partitions(
        _duplicate_ids, id_col, meta=_duplicate_ids(ddf._meta[[id_col]], id_col)).to_delayed() if unique_ids else []
    scanned, dups = dask.compute(scans, dups)
    dups = pd.concat(dups) if dups else None
    lengths = [s[0] for s in scanned]
    offsets = offsets_of(lengths)
    n = int(offsets[-1])
    if n == 0:
        raise InputError(f"{what} has no records")
    facts = pd.concat([s[1].assign(offset=int(offsets[i])) for i, s in enumerate(scanned)], ignore_index=True)
    for c in columns:
        rows = facts[facts["column"] == c]
        hit = rows[rows["text"] > 0]
        if len(hit):
            first = hit.iloc[0]
            raise InputError(f"column {c!r} of {what} must be numeric but row {int(first['offset'] + first['first_text'])}"
                             f" holds text that is not a number ({int(rows['text'].sum())} rows in all)")
    for c in numeric:
        if typed and not pd.api.types.is_numeric_dtype(ddf._meta[c].dtype):
            raise InputError(f"variable {c!r} of {what} must be numeric but has dtype {ddf._meta[c].dtype}")
        rows = facts[facts["column"] == c]
        hit = rows[rows["bad"] > 0]
        if len(hit):
            first = hit.iloc[0]
            raise InputError(f"variable {c!r} of {what} is missing or infinite in row "
                             f"{int(first['offset'] + first['first_bad'])} ({id_col} = {first['first_bad_id']}; "
                             f"{int(rows['bad'].sum())} rows in all)")
    if weight:
        _check_weights(facts[facts["column"] == weight], weight, what)
    if strata:
        missing = [int(offsets[i]) + s[3] for i, s in enumerate(scanned) if s[3] >= 0]
        if missing:
            raise InputError(f"strata column {strata!r} of {what} has no value in row {missing[0]}")
    no_ids = [int(offsets[i]) + s[4][1] for i, s in enumerate(scanned) if s[4][0]]
    if no_ids:
        raise InputError(f"id column {id_col!r} of {what} has no value in row {no_ids[0]} "
                         f"({sum(s[4][0] for s in scanned)} rows in all): every record needs an id")
    if dups is not None and int(dups["dups"].sum()):
        raise InputError(_repeated_id_message(ddf, id_col, dups, what))
    if strata:
        sizes = pd.concat([s[2].assign(first=s[2]["first"] + int(offsets[i])) for i, s in enumerate(scanned)])
        sizes = sizes.groupby(level=0).agg(size=("size", "sum"), first=("first", "min")).sort_values("first")
    for named, least in group_sizes:
        if n < least:
            raise InputError(f"{named} needs at least {least} records but {what} has {n}")
        small = sizes[sizes["size"] < least] if strata else []
        if len(small):
            size, row = int(small["size"].iloc[0]), int(small["first"].iloc[0])
            raise InputError(f"{named} needs at least {least} records per stratum but the stratum of {strata!r} "
                             f"holding row {row} has {size} record{'s' if size > 1 else ''} ({len(small)} of the "
                             f"{len(sizes)} strata have fewer than {least})")
    per_column = facts.groupby("column", sort=False).agg(lo=("min", "min"), hi=("max", "max"))
    return {"n_records": n, "partitions": int(ddf.npartitions),
            "constant_variables": [c for c in numeric if per_column.loc[c, "lo"] == per_column.loc[c, "hi"]]}


def _check_weights(rows: pd.DataFrame, weight: str, what: str) -> None:
    """Raise InputError naming the weight column and the first row whose weight is zero or negative (``rows``:
    the column's facts, one per partition): a sampling weight counts the population records a record stands
    for, and the risk measures divide by the summed weights."""
    hits = rows[rows["not_positive"] > 0]
    if len(hits):
        row = int((hits["offset"] + hits["first_not_positive"]).iloc[0])
        raise InputError(f"weight column {weight!r} of {what} must hold sampling weights above zero but row {row} "
                         f"does not ({int(hits['not_positive'].sum())} rows in all)")


def fewest_records(method: str, params: dict, field: str, step: str) -> tuple[str, int]:
    """(what a refusal names, the fewest records each stratum, or the file, must hold) for one masking step, the
    same rule for every method: enough for the method to change every record. k for the methods with a group size
    (``field``: how the step's parameters are named, e.g. "parameter '{}' of mdav"), for rank swapping the fewest
    records of which p percent is one rank (``rankswap.fewest_swapped_records``), and 2 for any other method
    (``step`` names it): a record alone has no group, no partner to swap with and no spread."""
    if params.get("k") is not None:
        return f"{field.format('k')} = {params['k']}", largest_k(params)
    if method == "rankswap":
        return f"{field.format('p')} = {params['p']:g}", fewest_swapped_records(params["p"])
    return step, 2


def _is_number_type(dtype) -> bool:
    """Whether a column type holds numbers (true/false excluded: a default selection does not mask them)."""
    return pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype)


def _number_like_counts(part: pd.DataFrame) -> pd.DataFrame:
    """Per column of one partition: its filled cells and those that read as a number (1e400 included) or as
    true/false."""
    rows = []
    for c in part.columns:
        filled = part[c].dropna()
        rows.append((len(filled), int(filled.astype(str).str.fullmatch(NUMBER_LIKE, case=False).sum())))
    return pd.DataFrame(rows, index=part.columns, columns=["filled", "numbers"])


def _mostly_numbers(ddf: dd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """Filled and number-like cells of each of ``columns`` (one pass), for those where number-like cells are
    at least half the filled ones."""
    if not columns:
        return pd.DataFrame(columns=["filled", "numbers"])
    counts = pd.concat(dask.compute(*[dask.delayed(_number_like_counts)(p) for p in ddf[columns].to_delayed()]))
    counts = counts.groupby(level=0, sort=False).sum()
    return counts[(counts["filled"] > 0) & (2 * counts["numbers"] >= counts["filled"])]


def input_name(role: str, data: str | Path | dd.DataFrame) -> str:
    """How a message names an input: "original file PATH" for a file, "DataFrame original" for a DataFrame."""
    return f"DataFrame {role}" if isinstance(data, dd.DataFrame) else f"{role} file {data}"


def numeric_columns(data: str | Path | dd.DataFrame, exclude: list[str], what: str) -> list[str]:
    """The numeric columns of the file at ``data`` (or of a Dask DataFrame) but ``exclude`` (the default
    variables of a command); raise InputError when it has none, or naming a column left out that mostly holds
    numbers or true/false (text in one cell, an overflowing number, booleans), which a default selection would
    otherwise publish unmasked."""
    ddf = data if isinstance(data, dd.DataFrame) else read_table(data)
    candidates = [c for c in ddf.columns if c not in exclude]
    found = [c for c in candidates if _is_number_type(ddf.dtypes[c])]
    try:
        doubtful = _mostly_numbers(ddf, [c for c in candidates if c not in found])
    except ValueError as exc:
        if not str(exc).startswith(CSV_TYPE_CHANGE):
            raise
        raise _type_change(what) from None
    if len(doubtful):
        column, (filled, numbers) = doubtful.index[0], doubtful.iloc[0]
        raise InputError(f"column {column!r} of {what} is left out of the default variables (numeric columns) but "
                         f"{numbers} of its {filled} filled cells are numbers or true/false: name the variables "
                         "with --vars (sdc compare: --variables), or fix the column")
    if not found:
        raise InputError(f"{what} has no records" if len(ddf.head(1, npartitions=-1)) == 0 else
                         f"{what} has no numeric column (columns: {', '.join(map(str, ddf.columns))})")
    return found


def load_checked(data: str | Path | dd.DataFrame, id_col: str, numeric: list[str], what: str, fmt: str = "auto",
                 create_id: bool | None = None, required: list[str] = (), strata: str | None = None,
                 group_sizes: list[tuple[str, int]] = (), source: dd.DataFrame | None = None,
                 checkpoint: Path | None = None, weight: str | None = None) -> tuple[dd.DataFrame, dict]:
    """Return the file at ``data``, or the records of the Dask DataFrame ``data``, (ids created from row
    positions when ``create_id``, or when None and it has no ``id_col``) and its facts (n_records, partitions,
    constant_variables), after checking that it has the columns, records, numeric values, unique ids and strata
    of at least k records (``group_sizes``: (parameter, k) pairs) that masking and evaluation need; raise
    InputError naming the column, the row or the parameter at fault. ``source``: the file as ``read_input``
    returned it, when the caller has read it already. ``checkpoint`` (a file only): a directory the file is written to as Parquet in one pass over it; the checks and
    the frame returned then read the checkpoint (``io.read_checkpoint``), never the file again. ``weight``: a
    column of ``numeric`` holding sampling weights, refused naming its first row at or below zero."""
    path, source = (None, data) if isinstance(data, dd.DataFrame) else (Path(data), source)
    numeric = list(dict.fromkeys(numeric))
    source = read_input(path, fmt) if source is None else source
    has_ids = id_col in source.columns
    create = not has_ids if create_id is None else create_id
    needed = [*numeric, *required, *([strata] if strata else [])]
    args = (numeric, id_col, what, strata, list(group_sizes), has_ids)
    try:
        if create:
            check_new_id(source, id_col)
        check_columns(source.columns, list(dict.fromkeys(needed if create else [id_col, *needed])), what)
        if checkpoint is None:
            source = held_in_process(source, path)
            ddf = add_row_ids(source, id_col) if create else source
        else:
            write_scratch_parquet(source, checkpoint)
            ddf = read_checkpoint(checkpoint, id_col, keep_partitions=input_format(path, fmt) == "csv")
        return ddf, _checked_facts(ddf, numeric, *args, weight=weight)
    except (UnicodeDecodeError, pd.errors.ParserError) as exc:  # met beyond the rows Dask sampled
        raise InputError(f"cannot read {what} as csv: {reader_reason(exc)}") from None
    except (OSError, pa.ArrowException):  # a Parquet file whose footer reads but a page does not
        corrupt = corrupt_parquet_file(path) if path is not None and input_format(path, fmt) == "parquet" else None
        if corrupt is None:
            raise
        raise InputError(f"cannot read {what}: its Parquet file {corrupt[0]} has a page that cannot be decoded "
                         f"({reader_reason(corrupt[1])}); rewrite or remove that file") from None
    except ValueError as exc:
        if path is None or not str(exc).startswith(CSV_TYPE_CHANGE):
            raise
    numbers = [c for c, t in source.dtypes.items() if pd.api.types.is_numeric_dtype(t)]
    text = read_with_ids(path, fmt, id_col, create_id, {c: "object" for c in numbers})
    _checked_facts(text, list(dict.fromkeys([*numeric, *numbers])), *args, typed=False, weight=weight)
    raise _type_change(what)


def _type_change(what: str) -> InputError:
    """The error of a CSV input whose column changes type after the rows Dask sampled (``CSV_TYPE_CHANGE``)."""
    return InputError(f"{what}: a column changes type after its first rows (e.g. whole numbers, then decimals); "
                      "write it with one type throughout")


def household_fault_counts(ddf: dd.DataFrame, household: str, variables: list[str]) -> list:
    """[records without a household id, then per variable the households whose members differ on it], as Dask
    scalars to compute together with other checks."""
    missing = ddf[household].isna().sum()
    return [missing, *[(ddf.groupby(household)[v].nunique(split_out=ddf.npartitions) > 1).sum() for v in variables]]


def household_faults(ddf: dd.DataFrame, household: str, variables: list[str]) -> list[int]:
    """:func:`household_fault_counts`, computed in one pass."""
    return [int(c) for c in dask.compute(*household_fault_counts(ddf, household, variables))]


def check_households(ddf: dd.DataFrame, household: str, variables: list[str], what: str,
                     strata: str | None = None) -> None:
    """Raise InputError naming the household id column when records lack it (how many), a household-level
    variable that takes more than one value within some households (how many households, never which values),
    or the ``strata`` column when it does (given when the steps mask household-level variables: their plans are
    per stratum, so a household must lie in one)."""
    checked = [*variables, *([strata] if strata else [])]
    counts = household_faults(ddf, household, checked)
    if counts[0]:
        raise InputError(f"{what}: household id column {household!r} is missing in {int(counts[0])} records: every "
                         "person needs a household")
    for v, broken in zip(checked, counts[1:]):
        if broken and v == strata:
            raise InputError(f"{what}: strata column {v!r} differs between the members of {int(broken)} households: "
                             "household-level variables are masked once per household, within one stratum")
        if broken:
            raise InputError(f"{what}: household-level variable {v!r} differs between the members of "
                             f"{int(broken)} households (households.variables must be the same for every member)")
