"""The arguments of the public API (:mod:`sdc_tasks.api`), checked and converted before any data work: the kind
of data given (pandas, Dask or a path) and its column names, column lists, method parameters, category orders,
the roles of the id and strata columns, and the output. Each check raises InputError naming the argument, the
column or the parameter at fault, as ``sdc`` spells it where it differs (``--vars`` is ``vars=``)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

import dask.dataframe as dd
import pandas as pd

from sdc_tasks.errors import InputError
from sdc_tasks.files import STATISTICAL_FORMATS, input_format
from sdc_tasks.io import write_csv
from sdc_tasks.masking.apply import TARGET_PARTITION_ROWS
from sdc_tasks.masking.registry import METHODS, household_suppression_error, validate_params
from sdc_tasks.outputs import atomic_output_dir, atomic_output_file
from sdc_tasks.reserved import reserved_role

PathLike = str | os.PathLike


def is_path(data: Any) -> bool:
    """Whether ``data`` names a file or directory (a string or an ``os.PathLike``)."""
    return isinstance(data, (str, os.PathLike))


def check_kind(data: Any, name: str) -> None:
    """Raise InputError naming the argument when ``data`` is not a pandas DataFrame, Dask DataFrame or path."""
    if not (is_path(data) or isinstance(data, (pd.DataFrame, dd.DataFrame))):
        raise InputError(f"{name} must be a pandas DataFrame, a Dask DataFrame or a path, not {type(data).__name__}")


def dask_frame(data: pd.DataFrame | dd.DataFrame, name: str) -> dd.DataFrame:
    """A DataFrame as a Dask DataFrame with a fresh row index (pandas: partitions of TARGET_PARTITION_ROWS rows),
    after checking its column names as a file's are checked: text, each once, none colliding with the
    pipeline's own names (sdc_tasks.reserved)."""
    names = list(data.columns)
    for i, column in enumerate(names):
        if not isinstance(column, str):
            raise InputError(f"column number {i + 1} of {name} has a name of type {type(column).__name__}: "
                             "name every column with text")
        if column in names[:i]:
            raise InputError(f"column {column!r} appears twice in {name}: give each column its own name")
        role = reserved_role(column)
        if role:
            raise InputError(f"column {column!r} of {name} {role}: the pipeline uses such names for its own "
                             "columns; rename it")
    if isinstance(data, dd.DataFrame):
        return data
    return dd.from_pandas(data.reset_index(drop=True), chunksize=TARGET_PARTITION_ROWS, sort=False)


def as_given(result: pd.DataFrame, data: pd.DataFrame) -> pd.DataFrame:
    """A computed result with ``data``'s index and its text columns in their given type (Dask computes text
    as Arrow strings)."""
    text = {c: t for c, t in data.dtypes.items() if not pd.api.types.is_numeric_dtype(t)
            and not pd.api.types.is_bool_dtype(t) and result.dtypes[c] != t}
    return result.astype(text).set_axis(data.index)


def source_of(data: Any, name: str) -> Path | dd.DataFrame | None:
    """A path as a Path, a DataFrame as a checked Dask DataFrame (:func:`dask_frame`), None as None."""
    if data is None:
        return None
    check_kind(data, name)
    return Path(data) if is_path(data) else dask_frame(data, name)


def column_names(value: str | Sequence[str] | None) -> list[str] | None:
    """Column names given as one name or a sequence of names; None (or empty) for none."""
    if value is None or isinstance(value, str):
        return [value] if value else None
    return list(value) or None


def checked_params(method: str, params: dict[str, Any]) -> dict[str, Any]:
    """The method's parameters, defaults filled in; InputError naming an unknown method or a bad parameter."""
    try:
        return validate_params(method, params)
    except ValueError as exc:
        raise InputError(str(exc)) from None


