"""Household-consistent masking (issue 26, part 3): PRAM, recoding and local suppression of a household-level
variable act once per household and give every member the same result; person-level variables are masked as
without households; the household id reaches masked/ only when the spec passes it through."""

from __future__ import annotations

import hashlib

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

from sdc_tasks.errors import InputError, SpecError
from sdc_tasks.generate import bundled_path
from sdc_tasks.masking.apply import StepContext
from sdc_tasks.masking.household_outcome import HouseholdOutcome
from sdc_tasks.masking.households import sorted_positions
from sdc_tasks.masking.methods import apply_step
from sdc_tasks.masking.postmask_outcome import outcome_from_dict, outcome_metrics
from sdc_tasks.masking.registry import validate_params
from sdc_tasks.pipeline import stages
from sdc_tasks.pipeline.spec import parse_spec
from sdc_tasks.record_random import record_uniforms

HOMES = ["urbrur", "roof", "walls", "water", "electcon"]  # constant within each ori_hid of testdata.csv
PERSONS = ["sex", "relat"]


@pytest.fixture(scope="module")
def testdata() -> pd.DataFrame:
    """sdcMicro's testdata.csv with a record_id (row position)."""
    return pd.read_csv(bundled_path("testdata.csv")).assign(record_id=lambda d: range(len(d)))


def masked(data: pd.DataFrame, method: str, variables: list[str], params: dict, partitions: int = 1,
           homes: tuple[str, ...] = (), seed: int = 7) -> tuple[pd.DataFrame, object]:
    """One step of ``method`` on ``data`` cut into ``partitions`` (households spanning partitions), with ori_hid as
    household id and ``homes`` household-level: (the masked records, the step's outcome)."""
    ctx = StepContext(seed=seed, step=2, id_column="record_id", household="ori_hid" if homes else None,
                      household_variables=homes)
    staged = apply_step(dd.from_pandas(data, npartitions=partitions, sort=False), method, variables, params, ctx)
    return staged.frame.compute(), staged.outcome


def members_agree(out: pd.DataFrame, variables: list[str]) -> bool:
    """Whether every household's members hold one value (missing included) of each variable."""
    return bool((out.groupby("ori_hid")[variables].nunique(dropna=False) == 1).all().all())


def test_pram_without_households_draws_as_before(sync_dask, testdata):
    """The digest of the masked values is main's at 7d70c93 (before households), from the same call: PRAM theta
    0.5 of roof, water, sex, relat, seed 7, step 2, sha256 of the four columns as int64 bytes in row order."""
    variables = ["roof", "water", "sex", "relat"]
    before = "c2d5905b5825269e68b81662ffcb743d4b54f7b67ba48ba2677cf0ee29a40fb3"
    for partitions in (1, 3):
        out, _ = masked(testdata, "pram", variables, {"theta": 0.5}, partitions)
        assert hashlib.sha256(out[variables].to_numpy(np.int64).tobytes()).hexdigest() == before
    with_homes, _ = masked(testdata, "pram", variables, {"theta": 0.5}, 2, homes=("roof", "water"))
    pd.testing.assert_frame_equal(with_homes[PERSONS], out[PERSONS])  # person-level draws unchanged


def kooiman_by_hand(frequencies: pd.Series, theta: float) -> np.ndarray:
    """The Kooiman et al. matrix from its definition (chapter sec. 2, PRAM), categories in the series' order."""
    t = frequencies.to_numpy(np.float64)
    off = theta * t.min() / ((len(t) - 1) * t)
    return np.where(np.eye(len(t), dtype=bool), 1 - theta * t.min() / t[:, None], off[:, None])


