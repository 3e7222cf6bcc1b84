"""The mask stage of targeted record swapping over Dask collections: the household table (one row per household:
geography, similarity-profile and carry-along columns, risk per level) built from the person file, the swap
planned on it on the client (``sdc_tasks.masking.record_swap``), then applied per partition by looking each
person's household up in the plan, so a household is never split whatever the partitioning.

Risk (sdcMicro recordSwap vignette, "Sampling probability"): the persons of each combination of the risk
variables and the geography down to each level are counted by one tree reduction (exact for any partitioning);
each person looks its counts up, and a household's risk at a level is the largest 1 / count of its members,
by a Dask grouping on the household id. docs/recordswap.md.
"""

from __future__ import annotations

import itertools

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd

from sdc_tasks import blocking as B
from sdc_tasks.errors import InputError
from sdc_tasks.masking.apply import StepContext
from sdc_tasks.masking.households import sorted_positions
from sdc_tasks.masking.record_swap import SwapPlan, plan_swaps
from sdc_tasks.masking.swap_outcome import OUTCOME_COLUMN, SwapOutcome
from sdc_tasks.reserved import COUNT_COL
from sdc_tasks.scheduling import shared, shuffle_method
from sdc_tasks.stats.frequencies import frequency_tables
from sdc_tasks.validation import household_fault_counts

METHOD = "record_swap"
RISK_PREFIX = "__risk_"  # a household's risk at one level (reserved prefix, sdc_tasks.reserved)
MEMBERS = "__members"


def household_column(params: dict, ctx: StepContext) -> str:
    """The household id column: the step's ``household_id``, else the release's households.id; InputError when
    neither names one."""
    household = params.get("household_id") or ctx.household
    if household is None:
        raise InputError(f"{METHOD} needs the household id column: parameter 'household_id', or households.id in "
                         "the release spec")
    return household


def _profile_columns(params: dict) -> list[str]:
    """Every column of the similarity profiles, once, in order of first mention."""
    return list(dict.fromkeys(c for profile in params["similar"] for c in profile))


def check_swap_input(ddf: dd.DataFrame, variables: list[str], params: dict, household: str) -> None:
    """Raise InputError naming the column or parameter at fault (counts, never values): a named column the input
    lacks, the step's variables other than hierarchy and carry-along, a household id missing or null, a record
    without geography, a household spread over two areas (or differing on a profile or carry-along column)."""
    hierarchy, carry = params["hierarchy"], params["carry_along"]
    if sorted(variables) != sorted([*hierarchy, *carry]):
        raise InputError(f"{METHOD} swaps exactly its hierarchy and carry_along columns: leave the step's "
                         "variables unset or list those")
    named = {"household_id": [household], "hierarchy": hierarchy, "risk_variables": params["risk_variables"],
             "similar": _profile_columns(params), "carry_along": carry}
    for parameter, columns in named.items():
        absent = [c for c in columns if c not in ddf.columns]
        if absent:
            raise InputError(f"parameter '{parameter}' of {METHOD} names column {absent[0]!r}, which the input "
                             "lacks")
    level_columns = list(dict.fromkeys([*hierarchy, *_profile_columns(params), *carry]))
    counts = [int(c) for c in dask.compute(*[ddf[c].isna().sum() for c in hierarchy],
                                           *household_fault_counts(ddf, household, level_columns))]
    nulls, faults = counts[:len(hierarchy)], counts[len(hierarchy):]
    if faults[0]:
        raise InputError(f"household id column {household!r} is missing in {faults[0]} records: every person "
                         f"needs a household for {METHOD}")
    for column, n in zip(hierarchy, nulls):
        if n:
            raise InputError(f"hierarchy column {column!r} is missing in {int(n)} records: every person needs a "
                             "geography")
    for column, broken in zip(level_columns, faults[1:]):
        if broken and column in hierarchy:
            raise InputError(f"{broken} households are spread over two or more {column!r} areas: every member of "
                             "a household must live in the same area")
        if broken:
            raise InputError(f"column {column!r} (similarity profile or carry_along of {METHOD}) differs between "
                             f"the members of {broken} households: it must be a household-level variable")


def check_nesting(table: pd.DataFrame, hierarchy: list[str]) -> None:
    """Raise InputError naming both levels and counting the areas of a level that lie in more than one area of
    the level above (a hierarchy must be nested, its codes unique within each level)."""
    for upper, lower in itertools.pairwise(hierarchy):
        straddling = int((table.groupby(lower, sort=False)[upper].nunique() > 1).sum())
        if straddling:
            raise InputError(f"hierarchy level {lower!r} is not nested in {upper!r}: {straddling} {lower!r} areas "
                             f"lie in more than one {upper!r} area (codes must identify an area within its level)")


