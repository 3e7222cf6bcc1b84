"""The checks a release runs before it starts anything (no Dask cluster, no Prefect server, no pass over the
records): the spec (already parsed), the Dask TLS settings, the input's files and schema against the spec's
roles, and the output directory. ``sdc validate`` runs them alone; ``sdc release`` runs them first, so a typo or
an existing output answers in a second, naming the field, column or path at fault."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sdc_tasks.errors import InputError
from sdc_tasks.files import check_columns, input_columns
from sdc_tasks.outputs import check_replaceable, release_dir
from sdc_tasks.pipeline.spec import ReleaseSpec, columns_by_role, load_spec
from sdc_tasks.tls import TlsFiles, check_tls_settings


@dataclass(frozen=True)
class Preflight:
    """What the checks found: the input's columns, each column's role in the release, and whether the release
    would replace a previous one in its output directory."""

    columns: tuple[str, ...]
    roles: dict[str, list[str]]
    replaces: bool


def preflight(spec: ReleaseSpec) -> Preflight:
    """Check ``spec``'s run without starting it; raise InputError or SpecError naming the setting, column or path
    at fault: TLS files that do not match the scheduler address, an input that is missing or unreadable, a
    column the spec names that the input lacks (the id column too unless ``create_id``), an input column without
    a role, an output that is or lies inside the input, or that exists and may not be replaced."""
    check_tls_settings(spec.dask.address, spec.dask_tls)
    what = f"input {spec.input_path}"
    columns = input_columns(spec.input_path, spec.input_format)
    accounting = spec.column_accounting()
    named = [c for c in accounting if not (spec.create_id and c == spec.id_column)]
    check_columns(columns, named, what)
    check_roles([c for c in columns if not (spec.create_id and c == spec.id_column)], spec, what)
    replaces = check_replaceable(spec.output_dir, spec.output.overwrite, [spec.input_path])
    return Preflight(tuple(map(str, columns)), columns_by_role(accounting), replaces)


def check_roles(columns, spec: ReleaseSpec, what: str) -> None:
    """Raise InputError naming the columns of the input the spec gives no role (they would be published as they
    are) and how to give them one."""
    loose = [c for c in columns if c not in spec.column_accounting()]
    if loose:
        raise InputError(f"{what}: column{'s' if len(loose) > 1 else ''} {', '.join(map(repr, loose))} "
                         f"{'have' if len(loose) > 1 else 'has'} no role in the spec: list each under variables "
                         "(continuous or categorical to mask it, pass_through to publish it unchanged, drop or "
                         "direct_identifiers to leave it out)")


def release_overrides(out_dir: str | None = None, dask_address: str | None = None, workers: int | None = None,
                      overwrite: bool | None = None, tls: TlsFiles = TlsFiles()) -> dict[str, Any]:
    """The spec fields a release run's parameters replace (those given), as load_spec's dotted overrides; the
    output directory placed under the releases root when relative (``sdc_tasks.outputs.release_dir``: a
    deployment's flow run starts in a checkout), the TLS files resolved against the working directory."""
    overrides: dict[str, Any] = {}
    if out_dir is not None:
        overrides["output.dir"] = str(release_dir(out_dir))
    if dask_address is not None:
        overrides["dask.address"] = dask_address
    for field, path in vars(tls.resolved()).items():
        if path is not None:
            overrides[f"dask.tls.{field}"] = path
    if workers is not None:
        overrides["dask.workers"] = workers
    if overwrite is not None:
        overrides["output.overwrite"] = overwrite
    return overrides


def checked_spec(spec_path: str | Path, overrides: dict[str, Any] | None = None) -> tuple[ReleaseSpec, Preflight]:
    """The spec at ``spec_path`` with a run's ``overrides`` (``release_overrides``), and its :func:`preflight`."""
    spec = load_spec(spec_path, overrides)
    return spec, preflight(spec)
