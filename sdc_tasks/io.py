"""Reading microdata (CSV or Parquet) as Dask collections, writing Parquet datasets and JSON, checksums (outputs
are made safe by ``sdc_tasks.outputs``)."""

from __future__ import annotations

import csv
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import yaml
from dask.utils import parse_bytes

from sdc_tasks.blocking import offsets_of, partition_lengths
from sdc_tasks.errors import InputError
from sdc_tasks.reserved import reserved_role


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


def input_format(path: str | Path, fmt: str) -> str:
    """The format a read of ``path`` uses: ``fmt``, or for "auto" the one :func:`detect_format` tells."""
    return detect_format(path) if fmt == "auto" else fmt


QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")  # text a reader's message quotes (the cell it could not parse)
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
    ``dtype`` forces the type of CSV columns (default: inferred). The files are checked first (:func:`check_files`),
    so Dask never opens a FIFO or meets a header or schema it would change or fail on."""
    p = Path(path)
    fmt = input_format(p, fmt)
    if not p.exists():
        raise InputError(f"input not found: {p}")
    check_files(p, fmt)
    try:
        if fmt == "parquet":
            ddf = _decoded(dd.read_parquet(str(p), index=False), _dataset_files(p, fmt)[0])  # index stays a column
        else:
            pattern = str(p / "*.csv") if p.is_dir() else str(p)
            ddf = dd.read_csv(pattern, blocksize=blocksize, dtype=dtype, float_precision="round_trip",
                              **_type_sample(p))
        if p.is_dir() and ddf.npartitions > MANY_FILES:
            ddf = _merged_small_files(ddf, _dataset_files(p, fmt), blocksize)
    except Exception as exc:  # pyarrow/pandas parse errors: name the file
        raise InputError(f"cannot read {p} as {fmt}: {reader_reason(exc)}") from exc
    if len(ddf.columns) == 0:
        raise InputError(f"input {p} has no columns")
    return ddf


MANY_FILES = 100  # a dataset directory of more files than this has its small files' partitions merged
IN_MEMORY_BYTES = 64 * 2**20  # many small files adding up to at most this are read once and held in memory


def _merged_small_files(ddf: dd.DataFrame, files: list[Path], blocksize: int | str) -> dd.DataFrame:
    """``ddf``, read from the dataset ``files`` (more than MANY_FILES), with its partitions merged in file order
    into about one per ``blocksize`` bytes of files, and when the files add up to at most IN_MEMORY_BYTES read
    once here and held in memory: each pass over a partition per tiny file opens every file again (2,000 files
    of 5 records: minutes to mask, seconds this way). Files that do not read are left to the input checks,
    whose messages name the column, row or file at fault."""
    size = sum(f.stat().st_size for f in files)
    merged = ddf.repartition(npartitions=max(1, min(ddf.npartitions, -(-size // parse_bytes(blocksize)))))
    if size > IN_MEMORY_BYTES:
        return merged
    try:
        return merged.persist(scheduler="threads")
    except Exception:  # a row or file the readers fail on: the input checks' scan meets it and names it
        return merged


def read_input(path: str | Path, fmt: str = "auto", dtype: dict[str, str] | None = None) -> dd.DataFrame:
    """:func:`read_table` for a file given by the user: also refuses a column whose name collides with the
    pipeline's own column names (sdc_tasks.reserved)."""
    ddf = read_table(path, fmt, dtype=dtype)
    for name in ddf.columns:
        role = reserved_role(name)
        if role:
            raise InputError(f"column {name!r} of {path} {role}: the pipeline uses such names for its own columns; "
                             "rename it")
    return ddf


def reader_reason(exc: Exception) -> str:
    """Why a reader failed, without the bytes at fault: the last line of its message (dask wraps the reader's
    error in its own) with anything it quotes withheld (a reader quotes the cell it could not parse), or for text
    that is not UTF-8 just that."""
    if isinstance(exc, UnicodeDecodeError):
        return "it holds bytes that are not UTF-8 text (save it as UTF-8)"
    return QUOTED.sub("'...'", str(exc).strip().splitlines()[-1].removeprefix("Original Message: "))


