"""The public Python API (sdc_tasks.api): the numbers of the sdc command for every registered method, the kinds
of data it takes and returns, its own checks, where it runs, and what its results hold."""

from __future__ import annotations

import contextlib
import gc
import json
import math
import subprocess
import sys
import textwrap

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

import sdc_tasks
import sdc_tasks.cluster
from sdc_tasks import (
    InputError,
    Metrics,
    ReleaseRefused,
    compare,
    evaluate,
    load_census,
    load_testdata,
    mask,
    measures,
    methods,
    release,
)
from sdc_tasks.cli import app
from sdc_tasks.errors import raised_by_us
from sdc_tasks.generate import Geography, bundled_path, household_chunk
from sdc_tasks.masking.registry import METHODS, method_catalogue
from sdc_tasks.metrics.catalogue import MEASURES

ROWS = 300
CATEGORICAL_VARS = ["walls", "water", "sex"]
ORDINAL_VARS = ["walls", "water"]
EVALUATIONS = {}  # method -> largest absolute difference between mask() and sdc mask, for the summary test


@pytest.fixture(scope="module")
def continuous() -> pd.DataFrame:
    """Census records, a text column passed through, and an index that is not the row positions."""
    df = load_census().head(ROWS)
    df["region"] = pd.Series(np.where(np.arange(ROWS) % 3 == 0, "north", "south"), dtype=object)
    return df.set_axis(pd.Index([f"r{i}" for i in range(ROWS)]))


@pytest.fixture(scope="module")
def categorical() -> pd.DataFrame:
    """Household records with one categorical variable as text."""
    df = load_testdata().head(400)
    df["sex"] = df["sex"].map({1: "m", 2: "f"}).astype(object)
    return df


def run_cli(*args) -> str:
    """Run ``sdc`` in this process; return its output after checking it succeeded."""
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.output


RULES = {"recode": {"rules": {"walls": {"map": {"2": 2, "3": 3, "9": 3}}, "water": {"prefix": 1},
                              "sex": {"map": {"m": "person", "f": "person"}}}},
         "top_bottom_coding": {"rules": {"AFNLWGT": {"top": 300000.0}, "AGI": {"bottom": 1000.0, "bottom_value": 0.0}}}}
"""The example of a method with per-variable rules written for this module's files (the registry's names the
variables of tests/test_method_registry.py's frame)."""


def example_of(info) -> dict:
    """A registered method's example parameters, for this module's files."""
    return RULES.get(info.name, info.example)


def mask_args(info) -> list[str]:
    """The example parameters and variables of a registered method as ``sdc mask`` options (a household-shaped
    method's variables are those its parameters name)."""
    args = [a for name, value in example_of(info).items()
            for a in ("--param", f"{name}={json.dumps(value) if isinstance(value, (dict, list)) else value}")]
    if info.kind == "categorical" and info.shape != "household":
        args += ["--vars", ",".join(ORDINAL_VARS if info.ordinal else CATEGORICAL_VARS)]
    return args


def api_vars(info) -> list[str] | None:
    """The variables ``mask_args`` names, for mask()."""
    if info.kind == "continuous" or info.shape == "household":
        return None
    return ORDINAL_VARS if info.ordinal else CATEGORICAL_VARS


def input_for(info, continuous: pd.DataFrame, categorical: pd.DataFrame) -> pd.DataFrame:
    """The file a method masks here: persons in households (the generator's) for a household-shaped method."""
    if info.shape == "household":
        return household_chunk(300, 3, 0, 0, Geography(2, 2, 3))
    return continuous if info.kind == "continuous" else categorical


# ---- the same numbers as sdc mask, for every method of the registry ----


