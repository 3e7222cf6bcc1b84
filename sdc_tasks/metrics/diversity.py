"""l-diversity and t-closeness of a sensitive variable within the groups of records that share a key combination.

Sources: Machanavajjhala et al. (2007), "l-Diversity: Privacy Beyond k-Anonymity" (distinct and entropy
l-diversity); Li, Li and Venkatasubramanian (2007), "t-Closeness: Privacy Beyond k-Anonymity and l-Diversity" (the
Earth Mover's Distance between a group's distribution of the sensitive variable and the file's); sdcMicro's
``ldiversity`` for the distinct and entropy values as it computes them (docs/references.md).

A group is the records with one combination of the key variables, a missing key value being a value of its own
(sdcMicro groups records whose keys are all present this way; docs/categorical.md says where it differs for
suppressed keys). Within a group, a missing sensitive value is a category of its own unless it is the only one
(as sdcMicro counts it). Everything is computed from the table of (keys, sensitive value) counts, tree-reduced
over the partitions: its size is the number of such combinations, not of records.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sdc_tasks.metrics.categorical_risk import COUNT, _missing


def group_diversity(table: pd.DataFrame, keys: list[str], sensitive: str) -> pd.DataFrame:
    """Per key combination of ``table`` (counts per keys and sensitive value): its records (COUNT), its distinct
    l (the distinct sensitive values, a missing value counted unless it is the only one) and its entropy l
    (exp(-sum p ln p) over the same categories, p the share of the group's records)."""
    missing = _missing(table[sensitive])
    groups = table.groupby(keys, sort=False, dropna=False)
    size = groups[COUNT].transform("sum").to_numpy()
    p = table[COUNT].to_numpy() / size
    frame = pd.DataFrame({"group": groups.ngroup().to_numpy(), "present": ~missing, "missing": missing,
                          "plogp": p * np.log(p), COUNT: table[COUNT].to_numpy()})
    per = frame.groupby("group", sort=True).agg(present=("present", "sum"), missing=("missing", "any"),
                                                plogp=("plogp", "sum"), records=(COUNT, "sum"))
    only_missing = per["present"] == 0
    distinct = per["present"] + (per["missing"] & ~only_missing)
    entropy = np.where(only_missing, 1.0, np.exp(-per["plogp"].to_numpy()))
    return pd.DataFrame({COUNT: per["records"].to_numpy(), "distinct": distinct.to_numpy(np.float64),
                         "entropy": entropy})


def emd_distance(group: np.ndarray, overall: np.ndarray, ordered: bool) -> float:
    """The Earth Mover's Distance between two distributions over the same categories (Li et al. 2007): the
    variational distance 1/2 sum |p - q| when the categories are unordered (equal ground distance), and
    1/(m - 1) sum over i of |sum_{j <= i} (p_j - q_j)| when they are ordered (ground distance |i - j| / (m - 1))."""
    diff = group - overall
    if not ordered:
        return float(0.5 * np.abs(diff).sum())
    m = len(diff)
    return float(np.abs(np.cumsum(diff)[:-1]).sum() / (m - 1)) if m > 1 else 0.0


def t_closeness(table: pd.DataFrame, keys: list[str], sensitive: str, order: list | None) -> float:
    """The largest EMD between a key combination's distribution of the sensitive variable and the whole file's
    (records with a missing sensitive value left out; ``order``: the categories in order for an ordinal variable,
    None for a nominal one)."""
    present = table[~_missing(table[sensitive])]
    if present.empty:
        return 0.0
    categories = list(order) if order is not None else sorted(present[sensitive].unique(), key=str)
    wide = (present.groupby([*keys, sensitive], sort=False)[COUNT].sum().unstack(sensitive, fill_value=0.0)
            .reindex(columns=categories, fill_value=0.0))
    counts = wide.to_numpy(np.float64)
    overall = counts.sum(axis=0) / counts.sum()
    shares = counts / counts.sum(axis=1, keepdims=True)
    return max(emd_distance(row, overall, order is not None) for row in shares)


def diversity_measures(table: pd.DataFrame, keys: list[str], sensitive: str, order: list | None = None) -> dict:
    """The ``ldiversity`` keys of one sensitive variable from its (keys, sensitive value) count table: the smallest
    distinct and entropy l over the key combinations (ldiversity_distinct_min_<var>, ldiversity_entropy_min_<var>),
    the records in combinations of distinct l below 2 (ldiversity_records_below_2_<var>: their sensitive value is
    disclosed by their keys) and t-closeness, the largest EMD to the file's distribution (tcloseness_<var>)."""
    groups = group_diversity(table, keys, sensitive)
    return {f"ldiversity_distinct_min_{sensitive}": float(groups["distinct"].min()),
            f"ldiversity_entropy_min_{sensitive}": float(groups["entropy"].min()),
            f"ldiversity_records_below_2_{sensitive}": float(groups.loc[groups["distinct"] < 2, COUNT].sum()),
            f"tcloseness_{sensitive}": t_closeness(table, keys, sensitive, order)}
