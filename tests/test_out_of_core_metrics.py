"""The order-based measures out of core (brMAE/brMSE ranks, PIL_Q quantiles, ID windows, the report's variable
profile) against the in-memory kernels on the whole columns: files cut into many small partitions of uneven
sizes, heavy ties that cross partition boundaries, windows wider than a partition."""

from __future__ import annotations

import itertools

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

from sdc_tasks import scheduling
from sdc_tasks.evaluation import global_order, linkage, order_measures, pairing
from sdc_tasks.evaluation.global_order import ID, KEY, keyed_frame, sorted_column
from sdc_tasks.evaluation.measures import continuous_measures, evaluate
from sdc_tasks.evaluation.order_measures import OrderAsked, variable_order_measures
from sdc_tasks.evaluation.profile import PROFILES_KEY, release_profile
from sdc_tasks.io import read_checkpoint, write_parquet
from sdc_tasks.metrics.pil import QUANTILES, quantile_pil
from sdc_tasks.metrics.rank_metrics import rank_errors, ranks
from sdc_tasks.metrics.risk import interval_hits, sdid_hits
from sdc_tasks.reserved import MASKED_SUFFIX
from sdc_tasks.stats import order as order_module
from sdc_tasks.stats.order import SortedValues, linear_quantiles, value_order

N = 2000


def _uneven(df: pd.DataFrame, parts: int, seed: int = 1) -> dd.DataFrame:
    """``df`` cut into ``parts`` partitions of random, uneven sizes (some a handful of records)."""
    rng = np.random.default_rng(seed)
    cuts = np.sort(rng.choice(np.arange(1, len(df)), size=parts - 1, replace=False))
    bounds = [0, *cuts.tolist(), len(df)]
    pieces = [df.iloc[lo:hi] for lo, hi in itertools.pairwise(bounds)]
    return dd.from_delayed([dask.delayed(p.reset_index(drop=True)) for p in pieces], meta=df.iloc[:0],
                           verify_meta=False)


def _tied_file(seed: int = 0) -> pd.DataFrame:
    """Records with ids in shuffled order and variables of heavy ties: ``a`` has a value shared by 40 % of the
    records, ``b`` five values, ``c`` continuous; the masked values swap ranks nearby, as rank swapping does."""
    rng = np.random.default_rng(seed)
    ids = rng.permutation(N) * 3 + 7
    a = np.where(rng.random(N) < 0.4, 0.0, np.round(rng.lognormal(3, 1, N), 1))
    b = rng.integers(0, 5, N).astype(float)
    c = rng.normal(50, 10, N)
    out = pd.DataFrame({"rid": ids, "a": a, "b": b, "c": c})
    for v in ("a", "b", "c"):
        noise = np.argsort(np.argsort(out[v].to_numpy(), kind="stable") + rng.normal(0, 60, N))
        out[v + MASKED_SUFFIX] = np.sort(out[v].to_numpy())[noise]
    return out


@pytest.fixture
def tied() -> pd.DataFrame:
    """The paired test file."""
    return _tied_file()


def test_linear_quantiles_are_numpys_bit_for_bit():
    """numpy's steps reproduced: every q, column sizes from 1, ties and spread magnitudes."""
    rng = np.random.default_rng(3)
    qs = np.concatenate([QUANTILES, [0.0, 0.01, 0.99, 1.0], rng.random(8)])
    for trial in range(400):
        n = int(rng.integers(1, 200))
        values = np.sort(rng.integers(0, 4, n).astype(float) if trial % 2 else rng.normal(size=n) * 10.0 ** (trial % 9))
        expected = np.quantile(values, qs)
        assert np.array_equal(linear_quantiles(SortedValues(values), qs).view(np.int64), expected.view(np.int64))