def checked_orders(ordinal: Mapping[str, Sequence] | None) -> dict[str, list]:
    """The declared category orders, {variable: categories in order}; InputError naming a variable whose order
    is empty or lists a category twice."""
    orders = {str(name): list(categories) for name, categories in (ordinal or {}).items()}
    for name, categories in orders.items():
        if not categories or len(set(categories)) != len(categories):
            raise InputError(f"ordinal {name!r}: give its categories in order, each once "
                             f"(--ordinal {name}=c1,c2,...)")
    return orders


def check_roles(method: str, variables: list[str] | None, id_column: str, strata: str | None,
                original: Any) -> None:
    """Raise InputError when a method needs the original records and none are given, a categorical method gets
    no variables, or the variables name the id or the strata column, which are never masked."""
    if METHODS[method].after_masking and original is None:
        raise InputError(f"method {method} moves a masked file toward the original records: name them with "
                         "--original FILE (original=)")
    if METHODS[method].kind == "categorical" and not variables:
        raise InputError(f"method {method} masks categorical variables: name them with --vars")
    if id_column in (variables or []):
        raise InputError(f"--vars names the id column {id_column!r} (--id-col): ids are not masked")
    if strata is not None and strata in (variables or []):
        raise InputError(f"--strata {strata!r} is also named in --vars: the strata column is not masked")


def check_household_roles(method: str, params: dict[str, Any], household: str | None, homes: list[str],
                          variables: list[str] | None, id_column: str, strata: str | None) -> None:
    """Raise InputError when household-level variables come without a household id column, the household id is
    the id or strata column or one of the variables masked, or the method cannot mask the household-level ones
    among its variables once per household (``registry.household_suppression_error``)."""
    reason = household_suppression_error(method, params, [v for v in variables or [] if v in homes])
    if reason:
        raise InputError(f"parameter 'missing' of {method}: {reason}")
    if homes and household is None:
        raise InputError("--household-vars (household_vars=) needs the household id column: name it with "
                         "--household (household=)")
    if household is not None and household in {id_column, strata, *(variables or [])}:
        raise InputError(f"--household {household!r} names the id, strata or a masked column: the household id is "
                         "never masked")


SINGLE_FILE_SUFFIXES = (".csv", ".sav", ".zsav", ".dta", ".xpt")
"""Outputs written as one file: CSV, and the statistical packages' formats pyreadstat writes (SPSS, Stata, SAS
transport); any other name is a Parquet dataset directory."""


def is_single_file(out: PathLike) -> bool:
    """Whether an output is written as one file (SINGLE_FILE_SUFFIXES) rather than a Parquet dataset directory."""
    return Path(out).suffix.lower() in SINGLE_FILE_SUFFIXES


def write_single_file(frame: pd.DataFrame, target: Path, out: PathLike, source: Any) -> None:
    """Write ``frame`` to ``target`` (the temporary name of ``out``) as the format ``out``'s suffix names: CSV, or an
    SPSS, Stata or SAS transport file carrying the value labels of a statistical-package ``source`` (for the
    variables still holding the codes they label)."""
    if Path(out).suffix.lower() == ".csv":
        write_csv(frame, target)
        return
    from sdc_tasks.statistical_files import value_labels, write_statistical

    fmt = input_format(source, "auto") if is_path(source) else None
    labels = value_labels(source, fmt) if fmt in STATISTICAL_FORMATS else None
    write_statistical(frame, Path(target), Path(out).suffix.lower(), labels)


def output_of(out: PathLike | None, overwrite: bool, inputs: list[Any]) -> contextlib.AbstractContextManager:
    """The atomic output ``out`` as ``sdc mask`` writes it (:mod:`sdc_tasks.outputs`): one CSV file for a .csv
    name, else a Parquet dataset directory, never one of the ``inputs`` that are paths; a null context for
    None."""
    if out is None:
        return contextlib.nullcontext()
    writer = atomic_output_file if is_single_file(out) else atomic_output_dir
    return writer(out, overwrite, inputs=[d for d in inputs if is_path(d)])
