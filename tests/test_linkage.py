"""Blocked exact distance-based linkage equals brute force (sdc_methods_comparison_chapter.txt sec. 3;
docs/metrics.md DLD_i, DLD2_i with the 1/t tie rule), whatever the cells and partitions; the spatial split covers
every record a search ball can hold. The published-setup probabilistic linkage (PLDpub) equals an all-pairs
computation when every original is a candidate."""

from __future__ import annotations

import re
from unittest import mock

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

from sdc_tasks.evaluation import linkage
from sdc_tasks.evaluation.measures import evaluate
from sdc_tasks.metrics.spatial_blocks import make_cell, sample_mask, split_tree

TOL = 1e-9


def brute_force_dld(x: np.ndarray, xm: np.ndarray, keys: int,
                    masked_rows: np.ndarray | None = None) -> tuple[list[float], list[float]]:
    """DLD_i and DLD2_i (percent), i = 1..keys, from every masked-to-original distance (numpy, chunked), over the
    masked records ``masked_rows`` (default: all; the original file is always searched whole).

    Standardized with the original's mean and population sd; the own original is tied with the t originals
    within 1e-9 relative of its distance and earns 1/t for each rank it may take."""
    mean, sd = x.mean(axis=0), x.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    z, zm = (x - mean) / sd, (xm - mean) / sd
    masked_rows = np.arange(len(x)) if masked_rows is None else masked_rows
    c1, c2 = np.zeros(keys), np.zeros(keys)
    for start in range(0, len(masked_rows), 500):
        rows = masked_rows[start:start + 500]
        d2 = np.zeros((len(rows), len(z)))  # squared distances on the first i keys, added key by key
        own2 = np.zeros(len(rows))
        for i in range(1, keys + 1):
            d2 += (zm[rows, None, i - 1] - z[None, :, i - 1]) ** 2
            own2 += (zm[rows, i - 1] - z[rows, i - 1]) ** 2
            d, own = np.sqrt(d2), np.sqrt(own2)[:, None]
            closer = (d < own - TOL * own).sum(axis=1)
            tied = (np.abs(d - own) <= TOL * own).sum(axis=1)
            c1[i - 1] += np.where(closer == 0, 1.0 / tied, 0.0).sum()
            c2[i - 1] += np.where((closer < 2) & (closer + tied >= 2), 1.0 / tied, 0.0).sum()
    return list(100 * c1 / len(masked_rows)), list(100 * c2 / len(masked_rows))


def blocked_dld(x: np.ndarray, xm: np.ndarray, keys: int, cell_rows: int, parts: int,
                route_rows: int = linkage.ROUTE_ROWS, masked_rows: np.ndarray | None = None) -> tuple[list, list]:
    """DLD_i and DLD2_i from evaluate() with the given cell size, number of partitions and records per routing
    group, of the masked records ``masked_rows`` (default: all)."""
    cols = [f"v{j}" for j in range(x.shape[1])]
    ids = np.arange(len(x))
    orig = pd.DataFrame(x, columns=cols).assign(id=ids)
    masked = pd.DataFrame(xm, columns=cols).assign(id=ids)
    if masked_rows is not None:
        masked = masked.iloc[masked_rows]
    with dask.config.set(scheduler="synchronous"), mock.patch.object(linkage, "ROUTE_ROWS", route_rows):
        out = evaluate(dd.from_pandas(orig, npartitions=parts), dd.from_pandas(masked, npartitions=parts), "id",
                       cols, cols[:keys], ("dld",), cell_rows=cell_rows)
    return [out[f"DLD_{i}"] for i in range(1, keys + 1)], [out[f"DLD2_{i}"] for i in range(1, keys + 1)]


def assert_same(blocked, brute):
    for got, want in zip(blocked, brute):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_blocked_linkage_equals_brute_force_on_1e4_records():
    rng = np.random.default_rng(5)
    n = 10_000
    x = rng.lognormal(size=(n, 3)) * [10.0, 3.0, 200.0]
    xm = x + rng.normal(size=(n, 3)) * x.std(axis=0) * 0.05
    brute = brute_force_dld(x, xm, 3)
    assert 5 < brute[0][2] < 95  # a non-trivial linkage rate
    assert_same(blocked_dld(x, xm, 3, cell_rows=400, parts=3), brute)


@pytest.mark.parametrize("cell_rows,parts,route_rows", [(40, 1, 10**6), (97, 4, 10**6), (10_000, 2, 10**6),
                                                        (97, 4, 300), (60, 5, 700)])