@pytest.mark.parametrize("values", ["spread", "few", "special", "integers", "groups", "many_runs"])
@pytest.mark.parametrize("tiebreak", ["unique", "tied", "text", "flags", "bytes"])
@pytest.mark.parametrize("large", [False, True], ids=["lexsorted-ties", "ties-in-place"])
def test_value_order_is_lexsorts_permutation(values, tiebreak, large, monkeypatch):
    """The (value, tiebreak) order is np.lexsort's to the row: no ties, runs of ties short and long, rows equal in
    both (kept in row order), NaN, infinities and signed zeros, integer values, MDAV-like groups of three equal
    values, forty long runs; integer, boolean, 8-bit and text tiebreaks; on both ways of ordering the tied runs
    (the large columns' in place, forced here from one value, and numpy's, forced for every size)."""
    monkeypatch.setattr(order_module, "LARGE_ORDER", 1 if large else 2**62)
    rng = np.random.default_rng(11)
    for n in (0, 1, 2, 7, 300, 5000):
        v = {"spread": rng.normal(size=n), "few": rng.integers(0, 5, n).astype(float),
             "special": rng.choice([np.nan, 0.0, -0.0, 1.0, np.inf, -np.inf], n),
             "integers": rng.integers(-3, 3, n), "groups": np.repeat(rng.normal(size=n // 3 + 1), 3)[:n],
             "many_runs": rng.integers(0, 40, n).astype(float)}[values]
        t = {"unique": rng.permutation(n), "tied": rng.integers(0, 3, n),
             "text": np.array([f"r{i}" for i in rng.integers(0, 50, n)], dtype=object),
             "flags": rng.integers(0, 2, n).astype(bool), "bytes": rng.integers(0, 256, n).astype(np.uint8)}[tiebreak]
        assert np.array_equal(value_order(v, t), np.lexsort((t, v)))


def test_radix_order_is_numpys_stable_argsort():
    """Large float64 columns are ordered by the radix sort: numpy's stable argsort to the row, with NaNs of either
    sign and any payload (last, in row order), signed zeros (equal), infinities, subnormals, the largest floats,
    values sharing their high digits and columns of one value."""
    rng = np.random.default_rng(5)
    negative_nan = np.array([0xFFF8000000000001], dtype=np.uint64).view(np.float64)[0]
    special = [np.nan, negative_nan, 0.0, -0.0, np.inf, -np.inf, 5e-324, -5e-324, 1.7e308, -1.7e308, 1.0, -1.0]
    columns = [rng.choice(special, 3000), rng.normal(size=3000), rng.lognormal(size=3000) * 1e-300,
               1.0 + rng.integers(0, 50, 3000) * 2.0**-40, np.full(3000, -2.5), rng.integers(0, 4, 3000) * 1e6,
               np.concatenate([rng.normal(size=1500), rng.choice(special, 1500)])]
    for column in columns:
        assert np.array_equal(order_module._radix_order(column), np.argsort(column, kind="stable"))
    assert order_module._radix_order(np.empty(0)).size == 0


def test_a_records_output_partition_is_the_number_of_splitters_at_or_below_it():
    """Each (value, id) goes to the partition numbered by the splitters at or below it in (value, id) order, NaN
    last and equal to NaN, -0.0 equal to 0.0: values tied with one splitter or a run of them (the id decides), with
    none, below and above them all; no splitters at all."""
    rng = np.random.default_rng(8)
    keys = rng.choice([np.nan, -0.0, 0.0, 1.0, 2.5, 3.0, 7.0, -np.inf, np.inf], 4000)
    keys[:500] = rng.normal(size=500)
    ids = rng.integers(0, 60, keys.size)
    split_keys = np.array([-1.0, 0.0, 0.0, 0.0, 1.0, 3.0, 3.0, np.inf, np.nan, np.nan])
    split_ids = np.array([5, 10, 20, 30, 0, 7, 40, 3, 10, 50])

    def at_or_below(key: float, rid: int, sk: float, sid: int) -> bool:
        if np.isnan(sk) or np.isnan(key):
            return np.isnan(key) and (not np.isnan(sk) or sid <= rid)
        return sk < key or (sk == key and sid <= rid)

    expected = [sum(at_or_below(k, i, sk, si) for sk, si in zip(split_keys, split_ids)) for k, i in zip(keys, ids)]
    assert np.array_equal(global_order._bucket_numbers(keys, ids, split_keys, split_ids), expected)
    assert np.array_equal(global_order._bucket_numbers(keys, ids, split_keys[:0], split_ids[:0]), np.zeros(4000))


def _searchsorted_rank(value) -> tuple:
    """A level's value as np.searchsorted ranks it: NaN equal to NaN and above every number, -0.0 equal to 0.0."""
    return (1, 0.0) if isinstance(value, float) and np.isnan(value) else (0, value)


@pytest.mark.parametrize("seed", range(6))
def test_counts_of_bounds_at_or_below_each_key_equal_a_brute_force_count(seed):
    """``counts_at_or_below`` on three levels (two of floats with NaN, signed zeros and infinities, one of
    integers) equals a count of the lexicographically ordered bounds at or below each key: keys tied with one
    bound or a run of them down to the last level, with none, below and above them all; no bounds at all."""
    rng = np.random.default_rng(seed)
    pool = np.array([np.nan, -0.0, 0.0, 1.0, -np.inf, np.inf, 2.5])
    n, m = 3000, int(rng.integers(1, 60))
    keys = [rng.choice(pool, n), rng.choice(pool, n), rng.integers(0, 4, n)]
    taken = rng.integers(0, n, m)
    drawn = [rng.choice(pool, m), rng.choice(pool, m), rng.integers(0, 4, m)]
    picked = [np.where(rng.random(m) < 0.5, k[taken], d) for k, d in zip(keys, drawn)]  # many keys equal a bound
    ranked = sorted(range(m), key=lambda b: tuple(_searchsorted_rank(level[b]) for level in picked))
    bounds = [level[ranked] for level in picked]
    tuples = [tuple(_searchsorted_rank(level[i]) for level in bounds) for i in range(m)]
    expected = [sum(t <= tuple(_searchsorted_rank(level[i]) for level in keys) for t in tuples) for i in range(n)]
    assert np.array_equal(order_module.counts_at_or_below(bounds, keys), expected)
    assert np.array_equal(order_module.counts_at_or_below([b[:0] for b in bounds], keys), np.zeros(n))


@pytest.mark.parametrize("written", [False, True])
@pytest.mark.parametrize("parts", [1, 5, 37])
def test_sorted_column_is_the_global_order(sync_dask, tied, parts, written, tmp_path):
    """The sorted partitions read in order are the whole column sorted by (value, id); the offsets and the last
    occurrence of each partition's last value are those of the whole column; persisted or written to files (a file
    per partition, read back by the tasks)."""
    files = tmp_path / "sorts" if written else None
    sc = sorted_column(keyed_frame(_uneven(tied, parts), "a", "rid"), files)
    assert not written or len(list(files.iterdir())) == parts
    got = pd.concat(dask.compute(*sc.parts), ignore_index=True)
    order = np.lexsort((tied["rid"].to_numpy(), tied["a"].to_numpy()))
    assert np.array_equal(got[KEY].to_numpy(), tied["a"].to_numpy()[order])
    assert np.array_equal(got[ID].to_numpy(), tied["rid"].to_numpy()[order])
    assert sc.n == N and np.array_equal(np.diff(sc.offsets), [len(p) for p in dask.compute(*sc.parts)])
    whole = got[KEY].to_numpy()
    last = np.searchsorted(whole, whole[sc.offsets[1:] - 1], side="right") - 1
    assert np.array_equal(sc.last_occurrences(), last)
    positions = np.array([0, 1, 53, 999, 1000, N - 1])
    assert np.array_equal(sc.at(positions), whole[positions])
    assert parts == 1 or len(sc.parts) > 1


@pytest.mark.parametrize("written", [False, True])
@pytest.mark.parametrize("side", ["left", "right"])
def test_counts_below_read_only_the_partitions_their_thresholds_fall_in(sync_dask, tied, written, side, tmp_path,
                                                                         monkeypatch):
    """Counts below thresholds equal numpy's on the whole sorted column (the tie value shared by 40 % of the
    records, across many partitions; each partition's first and last values; values between and outside them; NaN
    and infinities), and a count reads only the partitions whose first and last values do not settle it."""
    files = tmp_path / "sorts" if written else None
    sc = sorted_column(keyed_frame(_uneven(tied, 37), "a", "rid"), files)
    whole = np.sort(tied["a"].to_numpy())
    thresholds = np.concatenate([[0.0, np.nan, np.inf, -np.inf, whole[0] - 1, whole[-1] + 1, 17.05],
                                 sc.first, sc.last, np.unique(whole)[::7]])
    read = []
    monkeypatch.setattr(global_order, "_count_below",
                        lambda part, t, s, _f=global_order._count_below: read.append(1) or _f(part, t, s))
    assert np.array_equal(sc.count_below(thresholds, side), np.searchsorted(whole, thresholds, side=side))
    assert len(read) == len(sc.parts)  # some threshold falls in each
    for t in (17.05, whole[-1] + 1, np.inf, -np.inf):
        read.clear()
        assert np.array_equal(sc.count_below(np.array([t]), side), np.searchsorted(whole, [t], side=side))
        straddled = ~((sc.last < t) | (sc.first >= t)) if side == "left" else ~((sc.last <= t) | (sc.first > t))
        assert len(read) == int(straddled.sum()) <= 2


@pytest.mark.parametrize("written", [False, True])
def test_a_sort_samples_its_partitions_for_the_next_sort(sync_dask, tied, written, tmp_path):
    """The samples a sort takes by a carried column, as it sorts, are the regular samples a sort of its
    partitions by that column would take; that sort, given them, is the whole column's order."""
    files = tmp_path / "sorts" if written else None
    sc = sorted_column(keyed_frame(_uneven(tied, 9), "a", "rid", {"b": "other"}), files and files / "a",
                       next_key="other")
    size = global_order._sample_size(9)
    for part, (keys, ids) in zip(dask.compute(*sc.parts), sc.next_samples):
        expected = global_order._regular_sample(pd.DataFrame({KEY: part["other"], ID: part[ID]}), size)
        assert np.array_equal(keys, expected[0]) and np.array_equal(ids, expected[1])
    by_b = dd.from_delayed([dask.delayed(lambda p: pd.DataFrame({KEY: p["other"], ID: p[ID]}))(p) for p in sc.parts],
                           meta=pd.DataFrame({KEY: np.zeros(0), ID: np.zeros(0, dtype=np.int64)}), verify_meta=False)
    got = pd.concat(dask.compute(*sorted_column(by_b, files and files / "b", samples=sc.next_samples).parts))
    order = np.lexsort((tied["rid"].to_numpy(), tied["b"].to_numpy()))
    assert np.array_equal(got[ID].to_numpy(), tied["rid"].to_numpy()[order])


def _reference(df: pd.DataFrame, var: str) -> tuple:
    """The in-memory kernels on the whole columns: rank errors, quantile terms, ID hits then SDID."""
    x, xm, ids = df[var].to_numpy(), df[var + MASKED_SUFFIX].to_numpy(), df["rid"].to_numpy()
    errors = rank_errors(ranks(x, ids)[:, None], ranks(xm, ids)[:, None])
    terms = quantile_pil(np.sort(x), np.sort(xm))
    hits = np.append(interval_hits(np.sort(xm), x, xm), sdid_hits(x, xm, float(x.std())))
    return errors, terms, hits


@pytest.fixture(params=[False, True], ids=["persisted", "files"])
def spill(request, tmp_path):
    """None (the sorted columns persisted), or a directory the sorts exchange and keep their partitions in
    (exchange_files, task_graph.stored), checked empty after the test."""
    if not request.param:
        yield None
        return
    yield tmp_path
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("var", "parts"), [("a", 1), ("a", 37), ("b", 4), ("b", 37), ("c", 37)])
def test_order_measures_equal_the_whole_column_kernels(sync_dask, tied, parts, var, spill):
    """Rank errors and hits exactly, quantile terms bit for bit, whatever the partitioning, with the sorted
    columns persisted or exchanged and kept in files."""
    errors, terms, hits = _reference(tied, var)
    pairs = _uneven(tied, parts)
    got = variable_order_measures(pairs, None, "rid", var, float(tied[var].to_numpy().std()),
                                  OrderAsked(True, True, True), spill)
    assert got.rank_errors == errors
    assert np.array_equal(got.quantile_terms[0].view(np.int64), terms[0].view(np.int64))
    assert got.quantile_terms[1] == terms[1]
    assert np.array_equal(got.hits, hits)


@pytest.mark.parametrize("pieces", [1, 3])
def test_window_tasks_that_read_few_partitions_count_the_same_hits(sync_dask, tied, monkeypatch, pieces):
    """Windows over many partitions split into more tasks (WINDOW_PIECES) give the same hits."""
    _, _, hits = _reference(tied, "b")
    monkeypatch.setattr(order_measures, "WINDOW_PIECES", pieces)
    got = variable_order_measures(_uneven(tied, 37), None, "rid", "b", float(tied["b"].to_numpy().std()),
                                  OrderAsked(hits=True))
    assert np.array_equal(got.hits, hits)


def test_text_ids_break_ties_as_the_kernels_do(sync_dask, tied, spill):
    """Ids of text: ties are broken in the ids' own order, as the whole-column ranks do."""
    tied = tied.assign(rid=[f"r{(i * 7) % 9973:05d}" for i in tied["rid"]])
    errors, terms, hits = _reference(tied, "a")
    got = variable_order_measures(_uneven(tied, 23), None, "rid", "a", float(tied["a"].to_numpy().std()),
                                  OrderAsked(True, True, True), spill)
    assert got.rank_errors == errors and np.array_equal(got.hits, hits)
    assert np.array_equal(got.quantile_terms[0], terms[0])


def test_quantile_terms_from_the_files(sync_dask, tied, spill):
    """With the files read apart (the masked file a subset of the original), the terms are those of the two
    files' sorted columns."""
    masked = tied.sample(frac=0.6, random_state=2).rename(columns={"c": "x", "c" + MASKED_SUFFIX: "c"})
    files = (_uneven(tied, 37), _uneven(masked.reset_index(drop=True), 11, seed=4))
    got = variable_order_measures(files[0], files, "rid", "c", 1.0, OrderAsked(quantiles=True), spill)
    expected = quantile_pil(np.sort(tied["c"].to_numpy()), np.sort(masked["c"].to_numpy()))
    assert np.array_equal(got.quantile_terms[0], expected[0]) and got.quantile_terms[1] == expected[1]
    assert got.rank_errors is None and got.hits is None


def _files(tied: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The original and masked files of the paired test file."""
    original = tied[["rid", "a", "b", "c"]]
    masked = tied[["rid"]].assign(**{v: tied[v + MASKED_SUFFIX] for v in ("a", "b", "c")}).iloc[::-1]
    return original, masked.reset_index(drop=True)


@pytest.mark.parametrize("masked_rows", [N, 1500])
def test_evaluation_out_of_core_equals_gathered(sync_dask, tied, monkeypatch, masked_rows):
    """The il, pil and id families give the same numbers sorted across partitions as gathered on one task
    (every key equal; the file paired whole, and a masked file of fewer records)."""
    original, masked = _files(tied)
    masked = masked.iloc[:masked_rows]
    args = ("rid", ["a", "b", "c"], ["a", "b"], ("il", "pil", "id"))
    gathered = continuous_measures(dd.from_pandas(original, npartitions=3), dd.from_pandas(masked, npartitions=2),
                                   *args)
    monkeypatch.setattr(order_measures, "GATHER_ROWS", 0)
    for parts in (37, 6) if masked_rows == N else (37,):
        sorted_out = continuous_measures(_uneven(original, parts), _uneven(masked, 13, seed=5), *args)
        assert sorted_out == gathered
    assert {"brMAE", "brMSE", "PIL_Q", "ID", "SDID"} <= set(gathered)


def test_nearest_pairing_out_of_core_equals_gathered(sync_dask, tied, monkeypatch):
    """Pairing with the nearest record: PIL's quantile terms from the two files, the same either way."""
    original, masked = _files(tied)
    args = ("rid", ["a", "c"], ["a", "c"], ("pil",), "nearest")
    gathered = continuous_measures(dd.from_pandas(original, npartitions=2), dd.from_pandas(masked, npartitions=2),
                                   *args)
    monkeypatch.setattr(order_measures, "GATHER_ROWS", 0)
    assert continuous_measures(_uneven(original, 37), _uneven(masked, 9), *args) == gathered


def test_distributed_shuffle_gives_the_same_order(tied, spill):
    """On a distributed cluster (peer-to-peer shuffle, or files) the measures are those of the synchronous run."""
    from distributed import Client, LocalCluster

    expected = _reference(tied, "a")
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster):
        got = variable_order_measures(_uneven(tied, 37), None, "rid", "a", float(tied["a"].to_numpy().std()),
                                      OrderAsked(True, True, True), spill)
    assert got.rank_errors == expected[0] and np.array_equal(got.hits, expected[2])
    assert np.array_equal(got.quantile_terms[0], expected[1][0])


def test_profile_out_of_core_equals_gathered(sync_dask, tied, monkeypatch):
    """The report's variable profiles: the same figures sorted across partitions as gathered on one task."""
    original, masked = _files(tied)
    gathered = release_profile(dd.from_pandas(original, npartitions=2), dd.from_pandas(masked, npartitions=2), "rid",
                               ["a", "c"])
    monkeypatch.setattr(order_measures, "GATHER_ROWS", 0)
    assert release_profile(_uneven(original, 37), _uneven(masked, 7), "rid", ["a", "c"]) == gathered
    assert gathered["variables"][0]["measures"]["ID"] > 0 and gathered["variables"][0]["histogram"]["outside"][0] > 0


@pytest.mark.parametrize("gather", [True, False])
def test_the_evaluation_gives_the_report_profiles_of_its_own_sorts(sync_dask, tied, monkeypatch, gather):
    """An evaluation asked for the profiles returns release_profile's figures beside metric keys unchanged, from
    the variables gathered or sorted once for both."""
    original, masked = _files(tied)
    frames = (_uneven(original, 37), _uneven(masked, 13, seed=5))
    args = ("rid", ["a", "b", "c"], ["a", "b"], ("il", "pil", "id"))
    expected = release_profile(dd.from_pandas(original, npartitions=2), dd.from_pandas(masked, npartitions=2), "rid",
                               ["a", "b", "c"])["variables"]
    plain = continuous_measures(*frames, *args)
    if not gather:
        monkeypatch.setattr(order_measures, "GATHER_ROWS", 0)
    sorts = []
    monkeypatch.setattr(order_measures, "paired_orders",
                        lambda *a, _f=order_measures.paired_orders: sorts.append(a[2]) or _f(*a))
    out = continuous_measures(*frames, *args, profile=True)
    assert out.pop(PROFILES_KEY) == expected
    assert out == plain
    assert sorts == ([] if gather else ["a", "b", "c"])


def _written_pairs(monkeypatch) -> list:
    """Make every pairing too large for the workers' memory (pairing.pairs_home writes it to scratch); returns the
    list of the Parquet files each pairing wrote, filled as pairings are read back."""
    written = []
    monkeypatch.setattr(pairing, "workers_hold", lambda nbytes: False)
    monkeypatch.setattr(pairing, "_read_pairs",
                        lambda path, _f=pairing._read_pairs: written.append(sorted(path.glob("*.parquet"))) or _f(path))
    return written


@pytest.mark.parametrize("zipped", [True, False])
def test_pairs_written_to_scratch_give_the_same_metrics(sync_dask, tied, monkeypatch, tmp_path, zipped):
    """Pairs larger than the workers keep in memory are written as Parquet and read back by each pass: every
    metric and profile figure as with the pairs persisted, whether the partitions were zipped (same ids in the same
    order) or joined on the id; the linkage graphs keep their tasks' results in files and the order-based measures
    their sorted columns; the scratch files are gone after the evaluation."""
    original, masked = _files(tied)
    if zipped:
        masked = masked.iloc[::-1].reset_index(drop=True)
    frames = (lambda: _uneven(original, 11), lambda: _uneven(masked, 11 if zipped else 6, seed=1 if zipped else 4))
    args = ("rid", ["a", "b", "c"], ["a", "b", "c"], ("il", "pil", "dld", "pld", "id"))
    monkeypatch.setattr(order_measures, "GATHER_ROWS", 0)
    persisted = continuous_measures(frames[0](), frames[1](), *args, profile=True)
    written = _written_pairs(monkeypatch)
    graphs = []
    monkeypatch.setattr(linkage, "TaskGraph", lambda *a, files, _t=linkage.TaskGraph: graphs.append(files) or
                        _t(*a, files=files))
    sorts = []
    monkeypatch.setattr(order_measures, "sorted_column", lambda frame, files=None, _s=order_measures.sorted_column,
                        **how: sorts.append(files) or _s(frame, files, **how))
    work = tmp_path / "work"
    got = continuous_measures(frames[0](), frames[1](), *args, profile=True, work_dir=work)
    if zipped:
        assert got == persisted
    else:  # a join's rows come in an order that may differ from one computation to the next: sums to the ulp
        assert got.keys() == persisted.keys() and got[PROFILES_KEY] == persisted[PROFILES_KEY]
        for key, value in persisted.items():
            assert got[key] == (pytest.approx(value, rel=1e-12) if isinstance(value, float) else value), key
    assert len(written) == 1 and len(written[0]) >= 1  # one pairing, written
    assert len(written[0]) == 11 or not zipped  # zipped: a file per partition
    assert len(graphs) == 4 and all(f is not None and f.parent.parent == work for f in graphs)  # DLD_1..3, PLD
    assert len(sorts) == 3 * 2  # sorts a and b of each variable, in files
    assert all(f is not None and f.parent.parent.parent == work for f in sorts)
    assert list(work.iterdir()) == []
    assert {"IL", "PIL", "DLD", "PLD", "ID", PROFILES_KEY} <= set(persisted)


@pytest.mark.parametrize("case", ["ids", "row positions", "ids differ"])
def test_pairs_of_parquet_datasets_that_zip_are_read_from_them_not_written(sync_dask, tied, monkeypatch, tmp_path,
                                                                           case):
    """A release's input checkpoint and output (Parquet datasets, a file per partition, the same ids in the same
    order file by file; an original without ids has its row positions, as read_checkpoint gives them) are paired by
    reading both side by side, each pass only its columns: the same metrics and profiles as with the pairs
    persisted, nothing written to scratch; where one file's ids differ (the masked file's last 40 records
    reversed), the pairs are written as before, with the same metrics."""
    original, masked = _files(tied)
    masked = masked.iloc[::-1].reset_index(drop=True)
    if case == "row positions":
        original, masked = original.drop(columns="rid"), masked.assign(rid=np.arange(N))
    if case == "ids differ":
        masked.iloc[-40:] = masked.iloc[-40:].iloc[::-1].to_numpy()
    sources = (tmp_path / "original", tmp_path / "masked")
    for frame, where in zip((original, masked), sources):
        write_parquet(_uneven(frame, 9), where)

    def measures(**where) -> dict:
        return continuous_measures(read_checkpoint(sources[0], "rid", False), dd.read_parquet(sources[1]), "rid",
                                   ["a", "b", "c"], ["a", "b", "c"], ("il", "pil", "dld", "id"), profile=True,
                                   **where)

    monkeypatch.setattr(order_measures, "GATHER_ROWS", 0)
    persisted = measures()
    written = _written_pairs(monkeypatch)
    assert measures(work_dir=tmp_path / "work", sources=sources) == persisted
    assert len(written) == (1 if case == "ids differ" else 0)
    lazy = pairing.zipped_files(sources, "rid", ["a", "b"])
    assert (lazy is None) == (case == "ids differ")
    if lazy is not None:
        both = pd.concat([masked[["rid"]], original[["a", "b"]], masked[["a", "b"]].add_suffix(MASKED_SUFFIX)], axis=1)
        pd.testing.assert_frame_equal(lazy.compute().reset_index(drop=True), both)
        pd.testing.assert_frame_equal(lazy[["b" + MASKED_SUFFIX, "rid"]].compute().reset_index(drop=True),
                                      both[["b" + MASKED_SUFFIX, "rid"]])
        assert pairing.record_count(lazy).compute() == N


def test_categorical_pairs_written_to_scratch_give_the_same_metrics(sync_dask, monkeypatch):
    """Categorical codes paired by id through scratch Parquet: the same cat_il and cat_risk figures, the original's
    risk included; text categories are always held in memory (a Parquet round trip may change their type)."""
    rng = np.random.default_rng(2)
    original = pd.DataFrame({"rid": np.arange(600), "k1": rng.integers(0, 4, 600), "k2": rng.integers(0, 3, 600)})
    masked = original.assign(k1=np.where(rng.random(600) < 0.2, rng.integers(0, 4, 600), original["k1"]))
    text = original.assign(k2=original["k2"].map({0: "a", 1: "b", 2: "c"}))

    def run(orig, mask):
        return evaluate(_uneven(orig, 7), _uneven(mask, 7), "rid", [], [], ("cat_il", "cat_risk"),
                        categorical=["k1", "k2"])

    persisted, persisted_text = run(original, masked), run(text, masked.assign(k2=text["k2"]))
    written = _written_pairs(monkeypatch)
    assert run(original, masked) == persisted
    assert len(written) == 2  # the masked file's pairs and the original paired with itself
    assert run(text, masked.assign(k2=text["k2"])) == persisted_text and len(written) == 2


def test_a_column_too_large_for_a_tasks_memory_is_sorted_across_partitions(sync_dask, tied, monkeypatch):
    """Below GATHER_ROWS, a file whose gathered column a task's memory cannot hold (scheduling.one_task_holds) is
    sorted across the partitions instead, with the same metrics."""
    original, masked = _files(tied)
    args = ("rid", ["a", "c"], ["a"], ("il", "pil", "id"))
    gathered = continuous_measures(_uneven(original, 9), _uneven(masked, 5, seed=3), *args)
    sorts = []
    monkeypatch.setattr(order_measures, "paired_orders",
                        lambda *a, _f=order_measures.paired_orders: sorts.append(a[2]) or _f(*a))
    monkeypatch.setattr(scheduling, "task_memory", lambda: 4 * N * order_measures.GATHER_BYTES - 1)
    assert continuous_measures(_uneven(original, 9), _uneven(masked, 5, seed=3), *args) == gathered
    assert sorts == ["a", "c"]


def test_a_tasks_memory_and_the_tasks_at_once_are_the_schedulers():
    """On a cluster: its worker threads, and a worker's memory limit shared by its threads; on Dask's synchronous
    scheduler one task at a time."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=2, processes=False, memory_limit="2GiB",
                      dashboard_address=None) as cluster, Client(cluster):
        assert scheduling.parallel_tasks() == 4
        assert scheduling.task_memory() == 2**30
    with dask.config.set(scheduler="synchronous"):
        assert scheduling.parallel_tasks() == 1


_STARTS_AND_ENDS: list = []
"""What the tasks of a computation in turn did, in order: ("start", i) and ("end", i) (the cluster's workers are
threads of the test's process)."""


def _watched(i: int, fail: bool = False, seconds: float = 0.05) -> int:
    """Task ``i`` of a computation in turn: notes its start and end, sleeps ``seconds``, and raises where
    ``fail``."""
    import time

    _STARTS_AND_ENDS.append(("start", i))
    time.sleep(seconds)
    if fail:
        raise ValueError(f"task {i} failed")
    _STARTS_AND_ENDS.append(("end", i))
    return i * i


def _most_at_once(log: list) -> int:
    """The most tasks of ``log`` running at the same time."""
    running, most = 0, 0
    for event, _ in log:
        running += 1 if event == "start" else -1
        most = max(most, running)
    return most


def test_tasks_computed_in_turn_come_back_in_order_with_at_most_so_many_running(monkeypatch):
    """On a cluster of four worker threads, nine tasks two at a time, the first slow: their values in the tasks'
    order, never more than two running, each started once, the others started one after another while the first
    runs (no batch waits for its slowest); all nine at once: one graph, no task submitted alone; on Dask's
    synchronous scheduler the same values."""
    from distributed import Client, LocalCluster

    _STARTS_AND_ENDS.clear()
    tasks = [dask.delayed(_watched)(i, False, 1.0 if i == 0 else 0.05, pure=False) for i in range(9)]
    with LocalCluster(n_workers=2, threads_per_worker=2, processes=False, dashboard_address=None) as cluster, \
            Client(cluster):
        assert scheduling.computed_in_turn(tasks, 2) == [i * i for i in range(9)]
        in_turn = list(_STARTS_AND_ENDS)
        with monkeypatch.context() as alone:
            alone.setattr(Client, "compute", lambda *args, **kwargs: pytest.fail("a task submitted alone"))
            assert scheduling.computed_in_turn(tasks, 9) == [i * i for i in range(9)]
    assert sorted(i for event, i in in_turn if event == "start") == list(range(9))
    assert _most_at_once(in_turn) == 2
    assert in_turn.index(("start", 8)) < in_turn.index(("end", 0))
    with dask.config.set(scheduler="synchronous"):
        assert scheduling.computed_in_turn(tasks, 2) == [i * i for i in range(9)]


def _scheduler_settles(client) -> bool:
    """Whether, within five seconds, the scheduler has no task left to run (the released futures' messages reach it
    on their own connection)."""
    import time

    for _ in range(50):
        states = client.run_on_scheduler(lambda dask_scheduler: [t.state for t in dask_scheduler.tasks.values()])
        if not set(states) & {"waiting", "queued", "processing", "no-worker"}:
            return True
        time.sleep(0.1)
    return False


def test_a_failing_task_computed_in_turn_raises_and_the_tasks_after_it_never_start():
    """The third of eight tasks, one at a time, fails: the call raises its error, no later task starts and the
    scheduler is left with none to run."""
    from distributed import Client, LocalCluster

    _STARTS_AND_ENDS.clear()
    tasks = [dask.delayed(_watched)(i, i == 2, pure=False) for i in range(8)]
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        with pytest.raises(ValueError, match="task 2 failed"):
            scheduling.computed_in_turn(tasks, 1)
        assert _scheduler_settles(client)
    assert [i for event, i in _STARTS_AND_ENDS if event == "start"] == [0, 1, 2]


def test_gathered_order_measures_in_turn_on_a_cluster_equal_the_synchronous_ones(tied, monkeypatch):
    """Each variable's columns gathered on one task, the tasks submitted in turn on a cluster (the large-file
    path: no single graph): the same measures as on Dask's synchronous scheduler."""
    from distributed import Client, LocalCluster

    pairs = _uneven(tied, 7)
    sd = {v: float(tied[v].to_numpy().std()) for v in ("a", "b", "c")}
    args = (None, "rid", ["a", "b", "c"], sd, N, OrderAsked(True, True, True))
    with dask.config.set(scheduler="synchronous"):
        expected = order_measures.order_measures(pairs, *args)
    monkeypatch.setattr(scheduling, "ONE_GRAPH_VALUES", 0)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster):
        got = order_measures.order_measures(pairs, *args)
    for v in ("a", "b", "c"):
        assert got[v].rank_errors == expected[v].rank_errors
        assert np.array_equal(got[v].hits, expected[v].hits)
        assert np.array_equal(got[v].quantile_terms[0], expected[v].quantile_terms[0])
