"""Tests for the metric catalogue (sdc_tasks/metrics/catalogue.py) against what the evaluation really produces.

Full evaluations (every continuous family, the published setups included, and cat_il / cat_risk with a weight
column and a reference file on data/testdata.csv; a small file near the float range; a one-configuration method
comparison) must produce only catalogued keys, every catalogue row must be produced by one of them, each value
must lie in its row's range and each key must come from the family its row names. docs/metrics.md must hold the
key table the catalogue generates.
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

from sdc_tasks.comparison import outputs as O
from sdc_tasks.comparison import run as C
from sdc_tasks.evaluation.measures import FAMILY_UNITS, evaluate
from sdc_tasks.generate import bundled_path
from sdc_tasks.metrics import catalogue as cat
from sdc_tasks.metrics.risk import scores

ROOT = Path(__file__).resolve().parents[1]
CONTINUOUS = ["expend", "income", "savings", "age"]
CATEGORICAL = ["urbrur", "roof", "walls", "water", "sex"]
KEYS = ["expend", "income", "sex", "walls"]
# written by the release flow only (flows/release.py), beside the evaluation's keys
RELEASE_ONLY = {"seed", *(m.key for m in cat.MEASURES if m.family in cat.OUTCOME_METHODS)}  # test_postmask_outcome.py,
# test_record_swap.py
REFRESH = ("python -c \"import pathlib; from sdc_tasks.metrics.catalogue import with_key_table as w; "
           "p = pathlib.Path('docs/metrics.md'); p.write_text(w(p.read_text()))\"")


@pytest.fixture(scope="module", autouse=True)
def synchronous_dask():
    """Every Dask computation of this module in the calling thread."""
    with dask.config.set(scheduler="synchronous"), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        yield


def households(rows: int | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """data/testdata.csv with an id, and a masked copy: 10 % noise on the continuous variables, roof shuffled."""
    df = pd.read_csv(bundled_path("testdata.csv"))
    df = df.iloc[:rows] if rows else df
    df.insert(0, "id", np.arange(len(df)))
    rng = np.random.default_rng(3)
    masked = df.copy()
    for v in CONTINUOUS:
        masked[v] = masked[v] + rng.normal(0.0, 0.1 * masked[v].std(), len(masked))
    masked["roof"] = masked["roof"].sample(frac=1.0, random_state=1).to_numpy()
    return df, masked


def run(original: pd.DataFrame, masked: pd.DataFrame, families: tuple[str, ...], **kw) -> dict:
    """evaluate() over two-partition Dask frames on the household variables."""
    return evaluate(dd.from_pandas(original, npartitions=2), dd.from_pandas(masked, npartitions=2), "id",
                    CONTINUOUS, KEYS, families, **kw)


@pytest.fixture(scope="module")
def full() -> dict:
    """Every family at once on testdata.csv, with a weight column, a reference file, households and two sensitive
    variables."""
    original, masked = households()
    return run(original, masked, cat.FAMILIES, categorical=CATEGORICAL, weight="sampling_weight",
               reference=dd.from_pandas(original, npartitions=1), sensitive=["water", "electcon"], household="ori_hid")


@pytest.fixture(scope="module")
def extreme() -> dict:
    """il and pil on 40 records near the float range: squares overflow (<key>_not_finite) and n' < 100."""
    x = np.linspace(1.0, 2.0, 40)[:, None] * np.array([[1e300, 3e299, 1.0]])
    original = pd.DataFrame(x, columns=["a", "b", "c"])
    original.insert(0, "id", np.arange(40))
    masked = original.assign(a=original["a"] * -1.5, c=original["c"][::-1].to_numpy())
    return evaluate(dd.from_pandas(original, npartitions=1), dd.from_pandas(masked, npartitions=1), "id",
                    ["a", "b", "c"], [], ("il", "pil"))


@pytest.fixture(scope="module")
def compared(tmp_path_factory) -> dict:
    """The metrics.json entry of a one-configuration comparison (rank swapping) of 150 Census records."""
    folder = tmp_path_factory.mktemp("cmp")
    pd.read_csv(bundled_path("census.csv")).iloc[:150, :4].to_csv(folder / "small.csv", index=False)
    grid = C.parse_grid({"name": "one", "seed": 1, "families": [
        {"label": "Rank", "method": "rankswap", "sweep": {"param": "p", "values": [5], "label_format": "02d"}}]})
    O.comparison(folder / "small.csv", folder / "out", grid)
    return json.loads((folder / "out" / "metrics.json").read_text())["Rank05"]


def example_key(measure: cat.Measure) -> str:
    """A key the row describes: the literal key, or the numbered key with 3 (or IL2 for <key>; sample_uniques for
    the original-file figure of a key)."""
    return measure.key.replace("<i>", "3").replace("<key>", "sample_uniques" if measure.derived else "IL2")


def test_every_produced_key_is_catalogued(full, extreme, compared):
    for metrics in (full, extreme, compared):
        for key in metrics:
            cat.measure_of(key)


def test_every_catalogue_row_is_produced(full, extreme, compared):
    produced = [*full, *extreme, *compared]
    idle = [m.key for m in cat.MEASURES
            if m.key not in RELEASE_ONLY and not any(re.fullmatch(m.pattern, k) for k in produced)]
    assert idle == []


def test_produced_values_lie_in_their_range(full, extreme, compared):
    for metrics in (full, extreme, compared):
        for key, value in metrics.items():
            bounds = cat.measure_of(key).range
            if bounds is not None:
                assert bounds[0] <= value <= bounds[1], key


