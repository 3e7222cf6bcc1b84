"""Writing outputs safely: guarded against the run's inputs, locked across hosts, atomic, and private while
they are written.

Every output of the tool (a release, a masked dataset or file, an evaluation, a comparison) goes through
:func:`atomic_output_dir` or :func:`atomic_output_file`:

* the guard (:func:`check_output`) refuses an output that is, contains or lies inside one of the run's inputs
  (paths compared fully resolved, symbolic links included) or whose parent cannot be created;
* a lock file ``.NAME.lock`` beside the output, created with O_CREAT|O_EXCL and naming the holder's host, pid
  and start time, makes the output exclusive to one run across every host sharing the file system; a lock
  left by a dead process of this host is broken, one from another host never is;
* under the lock, what killed runs left beside the output (hidden siblings ``.NAME.tmp.HOST.PID.RAND`` and
  ``.NAME.old.HOST.PID.RAND``, matched by exact name) is cleaned up, a previous output they had moved aside
  put back;
* the run writes into a hidden sibling that only its owner can read (0700, a file 0600) and that gets the
  usual permissions (those of the umask) only when it is renamed to the output;
* an existing directory is replaced only with ``overwrite`` and only if this tool wrote it (its marker file
  :data:`MARKER`, or the manifest.json of a release of an earlier version); an existing file only with
  ``overwrite``; an output that appears while the run writes is never replaced without ``overwrite``.

Scratch directories holding records (:func:`scratch_dir`) live in one private directory under the system's
temporary directory, named after their host and pid, and the next run removes those whose process is gone.
Each output being written is noted there too, so the next run of ANY output (not only of the same one)
recovers an output whose writer was killed: its hidden work directory, with original records, is removed.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import re
import shutil
import signal
import socket
import stat
import tempfile
import threading
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator, Sequence

from sdc_tasks.errors import InputError
from sdc_tasks.files import json_text

MARKER = ".sdc-output.json"
MARKER_CONTENT = {"written_by": "sdc-pipeline"}
HOST = socket.gethostname()
HOST_TAG = re.sub(r"[^A-Za-z0-9_-]", "_", HOST) or "host"
SIBLING_KINDS = ("tmp", "old")
_TAGGED = r"(?P<host>[A-Za-z0-9_-]+)\.(?P<pid>\d+)\.(?P<rand>[a-z0-9_]+)"
SIBLING_NAME = re.compile(rf"(?P<kind>{'|'.join(SIBLING_KINDS)})\.{_TAGGED}")
SCRATCH_NAME = re.compile(rf"(?P<kind>[a-z]+)\.{_TAGGED}")
REGISTERED = "output"
"""The kind of scratch entry that names an output being written (see :func:`_registered`)."""
PROCESS = "process"
"""The kind of scratch entry that names a helper process a run started (see :func:`noted_process`)."""

PathLike = str | Path
RELEASES_ROOT_VARIABLE = "SDC_RELEASES_ROOT"
"""The environment variable naming the directory under which a flow run's relative ``out_dir`` is placed."""
DEFAULT_RELEASES_ROOT = "~/sdc-releases"
"""The releases root when :data:`RELEASES_ROOT_VARIABLE` is not set: the home directory of the account that runs
the flow, never the checkout or the installed package a deployment's flow runs start in."""


def _alive(pid: int) -> bool:
    """Whether a process with this id runs on this machine."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _inside(inner: Path, outer: Path) -> bool:
    """Whether resolved path ``inner`` is ``outer`` or lies below it."""
    return inner == outer or outer in inner.parents


def releases_root() -> Path:
    """The directory under which scheduled releases go: ``$SDC_RELEASES_ROOT``, else ``~/sdc-releases``."""
    return Path(os.environ.get(RELEASES_ROOT_VARIABLE) or DEFAULT_RELEASES_ROOT).expanduser().resolve()


def release_dir(out_dir: PathLike) -> Path:
    """A release's output directory: ``out_dir`` itself when absolute, else under :func:`releases_root`."""
    out = Path(out_dir).expanduser()
    return out if out.is_absolute() else releases_root() / out