@pytest.mark.parametrize("partitions", [1, 2, 4])
def test_pram_draws_a_household_level_variable_once_per_household(sync_dask, testdata, partitions):
    theta, variables = 0.5, ["water", "roof", "sex"]
    out, _ = masked(testdata, "pram", variables, {"theta": theta}, partitions, homes=tuple(HOMES))
    assert members_agree(out, ["water", "roof"]) and not members_agree(out, ["sex"])
    households = testdata.drop_duplicates("ori_hid")
    for v in ("water", "roof"):  # by hand: household frequencies, one uniform per (seed, step, variable, household)
        counts = households[v].value_counts().sort_index()
        cumulative = np.cumsum(kooiman_by_hand(counts, theta), axis=1)
        u = record_uniforms(7, 2, households["ori_hid"].to_numpy(), 1, stream=f"household {v}")[:, 0]
        rows = counts.index.get_indexer(households[v])
        drawn = [counts.index[min(np.searchsorted(cumulative[r], x, side="right"), len(counts) - 1)]
                 for r, x in zip(rows, u)]
        expected = pd.Series(drawn, index=households["ori_hid"].to_numpy()).reindex(testdata["ori_hid"]).to_numpy()
        np.testing.assert_array_equal(out[v].to_numpy(), expected)
        assert (out[v] != testdata[v]).any()
    alone, _ = masked(testdata, "pram", ["sex"], {"theta": theta}, partitions)
    pd.testing.assert_series_equal(out["sex"], alone["sex"])  # person-level draws as without households


def test_text_household_ids_share_a_draw(sync_dask, testdata):
    """Household ids that are text (here "h1", "h2", ...) key the draw by their hash: members still agree."""
    named = testdata.assign(ori_hid="h" + testdata["ori_hid"].astype(str))
    out, _ = masked(named, "pram", ["water", "roof"], {"theta": 0.7}, 3, homes=("water", "roof"))
    assert members_agree(out, ["water", "roof"]) and (out["water"] != testdata["water"]).sum() > 100
    again, _ = masked(named.astype({"ori_hid": "string[pyarrow]"}), "pram", ["water", "roof"], {"theta": 0.7}, 2,
                      homes=("water", "roof"))
    pd.testing.assert_frame_equal(again[["water", "roof"]], out[["water", "roof"]])


@pytest.mark.parametrize("method,params", [
    ("global_recoding", {"p": 2}), ("top_coding", {"p": 3}), ("bottom_coding", {"p": 2}),
    ("recode", {"rules": {"water": {"map": {"1": 1, "2": 1, "3": 3, "4": 3, "5": 5, "6": 5, "7": 5, "9": 9}}}}),
])
def test_recoding_gives_members_one_value(sync_dask, testdata, method, params):
    out, _ = masked(testdata, method, ["water"], params, 3, homes=tuple(HOMES))
    assert members_agree(out, ["water"]) and out["water"].nunique() < testdata["water"].nunique()
    assert out.drop(columns="water").equals(testdata.drop(columns="water"))


def test_global_recoding_counts_households(sync_dask, testdata):
    """water's two rarest categories are 6 and 9 by persons (26, 35) but 6 and 7 by households (5, 7)."""
    with_homes, _ = masked(testdata, "global_recoding", ["water"], {"p": 2}, 2, homes=("water",))
    persons, _ = masked(testdata, "global_recoding", ["water"], {"p": 2}, 2)
    assert sorted(testdata.loc[with_homes["water"] != testdata["water"], "water"].unique()) == [7]
    assert sorted(testdata.loc[persons["water"] != testdata["water"], "water"].unique()) == [9]


def hand_made() -> pd.DataFrame:
    """Four households; area is household-level. Household 3's woman is the only (B, F): losing area makes her
    (missing, F), and her two housemates (B, M) lose area with her."""
    rows = [(1, "A", "M"), (1, "A", "F"), (2, "A", "M"), (2, "A", "F"), (3, "B", "M"), (3, "B", "F"),
            (3, "B", "M"), (4, "A", "M"), (4, "A", "F")]
    frame = pd.DataFrame(rows, columns=["ori_hid", "area", "sex"])
    return frame.assign(record_id=range(len(frame)))


def compatible_frequencies(out: pd.DataFrame, keys: list[str]) -> np.ndarray:
    """f_k of every record by brute force: the records agreeing with it on every key where both have a value (a
    missing value matches any value, sdcMicro's convention)."""
    codes = np.column_stack([pd.factorize(out[k])[0] for k in keys])  # -1: missing
    combos, inverse, counts = np.unique(codes, axis=0, return_inverse=True, return_counts=True)
    a, b = combos[:, None, :], combos[None, :, :]
    compatible = ((a == b) | (a < 0) | (b < 0)).all(axis=2)
    return (compatible @ counts)[inverse.ravel()]