def check_files(path: Path, fmt: str) -> None:
    """Raise InputError naming the entry, file or column at fault unless ``path`` is a regular file or a directory
    of regular files (a FIFO, device or socket would block or never end) and its files read as one table with
    the columns they hold: a CSV file's header names each column once, all files of a dataset have the same
    columns of the same types, and every Parquet column has a type that passes through masking unchanged."""
    for entry in [path, *sorted(path.rglob("*"))] if path.is_dir() else [path]:
        if not (entry.is_file() or entry.is_dir()):
            raise InputError(f"input {entry} is not a regular file (a FIFO, device, socket or broken link): "
                             "refusing to read it")
    if fmt not in ("csv", "parquet"):
        raise InputError(f"unknown input format {fmt!r}: use csv or parquet")
    files = _dataset_files(path, fmt)
    columns = [_csv_header(f) if fmt == "csv" else _parquet_columns(f) for f in files]
    for f, cols in zip(files, columns):
        _check_names([name for name, _ in cols], f)
        if cols != columns[0]:
            raise InputError(f"{f} and {files[0]} are files of one dataset with different columns: "
                             f"{_difference(cols, columns[0])}")


def _dataset_files(path: Path, fmt: str) -> list[Path]:
    """The files a read of ``path`` opens: the file itself, the .csv files of a CSV directory, or every file of a
    Parquet dataset directory but hidden ones and ones whose names start with "_" (as pyarrow's discovery)."""
    if not path.is_dir():
        return [path]
    if fmt == "csv":
        return sorted(path.glob("*.csv"))
    return [f for f in sorted(path.rglob("*")) if f.is_file()
            and not any(part.startswith((".", "_")) for part in f.relative_to(path).parts)]


def corrupt_parquet_file(path: Path) -> tuple[Path, Exception] | None:
    """The first file of the Parquet file or dataset at ``path`` whose pages pyarrow cannot decode (a footer that
    reads but a corrupt page: only a read of the data finds it), with the error; None when all of them read. Each
    file is streamed batch by batch: memory for one batch at a time."""
    for f in _dataset_files(path, "parquet"):
        try:
            for _ in pq.ParquetFile(f).iter_batches():
                pass
        except Exception as exc:
            return f, exc
    return None


def _csv_header(path: Path) -> list[tuple[str, str]]:
    """(name, "") for each column of the first non-blank line of a CSV file (as pandas finds its header; a quoted
    name may span lines); only that line is read."""
    text = ""
    try:
        with open(path, "rb") as f:
            for line in f:
                text += line.decode("utf-8")
                if text.strip() and text.count('"') % 2 == 0:
                    break
        header = next(csv.reader([text]), None) if text.strip() else None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"cannot read {path} as csv: its header line is not UTF-8 CSV text "
                         f"({type(exc).__name__})") from None
    if header is None:
        raise InputError(f"input {path} is empty: a CSV file needs a header line naming its columns")
    return [(name, "") for name in header]


PASSED_THROUGH = (pa.types.is_integer, pa.types.is_floating, pa.types.is_boolean, pa.types.is_decimal,
                  pa.types.is_date32, pa.types.is_timestamp, pa.types.is_duration, pa.types.is_string,
                  pa.types.is_large_string)  # Parquet types that come out of masking as they went in


def _value_type(arrow_type: pa.DataType) -> pa.DataType:
    """The type of the values a column holds: a dictionary-encoded column's value type, else its own type."""
    return arrow_type.value_type if pa.types.is_dictionary(arrow_type) else arrow_type


def _decoded(ddf: dd.DataFrame, first: Path) -> dd.DataFrame:
    """``ddf`` with its dictionary-encoded columns (``first``: a file of the dataset, whose footer tells them),
    which a read gives as pandas categoricals, decoded to the type a plain column of their values reads as: the
    same values, masked and published as the plain column would be."""
    encoded = [f for f in pq.read_schema(first) if pa.types.is_dictionary(f.type)]
    if not encoded:
        return ddf
    plain = pa.table({f.name: pa.array([], f.type.value_type) for f in encoded}).to_pandas()
    return ddf.astype(dict(dd.from_pandas(plain, npartitions=1).dtypes))


