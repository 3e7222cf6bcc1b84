"""Exact frequency tables of categorical columns, counted by Dask tree reductions (groupby size)."""

from __future__ import annotations

import dask
import dask.dataframe as dd
import pandas as pd

from sdc_tasks.reserved import COUNT_COL, WEIGHT_COL
from sdc_tasks.scheduling import shuffle_method


def _tidy(counts: pd.Series, by: list[str]) -> pd.DataFrame:
    """A groupby-size result as a frame: the grouping columns and ``count``, rows in sorted key order."""
    frame = counts.rename(COUNT_COL).reset_index()
    return frame.sort_values(by, kind="stable", na_position="last").reset_index(drop=True)


def frequency_tables(ddf: dd.DataFrame, groupings: list[list[str]], strata: str | None = None,
                     dropna: bool = True, units: list[str | None] | None = None) -> list[pd.DataFrame]:
    """For each list of columns, the number of records of each combination of their values (within each
    stratum when ``strata`` names a column: it leads the grouping), as a frame of those columns and
    ``count``; all tables in one computation, each a per-partition groupby merged by a tree reduction, so
    counts are exact for any partitioning. ``dropna``: leave out records with a missing value in the
    grouping (True), or count missing as a value of its own (False). ``units``: per grouping, None to count
    records, or a column whose distinct values are counted instead (a household id: households, each with one
    combination of household-level values and one stratum)."""
    lead = [strata] if strata else []
    units = units or [None] * len(groupings)
    graphs = [_counted(ddf, lead + cols, unit, dropna) for cols, unit in zip(groupings, units)]
    return [_tidy(counts, lead + cols) for counts, cols in zip(dask.compute(*graphs), groupings)]


def _counted(ddf: dd.DataFrame, by: list[str], unit: str | None, dropna: bool):
    """The lazy count of records (``unit`` None) or of distinct ``unit`` values per combination of ``by``; the
    distinct pairs come from a hash shuffle over as many partitions as the file has."""
    if unit is None:
        return ddf[by].groupby(by, dropna=dropna, observed=True).size()
    distinct = ddf[[*by, unit]].drop_duplicates(split_out=ddf.npartitions, shuffle_method=shuffle_method())
    return distinct[by].groupby(by, dropna=dropna, observed=True).size()


def weighted_frequency_table(ddf: dd.DataFrame, columns: list[str], weight: str | None,
                             strata: str | None = None) -> pd.DataFrame:
    """The records (``count``) and summed sampling weights (WEIGHT_COL; the records when ``weight`` is None) of
    each combination of ``columns``, missing a value of its own (within each stratum when ``strata`` names a
    column: it leads the grouping), by a per-partition groupby merged by a tree reduction."""
    lead = [strata] if strata else []
    weights = ddf[weight].astype("float64") if weight else 1.0
    frame = ddf[lead + columns].assign(**{COUNT_COL: 1.0, WEIGHT_COL: weights})
    sums = frame.groupby(lead + columns, dropna=False, observed=True)[[COUNT_COL, WEIGHT_COL]].sum().compute()
    return sums.reset_index().sort_values(lead + columns, kind="stable", na_position="last").reset_index(drop=True)


def scope_rows(table: pd.DataFrame, strata: str | None) -> dict:
    """The rows of a frequency table per stratum label ({None: all rows} without strata), stratum column dropped."""
    if strata is None:
        return {None: table}
    return {label: rows.drop(columns=strata).reset_index(drop=True)
            for label, rows in table.groupby(strata, sort=True, observed=True)}


def sorted_categories(ddf: dd.DataFrame, variables: list[str]) -> dict[str, list]:
    """{variable: its distinct non-missing values, sorted} for the given columns, in one computation (the order of
    an ordinal variable whose categories were not declared)."""
    found = dask.compute(*[ddf[v].dropna().unique() for v in variables])
    return {v: sorted(values.tolist()) for v, values in zip(variables, found)}
