"""post_masking_optimization.txt Tables 1-2 component by component (docs/postmask.md, "Tables 1-2 component by
component"): the paper's evaluation setup (``pairing="paper"``) against a reference written here from sec. 2 and
docs/metrics.md (brute-force distances, no project code), the deterministic Mic4mul k = 10 start row of Table 2
reproduced in Score, IL, DLD and ID, and the optimized Mic4mul rows under the paper's reading of Algorithm 1
(the paper's C(i), single moves, perturbation sd 1), whose DLD and ID reproduce while IL does not."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.spatial.distance import cdist

from sdc_tasks.api import evaluate, mask

TABLE_2 = {  # post_masking_optimization.txt Table 2 (Mic4mul k = 10): q -> (Score, IL, DLD, ID); None: no optimization
    None: (31.86, 22.48, 22.14, 60.34),
    0.5: (26.96, 14.16, 21.06, 58.54),
    0.3: (27.39, 14.74, 21.29, 58.80),
    0.1: (28.03, 14.94, 21.83, 60.38),
}
CHAPTER_KEYS = ["FEDTAX", "AFNLWGT", "AGI", "EMCONTRB", "PTOTVAL", "TAXINC", "STATETAX"]
PAPER_READING = {"correspondence": "nearest", "compensate": False, "perturbation_sd": 1.0}


def paper_reference(x: np.ndarray, xm: np.ndarray, keys: list[int]) -> dict:
    """IL, DLD_1..DLD_m, DLD and ID with each masked record standing for its nearest original record c(i)
    (post_masking_optimization.txt sec. 2: standardized d-dimensional Euclidean distance, ties to the lowest
    row), from the formulas of docs/metrics.md: IL1 over the cells whose c(i) value is not 0, IL2..IL5 on the
    whole files; DLD_i the percent of masked records whose nearest original on the first i ``keys``
    (standardized) is c(i), t tied originals sharing the credit; ID_p the c(i) values inside the window of
    2 ceil(p n / 100) ranks of the sorted masked column ending W ranks above the masked value's last rank."""
    n, d = xm.shape
    mu, sd = x.mean(axis=0), x.std(axis=0)
    z, zm = (x - mu) / sd, (xm - mu) / sd
    c = np.argmin(cdist(zm, z), axis=1)
    xc = x[c]
    defined = xc != 0
    il1 = 100 * np.mean(np.abs(xm - xc)[defined] / np.abs(xc)[defined])
    il2 = 100 * np.mean(np.abs(xm.mean(axis=0) - mu) / np.abs(mu))
    v, vm = np.cov(x.T, bias=True), np.cov(xm.T, bias=True)
    upper = np.triu_indices(d)
    il3 = 100 * np.mean(np.abs(vm - v)[upper] / np.abs(v)[upper])
    il4 = 100 * np.mean(np.abs(np.diag(vm) - np.diag(v)) / np.diag(v))
    il5 = 100 * np.mean(np.abs(np.corrcoef(xm.T) - np.corrcoef(x.T))[np.triu_indices(d, 1)])
    dld = []
    for i in range(1, len(keys) + 1):
        dist = cdist(zm[:, keys[:i]], z[:, keys[:i]])
        own = dist[np.arange(n), c][:, None]
        tol = 1e-9 * np.maximum(own, 1e-300)
        closer, tied = (dist < own - tol).sum(axis=1), (np.abs(dist - own) <= tol).sum(axis=1)
        dld.append(100 * np.mean(np.where(closer == 0, 1 / tied, 0.0)))
    hits = np.zeros(10)
    for j in range(d):
        s = np.sort(xm[:, j])
        last = np.searchsorted(s, xm[:, j], side="right") - 1
        for p in range(1, 11):
            w = math.ceil(p * n / 100)
            lo, hi = s[np.maximum(last - w, 0)], s[np.minimum(last + w - 1, n - 1)]
            hits[p - 1] += np.count_nonzero((lo <= xc[:, j]) & (xc[:, j] <= hi))
    il = np.mean([il1, il2, il3, il4, il5])
    out = {"IL1": il1, "IL": il, "DLD": float(np.mean(dld)), "ID": float(np.mean(100 * hits / (n * d)))}
    out.update({f"DLD_{i + 1}": v for i, v in enumerate(dld)})
    out["score_simple"] = 0.5 * il + 0.25 * out["DLD"] + 0.25 * out["ID"]
    return out


