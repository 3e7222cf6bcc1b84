"""Evaluation end to end: the whole IL battery through evaluate(), the metric families as independent units,
nearest-record pairing, the papers' properties, order-4 moments under a 1e9 shift, and the Prefect ``evaluate``
flow."""

from __future__ import annotations

import json
from fractions import Fraction

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

from sdc_tasks.evaluation.family import Deferred, Family, family_measures
from sdc_tasks.evaluation.measures import evaluate
from sdc_tasks.masking.mdav import microaggregate_block
from sdc_tasks.masking.rankswap import rank_swap_column
from sdc_tasks.metrics.catalogue import CATEGORICAL_FAMILIES, FAMILIES, SCORE, measure_of
from sdc_tasks.metrics.pil import quantile_pil
from sdc_tasks.metrics.rank_metrics import max_abs_rank_distance
from sdc_tasks.outputs import MARKER
from sdc_tasks.stats.moments import blocks_moments

IL_KEYS = ["IL1", "IL2", "IL3", "IL4", "IL5", "IL", "IL1s", "MSE_X", "MAE_V", "MV_R", "MSE_RF", "MAE_C",
           "MV_F", "brMAE", "brMSE", "PIL_Q", "PIL_m1", "PIL_m2", "PIL_m11", "PIL_r", "PIL"]


@pytest.fixture
def census_vars(census):
    return [c for c in census.columns if c != "record_id"]


def run(orig: pd.DataFrame, masked: pd.DataFrame, variables, parts=1, masked_parts=None,
        families=("il", "pil", "dld", "id"), pairing="auto") -> dict:
    with dask.config.set(scheduler="synchronous"):
        return evaluate(dd.from_pandas(orig, npartitions=parts),
                        dd.from_pandas(masked, npartitions=masked_parts or parts),
                        "record_id", list(variables), list(variables[:3]), families, pairing)


def noisy(census, census_vars, seed=1):
    m = census.copy()
    rng = np.random.default_rng(seed)
    m[census_vars] = census[census_vars] * np.exp(rng.normal(0, 0.1, (len(census), len(census_vars))))
    return m


def assert_same_metrics(expected: dict, other: dict) -> None:
    """Every float metric of ``expected`` equals ``other``'s to 1e-9 relative (1e-12 absolute)."""
    for key, value in expected.items():
        if isinstance(value, float):
            assert other[key] == pytest.approx(value, rel=1e-9, abs=1e-12), key


def evaluated_in_partitions(census, census_vars) -> dict:
    """The default families' metrics of the Census file against its noisy copy (seed 9), in 4 and 3 partitions,
    on the first 7 variables as keys, computed by the scheduler in use."""
    masked = noisy(census, census_vars, seed=9)
    return evaluate(dd.from_pandas(census, npartitions=4), dd.from_pandas(masked, npartitions=3), "record_id",
                    census_vars, census_vars[:7])


def test_full_battery_is_finite_and_partition_independent(census, census_vars):
    masked = noisy(census, census_vars)
    base = run(census, masked, census_vars)
    for key in IL_KEYS:
        assert np.isfinite(base[key]), key
    assert base["pairing"] == "id"
    for parts, mparts in ((2, 2), (4, 3), (7, 1)):
        other = run(census, masked.sample(frac=1, random_state=parts), census_vars, parts, mparts)
        assert_same_metrics(base, other)


@pytest.mark.parametrize("rows", [None, slice(0, None, 2)], ids=["whole", "subset"])
def test_families_alone_give_the_keys_and_values_of_all_together(census, census_vars, rows):
    """Each continuous family evaluated alone gives exactly its keys of an evaluation of all of them at once (a
    family's unit reads nothing of another's), whether the pairs stand for both files or not."""
    original = census.iloc[:240]
    masked = noisy(original, census_vars, seed=4).iloc[rows or slice(None)]
    variables = census_vars[:5]
    continuous = tuple(f for f in FAMILIES if f not in CATEGORICAL_FAMILIES)
    together = run(original, masked, variables, 2, 3, continuous)
    alone: dict = {}
    for family in continuous:
        alone.update(run(original, masked, variables, 2, 3, (family,)))
    assert {k: v for k, v in alone.items() if measure_of(k).family != SCORE} == \
        {k: v for k, v in together.items() if measure_of(k).family != SCORE}


def test_family_loop_computes_graphs_then_deferred_work_then_finishes():
    """One shared compute of the graphs, each Deferred run with the context after it, finish on the family's own
    results only, and no finish for a family with nothing to compute."""
    log = []

    def later(ctx):
        """Deferred work: records that it ran, with which context."""
        log.append(("deferred", ctx["tag"]))
        return 5

    def refuse(results, ctx):
        """A finish that must never be called."""
        raise AssertionError("finish of a family without tasks")

    a = Family("a", lambda ctx: {"sum": dask.delayed(sum)([1, 2]), "later": Deferred(later)},
               lambda results, ctx: {"a_sum": results["sum"], "a_later": results["later"], "a_n": len(results)})
    b = Family("b", lambda ctx: {}, refuse)
    assert family_measures([a, b], {"tag": "ctx"}) == {"a_sum": 3, "a_later": 5, "a_n": 2}
    assert log == [("deferred", "ctx")]


