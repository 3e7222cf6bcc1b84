"""Categorical information loss and disclosure risk (docs/categorical.md; sdc_methods_comparison_chapter.txt sec. 5;
sdcMicro freqCalc/indivRisk). Expected values are written out by hand from the formulas, come from brute force
over record pairs, from pandas group-bys or from recordlinkage's ECM; never from the code under test run twice.
"""

from __future__ import annotations

import math

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from compatible_totals_reference import reference_compatible_totals

from sdc_tasks.errors import InputError
from sdc_tasks.evaluation.measures import evaluate
from sdc_tasks.generate import bundled_path
from sdc_tasks.metrics import categorical_risk, pld
from sdc_tasks.metrics.catalogue import gated_families
from sdc_tasks.metrics.categorical_loss import categorical_loss, loss_counts
from sdc_tasks.metrics.categorical_risk import (
    COUNT,
    WEIGHT,
    combination_counts,
    compatible_totals,
    individual_risk,
    kanonymity,
    risk_measures,
)

KEYS = ["urbrur", "roof", "walls", "water", "electcon", "relat", "sex", "hhcivil"]
SUFFIX = "__masked"


@pytest.fixture(scope="module")
def households() -> pd.DataFrame:
    """The bundled household survey with a record_id column."""
    df = pd.read_csv(bundled_path("testdata.csv"))
    df.insert(0, "record_id", np.arange(len(df)))
    return df


def _paired(orig: dict, masked: dict) -> pd.DataFrame:
    """A paired partition from column dicts."""
    return pd.DataFrame({**orig, **{k + SUFFIX: v for k, v in masked.items()}})


def _run(original: pd.DataFrame, masked: pd.DataFrame, parts: int = 3, **kw) -> dict:
    """evaluate() on pandas frames split into ``parts`` partitions, synchronously."""
    with dask.config.set(scheduler="synchronous"):
        return evaluate(dd.from_pandas(original, npartitions=parts), dd.from_pandas(masked, npartitions=parts),
                        "record_id", [], [], kw.pop("families", ("cat_il", "cat_risk")), **kw)


# ---------------------------------------------------------------- information loss, hand cases

HAND = _paired({"x": [1, 1, 2, 3], "y": [1, 2, 3, 4], "z": [1, 2, 1, 2]},
               {"x": [1, 2, 2, 1], "y": [3, 2, np.nan, 1], "z": [1, 2, 1, 2]})


def test_dist_hand_case():
    counts = loss_counts(HAND, ["x", "y"], {"x": False, "y": False}, SUFFIX)
    out = categorical_loss(counts, {"y": [1.0, 2.0, 3.0, 4.0]}, 4)
    # x nominal: 0 + 1 + 0 + 1; y ordinal, K = 4: |0-2|/3 + 0 + 1 (suppressed) + |3-0|/3
    assert out["Dist"] == pytest.approx(2 + 2 / 3 + 0 + 1 + 1)
    assert out["Dist_mean"] == pytest.approx((14 / 3) / 8)


def test_ctbil_hand_case():
    counts = loss_counts(HAND, ["x", "z"], {"x": False, "z": False}, SUFFIX)
    out = categorical_loss(counts, {}, 4)
    # x table: orig {1:2, 2:1, 3:1} vs masked {1:2, 2:2}: 0 + 1 + 1; z unchanged: 0;
    # (x, z): orig {(1,1),(1,2),(2,1),(3,2)} vs masked {(1,1),(2,2),(2,1),(1,2)}: (3,2) and (2,2) differ by 1
    assert out["CTBIL"] == 4.0
    # cells: x has 3 categories, z 2: 3 + 2 + 3 * 2
    assert out["ACTBIL"] == pytest.approx(4 / 11)


def test_entropy_measures_hand_case():
    counts = loss_counts(HAND, ["x"], {"x": False}, SUFFIX)
    reference = {"x": pd.Series({1.0: 1.0, 2.0: 1.0, 3.0: 2.0})}
    out = categorical_loss(counts, {}, 4, reference)
    # MF: P(i | j) = n_ij / n_j: masked 1 <- {1, 3}, masked 2 <- {1, 2}, each half
    assert out["EBIL_MF"] == pytest.approx(4 * math.log(2))
    assert out["PRIL_MF"] == pytest.approx(4 * math.log(2))
    # RF: prior (1/4, 1/4, 1/2); P(j | i): 1 -> (1/2, 1/2), 2 -> 2, 3 -> 1
    # P(. | j=1) = (1/8, 1/2) normalised = (1/5, 4/5); P(. | j=2) = (1/8, 1/4) normalised = (1/3, 2/3)
    h = lambda *p: -sum(q * math.log(q) for q in p)  # noqa: E731
    assert out["EBIL_RF"] == pytest.approx(2 * h(0.2, 0.8) + 2 * h(1 / 3, 2 / 3))
    assert out["PRIL_RF"] == pytest.approx(-math.log(0.2) - math.log(1 / 3) - math.log(2 / 3) - math.log(0.8))
    assert out["PRIL_RF_undefined_terms"] == 0


