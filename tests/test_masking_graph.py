"""Masking steps on Dask collections: properties of blocked MDAV, rank swapping and the other continuous
methods, and reproducibility across partition counts (every registered method: tests/test_method_registry.py)."""

from __future__ import annotations

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

from sdc_tasks import blocking as B
from sdc_tasks.generate import census_model, synthetic_chunk
from sdc_tasks.io import read_table
from sdc_tasks.masking.apply import StepContext, in_input_order
from sdc_tasks.masking.mdav import microaggregate_block
from sdc_tasks.masking.methods import apply_step
from sdc_tasks.masking.registry import METHODS, validate_params

VARS = ["AFNLWGT", "AGI", "EMCONTRB", "FEDTAX", "PTOTVAL", "STATETAX"]


@pytest.fixture(scope="module")
def synthetic(census) -> pd.DataFrame:
    """2,000 Census-like records with 3 strata, ids in shuffled order."""
    df = synthetic_chunk(census_model(census.drop(columns="record_id")), 2000, seed=5, chunk_index=0,
                         first_id=1000, strata=3)
    return df.sample(frac=1.0, random_state=1).reset_index(drop=True)


def masked(df: pd.DataFrame, method: str, params: dict, nparts: int, strata: str | None = None,
           variables=VARS, seed: int = 11) -> pd.DataFrame:
    """Run one step on ``df`` split into ``nparts`` partitions and return the result in input row order."""
    ddf = dd.from_pandas(df, npartitions=nparts, sort=False)
    result = apply_step(ddf, method, variables, validate_params(method, params),
                        StepContext(seed=seed, step=0, id_column="record_id", strata=strata))
    out = result.frame.compute().reset_index(drop=True)
    return out


def group_sizes(out: pd.DataFrame, columns: list[str]) -> np.ndarray:
    """Sizes of the sets of records sharing one masked tuple (= MDAV groups for continuous data)."""
    return out.groupby(columns).size().to_numpy()


@pytest.mark.parametrize("group_size", [None, 3])
def test_blocked_mdav_groups_at_least_k_and_means_preserved(synthetic, sync_dask, group_size):
    k = 4
    out = masked(synthetic, "mdav", {"k": k, "block_size": 150, "group_size": group_size}, nparts=5)
    assert out["record_id"].tolist() == synthetic["record_id"].tolist()
    attr_groups = [VARS] if group_size is None else [VARS[:3], VARS[3:]]
    for cols in attr_groups:
        sizes = group_sizes(out, cols)
        assert sizes.min() >= k
    np.testing.assert_allclose(out[VARS].mean(), synthetic[VARS].mean(), rtol=1e-12)
    pd.testing.assert_series_equal(out["stratum"], synthetic["stratum"])
    assert (out[VARS] != synthetic[VARS]).to_numpy().mean() > 0.9


def test_blocked_mdav_does_not_depend_on_partitions(synthetic, sync_dask):
    params = {"k": 3, "block_size": 200}
    reference = masked(synthetic, "mdav", params, nparts=1)
    for nparts in (2, 7):
        pd.testing.assert_frame_equal(masked(synthetic, "mdav", params, nparts=nparts), reference)


def test_mdav_single_block_equals_global_kernel(census, sync_dask):
    """With one block the step is exactly the survey's MDAV on the whole file (standardized globally)."""
    cols = [c for c in census.columns if c != "record_id"]
    out = masked(census, "mdav", {"k": 3, "group_size": 3}, nparts=3, variables=cols)
    x = census[cols].to_numpy(np.float64)
    expected = microaggregate_block(x, 3, x.mean(axis=0), x.std(axis=0), 3)
    np.testing.assert_array_equal(out[cols].to_numpy(), expected)
    assert group_sizes(out, cols[:3]).min() == 3 and len(census) % 3 == 0


def test_mdav_within_strata_keeps_strata_apart(synthetic, sync_dask):
    out = masked(synthetic, "mdav", {"k": 3, "block_size": 100}, nparts=3, strata="stratum")
    np.testing.assert_allclose(out.groupby("stratum", observed=True)[VARS].mean(),
                               synthetic.groupby("stratum", observed=True)[VARS].mean(), rtol=1e-12)
    for _, part in out.groupby("stratum", observed=True):
        assert group_sizes(part, VARS).min() >= 3


def test_mdav_stratum_smaller_than_k_is_refused(synthetic, sync_dask):
    tiny = synthetic.copy()
    tiny.loc[:1, "stratum"] = "s00"
    tiny["stratum"] = tiny["stratum"].astype(str)
    tiny.loc[tiny.index[:2], "stratum"] = "lonely"
    with pytest.raises(ValueError) as err:
        masked(tiny, "mdav", {"k": 3}, nparts=2, strata="stratum")
    assert str(err.value) == "k = 3 needs at least 3 records per block but the stratum of 'stratum' has 2"
    assert "lonely" not in str(err.value)  # a stratum's label is a value of the data


