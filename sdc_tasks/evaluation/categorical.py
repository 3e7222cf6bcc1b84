"""The categorical metric families ``cat_il`` and ``cat_risk`` (docs/categorical.md), each a
:class:`~sdc_tasks.evaluation.family.Family` over a :class:`CategoricalContext`.

Every measure comes from count tables (original-by-masked tables, two-way tables, key-combination counts) that
per-partition kernels build and a tree reduction adds up in one Dask computation, so the totals are exact and
independent of the partitioning; the finishers in sdc_tasks.metrics.categorical_loss and categorical_risk work
on the merged tables, whose size is bounded by the numbers of categories, not of records.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, replace
from functools import cached_property

import dask
import dask.dataframe as dd
import pandas as pd
from dask.delayed import Delayed

from sdc_tasks.errors import InputError
from sdc_tasks.evaluation.family import Family
from sdc_tasks.evaluation.linkage import EM_MAX_ITER
from sdc_tasks.metrics.categorical_loss import add_counts, canonical, categorical_loss, loss_counts, value_counts
from sdc_tasks.metrics.categorical_risk import (
    add_combinations,
    categorical_linkage,
    combination_counts,
    combination_risks,
    kanonymity,
    risk_measures,
)
from sdc_tasks.metrics.diversity import diversity_measures
from sdc_tasks.metrics.household_risk import (
    MEMBERS,
    SURVIVAL,
    add_household_sums,
    household_measures,
    household_sums,
    member_survival,
    risk_lookup,
)
from sdc_tasks.metrics.suda import suda_measures
from sdc_tasks.reserved import MASKED_SUFFIX
from sdc_tasks.scheduling import shuffle_method
from sdc_tasks.stats.moments import tree_merge

PLD_CAT_MAX_DISAGREEMENTS = 1


def text_kinds(frames: list[dd.DataFrame], variables: list[str]) -> dict[str, bool]:
    """Per variable, whether its categories compare as text (a non-numeric column in any file) or as codes."""
    return {v: not all(pd.api.types.is_numeric_dtype(f._meta[v].dtype) for f in frames) for v in variables}


def canonical_orders(ordinal: dict[str, list], text: dict[str, bool]) -> dict[str, list]:
    """The given category orders as canonical category values (sdc_tasks.metrics.categorical_loss.canonical); an
    order that is not numeric for a numeric-coded variable raises InputError naming the variable."""
    out = {}
    for v, order in ordinal.items():
        values = pd.Series(list(order))
        if not text[v]:
            values = pd.to_numeric(values, errors="coerce")
            if values.isna().any():
                raise InputError(f"the category order of ordinal variable {v!r} must hold its numeric codes")
        out[v] = list(canonical(values, text[v]))
    return out


def add_frequency_tables(a: dict, b: dict) -> dict:
    """Per-variable sum of two dicts of frequency tables."""
    return {v: add_counts(a[v], b[v]) for v in a}


def check_categorical(categorical: list[str], keys: list[str], ordinal: dict, families: tuple[str, ...],
                      sensitive: list[str] = ()) -> None:
    """Raise InputError naming an ordinal variable that is not categorical, a family without its variables, or a
    sensitive variable that is also a key."""
    stray = [v for v in ordinal if v not in categorical]
    if stray:
        raise InputError(f"ordinal variable {stray[0]!r} is not listed among the categorical variables")
    if "cat_il" in families and not categorical:
        raise InputError("metric family 'cat_il' needs categorical variables (--categorical)")
    for family in ("cat_risk", "suda", "ldiversity"):
        if family in families and not keys:
            raise InputError(f"metric family {family!r} needs categorical key variables (--categorical)")
    if "ldiversity" in families and not sensitive:
        raise InputError("metric family 'ldiversity' needs sensitive variables (--sensitive; a spec's "
                         "variables.sensitive)")
    both = [s for s in sensitive if s in keys]
    if both:
        raise InputError(f"sensitive variable {both[0]!r} is also a key variable: l-diversity measures what the "
                         "keys disclose of a variable that is not one of them")


@dataclass(frozen=True)
class CategoricalContext:
    """What the categorical families read: the records paired by id on the categorical and key columns
    (``pairs``, persisted), the original, masked and (optional) reference files, the ``categorical`` variables of
    ``cat_il``, the key variables ``keys`` of ``cat_risk``, the category orders of the ordinal variables, the
    masked file's weight column (or None) and its number of records."""

    pairs: dd.DataFrame
    original: dd.DataFrame
    masked: dd.DataFrame
    reference: dd.DataFrame | None
    categorical: list[str]
    keys: list[str]
    ordinal: dict[str, list]
    weight: str | None
    n_masked: int
    max_disagreements: int = PLD_CAT_MAX_DISAGREEMENTS
    sensitive: tuple[str, ...] = ()
    household: str | None = None

    @cached_property
    def text(self) -> dict[str, bool]:
        """Per categorical or key variable, whether its categories compare as text (:func:`text_kinds`)."""
        frames = [self.original, self.masked, *([self.reference] if self.reference is not None else [])]
        return text_kinds(frames, list(dict.fromkeys([*self.categorical, *self.keys, *self.sensitive])))

    @cached_property
    def pair_parts(self) -> list:
        """The delayed partitions of the paired records."""
        return self.pairs.to_delayed()