@pytest.mark.parametrize("partitions", [1, 2, 3])
def test_local_suppression_suppresses_whole_households(sync_dask, partitions):
    data = hand_made()
    params = validate_params("local_suppression", {"k": 2, "importance": ["sex", "area"]})
    alone, none = masked(data, "local_suppression", ["area", "sex"], params, partitions)
    assert alone["area"].isna().tolist() == [False] * 5 + [True] + [False] * 3 and none is None
    out, outcome = masked(data, "local_suppression", ["area", "sex"], params, partitions, homes=("area",))
    assert out["area"].isna().tolist() == [False] * 4 + [True] * 3 + [False] * 2
    assert members_agree(out, ["area"]) and out["sex"].equals(alone["sex"])
    assert outcome == HouseholdOutcome("local_suppression", extra_suppressions=2, records=2)
    assert (compatible_frequencies(out, ["area", "sex"]) >= 2).all()


def test_local_suppression_on_testdata_stays_k_anonymous(sync_dask, testdata):
    keys = [*HOMES, *PERSONS]
    params = validate_params("local_suppression", {"k": 3})
    alone, _ = masked(testdata, "local_suppression", keys, params, 1)
    outs = [masked(testdata, "local_suppression", keys, params, n, homes=tuple(HOMES)) for n in (1, 2, 4)]
    out, outcome = outs[0]
    assert all(o.equals(out) and c == outcome for o, c in outs[1:])
    assert members_agree(out, HOMES) and not members_agree(alone, HOMES)
    assert out[PERSONS].equals(alone[PERSONS])
    extra = int(out[HOMES].isna().sum().sum() - alone[HOMES].isna().sum().sum())
    records = int((out[HOMES].isna() & alone[HOMES].notna()).any(axis=1).sum())
    assert outcome == HouseholdOutcome("local_suppression", extra, records) and extra > 0
    assert (compatible_frequencies(out, keys) >= 3).all()


def test_the_outcome_reads_back_and_adds_no_postmask_keys():
    outcome = HouseholdOutcome("local_suppression", 108, 100)
    assert outcome_from_dict(outcome.as_dict()) == outcome and outcome.warning() is None
    assert outcome.text() == ("local_suppression: 108 more household-level values suppressed in 100 records, so "
                              "that all members of a household lost the same ones")

    class Step:
        """A release step's summary with its outcome."""

        def __init__(self, outcome):
            self.outcome = outcome

    assert outcome_metrics([Step(outcome.as_dict())]) == {}


def release_spec(tmp_path, input_path, hid_role: str = "drop", steps: list | None = None,
                 homes: list[str] = HOMES, strata: str | None = None) -> object:
    """A spec of testdata with ori_hid as household id (role ``hid_role``) and ``homes`` household-level: by
    default PRAM of water, roof and sex, local suppression to 3-anonymity and MDAV; with ``steps``, those steps,
    which mask the categorical variables, the continuous ones passed through."""
    keys = [v for v in [*HOMES, *PERSONS] if v != strata]
    continuous = ["expend", "income", "savings"]
    kept = ["age", "hhcivil", "household_weights", *([] if steps is None else continuous)]
    variables = {"categorical": keys, "key": keys, "continuous": continuous if steps is None else [],
                 "weight": "sampling_weight", "strata": strata,
                 "pass_through": [*kept, *(["ori_hid"] if hid_role == "pass_through" else [])],
                 **({"drop": ["ori_hid"]} if hid_role == "drop" else {})}
    return parse_spec({
        "input": {"path": str(input_path)}, "id_column": "record_id", "create_id": input_path.suffix == ".csv",
        "variables": variables, "households": {"id": "ori_hid", "variables": homes}, "metrics": ["cat_risk"],
        "steps": steps or [{"method": "pram", "params": {"theta": 0.5}, "variables": ["water", "roof", "sex"]},
                           {"method": "local_suppression", "params": {"k": 3}},
                           {"method": "mdav", "params": {"k": 3}}],
        "output": {"dir": str(tmp_path / "out")}})


