"""The low-level task graph builder: references, list arguments, tuple items, tree reductions, Dask inputs."""

from __future__ import annotations

import operator
import pickle

import dask
import numpy as np
import pandas as pd
import pytest

from sdc_tasks.task_graph import Stored, StoredTuple, TaskGraph


def test_tasks_see_their_inputs_values_inside_lists_and_tuple_items():
    parts = [dask.delayed(pd.DataFrame)({"x": [i, i + 1]}) for i in range(3)]
    g = TaskGraph("test", 1)
    sums = [g.task("sum", (i,), lambda df: (int(df["x"].sum()), len(df)), g.input(p)) for i, p in enumerate(parts)]
    firsts = [g.item(s, 0) for s in sums]
    assert g.item(sums[0], 0) == firsts[0]
    total = g.task("total", (), sum, firsts)
    with dask.config.set(scheduler="sync"):
        assert g.result(total).compute() == (0 + 1) + (1 + 2) + (2 + 3)


def test_a_graph_with_files_keeps_results_there_and_computes_the_same(tmp_path):
    """With ``files`` every task's result is written there (each element of a tuple on its own) and its task
    returns only where it lies; consumers read what they need, items alone, lists and reductions included."""
    parts = [dask.delayed(pd.DataFrame)({"x": np.arange(i, i + 5)}) for i in range(4)]

    def build(files):
        g = TaskGraph("stored", 1, files=files)
        split = [g.task("split", (i,), lambda df: (df["x"].to_numpy() % 3, df["x"].to_numpy() * 2.0), g.input(p))
                 for i, p in enumerate(parts)]
        cells = [g.task("cell", (c,), lambda pieces: np.concatenate(pieces).sum(), [g.item(s, c) for s in split])
                 for c in range(2)]
        return g, split, g.result(g.reduce("total", cells, operator.add, split_every=2))

    with dask.config.set(scheduler="sync"):
        expected = build(None)[2].compute()
        g, split, result = build(tmp_path)
        assert result.compute() == expected
        stored = dask.compute(g.result(split[0]))[0]
    kept = [*(f"split-{i}" for i in range(4)), "cell-0", "cell-1", "total-0-0"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*kept, *(f"{name}.where" for name in kept)])
    assert len(g.tasks) == 4 + 2 + 1  # the items picked inside the cells' tasks: no task of their own
    assert isinstance(stored, tuple) and np.array_equal(stored[0], np.arange(5) % 3)
    task = g.tasks[split[0].key]
    assert isinstance(task(dict.fromkeys(task.dependencies, parts[0].compute())), StoredTuple)
    piece = task(dict.fromkeys(task.dependencies, parts[0].compute())).pieces[1]
    assert isinstance(piece, Stored) and np.array_equal(piece.load(), np.arange(5) * 2.0)


def test_results_are_removed_once_read_and_a_task_run_again_never_reads_them(tmp_path):
    """``remove``: the split pieces' files go once both cells have read them, each task's record of where its result
    lies stays, and the result is the same. A task run again (as Dask does when the worker holding its result
    died) returns where its result lies without loading its arguments, so the removed pieces are never read."""
    parts = [dask.delayed(pd.DataFrame)({"x": np.arange(i, i + 5)}) for i in range(4)]
    g = TaskGraph("removed", 1, files=tmp_path)
    split = [g.task("split", (i,), lambda df: (df["x"].to_numpy() % 3, df["x"].to_numpy() * 2.0), g.input(p))
             for i, p in enumerate(parts)]
    cells = [g.task("cell", (c,), lambda pieces: np.concatenate(pieces).sum(), [g.item(s, c) for s in split])
             for c in range(2)]
    g.remove("split-removed", [g.item(s, 1) for s in split], cells)
    xs = np.concatenate([np.arange(i, i + 5) for i in range(4)])
    with dask.config.set(scheduler="sync"):
        assert g.result(g.reduce("total", cells, operator.add)).compute() == (xs % 3).sum() + (xs * 2.0).sum()
    names = {p.name for p in tmp_path.iterdir()}
    assert not names & {f"split-{i}" for i in range(4)}
    assert {f"split-{i}.where" for i in range(4)} <= names and {"cell-0", "cell-1"} <= names
    removed = pickle.loads((tmp_path / "split-0.where").read_bytes())
    with pytest.raises(FileNotFoundError):
        removed.pieces[1].load()
    again = g.tasks[cells[1].key]
    where = again(dict.fromkeys(again.dependencies, removed))
    assert isinstance(where, Stored) and where.load() == (xs * 2.0).sum()