def check_output(final: PathLike, inputs: Sequence[PathLike | None]) -> Path:
    """The resolved output path; InputError naming both paths when it is, contains or lies inside an input
    (symbolic links resolved on both sides), or naming it when its parent is not a directory."""
    out = Path(final).resolve()
    for given in filter(None, inputs):
        source = Path(given).resolve()
        if _inside(out, source) or _inside(source, out):
            relation = "is" if out == source else "lies inside" if _inside(out, source) else "contains"
            raise InputError(f"output {out} {relation} the input {source}: choose an output apart from the inputs")
    blocker = next((p for p in (out, *out.parents) if p.exists() or p.is_symlink()), None)
    if blocker is not None and blocker != out and not blocker.is_dir():
        raise InputError(f"cannot create output {out}: {blocker} is not a directory")
    return out


def _parent_made(out: Path) -> None:
    """Create the output's parent directories; InputError naming the output when that is impossible."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create output {out}: {exc.strerror} ({out.parent})") from None


def _sibling(final: Path, kind: str) -> Path:
    """A hidden sibling of ``final`` for this process: ``.NAME.KIND.HOST.PID.RANDOM`` (kind "tmp" or "old")."""
    return final.parent / f".{final.name}.{kind}.{HOST_TAG}.{os.getpid()}.{uuid.uuid4().hex[:12]}"


def _siblings(final: Path, kind: str) -> list[Path]:
    """The hidden siblings of ``final`` of one kind, matched by exact name (never a glob of the user's name)."""
    prefix = f".{final.name}."
    return sorted(p for p in final.parent.iterdir() if p.name.startswith(prefix)
                  and (m := SIBLING_NAME.fullmatch(p.name[len(prefix):])) and m["kind"] == kind)


def _remove_path(path: Path) -> None:
    """Remove a file or a directory tree, whichever ``path`` is."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _lock_path(final: Path) -> Path:
    """The lock file of output ``final``: ``.NAME.lock`` beside it."""
    return final.parent / f".{final.name}.lock"


def _holder(lock: Path) -> dict | None:
    """Who holds ``lock`` (host, pid, started), {} when it cannot be read as such, None when it is gone."""
    try:
        text = lock.read_text()
    except FileNotFoundError:
        return None
    except OSError:
        return {}
    with contextlib.suppress(ValueError):
        holder = json.loads(text)
        if isinstance(holder, dict) and isinstance(holder.get("pid"), int) and holder["pid"] > 0:
            return holder
    return {}


def _stale(holder: dict) -> bool:
    """Whether a lock's holder is a process of this host that is gone (a lock from elsewhere never is)."""
    return holder.get("host") == HOST and not _alive(holder["pid"])


def _busy_message(final: Path, lock: Path, holder: dict) -> str:
    """The refusal of a second run on a locked output, naming the lock and its holder."""
    who = (f"a run on host {holder.get('host')} (pid {holder['pid']}, since {holder.get('started')})" if holder
           else "an unknown run")
    return (f"output {final} is in use by {who}: lock {lock}; if no run is writing it any more (check that "
            "host), remove the lock file and run again")


def _try_lock(lock: Path) -> bool:
    """Create ``lock`` atomically (O_CREAT|O_EXCL) naming this host, pid and start time; False if it exists,
    InputError naming it when it cannot be created or written (a read-only directory, a full disk)."""
    try:
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    except OSError as exc:
        raise InputError(f"cannot create the output's lock {lock}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "w") as f:
            json.dump({"host": HOST, "pid": os.getpid(),
                       "started": datetime.now(timezone.utc).isoformat(timespec="seconds")}, f)
    except OSError as exc:  # a full disk: an empty lock would block every later run
        lock.unlink(missing_ok=True)
        raise InputError(f"cannot write the output's lock {lock}: {exc.strerror}") from None
    return True


@contextlib.contextmanager
def output_lock(final: PathLike) -> Iterator[Path]:
    """Hold the lock of output ``final`` for the block; InputError naming the lock and its holder when another
    run holds it. A lock of a dead process of this host is broken; one from another host never is."""
    final = Path(final).resolve()
    lock = _lock_path(final)
    while not _try_lock(lock):
        holder = _holder(lock)
        if holder is None:
            continue
        if not holder or not _stale(holder) or _holder(lock) != holder:
            raise InputError(_busy_message(final, lock, holder))
        lock.unlink(missing_ok=True)
    try:
        yield lock
    finally:
        lock.unlink(missing_ok=True)


def _recover(final: Path) -> None:
    """Under the lock of ``final``: remove the temporary siblings killed runs left and put back an output one had
    moved aside but not yet replaced."""
    for path in _siblings(final, "tmp"):
        _remove_path(path)
    for path in _siblings(final, "old"):
        if final.exists():
            _remove_path(path)
        else:
            os.rename(path, final)


def recover_interrupted(final: PathLike) -> None:
    """Clean up after runs that were killed while writing ``final``, under its lock (InputError while a live run
    holds it): a killed run leaves the last complete output, never a partial one."""
    final = Path(final).resolve()
    if final.parent.is_dir():
        with output_lock(final):
            _recover(final)


def written_by_tool(path: Path) -> bool:
    """Whether directory ``path`` is an output of this tool: its marker file, or the manifest.json of a release
    written before the marker existed."""
    marker, manifest = _json_file(path / MARKER), _json_file(path / "manifest.json")
    return marker.get("written_by") == MARKER_CONTENT["written_by"] or {"spec_hash", "files"} <= manifest.keys()


def _json_file(path: Path) -> dict:
    """The JSON object in file ``path``; {} when it is missing or not a JSON object."""
    with contextlib.suppress(OSError, ValueError):
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else {}
    return {}


def _replaceable(final: Path, overwrite: bool, is_dir: bool) -> bool:
    """Whether an existing ``final`` may be replaced (True) or there is none (False); InputError naming it
    otherwise."""
    if not final.exists():
        return False
    what = "directory" if is_dir else "file"
    if final.is_dir() != is_dir:
        raise InputError(f"output {final} exists and is not a {what}: refusing to replace it")
    if not overwrite:
        raise InputError(f"output {what} {final} already exists (pass --overwrite / overwrite: true to replace it)")
    if is_dir and not written_by_tool(final):
        raise InputError(f"output directory {final} exists and was not written by sdc-pipeline (no {MARKER}): "
                         "refusing to replace it; choose another output or remove it yourself")
    return True


def check_replaceable(final: PathLike, overwrite: bool, inputs: Sequence[PathLike | None],
                      is_dir: bool = True) -> bool:
    """Before a run starts: :func:`check_output`, then whether an existing output would be replaced (True) or
    there is none (False); InputError naming it when the atomic writer would refuse it at the end."""
    return _replaceable(check_output(final, inputs), overwrite, is_dir)


def _umask() -> int:
    """The process's file mode creation mask."""
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def _swap(tmp: Path, final: Path, overwrite: bool, is_dir: bool) -> None:
    """Publish ``tmp`` as ``final`` with the usual permissions, honouring ``overwrite`` as of now (an output that
    appeared while the run wrote is replaced only with it); a replaced output is moved aside, then removed."""
    tmp.chmod((0o777 if is_dir else 0o666) & ~_umask())
    old = None
    if _replaceable(final, overwrite, is_dir):
        old = _sibling(final, "old")
        os.rename(final, old)
    try:
        os.rename(tmp, final)
    except OSError as exc:
        if old is not None:
            os.rename(old, final)
        raise InputError(f"cannot publish output {final}: {exc.strerror}") from None
    if old is not None:
        _remove_path(old)


@contextlib.contextmanager
def _atomic_output(final: PathLike, overwrite: bool, inputs: Sequence[PathLike | None],
                   is_dir: bool) -> Iterator[Path]:
    """Guard, lock, recover, then yield a private hidden sibling that replaces ``final`` if the block succeeds."""
    out = check_output(final, inputs)
    remove_stale_scratch()
    _parent_made(out)
    with output_lock(out), _registered(out):
        _recover(out)
        _replaceable(out, overwrite, is_dir)
        tmp = _sibling(out, "tmp")
        _private(tmp, is_dir)
        try:
            yield tmp
            _swap(tmp, out, overwrite, is_dir)
        finally:
            _remove_path(tmp)


@contextlib.contextmanager
def _registered(out: Path) -> Iterator[None]:
    """Note output ``out`` in :func:`scratch_root` for the block (an entry ``output.HOST.PID.RANDOM`` naming it),
    so that when this process dies the next run of any output recovers ``out`` (:func:`remove_stale_scratch`):
    its hidden work directory holds original records."""
    with _scratch_note(REGISTERED, {"output": str(out)}):
        yield


@contextlib.contextmanager
def _scratch_note(kind: str, content: dict) -> Iterator[None]:
    """A scratch entry ``KIND.HOST.PID.RANDOM`` of this process holding ``content`` (JSON), for the block."""
    fd, entry = tempfile.mkstemp(prefix=f"{kind}.{HOST_TAG}.{os.getpid()}.", dir=scratch_root())
    with os.fdopen(fd, "w") as f:
        json.dump(content, f)
    try:
        yield
    finally:
        Path(entry).unlink(missing_ok=True)


def noted_process(pid: int, command: str) -> contextlib.AbstractContextManager[None]:
    """Note, for the block, that this run started process ``pid`` (whose command line contains ``command``), so
    that the next run ends it when this one is killed without stopping it (a temporary server)."""
    return _scratch_note(PROCESS, {"pid": pid, "command": command})


@contextlib.contextmanager
def terminal_signals_blocked() -> Iterator[None]:
    """For the block, SIGINT and SIGTERM blocked in this thread, so that a program it starts (whose blocked signals
    survive exec) never receives the terminal's Ctrl-C or a SIGTERM sent to the whole process group (a service
    manager's stop) itself: the run stops it when it is interrupted. A signal arriving meanwhile is delivered
    when the block ends."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


@contextlib.contextmanager
def interruption_deferred() -> Iterator[None]:
    """For the block (the start of a run's worker processes, a few seconds): SIGINT blocked in this thread, so that
    the threads it starts and the processes they start (whose blocked signals survive exec) never receive the
    terminal's Ctrl-C themselves (the run stops them when it is interrupted); and a SIGINT or SIGTERM reaching this
    process meanwhile held, then raised again as soon as the block ends, for the handlers before it (in the main
    thread, the run's) to act on once what the block started is in hand."""
    main = threading.current_thread() is threading.main_thread()
    held: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, frame: held.append(signum))
                for sig in (signal.SIGINT, signal.SIGTERM)} if main else {}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # a SIGINT pending for this thread is delivered here
        if held:
            signal.raise_signal(held[0])


def _end_orphan(note: dict) -> None:
    """End (SIGKILL: a noted server does not take SIGTERM, see ``terminal_signals_blocked``) the process a dead
    run noted, if it still runs the noted command (a pid reused by another program is left alone)."""
    pid, command = note.get("pid"), note.get("command")
    if not isinstance(pid, int) or pid <= 0 or not isinstance(command, str) or not command:
        return
    with contextlib.suppress(OSError):
        if command.encode() in Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" "):
            os.kill(pid, signal.SIGKILL)


def _private(tmp: Path, is_dir: bool) -> None:
    """Create ``tmp`` readable by its owner only: a directory (0700) holding the tool's marker, or an empty
    file (0600) the block writes into."""
    if is_dir:
        tmp.mkdir(mode=0o700)
        (tmp / MARKER).write_text(json.dumps(MARKER_CONTENT) + "\n")
    else:
        os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))


