"""The bundled data files as pandas DataFrames (numbers parsed with round-trip precision, as ``sdc`` reads
them)."""

from __future__ import annotations

import pandas as pd

from sdc_tasks.bundled import bundled_path


def _bundled_csv(name: str) -> pd.DataFrame:
    """One bundled CSV file as a pandas DataFrame."""
    return pd.read_csv(bundled_path(name), float_precision="round_trip")


def load_census() -> pd.DataFrame:
    """The Census test file of the CASC project: 1,080 records of 13 continuous variables (AFNLWGT .. ERNVAL),
    the data set of sdc_methods_comparison_chapter.txt sec. 4 and Table 1."""
    return _bundled_csv("census.csv")


def load_tarragona() -> pd.DataFrame:
    """The Tarragona test file of the CASC project: 834 companies, 13 continuous financial variables
    (sdc_methods_comparison_chapter.txt sec. 4)."""
    return _bundled_csv("tarragona.csv")


def load_testdata() -> pd.DataFrame:
    """sdcMicro's household test file (testdata): 4,580 records with categorical keys (urbrur, roof, walls,
    water, electcon, relat, sex, age), continuous variables and a sampling weight (docs/categorical.md)."""
    return _bundled_csv("testdata.csv")