def test_reference_without_a_category_leaves_terms_out():
    counts = loss_counts(HAND, ["x"], {"x": False}, SUFFIX)
    out = categorical_loss(counts, {}, 4, {"x": pd.Series({1.0: 3.0, 2.0: 1.0})})
    # category 3 has no mass: its record (3 -> 1) has P = 0; others: P(1 | 1) = 1, P(. | 2) = (3/8, 1/4) -> (3/5, 2/5)
    assert out["PRIL_RF_undefined_terms"] == 1
    assert out["PRIL_RF"] == pytest.approx(0 - math.log(0.6) - math.log(0.4))


# ---------------------------------------------------------------- properties on the household file


def test_identity_masking_loses_nothing(households):
    out = _run(households, households, categorical=KEYS, ordinal={"walls": [2, 3, 9]})
    assert out["Dist"] == out["CTBIL"] == out["ACTBIL"] == 0
    assert out["EBIL_MF"] == out["PRIL_MF"] == 0
    combos = households.groupby(KEYS).ngroups
    assert out["PLD_cat"] == pytest.approx(100 * combos / len(households))  # 1/g credit per tied record
    sizes = households.groupby(KEYS)["record_id"].transform("size")
    assert out["kanon_min_group"] == sizes.min()
    for k in (2, 3, 5):
        assert out[f"kanon_violations_{k}"] == (sizes < k).sum()
    assert out["sample_uniques"] == (sizes == 1).sum()


def test_recoding_hand_checked_and_partition_independent(households):
    masked = households.copy()
    masked.loc[masked["walls"] == 9, "walls"] = 3  # top-code the last 2 categories of walls
    one = _run(households, masked, 1, categorical=KEYS, ordinal={"walls": [2, 3, 9]})
    many = _run(households, masked, 7, categorical=KEYS, ordinal={"walls": [2, 3, 9]})
    changed = int((households["walls"] == 9).sum())
    assert one["Dist"] == pytest.approx(changed * 0.5)  # ordinal 9 -> 3: one rank of K - 1 = 2
    n3, n9 = int((households["walls"] == 3).sum()), changed
    h = -(n3 / (n3 + n9)) * math.log(n3 / (n3 + n9)) - (n9 / (n3 + n9)) * math.log(n9 / (n3 + n9))
    assert one["EBIL_MF"] == pytest.approx((n3 + n9) * h)  # only masked category 3 is uncertain
    assert one["PRIL_MF"] == pytest.approx(one["EBIL_MF"])
    for key, value in one.items():
        assert many[key] == (value if isinstance(value, list) else pytest.approx(value, rel=1e-12)), key


def test_text_categories_and_codes_compare(households):
    masked = households.copy()
    masked["sex"] = masked["sex"].map({1: "1", 2: "2"})
    out = _run(households, masked, categorical=["sex", "walls"], families=("cat_il",))
    assert out["Dist"] == 0 and out["CTBIL"] == 0


# ---------------------------------------------------------------- k-anonymity with missing values


def _brute_force(table: pd.DataFrame, keys: list[str]) -> np.ndarray:
    """Per record, the records compatible with it (equal where neither is missing), O(n^2)."""
    x = table[keys].to_numpy(np.float64)
    ok = np.ones((len(x), len(x)), dtype=bool)
    for j in range(x.shape[1]):
        a, b = x[:, j][:, None], x[:, j][None, :]
        ok &= (a == b) | np.isnan(a) | np.isnan(b)
    return ok.sum(axis=1)