def atomic_output_dir(final: PathLike, overwrite: bool = False, *,
                      inputs: Sequence[PathLike | None]) -> contextlib.AbstractContextManager[Path]:
    """A context yielding a private temporary sibling directory that is renamed to ``final`` only if the block
    succeeds (see the module's docstring: guard against ``inputs``, lock, overwrite of the tool's own outputs)."""
    return _atomic_output(final, overwrite, inputs, is_dir=True)


def atomic_output_file(final: PathLike, overwrite: bool = False, *,
                       inputs: Sequence[PathLike | None]) -> contextlib.AbstractContextManager[Path]:
    """A context yielding a private temporary sibling file path that replaces ``final`` only if the block
    succeeds; an existing file is replaced only with ``overwrite``, a directory never."""
    return _atomic_output(final, overwrite, inputs, is_dir=False)


def kept_metrics(name: str, metrics: dict) -> tuple[Path | None, str]:
    """Keep the metrics of a release whose output could not be written (aggregate measures, no record) in
    ``sdc-metrics-UID`` (private) under the system's temporary directory, as ``NAME.TIME.json``; return (its
    path, "") or (None, why it could not be written either). Runs never remove these files."""
    folder = Path(tempfile.gettempdir()) / f"sdc-metrics-{os.getuid()}"
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    path = folder / f"{re.sub(r'[^A-Za-z0-9_-]', '_', name) or 'release'}.{stamp}.{os.getpid()}.json"
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        path.write_text(json_text(metrics) + "\n")
    except (OSError, ValueError) as exc:
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)
        return None, f"{folder}: {getattr(exc, 'strerror', None) or exc}"
    return path, ""