@pytest.mark.parametrize("info", method_catalogue(), ids=lambda m: m.name)
def test_mask_gives_what_sdc_mask_writes(info, continuous, categorical, tmp_path, no_cluster):
    data = input_for(info, continuous, categorical)
    given = data.copy(deep=True)
    originals = {"original": data} if info.after_masking else {}
    result = mask(data, info.name, vars=api_vars(info), seed=5, **originals, **example_of(info))
    pd.testing.assert_frame_equal(data, given)  # the caller's frame is never modified

    source = tmp_path / "in.parquet"
    data.reset_index(drop=True).to_parquet(source)
    run_cli("mask", "--input", source, "--method", info.name, "--seed", "5", "--out", tmp_path / "out",
            *mask_args(info), *(["--original", source] if info.after_masking else []))
    written = pd.read_parquet(tmp_path / "out")

    assert result.index.equals(data.index) and list(result.columns) == list(written.columns)
    assert result.columns[0] == "record_id" and result["record_id"].tolist() == list(range(len(data)))
    pd.testing.assert_frame_equal(result.reset_index(drop=True), written, check_dtype=False, check_exact=True)
    for column in written.columns:
        kept = column in data and not pd.api.types.is_numeric_dtype(data[column])
        assert result[column].dtype == (data[column].dtype if kept else written[column].dtype), column
    numbers = [c for c in written.columns if pd.api.types.is_float_dtype(written[c])]
    EVALUATIONS[info.name] = float(np.max(np.abs(result[numbers].to_numpy() - written[numbers].to_numpy()),
                                          initial=0.0))
    assert EVALUATIONS[info.name] == 0.0


def test_every_method_was_compared():
    assert set(EVALUATIONS) == set(METHODS) and max(EVALUATIONS.values()) == 0.0


# ---- the same metrics as sdc evaluate ----


def same_metrics(ours: Metrics, path) -> None:
    """Every key of metrics.json at ``path`` and no other, each value equal (numbers to 1e-12 relative)."""
    written = json.loads(path.read_text())
    assert set(ours) == set(written)
    for key, value in written.items():
        if isinstance(value, float):
            assert math.isclose(ours[key], value, rel_tol=1e-12, abs_tol=1e-12), key
        else:
            assert ours[key] == value, key


@pytest.mark.parametrize("method, families, extra", [
    ("mdav", None, {}),
    ("noise", ["il", "dld_published", "pld_published"], {"key_vars": ["FEDTAX", "AGI", "FICA"]}),
    ("synthetic_postmask", ["il", "pil"], {"pairing": "nearest"}),
])
def test_evaluate_gives_the_metrics_json_of_sdc_evaluate(continuous, tmp_path, no_cluster, method, families,
                                                          extra):
    info = next(m for m in method_catalogue() if m.name == method)
    data = continuous.drop(columns="region")
    masked = mask(data, method, seed=2, **info.example)
    data.reset_index(drop=True).to_parquet(tmp_path / "original.parquet")
    masked.reset_index(drop=True).to_parquet(tmp_path / "masked.parquet")
    metrics = evaluate(data, masked, families=families, **extra)
    options = [*(["--families", ",".join(families)] if families else []),
               *(["--key-vars", ",".join(extra["key_vars"])] if "key_vars" in extra else []),
               *(["--pairing", extra["pairing"]] if "pairing" in extra else [])]
    run_cli("evaluate", "--original", tmp_path / "original.parquet", "--masked", tmp_path / "masked.parquet",
            "--out", tmp_path / "metrics.json", *options)
    same_metrics(metrics, tmp_path / "metrics.json")


def test_evaluate_of_categorical_families_gives_the_metrics_json_of_sdc_evaluate(categorical, tmp_path,
                                                                                  no_cluster):
    masked = mask(categorical, "pram", vars=CATEGORICAL_VARS, theta=0.3, seed=1)
    categorical.to_parquet(tmp_path / "original.parquet")
    masked.to_parquet(tmp_path / "masked.parquet")
    metrics = evaluate(categorical, masked, families=["cat_il", "cat_risk"], categorical=CATEGORICAL_VARS,
                       key_vars=CATEGORICAL_VARS, ordinal={"walls": [2, 3, 9]}, weight="sampling_weight",
                       reference=categorical)
    run_cli("evaluate", "--original", tmp_path / "original.parquet", "--masked", tmp_path / "masked.parquet",
            "--families", "cat_il,cat_risk", "--categorical", ",".join(CATEGORICAL_VARS), "--key-vars",
            ",".join(CATEGORICAL_VARS), "--ordinal", "walls=2,3,9", "--weight", "sampling_weight",
            "--reference", tmp_path / "original.parquet", "--out", tmp_path / "metrics.json")
    same_metrics(metrics, tmp_path / "metrics.json")
    assert metrics["categorical_keys"] == CATEGORICAL_VARS and "indiv_risk_max" in metrics