def test_blocked_linkage_equals_brute_force_with_duplicates_ties_and_border_records(cell_rows, parts, route_rows):
    # integer lattice values: many duplicate originals, many exact distance ties, split thresholds equal to data
    # values (records on the cell borders), masked records equal to their original (distance 0) or to others
    rng = np.random.default_rng(11)
    n = 1_500
    x = rng.integers(0, 6, size=(n, 3)).astype(float)
    xm = x + rng.integers(-1, 2, size=(n, 3)) * (rng.random((n, 1)) < 0.6)
    xm[:50] = x[rng.integers(0, n, 50)]  # copies of other records
    brute = brute_force_dld(x, xm, 3)
    assert_same(blocked_dld(x, xm, 3, cell_rows, parts, route_rows), brute)


def test_blocked_linkage_of_a_masked_subset_searches_the_whole_original():
    # the masked file lacks a third of the records: their originals must still be searched
    rng = np.random.default_rng(4)
    x = rng.integers(0, 8, size=(1_200, 3)).astype(float)
    xm = x + rng.normal(size=x.shape) * 0.7
    rows = np.sort(rng.choice(len(x), 800, replace=False))
    brute = brute_force_dld(x, xm, 3, rows)
    assert brute != brute_force_dld(x[rows], xm[rows], 3)
    assert_same(blocked_dld(x, xm, 3, cell_rows=100, parts=6, route_rows=600, masked_rows=rows), brute)


def test_blocked_linkage_far_masked_records_search_many_cells():
    # heavy noise: each search ball meets many cells; the result must still be exact
    rng = np.random.default_rng(2)
    x = rng.normal(size=(2_000, 2))
    xm = x + rng.normal(size=(2_000, 2)) * 0.8
    assert_same(blocked_dld(x, xm, 2, cell_rows=60, parts=3), brute_force_dld(x, xm, 2))


def test_blocked_linkage_constant_key_variable():
    # a constant key: standardization keeps scale 1, every record ties on it; cells cannot split on it
    rng = np.random.default_rng(8)
    x = np.column_stack([np.full(600, 7.0), rng.normal(size=600)])
    xm = x + np.column_stack([np.zeros(600), rng.normal(size=600) * 0.1])
    assert_same(blocked_dld(x, xm, 2, cell_rows=50, parts=2), brute_force_dld(x, xm, 2))


def test_split_tree_leaves_partition_and_ball_leaves_cover():
    rng = np.random.default_rng(3)
    pts = rng.normal(size=(3_000, 3))
    tree = split_tree(pts[::7], 16)
    assert tree.n_leaves == 16
    leaf = tree.leaves_of(pts)
    counts = np.bincount(leaf, minlength=16)
    assert counts.min() > 0.4 * len(pts) / 16  # quantile splits give balanced cells
    q = rng.normal(size=(200, 3))
    radius = rng.random(200) * 0.8
    rec, hit = tree.ball_leaves(q, radius)
    touched = {(r, h) for r, h in zip(rec.tolist(), hit.tolist())}
    d = np.sqrt(((q[:, None, :] - pts[None, :, :]) ** 2).sum(axis=2))
    for r, j in zip(*np.nonzero(d <= radius[:, None])):
        assert (r, leaf[j]) in touched


def test_a_points_leaf_is_the_one_a_ball_of_radius_zero_meets():
    """leaves_of against ball_leaves at radius 0: one leaf per point, points lying exactly on
    a threshold going left; NaN goes right at every node, as +inf."""
    rng = np.random.default_rng(5)
    pts = rng.normal(size=(4_000, 4))
    tree = split_tree(pts[::5], 37)
    q = np.concatenate([rng.normal(size=(500, 4)), pts[::9]])
    on = rng.integers(0, len(tree.dim), 50)
    q[:50, tree.dim[on]] = tree.threshold[on]
    rec, hit = tree.ball_leaves(q, np.zeros(len(q)))
    assert np.array_equal(np.sort(rec), np.arange(len(q)))
    np.testing.assert_array_equal(tree.leaves_of(q), hit[np.argsort(rec)])
    assert tree.leaves_of(q[:0]).shape == (0,)
    np.testing.assert_array_equal(tree.leaves_of(np.full((2, 4), np.nan)), tree.leaves_of(np.full((2, 4), np.inf)))


def test_split_tree_on_constant_and_tiny_samples():
    assert split_tree(np.ones((10, 2)), 8).n_leaves == 1
    assert split_tree(np.array([[0.0], [1.0]]), 8).n_leaves == 2
    tree = split_tree(np.array([[0.0], [0.0], [0.0], [1.0]]), 2)  # the cut never leaves a side empty
    np.testing.assert_array_equal(np.bincount(tree.leaves_of(np.array([[0.0], [0.0], [0.0], [1.0]]))), [3, 1])


