"""What a release or an evaluation produced, as a typed summary built in the library, and the files that publish
it: metrics.json, the report (report.md, report.html, ru_map.png) and, for a release, manifest.json."""

from __future__ import annotations

import contextlib
import platform
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from time import perf_counter, time
from typing import Any, Iterator, Literal

from sdc_tasks import __version__
from sdc_tasks.files import STATISTICAL_FORMATS, tree_checksums, write_json
from sdc_tasks.pipeline.gate import GateCheck
from sdc_tasks.pipeline.spec import ReleaseSpec, columns_by_role
from sdc_tasks.pipeline.stages import MASKED_DIR
from sdc_tasks.report import RU_MAP_NAME, Drawn, write_report

METRICS_NAME = "metrics.json"
MANIFEST_NAME = "manifest.json"
REPORT_NAMES = ("report.md", "report.html")  # the names sdc_tasks.report.write_report gives its two documents
VERSIONED_PACKAGES = ("sdc-pipeline", "dask", "distributed", "pandas", "numpy", "pyarrow", "scipy", "prefect")


@dataclass(frozen=True)
class StepSummary:
    """One masking step as it ran: method, parameters, variables, blocks (or scopes), seconds and, for a
    post-masking or record swapping step, what it reached (``PostMaskOutcome.as_dict``, ``SwapOutcome.as_dict``)."""

    method: str
    params: dict[str, Any]
    variables: list[str]
    blocks: int
    seconds: float
    outcome: dict[str, Any] | None = None


@dataclass(frozen=True)
class OutputPaths:
    """Where the run's files are once it has finished (None: a file this run does not write)."""

    out_dir: Path
    masked: Path | None
    metrics: Path
    report_md: Path
    report_html: Path
    ru_map: Path | None
    manifest: Path | None


@dataclass(frozen=True)
class ReleaseSummary:
    """What one run produced. ``kind`` "release": a release spec's run, with its gate ``verdict`` ("published" or
    "refused"), ``checks``, masking ``steps``, spec hash and seed; "evaluation": the metrics of a masked file
    against its original (no verdict, checks, steps, spec hash or seed). ``metrics``: the flat metrics.json
    mapping; ``records_in``/``records_out``: records of the original and of the masked data (written, but
    published only when the verdict is "published"); ``columns``: what the run did with each input column;
    ``label``: the masked data's point on the R-U map; ``profile``: the per-variable figures of the report
    (sdc_tasks.evaluation.profile.release_profile), None when not computed; ``value_labels``: {variable: {code:
    label}} of the released columns of an SPSS, Stata or SAS input read as codes (None: none)."""

    kind: Literal["release", "evaluation"]
    name: str
    verdict: Literal["published", "refused"] | None
    checks: tuple[GateCheck, ...]
    metrics: dict[str, Any]
    records_in: int
    records_out: int
    steps: tuple[StepSummary, ...]
    spec_hash: str | None
    seed: int | None
    stage_seconds: dict[str, float]
    stage_spans: dict[str, tuple[float, float]]
    paths: OutputPaths
    columns: dict[str, str]
    key_variables: list[str]
    strata: str | None
    label: str
    started: str
    finished: str
    package_version: str = __version__
    profile: dict | None = None
    value_labels: dict[str, dict[str, str]] | None = None

    @property
    def published(self) -> bool:
        """Whether the masked data was published."""
        return self.verdict == "published"

    def as_dict(self) -> dict:
        """The summary as the report renders it (``sdc_tasks.report.write_report``)."""
        by_role = columns_by_role(self.columns)
        gate = {"passed": all(c.passed for c in self.checks), "checks": [asdict(c) for c in self.checks],
                "published": self.published}
        return {
            "title": f"{'Release report' if self.kind == 'release' else 'Evaluation'}: {self.name}",
            "run": {"spec_name": self.name, "spec_hash": self.spec_hash or "none",
                    "seed": "none" if self.seed is None else self.seed, "started": self.started,
                    "finished": self.finished, "n_records": self.records_in, "n_masked": self.records_out,
                    "output_dir": str(self.paths.out_dir), "package_version": self.package_version},
            "variables": {"masked": sorted(by_role["masked"]), "key": self.key_variables,
                          "dropped": by_role["dropped"], "passed_through": by_role["passed_through"],
                          "strata": self.strata, "columns": self.columns},
            "steps": [asdict(s) for s in self.steps],
            "metrics": self.metrics,
            "gate": gate if self.kind == "release" else None,
            "stage_seconds": self.stage_seconds,
            "ru_points": ru_points(self.label, self.metrics),
            "profile": self.profile,
            "value_labels": self.value_labels or {},
        }


@dataclass
class StageTimes:
    """Run seconds and wall-clock (Unix) spans of a run's stages, in the order they ran."""

    seconds: dict[str, float] = field(default_factory=dict)
    spans: dict[str, tuple[float, float]] = field(default_factory=dict)

    @contextlib.contextmanager
    def timed(self, stage: str) -> Iterator[None]:
        """Record the block's duration and span under ``stage`` (nothing when it raises)."""
        start = perf_counter()
        yield
        self.seconds[stage] = perf_counter() - start
        end = time()
        self.spans[stage] = (end - self.seconds[stage], end)

    def rounded(self) -> dict[str, float]:
        """The seconds of each stage, to the millisecond."""
        return {stage: round(s, 3) for stage, s in self.seconds.items()}


