"""Disclosure risk on categorical key variables: k-anonymity, sample uniques, individual risk and probabilistic
linkage at the level of key combinations (statistical_databases_survey.txt, k-anonymity and disclosure risk for
categorical data; sdcMicro freqCalc/indivRisk; sdc_methods_comparison_chapter.txt sec. 3 and 5 for PLD).
Choices and sources: docs/categorical.md.

Records are reduced to their key combinations with a count (and a weight sum): :func:`combination_counts` is a
per-partition kernel whose tables add up, so a tree reduction gives the exact table of the whole file, and every
measure is computed from that table. A missing key value (local suppression) matches any value (sdcMicro).
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd
import psutil

from sdc_tasks.errors import InputError
from sdc_tasks.metrics import pld
from sdc_tasks.metrics.categorical_loss import MISSING_CODE, MISSING_TEXT, canonical
from sdc_tasks.reserved import COUNT_COL as COUNT
from sdc_tasks.reserved import MASKED_ROW, ORIGINAL_ROW, PATTERN_COL, ROW_COL
from sdc_tasks.reserved import WEIGHT_COL as WEIGHT
from sdc_tasks.stats.group_sums import compensated_group_sums

KANON_KS = (2, 3, 5)
PAIR_BYTES = 1200
"""Peak memory of PLD_cat per candidate pair of key combinations, mostly its transportation LP (measured: 1.65
million pairs, 1.9 GB; docs/categorical.md)."""
RISK_THRESHOLD = 0.1


def combination_counts(part: pd.DataFrame, keys: list[str], text: dict[str, bool], weight: str | None = None,
                       suffix: str = "") -> pd.DataFrame:
    """Records and summed weights (``weight`` column, when given) per key combination of one partition (kernel;
    tables add up with :func:`add_combinations`). Columns: the keys, COUNT and, with a weight, WEIGHT."""
    frame = pd.DataFrame({k: canonical(part[k + suffix], text[k]) for k in keys})
    frame[COUNT] = 1.0
    if weight is not None:
        frame[WEIGHT] = part[weight].to_numpy(np.float64)
    return frame.groupby(keys, sort=False).sum().reset_index()


def add_combinations(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """The sum of two combination tables (same keys)."""
    keys = [c for c in a.columns if c not in (COUNT, WEIGHT)]
    return pd.concat([a, b], ignore_index=True).groupby(keys, sort=False).sum().reset_index()


def _missing(values: pd.Series) -> np.ndarray:
    """Whether each value is the missing category."""
    return values.isin([MISSING_CODE, MISSING_TEXT]).to_numpy()


def _pattern_bits(table: pd.DataFrame, keys: list[str]) -> np.ndarray:
    """Each combination's missing pattern as a bit mask (bit j: key j missing): int64, or Python integers for more
    than 62 keys."""
    kind = np.int64 if len(keys) <= 62 else object
    bits = np.zeros(len(table), kind)
    for j, k in enumerate(keys):
        bits |= _missing(table[k]).astype(kind) << j
    return bits


def _combined_codes(codes: list[np.ndarray], sizes: list[int]) -> np.ndarray:
    """One int64 code per row, equal for two rows exactly when every one of ``codes`` (value codes 0..size-1 per
    column) is; made dense again (``np.unique``) whenever the next column could overflow the mixed radix."""
    out = np.zeros(len(codes[0]) if codes else 0, np.int64)
    span = 1
    for code, size in zip(codes, sizes):
        if span > (1 << 62) // max(size, 1):
            uniques, out = np.unique(out, return_inverse=True)
            span = len(uniques)
        out = out * size + code
        span *= size
    return out


def _group_sums(labels: np.ndarray, values: np.ndarray, groups: int) -> np.ndarray:
    """``stats.group_sums.compensated_group_sums``, without its compiled loop where every group holds one row (no
    key value missing: each combination is its own group), whose sum is its value (0 for NaN)."""
    if groups < len(labels):
        return compensated_group_sums(labels, values, groups)
    summed = np.empty_like(values)
    summed[labels] = np.where(np.isnan(values), 0.0, values)
    return summed


def compatible_totals(table: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """For every combination of ``table``, the records (f_k, column COUNT) and summed weights (F_k, column WEIGHT
    when present) of all combinations compatible with it: equal on every key where neither is missing; a
    missing value matches any value (sdcMicro freqCalc semantics; statistical_databases_survey.txt, k-anonymity).

    Exact for any share of missing values: with S and T the missing-key sets of two combinations, they are
    compatible iff equal on the keys outside S | T, so for each pair of missing patterns (S, T) present the
    pattern-T combinations are summed by their values on the keys outside S | T and looked up for the pattern-S
    combinations. Those values are matched as one integer code per combination (``_combined_codes``), and the
    pattern-T rows are summed in table order with Kahan's compensation, as pandas' group-by on the keys summed
    them before (``stats.group_sums``): the same doubles (tests/compatible_totals_reference.py). Cost:
    (number of patterns)^2 sorts of codes of the combination table."""
    sums = [c for c in (COUNT, WEIGHT) if c in table.columns]
    values = table[sums].to_numpy(np.float64)
    bits = _pattern_bits(table, keys)
    coded = [pd.factorize(table[k], use_na_sentinel=False)[0] for k in keys]
    sizes = [int(c.max()) + 1 if len(c) else 1 for c in coded]
    groups = {int(p): np.flatnonzero(bits == p) for p in pd.unique(bits)}
    codes_on: dict[tuple[int, ...], np.ndarray] = {}
    out = np.zeros((len(table), len(sums)))
    for s, rows in groups.items():
        acc = np.zeros((len(rows), len(sums)))
        for t, others in groups.items():
            on = tuple(j for j in range(len(keys)) if not (s | t) >> j & 1)
            if not on:
                acc += table[bits == t][sums].sum().to_numpy()  # pandas' column sums, as before
                continue
            if on not in codes_on:
                codes_on[on] = _combined_codes([coded[j] for j in on], [sizes[j] for j in on])
            found, position = np.unique(codes_on[on][others], return_inverse=True)
            summed = _group_sums(position, values[others], len(found))
            wanted = codes_on[on][rows]
            at = np.minimum(np.searchsorted(found, wanted), len(found) - 1)
            hit = found[at] == wanted
            acc[hit] += summed[at[hit]]
        out[rows] = acc
    return pd.DataFrame(out, columns=sums, index=table.index)


def combination_rows(part: pd.DataFrame, table: pd.DataFrame, keys: list[str], text: dict[str, bool]) -> np.ndarray:
    """The row position in ``table`` (a :func:`combination_counts` table of these records or of a file holding
    them, or any frame of its key columns) of each record's key combination, matched on the canonical values
    (missing a value of its own); ValueError when the table lacks a record's combination."""
    canon = pd.DataFrame({k: canonical(part[k], text[k]) for k in keys})
    rows = table[keys].reset_index(drop=True).assign(**{ROW_COL: np.arange(len(table))})
    found = canon.merge(rows, on=keys, how="left")[ROW_COL]
    if found.isna().any():
        raise ValueError(f"{int(found.isna().sum())} records have a key combination the combination table lacks")
    return found.to_numpy(np.int64)