def _member_risk(part: pd.DataFrame, household: str, risk_variables: list[str], hierarchy: list[str],
                 tables: list[pd.DataFrame]) -> pd.DataFrame:
    """(household id, 1 / count per level) of each person of a partition, count the persons of its combination of
    the risk variables and the geography down to that level (sdcMicro recordSwap vignette, "Sampling
    probability": r_ih = 1 / counts)."""
    out = pd.DataFrame({household: part[household].to_numpy()})
    for h, table in enumerate(tables):
        keys = [*risk_variables, *hierarchy[:h + 1]]
        counts = part[keys].merge(table, on=keys, how="left")[COUNT_COL].to_numpy(np.float64)
        out[f"{RISK_PREFIX}{h}"] = 1.0 / counts
    out[MEMBERS] = 1
    return out


def risk_tables(ddf: dd.DataFrame, risk_variables: list[str], hierarchy: list[str]) -> list[pd.DataFrame]:
    """Per level, the persons of each combination of the risk variables and the geography down to that level
    (missing values counted as a value)."""
    return frequency_tables(ddf, [[*risk_variables, *hierarchy[:h + 1]] for h in range(len(hierarchy))],
                            dropna=False)


def household_table(ddf: dd.DataFrame, household: str, params: dict) -> pd.DataFrame:
    """One row per household, in household-id order: its id, geography, profile and carry-along columns (those
    of its first member: they are household-level, ``check_swap_input``), members and risk per level (the largest
    of its members'). Exact for any partitioning."""
    hierarchy, risk_variables = params["hierarchy"], params["risk_variables"]
    tables = risk_tables(ddf, risk_variables, hierarchy)
    meta = _member_risk(ddf._meta, household, risk_variables, hierarchy, [t.iloc[:0] for t in tables])
    members = ddf.map_partitions(_member_risk, household, risk_variables, hierarchy, shared(tables), meta=meta)
    risks = {c: "max" for c in meta.columns if c.startswith(RISK_PREFIX)}
    columns = list(dict.fromkeys([*hierarchy, *_profile_columns(params), *params["carry_along"]]))
    grouped = members.groupby(household).agg({**risks, MEMBERS: "sum"}, split_out=ddf.npartitions,
                                              shuffle_method=shuffle_method())
    first = ddf[[household, *columns]].drop_duplicates(subset=[household], split_out=ddf.npartitions,
                                                      shuffle_method=shuffle_method())
    risk, values = dask.compute(grouped, first)
    table = values.set_index(household).join(risk, how="inner").sort_index(kind="stable")
    return table.reset_index()


def _codes(table: pd.DataFrame, columns: list[str]) -> np.ndarray:
    """One integer code per row for the combination of ``columns`` (all zero for none), codes in sorted order of
    the combinations."""
    if not columns:
        return np.zeros(len(table), np.int64)
    return table.groupby(columns, sort=True, dropna=False).ngroup().to_numpy(np.int64)


def swap_plan(table: pd.DataFrame, params: dict, ctx: StepContext) -> SwapPlan:
    """The swap plan of a household table (``record_swap.plan_swaps``), geography as codes in sorted order."""
    hierarchy = params["hierarchy"]
    geography = np.column_stack([_codes(table, [c]) for c in hierarchy])
    risk = table[[f"{RISK_PREFIX}{h}" for h in range(len(hierarchy))]].to_numpy(np.float64)
    profiles = [_codes(table, profile) for profile in params["similar"]]
    return plan_swaps(geography, risk, profiles, params["k"], params["swap_rate"], ctx.seed, ctx.step)


def plan_frame(table: pd.DataFrame, plan: SwapPlan, household: str, variables: list[str]) -> pd.DataFrame:
    """The new values of the swapped columns of every household that swaps, indexed by household id in ascending
    order (``table``'s): those of its partner."""
    moved = np.flatnonzero(plan.partner != np.arange(len(table)))
    new = table[variables].iloc[plan.partner[moved]].reset_index(drop=True)
    return new.set_index(pd.Index(table[household].to_numpy()[moved], name=household))