@pytest.mark.parametrize("share", [0.05, 0.4])
def test_compatible_counts_match_brute_force(share):
    rng = np.random.default_rng(3)
    frame = pd.DataFrame(rng.integers(1, 4, size=(300, 3)).astype(float), columns=["a", "b", "c"])
    frame = frame.mask(rng.random(frame.shape) < share)
    frame["w"] = rng.uniform(1, 5, len(frame))
    table = combination_counts(frame, ["a", "b", "c"], dict.fromkeys("abc", False), "w")
    totals = compatible_totals(table, ["a", "b", "c"])
    per_record = frame[["a", "b", "c"]].merge(
        pd.concat([table.drop(columns=[COUNT, WEIGHT]).replace(-np.inf, np.nan), totals], axis=1),
        on=["a", "b", "c"], how="left")
    assert np.array_equal(per_record[COUNT].to_numpy(), _brute_force(frame, ["a", "b", "c"]))
    f = _brute_force(frame, ["a", "b", "c"])
    out = kanonymity(table, ["a", "b", "c"])
    assert out["kanon_min_group"] == f.min()
    assert out["kanon_violations_3"] == (f < 3).sum()
    assert out["sample_uniques"] == (f == 1).sum()


def _bits(frame: pd.DataFrame) -> np.ndarray:
    """The doubles of ``frame`` as their bit patterns."""
    return frame.to_numpy(np.float64).view(np.int64)


@pytest.mark.parametrize("seed", range(6))
def test_compatible_totals_equal_the_group_by_on_the_keys_to_the_bit(seed):
    """Random tables of 2 to 6 keys (one read as text), up to 35 % of a key's values missing, log-normal weights;
    seed 5 has 8 keys of up to 2,000 values each (up to 3 % missing: the reference's time grows with the square of
    the missing patterns), so the integer codes are made dense on the way."""
    rng = np.random.default_rng(seed)
    wide = seed == 5
    keys = [f"k{j}" for j in range(8 if wide else 2 + seed % 5)]
    n = 300
    frame = pd.DataFrame({k: rng.integers(0, 2000 if wide else 2 + 3 * j, n).astype(float)
                          for j, k in enumerate(keys)})
    frame = frame.mask(rng.random(frame.shape) < rng.uniform(0.0, 0.03 if wide else 0.35, len(keys)))
    text = {k: j == 1 for j, k in enumerate(keys)}
    frame[keys[1]] = frame[keys[1]].map(lambda v: None if np.isnan(v) else f"v{v:.0f}")
    frame["w"] = rng.lognormal(3, 1.5, n)
    table = combination_counts(frame, keys, text, "w")
    totals = compatible_totals(table, keys)
    reference = reference_compatible_totals(table, keys)
    assert totals.columns.tolist() == reference.columns.tolist() and totals.index.equals(reference.index)
    assert np.array_equal(_bits(totals), _bits(reference))


def test_compatible_totals_of_more_keys_than_an_int64_has_bits():
    """70 binary keys, four missing patterns, two of them beyond bit 62 (an int64 shift would lose keys 64-69):
    the missing patterns are Python integers."""
    rng = np.random.default_rng(70)
    keys = [f"k{j}" for j in range(70)]
    frame = pd.DataFrame(rng.integers(0, 2, size=(200, 70)).astype(float), columns=keys)
    frame.iloc[:20] = frame.iloc[20:40].to_numpy()  # combinations of two records each
    frame.iloc[40:45] = frame.iloc[100:105].to_numpy()
    frame.iloc[40:45, 64:] = np.nan  # compatible with records 100-104 only through keys 64-69
    frame.iloc[:3, 0:6] = np.nan
    frame.iloc[50:53, 63] = np.nan
    table = combination_counts(frame, keys, dict.fromkeys(keys, False))
    assert np.array_equal(_bits(compatible_totals(table, keys)), _bits(reference_compatible_totals(table, keys)))


def test_compatible_totals_of_the_survey_equal_the_group_by_on_the_keys_to_the_bit():
    """The simulated survey's seven categorical keys with sampling weights, as read and with 2 % of the key values
    suppressed."""
    survey = pd.read_csv(bundled_path("testdata.csv"))
    keys = ["urbrur", "roof", "walls", "water", "electcon", "relat", "sex"]
    suppressed = survey.copy()
    suppressed[keys] = survey[keys].mask(np.random.default_rng(1).random((len(survey), len(keys))) < 0.02)
    for frame in (survey, suppressed):
        table = combination_counts(frame, keys, dict.fromkeys(keys, False), "sampling_weight")
        assert np.array_equal(_bits(compatible_totals(table, keys)), _bits(reference_compatible_totals(table, keys)))


