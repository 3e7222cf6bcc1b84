"""Pairing a masked file with its original: by id (masking methods keep ids), by row position (files without
ids) or, for synthetic and re-sized files, with the nearest original record (post_masking_optimization.txt
sec. 2). A pairing is a Dask frame holding each original variable beside its masked column (suffixed
MASKED_SUFFIX), one row per paired record. The paper's setup (pairing "paper") gives each masked record the
id of its nearest original record (:func:`with_nearest_original_ids`) and then pairs by id.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from scipy.spatial import cKDTree

from sdc_tasks.errors import InputError
from sdc_tasks.io import add_row_ids, parquet_files, parquet_row_counts, scratch_options, write_scratch_parquet
from sdc_tasks.kdtree import kd_tree, nearest_records
from sdc_tasks.reserved import MASKED_SUFFIX
from sdc_tasks.scheduling import shuffle_method, workers_hold

PAIR_VALUE_BYTES = 8
"""Bytes of one value of a paired record (an id or a variable's original or masked value, 64-bit numbers)."""


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


def _side_by_side(o: pd.DataFrame, m: pd.DataFrame, id_col: str, variables: list[str]) -> pd.DataFrame | None:
    """Two partitions with the same ids in the same order as one frame (masked columns suffixed); None when their
    ids differ."""
    if not _same_ids(o, m, id_col):
        return None
    out = o[[id_col, *variables]].reset_index(drop=True)
    for v in variables:
        out[v + MASKED_SUFFIX] = m[v].to_numpy()
    return out


def _is_frame(part: pd.DataFrame | None) -> bool:
    """Whether a zipped partition was paired (its ids matched)."""
    return part is not None


def _written(part: pd.DataFrame | None, path: Path) -> bool:
    """Write a zipped partition to the Parquet file ``path``; False, writing nothing, when its ids did not match."""
    if part is None:
        return False
    part.to_parquet(path, index=False, **scratch_options(part))
    return True


def pairs_fit(records: int, columns: int) -> bool:
    """Whether the workers keep a pairing of ``records`` records on ``columns`` columns (the id and the variables:
    an id and two values a variable) within a quarter of their memory (``scheduling.workers_hold``)."""
    return workers_hold(records * (2 * columns - 1) * PAIR_VALUE_BYTES)


def pairs_home(work: Path, original: dd.DataFrame, columns: list[str], records: int) -> Path | None:
    """Where a pairing of ``records`` records on ``columns`` (the id and the variables) is held: in the workers'
    memory (None) when it fits there (:func:`pairs_fit`) or when a column of the original is not numeric (a
    Parquet round trip may change the type of text); otherwise a new directory in ``work`` for its Parquet
    files."""
    numeric = all(pd.api.types.is_numeric_dtype(original._meta[c].dtype) for c in columns)
    if not numeric or pairs_fit(records, len(columns)):
        return None
    return Path(tempfile.mkdtemp(prefix="pairs.", dir=work))


def held(frame: dd.DataFrame, scratch: Path | None) -> dd.DataFrame:
    """``frame`` computed once for the passes that follow: persisted in the workers' memory, or with ``scratch``
    written there as Parquet and read back by each pass (only the columns a pass selects)."""
    if scratch is None:
        return frame.persist()
    write_scratch_parquet(frame, scratch)
    return _read_pairs(scratch)


def _pairs_file(path: str, columns: list[str] | None = None) -> pd.DataFrame:
    """The pairs of one Parquet file, only ``columns`` when given (read and converted once: Dask's Parquet reader
    selects the columns of the frame it read again, copying it twice)."""
    return pq.read_table(path, columns=columns).to_pandas()


def _read_pairs(scratch: Path) -> dd.DataFrame:
    """The pairs written to ``scratch`` as a Dask frame, a partition per file in the order of their numbers; a pass
    that selects columns reads only those (the reader takes Dask's column projection)."""
    files = sorted(scratch.glob("part-*.parquet"), key=lambda f: (len(f.name), f.name))
    meta = pq.read_schema(files[0]).empty_table().to_pandas()
    return dd.from_map(_pairs_file, [str(f) for f in files], meta=meta, enforce_metadata=False)


def _file_ids(path: str, id_col: str, offset: int | None) -> pa.Array:
    """The ids of a Parquet file: its id column or, with ``offset``, the row positions from there (as
    ``io.read_checkpoint`` gives a file without ids)."""
    if offset is None:
        return pq.read_table(path, columns=[id_col]).column(0).combine_chunks()
    return pa.array(np.arange(offset, offset + pq.ParquetFile(path).metadata.num_rows, dtype=np.int64))


def _same_id_files(original: str, masked: str, id_col: str, offset: int | None) -> bool:
    """Whether two Parquet files hold the same ids in the same order (their id columns alone read; ``offset``: see
    :func:`_file_ids`)."""
    return _file_ids(original, id_col, offset).equals(_file_ids(masked, id_col, None))


def _zipped_files(files: tuple[str, str], offset: int | None, id_col: str, variables: list[str],
                  columns: list[str] | None = None) -> pd.DataFrame:
    """The pairs of an original and a masked Parquet file holding the same ids in the same order: only ``columns``
    when given (the original's columns read from the first file, the suffixed masked ones from the second; the ids,
    with ``offset``, the original's row positions)."""
    wanted = list(columns) if columns is not None else [id_col, *variables, *(v + MASKED_SUFFIX for v in variables)]
    masked = [c for c in wanted if c.endswith(MASKED_SUFFIX)]
    own = pq.read_table(files[0], columns=[c for c in wanted if c not in masked and (offset is None or c != id_col)])
    theirs = pq.read_table(files[1], columns=[c.removesuffix(MASKED_SUFFIX) for c in masked])
    values = {**{c: own.column(c).to_pandas() for c in own.column_names},
              **{c + MASKED_SUFFIX: theirs.column(c).to_pandas() for c in theirs.column_names}}
    if id_col in wanted and id_col not in values:
        values[id_col] = _file_ids(files[0], id_col, offset).to_pandas()
    return pd.DataFrame({c: values[c] for c in wanted}, index=pd.RangeIndex(pq.ParquetFile(files[1]).metadata.num_rows))


def zipped_files(sources: tuple[Path, Path], id_col: str, variables: list[str]) -> dd.DataFrame | None:
    """The pairs of two Parquet datasets (``io.write_parquet``'s: the original's checkpoint and a release's
    output) read from them side by side, each pass reading only the columns it selects, where their files hold the
    same ids in the same order file by file (checked on their id columns, one pass; an original without ids has its
    row positions, as ``io.read_checkpoint`` reads it); otherwise None. Nothing is written: a pairing too large for
    the workers' memory then costs no copy of both files on disk (216 bytes a record for 13 variables, a fifth of a
    release's disk at its peak)."""
    files = [[str(f) for f in parquet_files(s)] if Path(s).is_dir() else [] for s in sources]
    if not files[0] or len(files[0]) != len(files[1]):
        return None
    empty = [pq.read_schema(f[0]).empty_table().to_pandas() for f in files]
    if any(c not in e.columns for e in empty for c in variables) or id_col not in empty[1].columns:
        return None
    offsets: list = [None] * len(files[0])
    if id_col not in empty[0].columns:
        offsets = [int(o) for o in np.cumsum([0, *parquet_row_counts(sources[0])])[:-1]]
        empty[0].insert(0, id_col, pd.Series(dtype=np.int64))
    if not all(dask.compute(*[dask.delayed(_same_id_files)(o, m, id_col, at)
                              for o, m, at in zip(*files, offsets)])):
        return None
    return dd.from_map(_zipped_files, list(zip(*files)), offsets, id_col=id_col, variables=variables,
                       meta=_side_by_side(empty[0], empty[1], id_col, variables), enforce_metadata=False)


def paired(original: dd.DataFrame, masked: dd.DataFrame, id_col: str, variables: list[str],
           scratch: Path | None = None, sources: tuple[Path, Path] | None = None) -> dd.DataFrame:
    """Original and masked values side by side, one row per id present in both (masked columns suffixed), held
    (:func:`held`: persisted, or written to ``scratch``, :func:`pairs_home`).

    When both files have the same partitions with the same ids in the same order (a release's output against
    its input), partitions are zipped; otherwise the files are joined on the id (a shuffle). The ids are checked
    on the very partitions that are zipped: Dask's Parquet reader may fuse the partitions of a column subset, and
    not alike for two files. ``sources``: the Parquet datasets the two frames were read from
    (``io.read_checkpoint``, ``io.read_table``), whose files, where they zip (:func:`zipped_files`), a pairing kept
    out of memory reads instead of writing the pairs to ``scratch``."""
    if scratch is not None and sources is not None:
        lazy = zipped_files(sources, id_col, variables)
        if lazy is not None:
            return lazy
    columns = [id_col, *variables]
    originals, maskeds = original[columns].to_delayed(), masked[columns].to_delayed()
    if len(originals) == len(maskeds):
        zipped = [dask.delayed(_side_by_side)(o, m, id_col, variables) for o, m in zip(originals, maskeds)]
        if scratch is None:
            parts = dask.persist(*zipped)
            if all(dask.compute(*[dask.delayed(_is_frame)(p) for p in parts])):
                return dd.from_delayed(list(parts), meta=_side_by_side(original._meta, masked._meta, id_col,
                                                                       variables), verify_meta=False)
        elif all(dask.compute(*[dask.delayed(_written)(p, scratch / f"part-{i:05d}.parquet")
                                for i, p in enumerate(zipped)])):
            return _read_pairs(scratch)
    m = masked[columns].rename(columns={v: v + MASKED_SUFFIX for v in variables})
    return held(original[columns].merge(m, on=id_col, how="inner", shuffle_method=shuffle_method()), scratch)


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


def record_count(frame: dd.DataFrame):
    """Delayed number of records of a collection, counted on none of its columns: a Parquet file's records are
    counted from its files' row counts, not read (1e7 records in 40 files: 0.06 s instead of 0.8-1.6 s; Dask may
    then read several files in one task, which the sum does not see)."""
    return dask.delayed(sum)([dask.delayed(len)(part) for part in frame[[]].to_delayed()])


def nearest_original_rows(original: np.ndarray, masked: np.ndarray, center: np.ndarray,
                          scale: np.ndarray) -> np.ndarray:
    """Row of each masked record's nearest original record c(i): d-dimensional Euclidean distance on values
    standardized with ``center`` and ``scale`` (post_masking_optimization.txt sec. 2), ties to the lowest
    original row (the exact k-d tree of sdc_tasks.kdtree)."""
    return nearest_records(kd_tree((original - center) / scale), (masked - center) / scale)


def _ids_of_nearest(part: pd.DataFrame, original: np.ndarray, ids: np.ndarray, variables: list[str],
                    center: np.ndarray, scale: np.ndarray, id_col: str) -> pd.DataFrame:
    """A copy of one masked partition whose ids are those of each record's nearest original record."""
    out = part.copy()
    rows = nearest_original_rows(original, part[variables].to_numpy(np.float64), center, scale)
    out[id_col] = ids[rows]
    return out


def _concat_ids(parts: list[pd.DataFrame], id_col: str) -> np.ndarray:
    """The ids of all partitions as one array."""
    return pd.concat(parts, ignore_index=True)[id_col].to_numpy()


def with_nearest_original_ids(original: dd.DataFrame, masked: dd.DataFrame, id_col: str, variables: list[str],
                              center: np.ndarray, scale: np.ndarray) -> dd.DataFrame:
    """``masked`` with each record's id replaced by that of its nearest original record c(i) (the paper's
    correspondence, post_masking_optimization.txt sec. 2: IL1, ID and correct linkage are computed against
    c(i)); several masked records may then share an id. The original's values are gathered once."""
    values = dask.delayed(_concat_values)(original[variables].to_delayed(), variables)
    ids = dask.delayed(_concat_ids)(original[[id_col]].to_delayed(), id_col)
    parts = [dask.delayed(_ids_of_nearest)(part, values, ids, variables, center, scale, id_col)
             for part in masked.to_delayed()]
    return dd.from_delayed(parts, meta=masked._meta, verify_meta=False)