def compatible_frequencies(part: pd.DataFrame, text: dict[str, bool] | None = None) -> np.ndarray:
    """f_k of each record of ``part`` (every column a key; ``text``: which are read as text, default none): the
    records that agree with it on every key where both have a value (:func:`compatible_totals`)."""
    keys = list(part.columns)
    text = text or {k: False for k in keys}
    table = combination_counts(part, keys, text)
    return compatible_totals(table, keys)[COUNT].to_numpy()[combination_rows(part, table, keys, text)]


def kanonymity(table: pd.DataFrame, keys: list[str]) -> dict:
    """k-anonymity keys from a combination table (statistical_databases_survey.txt, k-anonymity): the smallest
    compatible group (kanon_min_group), the records in groups smaller than k for k = 2, 3, 5
    (kanon_violations_k) and the sample uniques (records compatible with no other record; count and percent)."""
    f = compatible_totals(table, keys)[COUNT].to_numpy()
    records = table[COUNT].to_numpy()
    n = float(records.sum())
    out = {"kanon_min_group": float(f.min())}
    out.update({f"kanon_violations_{k}": float(records[f < k].sum()) for k in KANON_KS})
    out["sample_uniques"] = float(records[f == 1].sum())
    out["sample_uniques_percent"] = 100.0 * out["sample_uniques"] / n
    return out


