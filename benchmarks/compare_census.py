"""The whole chapter 6 comparison grid (data/default_grid.yaml, 110 configurations) on the Census file, beside
the published Table 1 (sdc_methods_comparison_chapter.txt sec. 4).

Prints the timings (wall clock, per family), the chapter's findings checked on our ranking, and a Markdown
table of our values beside the published ones (the source of docs/comparison.md):

    .venv/bin/python benchmarks/compare_census.py [--workers 2] [--out DIR] [--parallel auto] [--risk published]
                                                  [--seeds 5]

``--risk published`` ranks on DLDpub and PLDpub, linkage as the published Table 1 was computed
(docs/reproduction.md), in place of docs/metrics.md's DLD and PLD. ``--seeds N`` runs the random families
(Noise, Distr, Resamp, Rank) again with N - 1 more seeds and prints each row's ID and score as mean and sd over
the N draws, the best rank swapping row of each draw and the rows' ID difference from the published column.
"""

from __future__ import annotations

import argparse
import os
import re
import tempfile
from pathlib import Path

import pandas as pd

from sdc_tasks.cluster import dask_client
from sdc_tasks.comparison.outputs import comparison
from sdc_tasks.comparison.run import load_grid
from sdc_tasks.generate import bundled_path

CENSUS_KEYS = ["FEDTAX", "AFNLWGT", "AGI", "EMCONTRB", "PTOTVAL", "TAXINC", "STATETAX"]
# the same seven keys in the file's column order: the order the published DLD and PLD columns took their first i
# keys in (docs/reproduction.md), used with --risk published
FILE_ORDER_KEYS = ["AFNLWGT", "AGI", "EMCONTRB", "FEDTAX", "PTOTVAL", "STATETAX", "TAXINC"]
CHAPTER = Path(__file__).resolve().parents[2] / "shared" / "seeds" / "sdc_methods_comparison_chapter.txt"
TABLE_1 = ("Method", "IL", "DLD", "PLD", "ID", "Score", "IL-Rank", "DLD-Rank", "PLD-Rank", "ID-Rank")
ROW = re.compile(r"^([A-Za-z][A-Za-z0-9.]*)\t" + r"\t".join([r"([-\d.]+)"] * 9) + r"\s*$")


def published_table_1(path: Path) -> pd.DataFrame:
    """Table 1 of the chapter (109 rows), read from the seed text between its caption and Figure 1."""
    text = path.read_text()
    start = text.index("Table 1: Comparison Results for Continuous Microdata")
    block = text[start:text.index("Figure 1.", start)]
    rows = [m.groups() for m in map(ROW.match, block.splitlines()) if m]
    table = pd.DataFrame(rows, columns=list(TABLE_1))
    for col in TABLE_1[1:]:
        table[col] = pd.to_numeric(table[col])
    return table


def family_of(label: str) -> str:
    """The family prefix of a Table 1 label (Rank15 -> Rank, Noise0.04 -> Noise, JPEG080 -> JPEG)."""
    return re.sub(r"[\d.]+$", "", label)


def findings(ours: pd.DataFrame, published: pd.DataFrame) -> list[str]:
    """The chapter's conclusions (sec. 4 and 6) checked on both tables."""
    lines = []
    for name, t in (("published", published), ("ours", ours)):
        fam = t["Method"].map(family_of)
        mic = t[fam.str.match(r"Mic\d?mul")]
        weak = t[fam.isin(["MicZ", "MicPCP", "MicIR", "Distr", "Resamp"])]
        best_rank = t[fam == "Rank"].iloc[0]
        lines.append(f"- {name}: best overall {t.iloc[0]['Method']} ({t.iloc[0]['Score']:.2f}); best rank swapping "
                     f"{best_rank['Method']} ({best_rank['Score']:.2f}); best multivariate microaggregation "
                     f"{mic.iloc[0]['Method']} ({mic.iloc[0]['Score']:.2f}); MicZ/MicPCP/MicIR/Distr/Resamp scores "
                     f"{weak['Score'].min():.2f}..{weak['Score'].max():.2f} "
                     f"({(weak['Score'] >= 45).mean() * 100:.0f} % at 45 or more)")
    return lines