def _parquet_columns(path: Path) -> list[tuple[str, str]]:
    """(name, type of its values) of each column of a Parquet file, from its footer (a dictionary-encoded column
    has its value type: it is read decoded); InputError naming a column whose type would not pass through masking
    unchanged (nested, binary, time of day, null type)."""
    try:
        schema = pq.read_schema(path)
    except Exception as exc:
        raise InputError(f"cannot read {path} as parquet: {reader_reason(exc)}") from None
    for field in schema:
        if not any(kind(_value_type(field.type)) for kind in PASSED_THROUGH):
            raise InputError(f"column {field.name!r} of {path} has Parquet type {field.type}, which sdc cannot "
                             "pass through unchanged (nested, binary, time-of-day and null-typed columns are "
                             "refused): write it as numbers, text, dates or timestamps")
    return [(field.name, str(_value_type(field.type))) for field in schema]


def _check_names(names: list[str], path: Path) -> None:
    """Raise InputError naming a column of ``path`` that has no name or whose name is taken twice (a reader
    would rename it)."""
    for i, name in enumerate(names):
        if not name.strip():
            raise InputError(f"column number {i + 1} of {path} has no name")
        if name in names[:i]:
            raise InputError(f"column {name!r} appears twice in {path}: give each column its own name")


def _difference(a: list[tuple[str, str]], b: list[tuple[str, str]]) -> str:
    """What first sets two different lists of (column name, type) apart: a column one of them lacks, else a
    column of another type, else a column at another place."""
    types_a, types_b = dict(a), dict(b)
    lacking = [n for n in types_a if n not in types_b] + [n for n in types_b if n not in types_a]
    if lacking:
        return f"column {lacking[0]!r} is in one of them only"
    retyped = [n for n in types_a if types_a[n] != types_b[n]]
    if retyped:
        name = retyped[0]
        return f"column {name!r} has type {types_a[name]} in one, {types_b[name]} in the other"
    return f"column {next(x for x, y in zip(a, b) if x != y)[0]!r} stands at another place"


class UniqueKeyLoader(yaml.SafeLoader):
    """yaml.SafeLoader that refuses a mapping naming one key twice (SafeLoader keeps the last silently)."""

    def construct_mapping(self, node, deep=False):
        """The mapping of ``node``; a ConstructorError naming the repeated key and both of its lines (no mark:
        the lines are in its problem)."""
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if not isinstance(key, (str, int, float, bool)):
                continue
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} appears twice (lines {seen[key]} and {line}): give each key once")
            seen[key] = line
        return super().construct_mapping(node, deep)


def yaml_document(path: str | Path, what: str, error: type[Exception]) -> Any:
    """The YAML document in the file at ``path``; ``error`` (naming ``what``: "spec", "grid") when the file is
    missing, is not valid YAML or maps one key twice in a mapping (:class:`UniqueKeyLoader`)."""
    p = Path(path)
    if not p.is_file():
        raise error(f"{what} file not found: {p}")
    try:
        return yaml.load(p.read_text(), Loader=UniqueKeyLoader)
    except yaml.YAMLError as exc:
        raise error(f"{what} file {p} is not valid YAML: {_yaml_reason(exc)}") from None


def _yaml_reason(exc: yaml.YAMLError) -> str:
    """What a YAML error says, on one line: its problem and the line it was met on."""
    problem, mark = getattr(exc, "problem", None), getattr(exc, "problem_mark", None)
    if problem is None:
        return " ".join(str(exc).split())
    return problem if mark is None else f"{problem} (line {mark.line + 1})"


def _with_ids(part: pd.DataFrame, offset: int, id_col: str) -> pd.DataFrame:
    """Prepend an int64 id column holding the global row position."""
    out = part.copy()
    out.insert(0, id_col, np.arange(offset, offset + len(part), dtype=np.int64))
    return out


def check_new_id(ddf: dd.DataFrame, id_col: str) -> None:
    """Raise InputError when ``ddf`` already has a column ``id_col``, which an id created from row positions would
    replace."""
    if id_col in ddf.columns:
        raise InputError(f"cannot create id column {id_col!r}: the input already has a column of that name")


