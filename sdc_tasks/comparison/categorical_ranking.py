"""The ranking of a categorical comparison: Table 3 of sdc_methods_comparison_chapter.txt (chapter 6) sec. 5,
with its columns, its rank scaling and its formulas for AIL Rank, Score and Ave. Score (docs/comparison.md,
Categorical grids)."""

from __future__ import annotations

import json

import pandas as pd

from sdc_tasks.comparison.run import RANK_DIGITS, ConfigurationResult

# Table 3's measure columns and the metrics.json keys behind them (docs/categorical.md)
MEASURE_KEYS = {"PLD": "PLD_cat", "Dist": "Dist", "CTBIL": "CTBIL", "ACTBIL": "ACTBIL", "EBILRF": "EBIL_RF",
                "ILRF": "PRIL_RF", "EBILMF": "EBIL_MF", "ILMF": "PRIL_MF"}
TABLE_3_COLUMNS = ("Method", *MEASURE_KEYS, "PLD Rank", "AIL Rank", "Score", "Ave. Score")
RANKING_COLUMNS = (*TABLE_3_COLUMNS, "Set", "Family", "Registry", "Params", "Seconds")


def scaled_ranks(values: pd.Series) -> pd.Series:
    """100 rank / N, rank 1 = lowest value (lowest risk or loss), equal values (to RANK_DIGITS decimals) sharing
    the average of their ranks, so the highest of N distinct values has 100 (chapter 6 sec. 5: PLDRank "the
    ranking of the method with respect to PLD (normalized with maximal value 100)")."""
    return 100.0 * values.round(RANK_DIGITS).rank(method="average", ascending=True) / len(values)


def ail_rank(ranks: pd.DataFrame) -> pd.Series:
    """AILRank = (DistRank + (CTBILRank + ACTBILRank) / 2 + (EBILRFrank + ILRFrank + EBILMFrank + ILMFrank) / 4)
    / 3: the three classes of loss measures weigh the same (chapter 6 sec. 5, after Table 3)."""
    tables = (ranks["CTBIL"] + ranks["ACTBIL"]) / 2
    entropy = (ranks["EBILRF"] + ranks["ILRF"] + ranks["EBILMF"] + ranks["ILMF"]) / 4
    return (ranks["Dist"] + tables + entropy) / 3


def scored(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` (Method, the measure columns, Family, Params) with PLD Rank, AIL Rank, Score = (PLDRank +
    AILRank) / 2 and Ave. Score, the mean Score of the rows of the same (method, parameters) over the variable
    sets (chapter 6 sec. 5, after Table 3); sorted by Ave. Score, then Score (ties in grid order) as Table 3."""
    out = table.copy()
    ranks = pd.DataFrame({m: scaled_ranks(out[m]) for m in MEASURE_KEYS})
    out["PLD Rank"] = ranks["PLD"]
    out["AIL Rank"] = ail_rank(ranks)
    out["Score"] = (out["PLD Rank"] + out["AIL Rank"]) / 2
    out["Ave. Score"] = out.groupby(["Family", "Params"], sort=False)["Score"].transform("mean")
    return out.sort_values(["Ave. Score", "Score"], kind="stable").reset_index(drop=True)


def categorical_ranking_table(results: list[ConfigurationResult]) -> pd.DataFrame:
    """Table 3 for our results: Method, PLD (PLD_cat, percent of records), Dist, CTBIL, ACTBIL, EBILRF, ILRF,
    EBILMF, ILMF, PLD Rank, AIL Rank, Score, Ave. Score, then Set, Family, Registry, Params (JSON) and Seconds."""
    rows = [{"Method": r.config.label, **{c: float(r.metrics[k]) for c, k in MEASURE_KEYS.items()},
             "Set": r.config.variable_set, "Family": r.config.family, "Registry": r.config.method,
             "Params": json.dumps(r.config.params, sort_keys=True),
             "Seconds": round(r.seconds.get("mask", 0.0) + r.seconds.get("evaluate", 0.0), 3)}
            for r in results]
    return scored(pd.DataFrame(rows))[list(RANKING_COLUMNS)]


def best_in_table(results: list[ConfigurationResult], table: pd.DataFrame,
                  limits: dict[str, float]) -> ConfigurationResult | None:
    """The first configuration in the table's order (lowest Ave. Score, then Score) whose every limited metrics
    key is at most its limit (None if none is)."""
    by_label = {r.config.label: r for r in results}
    for label in table["Method"]:
        r = by_label[label]
        if all(key in r.metrics and r.metrics[key] <= limit for key, limit in limits.items()):
            return r
    return None
