"""CSV blocks: ``io.read_csv_block``, Dask's reader of each block, gives the frame pandas gives with
``float_precision="round_trip"`` (column names, types and every value to the bit), whether pyarrow's doubles
replace pandas' fast ones or pandas reads the block with round_trip (a cell pyarrow does not read as a number)."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sdc_tasks.io import _nearest_doubles, read_csv_block

HARD_DECIMALS = [
    "0.1", "2.2250738585072011e-308", "2.2250738585072012e-308", "4.9406564584124654e-324", "1.7976931348623157e308",
    "9007199254740993.0", "0.30000000000000004", "1.00000000000000011102230246251565404236316680908203125",
    "123456789012345678901234567890e-20", "7.038531e-26", "-0.0", "1e-400", "5e-324", "3.4028236692093846346e38",
    "0.500000000000000166533453693773481063544750213623046875", "8.98846567431158e307",
]


def round_trip(text: str) -> pd.DataFrame:
    """What pandas reads, each decimal to the nearest double."""
    return pd.read_csv(io.BytesIO(text.encode()), float_precision="round_trip")


@pytest.fixture(autouse=True)
def two_parsers_for_any_block(monkeypatch):
    """Small blocks take the two parsers here, as blocks of TWO_PARSERS_BYTES or more do."""
    monkeypatch.setattr("sdc_tasks.io.TWO_PARSERS_BYTES", 0)


def block(text: str) -> pd.DataFrame:
    """What the block reader reads."""
    return read_csv_block(io.BytesIO(text.encode()), float_precision="round_trip")


def assert_same_frame(got: pd.DataFrame, expected: pd.DataFrame) -> None:
    """Same columns, types and values; floats compared bit for bit (so -0.0 and NaN count)."""
    assert list(got.columns) == list(expected.columns)
    assert list(got.dtypes) == list(expected.dtypes)
    for name in expected:
        g, e = got[name].to_numpy(), expected[name].to_numpy()
        if e.dtype == np.float64:
            np.testing.assert_array_equal(g.view(np.int64), e.view(np.int64), err_msg=name)
        else:
            assert [str(v) for v in g] == [str(v) for v in e], name


def assert_read_as_pandas_reads_it(text: str) -> None:
    """The block reader gives round_trip's frame of ``text``, or the same kind of error."""
    try:
        expected = round_trip(text)
    except Exception as exc:
        with pytest.raises(type(exc)):
            block(text)
        return
    assert_same_frame(block(text), expected)


def test_hard_decimals_read_to_the_same_doubles_by_pyarrow():
    text = "x,y\n" + "\n".join(f"{d},{i}" for i, d in enumerate(HARD_DECIMALS)) + "\n"
    fast = pd.read_csv(io.BytesIO(text.encode()), float_precision="high")
    assert _nearest_doubles(io.BytesIO(text.encode()), fast, ["x"], {}) is not None  # pyarrow's doubles are taken
    assert not fast["x"].equals(round_trip(text)["x"])  # where the fast parser alone is off by an ulp
    assert_same_frame(block(text), round_trip(text))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(allow_nan=False, allow_infinity=False), st.integers(-2**62, 2**62),
                          st.sampled_from(["repr", "%.17g", "%.20e", "%.3f", "%g"])), min_size=1, max_size=60))
def test_random_numbers_read_to_the_same_values(rows):
    lines = [f"{(repr(f) if style == 'repr' else style % f)},{i}" for f, i, style in rows]
    text = "value,count\n" + "\n".join(lines) + "\n"
    assert_same_frame(block(text), round_trip(text))


@pytest.mark.parametrize("column", [
    ["1", "NA", "3"],                       # an integer column with a missing value: float64 in both
    ["", "n/a", "NULL"],                    # only missing values
    ["1.5", "inf", "-inf"],                 # infinities (pandas reads them; the checks refuse them later)
    ["a", "b", ""],                         # text
    ["2020-01-01", "2020-01-02", "2021-12-31"],   # dates stay text as pandas reads them
    ["True", "False", "True"],              # booleans
    ["9223372036854775808", "1", "2"],      # beyond int64: pandas' uint64
    ["123456789012345678901234", "1", "2"],  # beyond uint64: pandas' text
    ["9007199254740993", "2", "3"],         # above 2^53 within int64: exact integers
    [" 1.5", "2.5 ", "3"],                  # spaces around numbers
    ["+1", "-2", "0"],                      # signs
    ['"1.25"', '"2"', "3"],                 # quoted numbers
    ["1_000", "2", "3"],                    # an underscore
    ["0x10", "1", "2"],                     # hexadecimal
    ["1,5", "2", "3"],                      # a decimal comma (a fourth field)
])
def test_odd_columns_read_as_pandas_reads_them(column):
    assert_read_as_pandas_reads_it("id,value\n" + "\n".join(f"{i},{v}" for i, v in enumerate(column)) + "\n")


def test_a_header_pyarrow_reads_otherwise_is_read_by_pandas():
    text = "\ufeffa,a,b\n1,2,3\n4,5,6\n"  # a byte-order mark and a repeated name, which pandas renames a.1
    assert_same_frame(block(text), round_trip(text))


def test_a_short_or_long_row_is_read_or_refused_as_pandas_does():
    short = "a,b,c\n1,2,3\n4,5\n"
    assert_same_frame(block(short), round_trip(short))
    long = "a,b\n1,2\n3,4,5\n6,7\n"
    with pytest.raises(pd.errors.ParserError):
        round_trip(long)
    with pytest.raises(pd.errors.ParserError):
        block(long)


NUMBER_LIKE = st.text(alphabet="0123456789.+-eE xinfaINFNd_", min_size=0, max_size=9)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(NUMBER_LIKE, st.floats().map(repr), st.floats(width=32).map(lambda f: f"{f:.9e}"),
                          st.integers(-10**20, 10**20).map(str)), min_size=1, max_size=8))
def test_number_like_cells_read_as_pandas_reads_them(cells):
    # Cells near the edge of what either parser takes for a number: the frame is round_trip's, or the same error.
    assert_read_as_pandas_reads_it("id,value\n" + "\n".join(f"{i},{c}" for i, c in enumerate(cells)) + "\n")