def side_by_side(ours: pd.DataFrame, published: pd.DataFrame) -> str:
    """Markdown: our row beside the published row, in our score order."""
    both = ours[list(TABLE_1)].merge(published, on="Method", how="left", suffixes=("", " (pub.)"))
    cols = ["Method", "Score", "Score (pub.)"]
    for m in ("IL", "DLD", "PLD", "ID"):
        cols += [m, f"{m} (pub.)"]
    cols += ["IL-Rank", "IL-Rank (pub.)", "DLD-Rank", "DLD-Rank (pub.)", "PLD-Rank", "PLD-Rank (pub.)",
             "ID-Rank", "ID-Rank (pub.)"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for _, r in both[cols].iterrows():
        cells = [r["Method"]] + ["" if pd.isna(r[c]) else (f"{r[c]:.2f}" if "Rank" not in c else f"{int(r[c])}")
                                 for c in cols[1:]]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def agreement(ours: pd.DataFrame, published: pd.DataFrame) -> list[str]:
    """Spearman correlations between our and the published values over the rows both tables hold."""
    both = ours.merge(published, on="Method", suffixes=("", "_pub"))
    return [f"- Spearman {m}: {both[m].corr(both[m + '_pub'], method='spearman'):.3f} over {len(both)} rows"
            for m in ("IL", "DLD", "PLD", "ID", "Score")]


RANDOM_FAMILIES = ("Noise", "Distr", "Resamp", "Rank")


def seed_spread(first: pd.DataFrame, seeds: int, keys: list[str], risk: str, published: pd.DataFrame) -> list[str]:
    """The random families' ID and score over ``seeds`` draws (the first is ``first``): per row mean and sd, the
    published ID beside them, and each draw's best rank swapping row."""
    grid = load_grid(None)
    grid = grid.model_copy(update={"families": [f for f in grid.families if f.label in RANDOM_FAMILIES]})
    draws = [first[first["Method"].map(family_of).isin(RANDOM_FAMILIES)]]
    for extra in range(1, seeds):
        draws.append(comparison(bundled_path("census.csv"), None, grid.model_copy(update={"seed": grid.seed + extra}),
                                key_vars=keys, risk_setup=risk).table)
    both = pd.concat(draws).groupby("Method", sort=False)[["ID", "Score"]].agg(["mean", "std"])
    both.columns = [f"{m} {stat}" for m, stat in both.columns]
    both = both.join(published.set_index("Method")[["ID", "Score"]].add_suffix(" (pub.)"))
    best = [d[d["Method"].map(family_of) == "Rank"].sort_values("Score").iloc[0]["Method"] for d in draws]
    lines = [f"- random families over {seeds} seeds: best rank swapping row per draw " + ", ".join(best),
             "| Method | ID mean | ID sd | ID (pub.) | Score mean | Score sd | Score (pub.) |", "|---|---|---|---|---|---|---|"]
    for label, r in both.iterrows():
        lines.append(f"| {label} | {r['ID mean']:.2f} | {r['ID std']:.2f} | {r['ID (pub.)']:.2f} | "
                     f"{r['Score mean']:.2f} | {r['Score std']:.2f} | {r['Score (pub.)']:.2f} |")
    diff = (both["ID mean"] - both["ID (pub.)"]).dropna()
    lines.append(f"- mean of the seeds' ID against the published: mean difference {diff.mean():.2f}, mean absolute "
                 f"{diff.abs().mean():.2f}, largest {diff.abs().max():.2f} ({diff.abs().idxmax()})")
    return lines


def main() -> None:
    """Run the grid, print timings, findings, correlations and the side-by-side table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", type=Path, default=None, help="output directory (default: a temporary one)")
    ap.add_argument("--parallel", default="auto")
    ap.add_argument("--chapter", type=Path, default=CHAPTER)
    ap.add_argument("--risk", default="metrics", help="metrics (DLD, PLD) or published (DLDpub, PLDpub)")
    ap.add_argument("--seeds", type=int, default=1, help="draws of the random families (default 1: the grid's seed)")
    args = ap.parse_args()
    published = published_table_1(args.chapter)
    with tempfile.TemporaryDirectory() as scratch, dask_client(None, args.workers):
        out = args.out or Path(scratch) / "comparison"
        keys = FILE_ORDER_KEYS if args.risk == "published" else CENSUS_KEYS
        c = comparison(bundled_path("census.csv"), out, None, key_vars=keys, parallel=args.parallel,
                       overwrite=True, risk_setup=args.risk)
        spread = seed_spread(c.table, args.seeds, keys, args.risk, published) if args.seeds > 1 else []
    t = c.table
    cpu = sum(r.seconds["cpu"] for r in c.results)
    print(f"{len(t)} configurations, risk {c.risk_setup}, mode {c.mode}, {args.workers} workers: "
          f"wall {c.seconds:.1f} s, sum of configuration seconds {t['Seconds'].sum():.1f} s (wall), {cpu:.1f} s "
          f"(CPU of the processes that ran them), load average {os.getloadavg()[0]:.1f}")
    print(t.groupby("Family", sort=False)["Seconds"].agg(["count", "mean", "max"]).round(2).to_string())
    print("\n".join(findings(t, published)))
    print("\n".join(agreement(t, published)))
    print("\n".join(spread))
    print(side_by_side(t, published))


if __name__ == "__main__":
    main()
