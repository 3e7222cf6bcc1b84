"""Every number written is finite, and every statistic is bit-identical for any partitioning of the records."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from functools import reduce

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sdc_tasks.evaluation.measures import evaluate, evaluate_paths
from sdc_tasks.files import write_json
from sdc_tasks.metrics.finite import finite_metrics
from sdc_tasks.report import metrics_table_rows
from sdc_tasks.stats.exact_sum import BLOCK, exact_sums, product_sums
from sdc_tasks.stats.moments import frame_moments, frame_spread

FAMILIES = ("il", "pil", "dld", "pld", "id")

ADVERSARIAL = [
    [1e300, 1.0, -1e300],  # catastrophic cancellation: the 1.0 survives
    [1e308, 1e308, -1e308, -1e308, 2.0 ** -1074],
    [1e300, 1e-300, -1e300, 3e-300, 1.0, -1.0],
    [0.1] * 10 + [-1.0],
    [2.0 ** 53, 1.0, 1.0, -(2.0 ** 53)],
    [-0.0, 0.0, 5e-324, -5e-324],
    [1.7976931348623157e308, -1.7976931348623157e308, 1e-320],
]


def exact(values) -> Fraction:
    """The exact sum of floats."""
    return sum(map(Fraction, values), Fraction(0))


def strict_loads(text: str):
    """JSON parsed with NaN and Infinity refused."""
    def refuse(name):
        raise ValueError(f"non-finite number {name} in JSON")
    return json.loads(text, parse_constant=refuse)


def merged_sums(values: list[float], cuts: list[int]):
    """The exact sum of ``values`` split at ``cuts`` into blocks, merged right to left."""
    bounds = [0, *sorted(cuts), len(values)]
    blocks = [exact_sums(np.array(values[a:b], dtype=np.float64)) for a, b in zip(bounds[:-1], bounds[1:])]
    return reduce(lambda a, b: b + a, blocks[::-1])


@pytest.mark.parametrize("values", ADVERSARIAL)
def test_exact_sum_matches_fractions_on_adversarial_input(values):
    got = exact_sums(np.array(values))
    assert got.fractions() == [exact(values)]
    assert got.values()[0] == float(exact(values))
    for cut in range(len(values) + 1):
        assert merged_sums(values, [cut]).fractions() == [exact(values)]


@settings(max_examples=200, deadline=None)
@given(values=st.lists(st.one_of(st.floats(allow_nan=False, allow_infinity=False, width=64),
                                 st.sampled_from([1e300, -1e300, 1e-300, -1e-300, 5e-324])), max_size=40),
       cuts=st.lists(st.integers(0, 40), max_size=6))
def test_exact_sum_of_any_split_is_the_exact_sum(values, cuts):
    total = exact(values)
    got = merged_sums(values, [min(c, len(values)) for c in cuts])
    assert got.fractions() == [total]
    try:
        expected = float(total)
    except OverflowError:  # beyond the float range: rounds to +-inf
        expected = math.inf if total > 0 else -math.inf
    assert got.values()[0] == expected


@pytest.mark.parametrize("records", [1, BLOCK - 1, BLOCK, BLOCK + 1, 4 * BLOCK - 3])
def test_product_sums_are_the_exact_sums_of_the_rounded_products(records):
    """Each row (r, i, s, k) of a spec sums powers[r, t, i] * powers[s, t, k] over the records t (the factor alone
    where s = -1), each product rounded once as numpy rounds it and the sum exact: signs, magnitudes from
    subnormal to near overflow, records in one block, across block boundaries and in many blocks."""
    rng = np.random.default_rng(records)
    powers = rng.normal(size=(2, records, 3)) * 10.0 ** rng.integers(-160, 150, (2, records, 3))
    powers[0, ::7, 1] = 5e-324
    spec = np.array([[0, 0, -1, 0], [0, 1, 1, 2], [1, 0, 1, 0], [0, 2, 0, 1], [1, 2, -1, 0]])
    got = product_sums(powers, spec)
    for (r, i, s, k), total in zip(spec, got.fractions()):
        terms = powers[r, :, i] * (powers[s, :, k] if s >= 0 else 1.0)
        assert total == exact(terms.tolist())


def test_product_sums_of_full_bins_and_zeros_are_exact():
    """A block of the largest significands of one exponent (each bin's most, with both signs), zeros beside
    values of every magnitude and a block of subnormals: each sum equal to the exact sum of its terms."""
    largest = np.nextafter(2.0, 0.0) * 2.0 ** np.array([-1022, -3, 0, 1000])
    columns = [np.repeat(largest, BLOCK), -np.repeat(largest, BLOCK),
               np.tile([0.0, -0.0, 1e-310, 1e300, 1.0, 0.0, 3e-200, -7.5], BLOCK // 2),
               np.full(4 * BLOCK, 5e-324) * np.tile([1.0, 3.0, -2.0, 2.0 ** 50], BLOCK)]
    powers = np.stack(columns, axis=1)[None]
    got = product_sums(powers, np.array([[0, k, -1, 0] for k in range(4)]))
    assert got.fractions() == [exact(c.tolist()) for c in columns]


def test_exact_sum_flags_what_is_not_finite():
    sums = exact_sums(np.array([1.0, np.inf]), np.array([1e308] * 4), np.array([]))
    values = sums.values()
    assert math.isnan(values[0]) and values[1] == math.inf and values[2] == 0.0
    assert sums.fractions()[0] is None


def test_written_json_refuses_nan(tmp_path):
    with pytest.raises(ValueError):
        write_json(tmp_path / "m.json", {"x": float("nan")})
    assert not (tmp_path / "m.json").exists()


def test_finite_metrics_give_the_reason():
    assert finite_metrics({"IL": 1.5, "MSE_X": math.inf, "PIL": math.nan, "key_vars": ["a"], "n": 3}) == {
        "IL": 1.5, "MSE_X_not_finite": 1.0, "PIL_not_finite": 1.0, "key_vars": ["a"], "n": 3}


def extreme_files(n: int = 300) -> tuple[pd.DataFrame, pd.DataFrame]:
    """An original with columns near +-1e300, near 1e-300, spanning 1e-300..1e300 and an ordinary one, and a
    masked copy with multiplicative noise."""
    rng = np.random.default_rng(5)
    orig = pd.DataFrame({
        "record_id": np.arange(n),
        "huge": rng.choice([-1.0, 1.0], n) * rng.uniform(0.5, 1.5, n) * 1e300,
        "tiny": rng.uniform(1.0, 9.0, n) * 1e-300,
        "wide": 10.0 ** rng.uniform(-300, 300, n),
        "plain": rng.normal(50.0, 10.0, n),
    })
    masked = orig.copy()
    for c in ("huge", "tiny", "wide", "plain"):
        masked[c] = orig[c] * np.exp(rng.normal(0, 0.1, n))
    return orig, masked


def test_metrics_of_extreme_values_are_strict_json_and_finite(tmp_path, sync_dask):
    orig, masked = extreme_files()
    variables = ["huge", "tiny", "wide", "plain"]
    metrics = evaluate(dd.from_pandas(orig, npartitions=3), dd.from_pandas(masked, npartitions=2), "record_id",
                       variables, variables, FAMILIES)
    parsed = strict_loads(write_json(tmp_path / "metrics.json", metrics).read_text())
    numbers = [v for v in parsed.values() if isinstance(v, (int, float))]
    assert numbers and all(math.isfinite(v) for v in numbers)
    # the overflow-free measures are all there: correlations, IL1, IL2, IL5, the rank and risk families
    for key in ("IL1", "IL2", "IL5", "IL", "MV_X", "MSE_R", "MAE_RF", "IL1s", "brMAE", "PIL", "DLD", "PLD", "ID"):
        assert key in parsed, key
    # squares near 1e600 are not numbers: left out with their reason, never NaN
    assert "MSE_X" not in parsed and parsed["MSE_X_not_finite"] == 1.0
    assert "IL3" not in parsed or parsed["IL3_undefined_terms"] > 0
    # the report and the Prefect tables list the reason among the other keys
    rows = {r["measure"]: r for r in metrics_table_rows(parsed)}
    assert "not finite" in rows["MSE_X_not_finite"]["description"] and "MSE_X" not in rows


def to_parquet_files(df: pd.DataFrame, path, files: int):
    """``df`` written as ``files`` Parquet files (consecutive rows), the directory returned."""
    path.mkdir()
    for i, part in enumerate(np.array_split(np.arange(len(df)), files)):
        df.iloc[part].to_parquet(path / f"part.{i}.parquet", index=False)
    return path


def test_metrics_are_bit_identical_for_1_3_and_8_files(tmp_path, census, sync_dask):
    census = census.iloc[:400].reset_index(drop=True)
    variables = [c for c in census.columns if c != "record_id"]
    rng = np.random.default_rng(2)
    masked = census.copy()
    masked[variables] = census[variables] * np.exp(rng.normal(0, 0.1, (len(census), len(variables))))
    runs = [evaluate_paths(to_parquet_files(census, tmp_path / f"o{k}", k),
                           to_parquet_files(masked, tmp_path / f"m{k}", k), "record_id", variables,
                           variables[:4], FAMILIES)
            for k in (1, 3, 8)]
    runs += [evaluate(dd.from_pandas(census, chunksize=size), dd.from_pandas(masked, chunksize=size), "record_id",
                      variables, variables[:4], FAMILIES) for size in (37, 150)]
    texts = [json.dumps(r, sort_keys=True, allow_nan=False) for r in runs]
    assert all(t == texts[0] for t in texts[1:])
    for key in ("IL1", "MV_X", "IL", "PIL", "MSE_F", "DLD", "PLD", "ID", "brMSE"):
        assert key in runs[0], key


def test_moments_do_not_depend_on_order_or_partitions(sync_dask):
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"a": rng.lognormal(10, 2, 2000), "b": rng.normal(1e9, 1.0, 2000)})
    shuffled = df.sample(frac=1.0, random_state=1)
    sketches = [frame_moments(dd.from_pandas(f, npartitions=k), ["a", "b"], 4)
                for f, k in ((df, 1), (df, 7), (shuffled, 3))]
    for m in sketches[1:]:
        np.testing.assert_array_equal(m.mean, sketches[0].mean)
        np.testing.assert_array_equal(m.sd, sketches[0].sd)
        for key in m.scaled:
            np.testing.assert_array_equal(m.scaled[key], sketches[0].scaled[key])
    assert sketches[0].mean[0] == float(sum(map(Fraction, df["a"].tolist())) / 2000)


def test_the_spread_is_the_moments_mean_and_sd_to_the_bit(sync_dask):
    # frame_spread (block kernels' global statistics) sums only the squares, not the cross products: each sum is
    # exact, so its mean and sd are frame_moments' on any partitioning, with the columns' extremes.
    rng = np.random.default_rng(3)
    df = pd.DataFrame({"a": rng.lognormal(10, 2, 2001), "b": rng.normal(1e9, 1.0, 2001), "c": np.full(2001, 7.5)})
    whole = frame_moments(dd.from_pandas(df, npartitions=1), ["a", "b", "c"])
    for k in (1, 4, 9):
        spread = frame_spread(dd.from_pandas(df.sample(frac=1.0, random_state=k), npartitions=k), ["a", "b", "c"])
        assert spread.n == 2001
        np.testing.assert_array_equal(spread.mean, whole.mean)
        np.testing.assert_array_equal(spread.sd, whole.sd)
        np.testing.assert_array_equal(spread.low, df.min().to_numpy())
        np.testing.assert_array_equal(spread.high, df.max().to_numpy())
    assert spread.sd[2] == 0.0
