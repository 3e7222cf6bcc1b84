"""Tests for the synthetic Census generator (sdc_tasks.generate)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sdc_tasks import generate
from sdc_tasks.errors import InputError
from sdc_tasks.generate import (
    CENSUS_VARIABLES,
    bundled_path,
    census_model,
    census_reference,
    synthetic_chunk,
    write_synthetic,
)

ROWS, PER_FILE, SEED, STRATA = 2500, 1000, 7, 4


@pytest.fixture(scope="module")
def reference() -> pd.DataFrame:
    """The bundled Census file."""
    return census_reference()


@pytest.fixture(scope="module")
def model(reference):
    """The copula fitted to the bundled Census file."""
    return census_model(reference)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """Paths of a 3-part stratified dataset (1000 + 1000 + 500 rows)."""
    out = tmp_path_factory.mktemp("gen") / "synthetic"
    return write_synthetic(out, ROWS, seed=SEED, strata=STRATA, rows_per_file=PER_FILE)


@pytest.fixture(scope="module")
def sample(model) -> pd.DataFrame:
    """A 50k-row chunk for distributional checks."""
    return synthetic_chunk(model, 50_000, seed=1, chunk_index=0, first_id=0)


def test_bundled_path_finds_census_and_rejects_unknown_names():
    assert bundled_path("census.csv").is_file()
    with pytest.raises(InputError, match="no-such-file.csv"):
        bundled_path("no-such-file.csv")


def test_reference_has_the_census_variables(reference):
    assert tuple(reference.columns) == CENSUS_VARIABLES
    assert len(reference) == 1080


def test_parts_are_named_sized_and_ids_consecutive(dataset):
    assert [p.name for p in dataset] == ["part-00000.parquet", "part-00001.parquet", "part-00002.parquet"]
    parts = [pd.read_parquet(p) for p in dataset]
    assert [len(p) for p in parts] == [1000, 1000, 500]
    ids = pd.concat(parts)["record_id"].to_numpy()
    np.testing.assert_array_equal(ids, np.arange(ROWS))


def test_schema(dataset, model):
    frame = pd.read_parquet(dataset[0])
    assert list(frame.columns) == ["record_id", *CENSUS_VARIABLES, "stratum"]
    assert frame["record_id"].dtype == np.int64
    assert all(frame[c].dtype == np.float64 for c in CENSUS_VARIABLES)
    plain = synthetic_chunk(model, 10, seed=0, chunk_index=0, first_id=0)
    assert list(plain.columns) == ["record_id", *CENSUS_VARIABLES]


def test_strata_column_has_k_unequal_levels(dataset):
    stratum = pd.concat(pd.read_parquet(p) for p in dataset)["stratum"].astype(str)
    counts = stratum.value_counts()
    assert sorted(counts.index) == ["s00", "s01", "s02", "s03"]
    assert counts["s00"] > 1.5 * counts["s03"]


def test_same_seed_same_data_other_seed_other_data(model):
    first = synthetic_chunk(model, 500, seed=3, chunk_index=2, first_id=10, strata=3)
    pd.testing.assert_frame_equal(first, synthetic_chunk(model, 500, seed=3, chunk_index=2, first_id=10, strata=3))
    other_seed = synthetic_chunk(model, 500, seed=4, chunk_index=2, first_id=10, strata=3)
    other_chunk = synthetic_chunk(model, 500, seed=3, chunk_index=3, first_id=10, strata=3)
    for other in (other_seed, other_chunk):
        assert not np.allclose(first[list(CENSUS_VARIABLES)], other[list(CENSUS_VARIABLES)])


def test_written_parts_are_the_chunks_of_their_index(dataset, model):
    for index, path in enumerate(dataset):
        rows = min(PER_FILE, ROWS - index * PER_FILE)
        expected = synthetic_chunk(model, rows, SEED, index, index * PER_FILE, STRATA)
        pd.testing.assert_frame_equal(pd.read_parquet(path), expected)


def test_chunk_rows_do_not_depend_on_chunk_size_or_strata(model):
    long = synthetic_chunk(model, 1000, seed=5, chunk_index=1, first_id=0, strata=6)
    short = synthetic_chunk(model, 300, seed=5, chunk_index=1, first_id=0, strata=6)
    pd.testing.assert_frame_equal(short, long.iloc[:300])
    unstratified = synthetic_chunk(model, 300, seed=5, chunk_index=1, first_id=0)
    pd.testing.assert_frame_equal(unstratified, long.iloc[:300].drop(columns="stratum"))


def test_values_non_negative_and_continuous(sample):
    values = sample[list(CENSUS_VARIABLES)]
    assert (values >= 0).all().all()
    assert (values.nunique() > 0.99 * len(sample)).all()


def test_point_mass_at_zero_is_reproduced(reference):
    with_zeros = reference.copy()
    with_zeros.loc[: 3 * len(reference) // 10 - 1, "INTVAL"] = 0
    share = (with_zeros["INTVAL"] == 0).mean()
    chunk = synthetic_chunk(census_model(with_zeros), 20_000, seed=2, chunk_index=0, first_id=0)
    assert (chunk[list(CENSUS_VARIABLES)] >= 0).all().all()
    assert abs((chunk["INTVAL"] == 0).mean() - share) < 0.02


def test_strong_spearman_correlations_match_reference(sample, reference):
    ref = reference.corr(method="spearman")
    syn = sample[list(CENSUS_VARIABLES)].corr(method="spearman")
    strong = ref.abs().to_numpy() >= 0.5
    assert strong.sum() > len(CENSUS_VARIABLES)
    assert np.abs(ref.to_numpy() - syn.to_numpy())[strong].max() < 0.1


def test_medians_match_reference(sample, reference):
    ref = reference.median()
    syn = sample[list(CENSUS_VARIABLES)].median()
    assert ((syn - ref).abs() / ref < 0.1).all()


def test_failure_leaves_no_output(tmp_path, monkeypatch):
    real_chunk = generate.synthetic_chunk

    def failing_chunk(model, rows, seed, chunk_index, first_id, strata=0):
        if chunk_index == 1:
            raise RuntimeError("boom")
        return real_chunk(model, rows, seed, chunk_index, first_id, strata)

    monkeypatch.setattr(generate, "synthetic_chunk", failing_chunk)
    with pytest.raises(RuntimeError, match="boom"):
        write_synthetic(tmp_path / "out", 30, rows_per_file=10)
    assert list(tmp_path.iterdir()) == []


def test_existing_output_directory_is_refused(tmp_path):
    (tmp_path / "out").mkdir()
    with pytest.raises(InputError, match="already exists"):
        write_synthetic(tmp_path / "out", 10)


@pytest.mark.parametrize(
    ("kwargs", "parameter"),
    [({"rows": 0}, "rows"), ({"strata": -1}, "strata"), ({"rows_per_file": 0}, "rows_per_file")],
)
def test_bad_arguments_name_the_parameter(tmp_path, kwargs, parameter):
    arguments = {"rows": 10, **kwargs}
    with pytest.raises(InputError, match=f"^{parameter} must be"):
        write_synthetic(tmp_path / "out", **arguments)
    assert not (tmp_path / "out").exists()


def test_reference_without_census_columns_is_refused(reference):
    with pytest.raises(InputError, match="FICA"):
        census_model(reference.drop(columns="FICA"))


def test_indefinite_correlation_is_repaired():
    indefinite = np.array([[1.0, 0.9, -0.9], [0.9, 1.0, 0.9], [-0.9, 0.9, 1.0]])
    repaired = generate.nearest_correlation(indefinite)
    np.testing.assert_allclose(np.diag(repaired), 1.0)
    assert np.linalg.eigvalsh(repaired).min() > 0
    np.linalg.cholesky(repaired)


def test_household_file_from_the_command_line(tmp_path):
    from typer.testing import CliRunner

    from sdc_tasks.cli import app

    out = tmp_path / "households"
    result = CliRunner().invoke(app, ["generate", "--households", "--rows", "2500", "--rows-per-file", "1000",
                                      "--seed", "4", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "wrote 2500 persons in 3 files" in result.output
    persons = pd.read_parquet(out)
    assert len(persons) == 2500 and persons["record_id"].tolist() == list(range(2500))
    members = persons.groupby("household_id")
    assert (members["hhsize"].first() == members.size()).all()  # the size is the members written
    household_level = ["region", "district", "area", "hhsize", "nationality", "tenure", "weight"]
    assert (members[household_level].nunique() == 1).all().all()
    for upper, lower in (("region", "district"), ("district", "area")):  # nested: each code in one parent
        assert (persons.groupby(lower)[upper].nunique() == 1).all()
        assert (persons[lower] // 100 == persons[upper]).all()
    assert persons["age"].between(0, 94).all() and set(persons["sex"]) == {1, 2}
    assert (persons["age_group"] == persons["age"] // 10).all()
    first = members.head(1)
    assert (first["age"] >= 18).all()  # every household has an adult first
    assert 0.85 < (first["nationality"] == 1).mean() < 0.97
    again = generate.household_chunk(1000, 4, 1, 1000)
    pd.testing.assert_frame_equal(persons.iloc[1000:2000].reset_index(drop=True), again)