def _log_tail(q: np.ndarray) -> np.ndarray:
    """(-ln(1 - q) - q) / q^2 = sum_{k>=0} q^k / (k + 2), by its series below q = 1e-3 (no cancellation)."""
    q = np.asarray(q, dtype=np.float64)
    series = sum(q**k / (k + 2) for k in range(8))
    with np.errstate(divide="ignore", invalid="ignore"):
        closed = (-np.log1p(-q) - q) / q**2
    return np.where(q < 1e-3, series, closed)


def individual_risk(f: np.ndarray, big_f: np.ndarray) -> np.ndarray:
    """Per-record individual risk of the Benedetti-Franconi model, sdcMicro indivRisk (method "approx"), with
    p = f_k / F_k, f_k the sample frequency of the record's key combination and F_k the summed sampling weights
    (the population frequency estimate): f_k = 1: p / (1 - p) ln(1 / p); f_k = 2: p / (1 - p) - (p / (1 - p))^2
    ln(1 / p); f_k > 2: p / (f_k - (1 - p)). Written with q = 1 - p as p (-ln(1 - q)) / q and
    p (1 - p (-ln(1 - q) - q) / q^2), which are exact rewrites that stay finite as p -> 1 (limits 1 and 1/2)."""
    f = np.asarray(f, dtype=np.float64)
    big_f = np.asarray(big_f, dtype=np.float64)
    p = f / big_f
    q = (big_f - f) / big_f
    tail = _log_tail(q)
    one = p * (1.0 + q * tail)
    two = p * (1.0 - p * tail)
    return np.where(f == 1, one, np.where(f == 2, two, p / (f - q)))


def combination_risks(table: pd.DataFrame, keys: list[str], weight: str) -> np.ndarray:
    """The individual risk of the records of each combination of a table with summed weights (its compatible f_k
    and F_k, :func:`individual_risk`); F_k below f_k (weights under 1) raises InputError naming the weight
    column."""
    totals = compatible_totals(table, keys)
    f, big_f = totals[COUNT].to_numpy(), totals[WEIGHT].to_numpy()
    if np.any(~np.isfinite(big_f)) or np.any(big_f < f):
        raise InputError(f"weight column {weight!r} must hold finite sampling weights of at least 1 (the summed "
                         "weights of a key combination are below its number of records)")
    return individual_risk(f, big_f)


def risk_measures(table: pd.DataFrame, keys: list[str], weight: str) -> dict:
    """Individual-risk keys from a combination table with summed weights: indiv_risk_max, indiv_risk_mean,
    expected_reidentifications (sum of the per-record risks), global_risk_percent (that sum in percent of the
    records, sdcMicro's global risk) and records_risk_above_0.1 (percent)."""
    risk = combination_risks(table, keys, weight)
    records = table[COUNT].to_numpy()
    n = records.sum()
    return {"indiv_risk_max": float(risk.max()), "indiv_risk_mean": float(records @ risk / n),
            "expected_reidentifications": float(records @ risk),
            "global_risk_percent": 100.0 * float(records @ risk) / n,
            f"records_risk_above_{RISK_THRESHOLD}": 100.0 * float(records[risk > RISK_THRESHOLD].sum()) / n}


