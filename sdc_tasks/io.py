"""Reading microdata (CSV or Parquet) as Dask collections and writing Parquet datasets (what is known of the files
without reading them, checksums and JSON are in ``sdc_tasks.files``; outputs are made safe by ``sdc_tasks.outputs``)."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
from dask.dataframe.io.csv import read_pandas
from dask.utils import parse_bytes

from sdc_tasks.blocking import offsets_of, partition_lengths
from sdc_tasks.errors import InputError
from sdc_tasks.files import (
    STATISTICAL_FORMATS,
    check_files,
    check_reserved_names,
    dataset_files,
    input_format,
    reader_reason,
)
from sdc_tasks.statistical_files import read_statistical

WHOLE_SAMPLE_BYTES = 16 * 2**20  # a CSV file up to this size has its column types inferred from every row


def _type_sample(path: Path) -> dict:
    """Dask's type-inference sample for a CSV file or directory: every row of a first file of at most
    WHOLE_SAMPLE_BYTES (a column whose decimals or text come late keeps its true type), else Dask's
    default, the first 10 rows of its first 256 kB."""
    first = min(path.glob("*.csv"), default=None) if path.is_dir() else path
    size = first.stat().st_size if first is not None else 0
    return {"sample": size + 1, "sample_rows": size + 1} if size <= WHOLE_SAMPLE_BYTES else {}


TWO_PARSERS_BYTES = 2**20  # a smaller CSV block is read by round_trip alone: a second parser costs more than it saves


def read_csv_block(source, **kwargs) -> pd.DataFrame:
    """``pd.read_csv(source, **kwargs)`` of one block of a CSV file (Dask's reader), about twice as fast where it
    reads decimals with ``float_precision="round_trip"`` (0.3 against 0.75 s for 1e5 x 13 values).

    Pandas reads the block with its fast float parser ("high": the same column types, doubles within an ulp or
    two), then pyarrow reads the float64 columns again: fast_float gives each decimal the nearest double, as
    round_trip does. Its doubles replace pandas' where the two parsers agree on every cell up to those ulps (the
    same missing values, infinities and numbers); where they do not, or pyarrow refuses a cell, pandas reads the
    block with round_trip, so the frame is always round_trip's, with its types and its errors. Dask's type sample
    (``nrows``) and blocks under TWO_PARSERS_BYTES (many small files) are read by pandas as asked."""
    if "nrows" in kwargs or kwargs.get("float_precision") != "round_trip" or _size(source) < TWO_PARSERS_BYTES:
        return pd.read_csv(source, **kwargs)
    frame = pd.read_csv(source, **{**kwargs, "float_precision": "high"})
    floats = [name for name, dtype in frame.dtypes.items() if dtype == np.float64]
    source.seek(0)
    doubles = _nearest_doubles(source, frame, floats, kwargs) if floats else frame
    if doubles is None:
        source.seek(0)
        return pd.read_csv(source, **kwargs)
    for name in floats:
        frame[name] = doubles[name].to_numpy()
    return frame


def _size(source) -> int:
    """Bytes from the start of a seekable ``source`` to its end; it is left at its start."""
    size = source.seek(0, 2)
    source.seek(0)
    return size


def _nearest_doubles(source, frame: pd.DataFrame, floats: list[str], kwargs: dict) -> pd.DataFrame | None:
    """The block read by pyarrow with ``floats`` as float64, when its columns are ``frame``'s and its doubles are
    within two ulps of ``frame``'s in every cell of ``floats`` (NaN where NaN); else None."""
    options = {k: v for k, v in kwargs.items() if k not in ("float_precision", "dtype")}
    try:
        exact = pd.read_csv(source, engine="pyarrow", dtype={name: "float64" for name in floats}, **options)
    except Exception:  # a cell pyarrow does not read as a number, or an option it lacks: round_trip reads the block
        return None
    if list(exact.columns) != list(frame.columns) or len(exact) != len(frame):
        return None
    near = frame[floats].to_numpy(), exact[floats].to_numpy(dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        close = (near[0] == near[1]) | (np.abs(near[0] - near[1]) <= 2 * np.spacing(np.abs(near[1])))
    return exact if (close | (np.isnan(near[0]) & np.isnan(near[1]))).all() else None


def read_table(path: str | Path, fmt: str = "auto", blocksize: int | str = "64MB",
               dtype: dict[str, str] | None = None, labels: bool = False) -> dd.DataFrame:
    """Return the file or dataset at ``path`` as a Dask DataFrame (partitions follow files/row groups, never workers);
    ``dtype`` forces the type of CSV columns (default: inferred); ``labels``: an SPSS, Stata or SAS file's labelled
    variables read as their value labels rather than their codes. The files are checked first
    (:func:`check_files`), so Dask never opens a FIFO or meets a header or schema it would change or fail on."""
    p = Path(path)
    fmt = input_format(p, fmt)
    check_files(p, fmt)
    if fmt in STATISTICAL_FORMATS:
        return read_statistical(p, fmt, labels)
    try:
        if fmt == "parquet":
            ddf = _decoded(dd.read_parquet(str(p), index=False), dataset_files(p, fmt)[0])  # index stays a column
        else:
            pattern = str(p / "*.csv") if p.is_dir() else str(p)
            ddf = read_pandas(read_csv_block, pattern, blocksize=blocksize, dtype=dtype,
                              float_precision="round_trip", **_type_sample(p))
        if p.is_dir() and ddf.npartitions > MANY_FILES:
            ddf = _merged_small_files(ddf, dataset_files(p, fmt), blocksize)
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


def read_input(path: str | Path, fmt: str = "auto", dtype: dict[str, str] | None = None,
               labels: bool = False) -> dd.DataFrame:
    """:func:`read_table` for a file given by the user: also refuses a column whose name collides with the
    pipeline's own column names (sdc_tasks.reserved)."""
    ddf = read_table(path, fmt, dtype=dtype, labels=labels)
    check_reserved_names(ddf.columns, path)
    return ddf


def corrupt_parquet_file(path: Path) -> tuple[Path, Exception] | None:
    """The first file of the Parquet file or dataset at ``path`` whose pages pyarrow cannot decode (a footer that
    reads but a corrupt page: only a read of the data finds it), with the error; None when all of them read. Each
    file is streamed batch by batch: memory for one batch at a time."""
    for f in dataset_files(path, "parquet"):
        try:
            for _ in pq.ParquetFile(f).iter_batches():
                pass
        except Exception as exc:
            return f, exc
    return None


def _decoded(ddf: dd.DataFrame, first: Path) -> dd.DataFrame:
    """``ddf`` with its dictionary-encoded columns (``first``: a file of the dataset, whose footer tells them),
    which a read gives as pandas categoricals, decoded to the type a plain column of their values reads as: the
    same values, masked and published as the plain column would be."""
    encoded = [f for f in pq.read_schema(first) if pa.types.is_dictionary(f.type)]
    if not encoded:
        return ddf
    plain = pa.table({f.name: pa.array([], f.type.value_type) for f in encoded}).to_pandas()
    return ddf.astype(dict(dd.from_pandas(plain, npartitions=1).dtypes))


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


def scratch_options(meta: pd.DataFrame) -> dict:
    """pyarrow's writer options for Parquet a run writes for itself and reads back (the input's checkpoint, a
    step's blocks, masked values and intermediate output, the evaluation's pairs), never published: LZ4, and
    dictionary pages only for the columns that are not numbers (text and categories, whose values repeat). 1e7
    generated records of 14 numeric columns on two workers: written in 3.0-3.5 s against 6.5-7.7 s with the
    default Snappy and dictionaries, read as fast, 12 % smaller (docs/performance.md)."""
    text = [str(c) for c in meta.columns if not pd.api.types.is_numeric_dtype(meta[c].dtype)]
    return {"compression": "lz4", "use_dictionary": text or False}


def write_scratch_parquet(ddf: dd.DataFrame, path: str | Path) -> None:
    """:func:`write_parquet` with the options of Parquet a run reads back itself (:func:`scratch_options`)."""
    write_parquet(ddf, path, **scratch_options(ddf._meta))


def write_parquet(ddf: dd.DataFrame, path: str | Path, **options) -> None:
    """Write a Dask DataFrame as a Parquet dataset: one file per partition, deterministic names, no index;
    ``options``: pyarrow's writer options (compression, use_dictionary, ...).

    ``path`` is a directory this run owns (a stage's scratch or output): the Parquet files already there, such
    as those of a failed attempt that is being retried, are removed first; the directory itself is kept (its
    permissions and the tool's marker file stay).
    """
    for stale in Path(path).glob("*.parquet"):
        stale.unlink()
    ddf.to_parquet(str(path), write_index=False, name_function=lambda i: f"part-{i:05d}.parquet",
                   write_metadata_file=False, **options)


def _csv_numbers(values: np.ndarray) -> pa.Array:
    """One numeric column as the text pandas' ``to_csv`` writes: integers as they are, a float in its shortest
    round-trip form with ``.0`` after an integral one written without an exponent (as ``repr``), NaN as an empty
    cell."""
    column = pa.array(values, from_pandas=True)
    if not pa.types.is_floating(column.type):
        return column
    text = pc.cast(column, pa.string())
    whole = np.isfinite(values) & (values == np.floor(values))
    if not whole.any():
        return text
    plain = pc.and_(pa.array(whole), pc.invert(pc.match_substring(text, "e")))
    return pc.if_else(plain, pc.binary_join_element_wise(text, ".0", ""), text)


def write_csv(frame: pd.DataFrame, path: str | Path) -> None:
    """``frame`` as a CSV file without its index, the values read back as pandas' ``to_csv`` writes them; a frame
    of numbers only (two or more integer and float64 columns) through Arrow's writer, ten times quicker than pandas'
    (1e5 x 14: about 0.1 s against 1.3 s), any other through pandas."""
    numbers = all(isinstance(t, np.dtype) and (t.kind in "iu" or t == np.float64) for t in frame.dtypes)
    if frame.columns.has_duplicates or len(frame.columns) < 2 or not numbers:  # one column: pandas quotes an empty cell
        frame.to_csv(path, index=False)
        return
    header = io.StringIO()
    csv.writer(header, lineterminator="\n").writerow(frame.columns)
    table = pa.table({f"c{j}": _csv_numbers(frame[c].to_numpy()) for j, c in enumerate(frame.columns)})
    with open(path, "wb") as f:
        f.write(header.getvalue().encode())
        pa_csv.write_csv(table, f, pa_csv.WriteOptions(include_header=False, quoting_style="none"))


def parquet_files(path: str | Path) -> list[Path]:
    """The files of a Parquet dataset written by ``write_parquet``, in the order of its partitions (their names)."""
    return sorted(Path(path).glob("*.parquet"))


def parquet_row_counts(path: str | Path) -> list[int]:
    """Rows of each file of a Parquet dataset written by ``write_parquet``, from the footers alone."""
    return [pq.ParquetFile(f).metadata.num_rows for f in parquet_files(path)]


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