def now() -> str:
    """UTC time, ISO 8601."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def ru_points(label: str, metrics: dict) -> list[dict]:
    """The masked data's point on the R-U map: IL against the disclosure risk (DLD + ID) / 2
    (statistical_databases_survey.txt, R-U maps; risk as in the score's (DLD, ID) half)."""
    if not all(k in metrics for k in ("IL", "DLD", "ID")):
        return []
    return [{"label": label, "il": metrics["IL"], "dr": (metrics["DLD"] + metrics["ID"]) / 2}]


def output_paths(out_dir: Path, masked: Path | None, manifest: bool, ru_map: bool) -> OutputPaths:
    """The paths of a run's files in ``out_dir``: the masked data (``masked``, when published), metrics.json, the
    report, the R-U map (when drawn) and the manifest (a release's)."""
    return OutputPaths(out_dir, masked, out_dir / METRICS_NAME, *(out_dir / name for name in REPORT_NAMES),
                       out_dir / RU_MAP_NAME if ru_map else None, out_dir / MANIFEST_NAME if manifest else None)


def release_summary(spec: ReleaseSpec, records_in: int, records_out: int, steps: list[StepSummary], metrics: dict,
                    checks: tuple[GateCheck, ...], times: StageTimes, started: str,
                    profile: dict | None = None) -> ReleaseSummary:
    """The summary of a release of ``spec``: published when every gate check passed, refused otherwise
    (``profile``: the report's per-variable figures)."""
    published = all(c.passed for c in checks)
    out = spec.output_dir
    return ReleaseSummary(
        kind="release", name=spec.name, verdict="published" if published else "refused", checks=checks,
        metrics=metrics, records_in=records_in, records_out=records_out, steps=tuple(steps),
        spec_hash=spec.spec_hash(), seed=spec.seed, stage_seconds=times.rounded(), stage_spans=dict(times.spans),
        paths=output_paths(out, out / MASKED_DIR if published else None, True, bool(ru_points(spec.name, metrics))),
        columns=spec.column_accounting(), key_variables=[*spec.linkage_keys, *spec.categorical_keys],
        strata=spec.variables.strata, label=spec.name, started=started, finished=now(), profile=profile,
        value_labels=released_value_labels(spec))


def released_value_labels(spec: ReleaseSpec) -> dict[str, dict[str, str]] | None:
    """The value labels of the released columns of an SPSS, Stata or SAS input read as its codes, None for any
    other input (a file read as labels already carries them in its values)."""
    if spec.input_format not in STATISTICAL_FORMATS or spec.input.value_labels == "labels":
        return None
    from sdc_tasks.statistical_files import value_labels

    released = {c for c, role in spec.column_accounting().items() if role != "dropped"}
    return {v: labels for v, labels in value_labels(spec.input_path, spec.input_format).items() if v in released}


def evaluation_summary(original: str | Path, masked: str | Path, out_dir: str | Path, metrics: dict,
                       times: StageTimes, started: str) -> ReleaseSummary:
    """The summary of an evaluation of the masked file ``masked`` against ``original``, written to ``out_dir``."""
    label = Path(masked).name
    return ReleaseSummary(
        kind="evaluation", name=f"{label} vs {Path(original).name}", verdict=None, checks=(), metrics=metrics,
        records_in=metrics.get("n", 0), records_out=metrics.get("n_masked", 0), steps=(), spec_hash=None,
        seed=None, stage_seconds=times.rounded(), stage_spans=dict(times.spans),
        paths=output_paths(Path(out_dir).resolve(), None, False, bool(ru_points(label, metrics))), columns={},
        key_variables=metrics.get("key_vars", []), strata=None, label=label, started=started, finished=now())


def package_versions() -> dict[str, str]:
    """Installed versions of the packages that determine the release's bytes."""
    out = {"python": platform.python_version()}
    for name in VERSIONED_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = __version__ if name == "sdc-pipeline" else "not installed"
    return out


def manifest(summary: ReleaseSummary, out_dir: Path) -> dict:
    """Spec hash, seed, package versions, row counts, what the release did with each input column, a SHA-256 per
    file in ``out_dir`` (manifest.json excluded) and, for an SPSS, Stata or SAS input, the value labels of the
    released columns."""
    return {
        "spec_name": summary.name,
        "columns": summary.columns,
        "spec_hash": summary.spec_hash,
        "seed": summary.seed,
        "packages": package_versions(),
        "row_counts": {"original": summary.records_in, "masked": summary.records_out if summary.published else 0},
        "files": {k: v for k, v in tree_checksums(out_dir).items() if k != MANIFEST_NAME},
        **({"value_labels": summary.value_labels} if summary.value_labels else {}),
    }


def publish(summary: ReleaseSummary, out_dir: Path, drawn: Drawn | None = None) -> dict[str, Path]:
    """Write the summary's files into ``out_dir`` (the run's private directory, renamed to
    ``summary.paths.out_dir`` when the run ends well): metrics.json, report.md, report.html, the R-U map when
    there is a point to draw and, for a release, manifest.json (last: it holds the checksum of every other file);
    ``drawn``: the report's pictures when already drawn (``sdc_tasks.report.drawn_report`` of ``summary.as_dict()``).
    Returns {"metrics", "markdown", "html", ["ru_map"], ["manifest"]: path written}."""
    out = Path(out_dir)
    written = {"metrics": write_json(out / METRICS_NAME, summary.metrics),
               **write_report(summary.as_dict(), out, drawn)}
    if summary.kind == "release":
        written["manifest"] = write_json(out / MANIFEST_NAME, manifest(summary, out))
    return written