def scratch_root() -> Path:
    """The private directory (0700, this user's) under the system's temporary directory that holds every
    scratch directory of the tool."""
    root = Path(tempfile.gettempdir()) / f"sdc-scratch-{os.getuid()}"
    with contextlib.suppress(FileExistsError):
        root.mkdir(mode=0o700)
    info = root.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise InputError(f"scratch directory {root} is not a directory of this user: remove it")
    root.chmod(0o700)
    return root


def remove_stale_scratch() -> None:
    """Remove the scratch directories of this host whose process is gone (killed runs leave them), recover
    the outputs such processes were writing (their hidden work directories removed, a previous output put
    back; an output another run holds now is left to it) and end the helper processes they had started."""
    for entry in scratch_root().iterdir():
        m = SCRATCH_NAME.fullmatch(entry.name)
        if m and m["host"] == HOST_TAG and not _alive(int(m["pid"])):
            note = _json_file(entry) if entry.is_file() else {}
            if m["kind"] == PROCESS:
                _end_orphan(note)
            if m["kind"] == REGISTERED and isinstance(note.get("output"), str):
                with contextlib.suppress(InputError, OSError):
                    recover_interrupted(note["output"])
            _remove_path(entry)


@contextlib.contextmanager
def replaced_whole(path: PathLike) -> Iterator[Path]:
    """A partial file beside ``path`` for the block to write, renamed to ``path`` when the block ends (removed when
    it fails): a task that is run again, after its worker died, replaces its file whole and never leaves half of
    one for another task to read."""
    partial = Path(path).with_name(f".{Path(path).name}.{os.getpid()}.{uuid.uuid4().hex}")
    try:
        yield partial
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


