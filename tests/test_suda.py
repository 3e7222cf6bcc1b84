"""Special uniques (SUDA2, family ``suda``): minimal sample uniques and SUDA scores against a brute-force search
over the records, the DIS score by hand, and the family through ``evaluate``."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

from sdc_tasks.evaluation.measures import evaluate
from sdc_tasks.generate import bundled_path
from sdc_tasks.metrics.categorical_risk import combination_counts, combination_rows
from sdc_tasks.metrics.suda import MAX_KEYS, dis_scores, msu_scores, msu_weights, suda_measures

KEYS = ["urbrur", "roof", "walls", "water", "electcon", "relat", "sex", "hhcivil"]


def brute_force(frame: pd.DataFrame, keys: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(SUDA score, raw contribution per key) of each record by the definition, record by record: an MSU is a set
    of keys on which the record's values (none missing) occur in no other record, while every proper subset's
    occur in another; each adds (M - size)! to the score and to each of its keys."""
    values = frame[keys].to_numpy(object)
    n, m = values.shape
    missing = pd.isna(frame[keys]).to_numpy()

    def unique(i: int, subset: tuple[int, ...]) -> bool:
        if missing[i, list(subset)].any():
            return False
        return not any(all(not missing[r, j] and values[r, j] == values[i, j] for j in subset)
                       for r in range(n) if r != i)

    score, raw = np.zeros(n), np.zeros((n, m))
    for i in range(n):
        for size in range(1, m + 1):
            for subset in itertools.combinations(range(m), size):
                if unique(i, subset) and not any(unique(i, tuple(j for j in subset if j != drop)) for drop in subset
                                                 if size > 1):
                    score[i] += math.factorial(m - size)
                    raw[i, list(subset)] += math.factorial(m - size)
    return score, raw


