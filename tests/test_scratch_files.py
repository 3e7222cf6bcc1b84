"""Parquet a run writes for itself and reads back (checkpoints, a step's blocks and masked values, the evaluation's
pairs): every kind of column read back as written, LZ4, dictionary pages only where values are not numbers."""

from __future__ import annotations

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from sdc_tasks.io import read_table, scratch_options, write_scratch_parquet


def _frame() -> pd.DataFrame:
    """Ids, numbers with a missing value, booleans, text with a missing value and a category column."""
    n = 50
    return pd.DataFrame({"record_id": np.arange(n, dtype=np.int64), "income": np.linspace(-3.5, 1e9, n),
                         "count": pd.array([None, *range(1, n)], dtype="Int64"), "owner": np.arange(n) % 3 == 0,
                         "region": [None if i == 7 else f"r{i % 4}" for i in range(n)],
                         "sector": pd.Categorical([f"s{i % 5}" for i in range(n)])})


def test_scratch_options_keep_dictionaries_for_text_and_categories_only():
    assert scratch_options(_frame()) == {"compression": "lz4", "use_dictionary": ["region", "sector"]}
    assert scratch_options(_frame()[["record_id", "income", "owner"]]) == {"compression": "lz4",
                                                                          "use_dictionary": False}


def test_scratch_parquet_reads_back_what_was_written(tmp_path, sync_dask):
    frame = _frame()
    write_scratch_parquet(dd.from_pandas(frame, npartitions=3), tmp_path)
    files = sorted(tmp_path.glob("*.parquet"))
    assert len(files) == 3
    back = read_table(tmp_path, "parquet").compute().reset_index(drop=True)
    text = ["region", "sector"]
    pd.testing.assert_frame_equal(back.drop(columns=text), frame.drop(columns=text))
    for c in text:  # Dask reads text as Arrow strings
        assert [None if pd.isna(v) else v for v in back[c]] == frame[c].tolist()
    group = pq.ParquetFile(files[0]).metadata.row_group(0)
    columns = {group.column(j).path_in_schema: group.column(j) for j in range(group.num_columns)}
    assert {c.compression for c in columns.values()} == {"LZ4"}
    dictionary = {name for name, c in columns.items() if c.dictionary_page_offset is not None}
    assert dictionary == {"region", "sector"}
