"""The per-variable figures of a release report, computed over the paired records: each continuous variable's
distributions and its own share of the loss and risk measures (:mod:`sdc_tasks.metrics.variable_profile`), the
correlation matrices of both files, and for categorical keys the disclosure risk of the original file, the risk
before masking that sdcMicro prints beside the risk after.

Each variable is gathered on one worker, as the quantile and rank measures of the ``il``, ``pil`` and ``id``
families are (continuous.py); only the few numbers of its profile leave the worker.
"""

from __future__ import annotations

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd

from sdc_tasks.evaluation.linkage import gathered
from sdc_tasks.evaluation.measures import evaluate
from sdc_tasks.evaluation.pairing import paired
from sdc_tasks.metrics.variable_profile import variable_profile
from sdc_tasks.reserved import MASKED_SUFFIX
from sdc_tasks.stats.moments import frames_moments


def _column_profile(parts: list[pd.DataFrame], var: str, id_col: str) -> dict:
    """The profile of one variable from the paired partitions, gathered on one worker."""
    return variable_profile(var, gathered(parts, var, np.float64), gathered(parts, var + MASKED_SUFFIX, np.float64),
                            gathered(parts, id_col))


def correlations(original: dd.DataFrame, masked: dd.DataFrame, variables: list[str]) -> dict:
    """The correlation matrices of ``variables`` in both files (population moments; an undefined cell, of a
    constant variable, is None): {"variables", "original", "masked"}."""
    out: dict = {"variables": list(variables)}
    for name, moments in zip(("original", "masked"), frames_moments([original, masked], variables, [2, 2])):
        r, defined = moments.corr()
        out[name] = [[float(v) if d else None for v, d in zip(row, ok)] for row, ok in zip(r, defined)]
    return out


def release_profile(original: dd.DataFrame, masked: dd.DataFrame, id_col: str, variables: list[str],
                    categorical: list[str] = (), categorical_keys: list[str] = (), weight: str | None = None,
                    ordinal: dict[str, list] | None = None) -> dict:
    """The report figures of ``masked`` against ``original``: {"variables": one profile per continuous variable
    (records paired by id), "correlation": :func:`correlations` (two or more variables), "risk_before": the
    ``cat_risk`` measures of the original file against itself (categorical keys only; individual risk with the
    ``weight`` column)}."""
    out: dict = {"variables": [], "correlation": None, "risk_before": None}
    if variables:
        parts = paired(original, masked, id_col, list(variables)).to_delayed()
        out["variables"] = list(dask.compute(*[dask.delayed(_column_profile)(parts, v, id_col) for v in variables]))
    if len(variables) >= 2:
        out["correlation"] = correlations(original, masked, list(variables))
    if categorical_keys:
        before = evaluate(original, original, id_col, [], list(categorical_keys), ("cat_risk",),
                          categorical=list(categorical), ordinal=ordinal, weight=weight)
        out["risk_before"] = {k: v for k, v in before.items() if isinstance(v, (int, float))}
    return out
