"""The report's pictures, drawn with matplotlib's Agg canvas from aggregate figures only (the summary's metrics
and per-variable profile, never records) and returned as PNG bytes: per-variable distributions, the difference
of the correlation matrices, the DLD curve over the key variables and, for categorical keys, the risk before and
after masking. The R-U map is in ru_map.py.
"""

from __future__ import annotations

import io
import re

import numpy as np
from matplotlib import rc_context
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

DPI = 100
GRID_COLUMNS = 4
COLORS = {"original": "tab:blue", "masked": "tab:orange", "limit": "tab:red"}


def new_figure(width: float, height: float) -> Figure:
    """An empty figure on an Agg canvas (nothing is shown)."""
    fig = Figure(figsize=(width, height), dpi=DPI)
    FigureCanvasAgg(fig)
    return fig


def panel_grid(count: int, columns: int = GRID_COLUMNS) -> tuple[int, int]:
    """(rows, columns) of a grid holding ``count`` panels, at most ``columns`` wide (one cell when there is none)."""
    ncols = min(columns, max(count, 1))
    return max(1, -(-count // ncols)), ncols


def png_bytes(fig: Figure) -> bytes:
    """The figure as PNG bytes, without a Software tag (equal figures give equal bytes).

    Each figure is laid out once, by its ``tight_layout``, which leaves a placeholder layout engine on it; with any
    engine set, savefig first draws the whole figure without output to lay it out again. The engine is removed
    first (the same bytes; the report's pictures about 15 % sooner)."""
    buffer = io.BytesIO()
    with rc_context({"figure.autolayout": False, "figure.constrained_layout.use": False}):
        fig.set_layout_engine(None)
    fig.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def distributions_figure(profiles: list[dict]) -> Figure:
    """Per variable, the original and the masked histogram on the same bins (the original's 1st to 99th
    percentile: values outside are counted in the panel's title, not drawn)."""
    nrows, ncols = panel_grid(len(profiles))
    fig = new_figure(2.6 * ncols, 2.1 * nrows)
    for i, profile in enumerate(profiles):
        ax = fig.add_subplot(nrows, ncols, i + 1)
        hist = profile["histogram"]
        for name in ("original", "masked"):
            ax.stairs(hist[name], hist["edges"], linewidth=1.3, color=COLORS[name], label=name)
        outside = hist["outside"]
        ax.set_title(f"{profile['variable']} ({outside[0]} / {outside[1]} outside)", fontsize=8)
        ax.tick_params(labelsize=6)
        ax.ticklabel_format(axis="x", style="sci", scilimits=(-3, 4))
        ax.xaxis.get_offset_text().set_fontsize(6)
    if profiles:
        fig.axes[0].legend(fontsize=7)
    fig.suptitle("Original vs masked distributions (records per bin; 1st to 99th percentile of the original)",
                 fontsize=9)
    fig.tight_layout()
    return fig


def correlation_difference_figure(correlation: dict) -> Figure:
    """A heatmap of masked minus original correlation for each pair of variables below the diagonal (undefined
    cells blank), each cell annotated to two decimals, on a symmetric diverging scale."""
    names = correlation["variables"]
    grids = [np.array([[np.nan if v is None else v for v in row] for row in correlation[k]], dtype=float)
             for k in ("original", "masked")]
    lower = np.tril(np.ones_like(grids[0], dtype=bool), k=-1)
    diff = np.where(lower, grids[1] - grids[0], np.nan)[1:, :-1]  # each pair once: rows 2..p, columns 1..p-1
    top = max(float(np.nanmax(np.abs(diff))) if np.isfinite(diff).any() else 0.0, 0.01)
    size = 1.6 + 0.42 * len(names)
    fig = new_figure(size + 1.2, size)
    ax = fig.add_subplot()
    image = ax.imshow(diff, cmap="RdBu_r", vmin=-top, vmax=top)
    ax.set_xticks(range(len(names) - 1), names[:-1], rotation=90, fontsize=7)
    ax.set_yticks(range(len(names) - 1), names[1:], fontsize=7)
    for (i, j), value in np.ndenumerate(diff):
        if np.isfinite(value):
            ax.text(j, i, f"{value:.2f}".replace("-0.00", "0.00"), ha="center", va="center", fontsize=5.5,
                    color="white" if abs(value) > 0.6 * top else "black")
    fig.colorbar(image, ax=ax, shrink=0.8).ax.tick_params(labelsize=7)
    ax.set_title("Correlation, masked minus original", fontsize=9)
    fig.tight_layout()
    return fig


def numbered(metrics: dict, stem: str) -> list[tuple[int, float]]:
    """The (number, value) pairs of the keys ``stem_1``, ``stem_2``, ... present, in order."""
    pattern = re.compile(rf"{re.escape(stem)}_(\d+)")
    found = [(int(m.group(1)), float(v)) for k, v in metrics.items() if (m := pattern.fullmatch(k))]
    return sorted(found)


def dld_curve_figure(metrics: dict, limit: float | None) -> Figure:
    """DLD_i and DLD2_i against the number of key variables i, with DLD (their mean) and its gate limit."""
    fig = new_figure(6.0, 3.4)
    ax = fig.add_subplot()
    for stem, style in (("DLD", {"marker": "o", "label": "DLD_i: linked to the own original"}),
                        ("DLD2", {"marker": "s", "linestyle": "--", "label": "DLD2_i: own original 2nd nearest"})):
        points = numbered(metrics, stem)
        if points:
            ax.plot([i for i, _ in points], [v for _, v in points], **style)
    if "DLD" in metrics:
        ax.axhline(metrics["DLD"], color="0.4", linewidth=1, label=f"DLD (mean) = {metrics['DLD']:.4g}")
    if limit is not None:
        ax.axhline(limit, color=COLORS["limit"], linestyle=":", linewidth=1.5, label=f"gate limit DLD <= {limit:.4g}")
    ax.set_xlabel("key variables used (i)")
    ax.set_ylabel("masked records, percent")
    ax.set_ylim(bottom=0)
    ax.grid(True, color="0.9")
    ax.legend(fontsize=7)
    ax.set_title("Distance-based linkage by number of key variables", fontsize=9)
    fig.tight_layout()
    return fig


def risk_before_after_figure(rows: list[tuple[str, float, float]]) -> Figure:
    """One panel per categorical risk measure (label with unit, value before, value after masking): the original
    file's risk beside the masked file's."""
    nrows, ncols = panel_grid(len(rows))
    fig = new_figure(2.4 * ncols, 2.0 * nrows)
    for i, (label, before, after) in enumerate(rows):
        ax = fig.add_subplot(nrows, ncols, i + 1)
        bars = ax.bar([0, 1], [before, after], color=[COLORS["original"], COLORS["masked"]], width=0.6)
        ax.bar_label(bars, labels=[f"{before:.4g}", f"{after:.4g}"], fontsize=7)
        ax.set_xticks([0, 1], ["before", "after"], fontsize=7)
        ax.tick_params(axis="y", labelsize=6)
        ax.set_title(label, fontsize=7)
        ax.set_ylim(0, 1.25 * max(before, after) or 1.0)
    fig.suptitle("Categorical disclosure risk before and after masking", fontsize=9)
    fig.tight_layout()
    return fig


def category_counts_figure(profiles: list[dict], names: list[list[str]]) -> Figure:
    """Per categorical variable, the records in each category in the original file beside the release (bars side
    by side; ``names``: per variable, the tick text of each of its categories, such as "2 (Female)"); the
    categories counted together and the missing values are in the table beside it."""
    nrows, ncols = panel_grid(len(profiles))
    fig = new_figure(3.0 * ncols, 2.6 * nrows)
    for i, (profile, ticks) in enumerate(zip(profiles, names)):
        ax = fig.add_subplot(nrows, ncols, i + 1)
        positions = np.arange(len(ticks))
        for shift, name in ((-0.2, "original"), (0.2, "masked")):
            ax.bar(positions + shift, [c[name] for c in profile["categories"]], width=0.4, color=COLORS[name],
                   label=name)
        ax.set_xticks(positions, ticks, fontsize=6, rotation=90)
        ax.tick_params(axis="y", labelsize=6)
        ax.set_title(profile["variable"], fontsize=8)
    if profiles:
        fig.axes[0].legend(fontsize=7)
    fig.suptitle("Categorical variables: records per category, original vs released", fontsize=9)
    fig.tight_layout()
    return fig