def candidate_combinations(masked: pd.DataFrame, original: pd.DataFrame, keys: list[str],
                           max_disagreements: int) -> pd.DataFrame:
    """Candidate pairs of (masked combination, column MASKED_ROW; original combination, column ORIGINAL_ROW), row
    positions in the two tables, that disagree on at most ``max_disagreements`` keys (blocking: for every set of
    that many keys, the combinations equal on the other keys), with the agreement pattern code of each pair
    (column PATTERN_COL; level 0 agree, 1 disagree, first key most significant; a missing masked value
    disagrees)."""
    m = masked[keys].reset_index(drop=True).assign(**{MASKED_ROW: np.arange(len(masked))})
    o = original[keys].reset_index(drop=True).assign(**{ORIGINAL_ROW: np.arange(len(original))})
    ignored_sets = list(combinations(keys, min(max_disagreements, len(keys))))
    _check_candidate_count(m, o, keys, ignored_sets)
    found = []
    for ignored in ignored_sets:
        on = [k for k in keys if k not in ignored]
        pairs = m.merge(o, on=on) if on else m.merge(o, how="cross")
        found.append(pairs[[MASKED_ROW, ORIGINAL_ROW]])
    pairs = pd.concat(found, ignore_index=True).drop_duplicates(ignore_index=True)
    levels = np.column_stack([masked[k].to_numpy()[pairs[MASKED_ROW]] != original[k].to_numpy()[pairs[ORIGINAL_ROW]]
                              for k in keys]).astype(np.int8)
    return pairs.assign(**{PATTERN_COL: pld.pattern_codes(levels, 2)})


def available_memory() -> int:
    """Bytes of memory this machine can still give a process without swapping."""
    return psutil.virtual_memory().available


def _check_candidate_count(masked: pd.DataFrame, original: pd.DataFrame, keys: list[str],
                           ignored_sets: list[tuple[str, ...]]) -> None:
    """Raise InputError, naming the keys that cause most of them, when the candidate pairs of
    :func:`candidate_combinations` (counted per blocking before any is built) need more memory (PAIR_BYTES each)
    than the machine has available: a key with thousands of categories, such as a small area, makes nearly every
    pair of combinations that differ on it a candidate."""
    counts = {}
    for ignored in ignored_sets:
        on = [k for k in keys if k not in ignored]
        if not on:
            counts[ignored] = len(masked) * len(original)
            continue
        sizes = masked.groupby(on, dropna=False).size().rename("m").to_frame().join(
            original.groupby(on, dropna=False).size().rename("o"), how="inner")
        counts[ignored] = int((sizes["m"] * sizes["o"]).sum())
    total = sum(counts.values())
    available = available_memory()
    if total * PAIR_BYTES <= available:
        return
    worst = max(counts, key=counts.get)
    named = ", ".join(f"{k} ({original[k].nunique()} categories)" for k in worst)
    raise InputError(f"cat_risk: PLD_cat would weigh {total:,} candidate pairs of key combinations, about "
                     f"{total * PAIR_BYTES / 2**30:.1f} GiB where {available / 2**30:.1f} GiB are available; "
                     f"{counts[worst]:,} of them are pairs that differ on {named}: take so fine a key out of the "
                     "keys (keep it as a household or geographic column) or use a coarser one")


def linked_share(pairs: pd.DataFrame, flow: np.ndarray, true_pairs: np.ndarray, masked_counts: np.ndarray,
                 orig_counts: np.ndarray) -> float:
    """Expected correctly linked records of an assignment between combinations (sdc_methods_comparison_chapter.txt
    sec. 3, "percentage of correctly paired records"): records sharing a combination are indistinguishable, so
    the x records assigned from masked combination m to original combination o are a uniformly random choice
    among them, and each of the t(m, o) true pairs is linked with probability x / (a_m b_o) (a, b the
    combination sizes): sum of x t / (a b) (the 1/t tie share of docs/metrics.md DLD)."""
    a = masked_counts[pairs[MASKED_ROW].to_numpy()]
    b = orig_counts[pairs[ORIGINAL_ROW].to_numpy()]
    return float((flow * true_pairs / (a * b)).sum())