def test_sample_and_cells_do_not_depend_on_record_order():
    ids = np.arange(5_000)
    keep = sample_mask(ids, 0.1)
    assert 400 < keep.sum() < 600
    perm = np.random.default_rng(0).permutation(ids)
    np.testing.assert_array_equal(np.sort(perm[sample_mask(perm, 0.1)]), ids[keep])
    pts = np.random.default_rng(1).normal(size=(5_000, 2))
    a, b = make_cell(ids, pts), make_cell(perm, pts[perm])
    np.testing.assert_array_equal(a.ids, b.ids)
    np.testing.assert_array_equal(a.points, b.points)
    assert np.all(a.min_distance(pts) == 0)


def pld_of(x: np.ndarray, xm: np.ndarray, cell_rows: int, parts: int, route_rows: int = linkage.ROUTE_ROWS) -> dict:
    """evaluate() with the pld family only."""
    cols = [f"v{j}" for j in range(x.shape[1])]
    ids = np.arange(len(x))
    orig = pd.DataFrame(x, columns=cols).assign(id=ids)
    masked = pd.DataFrame(xm, columns=cols).assign(id=ids)
    with dask.config.set(scheduler="synchronous"), mock.patch.object(linkage, "ROUTE_ROWS", route_rows):
        return evaluate(dd.from_pandas(orig, npartitions=parts), dd.from_pandas(masked, npartitions=parts), "id",
                        cols, cols, ("pld",), pld_cell_rows=cell_rows)


def test_pld_of_unmasked_file_is_100():
    x = np.random.default_rng(4).lognormal(size=(800, 3))
    out = pld_of(x, x.copy(), cell_rows=200, parts=2)
    assert out["PLD"] == 100.0 and out["PLD_candidate_recall"] == 100.0


def test_pld_falls_with_noise_and_does_not_depend_on_partitions():
    rng = np.random.default_rng(6)
    x = rng.normal(size=(3_000, 4))
    light = x + rng.normal(size=x.shape) * 0.05
    heavy = x + rng.normal(size=x.shape) * 0.6
    a = pld_of(x, light, cell_rows=700, parts=1)
    assert a == pld_of(x, light, cell_rows=700, parts=4) == pld_of(x, light, cell_rows=700, parts=6, route_rows=1_000)
    b = pld_of(x, heavy, cell_rows=700, parts=3)
    assert b["PLD"] < a["PLD"] <= a["PLD_candidate_recall"]
    assert a["PLD"] > 80 and b["PLD"] < 30


def brute_force_published_dld(x: np.ndarray, xm: np.ndarray, keys: int) -> list[float]:
    """DLDpub_i (percent), i = 1..keys, by all pairs: raw distances from each original record to every masked
    record; linked when no masked record is strictly nearer than its own (ties count as linked)."""
    out = []
    for i in range(1, keys + 1):
        d = np.sqrt(((x[:, None, :i] - xm[None, :, :i]) ** 2).sum(axis=2))
        own = np.diag(d)[:, None]
        out.append(100 * np.count_nonzero((d < own).sum(axis=1) == 0) / len(x))
    return out


@pytest.mark.parametrize("cell_rows,parts", [(60, 3), (1_000, 1)])
def test_published_setup_equals_brute_force_with_shared_masked_values(cell_rows, parts):
    rng = np.random.default_rng(8)
    x = rng.integers(0, 12, size=(600, 3)).astype(float) * [1.0, 50.0, 7.0]
    xm = x.copy()
    xm[:300] = np.repeat(x[:300].reshape(100, 3, 3).mean(axis=1), 3, axis=0)  # groups of 3 share their mean
    xm[300:] += rng.integers(-1, 2, size=(300, 3))  # lattice noise: exact ties across records
    cols = ["v0", "v1", "v2"]
    ids = np.arange(len(x))
    frames = [pd.DataFrame(a, columns=cols).assign(id=ids) for a in (x, xm)]
    with dask.config.set(scheduler="synchronous"):
        out = evaluate(dd.from_pandas(frames[0], npartitions=parts), dd.from_pandas(frames[1], npartitions=parts),
                       "id", cols, cols, ("dld_published",), cell_rows=cell_rows)
    want = brute_force_published_dld(x, xm, 3)
    np.testing.assert_allclose([out[f"DLDpub_{i}"] for i in (1, 2, 3)], want, rtol=1e-12)
    assert out["DLDpub"] == pytest.approx(np.mean(want))
    assert 0 < want[2] < 100