@pytest.mark.parametrize("strata", [None, "stratum"])
def test_rank_swap_is_a_bounded_permutation_of_each_column(synthetic, sync_dask, strata):
    p = 5
    out = masked(synthetic, "rankswap", {"p": p}, nparts=4, strata=strata)
    scopes = [synthetic.index] if strata is None else [g.index for _, g in synthetic.groupby(strata, observed=True)]
    for idx in scopes:
        n = len(idx)
        bound = (n * p) // 100
        for v in VARS:
            orig = synthetic.loc[idx, v].to_numpy()
            new = out.loc[idx, v].to_numpy()
            np.testing.assert_array_equal(np.sort(orig), np.sort(new))
            order = np.lexsort((synthetic.loc[idx, "record_id"].to_numpy(), orig))
            rank_of_value = {val: r for r, val in enumerate(orig[order])}
            ranks = np.empty(n, dtype=np.int64)
            ranks[order] = np.arange(n)
            displacement = np.abs(np.array([rank_of_value[val] for val in new]) - ranks)
            assert displacement.max() <= bound
            assert (new != orig).mean() > 0.8


def test_rank_swap_reproducible_and_seed_sensitive(synthetic, sync_dask):
    a = masked(synthetic, "rankswap", {"p": 10}, nparts=1)
    pd.testing.assert_frame_equal(masked(synthetic, "rankswap", {"p": 10}, nparts=6), a)
    assert not masked(synthetic, "rankswap", {"p": 10}, nparts=1, seed=12).equals(a)


@pytest.mark.parametrize("method", ["mdav_variable", "mic_ir", "mic_optimal", "mic_z", "mic_pcp"])
def test_microaggregation_variants_keep_means_and_group_sizes(synthetic, sync_dask, method):
    out = masked(synthetic, method, METHODS[method].example, nparts=3)
    np.testing.assert_allclose(out[VARS].mean(), synthetic[VARS].mean(), rtol=1e-12)
    k = METHODS[method].example["k"]
    columns = [[v] for v in VARS] if method in ("mic_ir", "mic_optimal") else [VARS]
    for cols in columns:
        assert group_sizes(out, cols).min() >= k


def test_projection_microaggregation_equals_the_whole_file_method(synthetic, sync_dask):
    """Blocks hold whole groups of k along the projection, so blocked MicZ is MicZ on the whole file."""
    from sdc_tasks.masking.univariate import projected_microaggregation

    out = masked(synthetic, "mic_z", {"k": 4, "block_size": 120}, nparts=4)
    x = synthetic[VARS].to_numpy(np.float64)
    scores = ((x - x.mean(axis=0)) / x.std(axis=0)).sum(axis=1)
    expected = projected_microaggregation(x, 4, scores, synthetic["record_id"].to_numpy())
    np.testing.assert_allclose(out[VARS].to_numpy(), expected, rtol=1e-12)


@pytest.mark.parametrize("method", ["resample", "distr"])
def test_rank_preserving_methods(synthetic, sync_dask, method):
    out = masked(synthetic, method, METHODS[method].example, nparts=2)
    ids = synthetic["record_id"].to_numpy()
    for v in VARS:
        o = np.lexsort((ids, synthetic[v].to_numpy()))
        assert np.all(np.diff(out[v].to_numpy()[o]) >= 0)


def test_noise_with_linear_transformation_restores_means(synthetic, sync_dask):
    plain = masked(synthetic, "noise", {"p": 0.2}, nparts=2)
    kim = masked(synthetic, "noise", {"p": 0.2, "linear_transform": True, "correlated": True}, nparts=2)
    np.testing.assert_allclose(kim[VARS].mean(), synthetic[VARS].mean(), rtol=1e-9)
    assert (plain[VARS] != synthetic[VARS]).to_numpy().all()
    ratio = (plain[VARS] - synthetic[VARS]).std(ddof=0) / synthetic[VARS].std(ddof=0)
    np.testing.assert_allclose(ratio, 0.2, rtol=0.1)


def test_rescale_restores_the_reference_means_and_variances(synthetic, sync_dask):
    noisy = masked(synthetic, "noise", {"p": 0.3}, nparts=2)
    ddf = dd.from_pandas(noisy, npartitions=3, sort=False)
    ctx = StepContext(seed=1, step=1, id_column="record_id", reference=dd.from_pandas(synthetic, npartitions=2))
    result = apply_step(ddf, "rescale", VARS, validate_params("rescale", {}), ctx)
    out = result.frame.compute()
    np.testing.assert_allclose(out[VARS].mean(), synthetic[VARS].mean(), rtol=1e-9)
    np.testing.assert_allclose(out[VARS].var(ddof=0), synthetic[VARS].var(ddof=0), rtol=1e-9)