def test_masked_subset_is_paired_by_id_against_the_whole_original(census, census_vars):
    # a masked file without two thirds of the records (suppressed): ranks compare the kept records among
    # themselves (two permutations of 1..n'), quantiles compare the whole original with the masked file
    masked = noisy(census, census_vars).iloc[::3]
    out = run(census, masked.sample(frac=1, random_state=0), census_vars, parts=3, masked_parts=2)
    assert out["n"] == len(census) and out["n_masked"] == len(masked) and out["pairing"] == "id"
    kept = census.set_index("record_id").loc[masked["record_id"]].reset_index()
    abs_sum = sum(np.abs(kept[v].rank(method="first").to_numpy() - masked[v].rank(method="first").to_numpy()).sum()
                  for v in census_vars)
    assert out["brMAE"] == pytest.approx(abs_sum / len(census_vars) / max_abs_rank_distance(len(masked)), rel=1e-12)
    terms = [quantile_pil(np.sort(census[v].to_numpy(float)), np.sort(masked[v].to_numpy(float)))
             for v in census_vars]
    assert out["PIL_Q"] == pytest.approx(np.concatenate([t for t, _ in terms]).mean(), rel=1e-12)
    assert out["PIL_Q_undefined_terms"] == sum(u for _, u in terms)


def test_rank_swap_keeps_quantiles_means_and_variances(census, census_vars):
    """pil_measures.txt sec. 5: rank swapping gives PIL(Q) = PIL(m1) = PIL(m2) = 0."""
    masked = census.copy()
    ids = census["record_id"].to_numpy()
    for j, v in enumerate(census_vars):
        masked[v] = rank_swap_column(census[v].to_numpy(np.float64), ids, 15, np.random.default_rng(j))
    m = run(census, masked, census_vars, parts=3)
    assert m["PIL_Q"] == 0 and m["PIL_m1"] == 0 and m["PIL_m2"] == 0
    assert m["PIL_m11"] > 0 and m["PIL_r"] > 0
    assert m["IL2"] < 1e-9 and m["IL4"] < 1e-9


def test_microaggregation_keeps_means(census, census_vars):
    """Microaggregation: PIL(m1) = 0 and IL2 = 0 (pil_measures.txt Table 3; chapter 6)."""
    x = census[census_vars].to_numpy(np.float64)
    masked = census.copy()
    masked[census_vars] = microaggregate_block(x, 7, x.mean(axis=0), x.std(axis=0), 3)
    m = run(census, masked, census_vars, parts=2)
    assert m["PIL_m1"] == 0 and m["IL2"] < 1e-9 and m["MSE_Xbar"] < 1e-9


def test_nearest_pairing_for_a_resized_synthetic_file(census, census_vars):
    """A masked file of other records (n' != n, unknown ids) is paired with the nearest original record."""
    rng = np.random.default_rng(5)
    take = rng.choice(len(census), 300, replace=False)
    synth = census.iloc[take].copy()
    synth[census_vars] = synth[census_vars] * np.exp(rng.normal(0, 0.02, (300, len(census_vars))))
    synth["record_id"] = np.arange(10_000, 10_300)
    m = run(census, synth, census_vars, parts=2, masked_parts=3)
    assert m["pairing"] == "nearest" and m["n"] == 1080 and m["n_masked"] == 300
    assert "DLD" not in m and "PLD" not in m and "ID" not in m and "brMAE" not in m
    x = census[census_vars].to_numpy(np.float64)
    xm = synth[census_vars].to_numpy(np.float64)
    sd = x.std(axis=0)
    d = (((xm[:, None, :] - x[None, :, :]) / sd) ** 2).sum(axis=2)
    nearest = x[np.argmin(d, axis=1)]
    il1 = 100 * np.mean(np.abs(nearest - xm) / np.abs(nearest))
    assert m["IL1"] == pytest.approx(il1, rel=1e-9)
    assert m["PIL_small_sample"] if "PIL_small_sample" in m else True
    with pytest.raises(Exception, match="300 of 300"):
        run(census, synth, census_vars, pairing="id")