def test_rows_are_complete_and_resolve_to_themselves():
    for m in cat.MEASURES:
        assert m.family and m.description and m.unit and m.source, m.key
        assert m.group in cat.GROUP_ORDER and m.direction in (cat.LOWER, cat.HIGHER, cat.NEUTRAL), m.key
        if m.derived:  # described as the key it derives from, under this row's key and anchor
            assert cat.row_anchor(cat.measure_of(example_key(m))) == cat.row_anchor(m), m.key
        else:
            assert cat.measure_of(example_key(m)) is m, m.key
        assert m.range is None or m.range[0] <= m.range[1]
    assert len({m.key for m in cat.MEASURES}) == len(cat.MEASURES)


def test_unknown_key_is_named():
    with pytest.raises(KeyError, match="'IL6'"):
        cat.measure_of("IL6")
    assert cat.gated_families("IL6") is None


def test_numbered_descriptions_carry_the_number():
    assert "1..4" in cat.description_of("DLD_4")
    assert "smaller than 5" in cat.description_of("kanon_violations_5")
    assert cat.description_of("MV_X_undefined_terms").startswith("Terms of MV_X ")
    assert cat.key_order("DLD_10") > cat.key_order("DLD_9") > cat.key_order("IL")


def test_true_units_of_the_matrix_measures():
    units = {k: cat.measure_of(k).unit for k in ("MSE_X", "MAE_X", "MV_X", "MSE_V", "MAE_V", "MAE_R", "IL1", "PIL_Q")}
    assert units == {"MSE_X": cat.SQUARED, "MAE_X": cat.DATA, "MV_X": cat.FRACTION, "MSE_V": cat.FOURTH,
                     "MAE_V": cat.SQUARED, "MAE_R": cat.UNITLESS, "IL1": cat.PERCENT, "PIL_Q": cat.FRACTION}


def test_a_family_alone_gives_exactly_its_rows():
    """Each family evaluated alone produces keys whose rows name that family (scores, diagnostics and
    bookkeeping aside), and the evaluator has one unit per catalogue family."""
    assert list(FAMILY_UNITS) == list(cat.FAMILIES)
    original, masked = households(rows=300)
    for family in cat.FAMILIES:
        kw = {"categorical": CATEGORICAL, "weight": "sampling_weight", "sensitive": ["electcon"]} \
            if family in cat.CATEGORICAL_FAMILIES else {}
        metrics = run(original, masked, (family,), **kw)
        named = {cat.measure_of(k).family for k in metrics} - {cat.SCORE, cat.DIAGNOSTIC, cat.BOOKKEEPING}
        assert named == {family}


@pytest.mark.parametrize("score", ["score", "score_simple", "score_pil"])
def test_gated_families_of_a_score_are_those_it_is_computed_from(score):
    """scores() drops a score exactly when a measure of one of its gated families is missing."""
    parts = {"IL": 10.0, "PIL": 20.0, "DLD": 5.0, "PLD": 4.0, "ID": 50.0}
    needs = cat.gated_families(score)
    assert score in scores(parts)
    for key in parts:
        without = {k: v for k, v in parts.items() if k != key}
        assert (score in scores(without)) == (cat.measure_of(key).family not in needs), key


def test_gate_takes_lower_is_better_measures_of_computed_families():
    assert cat.gated_families("DLD_3") == ("dld",)
    assert cat.gated_families("PLD_candidate_recall") == ("pld",)
    assert cat.gated_families("kanon_violations_3") == ("cat_risk",)
    assert cat.gated_families("score") == ("il", "dld", "pld", "id")
    for key in ("kanon_min_group", "PLD_em_iterations", "MV_X_undefined_terms", "PIL_small_sample", "n", "risk"):
        assert cat.gated_families(key) is None, key


def test_family_split_covers_every_family_once():
    assert sorted((*cat.IL_FAMILIES, *cat.RISK_FAMILIES)) == sorted(cat.FAMILIES)
    assert set(cat.DEFAULT_FAMILIES) <= set(cat.FAMILIES)
    assert set(cat.CATEGORICAL_FAMILIES) <= set(cat.FAMILIES)
    assert [f.name for f in cat.families()] == list(cat.FAMILIES)


def test_docs_key_table_is_current():
    text = (ROOT / "docs" / "metrics.md").read_text(encoding="utf-8")
    assert cat.with_key_table(text) == text, f"docs/metrics.md's key table is stale; rewrite it with {REFRESH}"
    assert cat.markdown_key_table().count("\n") == len(cat.MEASURES) + 2



def test_every_catalogue_row_has_an_anchored_entry_and_a_definition_in_the_docs():
    text = (ROOT / "docs" / "metrics.md").read_text()
    definitions = text[:text.index("## All keys")]
    anchors = [cat.row_anchor(m) for m in cat.MEASURES]
    assert len(set(anchors)) == len(anchors)
    for measure, anchor in zip(cat.MEASURES, anchors):
        assert f'<a id="{anchor}"></a>`{measure.key}`' in text, measure.key
        numbered = measure.key.endswith("_<i>")  # DLD_<i> is defined as DLD_i, ID_<i> as ID_p
        word = re.escape(measure.key[:-3]) + r"[a-z]\b" if numbered else re.escape(measure.key) + r"(?![\w])"
        assert re.search(rf"(?<![\w]){word}", definitions), f"{measure.key} is not defined"
    assert cat.anchor_of("DLD_3") == "dld-i" and cat.docs_link("MSE_X") == "docs/metrics.md#mse-x"
    assert "METRICS.md" not in text and "shared/" not in text
