"""Synthetic Census-like microdata: a Gaussian copula fitted to the bundled Census file, or persons in households
with a nested geography (``write_households``, the household file of targeted record swapping), written as Parquet
in chunks.

Every chunk is drawn from ``numpy.random.default_rng([seed, chunk_index])`` and row ``r`` of a chunk uses only
the first ``r + 1`` rows of that stream, so the output depends on the seed and the chunk layout, never on workers.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from scipy import special, stats

from sdc_tasks.bundled import bundled_path
from sdc_tasks.errors import InputError, reason_of
from sdc_tasks.outputs import atomic_output_dir
from sdc_tasks.progress import count

CENSUS_VARIABLES: tuple[str, ...] = (
    "AFNLWGT",
    "AGI",
    "EMCONTRB",
    "FEDTAX",
    "PTOTVAL",
    "STATETAX",
    "TAXINC",
    "POTHVAL",
    "INTVAL",
    "PEARNVAL",
    "FICA",
    "WSALVAL",
    "ERNVAL",
)

JITTER = 1e-3
"""Standard deviation of the log of the multiplicative jitter that breaks ties of the empirical quantile function."""

MIN_EIGENVALUE = 1e-8
"""Floor for the eigenvalues of the normal-score correlation matrix (keeps its Cholesky factor defined)."""


@dataclass(frozen=True, eq=False)
class CensusModel:
    """Gaussian copula: per-variable sorted reference values (columns of ``sorted_values``) and a correlation matrix."""

    columns: tuple[str, ...]
    sorted_values: np.ndarray
    correlation: np.ndarray
    cholesky: np.ndarray


def census_reference() -> pd.DataFrame:
    """Return the bundled Census file (1080 records of the 13 ``CENSUS_VARIABLES``)."""
    return pd.read_csv(bundled_path("census.csv"))


def reference_matrix(reference: pd.DataFrame) -> np.ndarray:
    """Return the ``CENSUS_VARIABLES`` of ``reference`` as a float64 (n, 13) array, checked to be usable marginals."""
    missing = [c for c in CENSUS_VARIABLES if c not in reference.columns]
    if missing:
        raise InputError(f"reference lacks the Census column(s) {missing}")
    if len(reference) < 2:
        raise InputError(f"reference needs at least 2 records, got {len(reference)}")
    try:
        values = reference.loc[:, list(CENSUS_VARIABLES)].to_numpy(dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(f"reference Census columns must be numeric: {reason_of(exc)}") from None
    for j, name in enumerate(CENSUS_VARIABLES):
        column = values[:, j]
        if not np.isfinite(column).all():
            raise InputError(f"reference column {name} has missing or infinite values")
        if (column < 0).any():
            raise InputError(f"reference column {name} has negative values (Census variables are >= 0)")
        if column.min() == column.max():
            raise InputError(f"reference column {name} is constant: no correlation can be fitted")
    return values


def normal_scores(values: np.ndarray) -> np.ndarray:
    """Return the van der Waerden scores of each column (ties get their average rank)."""
    n = values.shape[0]
    # van der Waerden score: Phi^-1(rank / (n + 1))
    return special.ndtri(stats.rankdata(values, method="average", axis=0) / (n + 1))


def nearest_correlation(matrix: np.ndarray) -> np.ndarray:
    """Return ``matrix`` unchanged if positive definite, else with eigenvalues floored and the diagonal reset to 1."""
    eigenvalues, eigenvectors = np.linalg.eigh(matrix)
    if eigenvalues.min() > MIN_EIGENVALUE:
        return matrix
    # R' = V max(L, eps) V^T, rescaled by D^-1/2 R' D^-1/2 so that diag(R') = 1
    repaired = (eigenvectors * np.maximum(eigenvalues, MIN_EIGENVALUE)) @ eigenvectors.T
    scale = 1.0 / np.sqrt(np.diag(repaired))
    return repaired * np.outer(scale, scale)


def census_model(reference: pd.DataFrame) -> CensusModel:
    """Return the Gaussian copula of ``reference``: empirical marginals and the correlation of its normal scores."""
    values = reference_matrix(reference)
    correlation = nearest_correlation(np.corrcoef(normal_scores(values), rowvar=False))
    return CensusModel(
        columns=CENSUS_VARIABLES,
        sorted_values=np.sort(values, axis=0),
        correlation=correlation,
        cholesky=np.linalg.cholesky(correlation),
    )


def checked_int(name: str, value: object, minimum: int) -> int:
    """Return ``value`` as an int, or raise InputError naming the parameter if it is not an integer >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise InputError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def quantile_values(sorted_values: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Return the empirical quantile function of ``sorted_values`` at probabilities ``u``."""
    n = sorted_values.shape[0]
    # Q(u): linear between order statistics x_(i) placed at i / (n + 1), constant x_(1) / x_(n) beyond them
    return np.interp(u, np.arange(1, n + 1) / (n + 1), sorted_values)


def stratum_labels(strata: int) -> list[str]:
    """Return the stratum names ``s00`` .. ``s{strata-1}`` (zero-padded to equal width)."""
    width = max(2, len(str(strata - 1)))
    return [f"s{k:0{width}d}" for k in range(strata)]


def stratum_probabilities(strata: int) -> np.ndarray:
    """Return unequal, fixed stratum probabilities: Zipf-like, proportional to 1 / (k + 1)."""
    weights = 1.0 / np.arange(1, strata + 1)
    return weights / weights.sum()


def stratum_column(z: np.ndarray, strata: int) -> pd.Categorical:
    """Return a categorical column of ``strata`` levels drawn by inverting the cumulative probabilities at Phi(z)."""
    cumulative = np.cumsum(stratum_probabilities(strata))
    codes = np.minimum(np.searchsorted(cumulative, special.ndtr(z), side="right"), strata - 1)
    return pd.Categorical.from_codes(codes, categories=stratum_labels(strata))


def synthetic_chunk(
    model: CensusModel, rows: int, seed: int, chunk_index: int, first_id: int, strata: int = 0
) -> pd.DataFrame:
    """Return ``rows`` synthetic records with ids ``first_id`` .. ``first_id + rows - 1``, drawn from ``model``.

    The random stream is ``default_rng([seed, chunk_index])``; each row takes its own block of normals, so the first
    ``k`` rows of a chunk do not depend on ``rows`` and the 13 variables do not depend on ``strata``.
    """
    rows = checked_int("rows", rows, 1)
    strata = checked_int("strata", strata, 0)
    rng = np.random.default_rng([checked_int("seed", seed, 0), checked_int("chunk_index", chunk_index, 0)])
    first_id = checked_int("first_id", first_id, 0)
    p = len(model.columns)
    z = rng.standard_normal((rows, 2 * p + 1))
    # copula: X = L Z has correlation R = L L^T, and U = Phi(X) has uniform marginals
    u = z[:, :p] @ model.cholesky.T
    special.ndtr(u, out=u)
    data: dict[str, object] = {"record_id": np.arange(first_id, first_id + rows, dtype=np.int64)}
    for j, name in enumerate(model.columns):
        # multiplicative jitter exp(JITTER * z) > 0: breaks ties, keeps exact zeros at zero and values >= 0
        data[name] = quantile_values(model.sorted_values[:, j], u[:, j]) * np.exp(JITTER * z[:, p + j])
    if strata:
        data["stratum"] = stratum_column(z[:, 2 * p], strata)
    return pd.DataFrame(data, copy=False)


def part_path(directory: Path, index: int) -> Path:
    """Return the path of Parquet part ``index`` (``part-00000.parquet``, ...) in ``directory``."""
    return directory / f"part-{index:05d}.parquet"


def write_synthetic(
    out_dir: str | Path,
    rows: int,
    seed: int = 0,
    strata: int = 0,
    rows_per_file: int = 1_000_000,
    reference: pd.DataFrame | None = None,
) -> list[Path]:
    """Write ``rows`` synthetic records as Parquet parts of at most ``rows_per_file`` rows; return the part paths.

    Part ``i`` is ``synthetic_chunk(model, ..., seed, chunk_index=i, first_id=i * rows_per_file)``; only one chunk is
    in memory at a time. The dataset appears at ``out_dir`` only when complete; an existing ``out_dir`` is an error.
    """
    strata = checked_int("strata", strata, 0)
    model = census_model(census_reference() if reference is None else reference)
    return write_chunks(out_dir, rows, seed, rows_per_file,
                        lambda n, index, first: synthetic_chunk(model, n, seed, index, first, strata))


def write_chunks(out_dir: str | Path, rows: int, seed: int, rows_per_file: int, chunk) -> list[Path]:
    """Write ``rows`` records as Parquet parts of at most ``rows_per_file`` rows, part ``i`` being
    ``chunk(rows of the part, i, i * rows_per_file)``; return the part paths. Only one chunk is in memory at a time;
    the dataset appears at ``out_dir`` only when complete; an existing ``out_dir`` is an error."""
    rows = checked_int("rows", rows, 1)
    checked_int("seed", seed, 0)
    rows_per_file = checked_int("rows_per_file", rows_per_file, 1)
    final = Path(out_dir).resolve()
    names = []
    starts = range(0, rows, rows_per_file)
    with atomic_output_dir(final, overwrite=False, inputs=[]) as tmp:
        count(0, len(starts), "files")
        for index, first_id in enumerate(starts):
            frame = chunk(min(rows_per_file, rows - first_id), index, first_id)
            path = part_path(tmp, index)
            pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path)
            names.append(path.name)
            count(index + 1, len(starts), "files")
    return [final / name for name in names]


# ---- synthetic census households ----

HOUSEHOLD_SIZES = np.array([0.30, 0.30, 0.15, 0.14, 0.06, 0.03, 0.015, 0.005])
"""Share of households of 1..8 persons (a European census' shape: a third alone, a third in couples)."""
NATIONALS = 0.92
"""Share of households of the country's nationality; the others draw one of NATIONALITIES - 1 foreign ones,
Zipf-like."""
NATIONALITIES = 40
AGE_BAND = 10
"""Width of the age groups (0-9, 10-19, ...), the coarse age of the risk variables."""
TENURES = ("owner", "renter", "other")
TENURE_SHARES = (0.6, 0.33, 0.07)


@dataclass(frozen=True)
class Geography:
    """The nested geographic hierarchy of the household generator: ``regions`` regions, each of ``districts``
    districts, each of ``areas`` areas; codes are unique within their level (district = region * 100 + d, area =
    district * 100 + a) so each level is nested in the one above."""

    regions: int = 8
    districts: int = 10
    areas: int = 20

    def codes(self, area_index: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(region, district, area) codes of areas numbered 0 .. regions * districts * areas - 1."""
        region, rest = np.divmod(area_index, self.districts * self.areas)
        district, area = np.divmod(rest, self.areas)
        district_code = (region + 1) * 100 + district + 1
        return region + 1, district_code, district_code * 100 + area + 1


def household_chunk(rows: int, seed: int, chunk_index: int, first_id: int,
                    geography: Geography = Geography()) -> pd.DataFrame:
    """``rows`` synthetic persons in households, person ids ``first_id`` .. ``first_id + rows - 1``, household ids
    ``first_id`` + the household's number in the chunk (unique over chunks). Per household: region > district >
    area (areas Zipf-like in size), size (HOUSEHOLD_SIZES; the chunk's last household cut to the rows left),
    nationality (NATIONALS national, else Zipf-like), tenure and weight (a 10 % sample: 8 to 12); per person: age
    (a first adult 18-94, a second adult 18-94 in households of 2 and more, the others children 0-24), its
    AGE_BAND-year group and sex. The
    stream is ``default_rng([seed, chunk_index, 1])``."""
    rows = checked_int("rows", rows, 1)
    rng = np.random.default_rng([checked_int("seed", seed, 0), checked_int("chunk_index", chunk_index, 0), 1])
    sizes = rng.choice(np.arange(1, len(HOUSEHOLD_SIZES) + 1), size=rows, p=HOUSEHOLD_SIZES)
    households = int(np.searchsorted(np.cumsum(sizes), rows)) + 1
    sizes = sizes[:households]
    sizes[-1] -= int(sizes.sum()) - rows
    cells = geography.regions * geography.districts * geography.areas
    area_weight = 1.0 / np.sqrt(np.arange(1, cells + 1))
    area_index = rng.permutation(cells)[rng.choice(cells, size=households, p=area_weight / area_weight.sum())]
    region, district, area = geography.codes(area_index)
    foreign = rng.random(households) >= NATIONALS
    zipf = 1.0 / np.arange(1, NATIONALITIES)
    nationality = np.where(foreign, 2 + rng.choice(NATIONALITIES - 1, size=households, p=zipf / zipf.sum()), 1)
    tenure = rng.choice(len(TENURES), size=households, p=TENURE_SHARES)
    weight = rng.uniform(8.0, 12.0, households)
    member = np.arange(rows) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    adult = member < np.minimum(np.repeat(sizes, sizes), 2)
    age = np.where(adult, rng.integers(18, 95, rows), rng.integers(0, 25, rows))

    def each(values: np.ndarray) -> np.ndarray:
        """A household value repeated for each member."""
        return np.repeat(values, sizes)

    return pd.DataFrame({
        "record_id": np.arange(first_id, first_id + rows, dtype=np.int64),
        "household_id": each(np.arange(first_id, first_id + households, dtype=np.int64)),
        "region": each(region).astype(np.int64), "district": each(district).astype(np.int64),
        "area": each(area).astype(np.int64), "hhsize": each(sizes).astype(np.int64),
        "age": age.astype(np.int64), "age_group": (age // AGE_BAND).astype(np.int64),
        "sex": rng.integers(1, 3, rows).astype(np.int64),
        "nationality": each(nationality).astype(np.int64),
        "tenure": each(np.asarray(TENURES, dtype=object)[tenure]), "weight": each(weight),
    })


def write_households(out_dir: str | Path, rows: int, seed: int = 0, rows_per_file: int = 1_000_000,
                     geography: Geography = Geography()) -> list[Path]:
    """Write ``rows`` synthetic persons in households (``household_chunk``) as Parquet parts of at most
    ``rows_per_file`` persons; households never span parts. Returns the part paths."""
    return write_chunks(out_dir, rows, seed, rows_per_file,
                        lambda n, index, first: household_chunk(n, seed, index, first, geography))