def test_order_four_moments_under_a_huge_shift_match_exact_arithmetic(census):
    """Centred sums up to order 4 of the Census file shifted by 1e9, merged from 7 blocks, against exact
    rational arithmetic on a 60-record sample."""
    x = census[["AGI", "FEDTAX", "INTVAL"]].to_numpy(np.float64)[:60] + 1e9
    blocks = np.array_split(x, 7)
    merged = blocks_moments(blocks, 4)
    exact = [[Fraction(v) for v in row] for row in x.tolist()]
    n = len(exact)
    mean = [sum(r[j] for r in exact) / n for j in range(3)]
    dev = [[r[j] - mean[j] for j in range(3)] for r in exact]
    for j in range(3):
        for jj in range(3):
            s22 = float(sum(d[j] ** 2 * d[jj] ** 2 for d in dev))
            s31 = float(sum(d[j] ** 3 * d[jj] for d in dev))
            assert merged.cross[(2, 2)][j, jj] == pytest.approx(s22, rel=1e-6)
            assert merged.cross[(3, 1)][j, jj] == pytest.approx(s31, rel=1e-6, abs=1e-6 * abs(s22))
        assert merged.power[4][j] == pytest.approx(float(sum(d[j] ** 4 for d in dev)), rel=1e-6)


@pytest.mark.usefixtures("prefect_harness")
def test_evaluate_flow_writes_metrics_and_report(tmp_path, census, census_vars, dask_scheduler):
    from flows.evaluate import evaluate as evaluate_flow

    orig, masked = tmp_path / "orig.csv", tmp_path / "masked.parquet"
    census.to_csv(orig, index=False)
    noisy(census, census_vars).to_parquet(masked, index=False)
    metrics = evaluate_flow(str(orig), str(masked), str(tmp_path / "eval"), key_vars=census_vars[:7],
                            dask_address=dask_scheduler)
    out = tmp_path / "eval"
    assert {p.name for p in out.iterdir()} == {"metrics.json", "report.md", "report.html", "ru_map.png", MARKER}
    stored = json.loads((out / "metrics.json").read_text())
    assert stored["IL"] == pytest.approx(metrics["IL"]) and 0 <= stored["PIL"] <= 100
    assert "score_simple" in stored and "DLD_7" in stored
    report = (out / "report.md").read_text()
    assert "EVALUATED" in report and "PUBLISHED" not in report and "Release gate" not in report


def test_same_metrics_on_one_two_and_four_workers(census, census_vars, dask_scheduler):
    """The metrics of one evaluation on one thread of this process, on the session's cluster of two worker processes
    and on four worker threads of a cluster in this process agree."""
    from distributed import Client, LocalCluster

    from sdc_tasks.cluster import dask_client

    with dask.config.set(scheduler="synchronous"):
        results = [evaluated_in_partitions(census, census_vars)]
    with dask_client(dask_scheduler):
        results.append(evaluated_in_partitions(census, census_vars))
    with LocalCluster(n_workers=4, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster):
        results.append(evaluated_in_partitions(census, census_vars))
    for other in results[1:]:
        assert_same_metrics(results[0], other)


def test_graphs_split_as_for_a_large_file_give_the_same_metrics_on_a_cluster(census, census_vars, dask_scheduler,
                                                                             monkeypatch):
    """As for a large file: the key prefixes' linkage graphs computed one after the other and the variables' order
    measures a few at a time on the cluster give the metrics of one graph computed on one thread."""
    import sdc_tasks.evaluation.linkage_families as linkage_families
    import sdc_tasks.evaluation.order_measures as order_measures
    from sdc_tasks.cluster import dask_client

    with dask.config.set(scheduler="synchronous"):
        expected = evaluated_in_partitions(census, census_vars)
    for module in (linkage_families, order_measures):
        monkeypatch.setattr(module, "one_graph", lambda values: False)
    with dask_client(dask_scheduler):
        split = evaluated_in_partitions(census, census_vars)
    assert {k for k in expected if k.startswith("DLD")} == {k for k in split if k.startswith("DLD")}
    assert_same_metrics(expected, split)


def test_zipped_partitions_are_paired_only_where_their_ids_agree():
    """Same partition count, but one partition's records in another order: the pairing falls back to the join on
    the id, so every original value stands beside the masked value of its own id."""
    from sdc_tasks.evaluation.pairing import MASKED_SUFFIX, paired

    ids = np.arange(12)
    original = pd.DataFrame({"record_id": ids, "x": ids * 10.0})
    masked = original.assign(x=ids * 10.0 + 1.0).iloc[[0, 1, 2, 3, 4, 5, 7, 6, 8, 9, 10, 11]]
    zipped = paired(dd.from_pandas(original, npartitions=3, sort=False),
                    dd.from_pandas(masked, npartitions=3, sort=False), "record_id", ["x"]).compute()
    zipped = zipped.sort_values("record_id")
    assert np.array_equal(zipped["x" + MASKED_SUFFIX].to_numpy() - zipped["x"].to_numpy(), np.ones(12))
    aligned = paired(dd.from_pandas(original, npartitions=3, sort=False),
                     dd.from_pandas(original.assign(x=ids * 10.0 + 1.0), npartitions=3, sort=False),
                     "record_id", ["x"]).compute()
    assert aligned["record_id"].tolist() == ids.tolist()
    assert np.array_equal(aligned["x" + MASKED_SUFFIX].to_numpy() - aligned["x"].to_numpy(), np.ones(12))
