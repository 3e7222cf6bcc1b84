"""Serve scheduled deployments of the ``release`` flow: one deployment per named cron schedule.

    python deploy/serve.py --spec deploy/specs/census-rankswap.yaml --out /srv/releases/census
    python deploy/serve.py --spec SPEC --out DIR --schedule weekly="0 4 * * 1" --timezone Europe/Madrid
    python deploy/serve.py --spec SPEC --out DIR --dask-address tls://scheduler:8786 \
        --tls-ca-file /etc/sdc/tls/ca.pem --tls-cert /etc/sdc/tls/client.pem --tls-key /etc/sdc/tls/client-key.pem

The process registers the deployments with the Prefect API (``PREFECT_API_URL``) and runs their flow runs
itself when they come due, until it is stopped (Ctrl-C pauses the schedules). Each deployment writes its
release to ``OUT/<schedule name>`` and replaces the previous one there atomically; without ``--out``, OUT is
``$SDC_RELEASES_ROOT/<spec name>`` (``~/sdc-releases/<spec name>`` when the variable is not set).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from prefect import serve
from prefect.deployments.runner import RunnerDeployment
from prefect.schedules import Cron
from prefect.settings import PREFECT_API_URL
from prefect.types.entrypoint import EntrypointType

from flows.release import release
from flows.server import check_api
from sdc_tasks.outputs import check_output, releases_root
from sdc_tasks.pipeline.preflight import release_overrides
from sdc_tasks.pipeline.spec import load_spec
from sdc_tasks.tls import TlsFiles

DEFAULT_SCHEDULES = {
    "nightly": "0 2 * * *",  # 02:00 every day
    "monthly": "0 3 1 * *",  # 03:00 on the first day of each month
}


def schedule_pair(text: str) -> tuple[str, str]:
    """``NAME=CRON`` from the command line as (name, cron), the cron string checked."""
    name, sep, cron = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"schedule {text!r}: expected NAME=CRON, e.g. nightly='0 2 * * *'")
    try:
        Cron(cron.strip())
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"schedule {name.strip()!r}: {exc}") from None
    return name.strip(), cron.strip()


def release_deployments(spec_path: str | Path, out_dir: str | Path | None = None,
                        schedules: dict[str, str] | None = None, timezone: str = "UTC", dask_address: str | None = None,
                        tls: TlsFiles = TlsFiles()) -> list[RunnerDeployment]:
    """One deployment of ``release`` per named cron schedule, each releasing the spec to ``out_dir/<name>``
    (on the scheduler at ``dask_address`` with the client's ``tls`` files, when given); without ``out_dir``,
    ``<releases root>/<spec name>`` (``$SDC_RELEASES_ROOT``, else ``~/sdc-releases``).

    The spec is loaded and each output checked against the spec's input here, so a bad spec or output fails
    when the deployments are built rather than at the first run.
    """
    try:
        ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"timezone {timezone!r} is not an IANA time zone (e.g. UTC, Europe/Madrid)") from None
    spec_file = Path(spec_path).resolve()
    spec = load_spec(spec_file, release_overrides(dask_address=dask_address, tls=tls))
    out = releases_root() / spec.name if out_dir is None else Path(out_dir).resolve()
    deployments = []
    for name, cron in (DEFAULT_SCHEDULES if schedules is None else schedules).items():
        check_output(out / name, [spec.input_path])
        parameters = {"spec_path": str(spec_file), "out_dir": str(out / name), "overwrite": True}
        if dask_address:
            parameters["dask_address"] = dask_address
        parameters.update({f"tls_{field}": path for field, path in vars(tls.resolved()).items() if path is not None})
        deployments.append(release.to_deployment(
            name=f"{spec.name}-{name}",
            schedules=[Cron(cron, timezone=timezone)],
            parameters=parameters,
            concurrency_limit=1,
            description=f"Release {spec.name} ({spec_file.name}) to {out / name} on the cron {cron!r} ({timezone}).",
            tags=["sdc", spec.name, name],
            entrypoint_type=EntrypointType.MODULE_PATH,
        ))
    return deployments


def argument_parser() -> argparse.ArgumentParser:
    """The command line of ``deploy/serve.py``."""
    parser = argparse.ArgumentParser(description="Serve scheduled Prefect deployments of the release flow.")
    parser.add_argument("--spec", required=True, help="release spec (YAML)")
    parser.add_argument("--out", default=None, help="output root: each schedule releases to OUT/<name> (default: "
                        "$SDC_RELEASES_ROOT/<spec name>, without the variable ~/sdc-releases/<spec name>)")
    parser.add_argument("--schedule", action="append", type=schedule_pair, metavar="NAME=CRON",
                        help="a named cron schedule (repeatable; default: nightly='0 2 * * *' and "
                             "monthly='0 3 1 * *')")
    parser.add_argument("--timezone", default="UTC", help="IANA time zone of the cron schedules (default UTC)")
    parser.add_argument("--dask-address", default=None, help="Dask scheduler to use (default: the spec's dask "
                        "section, a LocalCluster per run unless it names an address)")
    for field, what in (("ca-file", "CA certificate"), ("cert", "client certificate"), ("key", "client key")):
        parser.add_argument(f"--tls-{field}", default=None, help=f"{what} (PEM) for a tls:// --dask-address")
    parser.add_argument("--limit", type=int, default=None, help="most flow runs this process runs at once")
    return parser


def main(argv: list[str] | None = None) -> None:
    """Build the deployments from the command line and serve them until interrupted."""
    parser = argument_parser()
    args = parser.parse_args(argv)
    schedules = dict(args.schedule) if args.schedule else None
    try:
        check_api(PREFECT_API_URL.value())
        deployments = release_deployments(args.spec, args.out, schedules, args.timezone, args.dask_address,
                                          TlsFiles(args.tls_ca_file, args.tls_cert, args.tls_key))
    except ValueError as exc:  # the API down, SpecError, InputError, a bad time zone: one line naming the fault
        parser.error(str(exc))
    serve(*deployments, limit=args.limit)


if __name__ == "__main__":
    main()