def test_missing_value_joins_every_compatible_group():
    # (1, 1) x2, (1, 2) x1, (1, NaN) x1: the suppressed record matches both groups
    frame = pd.DataFrame({"a": [1.0, 1.0, 1.0, 1.0], "b": [1.0, 1.0, 2.0, np.nan]})
    table = combination_counts(frame, ["a", "b"], {"a": False, "b": False})
    out = kanonymity(table, ["a", "b"])
    # compatible counts: (1,1): 3, (1,2): 2, (1,NaN): 4
    assert out["kanon_min_group"] == 2
    assert out["kanon_violations_3"] == 1
    assert out["sample_uniques"] == 0


# ---------------------------------------------------------------- individual risk


def test_individual_risk_hand_values():
    f = np.array([1, 2, 3, 1, 2, 4])
    big_f = np.array([4, 4, 6, 1, 2, 4])
    expected = [(0.25 / 0.75) * math.log(4),  # f = 1, p = 1/4
                1 - math.log(2),  # f = 2, p = 1/2: p/(1-p) - (p/(1-p))^2 ln(1/p)
                0.5 / (3 - 0.5),  # f = 3, p = 1/2
                1.0, 0.5, 0.25]  # p = 1: limits 1/f
    np.testing.assert_allclose(individual_risk(f, big_f), expected, rtol=1e-12)


@pytest.mark.parametrize("q", [1e-2, 1.5e-3, 9e-4, 1e-6])
def test_individual_risk_matches_the_sdcmicro_closed_form(q):
    p = 1 - q
    x = p / (1 - p)
    got = individual_risk(np.array([1, 2]), np.array([1 / p, 2 / p]))
    np.testing.assert_allclose(got, [x * math.log(1 / p), x - x**2 * math.log(1 / p)], rtol=1e-6 if q > 1e-4 else 1e-3)


def test_risk_measures_and_bad_weights():
    frame = pd.DataFrame({"a": [1.0, 2.0, 2.0], "w": [4.0, 2.0, 2.0]})
    table = combination_counts(frame, ["a"], {"a": False}, "w")
    out = risk_measures(table, ["a"], "w")
    r1, r2 = (1 / 3) * math.log(4), 1 - math.log(2)  # f=1, F=4; f=2, F=4 -> p = 1/2
    assert out["expected_reidentifications"] == pytest.approx(r1 + 2 * r2)
    assert out["indiv_risk_max"] == pytest.approx(r1)
    assert out["records_risk_above_0.1"] == pytest.approx(100.0)
    frame["w"] = 0.5
    with pytest.raises(InputError, match="'w'"):
        risk_measures(combination_counts(frame, ["a"], {"a": False}, "w"), ["a"], "w")


# ---------------------------------------------------------------- PLD on categorical keys


def test_pld_cat_identity_with_unique_combinations_links_everyone():
    grid = pd.MultiIndex.from_product([[1, 2, 3], [1, 2], [1, 2, 3, 4]]).to_frame(index=False)
    grid.columns = ["a", "b", "c"]
    grid.insert(0, "record_id", np.arange(len(grid)))
    out = _run(grid, grid, categorical=["a", "b", "c"], families=("cat_risk",))
    assert out["PLD_cat"] == pytest.approx(100.0)
    assert out["sample_uniques_percent"] == pytest.approx(100.0)


def test_pld_cat_refuses_a_key_so_fine_that_candidates_explode_naming_it(monkeypatch):
    rng = np.random.default_rng(3)
    original = pd.DataFrame({"record_id": np.arange(400), "sex": rng.integers(1, 3, 400),
                             "region": rng.integers(1, 4, 400), "area": rng.integers(1, 151, 400)})
    masked = original.assign(area=rng.integers(1, 151, 400))
    # candidate pairs before merging duplicates, counted by brute force over the two tables of combinations:
    # per key left out, the (masked, original) combination pairs equal on the other two keys
    keys = ["sex", "region", "area"]
    m_combos = masked[keys].drop_duplicates().to_numpy()
    o_combos = original[keys].drop_duplicates().to_numpy()
    equal = m_combos[:, None, :] == o_combos[None, :, :]
    per_key = {k: int(np.delete(equal, i, axis=2).all(axis=2).sum()) for i, k in enumerate(keys)}
    total = sum(per_key.values())
    assert max(per_key, key=per_key.get) == "area"
    available = total * categorical_risk.PAIR_BYTES - 1
    monkeypatch.setattr(categorical_risk, "available_memory", lambda: available)
    with pytest.raises(InputError, match=rf"^cat_risk: PLD_cat would weigh {total:,} candidate pairs of key "
                                         rf"combinations, about {total * 1200 / 2**30:.1f} GiB where "
                                         rf"{available / 2**30:.1f} GiB are available; {per_key['area']:,} of them "
                                         rf"are pairs that differ on area \({original['area'].nunique()} "
                                         r"categories\): take so fine a key "):
        _run(original, masked, categorical=keys, families=("cat_risk",))
    monkeypatch.undo()
    assert 0 <= _run(original, masked, categorical=keys, families=("cat_risk",))["PLD_cat"] <= 100


