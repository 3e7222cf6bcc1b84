"""What is known of input files without reading their records: the format of a file or dataset directory, the
checks of its entries and of its header or footer (the columns it holds), identities and checksums of files, and
the text formats of specs and results (YAML in, strict JSON out). Light on purpose (no Dask, no pandas; pyarrow
imported when a Parquet footer is read): a spec or path error answers before anything heavy is imported (``sdc
validate``, the preflight of ``sdc release``), and ``sdc --help`` stays quick."""

from __future__ import annotations

import csv
import hashlib
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from sdc_tasks.errors import InputError
from sdc_tasks.reserved import reserved_role

if TYPE_CHECKING:
    import pyarrow as pa

STATISTICAL_SUFFIXES = {".sav": "sav", ".zsav": "sav", ".dta": "dta", ".sas7bdat": "sas7bdat", ".xpt": "xpt"}
"""The statistical packages' file formats (read by ``sdc_tasks.statistical_files``), by suffix."""
STATISTICAL_FORMATS = tuple(dict.fromkeys(STATISTICAL_SUFFIXES.values()))
"""The statistical packages' formats: sav, dta, sas7bdat, xpt."""
FORMATS = ("csv", "parquet", *STATISTICAL_FORMATS)


def detect_format(path: str | Path) -> str:
    """Return the format of a file or a dataset directory: "csv", "parquet", or a statistical package's ("sav",
    "dta", "sas7bdat", "xpt")."""
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
    if suffix in STATISTICAL_SUFFIXES:
        return STATISTICAL_SUFFIXES[suffix]
    raise InputError(f"cannot tell the format of {p}: use a .csv or .parquet file, a Parquet dataset directory or "
                     "an SPSS (.sav), Stata (.dta) or SAS (.sas7bdat, .xpt) file")


def input_format(path: str | Path, fmt: str) -> str:
    """The format a read of ``path`` uses: ``fmt``, or for "auto" the one :func:`detect_format` tells."""
    return detect_format(path) if fmt == "auto" else fmt


QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")  # text a reader's message quotes (the cell it could not parse)


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
    if not path.exists():
        raise InputError(f"input not found: {path}")
    for entry in [path, *sorted(path.rglob("*"))] if path.is_dir() else [path]:
        if not (entry.is_file() or entry.is_dir()):
            raise InputError(f"input {entry} is not a regular file (a FIFO, device, socket or broken link): "
                             "refusing to read it")
    if fmt not in FORMATS:
        raise InputError(f"unknown input format {fmt!r}: use {', '.join(FORMATS)}")
    if path.is_dir() and fmt not in ("csv", "parquet"):
        raise InputError(f"input {path} is a directory: a {fmt} input is one file")
    files = dataset_files(path, fmt)
    columns = [file_columns(f, fmt) for f in files]
    for f, cols in zip(files, columns):
        _check_names([name for name, _ in cols], f)
        if cols != columns[0]:
            raise InputError(f"{f} and {files[0]} are files of one dataset with different columns: "
                             f"{_difference(cols, columns[0])}")


def file_columns(path: Path, fmt: str) -> list[tuple[str, str]]:
    """(name, type) of each column of one file of the input, from its header or footer."""
    if fmt == "csv":
        return _csv_header(path)
    if fmt == "parquet":
        return _parquet_columns(path)
    from sdc_tasks.statistical_files import statistical_columns  # pyreadstat and pandas only for such files

    return statistical_columns(path, fmt)


def dataset_files(path: Path, fmt: str) -> list[Path]:
    """The files a read of ``path`` opens: the file itself, the .csv files of a CSV directory, or every file of a
    Parquet dataset directory but hidden ones and ones whose names start with "_" (as pyarrow's discovery)."""
    if not path.is_dir():
        return [path]
    if fmt == "csv":
        return sorted(path.glob("*.csv"))
    return [f for f in sorted(path.rglob("*")) if f.is_file()
            and not any(part.startswith((".", "_")) for part in f.relative_to(path).parts)]


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


PASSED_THROUGH = ("is_integer", "is_floating", "is_boolean", "is_decimal", "is_date32", "is_timestamp", "is_duration",
                  "is_string", "is_large_string")
"""The ``pyarrow.types`` tests of the Parquet types that come out of masking as they went in."""


def _value_type(arrow_type: pa.DataType) -> pa.DataType:
    """The type of the values a column holds: a dictionary-encoded column's value type, else its own type."""
    import pyarrow as pa

    return arrow_type.value_type if pa.types.is_dictionary(arrow_type) else arrow_type


def _parquet_columns(path: Path) -> list[tuple[str, str]]:
    """(name, type of its values) of each column of a Parquet file, from its footer (a dictionary-encoded column
    has its value type: it is read decoded); InputError naming a column whose type would not pass through masking
    unchanged (nested, binary, time of day, null type)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(path)
    except Exception as exc:
        raise InputError(f"cannot read {path} as parquet: {reader_reason(exc)}") from None
    for field in schema:
        if not any(getattr(pa.types, kind)(_value_type(field.type)) for kind in PASSED_THROUGH):
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
    files = dataset_files(Path(path).resolve(), fmt)
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
    import numpy as np  # loaded already when ``o`` is one of its scalars

    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def check_columns(available, columns: list[str], what: str) -> None:
    """Raise InputError naming the first column of ``columns`` missing from the column names ``available``."""
    missing = [c for c in columns if c not in available]
    if missing:
        raise InputError(f"{what} has no column {missing[0]!r} (columns: {', '.join(map(str, available))})")


def check_reserved_names(columns, path: str | Path) -> None:
    """Raise InputError naming a column of the input at ``path`` whose name collides with the pipeline's own
    column names (sdc_tasks.reserved)."""
    for name in columns:
        role = reserved_role(name)
        if role:
            raise InputError(f"column {name!r} of {path} {role}: the pipeline uses such names for its own columns; "
                             "rename it")


def input_columns(path: str | Path, fmt: str = "auto") -> list[str]:
    """The column names of the input at ``path``, from the header of its first CSV file or the footer of its first
    Parquet file, after :func:`check_files` (no record is read); InputError naming the file or column at fault, as
    ``sdc_tasks.io.read_input`` would raise it."""
    p = Path(path)
    fmt = input_format(p, fmt)
    check_files(p, fmt)
    first = dataset_files(p, fmt)
    if not first:
        raise InputError(f"input directory {p} holds no {fmt} files")
    columns = [name for name, _ in file_columns(first[0], fmt)]
    if not columns:
        raise InputError(f"input {p} has no columns")
    check_reserved_names(columns, p)
    return columns