def _cat_il_tasks(ctx: CategoricalContext) -> dict:
    """The original-by-masked and two-way count tables of the paired records, tree-summed, and the reference
    file's category counts when there is one."""
    tasks = {"loss": tree_merge([dask.delayed(loss_counts)(p, ctx.categorical, ctx.text, MASKED_SUFFIX)
                                 for p in ctx.pair_parts], operator.add)}
    if ctx.reference is not None:
        tasks["reference"] = tree_merge([dask.delayed(value_counts)(p, ctx.categorical, ctx.text)
                                         for p in ctx.reference[ctx.categorical].to_delayed()], add_frequency_tables)
    return tasks


def _cat_il_finish(results: dict, ctx: CategoricalContext) -> dict:
    """Dist, Dist_mean, CTBIL, ACTBIL, EBIL_MF, PRIL_MF and, with a reference file, EBIL_RF and PRIL_RF
    (categorical_loss.categorical_loss)."""
    return categorical_loss(results["loss"], canonical_orders(ctx.ordinal, ctx.text), ctx.n_masked,
                            results.get("reference"))


CAT_IL = Family("cat_il", _cat_il_tasks, _cat_il_finish)


def _cat_risk_tasks(ctx: CategoricalContext) -> dict:
    """Key-combination counts (and weight sums) of the masked file, of the paired records on both files' keys and
    of the original file, each tree-merged."""
    keys, text = ctx.keys, ctx.text
    both = {**text, **{k + MASKED_SUFFIX: text[k] for k in keys}}
    cols = [*keys, *([ctx.weight] if ctx.weight else [])]
    combos = tree_merge([dask.delayed(combination_counts)(p, keys, text, ctx.weight)
                         for p in ctx.masked[cols].to_delayed()], add_combinations)
    return {
        "combos": combos,
        **({"households": _household_sums(ctx, combos)} if ctx.household and ctx.weight else {}),
        "joint": tree_merge([dask.delayed(combination_counts)(p, [*keys, *(k + MASKED_SUFFIX for k in keys)], both)
                             for p in ctx.pair_parts], add_combinations),
        "original": tree_merge([dask.delayed(combination_counts)(p, keys, text)
                                for p in ctx.original[keys].to_delayed()], add_combinations),
    }