# ---- kinds of data: pandas, Dask, paths ----


def test_dask_input_gives_a_lazy_frame_that_outlives_the_scratch_files(continuous):
    expected = mask(continuous, "mdav", k=3)
    lazy = mask(dd.from_pandas(continuous, npartitions=3, sort=False), "mdav", k=3)
    assert isinstance(lazy, dd.DataFrame)
    gc.collect()  # the step's scratch directory goes with its last reference
    pd.testing.assert_frame_equal(lazy.compute().reset_index(drop=True), expected.reset_index(drop=True),
                                  check_dtype=False, check_exact=True)


def test_dask_input_with_out_reads_back_what_it_wrote(continuous, tmp_path):
    result = mask(dd.from_pandas(continuous.reset_index(drop=True), npartitions=2), "rankswap", p=10,
                  out=tmp_path / "out")
    assert isinstance(result, dd.DataFrame) and (tmp_path / "out").is_dir()
    pd.testing.assert_frame_equal(result.compute().reset_index(drop=True), pd.read_parquet(tmp_path / "out"),
                                  check_dtype=False)
    expected = mask(continuous, "rankswap", p=10)
    assert np.array_equal(result["AGI"].compute().to_numpy(), expected["AGI"].to_numpy())


def test_path_input_writes_the_output_and_returns_its_path(continuous, tmp_path):
    source = tmp_path / "in.csv"
    continuous.drop(columns="region").to_csv(source, index=False)
    written = mask(source, "noise", p=0.2, seed=3, out=tmp_path / "out.csv")
    assert written == tmp_path / "out.csv"
    frame = pd.read_csv(written, float_precision="round_trip")
    expected = mask(pd.read_csv(source, float_precision="round_trip"), "noise", p=0.2, seed=3)
    np.testing.assert_array_equal(frame.to_numpy(), expected.to_numpy())


def test_pandas_input_with_an_id_column_keeps_it(continuous):
    data = continuous.assign(record_id=np.arange(ROWS) * 7 + 100)
    result = mask(data, "mic_ir", k=3)
    assert list(result.columns) == list(data.columns) and result["record_id"].tolist() == data["record_id"].tolist()
    assert (result["AGI"] != data["AGI"]).any()


# ---- bad input: InputError from the API's own checks ----


def never_computed(*args, **kwargs):
    """A Dask scheduler that fails the test: the check should have refused before any data work."""
    raise AssertionError("a Dask graph ran before the check")