def per_record(frame: pd.DataFrame, keys: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """msu_scores on the combination table, spread back to the records."""
    table = combination_counts(frame, keys, {k: False for k in keys})
    score, raw = msu_scores(table, keys)
    index = frame[keys].astype(float).merge(table[keys].reset_index(), on=keys, how="left")["index"].to_numpy()
    return score[index], raw[index]


def test_weights_are_elliots_factorials():
    assert msu_weights(4).tolist() == [6.0, 2.0, 1.0, 1.0]
    assert msu_weights(1).tolist() == [1.0]


def test_a_hand_computed_file():
    # A, B, C: records 1, 2 and 3 are unique on C, B and A alone; records 0 and 4 share every value.
    frame = pd.DataFrame({"A": [1, 1, 1, 2, 1], "B": [1, 1, 2, 1, 1], "C": [1, 2, 1, 1, 1]})
    score, raw = per_record(frame, ["A", "B", "C"])
    assert score.tolist() == [0, 2, 2, 2, 0]  # one MSU of size 1 each: (3 - 1)! = 2
    assert raw[1].tolist() == [0, 0, 2] and raw[3].tolist() == [2, 0, 0]
    # U = 3 uniques, P = 2 records in a pair, f = 0.01: U / Dis - U = P (1 - f) / f = 198; Q = 1.25 and every
    # scored record has score 2, so A = 3 / 2^Q and DIS = 1 / (1 + 198 / 3) = 1 / 67
    measures = suda_measures(combination_counts(frame, list("ABC"), {k: False for k in "ABC"}), list("ABC"))
    assert measures["dis_suda_max"] == pytest.approx(1 / 67, rel=1e-6)
    assert measures["dis_suda_mean"] == pytest.approx(3 / 67 / 5, rel=1e-6)
    assert measures["suda_special_uniques"] == 3 and measures["suda_score_mean"] == pytest.approx(6 / 5)
    assert [measures[f"suda_contribution_{k}"] for k in "ABC"] == pytest.approx([100 / 3] * 3)


def test_a_size_two_msu_needs_both_keys():
    # record 3 is unique on (A, B) only: A = 2 and B = 2 each occur twice
    frame = pd.DataFrame({"A": [2, 2, 1, 2, 1], "B": [2, 1, 2, 2, 1], "C": [1, 1, 1, 2, 1]})
    score, raw = per_record(frame, ["A", "B", "C"])
    expected, expected_raw = brute_force(frame, ["A", "B", "C"])
    np.testing.assert_array_equal(score, expected)
    np.testing.assert_array_equal(raw, expected_raw)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_files_with_missing_values_match_the_brute_force_search(seed):
    rng = np.random.default_rng(seed)
    n, keys = 60, ["a", "b", "c", "d", "e"]
    frame = pd.DataFrame({k: rng.integers(0, 2 + i, n).astype(float) for i, k in enumerate(keys)})
    frame = frame.mask(rng.random(frame.shape) < 0.05)
    table = combination_counts(frame, keys, {k: False for k in keys})
    score, raw = msu_scores(table, keys)
    index = combination_rows(frame, table, keys, {k: False for k in keys})
    expected, expected_raw = brute_force(frame, keys)
    np.testing.assert_array_equal(score[index], expected)
    np.testing.assert_array_equal(raw[index], expected_raw)
    assert (expected > 0).sum() > 5


def test_dis_is_zero_without_a_score_and_grows_with_it():
    dis = dis_scores(np.array([0.0, 1.0, 6.0, 24.0]), n_pair_records=4, m=5)
    assert dis[0] == 0.0 and 0 < dis[1] < dis[2] < dis[3] < 1


def test_too_many_keys_are_refused():
    keys = [f"k{i}" for i in range(MAX_KEYS + 1)]
    table = combination_counts(pd.DataFrame({k: [1, 2] for k in keys}), keys, {k: False for k in keys})
    with pytest.raises(ValueError, match=f"at most {MAX_KEYS} key variables"):
        msu_scores(table, keys)


def test_the_suda_family_on_testdata(sync_dask):
    data = pd.read_csv(bundled_path("testdata.csv")).assign(record_id=lambda d: range(len(d)))
    frame = dd.from_pandas(data, npartitions=4, sort=False)
    metrics = evaluate(frame, frame, "record_id", [], KEYS, ("suda",), categorical=KEYS)
    direct = suda_measures(combination_counts(data, KEYS, {k: False for k in KEYS}), KEYS)
    assert {k: metrics[k] for k in direct} == pytest.approx(direct, rel=1e-12)
    assert 0 < metrics["dis_suda_mean"] < metrics["dis_suda_max"] < 1
    assert metrics["suda_special_uniques"] <= metrics.get("sample_uniques", len(data))


SDCMICRO = Path(__file__).parent / "data" / "sdcmicro" / "suda2_testdata.csv"
"""sdcMicro 5.8.1's suda2 on testdata.csv, the records with a score (how it was made: the file's header)."""
SDCMICRO_CONTRIBUTIONS = {"urbrur": 10.5977909413073, "roof": 30.0499236917665, "walls": 15.4194366124318,
                          "water": 49.0881812773222, "electcon": 19.6099226570786, "relat": 78.8613259525596,
                          "sex": 23.9400915698802, "hhcivil": 31.3769109392380}


def test_equal_to_sdcmicro_suda2_on_testdata():
    """Every record's SUDA score equal to sdcMicro's exactly, its DIS score within 2e-8 (sdcMicro evaluates part of
    it in single precision), each key's contribution to the 13 digits sdcMicro prints."""
    data = pd.read_csv(bundled_path("testdata.csv"))
    reference = pd.read_csv(SDCMICRO, comment="#")
    score, _ = per_record(data, KEYS)
    expected = np.zeros(len(data))
    expected[reference["row"].to_numpy() - 1] = reference["score"].to_numpy()
    np.testing.assert_array_equal(score, expected)
    table = combination_counts(data, KEYS, {k: False for k in KEYS})
    scores, _ = msu_scores(table, KEYS)
    records = table["__count"].to_numpy()
    dis = dis_scores(scores, int(2 * (records == 2).sum()), len(KEYS))
    index = data[KEYS].astype(float).merge(table[KEYS].reset_index(), on=KEYS, how="left")["index"].to_numpy()
    expected_dis = np.zeros(len(data))
    expected_dis[reference["row"].to_numpy() - 1] = reference["disScore"].to_numpy()
    assert np.abs(dis[index] - expected_dis).max() < 2e-8
    measures = suda_measures(table, KEYS)
    for key, value in SDCMICRO_CONTRIBUTIONS.items():
        assert measures[f"suda_contribution_{key}"] == pytest.approx(value, abs=1e-12)
    assert measures["suda_special_uniques"] == len(reference) == 219