def _household_sums(ctx: CategoricalContext, combos) -> Delayed:
    """The household figures' partial sums, tree-merged: each record's 1 - r_i from the masked file's combination
    table, multiplied per household over a Dask grouping by household id (split over as many partitions as the
    file has), then summed per partition (household_risk.household_sums)."""
    lookup = dask.delayed(risk_lookup)(combos, ctx.keys, dask.delayed(combination_risks)(combos, ctx.keys,
                                                                                          ctx.weight))
    columns = [*ctx.keys, ctx.household]
    meta = pd.DataFrame({ctx.household: ctx.masked._meta[ctx.household], SURVIVAL: pd.Series(dtype=float),
                         MEMBERS: pd.Series(dtype=float)})
    members = dd.from_delayed([dask.delayed(member_survival)(p, ctx.keys, ctx.text, ctx.household, lookup)
                               for p in ctx.masked[columns].to_delayed()], meta=meta, verify_meta=False)
    households = members.groupby(ctx.household).agg({SURVIVAL: "prod", MEMBERS: "sum"},
                                                    split_out=members.npartitions, shuffle_method=shuffle_method())
    return tree_merge([dask.delayed(household_sums)(p) for p in households.to_delayed()], add_household_sums)


def _cat_risk_finish(results: dict, ctx: CategoricalContext) -> dict:
    """k-anonymity and sample uniques of the masked file, individual risk (with a weight column), household risk
    (with a household column too) and PLD_cat."""
    out = kanonymity(results["combos"], ctx.keys)
    if ctx.weight:
        out.update(risk_measures(results["combos"], ctx.keys, ctx.weight))
    if "households" in results:
        out.update(household_measures(results["households"]))
    out.update(categorical_linkage(results["joint"], results["original"], ctx.keys,
                                   [k + MASKED_SUFFIX for k in ctx.keys], ctx.max_disagreements, EM_MAX_ITER))
    return out


CAT_RISK = Family("cat_risk", _cat_risk_tasks, _cat_risk_finish)


def _suda_tasks(ctx: CategoricalContext) -> dict:
    """Key-combination counts of the masked file, tree-merged."""
    return {"combos": tree_merge([dask.delayed(combination_counts)(p, ctx.keys, ctx.text)
                                  for p in ctx.masked[ctx.keys].to_delayed()], add_combinations)}


def _suda_finish(results: dict, ctx: CategoricalContext) -> dict:
    """Special uniques of the masked file on the categorical keys (suda.suda_measures)."""
    return suda_measures(results["combos"], ctx.keys)


SUDA = Family("suda", _suda_tasks, _suda_finish)


def _ldiversity_tasks(ctx: CategoricalContext) -> dict:
    """Per sensitive variable, the masked file's counts per (key combination, sensitive value), tree-merged."""
    return {s: tree_merge([dask.delayed(combination_counts)(p, [*ctx.keys, s], ctx.text)
                           for p in ctx.masked[[*ctx.keys, s]].to_delayed()], add_combinations)
            for s in ctx.sensitive}


def _ldiversity_finish(results: dict, ctx: CategoricalContext) -> dict:
    """Distinct and entropy l-diversity and t-closeness of each sensitive variable (diversity.diversity_measures;
    an ordinal sensitive variable's EMD follows its category order)."""
    orders = canonical_orders({s: o for s, o in ctx.ordinal.items() if s in ctx.sensitive}, ctx.text)
    out = {}
    for s in ctx.sensitive:
        out.update(diversity_measures(results[s], list(ctx.keys), s, orders.get(s)))
    return out


LDIVERSITY = Family("ldiversity", _ldiversity_tasks, _ldiversity_finish)


def original_context(ctx: CategoricalContext, pairs: dd.DataFrame, n: int) -> CategoricalContext:
    """The context of the risk families on the original file alone, as if it were released unmasked: the original
    in place of the masked file, ``pairs`` the original paired with itself (its ``n`` records), and the weight,
    sensitive and household columns the original has (a figure whose column it lacks is not computed on it)."""
    columns = set(ctx.original.columns)
    weight = ctx.weight if ctx.weight in columns else None
    return replace(ctx, pairs=pairs, masked=ctx.original, n_masked=n, weight=weight,
                   sensitive=tuple(s for s in ctx.sensitive if s in columns),
                   household=ctx.household if weight and ctx.household in columns else None)