@pytest.mark.parametrize("call, message", [
    (lambda d: mask(d, "nope"), "unknown method 'nope'"),
    (lambda d: mask(d, "mdav", k=1), "parameter 'k' of mdav"),
    (lambda d: mask(d, "mdav"), "parameter 'k' of mdav"),
    (lambda d: mask(d, "mdav", k=3, kk=2), "parameter 'kk' of mdav"),
    (lambda d: mask(d, "rankswap", p=10, vars=["AGI", "region"], strata="region"),
     "--strata 'region' is also named in --vars"),
    (lambda d: mask(d, "mdav", k=3, vars=["AGI", "record_id"]), "names the id column 'record_id'"),
    (lambda d: mask(d, "pram", theta=0.5), "method pram masks categorical variables"),
    (lambda d: mask(d, "rescale"), "name them with --original FILE (original=)"),
    (lambda d: mask(d.to_numpy(), "mdav", k=3), "data must be a pandas DataFrame, a Dask DataFrame or a path"),
    (lambda d: mask("in.csv", "mdav", k=3), "out: masking a file (in.csv) writes the masked file"),
    (lambda d: mask(d.rename(columns={"AGI": 0}), "mdav", k=3), "column number 2 of data has a name of type int"),
    (lambda d: mask(d.rename(columns={"AGI": "_pos"}), "mdav", k=3), "column '_pos' of data is reserved"),
    (lambda d: mask(d, "top_coding", p=1, vars=["AGI"], ordinal={"AGI": [1, 1]}), "ordinal 'AGI'"),
    (lambda d: mask(dd.from_pandas(d, npartitions=1), "mdav", k=3, workers=2), "workers: a Dask DataFrame"),
    (lambda d: evaluate(d, list(d.index)), "masked must be a pandas DataFrame"),
    (lambda d: evaluate(d, d, families=["il", "privacy"]), "unknown metric family 'privacy'"),
    (lambda d: release(3), "spec must be a ReleaseSpec, a mapping or a path, not int"),
])
def test_bad_arguments_are_refused_before_any_data_work(continuous, call, message):
    with dask.config.set(scheduler=never_computed), pytest.raises(InputError) as error:
        call(continuous)
    assert message in str(error.value) and isinstance(error.value, ValueError) and raised_by_us(error.value)


@pytest.mark.parametrize("call, message", [
    (lambda d: mask(d, "mdav", k=3, vars=["AGI", "INCOME"]), "data has no column 'INCOME'"),
    (lambda d: mask(d, "mdav", k=3, vars=["AGI", "region"]), "column 'region' of data must be numeric"),
    (lambda d: mask(d.head(2), "mdav", k=3), "parameter 'k' of mdav = 3 needs at least 3 records but data has 2"),
    (lambda d: mask(d, "rankswap", p=10, original=d), None),
    (lambda d: evaluate(d, d.assign(record_id=np.arange(ROWS) + 5), pairing="id"),
     "5 of 300 masked records have no original record with the same 'record_id'"),
    (lambda d: evaluate(d, d.drop(columns="AGI")), "DataFrame masked has no column 'AGI'"),
    (lambda d: evaluate(d, d.assign(record_id=[f"x{i}" for i in range(ROWS)]), pairing="id"),
     "id column 'record_id' holds numbers in the original file and text in the masked file"),
])
def test_bad_data_is_refused_naming_the_column(continuous, call, message):
    data = continuous.assign(record_id=np.arange(ROWS))
    if message is None:  # an original given to a method that does not use it is accepted
        assert len(call(data)) == ROWS
        return
    with pytest.raises(InputError) as error:
        call(data)
    assert message in str(error.value) and raised_by_us(error.value)


# ---- where the graphs run ----


@pytest.fixture
def cluster_starts(monkeypatch) -> list:
    """The worker counts of every cluster the API starts (each runs synchronously here instead)."""
    started = []

    @contextlib.contextmanager
    def recorded(address=None, workers=2, *args, **kwargs):
        started.append(workers)
        with dask.config.set(scheduler="synchronous"):
            yield None

    monkeypatch.setattr(sdc_tasks.cluster, "dask_client", recorded)
    return started


def test_pandas_input_runs_in_this_process_on_threads(continuous, cluster_starts):
    seen = []

    def threads(*args, **kwargs):
        seen.append(len(args[1]) if len(args) > 1 else 0)
        return dask.threaded.get(*args, **kwargs)

    mask(continuous, "mdav", k=3)
    assert cluster_starts == []
    with dask.config.set(scheduler=threads):  # a scheduler the caller configured is the one used
        mask(continuous, "mdav", k=3)
    assert seen and cluster_starts == []


