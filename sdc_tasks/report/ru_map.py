"""The R-U confidentiality map: disclosure risk against information loss per release strategy, with its Pareto
front (statistical_databases_survey.txt, "R-U maps"), drawn as a deterministic PNG.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from sdc_tasks.report.figures import png_bytes

RU_MAP_NAME = "ru_map.png"
FIGSIZE_IN = (7.0, 5.0)
DPI = 100
ORIGINAL_LABEL = "original data (IL=0, DR=100)"


@dataclass(frozen=True)
class Limit:
    """A gate limit on one axis of the R-U map: ``axis`` "dr" (risk, x) or "il" (loss, y), its value, its legend."""

    axis: str
    value: float
    label: str


def gate_limits(limits: dict[str, float], risk_weights: dict[str, float]) -> tuple[Limit, ...]:
    """The limits (measure -> maximum) that bound the axes of an R-U map whose risk axis is the weighted sum
    ``risk_weights`` of measures and whose loss axis is IL: a limit on IL as it is; limits on every measure of the
    risk axis bound it by their weighted sum (a release within them all lies left of it). Other limits have no
    place on these axes."""
    out = []
    if risk_weights and all(k in limits for k in risk_weights):
        bound = sum(w * limits[k] for k, w in risk_weights.items())
        parts = " and ".join(f"{k} <= {limits[k]:.4g}" for k in risk_weights)
        out.append(Limit("dr", bound, f"limits {parts} (risk <= {bound:.4g})"))
    if "IL" in limits:
        out.append(Limit("il", limits["IL"], f"limit IL <= {limits['IL']:.4g}"))
    return tuple(out)


def _finite_points(points: list[dict]) -> list[dict]:
    """Return the points whose il and dr are both finite numbers (the only ones that can be placed on a map)."""
    return [p for p in points if math.isfinite(float(p["il"])) and math.isfinite(float(p["dr"]))]


def _dominates(a: dict, b: dict) -> bool:
    """Return whether ``a`` is no worse than ``b`` in both il and dr and strictly better in one (minimising)."""
    return a["il"] <= b["il"] and a["dr"] <= b["dr"] and (a["il"] < b["il"] or a["dr"] < b["dr"])


def pareto_front(points: list[dict]) -> list[dict]:
    """Return the non-dominated points, minimising both il and dr, sorted by dr then il.

    The best trade-offs of an R-U confidentiality map (statistical_databases_survey.txt, "R-U maps"); points
    with a non-finite il or dr are left out, equal points are all kept.
    """
    finite = _finite_points(points)
    front = [p for p in finite if not any(_dominates(q, p) for q in finite)]
    return sorted(front, key=lambda p: (p["dr"], p["il"], str(p.get("label", ""))))


def _axis_top(values: list[float], floor: float) -> float:
    """Return an upper axis limit leaving headroom above the largest value (at least ``floor``)."""
    return max([floor, *values]) * 1.12


LABEL_GAP = 0.06
MARKERS = ("o", "s", "^", "v", "D", "P", "X", "*", "<", ">", "h", "p")


def _marker_groups(points: list[dict]) -> list[tuple[str, list[dict], dict]]:
    """Return (legend name, points, scatter style) per marker group: one group per distinct ``group`` key in
    first-seen order, or a single "release strategies" group when no point names a group."""
    names = list(dict.fromkeys(p.get("group") for p in points))
    if names in ([], [None]):
        return [("release strategies", points, {"marker": "o", "color": "tab:blue"})]
    return [(str(g), [p for p in points if p.get("group") == g],
             {"marker": MARKERS[i % len(MARKERS)], "color": f"C{i % 10}"}) for i, g in enumerate(names)]


def _spaced(points: list[dict], x_span: float, y_span: float) -> list[dict]:
    """Return the points, in order, that lie at least LABEL_GAP (a fraction of the axes) from every point kept
    before them, so that their labels do not overlap."""
    kept: list[dict] = []
    for p in points:
        if all(math.hypot((p["dr"] - q["dr"]) / x_span, (p["il"] - q["il"]) / y_span) >= LABEL_GAP for q in kept):
            kept.append(p)
    return kept


def ru_map_png(
    points: list[dict],
    path,
    risk_label: str = "Disclosure risk (DLD+ID)/2, %",
    loss_label: str = "Information loss IL, %",
    label_front_only: bool = False,
    limits: tuple[Limit, ...] = (),
    chosen: str | None = None,
) -> Path:
    """Write the R-U confidentiality map of :func:`ru_map_figure` as a deterministic PNG; return its path.

    Rendered with the Agg canvas at a fixed size and dpi, and saved without a Software tag, so equal inputs
    give equal bytes.
    """
    path = Path(path)
    fig = ru_map_figure(points, risk_label, loss_label, label_front_only, limits, chosen)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(png_bytes(fig))
    return path


def ru_map_figure(
    points: list[dict],
    risk_label: str = "Disclosure risk (DLD+ID)/2, %",
    loss_label: str = "Information loss IL, %",
    label_front_only: bool = False,
    limits: tuple[Limit, ...] = (),
    chosen: str | None = None,
) -> Figure:
    """An R-U confidentiality map (risk on x, information loss on y) as a matplotlib Figure (Agg canvas, fixed
    size and dpi; nothing is written or shown).

    Layout after statistical_databases_survey.txt, "R-U maps": one labelled marker per release strategy (one
    marker and colour per ``group`` when points name one, e.g. a method family), the unprotected original data
    as a reference at (DR=100, IL=0), and the Pareto front as a step line when there are two points or more;
    ``label_front_only`` labels only Pareto points, at least LABEL_GAP of the axes apart (for maps of many
    points). ``limits``: gate limits drawn as dotted lines (a vertical one on the risk axis, a horizontal one on
    the loss axis); ``chosen``: the label of a point to ring (and always label). Lower-left is better.
    """
    placed = _finite_points(points)
    fig = Figure(figsize=FIGSIZE_IN, dpi=DPI)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    groups = _marker_groups(placed)
    for name, members, style in groups:
        ax.scatter([p["dr"] for p in members], [p["il"] for p in members], s=40, zorder=3, label=name, **style)
    front = pareto_front(placed)
    x_top = _axis_top([p["dr"] for p in placed], 100.0)
    y_top = _axis_top([p["il"] for p in placed] + [lim.value for lim in limits if lim.axis == "il"], 1.0)
    for lim in limits:
        line = ax.axvline if lim.axis == "dr" else ax.axhline
        line(lim.value, color="tab:red", linestyle=":", linewidth=1.5, zorder=1, label=lim.label)
    picked = [p for p in placed if chosen is not None and str(p.get("label")) == chosen]
    for p in picked:
        ax.scatter([p["dr"]], [p["il"]], s=260, facecolors="none", edgecolors="black", linewidths=1.8, zorder=5,
                   label=f"chosen: {chosen}")
    labelled = _spaced(front, x_top, y_top) if label_front_only else placed
    for p in labelled + [p for p in picked if all(p is not q for q in labelled)]:
        ax.annotate(str(p.get("label", "")), (p["dr"], p["il"]), xytext=(5, 5), textcoords="offset points",
                    fontsize=8)
    if len(front) >= 2:
        ax.step([p["dr"] for p in front], [p["il"] for p in front], where="post", color="tab:orange",
                linewidth=1.5, zorder=2, label="Pareto front")
    ax.scatter([100.0], [0.0], marker="X", s=90, color="black", zorder=4, clip_on=False, label=ORIGINAL_LABEL)
    ax.set_xlim(-0.02 * x_top, x_top)
    ax.set_ylim(-0.03 * y_top, y_top)
    ax.set_xlabel(risk_label)
    ax.set_ylabel(loss_label)
    ax.set_title("R-U confidentiality map (lower-left is better)")
    ax.grid(True, color="0.9")
    ax.legend(loc="best", fontsize=8, ncol=2 if len(groups) > 4 else 1)
    fig.tight_layout()
    return fig
