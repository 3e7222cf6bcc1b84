"""A shuffle through files that each receiving task reads when it runs.

Each sending task writes one Arrow IPC file holding one record batch per destination (the rows bound there, in
their order, possibly none), and the task of destination ``j`` reads batch ``j`` of every sender's file. Nothing
reaches a destination before its task runs: a chain of receiving tasks that run one after another (the rank fold,
``sdc_tasks.masking.fold``) holds one destination's rows at a time, where a Dask shuffle hands every destination's
rows to the workers as soon as the shuffle ends, to be held until the chain reaches them. The files live in a
directory of the run that every worker reaches (a step's work directory).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from sdc_tasks.outputs import replaced_whole


def write_batches(frame: pd.DataFrame, destinations: np.ndarray, count: int, path: Path) -> int:
    """Write the rows of ``frame`` to the IPC file ``path`` as ``count`` record batches, batch ``j`` holding the rows
    whose destination is ``j`` in their order; atomically, so that a retried task replaces the file whole. Returns
    the rows written."""
    order = np.argsort(destinations.astype(np.min_scalar_type(max(count - 1, 0))), kind="stable")  # radix, to 16 bits
    bounds = np.searchsorted(destinations[order], np.arange(count + 1))
    batch = pa.RecordBatch.from_pandas(frame.iloc[order], preserve_index=False)
    with replaced_whole(path) as partial, pa.OSFile(str(partial), "wb") as sink, \
            pa.ipc.new_file(sink, batch.schema) as writer:
        for j in range(count):
            writer.write_batch(batch.slice(bounds[j], bounds[j + 1] - bounds[j]))
    return len(frame)


def read_batches(paths: list[Path], j: int) -> pd.DataFrame:
    """Batch ``j`` of each IPC file of ``paths`` (write_batches), in the order of ``paths``, as one frame (a text
    column of a sender that had no rows, typed null in its file, takes the others' type); the files are mapped, so
    only batch ``j``'s pages are read, and copied once, into the frame."""
    tables = []
    for path in paths:
        with pa.memory_map(str(path)) as source:
            tables.append(pa.Table.from_batches([pa.ipc.open_file(source).get_batch(j)]))
    return pa.concat_tables(tables, promote_options="default").to_pandas()