def test_a_run_on_threads_sets_numba_up_once_per_process(continuous, cluster_starts):
    """Numba's set-up starts on its own thread with the first run on threads (to overlap the input's reading) and
    never again in the process."""
    mask(continuous, "mdav", k=3)
    mask(continuous, "rankswap", p=15)
    assert len(sdc_tasks.scheduling._NUMBA_SETUP) == 1 and cluster_starts == []
    setup = sdc_tasks.scheduling._NUMBA_SETUP[0]
    setup.join(60)
    assert setup.name == "sdc-numba-setup" and not setup.is_alive()


def test_workers_or_a_large_file_start_a_local_cluster(continuous, tmp_path, cluster_starts, monkeypatch):
    mask(continuous, "mdav", k=3, workers=3)
    assert cluster_starts == [3]
    source = tmp_path / "in.csv"
    continuous.drop(columns="region").to_csv(source, index=False)
    mask(source, "mdav", k=3, out=tmp_path / "small")
    assert cluster_starts == [3]
    monkeypatch.setattr(sdc_tasks.scheduling, "LARGE_INPUT_BYTES", source.stat().st_size - 1)
    mask(source, "mdav", k=3, out=tmp_path / "large")
    assert len(cluster_starts) == 2


def test_the_active_client_or_the_one_given_runs_the_graphs(continuous):
    from distributed import Client, LocalCluster, get_task_stream

    with LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None) as cluster:
        with Client(cluster, set_as_default=False) as client, get_task_stream(client) as given:
            mask(continuous, "mdav", k=3, client=client)
        assert len(given.data) > 0
        with Client(cluster) as client, get_task_stream(client) as active:
            expected = mask(continuous, "mdav", k=3)
            lazy = mask(dd.from_pandas(continuous, npartitions=2, sort=False), "mdav", k=3)
            gc.collect()  # the scratch files are gone: the persisted result is held by the cluster
            from_cluster = lazy.compute()
        assert len(active.data) > 0
    pd.testing.assert_frame_equal(expected, mask(continuous, "mdav", k=3))
    assert np.array_equal(from_cluster["AGI"].to_numpy(), expected["AGI"].to_numpy())


def test_an_interrupted_mask_removes_its_scratch_files_before_it_returns(continuous, tmp_path, monkeypatch):
    """Ctrl-C (here raised as the step's figures are read back) ends a call with its scratch directory already
    removed, not when the interrupt's traceback (which a notebook keeps) is freed."""
    import tempfile

    import sdc_tasks.masking.methods
    from sdc_tasks.outputs import scratch_root

    def interrupted(*args, **kwargs):
        assert [p.name.split(".")[0] for p in scratch_root().iterdir()] == ["step"]
        raise KeyboardInterrupt

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(sdc_tasks.masking.methods, "outcome_for", interrupted)
    with pytest.raises(KeyboardInterrupt) as held:
        mask(continuous, "mdav", k=3)
    assert held.traceback and list(scratch_root().iterdir()) == []


def test_a_run_on_threads_left_by_an_exception_ends_after_the_tasks_its_threads_were_running(cluster_starts):
    """A run on threads that fails (or is interrupted) returns once its threads' running tasks have ended, so
    that none writes into the files its caller removes next; the next run uses the same threads."""
    import threading
    import time

    from sdc_tasks.scheduling import scheduled

    started, ended = threading.Event(), threading.Event()

    def slow():
        started.set()
        time.sleep(0.5)
        ended.set()

    def failing():
        started.wait(10)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt), dask.config.set(num_workers=2), scheduled([]):
        dask.compute(dask.delayed(slow)(), dask.delayed(failing)())
    assert started.is_set() and ended.is_set()
    with dask.config.set(num_workers=2), scheduled([]):  # the threads, shared by the process's runs, go on
        assert dask.compute(dask.delayed(threading.current_thread)())[0].name.startswith("sdc-threads")


def test_a_plain_script_without_a_main_guard_runs_without_worker_processes(tmp_path):
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent("""
        import json, multiprocessing
        from sdc_tasks import evaluate, load_census, mask
        census = load_census().head(200)
        masked = mask(census, "mdav", k=3)
        metrics = evaluate(census, masked, families=["il", "id"])
        print(json.dumps({"IL": metrics["IL"], "children": len(multiprocessing.active_children())}))
    """))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["children"] == 0 and 0 < out["IL"] < 100


