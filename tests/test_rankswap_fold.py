"""Rank swapping as a fold over rank-ordered partitions (sdc_tasks.masking.fold): byte-identical to the whole-column
kernel for every partner rule, with and without strata, on many small uneven partitions and on a cluster.

Reference: the whole-column kernel (rankswap.rank_swap_column, checked against hand-worked permutations and plain
references in tests/test_rankswap_kernel.py); statistical_databases_survey.txt, Data swapping and rank swapping.
"""

from __future__ import annotations

import itertools
import pickle
from pathlib import Path

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from distributed import Client, LocalCluster
from hypothesis import given, settings
from hypothesis import strategies as st

from sdc_tasks import scheduling
from sdc_tasks.masking import apply as A
from sdc_tasks.masking import fold as F
from sdc_tasks.masking.adapters import rankswap_on_column
from sdc_tasks.masking.methods import MASKED_VALUES, apply_step
from sdc_tasks.masking.rankswap import rank_swap_chunk, rank_swap_column
from sdc_tasks.masking.registry import METHODS, validate_params
from sdc_tasks.randomness import rng_for

VARS = ["ties", "smooth"]
ROWS = 3001


@pytest.fixture(scope="module")
def records() -> pd.DataFrame:
    """3,001 records, ids shuffled: a variable of 5 values (heavy ties), a constant one (every rank a tie, ordered by
    id alone) and a continuous one; strata: one of 2,400 records (spanning many partitions), one of 500, and 101
    strata of one record each, labelled by integers."""
    rs = np.random.default_rng(3)
    strata = np.r_[np.zeros(2400, np.int64), np.ones(500, np.int64), np.arange(2, 103)]
    return pd.DataFrame({
        "rid": rs.permutation(ROWS) * 7 + 11,
        "ties": rs.integers(0, 5, ROWS).astype(np.float64),
        "flat": np.full(ROWS, 2.5),
        "smooth": rs.normal(50.0, 10.0, ROWS),
        "s": rs.permutation(strata),
    })


def uneven(df: pd.DataFrame, parts: int, seed: int = 0) -> dd.DataFrame:
    """``df`` cut into ``parts`` partitions of random, uneven lengths (at least one record each)."""
    sizes = np.random.default_rng(seed).multinomial(len(df) - parts, np.ones(parts) / parts) + 1
    cuts = np.r_[0, np.cumsum(sizes)]
    pieces = [dask.delayed(df.iloc[a:b].copy()) for a, b in itertools.pairwise(cuts)]
    return dd.from_delayed(pieces, meta=df.iloc[:0], verify_meta=False)


def mask_values(ddf: dd.DataFrame, params: dict, strata: str | None, threshold: int, monkeypatch, work: Path,
                variables=VARS) -> pd.DataFrame:
    """The mask stage's (_pos, masked values) of the rank-swapping column kernel, by the whole-column path
    (``threshold`` at least the records) or the fold (``threshold`` 0, its files in ``work``)."""
    monkeypatch.setattr(A, "COLUMN_MAX_RECORDS", threshold)
    ctx = A.StepContext(seed=5, step=3, id_column="rid", strata=strata, work_dir=work)
    out = A.column_records(ddf, variables, validate_params("rankswap", params), ctx, rankswap_on_column,
                           METHODS["rankswap"].fold_adapter())
    return out.compute().sort_values(A.B.POS_COL).reset_index(drop=True)


def test_a_column_too_large_for_a_tasks_memory_is_swapped_by_the_fold(records, sync_dask, monkeypatch, tmp_path):
    # Below COLUMN_MAX_RECORDS, a column a task's memory cannot hold (scheduling.one_task_holds) takes the fold,
    # with the same values.
    ddf = uneven(records, 7)
    expected = mask_values(ddf, {"p": 15}, None, ROWS, monkeypatch, tmp_path)
    folds = []
    monkeypatch.setattr(A, "folded_records", lambda *a, _f=A.folded_records: folds.append(a[2]) or _f(*a))
    monkeypatch.setattr(scheduling, "task_memory", lambda: 4 * ROWS * A.COLUMN_BYTES - 1)
    pd.testing.assert_frame_equal(mask_values(ddf, {"p": 15}, None, ROWS, monkeypatch, tmp_path), expected,
                                  check_exact=True)
    assert folds == [VARS]