def add_row_ids(ddf: dd.DataFrame, id_col: str, lengths: list[int] | None = None) -> dd.DataFrame:
    """``ddf`` with a first int64 column ``id_col`` holding the global row position (0-based); ``lengths``: the
    rows of each partition when known (else counted, a pass over the data)."""
    check_new_id(ddf, id_col)
    offsets = offsets_of(partition_lengths(ddf) if lengths is None else lengths)
    parts = [dask.delayed(_with_ids)(p, int(offsets[i]), id_col) for i, p in enumerate(ddf.to_delayed())]
    return dd.from_delayed(parts, meta=_with_ids(ddf._meta, 0, id_col), verify_meta=False)


def read_with_ids(path: str | Path, fmt: str, id_col: str, create_id: bool | None,
                  dtype: dict[str, str] | None = None) -> dd.DataFrame:
    """The file at ``path`` with ``id_col`` created from row positions when ``create_id`` (None: when the file
    has no such column)."""
    ddf = read_input(path, fmt, dtype=dtype)
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
    return [pq.ParquetFile(f).metadata.num_rows for f in sorted(Path(path).glob("*.parquet"))]


def read_checkpoint(path: str | Path, id_col: str, keep_partitions: bool) -> dd.DataFrame:
    """The Parquet checkpoint of an input file (``write_parquet`` of its first read), one partition per file as the
    input was read. ``id_col`` is created from row positions when the checkpoint lacks it (the input had none),
    from the files' row counts: no pass over the data. ``keep_partitions``: the input was CSV, whose reads never
    merge partitions, so neither do the checkpoint's (a Parquet read merges partitions when it reads few columns,
    as a Parquet input's read does)."""
    ddf = dd.read_parquet(str(path), index=False, split_row_groups=False)
    if id_col not in ddf.columns:
        return add_row_ids(ddf, id_col, parquet_row_counts(path))
    return dd.from_delayed(ddf.to_delayed(), meta=ddf._meta, verify_meta=False) if keep_partitions else ddf


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


def input_identity(path: str | Path, fmt: str) -> dict[str, tuple]:
    """The identity of each file a read of input ``path`` opens (symbolic links resolved), from its metadata
    alone, without opening it: {file: (device, inode, size, mtime_ns, ctime_ns)}. Any write to a file, its
    replacement, or a reset of its modification time changes one of them (the inode change time, ctime, is set
    by the system on every change and cannot be set back), so the check costs no read of the data."""
    files = _dataset_files(Path(path).resolve(), fmt)
    return {str(f): _file_identity(f) for f in files}


def _file_identity(path: Path) -> tuple:
    """(device, inode, size, mtime_ns, ctime_ns) of one file; Nones when it cannot be read."""
    try:
        info = path.stat()
    except OSError:
        return None, None, None, None, None
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns


def check_input_unchanged(path: str | Path, fmt: str, identity: dict[str, tuple]) -> None:
    """Raise InputError naming the first file of input ``path`` whose identity differs from ``identity`` (taken
    by :func:`input_identity` when the run validated it): changed, replaced, removed or added."""
    now = input_identity(path, fmt)
    changed = next((f for f in sorted({*identity, *now}) if identity.get(f) != now.get(f)), None)
    if changed is not None:
        raise InputError(f"input changed during the run: {changed}; nothing was published (run again on a "
                         "file that stays as it is)")


def tree_checksums(root: Path) -> dict[str, str]:
    """Return {relative path: sha256} for every file below ``root``, sorted by path."""
    return {
        str(f.relative_to(root)): file_sha256(f)
        for f in sorted(root.rglob("*"))
        if f.is_file()
    }


def json_text(obj) -> str:
    """``obj`` as indented, key-sorted, strict JSON: a NaN or an infinity raises ValueError instead of being
    written as the invalid tokens NaN / Infinity."""
    return json.dumps(obj, indent=2, sort_keys=True, default=_json_default, allow_nan=False)


def write_json(path: Path, obj: dict) -> Path:
    """Write ``obj`` as :func:`json_text` (nothing is written when it raises)."""
    path.write_text(json_text(obj) + "\n")
    return path


def _json_default(o):
    """JSON encoding for numpy scalars and paths."""
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")
