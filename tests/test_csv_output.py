"""CSV outputs (io.write_csv): a frame of numbers written by Arrow reads back as the file pandas' ``to_csv`` writes,
every value to the bit; any other frame is pandas' own file."""

import numpy as np
import pandas as pd
import pytest

from sdc_tasks.io import write_csv

SPECIAL = [0.0, -0.0, 1.0, -3.0, 0.1, 1e-7, 1e15, 1e16, 1e20, 2.5e-300, 5e-324, 1.7976931348623157e308, np.inf,
           -np.inf, np.nan, 12345.678, 123456789012345678.0]


def _read(path) -> pd.DataFrame:
    """A CSV file read back with every decimal to its nearest double."""
    return pd.read_csv(path, float_precision="round_trip", keep_default_na=True)


@pytest.mark.parametrize("seed", range(5))
def test_numbers_read_back_as_pandas_writes_them(tmp_path, seed):
    """Random doubles of every magnitude, integral floats, special values, integer columns and names that need
    quoting: the same frame (values and column types) as from pandas' file."""
    rng = np.random.default_rng(seed)
    n = 500
    doubles = rng.normal(size=n) * 10.0 ** rng.integers(-300, 300, n)
    frame = pd.DataFrame({
        "id": np.arange(n),
        "a,b": doubles,
        'q"x': rng.choice(SPECIAL, n),
        "whole": rng.integers(-1000, 1000, n).astype(np.float64),
        "small": rng.integers(0, 200, n).astype(np.uint8),
        "big": rng.integers(-2**62, 2**62, n),
    })
    write_csv(frame, tmp_path / "arrow.csv")
    frame.to_csv(tmp_path / "pandas.csv", index=False)
    got, expected = _read(tmp_path / "arrow.csv"), _read(tmp_path / "pandas.csv")
    pd.testing.assert_frame_equal(got, expected)
    assert np.array_equal(got["a,b"].to_numpy().view(np.int64), doubles.view(np.int64))
    assert (tmp_path / "arrow.csv").read_text().splitlines()[0] == 'id,"a,b","q""x",whole,small,big'


@pytest.mark.parametrize("frame", [
    pd.DataFrame({"id": [1, 2], "name": ["a,b", "c"]}),
    pd.DataFrame({"flag": [True, False], "x": [0.5, 1.0]}),
    pd.DataFrame({"x": np.array([0.1, 2.0], dtype=np.float32)}),
    pd.DataFrame({"x": pd.array([1, None], dtype="Int64")}),
    pd.DataFrame([[1.0, 2.0]], columns=["x", "x"]),
    pd.DataFrame({"x": [1.0, np.nan]}),
])
def test_other_frames_are_pandas_own_file(tmp_path, frame):
    """Text, booleans, float32, nullable integers, repeated names and one column (an empty cell alone on its line
    is quoted, or it would read as a blank line): the very bytes pandas writes."""
    write_csv(frame, tmp_path / "got.csv")
    frame.to_csv(tmp_path / "pandas.csv", index=False)
    assert (tmp_path / "got.csv").read_bytes() == (tmp_path / "pandas.csv").read_bytes()


def test_an_empty_frame_keeps_its_header(tmp_path):
    """No rows: the header line only, read back with its columns."""
    write_csv(pd.DataFrame({"id": np.zeros(0, np.int64), "x": np.zeros(0)}), tmp_path / "e.csv")
    assert list(_read(tmp_path / "e.csv").columns) == ["id", "x"]
