"""What the public API returns: :class:`Metrics`, an evaluation's metrics.json keys as a read-only mapping,
described by the metric catalogue (:mod:`sdc_tasks.metrics.catalogue`), with its headline numbers, tables and
matplotlib figures (nothing is written or shown)."""

from __future__ import annotations

import copy
import html
import numbers
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence

import dask.dataframe as dd
import numpy as np
import pandas as pd

from sdc_tasks.metrics.catalogue import BEFORE, GROUP_ORDER, derived_from, description_of, key_order, measure_of
from sdc_tasks.report.document import HEADLINE_CSS
from sdc_tasks.report.headline import headline_html, key_numbers, metrics_headline
from sdc_tasks.report.metric_table import risk_changes

if TYPE_CHECKING:
    from matplotlib.figure import Figure

FRAME_COLUMNS = ("key", "value", "family", "group", "unit", "direction", "description")
RISK_CHANGE_COLUMNS = ("figure", "original", "released", "change_percent", "unit", "direction")


def _is_number(value: Any) -> bool:
    """Whether a metrics value is a number (a bool, list or text is not)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


class Metrics(Mapping[str, Any]):
    """The metrics.json keys of one evaluation, read-only: ``metrics["IL"]``, ``dict(metrics)``.

    ``to_frame()`` describes every number by its catalogue row, ``summary()`` gives the headline numbers, and
    ``ru_figure()`` / ``plot_variables()`` return matplotlib figures. In Jupyter it shows the headline and a table
    per group (information loss, disclosure risk, score, other).
    """

    def __init__(self, values: Mapping[str, Any]) -> None:
        self._values = copy.deepcopy(dict(values))

    def __getitem__(self, key: str) -> Any:
        """The value of one key."""
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        """The keys, in metrics.json order."""
        return iter(self._values)

    def __len__(self) -> int:
        """The number of keys."""
        return len(self._values)

    def to_dict(self) -> dict[str, Any]:
        """A plain dict of every key (a copy): what metrics.json holds."""
        return copy.deepcopy(self._values)

    def to_frame(self) -> pd.DataFrame:
        """One row per numeric key in report order (group, then catalogue order): its value and, from the
        metric catalogue, family, group, unit, direction (lower or higher is better) and description."""
        keys = sorted((k for k, v in self._values.items() if _is_number(v)), key=key_order)
        rows = [(k, self._values[k], m.family, m.group, m.unit, m.direction, description_of(k))
                for k, m in ((k, measure_of(k)) for k in keys)]
        return pd.DataFrame(rows, columns=list(FRAME_COLUMNS))

    def summary(self) -> pd.Series:
        """The headline numbers computed, those a report's headline shows
        (:data:`sdc_tasks.report.headline.HEADLINE_KEYS`): IL, PIL, DLD, PLD, ID and the score (score_simple without
        PLD); for categorical families the records violating 3-anonymity, sample uniques, the largest individual
        risk and PLD_cat, each followed by its value on the original file (``<key>_before``) where computed."""
        numbers = {}
        for n in key_numbers(self._values):
            numbers[n.key] = n.value
            if n.before is not None:
                numbers[n.key + BEFORE] = n.before
        return pd.Series(numbers, name="value", dtype=float)

    def risk_changes(self) -> pd.DataFrame:
        """Each disclosure-risk figure computed on the original file too, as the release report's before-and-after
        table: figure, original (``<key>_before``), released, change_percent (``<key>_change_percent``), unit and
        direction; empty without a categorical risk family."""
        rows = [(c.key, c.original, c.released, c.change_percent, c.unit, c.direction)
                for c in risk_changes(self._values)]
        return pd.DataFrame(rows, columns=list(RISK_CHANGE_COLUMNS))

    def _records_line(self) -> str:
        """'1080 masked records against 1080 original ones, paired by id, 13 continuous variables'."""
        parts = [f"{self._values.get('n_masked', '?')} masked records against {self._values.get('n', '?')} "
                 "original ones"]
        if "pairing" in self._values:
            parts.append(f"paired by {self._values['pairing']}")
        if "p" in self._values:
            parts.append(f"{self._values['p']} continuous variables")
        if self._values.get("categorical"):
            parts.append(f"{len(self._values['categorical'])} categorical variables")
        return ", ".join(parts)

    def __repr__(self) -> str:
        """The headline numbers with their units and descriptions, readable in a terminal."""
        lines = [f"Metrics: {self._records_line()}"]
        for key, value in self.summary().items():
            lines.append(f"  {key:<20} {value:>12.4f}  {measure_of(key).unit:<8}  {description_of(key)}")
        lines.append(f"  ({len(self)} keys in all: .to_frame() describes each, dict(...) holds them)")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        """The headline block of the reports (its key numbers and records), the original file's risk beside the
        release's (:meth:`risk_changes`), then one table per group of the catalogue, values to 4 significant digits
        (Jupyter)."""
        frame = self.to_frame()
        parts = [f"<style>{HEADLINE_CSS}</style>",
                 headline_html(metrics_headline(self._values, self._records_line()), link_prefix="")]
        changes = self.risk_changes()
        if len(changes):
            parts.append("<h4>Disclosure risk: original file and release</h4>")
            parts.append(changes.to_html(index=False, float_format=lambda v: f"{v:.4g}", na_rep="n/a"))
        frame = frame[[derived_from(k) is None for k in frame["key"]]]  # the original's figures: in the table above
        for group in GROUP_ORDER:
            rows = frame[frame["group"] == group]
            if len(rows):
                parts.append(f"<h4>{html.escape(group)}</h4>")
                parts.append(rows.drop(columns="group").to_html(index=False, float_format=lambda v: f"{v:.4g}"))
        return "\n".join(parts)

    def ru_points(self, label: str = "masked") -> list[dict]:
        """This evaluation's point on the R-U map, as the release report places it: IL against (DLD + ID) / 2
        (statistical_databases_survey.txt, R-U maps); empty when IL, DLD or ID was not computed."""
        from sdc_tasks.pipeline.summary import ru_points

        return ru_points(label, self._values)

    def ru_figure(self, label: str = "masked") -> Figure:
        """The R-U confidentiality map of this evaluation (a matplotlib Figure; nothing is written or shown):
        its point, labelled ``label``, beside the original data at (DR = 100, IL = 0)."""
        from sdc_tasks.report.ru_map import ru_map_figure

        return ru_map_figure(self.ru_points(label))

    def plot_variables(self, original: Any, masked: Any, vars: str | Sequence[str] | None = None,
                       id_column: str = "record_id", bins: int = 30) -> Figure:
        """Per variable, the original and the masked distribution in one panel (a matplotlib Figure; nothing is
        written or shown): histograms on common bins for numbers, category counts side by side otherwise.

        ``original`` and ``masked``: pandas or Dask DataFrames (the columns plotted are computed) or paths;
        ``vars``: default the numeric columns of ``original`` that ``masked`` has, but ``id_column``."""
        from sdc_tasks.report.figures import new_figure, panel_grid

        frames = [_table(d) for d in (original, masked)]
        names = [vars] if isinstance(vars, str) else list(vars) if vars else [
            c for c in frames[0].columns if c != id_column and c in frames[1].columns
            and pd.api.types.is_numeric_dtype(frames[0][c]) and not pd.api.types.is_bool_dtype(frames[0][c])]
        nrows, ncols = panel_grid(len(names))
        fig = new_figure(3.2 * ncols, 2.6 * nrows)
        for i, name in enumerate(names):
            ax = fig.add_subplot(nrows, ncols, i + 1)
            _distributions(ax, _column(frames[0], name), _column(frames[1], name), bins)
            ax.set_title(name, fontsize=9)
        if names:
            fig.axes[0].legend(fontsize=7)
        fig.tight_layout()
        return fig


def _table(data: Any) -> Any:
    """A DataFrame given as pandas or Dask as it is, one given as a path as a Dask DataFrame."""
    from sdc_tasks.io import read_table

    return data if isinstance(data, (pd.DataFrame, dd.DataFrame)) else read_table(data)


def _column(frame: Any, name: str) -> pd.Series:
    """One column of a pandas or Dask DataFrame, as pandas (computed for Dask)."""
    column = frame[name]
    return column.compute() if isinstance(column, dd.Series) else column


def _distributions(ax: Any, original: pd.Series, masked: pd.Series, bins: int) -> None:
    """Draw one variable's original and masked distributions on ``ax``: step histograms on common bins for
    numbers, bars of the category counts otherwise."""
    if pd.api.types.is_numeric_dtype(original) and pd.api.types.is_numeric_dtype(masked):
        values = np.concatenate([original.dropna().to_numpy(float), masked.dropna().to_numpy(float)])
        edges = np.histogram_bin_edges(values[np.isfinite(values)], bins=bins)
        ax.hist(original.dropna(), bins=edges, histtype="step", linewidth=1.4, label="original")
        ax.hist(masked.dropna(), bins=edges, histtype="step", linewidth=1.4, label="masked")
        return
    counts = pd.DataFrame({"original": original.astype(str).value_counts(),
                           "masked": masked.astype(str).value_counts()}).fillna(0).sort_index()
    positions = np.arange(len(counts))
    ax.bar(positions - 0.2, counts["original"], width=0.4, label="original")
    ax.bar(positions + 0.2, counts["masked"], width=0.4, label="masked")
    ax.set_xticks(positions, counts.index, fontsize=7, rotation=90)
