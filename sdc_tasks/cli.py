"""The ``sdc`` command: demo, release, evaluate, mask and generate."""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import typer

from sdc_tasks.errors import InputError, SpecError, StageFailed, value_free
from sdc_tasks.files import json_text
from sdc_tasks.masking.registry import method_help, param_help
from sdc_tasks.metrics.catalogue import DEFAULT_FAMILIES, FAMILIES
from sdc_tasks.outputs import atomic_output_file
from sdc_tasks.tls import TlsFiles
from sdc_tasks.verbosity import VERBOSE_VARIABLE, verbose

app = typer.Typer(help="Statistical disclosure control for large microdata (Dask + Prefect).",
                  no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)

USER_ERRORS = (InputError, SpecError, ValueError, OSError)  # OSError: a full disk, a lost scheduler; others: value_free
TLS_CA_FILE = typer.Option(None, help="CA certificate (PEM) that signed the certificates of a tls:// "
                           "--dask-address")
TLS_CERT = typer.Option(None, help="client certificate (PEM) for a tls:// --dask-address")
TLS_KEY = typer.Option(None, help="client private key (PEM) for a tls:// --dask-address")
AUTO_WORKERS = typer.Option(None, help="Dask worker processes of a LocalCluster for this command (default: none for "
                            "inputs up to 256 MiB, which run on threads in this process and answer in seconds; "
                            "above that a LocalCluster of one worker per core)")


def _version(value: bool) -> None:
    """``--version``: print the package's version and those of the libraries it runs on, then exit."""
    if value:
        from importlib.metadata import version

        libraries = ", ".join(f"{name} {version(name)}" for name in ("prefect", "dask", "distributed"))
        typer.echo(f"sdc {version('sdc-pipeline')} ({libraries})")
        raise typer.Exit()


@app.callback()
def _options(verbose: bool = typer.Option(False, "--verbose", "-v", help="also show Dask's and Prefect's INFO "
                                          "logs (default: only the run's own stage lines and warnings)"),
             version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                          help="print the version and exit")) -> None:
    """Options of every command."""
    if verbose:
        os.environ[VERBOSE_VARIABLE] = "1"  # read by sdc_tasks.cluster, and by the processes a run starts


LIBRARY_LINES = logging.StreamHandler()  # stderr
LIBRARY_LINES.setFormatter(logging.Formatter("%(message)s"))


def _library_lines() -> None:
    """Show the library's INFO lines (``sdc_tasks`` loggers: the Dask dashboard's URL) on stderr, message only."""
    logger = logging.getLogger("sdc_tasks")
    if LIBRARY_LINES not in logger.handlers:
        logger.addHandler(LIBRARY_LINES)
    logger.setLevel(logging.INFO)


def _fail(exc: Exception, code: int = 2) -> None:
    """Print a one-line error and exit with ``code``."""
    typer.echo(f"error: {exc}", err=True)
    raise typer.Exit(code)


def _refusals() -> tuple[type[Exception], ...]:
    """The errors that report a refusal (exit 3): the release gate's, the comparison's limits'."""
    from sdc_tasks.errors import NoneWithinLimits, ReleaseRefused

    return ReleaseRefused, NoneWithinLimits


def _refused(exc: Exception) -> None:
    """Report a refusal, an outcome rather than a crash, and exit 3: for a release the gate refused, one line per
    failing check (measure, value, limit) and where its report is; else the refusal's one line."""
    checks = getattr(exc, "checks", ())
    summary = getattr(exc, "result", None)
    if not checks or summary is None:
        _fail(exc, code=3)
    typer.echo(f"refused: {summary.name} was not published; the risk gate failed {len(checks)} of "
               f"{len(summary.checks)} checks:", err=True)
    width = max(len(c.measure) for c in checks)
    for c in checks:
        value = "missing" if c.value is None else format(c.value, ".4g")
        typer.echo(f"  {c.measure:<{width}}  {value:>8} > limit {c.limit:g}", err=True)
    typer.echo(f"report: {summary.paths.report_md}", err=True)
    raise typer.Exit(3)


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived: raised in the main thread, so that every block of the run ends as on Ctrl-C
    (its cluster and server stopped, its scratch and hidden output directories removed)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class _AbandonedTasks(logging.Filter):
    """Drop asyncio's "Task exception was never retrieved" reports: once the run is interrupted, the tasks its
    tear-down abandons (a client's gather, a comm handler of the stopping scheduler) end with the errors of
    stopping, whose tracebacks would only alarm after the one ``interrupted:`` line."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Keep every record but the report of an abandoned task."""
        return not record.getMessage().startswith("Task exception was never retrieved")