def released(spec, root) -> tuple[pd.DataFrame, list[dict]]:
    """Run the spec's validation and masking stages into ``root``: (masked/ in record order, the mask stages'
    summaries)."""
    paths = stages.ReleasePaths(root)
    stages.validate_input(spec, paths.checkpoint)
    summaries = []
    for i in range(len(spec.steps)):
        if stages.needs_blocks(spec, i):
            stages.block_stage(spec, i, paths)
        summaries.append(stages.mask_stage(spec, i, paths))
        stages.write_stage(spec, i, paths)
    return pd.read_parquet(paths.masked).sort_values("record_id").reset_index(drop=True), summaries


def test_a_release_masks_households_alike_on_any_partitioning(sync_dask, tmp_path, testdata):
    results = []
    for files in (1, 2, 4):
        folder = tmp_path / f"in{files}"
        folder.mkdir()
        for j, piece in enumerate(np.array_split(testdata, files)):  # households cut across files
            piece.to_parquet(folder / f"part{j}.parquet", index=False)
        results.append(released(release_spec(tmp_path, folder), tmp_path / f"root{files}"))
    out, summaries = results[0]
    assert all(o.equals(out) and s == summaries for o, s in results[1:])
    assert "ori_hid" not in out.columns  # dropped: used by the steps, never published
    out = out.assign(ori_hid=testdata["ori_hid"])
    assert members_agree(out, HOMES) and not members_agree(out, PERSONS)
    assert summaries[1]["outcome"]["extra_suppressions"] > 0 and summaries[0]["outcome"] is None
    steps = [{"method": "pram", "params": {"theta": 0.5}}]
    published, _ = released(release_spec(tmp_path, tmp_path / "in2", hid_role="pass_through", steps=steps),
                            tmp_path / "kept")
    assert published["ori_hid"].equals(testdata["ori_hid"]) and members_agree(published, HOMES)


def test_suppressing_a_household_variable_as_a_category_is_refused(tmp_path):
    with pytest.raises(SpecError, match=r"steps.0: local_suppression with missing: category cannot suppress the "
                                        r"household-level variable 'urbrur' for whole households"):
        release_spec(tmp_path, bundled_path("testdata.csv"),
                     steps=[{"method": "local_suppression", "params": {"k": 3, "missing": "category"}}])


def test_strata_must_hold_whole_households_when_household_variables_are_masked(sync_dask, tmp_path, testdata):
    broken = int((testdata.groupby("ori_hid")["sex"].nunique() > 1).sum())
    steps = [{"method": "pram", "params": {"theta": 0.5}}]
    spec = release_spec(tmp_path, bundled_path("testdata.csv"), steps=steps, strata="sex")
    with pytest.raises(InputError, match=f"strata column 'sex' differs between the members of {broken} households"):
        stages.validate_input(spec, tmp_path / "checkpoint")
    spec = release_spec(tmp_path, bundled_path("testdata.csv"), steps=steps, strata="urbrur", homes=HOMES[1:])
    assert stages.validate_input(spec, tmp_path / "checkpoint2")["n_records"] == 4580
    spec = release_spec(tmp_path, bundled_path("testdata.csv"), steps=steps, strata="sex", homes=[])
    assert stages.validate_input(spec, tmp_path / "checkpoint3")["n_records"] == 4580  # households for risk only


def test_local_suppression_of_a_parquet_dataset_whose_key_columns_fuse(sync_dask, tmp_path, testdata):
    """Dask's Parquet reader fuses the 4 files' partitions when only the key columns are read (dask 2026.8: into 2):
    the first records of each combination still carry their positions in the file, so the result is that of one
    partition."""
    from sdc_tasks.io import read_table

    for j, piece in enumerate(np.array_split(testdata, 4)):
        piece.to_parquet(tmp_path / f"part{j}.parquet", index=False)
    files = read_table(tmp_path, "parquet")
    keys = [*HOMES, *PERSONS]
    params = validate_params("local_suppression", {"k": 3})
    ctx = StepContext(seed=7, step=2, id_column="record_id")
    staged = apply_step(files, "local_suppression", keys, params, ctx)
    alone, _ = masked(testdata, "local_suppression", keys, params, 1)
    pd.testing.assert_frame_equal(staged.frame.compute().reset_index(drop=True)[keys], alone[keys])


