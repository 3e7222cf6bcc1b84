"""Reading microdata (CSV or Parquet) as Dask collections, writing Parquet datasets, checksums (outputs are made
safe by ``sdc_tasks.outputs``)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import yaml

from sdc_tasks.blocking import offsets_of, partition_lengths


class InputError(ValueError):
    """Bad input: the message names the file, column, record or parameter at fault."""


def detect_format(path: str | Path) -> str:
    """Return ``"csv"`` or ``"parquet"`` for a file or a dataset directory."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"input not found: {p}")
    if p.is_dir():
        if any(p.rglob("*.parquet")):
            return "parquet"
        if any(p.glob("*.csv")):
            return "csv"
        raise InputError(f"input directory {p} holds no .parquet or .csv files")
    suffix = p.suffix.lower()
    if suffix in (".parquet", ".pq"):
        return "parquet"
    if suffix in (".csv", ".txt"):
        return "csv"
    raise InputError(f"cannot tell the format of {p}: use a .csv or .parquet file or a Parquet dataset directory")


WHOLE_SAMPLE_BYTES = 16 * 2**20  # a CSV file up to this size has its column types inferred from every row


def _type_sample(path: Path) -> dict:
    """Dask's type-inference sample for a CSV file or directory: every row of a first file of at most
    WHOLE_SAMPLE_BYTES (a column whose decimals or text come late keeps its true type), else Dask's
    default, the first 10 rows of its first 256 kB."""
    first = min(path.glob("*.csv"), default=None) if path.is_dir() else path
    size = first.stat().st_size if first is not None else 0
    return {"sample": size + 1, "sample_rows": size + 1} if size <= WHOLE_SAMPLE_BYTES else {}


def read_table(path: str | Path, fmt: str = "auto", blocksize: int | str = "64MB",
               dtype: dict[str, str] | None = None) -> dd.DataFrame:
    """Return the file or dataset at ``path`` as a Dask DataFrame (partitions follow files/row groups, never workers);
    ``dtype`` forces the type of CSV columns (default: inferred)."""
    p = Path(path)
    fmt = detect_format(p) if fmt == "auto" else fmt
    if not p.exists():
        raise InputError(f"input not found: {p}")
    try:
        if fmt == "parquet":
            ddf = dd.read_parquet(str(p))
        elif fmt == "csv":
            pattern = str(p / "*.csv") if p.is_dir() else str(p)
            ddf = dd.read_csv(pattern, blocksize=blocksize, dtype=dtype, **_type_sample(p))
        else:
            raise InputError(f"unknown input format {fmt!r}: use csv or parquet")
    except InputError:
        raise
    except Exception as exc:  # pyarrow/pandas parse errors: name the file
        reason = str(exc).strip().splitlines()[-1].removeprefix("Original Message: ")  # dask wraps the reader's error
        raise InputError(f"cannot read {p} as {fmt}: {reason}") from exc
    if len(ddf.columns) == 0:
        raise InputError(f"input {p} has no columns")
    return ddf


def yaml_document(path: str | Path, what: str, error: type[Exception]) -> Any:
    """The YAML document in the file at ``path``; ``error`` (naming ``what``: "spec", "grid") when the file is
    missing or is not valid YAML."""
    p = Path(path)
    if not p.is_file():
        raise error(f"{what} file not found: {p}")
    try:
        return yaml.safe_load(p.read_text())
    except yaml.YAMLError as exc:
        raise error(f"{what} file {p} is not valid YAML: {exc}") from None


def _with_ids(part: pd.DataFrame, offset: int, id_col: str) -> pd.DataFrame:
    """Prepend an int64 id column holding the global row position."""
    out = part.copy()
    out.insert(0, id_col, np.arange(offset, offset + len(part), dtype=np.int64))
    return out


def add_row_ids(ddf: dd.DataFrame, id_col: str) -> dd.DataFrame:
    """``ddf`` with a first int64 column ``id_col`` holding the global row position (0-based)."""
    if id_col in ddf.columns:
        raise InputError(f"cannot create id column {id_col!r}: the input already has a column of that name")
    offsets = offsets_of(partition_lengths(ddf))
    parts = [dask.delayed(_with_ids)(p, int(offsets[i]), id_col) for i, p in enumerate(ddf.to_delayed())]
    return dd.from_delayed(parts, meta=_with_ids(ddf._meta, 0, id_col), verify_meta=False)


def read_with_ids(path: str | Path, fmt: str, id_col: str, create_id: bool | None,
                  dtype: dict[str, str] | None = None) -> dd.DataFrame:
    """The file at ``path`` with ``id_col`` created from row positions when ``create_id`` (None: when the file
    has no such column)."""
    ddf = read_table(path, fmt, dtype=dtype)
    create = id_col not in ddf.columns if create_id is None else create_id
    return add_row_ids(ddf, id_col) if create else ddf


def write_parquet(ddf: dd.DataFrame, path: str | Path) -> None:
    """Write a Dask DataFrame as a Parquet dataset: one file per partition, deterministic names, no index.

    ``path`` is a directory this run owns (a stage's scratch or output): the Parquet files already there, such
    as those of a failed attempt that is being retried, are removed first; the directory itself is kept (its
    permissions and the tool's marker file stay).
    """
    for stale in Path(path).glob("*.parquet"):
        stale.unlink()
    ddf.to_parquet(str(path), write_index=False, name_function=lambda i: f"part-{i:05d}.parquet",
                   write_metadata_file=False)


def parquet_row_counts(path: str | Path) -> list[int]:
    """Rows of each file of a Parquet dataset written by ``write_parquet``, from the footers alone."""
    import pyarrow.parquet as pq

    return [pq.ParquetFile(f).metadata.num_rows for f in sorted(Path(path).glob("*.parquet"))]


def read_table_pandas(path: str | Path, fmt: str = "auto") -> pd.DataFrame:
    """Return a small file as one pandas DataFrame (tests, bundled data)."""
    return read_table(path, fmt).compute().reset_index(drop=True)


def file_sha256(path: Path) -> str:
    """Return the hex SHA-256 checksum of one file."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def tree_checksums(root: Path) -> dict[str, str]:
    """Return {relative path: sha256} for every file below ``root``, sorted by path."""
    return {
        str(f.relative_to(root)): file_sha256(f)
        for f in sorted(root.rglob("*"))
        if f.is_file()
    }
