"""Household-consistent categorical masking: a household-level variable (the same for every member of a household,
the spec's ``households.variables``) is masked once per household, and every member gets the same result;
person-level variables are masked as without households.

Sources: statistical_databases_survey.txt (PRAM; Global recoding; Local suppression; k-anonymity), applied to the
household as the unit, as sdcMicro's guide masks household-level variables on the household file (one record per
household, ``selectHouseholdData``) before merging them back to the persons (docs/references.md, "sdcMicro household
files"; docs/categorical.md, "Households"):

- PRAM draws a household-level variable's new category once per household: its uniform is keyed by (seed, step,
  variable, household id) instead of the record id (:func:`draw_keys`), so every member draws the same one on any
  partitioning, without regrouping the records; the category frequencies of its Kooiman matrix, like those of
  global recoding, count households (``stats.frequencies.frequency_tables``, ``units``);
- recoding (top and bottom coding, global recoding, recode) is a function of the value within a scope, so members
  with one value get one result;
- local suppression runs on the persons as without households; then, when a member lost a household-level value,
  every member of the household loses it (:func:`household_suppressed_records`). A suppressed value matches any
  value (``missing: any``), so a value made missing never lowers a record's compatible frequency: the file stays
  k-anonymous. Those extra suppressions are counted per record in ``HOUSEHOLD_EXTRA_COL`` of the mask stage's output and
  reported as the step's outcome (``household_outcome.HouseholdOutcome``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd

from sdc_tasks import blocking as B
from sdc_tasks.masking import apply as A
from sdc_tasks.masking.household_outcome import HouseholdOutcome
from sdc_tasks.reserved import HOUSEHOLD_EXTRA_COL, SUPPRESS_COL


def household_keys(households: pd.Series) -> np.ndarray:
    """Integer keys of household ids for ``record_random``: integer ids as themselves, any other ids (text, floats)
    by pandas' fixed-key hash of their values, so equal ids give equal keys in every process."""
    if pd.api.types.is_integer_dtype(households.dtype):
        return households.to_numpy(np.int64)
    return pd.util.hash_pandas_object(households, index=False).to_numpy(np.uint64)


def draw_keys(rows: pd.DataFrame, variable: str, keys: dict) -> tuple[np.ndarray, object]:
    """(ids, stream) keying the random draws of ``variable`` for ``rows``: the record ids and the variable for a
    person-level variable (the draws without households); the household ids' keys and ("household", variable)
    for a household-level one, so all members of a household share a draw."""
    if variable in keys.get("household_variables", ()):
        return household_keys(rows[keys["household"]]), f"household {variable}"
    return rows[keys["id_column"]].to_numpy(), variable


def _lost_bits(part: pd.DataFrame, masked: pd.DataFrame, variables: list[str]) -> np.ndarray:
    """Per record, the bit mask of ``variables`` (bit j: ``variables[j]``) whose values ``masked`` made missing."""
    bits = np.zeros(len(part), dtype=np.int64)
    for j, v in enumerate(variables):
        bits |= (part[v].notna().to_numpy() & masked[v].isna().to_numpy()).astype(np.int64) << j
    return bits


def _households_losing(part: pd.DataFrame, offset: int, mask: Callable, household: str,
                       homes: list[str]) -> pd.DataFrame:
    """The households of one partition some member of which loses a household-level value under ``mask`` (the
    method on a partition, ``apply.mask_categories``), with the bit mask of those values (bit j: ``homes[j]``), one
    row per such member."""
    bits = _lost_bits(part, mask(part, offset), homes)
    lost = bits > 0
    return pd.DataFrame({household: part[household].to_numpy()[lost], SUPPRESS_COL: bits[lost]})


def _whole_households(tables: list[pd.DataFrame], household: str) -> pd.Series:
    """Per household that loses a household-level value, in household-id order, the bit mask of every such value
    any member lost."""
    frame = pd.concat(tables, ignore_index=True)
    return frame.groupby(household, sort=True)[SUPPRESS_COL].agg(np.bitwise_or.reduce)


def sorted_positions(ids: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each of ``values`` stands in the sorted unique ``ids`` (0 where absent) and whether it is there, by
    binary search. Tasks on threads share such a table: a pandas index lookup on it would build the index's hash
    table lazily, and threads that build it at once can miss keys."""
    if len(ids) == 0:
        return np.zeros(len(values), np.int64), np.zeros(len(values), bool)
    where = np.minimum(np.searchsorted(ids, values), len(ids) - 1)
    return where, ids[where] == values


def _suppressed_households(part: pd.DataFrame, offset: int, mask: Callable, household: str, homes: list[str],
                           lost: pd.Series) -> pd.DataFrame:
    """One partition masked by ``mask``, then every member of a household in ``lost`` without the household-level
    values the household lost; ``HOUSEHOLD_EXTRA_COL`` counts the values each record lost only that way."""
    masked = mask(part, offset)
    where, found = sorted_positions(lost.index.to_numpy(), part[household].to_numpy())
    bits = np.where(found, lost.to_numpy(np.int64)[where], 0)
    extra = np.zeros(len(part), dtype=np.int64)
    for j, v in enumerate(homes):
        drop = (bits >> j & 1 == 1) & masked[v].notna().to_numpy()
        extra += drop
        masked[v] = masked[v].mask(drop)
    return masked.assign(**{HOUSEHOLD_EXTRA_COL: extra})


def household_suppressed_records(ddf: dd.DataFrame, variables: list[str], params: dict, ctx: A.StepContext,
                                 method: A.CategoryMethod) -> dd.DataFrame:
    """The mask stage of a suppressing categorical method with household-level variables among ``variables``:
    its plans as without households, one pass finding the households a member of which loses a household-level
    value (a small table: the households concerned only), then each partition masked and those households'
    members made to lose the same values, with ``HOUSEHOLD_EXTRA_COL`` (module docstring)."""
    homes = [v for v in variables if v in ctx.household_variables]
    plans, keys, meta = A.category_plans(ddf, variables, params, ctx, method)
    mask = partial(A.mask_categories, variables=variables, strata=ctx.strata, method=method, plans=plans, keys=keys,
                   meta=meta)
    offsets = [int(o) for o in B.offsets_of(B.partition_lengths(ddf))]
    parts = ddf.to_delayed()
    found = [dask.delayed(_households_losing)(part, offsets[i], mask, ctx.household, homes)
             for i, part in enumerate(parts)]
    lost = dask.delayed(dask.delayed(_whole_households)(found, ctx.household).compute())
    pieces = [dask.delayed(_suppressed_households)(part, offsets[i], mask, ctx.household, homes, lost)
              for i, part in enumerate(parts)]
    return dd.from_delayed(pieces, meta=meta.assign(**{HOUSEHOLD_EXTRA_COL: pd.Series(dtype="int64")}),
                           verify_meta=False)


def household_outcome(method: str, masked_values: dd.DataFrame) -> HouseholdOutcome:
    """The step's outcome from its mask stage's output (its ``HOUSEHOLD_EXTRA_COL``): the extra suppressions and
    the records they fell on."""
    extra = masked_values[HOUSEHOLD_EXTRA_COL]
    values, records = dask.compute(extra.sum(), (extra > 0).sum())
    return HouseholdOutcome(method, int(values), int(records))