def brute_force_published_pld(x: np.ndarray, xm: np.ndarray, keys: int, threshold: float) -> list[float]:
    """PLDpub_i (percent), i = 1..keys, over every (masked, original) pair: binary agreement abs(x' - x) / sd <=
    threshold per key, m and u by the project's EM (tested against recordlinkage in test_pld.py) on all pairs'
    patterns, each masked record taking its maximum-weight originals, 1/t credit among t tied."""
    from sdc_tasks.evaluation.linkage import PLDPUB_EM_MAX_ITER, PLDPUB_EM_TOL
    from sdc_tasks.metrics.pld import fit_fellegi_sunter

    sd = x.std(axis=0)
    out = []
    for i in range(1, keys + 1):
        agree = np.abs(xm[:, None, :i] - x[None, :, :i]) / sd[:i] <= threshold
        codes = (~agree * 2 ** np.arange(i - 1, -1, -1)).sum(axis=2)
        model = fit_fellegi_sunter(np.bincount(codes.ravel(), minlength=2 ** i), i, 2, max_iter=PLDPUB_EM_MAX_ITER,
                                   tol=PLDPUB_EM_TOL)
        w = model.weights()[codes]
        best = w == w.max(axis=1, keepdims=True)
        out.append(100 * (np.diag(best) / best.sum(axis=1)).sum() / len(x))
    return out


def test_published_pld_equals_brute_force_when_every_original_is_a_candidate():
    rng = np.random.default_rng(11)
    x = rng.normal(size=(90, 3)) * [1.0, 40.0, 5.0]
    xm = x + rng.normal(size=x.shape) * x.std(axis=0) * [0.05, 0.08, 0.3]
    cols = ["v0", "v1", "v2"]
    ids = np.arange(len(x))
    frames = [pd.DataFrame(a, columns=cols).assign(id=ids) for a in (x, xm)]
    with dask.config.set(scheduler="synchronous"):
        out = evaluate(dd.from_pandas(frames[0], npartitions=2), dd.from_pandas(frames[1], npartitions=3),
                       "id", cols, cols, ("pld_published",))
    want = brute_force_published_pld(x, xm, 3, 0.1)
    np.testing.assert_allclose([out[f"PLDpub_{i}"] for i in (1, 2, 3)], want, rtol=1e-12)
    assert out["PLDpub"] == pytest.approx(np.mean(want))
    assert 0 < want[0] < want[2] < 100


def test_routing_groups_hold_about_route_rows_records_in_at_least_four_groups():
    assert [len(g) for g in linkage.chunked(list(range(40)), 10_000_000)] == [4] * 10
    assert [len(g) for g in linkage.chunked(list(range(4)), 1_000_000)] == [1] * 4
    assert linkage.chunked([7], 10) == [[7]]
    with mock.patch.object(linkage, "ROUTE_ROWS", 700):
        assert linkage.chunked(list(range(5)), 1_500) == [[0, 1], [2, 3], [4]]
        assert [len(g) for g in linkage.chunked(list(range(6)), 800)] == [2, 2, 2]


def test_linkage_kept_in_files_gives_on_worker_processes_the_credits_held_in_memory(dask_scheduler, tmp_path):
    """A distance linkage graph that keeps its tasks' results in files (each routed piece picked inside the task
    that reads it, no task of its own) gives, on the session's two worker processes, the credits of the same graph
    held in memory and run in this process, in several routing groups and cells, and removes the points, cells
    and routed records once every task reading them has run."""
    from distributed import Client

    from sdc_tasks.reserved import MASKED_SUFFIX

    rng = np.random.default_rng(3)
    n, cols = 3_000, ["a", "b", "c"]
    x = rng.lognormal(size=(n, 3))
    xm = x + rng.normal(size=(n, 3)) * x.std(axis=0) * 0.05
    pairs = pd.DataFrame(x, columns=cols).assign(id=np.arange(n))
    for j, c in enumerate(cols):
        pairs[c + MASKED_SUFFIX] = xm[:, j]
    parts = dd.from_pandas(pairs, npartitions=6).to_delayed()
    with dask.config.set(scheduler="synchronous"):
        sizes = [len(p) for p in dask.compute(*parts)]

    def credits(files):
        with mock.patch.object(linkage, "ROUTE_ROWS", 800):
            return linkage.linkage_graph(parts, parts, sizes, "id", cols, x.mean(axis=0), x.std(axis=0), n,
                                         cell_rows=300, files=files)

    with dask.config.set(scheduler="synchronous"):
        held = credits(None).compute()
    (tmp_path / "files").mkdir()
    with Client(dask_scheduler, set_as_default=False) as client:
        kept = client.compute(credits(tmp_path / "files")).result()
    assert np.array_equal(kept, held) and 0 < held[0] < n
    left = {re.sub(r"(-\d+)+$", "", f.name) for f in (tmp_path / "files").iterdir() if f.suffix != ".where"}
    assert left == {"sample", "tree", "tree-once-cells", "home-counts", "rest-counts", "credit", "credits"}
