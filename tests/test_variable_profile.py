"""The per-variable figures of a report (sdc_tasks.metrics.variable_profile, sdc_tasks.evaluation.profile): each
variable's measures equal the evaluator's on a file of that variable alone, distributions and correlations equal
numpy's, and the histogram hides where the extreme records lie."""

from __future__ import annotations

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

from sdc_tasks.evaluation.measures import continuous_measures
from sdc_tasks.evaluation.profile import release_profile
from sdc_tasks.metrics.variable_profile import QUANTILES, sorted_bin_counts, variable_profile
from sdc_tasks.stats.order import SortedValues

N = 300


@pytest.fixture(scope="module")
def files():
    """An original file of two skewed variables with ties and a zero, and a noisy masked copy."""
    rng = np.random.default_rng(11)
    x = np.round(rng.gamma(2.0, 500.0, size=(N, 2)), 0)
    x[7, 0] = 0.0
    xm = x + rng.normal(0.0, 80.0, size=x.shape)
    ids = rng.permutation(N) + 1000
    original = pd.DataFrame({"record_id": ids, "a": x[:, 0], "b": x[:, 1]})
    masked = pd.DataFrame({"record_id": ids, "a": xm[:, 0], "b": xm[:, 1]})
    return original, masked


@pytest.mark.parametrize("var", ["a", "b"])
def test_each_measure_is_the_evaluators_on_the_variable_alone(files, var):
    original, masked = files
    profile = variable_profile(var, original[var].to_numpy(), masked[var].to_numpy(), original["record_id"].to_numpy())
    with dask.config.set(scheduler="synchronous"):
        alone = continuous_measures(dd.from_pandas(original[["record_id", var]], npartitions=2),
                                    dd.from_pandas(masked[["record_id", var]], npartitions=2), "record_id", [var],
                                    [var], ("il", "pil", "id"))
    for key in ("IL1", "PIL_Q", "PIL_m1", "PIL_m2", "brMAE", "ID"):
        assert profile["measures"][key] == pytest.approx(alone[key], rel=1e-12), key


def test_distributions_and_histogram(files):
    original, masked = files
    x, xm = original["a"].to_numpy(), masked["a"].to_numpy()
    profile = variable_profile("a", x, xm, original["record_id"].to_numpy())
    assert profile["n"] == N and profile["variable"] == "a"
    assert profile["original"]["mean"] == pytest.approx(x.mean()) and profile["masked"]["sd"] == pytest.approx(xm.std())
    quantiles = [profile["original"][f"q{round(q * 100):02d}"] for q in QUANTILES]
    assert quantiles == pytest.approx(np.quantile(x, QUANTILES))
    hist = profile["histogram"]
    assert hist["edges"][0] == pytest.approx(np.quantile(x, 0.01)) and hist["edges"][-1] == pytest.approx(
        np.quantile(x, 0.99))
    assert sum(hist["original"]) + hist["outside"][0] == N and sum(hist["masked"]) + hist["outside"][1] == N
    assert x.max() > hist["edges"][-1] and hist["outside"][0] >= 3  # the largest values are counted, not placed


def test_bin_counts_of_a_sorted_column_are_numpys_histogram():
    """Counts read from a sorted column below the edges are np.histogram's, values on inner edges, on the last
    edge and outside included."""
    rng = np.random.default_rng(5)
    edges = np.linspace(1.0, 4.0, 7)
    values = np.concatenate([rng.choice(np.r_[edges, 0.5, 4.5], 40), np.round(rng.uniform(0.0, 5.0, 200), 1)])
    assert sorted_bin_counts(SortedValues(np.sort(values)), edges).tolist() == np.histogram(values, edges)[0].tolist()


def test_release_profile_over_dask_frames(files):
    original, masked = files
    with dask.config.set(scheduler="synchronous"):
        out = release_profile(dd.from_pandas(original, npartitions=3), dd.from_pandas(masked, npartitions=3),
                              "record_id", ["a", "b"])
    assert [v["variable"] for v in out["variables"]] == ["a", "b"]
    direct = variable_profile("b", original["b"].to_numpy(), masked["b"].to_numpy(), original["record_id"].to_numpy())
    assert out["variables"][1]["measures"] == pytest.approx(direct["measures"])
    assert out["variables"][1]["original"] == pytest.approx(direct["original"])
    corr = out["correlation"]
    assert corr["variables"] == ["a", "b"]
    assert np.array(corr["original"]) == pytest.approx(np.corrcoef(original[["a", "b"]].T))
    assert np.array(corr["masked"]) == pytest.approx(np.corrcoef(masked[["a", "b"]].T))


def test_category_counts_over_partitions_equal_pandas_value_counts():
    rng = np.random.default_rng(3)
    original = pd.DataFrame({"record_id": np.arange(N), "c": rng.integers(1, 6, N), "t": rng.choice(["x", "y"], N)})
    masked = original.assign(c=original["c"].astype("Int64").mask(np.arange(N) % 10 == 0), t="x")
    with dask.config.set(scheduler="synchronous"):
        out = release_profile(dd.from_pandas(original, npartitions=3), dd.from_pandas(masked, npartitions=2),
                              "record_id", [], ["c", "t"])["categories"]
    assert [p["variable"] for p in out] == ["c", "t"]
    counts = {(p["variable"], c["code"]): (c["original"], c["masked"]) for p in out for c in p["categories"]}
    for code, n in original["c"].value_counts().items():
        assert counts[("c", str(code))] == (n, (masked["c"] == code).sum())
    assert out[0]["missing"] == [0.0, float(masked["c"].isna().sum())] and out[0]["other"] is None
    assert counts[("t", "x")] == ((original["t"] == "x").sum(), N) and ("t", "y") not in counts  # not released
    assert out[1]["other"] == {"categories": 1, "original": float((original["t"] == "y").sum()), "masked": 0.0}
