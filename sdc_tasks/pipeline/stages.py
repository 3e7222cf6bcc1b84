"""The release stages as plain library functions (the Prefect flow only orchestrates them).

Each stage takes the spec and paths and returns a small JSON-able summary; data moves as Dask collections
and Parquet files, never as return values.
"""

from __future__ import annotations

import json
import platform
import shutil
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from time import perf_counter

import dask.dataframe as dd
import numpy as np

from sdc_tasks import __version__
from sdc_tasks.errors import InputError
from sdc_tasks.evaluation.measures import evaluate
from sdc_tasks.io import parquet_row_counts, read_table, read_with_ids, tree_checksums, write_parquet
from sdc_tasks.masking.apply import StepContext, restore_order, scope_count
from sdc_tasks.masking.methods import block_for, mask_for
from sdc_tasks.masking.methods import needs_blocks as method_needs_blocks
from sdc_tasks.pipeline.spec import ReleaseSpec
from sdc_tasks.stats.frequencies import sorted_categories
from sdc_tasks.validation import fewest_records, load_checked

MASKED_DIR = "masked"
WORK_DIR = "_work"
VERSIONED_PACKAGES = ("sdc-pipeline", "dask", "distributed", "pandas", "numpy", "pyarrow", "scipy", "prefect")



def load_original(spec: ReleaseSpec) -> dd.DataFrame:
    """The original file as a Dask DataFrame, with the id column created from row positions if the spec asks."""
    return read_with_ids(spec.input_path, spec.input.format, spec.id_column, spec.create_id)


def validate_input(spec: ReleaseSpec) -> dict:
    """Check the original file against the spec; raise InputError naming the column/record/parameter at fault
    (every column has a role; continuous, continuous key and weight variables must be numbers; categorical
    ones may hold any values, missing included; every stratum holds enough records for each step)."""
    roles = spec.variables
    what = f"input {spec.input_path}"
    check_roles(read_table(spec.input_path, spec.input.format).columns, spec, what)
    group_sizes = [fewest_records(step.params, f"steps.{i}.params.k", f"steps.{i} ({step.method})")
                   for i, step in enumerate(spec.steps)]
    numeric = [*roles.continuous, *(k for k in roles.key if k not in roles.categorical), *filter(None, [roles.weight])]
    named = [*roles.direct_identifiers, *roles.categorical, *roles.pass_through, *roles.drop]
    _, facts = load_checked(spec.input_path, spec.id_column, numeric, what, spec.input.format, spec.create_id, named,
                            roles.strata, group_sizes)
    return facts


def check_roles(columns, spec: ReleaseSpec, what: str) -> None:
    """Raise InputError naming the columns of the input the spec gives no role (they would be published as they
    are) and how to give them one."""
    loose = [c for c in columns if c not in spec.column_accounting()]
    if loose:
        raise InputError(f"{what}: column{'s' if len(loose) > 1 else ''} {', '.join(map(repr, loose))} "
                         f"{'have' if len(loose) > 1 else 'has'} no role in the spec: list each under variables "
                         "(continuous or categorical to mask it, pass_through to publish it unchanged, drop or "
                         "direct_identifiers to leave it out)")


def step_source(spec: ReleaseSpec, previous: str | None) -> dd.DataFrame:
    """The input of a step: the original minus direct identifiers and dropped columns (first step) or the
    previous step's output."""
    if previous is not None:
        return read_table(previous, "parquet")
    ddf = load_original(spec)
    drop = [c for c in [*spec.variables.direct_identifiers, *spec.variables.drop] if c in ddf.columns]
    return ddf.drop(columns=drop) if drop else ddf


def _step_args(spec: ReleaseSpec, i: int) -> tuple[str, list[str], dict, StepContext]:
    """Method, variables, parameters and context of step ``i``."""
    step = spec.steps[i]
    ctx = StepContext(seed=spec.seed, step=i, id_column=spec.id_column, strata=spec.variables.strata,
                      reference=step_source(spec, None), category_orders=dict(spec.variables.ordinal))
    return step.method, spec.step_variables(i), step.params, ctx


def needs_blocks(spec: ReleaseSpec, i: int) -> bool:
    """Whether step ``i``'s method runs on data-driven blocks."""
    return method_needs_blocks(spec.steps[i].method)


def block_stage(spec: ReleaseSpec, i: int, previous: str | None, work: Path) -> dict:
    """Stage 'block': write step ``i``'s input as block-aligned Parquet under ``work``."""
    method, variables, params, ctx = _step_args(spec, i)
    staged = block_for(method, step_source(spec, previous), variables, params, ctx)
    write_parquet(staged.frame, work / "blocks")
    return {"blocks": staged.blocks}