def test_importing_the_package_never_imports_prefect():
    code = ("import sys, sdc_tasks\n"
            "names = [getattr(sdc_tasks, n) for n in sdc_tasks.__all__]\n"
            "assert 'prefect' not in sys.modules, 'prefect imported'\n"
            "print(len(names))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) == len(sdc_tasks.__all__) == len(set(sdc_tasks.__all__))


# ---- what the results hold ----


@pytest.fixture(scope="module")
def census_metrics(continuous) -> tuple[pd.DataFrame, pd.DataFrame, Metrics]:
    data = continuous.drop(columns="region")
    masked = mask(data, "mdav", k=3)
    return data, masked, evaluate(data, masked)


def test_metrics_is_a_read_only_mapping_described_by_the_catalogue(census_metrics):
    _, _, metrics = census_metrics
    with pytest.raises(TypeError):
        metrics["IL"] = 0.0
    values = metrics.to_dict()
    values["IL"] = -1.0
    assert metrics["IL"] != -1.0 and dict(metrics) != values
    frame = metrics.to_frame()
    assert list(frame.columns) == ["key", "value", "family", "group", "unit", "direction", "description"]
    numeric = {k for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    assert set(frame["key"]) == numeric and len(frame) == len(numeric)
    row = frame.set_index("key").loc["DLD_3"]
    assert (row["family"], row["unit"], row["direction"]) == ("dld", "percent", "lower is better")
    assert "1..3" in row["description"] and row["value"] == metrics["DLD_3"]


def test_summary_repr_and_html_show_the_headline(census_metrics):
    _, _, metrics = census_metrics
    summary = metrics.summary()
    assert list(summary.index) == ["IL", "PIL", "DLD", "PLD", "ID", "score"]
    assert summary["DLD"] == metrics["DLD"]
    text = repr(metrics)
    assert f"{metrics['IL']:.4f}" in text and "300 masked records against 300 original ones" in text
    page = metrics._repr_html_()
    assert page.count("<table") == 1 + 4 and "Information loss" in page and "Disclosure risk" in page
    assert page.index('class="headline"') < page.index("<h4>") and page.count('class="card"') == 6
    assert f'<div class="value">{metrics["DLD"]:.4g}</div>' in page


def test_summary_and_html_show_the_original_files_risk_beside_the_release(categorical, no_cluster):
    masked = mask(categorical, "local_suppression", vars=CATEGORICAL_VARS, k=3)
    metrics = evaluate(categorical, masked, families=["cat_risk"], categorical=CATEGORICAL_VARS,
                       key_vars=CATEGORICAL_VARS, weight="sampling_weight")
    summary = metrics.summary()
    assert list(summary.index) == ["kanon_violations_3", "kanon_violations_3_before", "sample_uniques",
                                   "sample_uniques_before", "indiv_risk_max", "indiv_risk_max_before", "PLD_cat",
                                   "PLD_cat_before"]
    same = evaluate(categorical, categorical, families=["cat_risk"], categorical=CATEGORICAL_VARS,
                    key_vars=CATEGORICAL_VARS, weight="sampling_weight")
    assert summary["sample_uniques_before"] == same["sample_uniques"] > 0 == summary["sample_uniques"]
    changes = metrics.risk_changes().set_index("figure")
    assert list(changes.columns) == ["original", "released", "change_percent", "unit", "direction"]
    assert changes.loc["sample_uniques"].tolist() == [same["sample_uniques"], 0.0, -100.0, "records",
                                                      "lower is better"]
    assert len(changes) == 12 and "kanon_min_group" in changes.index
    assert "sample_uniques_before" in repr(metrics)
    page = metrics._repr_html_()
    assert page.count("<table") == 1 + 1 + 2 and "Disclosure risk: original file and release" in page
    assert page.count("sample_uniques_before") == 0  # the original's figures only in their table, by figure name
    assert f"original {same['kanon_violations_3']:.0f}, -100 %" in page  # under the headline card


def test_ru_figure_places_the_evaluation_at_its_il_and_risk(census_metrics):
    _, _, metrics = census_metrics
    figure = metrics.ru_figure("MDAV k=3")
    points = figure.axes[0].collections[0].get_offsets()
    assert np.allclose(points, [[(metrics["DLD"] + metrics["ID"]) / 2, metrics["IL"]]])


def test_plot_variables_draws_one_panel_per_variable(census_metrics):
    data, masked, metrics = census_metrics
    figure = metrics.plot_variables(data, masked)
    assert [ax.get_title() for ax in figure.axes] == [c for c in data.columns if c != "record_id"]
    assert all(len(ax.patches) == 2 for ax in figure.axes)  # the original's and the masked histogram
    figure = metrics.plot_variables(data.assign(sex="m"), masked.assign(sex="f"), vars=["sex"])
    assert [t.get_text() for t in figure.axes[0].get_xticklabels()] == ["f", "m"]


def test_methods_lists_every_registered_method():
    table = methods()
    assert list(table["method"]) == list(METHODS)
    mdav = table.set_index("method").loc["mdav"]
    assert mdav["parameters"]["k"] == "required" and mdav["parameters"]["block_size"] == 12_000
    assert mdav["kind"] == "continuous" and "Microaggregation" in mdav["source"]
    assert set(table.loc[table["after_masking"], "method"]) == {"rescale", "postmask"}


def test_measures_lists_the_metric_catalogue():
    table = measures()
    assert len(table) == len(MEASURES) and table["key"].is_unique
    assert table.set_index("key").loc["IL", "family"] == "il"


# ---- release and compare ----


def demo_spec(out_dir, **changes) -> dict:
    spec = yaml.safe_load(bundled_path("demo.yaml").read_text())
    spec["input"]["path"] = str(bundled_path("census.csv"))
    spec["output"]["dir"] = str(out_dir)
    spec.update(changes)
    return spec


def test_release_returns_the_summary_with_metrics(tmp_path):
    summary = release(demo_spec(tmp_path / "published"))
    assert summary.verdict == "published" and isinstance(summary.metrics, Metrics)
    assert summary.paths.masked.is_dir() and summary.records_out == 1080
    assert json.loads(summary.paths.metrics.read_text())["DLD"] == summary.metrics["DLD"]


def test_a_refused_release_raises_with_its_checks_and_summary(tmp_path):
    with pytest.raises(ReleaseRefused) as refused:
        release(demo_spec(tmp_path / "refused", gate={"max": {"DLD": 1.0}}))
    checks, summary = refused.value.checks, refused.value.result
    assert [c.measure for c in checks] == ["DLD"] and not checks[0].passed
    assert summary.verdict == "refused" and isinstance(summary.metrics, Metrics)
    assert summary.metrics["DLD"] > 1.0 and not (tmp_path / "refused" / "masked").exists()


GRID = {"name": "tiny", "seed": 1, "families": [
    {"label": "MDAV", "method": "mdav", "sweep": {"param": "k", "values": [3, 10], "label_format": "d"}},
    {"label": "Noise", "method": "noise", "sweep": {"param": "p", "values": [0.5], "label_format": "g"}},
]}


def test_compare_returns_the_ranking_and_writes_nothing(continuous, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    table = compare(continuous.drop(columns="region").head(200), GRID, limits={"DLD": 30})
    assert sorted(table["Method"]) == ["MDAV10", "MDAV3", "Noise0.5"] and list(tmp_path.iterdir()) == []
    assert table["Score"].is_monotonic_increasing
    by_label = table.set_index("Method")
    assert by_label.loc["MDAV10", "IL"] > by_label.loc["MDAV3", "IL"]
    assert list(by_label["within_limits"]) == [dld <= 30 for dld in by_label["DLD"]]