def pickled_whole(path: PathLike, value: object) -> None:
    """Write ``value``'s pickle to ``path`` whole (:func:`replaced_whole`): what a task keeps of its result for the
    run of it that may follow a lost worker."""
    with replaced_whole(path) as partial:
        partial.write_bytes(pickle.dumps(value, protocol=5))


@contextlib.contextmanager
def scratch_area(kind: str, parent: PathLike | None = None) -> Iterator[Path]:
    """A new private directory for the scratch files of a block, removed after it: inside ``parent`` (a directory
    the run owns, such as a release's work directory, which the workers of a cluster reach) or, when None, a
    :func:`scratch_dir`."""
    if parent is None:
        with scratch_dir(kind) as tmp:
            yield Path(tmp)
        return
    Path(parent).mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix=f"{kind}.", dir=parent))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def spill_area(kind: str, spill: PathLike | None) -> contextlib.AbstractContextManager:
    """A :func:`scratch_area` inside ``spill`` for intermediate results kept in files, or, when ``spill`` is None
    (they stay in the workers' memory), a null context yielding None."""
    return contextlib.nullcontext() if spill is None else scratch_area(kind, spill)


def scratch_dir(kind: str) -> tempfile.TemporaryDirectory:
    """A new private scratch directory ``KIND.HOST.PID.RANDOM`` in :func:`scratch_root`, removed when the
    returned object is cleaned up (or by a later run when this process dies first)."""
    remove_stale_scratch()
    return tempfile.TemporaryDirectory(prefix=f"{kind}.{HOST_TAG}.{os.getpid()}.", dir=scratch_root())