def _swapped_part(part: pd.DataFrame, offset: int, plan: pd.DataFrame, household: str, variables: list[str],
                  outcome: str | None) -> pd.DataFrame:
    """``_pos`` and the swapped columns of one partition: a person of a household in the plan takes its row's
    values, the others keep theirs; the step's figures (JSON) on the first row when ``outcome`` is given. The plan
    is shared by the partitions' tasks and searched by ``households.sorted_positions``."""
    where, moved = sorted_positions(plan.index.to_numpy(), part[household].to_numpy())
    out = pd.DataFrame({B.POS_COL: np.arange(offset, offset + len(part), dtype=np.int64)})
    for v in variables:
        values = part[v].to_numpy(copy=True)
        values[moved] = plan[v].to_numpy()[where[moved]]
        out[v] = pd.Series(values, dtype=part[v].dtype)
    if outcome is not None:
        out[OUTCOME_COLUMN] = pd.Series([outcome] + [None] * (len(part) - 1), dtype=object)[:len(part)]
    return out


def swapped_frame(ddf: dd.DataFrame, plan: pd.DataFrame, household: str, variables: list[str],
                  outcome: str | None = None) -> dd.DataFrame:
    """The mask stage's frame (``_swapped_part`` per partition, aligned with the input)."""
    offsets = B.offsets_of(B.partition_lengths(ddf))
    meta = _swapped_part(ddf._meta, 0, plan.iloc[:0], household, variables, outcome)
    held = shared(plan)  # one task or scattered piece holds the plan, every partition's task reads it
    pieces = [dask.delayed(_swapped_part)(part, int(offsets[i]), held, household, variables, outcome)
              for i, part in enumerate(ddf.to_delayed())]
    return dd.from_delayed(pieces, meta=meta, verify_meta=False)


def risky_after(ddf: dd.DataFrame, plan: pd.DataFrame, household: str, params: dict) -> list[int]:
    """Per level, the households risky at that level and no coarser one on the swapped file (risk variables and
    hierarchy with the plan applied)."""
    hierarchy, risk_variables = params["hierarchy"], params["risk_variables"]
    columns = [household, *risk_variables, *(c for c in hierarchy if c not in risk_variables)]
    swapped = ddf[columns].map_partitions(_with_plan, shared(plan), household, hierarchy,
                                          meta=ddf[columns]._meta)
    tables = risk_tables(swapped, risk_variables, hierarchy)
    meta = _risky_members(swapped._meta, household, risk_variables, hierarchy, [t.iloc[:0] for t in tables],
                          params["k"])
    flagged = swapped.map_partitions(_risky_members, household, risk_variables, hierarchy, shared(tables),
                                     params["k"], meta=meta)
    levels = flagged.groupby(household)["level"].min(split_out=ddf.npartitions).compute()
    return np.bincount(levels.to_numpy(np.int64), minlength=len(hierarchy)).tolist()


def _with_plan(part: pd.DataFrame, plan: pd.DataFrame, household: str, hierarchy: list[str]) -> pd.DataFrame:
    """A partition with its swapped geography."""
    swapped = _swapped_part(part, 0, plan, household, hierarchy, None)
    return part.assign(**{c: swapped[c].to_numpy() for c in hierarchy})


def _risky_members(part: pd.DataFrame, household: str, risk_variables: list[str], hierarchy: list[str],
                   tables: list[pd.DataFrame], k: int) -> pd.DataFrame:
    """(household id, coarsest level where its count is below k) of each person at risk at some level."""
    risk = _member_risk(part, household, risk_variables, hierarchy, tables)
    above = risk[[f"{RISK_PREFIX}{h}" for h in range(len(hierarchy))]].to_numpy() > 1.0 / k
    at_risk = above.any(axis=1)
    return pd.DataFrame({household: risk[household].to_numpy()[at_risk],
                         "level": above.argmax(axis=1)[at_risk].astype(np.int64)})


def swapped_frame_of(ddf: dd.DataFrame, variables: list[str], params: dict, ctx: StepContext) -> dd.DataFrame:
    """The mask stage of record swapping: checks, household table, plan, the swapped columns of every person
    (``_pos`` and the hierarchy and carry-along columns) and the step's figures (``SwapOutcome`` as JSON in
    OUTCOME_COLUMN on each partition's first row)."""
    household = household_column(params, ctx)
    check_swap_input(ddf, variables, params, household)
    table = household_table(ddf, household, params)
    check_nesting(table, params["hierarchy"])
    plan = swap_plan(table, params, ctx)
    frame = plan_frame(table, plan, household, [*params["hierarchy"], *params["carry_along"]])
    moved = plan.partner != np.arange(len(table))
    outcome = SwapOutcome(METHOD, float(params["swap_rate"]), int(params["k"]), list(params["hierarchy"]),
                          len(table), int(table[MEMBERS].sum()), int(table[MEMBERS].to_numpy()[moved].sum()),
                          plan.risky.tolist(), plan.swapped.tolist(), plan.unmatched.tolist(),
                          risky_after(ddf, frame, household, params))
    return swapped_frame(ddf, frame, household, variables, outcome.as_json())
