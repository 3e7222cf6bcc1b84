"""Files of the statistical packages agencies hold their microdata in: SPSS (.sav, .zsav), Stata (.dta), SAS
(.sas7bdat, and the transport format .xpt), read and written through pyreadstat (ReadStat).

A file is read as Dask partitions of at most ``CHUNK_ROWS`` records, each partition a read of its own row range
(``row_offset``, ``row_limit``), so no task holds the whole file; a file whose header does not give its number
of records (some transport files) is one partition. Value labels (code -> label per variable) are read from the
header: a file is read as its codes (the default; the labels travel beside the data, into the release's
manifest and back into a written file) or as its labels (``value_labels: labels``: a labelled variable's codes
replaced by their labels, so categorical keys and recodes name labels). Text columns are read as
``string[pyarrow]``, as Dask reads CSV text.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dask
import dask.dataframe as dd
import pandas as pd

from sdc_tasks.errors import InputError

READERS = {"sav": "read_sav", "dta": "read_dta", "sas7bdat": "read_sas7bdat", "xpt": "read_xport"}
"""pyreadstat's reader of each input format (pyreadstat is imported where a file of these formats is read)."""
WRITERS = {".sav": "write_sav", ".zsav": "write_sav", ".dta": "write_dta", ".xpt": "write_xport"}
"""Output suffixes a masked file can be written back as, with pyreadstat's writer (pyreadstat writes no
.sas7bdat: use .xpt for SAS)."""
CHUNK_ROWS = 500_000
TEXT_DTYPE = "string[pyarrow]"


def _pyreadstat(name: str):
    """pyreadstat's function ``name``, imported on first use: about 0.14 s that a CSV or Parquet run never pays."""
    import pyreadstat

    return getattr(pyreadstat, name)


def _header(path: Path, fmt: str):
    """The file's metadata (no records read); InputError naming the file when ReadStat cannot read it."""
    try:
        return _pyreadstat(READERS[fmt])(str(path), metadataonly=True)[1]
    except Exception as exc:
        raise InputError(f"cannot read {path} as {fmt}: {type(exc).__name__} (ReadStat)") from None


def statistical_columns(path: Path, fmt: str) -> list[tuple[str, str]]:
    """(name, ReadStat type) of each column of the file, from its header."""
    meta = _header(path, fmt)
    return [(name, meta.readstat_variable_types.get(name, "")) for name in meta.column_names]


def value_labels(path: str | Path, fmt: str) -> dict[str, dict[str, str]]:
    """{variable: {code as text: label}} of the file's labelled variables (JSON-ready)."""
    meta = _header(Path(path), fmt)
    return {v: {_code_text(code): str(label) for code, label in labels.items()}
            for v, labels in (meta.variable_value_labels or {}).items()}


def _code_text(code: Any) -> str:
    """A code as text: an integer-valued float without its ".0"."""
    return str(int(code)) if isinstance(code, float) and code.is_integer() else str(code)


def _chunk(path: str, fmt: str, offset: int, rows: int, labels: bool) -> pd.DataFrame:
    """Records offset..offset+rows-1 of the file (``rows`` 0: all of them), codes or labels (a transport file
    holds no labels), text as Dask reads it."""
    formats = {"apply_value_formats": labels, "formats_as_category": False} if fmt != "xpt" else {}
    frame = _pyreadstat(READERS[fmt])(path, row_offset=offset, row_limit=rows, **formats)[0]
    text = [c for c in frame.columns if frame[c].dtype == object]
    return frame.astype({c: TEXT_DTYPE for c in text}) if text else frame


def read_statistical(path: Path, fmt: str, labels: bool = False, chunk_rows: int = CHUNK_ROWS) -> dd.DataFrame:
    """The file as a Dask DataFrame of partitions of at most ``chunk_rows`` records, in file order."""
    meta = _header(path, fmt)
    n = meta.number_rows
    try:
        empty = _chunk(str(path), fmt, 0, 1, labels).iloc[:0]
    except Exception as exc:
        raise InputError(f"cannot read {path} as {fmt}: {type(exc).__name__} (ReadStat)") from None
    if n is None or n <= chunk_rows:
        spans = [(0, 0)]
    else:
        spans = [(start, min(chunk_rows, n - start)) for start in range(0, n, chunk_rows)]
    parts = [dask.delayed(_chunk)(str(path), fmt, start, rows, labels) for start, rows in spans]
    return dd.from_delayed(parts, meta=empty, verify_meta=False)


def write_statistical(frame: pd.DataFrame, path: Path, suffix: str,
                      labels: dict[str, dict[str, str]] | None = None) -> None:
    """Write ``frame`` to ``path`` as the statistical-package format ``suffix`` names (WRITERS), with the value
    labels of the variables whose values are still the codes they label (a variable recoded to other values
    loses them; the transport format .xpt holds none)."""
    out = frame.astype({c: object for c in frame.columns if pd.api.types.is_string_dtype(frame[c].dtype)})
    kept = {}
    for variable, table in (labels or {}).items():
        if variable in out and pd.api.types.is_numeric_dtype(out[variable].dtype):
            codes = {float(code): label for code, label in table.items() if _is_number(code)}
            if set(out[variable].dropna().unique()) <= set(codes):
                kept[variable] = codes
    options = {"variable_value_labels": kept} if kept and suffix != ".xpt" else {}
    _pyreadstat(WRITERS[suffix])(out, str(path), **options)


def _is_number(text: str) -> bool:
    """Whether a code's text is a number."""
    try:
        float(text)
    except ValueError:
        return False
    return True