def test_stored_results_map_their_arrays_aligned_and_copy_on_write(tmp_path):
    """A stored result loads equal to what was written: frames with text, arrays in C and Fortran order, strided
    and empty ones, plain objects; each array's data is mapped from the file at an aligned offset (not read into a
    copy), writable, and a write to it leaves the file as it was."""
    from sdc_tasks.task_graph import ALIGN, stored

    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"x": rng.normal(size=1000), "i": np.arange(1000),
                          "t": pd.array(list("abcd") * 250, "string[pyarrow]"), "o": np.array(["r"] * 1000, object)})
    fortran = np.asfortranarray(rng.normal(size=(7, 5)))
    result = (frame, fortran, np.arange(30.0)[::3], np.zeros(0), {"k": [1, 2]}, np.arange(3, dtype=np.int8))
    where = stored(result, str(tmp_path / "r"))
    assert isinstance(where, StoredTuple) and len(where.pieces) == len(result)
    loaded = [p.load() for p in where.pieces]
    pd.testing.assert_frame_equal(loaded[0], frame)
    for got, expected in zip(loaded[1:4], result[1:4]):
        assert np.array_equal(got, expected) and got.dtype == expected.dtype
    assert loaded[1].flags.f_contiguous and loaded[4] == {"k": [1, 2]}
    assert all(offset % ALIGN == 0 for p in where.pieces for offset, _ in p.buffers)
    x = loaded[0]["x"].to_numpy()
    assert not x.flags.owndata and x.flags.writeable
    x[:] = 0.0
    assert np.array_equal(where.pieces[0].load()["x"].to_numpy(), frame["x"].to_numpy())


@pytest.mark.parametrize("n", [1, 2, 8, 9, 70])
def test_tree_reduction_folds_every_item_once(n):
    g = TaskGraph("reduce", n)
    refs = [g.task("leaf", (i,), np.array, [i, 1]) for i in range(n)]
    with dask.config.set(scheduler="sync"):
        total = g.result(g.reduce("sum", refs, operator.add, split_every=3)).compute()
    assert total.tolist() == [n * (n - 1) // 2, n]


def test_a_task_key_cannot_be_added_twice_and_empty_reductions_are_refused():
    g = TaskGraph("keys")
    g.task("a", (0,), int, 1)
    with pytest.raises(ValueError, match="already in the graph"):
        g.task("a", (0,), int, 2)
    with pytest.raises(ValueError, match="nothing to reduce"):
        g.reduce("r", [], operator.add)


def test_graph_size_grows_with_partitions_times_cells_not_faster():
    """An all-to-all stage of P producers and C consumers is P x C item tasks plus P + C, whatever the order of
    calls (dask.delayed would rebuild the merged graph at each call)."""
    g = TaskGraph("all-to-all")
    producers = [g.task("p", (i,), tuple, list(range(30))) for i in range(30)]
    consumers = [g.task("c", (c,), sum, [g.item(p, c) for p in producers]) for c in range(30)]
    out = g.result(g.reduce("total", consumers, operator.add))
    assert len(g.tasks) == 30 + 30 * 30 + 30 + 4 + 1
    with dask.config.set(scheduler="sync"):
        assert out.compute() == 30 * sum(range(30))