def mask_stage(spec: ReleaseSpec, i: int, previous: str | None, work: Path) -> dict:
    """Stage 'mask': run step ``i``'s kernel per block (or per scope) and write positions and masked values."""
    method, variables, params, ctx = _step_args(spec, i)
    t0 = perf_counter()
    source = step_source(spec, previous)
    blocked = needs_blocks(spec, i)
    frame = read_table(work / "blocks", "parquet") if blocked else source
    write_parquet(mask_for(method, frame, variables, params, ctx), work / "masked-values")
    return {"method": method, "params": dict(params), "variables": variables,
            "blocks": None if blocked else scope_count(source, ctx), "seconds": round(perf_counter() - t0, 3)}


def write_stage(spec: ReleaseSpec, i: int, previous: str | None, work: Path, target: Path) -> dict:
    """Stage 'write': put step ``i``'s masked values back in input order and write the step's output."""
    _, variables, _, _ = _step_args(spec, i)
    staged = restore_order(step_source(spec, previous), read_table(work / "masked-values", "parquet"), variables)
    write_parquet(staged.frame, target)
    return {"rows": int(sum(parquet_row_counts(target)))}


def evaluate_release(spec: ReleaseSpec, masked_path: Path, families: tuple[str, ...]) -> dict:
    """Metrics of the masked dataset at ``masked_path`` against the original, for the given metric families."""
    original = load_original(spec)
    masked = read_table(masked_path, "parquet")
    roles = spec.variables
    return evaluate(original, masked, spec.id_column, list(roles.continuous),
                    [*spec.linkage_keys, *spec.categorical_keys], families, categorical=list(roles.categorical),
                    ordinal=category_orders(spec, original), weight=roles.weight)


def category_orders(spec: ReleaseSpec, original: dd.DataFrame) -> dict[str, list]:
    """Each ordinal variable's categories in order: as declared, or else the sorted values of the original file."""
    undeclared = [v for v, order in spec.variables.ordinal.items() if order is None]
    return spec.category_orders(sorted_categories(original, undeclared))


def gate_decision(spec: ReleaseSpec, metrics: dict) -> dict:
    """Compare each gated measure with its limit; a missing measure fails its check."""
    checks = []
    for measure, limit in spec.gate.max.items():
        value = metrics.get(measure)
        ok = value is not None and value <= limit
        checks.append({"measure": measure, "value": value, "limit": limit, "op": "<=", "passed": bool(ok)})
    return {"passed": all(c["passed"] for c in checks), "checks": checks}


def refusal_message(gate: dict) -> str:
    """One line naming every failed check: measure, value and limit."""
    failed = [c for c in gate["checks"] if not c["passed"]]
    parts = [f"{c['measure']} = {'missing' if c['value'] is None else format(c['value'], '.4g')} "
             f"> limit {c['limit']:g}" for c in failed]
    return "release refused by the risk gate: " + "; ".join(parts)


def package_versions() -> dict[str, str]:
    """Installed versions of the packages that determine the release's bytes."""
    out = {"python": platform.python_version()}
    for name in VERSIONED_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = __version__ if name == "sdc-pipeline" else "not installed"
    return out


def json_text(obj) -> str:
    """``obj`` as indented, key-sorted, strict JSON: a NaN or an infinity raises ValueError instead of being
    written as the invalid tokens NaN / Infinity."""
    return json.dumps(obj, indent=2, sort_keys=True, default=_json_default, allow_nan=False)


def write_json(path: Path, obj: dict) -> Path:
    """Write ``obj`` as :func:`json_text` (nothing is written when it raises)."""
    path.write_text(json_text(obj) + "\n")
    return path


def _json_default(o):
    """JSON encoding for numpy scalars and paths."""
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def manifest(spec: ReleaseSpec, out_dir: Path, row_counts: dict[str, int]) -> dict:
    """Spec hash, seed, package versions, row counts, what the release did with each input column and a SHA-256
    per output file (manifest.json excluded)."""
    return {
        "spec_name": spec.name,
        "columns": spec.column_accounting(),
        "spec_hash": spec.spec_hash(),
        "seed": spec.seed,
        "packages": package_versions(),
        "row_counts": row_counts,
        "files": {k: v for k, v in tree_checksums(out_dir).items() if k != "manifest.json"},
    }


def remove_tree(path: Path) -> None:
    """Delete a directory tree if it exists."""
    if path.exists():
        shutil.rmtree(path)


@dataclass
class StepPaths:
    """Where each step writes inside the release's temporary directory."""

    root: Path

    def work(self, i: int) -> Path:
        """Scratch directory of step ``i`` (blocks, masked values)."""
        return self.root / WORK_DIR / f"step-{i:02d}"

    def output(self, i: int, last: bool) -> Path:
        """Output of step ``i``: the published masked/ dataset for the last step."""
        return self.root / MASKED_DIR if last else self.work(i) / "output"


def ru_points(label: str, metrics: dict) -> list[dict]:
    """The release's point on the R-U map: IL against the disclosure risk (DLD + ID) / 2
    (statistical_databases_survey.txt, R-U maps; risk as in the score's (DLD, ID) half)."""
    if not all(k in metrics for k in ("IL", "DLD", "ID")):
        return []
    return [{"label": label, "il": metrics["IL"], "dr": (metrics["DLD"] + metrics["ID"]) / 2}]