def test_the_stream_is_the_same_drawn_at_once_in_pieces_or_advanced():
    # The fold draws each chunk's uniforms from a fresh stream advanced to the chunk's first rank: PCG64 gives one
    # double per 64-bit step, so this equals the whole-column kernel's single draw.
    whole = rng_for(5, 3, "smooth", 1).random(10_000)
    pieces = rng_for(5, 3, "smooth", 1)
    np.testing.assert_array_equal(np.concatenate([pieces.random(k) for k in (1, 2999, 7000)]), whole)
    for first in (0, 1, 4_321, 9_999):
        advanced = rng_for(5, 3, "smooth", 1)
        advanced.bit_generator.advance(first)
        np.testing.assert_array_equal(advanced.random(10_000 - first), whole[first:])


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 300), p=st.sampled_from([0.5, 3, 10, 15, 50, 100]), distinct=st.integers(1, 40),
       cuts=st.lists(st.integers(0, 300), max_size=8), partner=st.sampled_from(["uniform", "nearest_free"]),
       seed=st.integers(0, 2**16))
def test_chunks_of_any_length_equal_the_whole_column(n, p, distinct, cuts, partner, seed):
    rs = np.random.default_rng(seed)
    values = rs.integers(0, distinct, n).astype(np.float64)
    ids = rs.permutation(n)
    expected = rank_swap_column(values, ids, p, rng_for(seed, 0, "v"), partner)
    order = np.lexsort((np.arange(n), ids, values))
    bounds = [0, *sorted(c for c in cuts if c <= n), n]
    out, carry, emitted = np.full(n, np.nan), None, 0
    for a, b in itertools.pairwise(bounds):
        pos, val, carry = rank_swap_chunk(values[order[a:b]], order[a:b], a, n, p, rng_for(seed, 0, "v"), carry,
                                          partner)
        out[pos] = val
        emitted += len(pos)
    assert emitted == n and len(carry.ranks) == 0
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("partner, strata, p, parts", [("uniform", None, 15, 41), ("nearest_free", None, 100, 9),
                                                       ("uniform", "s", 15, 9), ("nearest_free", "s", 40, 41)])
def test_fold_equals_the_whole_column_path_on_uneven_partitions(records, sync_dask, monkeypatch, tmp_path, partner,
                                                                strata, p, parts):
    # P = 450 (p = 15, 3,001 records) or 960 (p = 40, the stratum of 2,400) spans four rank-ordered partitions (a
    # quarter of the window each, fold.WINDOW_SHARE) and many input partitions of about 73.
    params = {"p": p, "partner": partner}
    ddf = uneven(records, parts)
    expected = mask_values(ddf, params, strata, ROWS + 1, monkeypatch, tmp_path)
    folded = mask_values(ddf, params, strata, 0, monkeypatch, tmp_path)
    pd.testing.assert_frame_equal(folded, expected, check_exact=True)
    masked = records.assign(**{v: folded[v].to_numpy() for v in VARS})
    scopes = [records.index] if strata is None else list(records.groupby(strata).groups.values())
    for rows in scopes:
        for v in VARS:
            np.testing.assert_array_equal(np.sort(masked.loc[rows, v]), np.sort(records.loc[rows, v]))
    assert (masked["smooth"] != records["smooth"]).mean() > 0.8


@pytest.mark.parametrize("p, chunks", [(15, 27), (1, 41)])
def test_the_folds_partitions_hold_a_share_of_the_window(records, sync_dask, monkeypatch, tmp_path, p, chunks):
    """The fold's rank-ordered partitions hold at least a quarter of the window (fold.WINDOW_SHARE): at p = 15, P =
    450 of 3,001 ranks, 27 partitions of about 111 for 41 input partitions; at p = 1 (P = 30) as many as the input's
    partitions; the values are the whole-column path's either way."""
    params = {"p": p, "partner": "uniform"}
    ddf = uneven(records, 41)
    expected = mask_values(ddf, params, None, ROWS + 1, monkeypatch, tmp_path / "column")
    folded = mask_values(ddf, params, None, 0, monkeypatch, tmp_path / "fold")
    pd.testing.assert_frame_equal(folded, expected, check_exact=True)
    assert len(list((tmp_path / "fold" / "fold").glob("fold-*/settled-000-*.arrow"))) == chunks


def test_fold_does_not_depend_on_the_partitioning(records, sync_dask, monkeypatch, tmp_path):
    # "flat" is one value: every rank a tie, ordered by id alone
    params = {"p": 10, "partner": "uniform"}
    a = mask_values(uneven(records, 17, seed=1), params, "s", 0, monkeypatch, tmp_path, ["flat"])
    b = mask_values(uneven(records, 3, seed=2), params, "s", 0, monkeypatch, tmp_path, ["flat"])
    np.testing.assert_array_equal(np.sort(a["flat"]), records["flat"])
    pd.testing.assert_frame_equal(a, b, check_exact=True)