def test_jpeg_stays_in_range(synthetic, sync_dask):
    out = masked(synthetic, "jpeg", {"q": 20}, nparts=2)
    assert (out[VARS].min() >= synthetic[VARS].min() - 1e-9).all()
    assert (out[VARS].max() <= synthetic[VARS].max() + 1e-9).all()
    assert (out[VARS] != synthetic[VARS]).to_numpy().mean() > 0.5


def test_masked_values_in_parquet_files_with_interleaved_positions_come_back_in_input_order(tmp_path):
    # a mask stage's files hold positions that interleave (0, 2, 4, ... and 1, 3, 5, ...); Dask's sort_values
    # sampled them through a read fused into one partition and took the two files for sorted ones
    for i in range(2):
        pd.DataFrame({B.POS_COL: np.arange(i, 1000, 2), "x": np.arange(i, 1000, 2) * 10.0}).to_parquet(
            tmp_path / f"part-{i}.parquet", index=False)
    frame = read_table(tmp_path, "parquet")
    with dask.config.set(scheduler="synchronous"):
        pieces, _ = in_input_order(frame[[B.POS_COL, "x"]], [300, 0, 700])
        first, empty, last = dask.compute(*pieces)
    assert first[B.POS_COL].tolist() == list(range(300)) and first["x"].tolist() == [10.0 * p for p in range(300)]
    assert len(empty) == 0 and last[B.POS_COL].tolist() == list(range(300, 1000))


@pytest.mark.parametrize("method, params", [("mdav", {"k": 3, "block_size": 120, "group_size": 3}),
                                            ("synthetic_postmask", {"p": 0.3, "target_e": 0.02, "max_iter": 200,
                                                                    "block_size": 300})])
def test_a_step_beyond_the_workers_memory_keeps_its_sorts_in_files_and_masks_the_same(synthetic, sync_dask,
                                                                                        tmp_path, monkeypatch, method,
                                                                                        params):
    # the block stage's level sorts, its block numbers in input order and the restored order go through files
    # when the workers cannot hold them: the same records, blocks and values as kept in memory
    import sdc_tasks.masking.apply as A
    import sdc_tasks.task_graph

    ddf = dd.from_pandas(synthetic, npartitions=5, sort=False)
    ctx = StepContext(seed=3, step=0, id_column="record_id")
    step = validate_params(method, params)
    held = apply_step(ddf, method, VARS, step, ctx, work_dir=tmp_path / "memory")
    in_memory = held.frame.compute()
    written, kept = [], sdc_tasks.task_graph.kept_partitions

    def recorded(frame, files):
        pieces, pinned = kept(frame, files)
        written.append((files.name, len(list(files.iterdir())), frame.npartitions, pinned))
        return pieces, pinned

    monkeypatch.setattr(A, "workers_hold", lambda nbytes: False)
    monkeypatch.setattr(A, "kept_partitions", recorded)
    spilled = apply_step(ddf, method, VARS, step, ctx, work_dir=tmp_path / "files")
    pd.testing.assert_frame_equal(spilled.frame.compute(), in_memory)
    assert spilled.blocks == held.blocks
    names = [w[0] for w in written]
    assert names == ["level-_proj0", "level-_proj1", "in-input-order", "in-input-order"]
    assert all(files == parts and pinned == () for _, files, parts, pinned in written)
    assert not any((tmp_path / "files").glob("block.*"))  # the block stage's files removed once it is written


def test_kept_partitions_in_files_equal_the_persisted_ones(tmp_path, sync_dask):
    from sdc_tasks.task_graph import kept_partitions

    frame = dd.from_pandas(pd.DataFrame({"x": np.arange(50.0), "t": pd.array(list("ab") * 25, "string[pyarrow]")}),
                           npartitions=4, sort=False)
    held, pinned = kept_partitions(frame, None)
    stored, none = kept_partitions(frame[frame["x"] % 3 != 0], tmp_path / "kept")
    assert len(pinned) == 1 and none == () and len(list((tmp_path / "kept").iterdir())) == 4
    for a, b in zip(dask.compute(*held), dask.compute(*stored)):
        pd.testing.assert_frame_equal(a[a["x"] % 3 != 0], b)
    assert sorted(p["x"].min() for p in dask.compute(*stored)) == [
        1.0, 13.0, 26.0, 38.0]  # partitions of 13, 13, 12 and 12 rows, the multiples of 3 left out