@pytest.fixture(scope="module")
def mic4mul(census):
    """Mic4mul k = 10 of the Census file (MD, the paper's microaggregation; docs/reproduction.md)."""
    return mask(census, "md", k=10, group_size=4, seed=1)


@pytest.fixture(scope="module")
def cols(census):
    """The 13 Census variables."""
    return [c for c in census.columns if c != "record_id"]


def paper_setup(census, masked, cols: list[str]) -> dict:
    """score_simple, IL, DLD and ID under the paper's evaluation setup, keys given in the chapter's order."""
    return dict(evaluate(census, masked, vars=cols, key_vars=CHAPTER_KEYS, families=["il", "dld", "id"],
                         pairing="paper"))


def test_pairing_paper_is_the_papers_setup_on_the_whole_original_file(census, mic4mul, cols, sync_dask):
    """Every component equals the reference; the linkage searches all 1,080 original records although the
    masked records stand for only 887 distinct ones, and the keys are taken in the file's column order (the
    chapter's order FEDTAX, AFNLWGT, ... gives DLD 19.88 in the reference, the file's 22.00)."""
    got = paper_setup(census, mic4mul, cols)
    expected = paper_reference(census[cols].to_numpy(float), mic4mul[cols].to_numpy(float), list(range(7)))
    assert got["key_vars"] == cols[:7]
    for key, value in expected.items():
        if key != "IL1":
            assert got[key] == pytest.approx(value, rel=1e-9, abs=1e-9), key


def test_mic4mul_start_row_reproduces_table_2(census, mic4mul, cols, sync_dask):
    """Measured: Score 31.89, IL 22.60, DLD 22.00, ID 60.38 against 31.86, 22.48, 22.14, 60.34."""
    got = paper_setup(census, mic4mul, cols)
    for key, published in zip(("score_simple", "IL", "DLD", "ID"), TABLE_2[None]):
        assert got[key] == pytest.approx(published, abs=0.3), key


@pytest.mark.parametrize("q", [0.5, 0.3, 0.1])
def test_mic4mul_optimized_rows_reproduce_dld_and_id_under_the_papers_reading(census, mic4mul, cols, q, sync_dask):
    """p = 0.5, TargetE 0.008 (Table 2) under the paper's reading: TargetE met, DLD and ID within 1.0 of the
    published values (measured, q = 0.5 / 0.3 / 0.1: DLD 21.34 / 21.23 / 21.73, ID 59.49 / 59.31 / 60.57); IL
    is not reproduced: the band of expr. (8) holds the paper's IL1 (c(i), original scale) at half its start
    (96.59 -> 48.75 / 48.76 / 48.64), so IL is 10.69-10.75 against the published 14.16-14.94 and Score
    25.48-25.92 against 26.96-28.03 (docs/postmask.md lists the readings tried)."""
    optimized = mask(mic4mul, "postmask", original=census, p=0.5, q=q, target_e=0.008, seed=1, **PAPER_READING)
    got = paper_setup(census, optimized, cols)
    start = paper_setup(census, mic4mul, cols)
    _, _, dld, interval = TABLE_2[q]
    assert got["DLD"] == pytest.approx(dld, abs=1.0) and got["ID"] == pytest.approx(interval, abs=1.0)
    assert got["IL1"] == pytest.approx(0.5 * start["IL1"], rel=0.011)
    assert got["score_simple"] < start["score_simple"] - 4.0