def test_text_ids_break_ties_as_the_whole_column_path(records, sync_dask, monkeypatch, tmp_path):
    # Ids as text: the fold's files carry them, and ties of "flat" and "ties" are ordered by them as in the kernel.
    texts = records.assign(rid=records["rid"].map(lambda r: f"id-{r:06d}"))
    params = {"p": 15, "partner": "uniform"}
    expected = mask_values(uneven(texts, 9), params, None, ROWS + 1, monkeypatch, tmp_path, ["flat", "ties"])
    folded = mask_values(uneven(texts, 9), params, None, 0, monkeypatch, tmp_path / "fold", ["flat", "ties"])
    pd.testing.assert_frame_equal(folded, expected, check_exact=True)
    left = list((tmp_path / "fold" / "fold").glob("fold-*/*"))
    assert {p.name.split("-")[0] for p in left} == {"settled"}  # each variable's keys removed once its fold ended
    assert {p.suffix for p in left} == {".arrow", ".state"}


def test_a_chunk_run_again_returns_its_kept_state_without_its_removed_keys(records, sync_dask, monkeypatch,
                                                                          tmp_path):
    # A chunk whose result was lost with its worker is run again by Dask after its variable's keys were removed: it
    # returns the state it kept beside its settled values, never reading the keys, and leaves those values as they
    # were.
    params = validate_params("rankswap", {"p": 15})
    folded = mask_values(uneven(records, 7), {"p": 15}, None, 0, monkeypatch, tmp_path, ["smooth"])
    fold_dir, = (tmp_path / "fold").glob("fold-*")
    assert not list(fold_dir.glob("keys-*"))
    settled = sorted(fold_dir.glob("settled-000-*.arrow"))
    last = settled[-1]
    kept, values = last.with_suffix(".state").read_bytes(), last.read_bytes()
    adapter = METHODS["rankswap"].fold_adapter()
    state = F._chunk_folded(ROWS, [fold_dir / "keys-000-00000.arrow"], len(settled) - 1, F.FoldState(), 0,
                            np.array([ROWS]), [None], "smooth", "rid", adapter.chunk, params, 5, 3, False,
                            np.array([0, ROWS]), last, settled[-2])
    assert state.done == state.size == ROWS
    assert pickle.dumps(state, protocol=5) == kept and last.read_bytes() == values
    earlier = [pickle.loads(path.with_suffix(".state").read_bytes()) for path in settled[:-1]]
    assert [s.carry for s in earlier] == [None] * len(earlier)  # only the last chunk's state keeps its carry
    assert [s.done for s in earlier] == sorted(s.done for s in earlier) and earlier[-1].done < ROWS
    assert folded["smooth"].notna().all()


def test_whole_step_by_the_fold_on_a_cluster_equals_the_whole_column_path(records, monkeypatch, tmp_path):
    # Two worker threads, Dask's distributed shuffle: the same file as the whole-column path, in input row order.
    def step(threshold: int, where: str) -> pd.DataFrame:
        monkeypatch.setattr(A, "COLUMN_MAX_RECORDS", threshold)
        ctx = A.StepContext(seed=9, step=1, id_column="rid", strata="s")
        staged = apply_step(uneven(records, 13), "rankswap", ["ties", "flat", "smooth"],
                            validate_params("rankswap", {"p": 20}), ctx,
                            work_dir=tmp_path / where)
        return staged.frame.compute().reset_index(drop=True)

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster):
        folded = step(0, "fold")
    with dask.config.set(scheduler="synchronous"):
        expected = step(ROWS + 1, "column")
    pd.testing.assert_frame_equal(folded, expected, check_exact=True)
    assert folded["rid"].tolist() == records["rid"].tolist()
    assert sorted(p.name for p in (tmp_path / "fold").iterdir()) == [MASKED_VALUES]  # the fold's files removed


