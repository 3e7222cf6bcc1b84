"""Reading microdata (CSV or Parquet) as Dask collections and writing outputs atomically."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import uuid
from pathlib import Path
from typing import Any, Iterator

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

    ``path`` is a directory this run owns (a stage's scratch or output): anything already there, such as
    the files of a failed attempt that is being retried, is removed first.
    """
    if Path(path).exists():
        shutil.rmtree(path)
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


def _sibling(final: Path, kind: str) -> Path:
    """A hidden sibling of ``final`` for this process: ``.NAME.KIND-PID-RANDOM`` (kind "tmp" or "old")."""
    return final.parent / f".{final.name}.{kind}-{os.getpid()}-{uuid.uuid4().hex[:12]}"


def _alive(pid: int) -> bool:
    """Whether a process with this id runs on this machine."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_path(path: Path) -> None:
    """Remove a file or a directory tree, whichever ``path`` is."""
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def recover_interrupted(final: str | Path) -> None:
    """Clean up after runs that were killed while writing ``final`` (their process is gone): their temporary
    siblings are removed, and a previous output they had moved aside but not yet replaced is put back, so a
    killed run leaves the last complete output, never a partial one."""
    final = Path(final).resolve()
    if not final.parent.is_dir():
        return
    stale = {"tmp": [], "old": []}
    for path in final.parent.glob(f".{final.name}.*-*-*"):
        kind, _, rest = path.name[len(final.name) + 2:].partition("-")
        pid = rest.partition("-")[0]
        if kind in stale and pid.isdigit() and not _alive(int(pid)):
            stale[kind].append(path)
    for path in stale["tmp"]:
        _remove_path(path)
    for path in stale["old"]:
        if final.exists():
            _remove_path(path)
        else:
            os.rename(path, final)


@contextlib.contextmanager
def atomic_output_dir(final: str | Path, overwrite: bool = False) -> Iterator[Path]:
    """Yield a temporary sibling directory that is renamed to ``final`` only if the block succeeds.

    On any exception the temporary directory is removed, so no partial output is ever left at ``final``; a
    process killed outright leaves a hidden sibling that the next run on ``final`` removes
    (:func:`recover_interrupted`). An existing ``final`` is replaced only with ``overwrite=True`` (and only
    after success).
    """
    final = Path(final).resolve()
    recover_interrupted(final)
    if final.exists() and not overwrite:
        raise InputError(f"output directory {final} already exists (pass --overwrite / overwrite: true to replace it)")
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = _sibling(final, "tmp")
    tmp.mkdir()
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = None
    if final.exists():
        old = _sibling(final, "old")
        os.rename(final, old)
    os.rename(tmp, final)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


@contextlib.contextmanager
def atomic_output_file(final: str | Path, overwrite: bool = False) -> Iterator[Path]:
    """Yield a temporary sibling file path that replaces ``final`` only if the block succeeds."""
    final = Path(final).resolve()
    recover_interrupted(final)
    if final.exists() and not overwrite:
        raise InputError(f"output file {final} already exists")
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = _sibling(final, "tmp")
    try:
        yield tmp
        os.replace(tmp, final)
    finally:
        if tmp.exists():
            tmp.unlink()