def test_transport_equals_record_assignment():
    rng = np.random.default_rng(5)
    supply, demand = rng.integers(1, 4, 5), rng.integers(1, 4, 4)
    rows, cols = np.meshgrid(np.arange(5), np.arange(4), indexing="ij")
    rows, cols = rows.ravel(), cols.ravel()
    w = rng.normal(size=rows.size)
    flow = pld.transport_max_weight(rows, cols, w, supply, demand)
    assert (np.bincount(rows, flow, 5) <= supply).all() and (np.bincount(cols, flow, 4) <= demand).all()
    # the same graph with every record a node: each record pair carries its groups' weight
    r_rec, c_rec = np.repeat(np.arange(5), supply), np.repeat(np.arange(4), demand)
    rr, cc = np.meshgrid(np.arange(r_rec.size), np.arange(c_rec.size), indexing="ij")
    rr, cc = rr.ravel(), cc.ravel()
    wmat = w.reshape(5, 4)[r_rec[rr], c_rec[cc]]
    ar, ac = pld.assign_max_weight(rr, cc, wmat, r_rec.size, c_rec.size)
    assert flow @ w == pytest.approx(wmat[np.searchsorted(rr * c_rec.size + cc, ar * c_rec.size + ac)].sum())


def test_binary_em_agrees_with_recordlinkage_ecm(households):
    recordlinkage = pytest.importorskip("recordlinkage")
    rng = np.random.default_rng(11)
    keys = ["roof", "walls", "water", "relat", "hhcivil"]
    x = households[keys].to_numpy()
    masked = x.copy()
    flip = rng.random(x.shape) < 0.15  # PRAM-like: a random category of the column
    masked[flip] = np.array([rng.choice(x[:, j]) for j in np.nonzero(flip)[1]])
    rows = np.repeat(np.arange(len(x)), 4)
    cols = rng.integers(0, len(x), rows.size)
    cols[::4] = np.arange(len(x))
    levels = (masked[rows] != x[cols]).astype(np.int8)
    ours = pld.fit_fellegi_sunter(pld.pattern_counts(pld.pattern_codes(levels, 2), 2 ** len(keys)), len(keys), 2)
    agree = pd.DataFrame(1 - levels, columns=keys, index=pd.MultiIndex.from_arrays([rows, cols]))
    ecm = recordlinkage.ECMClassifier(binarize=None, max_iter=5000, atol=1e-12)
    ecm.fit(agree)
    np.testing.assert_allclose(ours.m[:, 0], [ecm.m_probs[k][1] for k in keys], atol=1e-3)
    np.testing.assert_allclose(ours.u[:, 0], [ecm.u_probs[k][1] for k in keys], atol=1e-3)
    assert ours.p == pytest.approx(ecm.p, abs=1e-3)


# ---------------------------------------------------------------- bad input and gates


def test_unknown_variables_are_named(households):
    with pytest.raises(InputError, match="'tenure'"):
        _run(households, households, categorical=["sex", "tenure"])
    with pytest.raises(InputError, match="'age'"):
        _run(households, households, categorical=["sex"], ordinal={"age": [1, 2]})
    with pytest.raises(InputError, match="'walls'"):
        _run(households, households, categorical=["walls"], ordinal={"walls": [2, 3]}, families=("cat_il",))
    with pytest.raises(InputError, match="'hh_weight'"):
        _run(households, households, categorical=["sex"], weight="hh_weight", families=("cat_risk",))


def test_gate_knows_the_categorical_keys():
    assert gated_families("kanon_violations_3") == ("cat_risk",)
    assert gated_families("PLD_cat") == ("cat_risk",)
    assert gated_families("ACTBIL") == ("cat_il",)
    assert gated_families("PLD") == ("pld",)