def chance_agreement(masked: pd.DataFrame, original: pd.DataFrame, keys: list[str]) -> np.ndarray:
    """(m_vars, 2) u probabilities [agree, disagree] per key: the share of all (masked, original) record pairs that
    agree on the key, sum_c a_c b_c / (n' n) over its categories c (Jaro 1989: u from random pairs; nearly every
    pair is a non-match)."""
    total = masked[COUNT].sum() * original[COUNT].sum()
    agree = np.array([float(masked.groupby(k)[COUNT].sum().mul(original.groupby(k)[COUNT].sum(), fill_value=0.0)
                            .sum()) / total for k in keys])
    return np.column_stack([agree, 1.0 - agree])


def _positions(table: pd.DataFrame, keys: list[str], name: str) -> pd.DataFrame:
    """The key columns of a combination table beside each row's position (column ``name``)."""
    return table[keys].reset_index(drop=True).assign(**{name: np.arange(len(table))})


def categorical_linkage(joint: pd.DataFrame, original: pd.DataFrame, keys: list[str], masked_keys: list[str],
                        max_disagreements: int, em_max_iter: int) -> dict:
    """PLD on categorical keys (sdc_methods_comparison_chapter.txt sec. 3 and 5; Jaro 1989): ``joint`` counts the
    paired records per (original combination on ``keys``, masked combination on ``masked_keys``), ``original``
    counts the original file's records per combination. Candidate pairs of combinations come from
    :func:`candidate_combinations`; each stands for a_m b_o record pairs with one binary agreement pattern, whose
    frequencies fit the Fellegi-Sunter m by EM (pld.fit_fellegi_sunter, 2 levels) with u held at the chance
    agreement of all record pairs (:func:`chance_agreement`); the records are assigned
    one-to-one by maximum total weight (pld.transport_max_weight, exact on combinations) and credited by
    :func:`linked_share`. Keys: PLD_cat (percent of masked records correctly linked), PLD_cat_candidate_recall
    (percent whose own original combination is a candidate), PLD_cat_match_prior, PLD_cat_em_iterations."""
    masked = joint.groupby(masked_keys, sort=False)[COUNT].sum().reset_index().set_axis([*keys, COUNT], axis=1)
    pairs = candidate_combinations(masked, original, keys, max_disagreements)
    a, b = masked[COUNT].to_numpy(), original[COUNT].to_numpy()
    m_idx, o_idx = pairs[MASKED_ROW].to_numpy(), pairs[ORIGINAL_ROW].to_numpy()
    counts = np.bincount(pairs[PATTERN_COL], weights=a[m_idx] * b[o_idx], minlength=2 ** len(keys))
    model = pld.fit_fellegi_sunter(counts, len(keys), 2, max_iter=em_max_iter,
                                   fixed_u=chance_agreement(masked, original, keys))
    flow = pld.transport_max_weight(m_idx, o_idx, model.weights()[pairs[PATTERN_COL].to_numpy()], a, b)
    masked_rows = _positions(masked, keys, MASKED_ROW).set_axis([*masked_keys, MASKED_ROW], axis=1)
    true = (joint.merge(masked_rows, on=masked_keys)
            .merge(_positions(original, keys, ORIGINAL_ROW), on=keys)[[MASKED_ROW, ORIGINAL_ROW, COUNT]])
    t = pairs.merge(true, on=[MASKED_ROW, ORIGINAL_ROW], how="left")[COUNT].fillna(0.0).to_numpy()
    n = a.sum()
    return {"PLD_cat": 100.0 * linked_share(pairs, flow, t, a, b) / float(n),
            "PLD_cat_candidate_recall": 100.0 * float(t.sum() / n),
            "PLD_cat_match_prior": float(model.p), "PLD_cat_em_iterations": float(model.iterations)}