def test_local_suppression_of_a_parquet_dataset_read_in_more_pieces_than_its_key_columns_fuse_into(sync_dask,
                                                                                                  tmp_path, testdata):
    """With 10 files of the keys and a few other columns, Dask's Parquet reader fuses the key columns' partitions
    for one computation (their lengths: 5 partitions) and not for another (the partitions themselves: 10), as in
    benchmarks/categorical_methods_scale.py at 1e7 records: each record still gets its position in the file, so the
    result is that of one partition."""
    from sdc_tasks.io import read_table

    keys = [*HOMES, *PERSONS, "hhcivil"]
    frame = testdata[["record_id", *keys, "sampling_weight", "age", "income"]]
    for j, piece in enumerate(np.array_split(frame, 10)):
        piece.to_parquet(tmp_path / f"part{j}.parquet", index=False)
    params = validate_params("local_suppression", {"k": 3})
    staged = apply_step(read_table(tmp_path, "parquet"), "local_suppression", keys, params,
                        StepContext(seed=7, step=2, id_column="record_id"))
    alone, _ = masked(frame, "local_suppression", keys, params, 1)
    pd.testing.assert_frame_equal(staged.frame.compute().reset_index(drop=True)[keys], alone[keys])


def test_mask_takes_the_households_from_the_api_and_the_command_line(tmp_path, testdata, no_cluster):
    from typer.testing import CliRunner

    from sdc_tasks.api import mask
    from sdc_tasks.cli import app

    out = mask(testdata, "pram", vars=["water", "sex"], theta=0.5, seed=7, household="ori_hid",
               household_vars=["water", "roof"])
    assert members_agree(out, ["water"]) and out["ori_hid"].equals(testdata["ori_hid"])
    with pytest.raises(InputError, match=r"--household-vars \(household_vars=\) needs the household id column"):
        mask(testdata, "pram", vars=["water"], theta=0.5, household_vars=["water"])
    with pytest.raises(InputError, match=r"--household 'ori_hid' names the id, strata or a masked column"):
        mask(testdata, "pram", vars=["water", "ori_hid"], theta=0.5, household="ori_hid")
    with pytest.raises(InputError, match=r"parameter 'missing' of local_suppression: local_suppression with "
                                         r"missing: category cannot suppress the household-level variable 'water'"):
        mask(testdata, "local_suppression", vars=["water", "sex"], k=3, missing="category", household="ori_hid",
             household_vars=["water"])
    with pytest.raises(InputError, match=r"household-level variable 'sex' differs between the members of \d+ house"):
        mask(testdata, "pram", vars=["sex"], theta=0.5, household="ori_hid", household_vars=["sex"])
    result = CliRunner().invoke(app, ["mask", "--input", str(bundled_path("testdata.csv")), "--method",
                                      "local_suppression", "--param", "k=3", "--vars", ",".join([*HOMES, *PERSONS]),
                                      "--household", "ori_hid", "--household-vars", ",".join(HOMES),
                                      "--out", str(tmp_path / "m.csv")])
    assert result.exit_code == 0, result.output
    assert "more household-level values suppressed in" in result.output
    written = pd.read_csv(tmp_path / "m.csv")
    assert members_agree(written, HOMES)


def test_sorted_positions_finds_present_ids_and_only_them():
    ids = np.array([2, 5, 9])
    where, found = sorted_positions(ids, np.array([9, 1, 5, 10, 2, 6]))
    assert found.tolist() == [True, False, True, False, True, False]
    assert where[found].tolist() == [2, 1, 0]
    assert [x.tolist() for x in sorted_positions(np.array([], dtype=np.int64), np.array([3, 4]))] == \
        [[0, 0], [False, False]]