def _interrupt(signum: int, frame) -> None:
    """Signal handler: raise Interrupted once; a further SIGINT or SIGTERM is ignored while the run cleans up, and
    the tasks its tear-down abandons are not reported (:class:`_AbandonedTasks`)."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    logging.getLogger("asyncio").addFilter(_AbandonedTasks())
    raise Interrupted(signum)


def _dropped_signal(exc: BaseException) -> int | None:
    """The stop signal a signal handler's exception stands for: Interrupted's, or that of a handler installed over
    the command's for a while, whose exception is no Exception and carries the signal as ``signal`` (Prefect's
    TerminationSignal while a flow runs); None for any other exception."""
    if isinstance(exc, Interrupted):
        return exc.signum
    signum = getattr(exc, "signal", None)
    if not isinstance(exc, Exception) and isinstance(signum, int) and signum in STOP_SIGNALS:
        return int(signum)
    return None


class _Redelivery:
    """An unraisable-exception hook for a stop signal's exception (:func:`_dropped_signal`), which Python could not
    raise in the main thread: a signal handled while a finalizer or a garbage-collector callback ran there (Dask's
    GC diagnosis), where an exception is reported as "Exception ignored" and dropped. The signal is sent to the
    main thread once more 50 ms later (out of that callback, a blocking wait interrupted as by the first), to the
    handler installed then; any other unraisable exception goes to the hook before."""

    def __init__(self, previous_hook: Callable[[Any], None]):
        self.previous_hook = previous_hook
        self.lock = threading.Lock()
        self.pending: dict[int, threading.Timer] = {}

    def __call__(self, unraisable) -> None:
        """Schedule the dropped signal again, or pass the exception on."""
        signum = _dropped_signal(unraisable.exc_value)
        if signum is None:
            self.previous_hook(unraisable)
            return
        if isinstance(unraisable.exc_value, Interrupted):  # the command's handler ignores the signals once it ran
            signal.signal(signum, _interrupt)
        timer = threading.Timer(0.05, self._deliver, (signum,))
        timer.daemon = True
        with self.lock:
            self.pending[signum] = timer
        timer.start()

    def _deliver(self, signum: int) -> None:
        """Send ``signum`` to the main thread unless the block has ended."""
        with self.lock:
            if self.pending.pop(signum, None) is not None:
                signal.pthread_kill(threading.main_thread().ident, signum)

    def undelivered(self) -> list[int]:
        """Cancel the deliveries not yet made; their signals."""
        with self.lock:
            for timer in self.pending.values():
                timer.cancel()
            signums, self.pending = list(self.pending), {}
        return signums


@contextlib.contextmanager
def _interruptible() -> Iterator[None]:
    """For the block, SIGINT and SIGTERM raise Interrupted in this (the main) thread, also when they arrive inside a
    finalizer (:class:`_Redelivery`); the handlers before are restored after it."""
    previous = {sig: signal.signal(sig, _interrupt) for sig in STOP_SIGNALS}
    redelivery = _Redelivery(sys.unraisablehook)
    sys.unraisablehook = redelivery
    try:
        yield
    finally:
        sys.unraisablehook = redelivery.previous_hook
        lost = redelivery.undelivered()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if lost:
        raise Interrupted(lost[0])


def _interrupted(command: str, exc: KeyboardInterrupt) -> None:
    """Print the one-line report of an interrupted command and exit 128 + the signal's number (130: SIGINT,
    143: SIGTERM)."""
    signum = exc.signum if isinstance(exc, Interrupted) else signal.SIGINT
    typer.echo(f"interrupted: {command} stopped by {signal.Signals(signum).name}; no output written, its "
               "processes and work files removed", err=True)
    raise typer.Exit(128 + signum)


@contextlib.contextmanager
def _reported(command: str):
    """Run a command's body: a refusal exits 3, bad input 2 and a library's failure 1, each with one value-free
    ``error:`` line (a library's message, which may quote a confidential value, is withheld: ``value_free``);
    SIGINT and SIGTERM end it, once its blocks have cleaned up, with one ``interrupted:`` line (exit 130, 143).
    In an ``sdc`` process the garbage collector held by :func:`main` resumes here."""
    _collection_resumed()
    try:
        with _interruptible(), value_free(command):
            yield
    except KeyboardInterrupt as exc:
        _interrupted(command, exc)
    except _refusals() as exc:
        _refused(exc)
    except USER_ERRORS as exc:
        _fail(exc)
    except StageFailed as exc:
        _fail(exc, code=1)


@contextlib.contextmanager
def _progress(stage: str) -> Iterator[None]:
    """The command's work shown as one stage on stderr: tasks (or files) done/total, elapsed and remaining time,
    redrawn in place on a terminal, a plain line every 10 s otherwise (``sdc_tasks.progress``)."""
    from sdc_tasks.progress import TerminalProgress, tracking
    from sdc_tasks.progress import stage as named_stage

    with tracking([TerminalProgress()]), named_stage(stage):
        yield


def _command_cluster(address: Optional[str], workers: Optional[int],
                     tls: TlsFiles) -> contextlib.AbstractContextManager:
    """The Dask client a command starts: the scheduler at ``address`` or a LocalCluster of ``workers`` processes
    when either is given (``cluster.dask_client``); else none, and the library call inside picks by the inputs'
    size (``scheduling.scheduled``: threads in this process for small files, a LocalCluster for large ones)."""
    if address is None and workers is None:
        return contextlib.nullcontext()
    from sdc_tasks.cluster import dask_client

    return dask_client(address, workers or 2, tls=tls)


def _split(csv: Optional[str]) -> Optional[list[str]]:
    """'a,b,c' -> ['a', 'b', 'c']; None stays None."""
    return [s.strip() for s in csv.split(",") if s.strip()] if csv else None


def _orders(items: list[str]) -> dict[str, list[str]]:
    """['VAR=c1,c2', ...] -> {'VAR': ['c1', 'c2']}; raise InputError naming a malformed item's position."""
    out = {}
    for i, item in enumerate(items):
        name, sep, cats = item.partition("=")
        if not sep or not name.strip() or not _split(cats):
            raise InputError(f"--ordinal number {i + 1} must read VAR=c1,c2,... (the categories in order)")
        out[name.strip()] = _split(cats)
    return out


def _accounting_line(accounting: dict[str, str]) -> str:
    """'columns: masked A, B; passed_through C; id record_id': what a run did with each column."""
    from sdc_tasks.pipeline.spec import columns_by_role

    return "columns: " + "; ".join(f"{role} {', '.join(map(str, cols))}"
                                   for role, cols in columns_by_role(accounting).items() if cols)


def _run_release(spec_path: str, out: Optional[Path], address: Optional[str], workers: Optional[int],
                 overwrite: Optional[bool], tls: TlsFiles = TlsFiles()) -> None:
    """Check the run (``preflight``: spec, input schema, output) before anything starts, then run the Prefect
    release flow and report the outcome on the terminal."""
    from sdc_tasks.pipeline.preflight import checked_spec, release_overrides

    with _reported("release"):
        checked_spec(spec_path, release_overrides(out, address, workers, overwrite, tls))
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    from flows.server import temporary_server
    from sdc_tasks.outputs import remove_stale_scratch

    with _reported("release"):
        remove_stale_scratch()
        with temporary_server(meanwhile=_release_flow_loaded):
            from flows.release import release

            summary = release(spec_path, out_dir=str(out) if out else None, dask_address=address,
                              workers=workers, overwrite=overwrite, tls_ca_file=tls.ca_file, tls_cert=tls.cert,
                              tls_key=tls.key)
    from sdc_tasks.report.document import format_value
    from sdc_tasks.report.headline import headline_keys

    m = summary.metrics
    typer.echo(f"published {summary.records_out} records to {summary.paths.out_dir}")
    typer.echo("  " + _accounting_line(summary.columns))
    typer.echo("  " + "  ".join(f"{k}={format_value(m[k])}" for k in headline_keys(m)))


def _release_flow_loaded() -> None:
    """Import the release flow (Prefect's engine, Dask and the pipeline: about 1.5 s, done while the temporary
    server starts) and quiet Prefect's console unless ``verbose()``."""
    import flows.release  # noqa: F401
    from flows.console import quiet_console

    if not verbose():
        quiet_console()


@app.command()
def demo(out: Path = typer.Option(Path("sdc-demo-output"), help="output directory"),
         workers: int = typer.Option(2, help="Dask workers of the local cluster")) -> None:
    """Run the release flow on the bundled Census file with the bundled spec (MD microaggregation, k = 7, 3
    attributes at a time)."""
    from sdc_tasks.bundled import bundled_path

    _run_release(str(bundled_path("demo.yaml")), out.resolve(), None, workers, True)


@app.command("release")
def release_cmd(spec: Path = typer.Argument(..., help="release spec (YAML)"),
                out: Optional[Path] = typer.Option(None, help="output directory (overrides output.dir)"),
                dask_address: Optional[str] = typer.Option(None, help="attach to this Dask scheduler"),
                workers: Optional[int] = typer.Option(None, help="workers of the local Dask cluster"),
                overwrite: Optional[bool] = typer.Option(None, "--overwrite/--no-overwrite",
                                                         help="replace an existing output directory"),
                tls_ca_file: Optional[str] = TLS_CA_FILE, tls_cert: Optional[str] = TLS_CERT,
                tls_key: Optional[str] = TLS_KEY) -> None:
    """Run a release spec: validate, mask, evaluate, gate, and write the release atomically."""
    _run_release(str(spec), out.resolve() if out else None, dask_address, workers, overwrite,
                 TlsFiles(tls_ca_file, tls_cert, tls_key))


@app.command("validate")
def validate_cmd(spec: Path = typer.Argument(..., help="release spec (YAML)"),
                 out: Optional[Path] = typer.Option(None, help="output directory (overrides output.dir)"),
                 overwrite: Optional[bool] = typer.Option(None, "--overwrite/--no-overwrite",
                                                          help="replace an existing output directory")) -> None:
    """Check a release spec, its input's columns against the spec's roles, and its output directory, without
    starting a cluster or a server (the checks `sdc release` runs first)."""
    from sdc_tasks.pipeline.preflight import checked_spec, release_overrides

    with _reported("validate"):
        checked, found = checked_spec(str(spec), release_overrides(out.resolve() if out else None,
                                                                   overwrite=overwrite))
    typer.echo(f"spec {spec}: valid ({checked.name}, {len(checked.steps)} masking "
               f"step{'s' if len(checked.steps) != 1 else ''}: {', '.join(s.method for s in checked.steps)})")
    typer.echo(f"  input {checked.input_path}: {len(found.columns)} columns, each with a role")
    typer.echo("  " + "; ".join(f"{role} {', '.join(cols)}" for role, cols in found.roles.items() if cols))
    typer.echo(f"  output {checked.output_dir}: " + ("replaces the previous release" if found.replaces else "new"))


@app.command("evaluate")
def evaluate_cmd(original: Path = typer.Option(..., help="original file (CSV or Parquet)"),
                 masked: Path = typer.Option(..., help="masked file (CSV or Parquet)"),
                 id_col: str = typer.Option("record_id", help="id column pairing the records; a file without "
                                            "it gets ids from its row positions (0-based)"),
                 vars: Optional[str] = typer.Option(None, help="variables, comma-separated (default: the "
                                                    "original's numeric columns; the masked file must have them)"),
                 key_vars: Optional[str] = typer.Option(None, help="linkage keys in order (default: the first 7 "
                                                        "variables)"),
                 families: str = typer.Option(",".join(DEFAULT_FAMILIES), help="metric families, comma-separated: "
                                              f"{', '.join(FAMILIES)} (docs/metrics.md)"),
                 categorical: Optional[str] = typer.Option(None, help="categorical variables, comma-separated "
                                                           "(codes or text; cat_il, cat_risk)"),
                 ordinal: list[str] = typer.Option([], help="ordinal categorical variable and its categories in "
                                                   "order, VAR=c1,c2,... (repeatable; others are nominal)"),
                 weight: Optional[str] = typer.Option(None, help="sampling weight column of the masked file "
                                                      "(individual risk)"),
                 sensitive: Optional[str] = typer.Option(None, help="sensitive variables of the ldiversity family, "
                                                         "comma-separated (none a key)"),
                 household: Optional[str] = typer.Option(None, help="household id column of the masked file: with "
                                                         "--weight, cat_risk adds the household risk"),
                 reference: Optional[Path] = typer.Option(None, help="reference file for EBIL_RF and PRIL_RF"),
                 pairing: str = typer.Option("auto", help="auto, id, nearest (synthetic or re-sized files) or "
                                             "paper (each masked record stands for its nearest original in IL1, "
                                             "ID and linkage, keys in the file's column order, as "
                                             "post_masking_optimization.txt sec. 2; docs/postmask.md)"),
                 out: Optional[Path] = typer.Option(None, help="write metrics.json here"),
                 overwrite: bool = typer.Option(False, help="replace an existing --out file"),
                 workers: Optional[int] = AUTO_WORKERS,
                 dask_address: Optional[str] = typer.Option(None, help="attach to this Dask scheduler"),
                 tls_ca_file: Optional[str] = TLS_CA_FILE, tls_cert: Optional[str] = TLS_CERT,
                 tls_key: Optional[str] = TLS_KEY) -> None:
    """Evaluate information loss and disclosure risk of any masked file against its original."""
    from sdc_tasks.api import evaluate

    _library_lines()

    writer = atomic_output_file(out, overwrite, inputs=[original, masked, reference]) if out else \
        contextlib.nullcontext()
    with _reported("evaluate"), writer as tmp_file, _progress("evaluate"), \
            _command_cluster(dask_address, workers, TlsFiles(tls_ca_file, tls_cert, tls_key)):
        metrics = evaluate(original, masked, vars=_split(vars), key_vars=_split(key_vars),
                           families=_split(families) or (), id_column=id_col, pairing=pairing,
                           categorical=_split(categorical), ordinal=_orders(ordinal), weight=weight,
                           reference=reference, sensitive=_split(sensitive), household=household)
        text = json_text(dict(metrics))
        if tmp_file:
            tmp_file.write_text(text + "\n")
    typer.echo(f"wrote {out}" if out else text)


@app.command("mask")
def mask_cmd(input: Path = typer.Option(..., help="input file (CSV, Parquet, SPSS, Stata or SAS)"),
             method: str = typer.Option(..., help=method_help()),
             param: list[str] = typer.Option([], help=param_help()),
             vars: Optional[str] = typer.Option(None, help="variables to mask, comma-separated, never the id or "
                                                "strata column (default: all numeric columns but the id and strata, "
                                                "refused if a column left out mostly holds numbers or true/false; "
                                                "categorical methods need them named; local_suppression: the key "
                                                "variables)"),
             ordinal: list[str] = typer.Option([], help="category order of an ordinal variable, VAR=c1,c2,... "
                                               "(repeatable; default: its sorted values)"),
             seed: int = typer.Option(0, help="random seed"),
             id_col: str = typer.Option("record_id", help="id column (created from row positions if absent)"),
             strata: Optional[str] = typer.Option(None, help="mask within each value of this column"),
             out: Path = typer.Option(..., help="output: a Parquet dataset directory, or a .csv, SPSS .sav, Stata "
                                      ".dta or SAS transport .xpt file (value labels of an SPSS/Stata input "
                                      "kept where the codes are)"),
             overwrite: bool = typer.Option(False, help="replace an existing output (a directory only if sdc wrote "
                                            "it)"),
             original: Optional[Path] = typer.Option(None, help="the original records (same ids) that rescale and "
                                                     "postmask move the masked input toward; required by them"),
             household: Optional[str] = typer.Option(None, help="household id column: categorical methods mask "
                                                     "the --household-vars once per household"),
             household_vars: Optional[str] = typer.Option(None, help="household-level variables, comma-separated "
                                                          "(the same for every member of a household)"),
             workers: Optional[int] = AUTO_WORKERS) -> None:
    """Apply one masking method to a file and write the masked file."""
    from sdc_tasks.api import masked
    from sdc_tasks.masking.registry import parse_category_orders, parse_cli_params

    _library_lines()

    with _reported("mask"), _progress(f"mask ({method})"):
        result = masked(input, method, parse_cli_params(param), vars=_split(vars), seed=seed, strata=strata,
                        id_column=id_col, original=original, ordinal=parse_category_orders(ordinal), out=out,
                        overwrite=overwrite, workers=workers, household=household,
                        household_vars=_split(household_vars))
    typer.echo(f"wrote {out} ({method}, {result.blocks} blocks)")
    typer.echo(_accounting_line(result.columns))
    if result.outcome is not None:
        typer.echo(result.outcome.text())
        if result.outcome.warning():
            typer.echo(result.outcome.warning(), err=True)


@app.command("compare")
def compare_cmd(input: Path = typer.Option(..., help="input file (CSV or Parquet)"),
                out: Path = typer.Option(..., help="output directory (written atomically)"),
                grid: Optional[Path] = typer.Option(None, help="comparison grid YAML (default: chapter 6's grid, "
                                                    "data/default_grid.yaml; categorical, Table 3 style: "
                                                    "data/categorical_grid.yaml)"),
                id_col: str = typer.Option("record_id", help="id column (created from row positions if absent)"),
                key_vars: Optional[str] = typer.Option(None, help="linkage keys in order (default: the first 7 "
                                                       "variables)"),
                variables: Optional[str] = typer.Option(None, help="variables to mask, comma-separated (default: "
                                                        "all numeric columns but the id)"),
                limit: list[str] = typer.Option([], "--max", help="risk limit MEASURE=LIMIT (repeatable), e.g. "
                                              "DLD=10; selects the best configuration meeting all limits"),
                best_spec: Optional[Path] = typer.Option(None, help="write the best configuration under the "
                                                         "limits as a release spec YAML here"),
                parallel: str = typer.Option("auto", help="auto (by input size), configurations or data"),
                workers: int = typer.Option(2, help="Dask workers"),
                dask_address: Optional[str] = typer.Option(None, help="attach to this Dask scheduler"),
                overwrite: bool = typer.Option(False, help="replace an existing output directory"),
                risk: str = typer.Option("metrics", help="linkage measures the score ranks on: metrics "
                                         "(docs/metrics.md DLD, PLD) or published (DLDpub, PLDpub: the setup of "
                                         "chapter 6 Table 1, docs/reproduction.md)"),
                tls_ca_file: Optional[str] = TLS_CA_FILE, tls_cert: Optional[str] = TLS_CERT,
                tls_key: Optional[str] = TLS_KEY) -> None:
    """Rank masking methods and parameters on one file (chapter 6 methodology): ranking, R-U map, report."""
    from sdc_tasks.comparison.outputs import comparison, comparison_summary, write_release_spec
    from sdc_tasks.comparison.run import check_best_spec, load_grid, parse_limits

    _library_lines()

    with _reported("compare"):
        limits, chosen = parse_limits(limit), load_grid(grid)
        check_best_spec(chosen, best_spec)
        with _progress("compare"), _command_cluster(dask_address, workers, TlsFiles(tls_ca_file, tls_cert, tls_key)):
            result = comparison(input, out, chosen, id_col, _split(variables), _split(key_vars), limits, parallel,
                                overwrite, risk)
        typer.echo(json.dumps(comparison_summary(result), indent=2))
        typer.echo(f"wrote {out}")
        if best_spec:
            typer.echo(f"wrote {write_release_spec(result, best_spec)}")


@app.command("generate")
def generate_cmd(rows: int = typer.Option(..., help="number of records"),
                 out: Path = typer.Option(..., help="output Parquet dataset directory"),
                 seed: int = typer.Option(0, help="random seed"),
                 strata: int = typer.Option(0, help="number of strata (0: no stratum column)"),
                 rows_per_file: int = typer.Option(1_000_000, help="records per Parquet file"),
                 households: bool = typer.Option(False, "--households", help="persons in households instead: "
                                                 "household_id, region > district > area, hhsize, age, sex, "
                                                 "nationality, tenure, weight")) -> None:
    """Write N synthetic Census-like records (13 skewed, correlated variables, unique record_id), or with
    --households N persons of a census household file."""
    from sdc_tasks.generate import write_households, write_synthetic

    with _reported("generate"), _progress("generate"):
        if households and strata:
            raise InputError("--strata goes with the Census-like records, not with --households")
        files = (write_households(out, rows, seed=seed, rows_per_file=rows_per_file) if households else
                 write_synthetic(out, rows, seed=seed, strata=strata, rows_per_file=rows_per_file))
    typer.echo(f"wrote {rows} {'persons' if households else 'records'} in {len(files)} files to {out}")


_collection_held = False
"""Whether :func:`main` holds the garbage collector while the command imports its libraries."""


def _collection_resumed() -> None:
    """Start the garbage collector :func:`main` held, with every object made so far (the libraries' modules,
    classes and tables, which live as long as the process) frozen out of its passes (``gc.freeze``)."""
    global _collection_held
    if _collection_held:
        _collection_held = False
        gc.freeze()
        gc.enable()


def main() -> None:
    """Console entry point (``sdc``). Python's cyclic garbage collector waits while the command imports its
    libraries (about 150,000 objects that live until the process ends, which its passes would otherwise go over
    again and again) and resumes, with them frozen out of its passes, where the command's work starts
    (:func:`_reported`); at the end whatever is left is frozen too, so that Python's finalization does not go
    over it once more. Together 0.4-0.5 s of a small command (docs/performance.md). Commands run in a Python
    process through ``app`` (tests, notebooks) keep the collector as it is."""
    global _collection_held
    gc.disable()
    _collection_held = True
    try:
        app(prog_name="sdc")
    finally:
        gc.freeze()


if __name__ == "__main__":
    sys.exit(main())