@pytest.mark.parametrize("stratified", [False, True])
@pytest.mark.parametrize("ids", ["unique", "repeated", "text"])
def test_the_sort_keys_order_is_lexsorts_by_scope_value_id_and_position(stratified, ids):
    """The fold's order of its sort keys is np.lexsort's of (scope, value, id, position), rows equal in all four
    in row order: tied values and signed zeros, unique, repeated and text ids, whole-key duplicates (a splitter
    before the key it was sampled from) and the splitters' count of each key below it."""
    from sdc_tasks.masking import fold
    from sdc_tasks.reserved import POS_COL, SCOPE_COL, VALUE_COL

    rng = np.random.default_rng(4)
    for n in (0, 1, 2, 300, 6000):
        positions = rng.permutation(n).astype(np.int64)
        rid = {"unique": positions * 7 + 3, "repeated": rng.integers(0, 40, n),
               "text": np.array([f"r{i}" for i in rng.integers(0, 40, n)], dtype=object)}[ids]
        keys = pd.DataFrame({SCOPE_COL: rng.integers(0, 3, n).astype(np.int64),
                             VALUE_COL: rng.choice([0.0, -0.0, 1.5, 2.0, 7.25], n), "rid": rid, POS_COL: positions})
        doubled = pd.concat([keys.iloc[: n // 10], keys], ignore_index=True)
        for frame in (keys, doubled):
            scope = (frame[SCOPE_COL].to_numpy(),) if stratified else ()
            expected = np.lexsort((frame[POS_COL].to_numpy(), frame["rid"].to_numpy(), frame[VALUE_COL].to_numpy(),
                                   *scope))
            assert np.array_equal(fold._key_order(frame, "rid", stratified), expected)
        splitters = keys.iloc[fold._key_order(keys, "rid", stratified)].iloc[:: 97].reset_index(drop=True)
        keyed = [tuple(r) for r in splitters[[*([SCOPE_COL] if stratified else []), VALUE_COL, "rid", POS_COL]]
                 .itertuples(index=False)]
        records = [tuple(r) for r in keys[[*([SCOPE_COL] if stratified else []), VALUE_COL, "rid", POS_COL]]
                   .itertuples(index=False)]
        assert list(fold._key_ranges(keys, splitters, "rid", stratified)) == [sum(s <= r for s in keyed)
                                                                              for r in records]


def test_non_finite_value_named_by_variable_and_record(records, sync_dask, monkeypatch, tmp_path):
    bad = records.copy()
    bad.loc[1234, "smooth"] = np.inf
    with pytest.raises(ValueError, match="variable 'smooth' has a non-finite value in record 1234"):
        mask_values(uneven(bad, 9), {"p": 10}, None, 0, monkeypatch, tmp_path)


def test_the_fold_graph_grows_with_the_partitions_not_their_square(tmp_path, sync_dask):
    """The fold's tasks share one copy of its splitters, file lists and offsets and wait on one count of the
    records sent: its dependencies and its pickled graph grow in step with the partitions (each chain task once
    depended on every sending task and carried its own copy of every file name)."""
    import cloudpickle

    from sdc_tasks.masking.fold import folded_records

    def graph_of(partitions: int) -> tuple[int, int]:
        n = 100 * partitions
        rng = np.random.default_rng(partitions)
        frame = pd.DataFrame({"record_id": np.arange(n), **{f"v{i}": rng.random(n) for i in range(3)}})
        out = folded_records(dd.from_pandas(frame, npartitions=partitions, sort=False), [100] * partitions,
                             ["v0", "v1", "v2"], METHODS["rankswap"].fold_adapter(), {"p": 1.0}, 1, 1, "record_id",
                             None, 100,
                             tmp_path / str(partitions))
        graph = dict(out.__dask_graph__())
        edges = sum(len(getattr(task, "dependencies", ())) for task in graph.values())
        return edges, len(cloudpickle.dumps(graph))

    (edges_20, bytes_20), (edges_80, bytes_80) = graph_of(20), graph_of(80)
    assert edges_80 <= 4.5 * edges_20
    assert bytes_80 <= 4.5 * bytes_20


@pytest.mark.parametrize("scopes, dtype", [(1, np.uint8), (256, np.uint8), (257, np.uint16), (70_000, np.uint32)])
def test_the_sort_keys_hold_each_scope_code_in_the_smallest_type(scopes, dtype):
    """A key file of the fold holds the scope code in the smallest unsigned type for the scopes' number (a byte a
    record up to 256 scopes), each record's code its stratum's place among the labels."""
    from sdc_tasks.masking import fold
    from sdc_tasks.reserved import SCOPE_COL

    labels = list(range(scopes))
    part = pd.DataFrame({"x": [2.5, 1.0, 4.0], "rid": [7, 8, 9], "s": [labels[-1], labels[0], labels[scopes // 2]]})
    keys = fold._sort_keys(part, np.arange(3, dtype=np.int64), "x", "rid", "s" if scopes > 1 else None, labels)
    assert keys[SCOPE_COL].dtype == dtype
    assert keys[SCOPE_COL].tolist() == ([scopes - 1, 0, scopes // 2] if scopes > 1 else [0, 0, 0])
