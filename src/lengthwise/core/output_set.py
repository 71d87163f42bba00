"""Writing a command's output set (an audit's ``audit.json``, PNGs and ``report.html``; an evaluation's
``results.json`` and PNGs) as one unit: all or nothing.

The files are written into a fresh folder beside the target and then swapped in with one atomic rename
(Linux ``renameat2(RENAME_EXCHANGE)``; elsewhere two renames a few microseconds apart, undone if the second
fails), so a reader, a crash or a Ctrl-C never sees a new ``audit.json`` beside an old report. Interrupts are
deferred, not lost: a SIGINT that arrives while the set is swapped in is raised as soon as the swap is done, and
one that a finaliser swallowed while computing is raised at the next checkpoint (`InterruptGuard`).

The target folder holds only an output set: a folder with other files is refused before any work
(`check_output_target`), so nobody's files are ever moved aside.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Callable, Collection, Iterator, Mapping
from pathlib import Path
from types import FrameType
from typing import Any

from lengthwise.core.errors import SettingError
from lengthwise.core.results import is_atomic_temp

__all__ = [
    "InterruptGuard",
    "check_model_target",
    "check_output_target",
    "deferred_interrupts",
    "prepare_out",
    "write_output_set",
]

_STAGING = ".lengthwise-"  # prefix of our own staging folders beside the target
_RENAME_EXCHANGE = 2


def _refused(out: Path, field: str | None, problem: str) -> SettingError:
    """The error for an output folder that cannot be used: on `field` when given, else naming the path first."""
    return SettingError(field, out, problem) if field else SettingError(None, None, f"{out}: {problem}")


def check_output_target(out: Path, replaceable: Collection[str], *, what: str, field: str | None = None) -> None:
    """Raise a `SettingError` unless `out` can receive an output set: absent, or a folder holding only files named
    in `replaceable` (an earlier output set), inside a folder we may write to. `what` names the producer in the
    message ("an audit", "an evaluation"); `field` is the setting that named `out` (``"out"``), which the error
    names (without it the message starts with the path, for a caller that names the setting itself)."""
    if out.exists() and not out.is_dir():
        raise _refused(out, field, "exists and is not a directory; pass a directory path")
    here = Path.cwd().resolve()
    if out.resolve() == here or out.resolve() in here.parents:
        raise _refused(out, field, "is the current directory (or holds it); pass a sub-directory for the output")
    if out.is_dir():
        foreign = sorted(p.name for p in out.iterdir() if not _ours(p, replaceable))
        if foreign:
            more = f" and {len(foreign) - 1} more" if len(foreign) > 1 else ""
            raise _refused(
                out,
                field,
                f"holds files that are not part of {what}'s output ({foreign[0]}{more}); the whole folder "
                f"is replaced as one unit, so pass a new or empty directory, or one that {what} wrote earlier",
            )
    parent = out.resolve().parent
    while not parent.exists() and parent != parent.parent:  # folders still to make: the nearest one there decides
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise _refused(out, field, f"its parent {parent} is not writable; the output is staged beside it")


def check_model_target(out: Path, *, beside: Collection[Path] = (), field: str | None = None) -> None:
    """Raise a `SettingError` unless a model may be saved at `out`: absent, empty, or a saved sentence-transformers
    model (it holds ``modules.json``) to overwrite; and not one of the folders in `beside` (another output of the
    same command), nor inside one of them, nor holding one. `field` as in `check_output_target`."""
    if out.exists() and not out.is_dir():
        raise _refused(out, field, "exists and is not a directory; pass a directory path")
    target = out.resolve()
    for other in beside:
        other = Path(other).resolve()
        if target == other or other in target.parents or target in other.parents:
            raise _refused(out, field, f"is or shares a folder with {other}, this command's other output; pass another")
    if out.is_dir() and any(out.iterdir()) and not (out / "modules.json").is_file():
        name = sorted(p.name for p in out.iterdir())[0]
        raise _refused(
            out,
            field,
            f"holds files that are not a saved model ({name}); pass a new or empty directory, or a model "
            "folder to overwrite",
        )
    try:
        out.mkdir(parents=True, exist_ok=True)  # now, so an unwritable place costs no computation
    except OSError as error:
        raise _refused(out, field, f"cannot write there ({error.strerror}); pass a writable directory") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise _refused(out, field, "cannot write there (permission denied); pass a writable directory")


def _ours(path: Path, replaceable: Collection[str]) -> bool:
    """A file of an earlier output set, or a temporary file an interrupted atomic write of one left behind."""
    if path.name in replaceable:
        return path.is_file()
    return path.is_file() and is_atomic_temp(path.name)


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths (Linux renameat2 with RENAME_EXCHANGE); False where that is unavailable."""
    libc_name = ctypes.util.find_library("c")
    if not libc_name:
        return False
    libc = ctypes.CDLL(libc_name, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is None:
        return False
    at_fdcwd = -100
    result = renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE)
    return bool(result == 0)


def _fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):  # not every file system lets a directory be fsynced
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_output_set(out: Path, files: Mapping[str, bytes], replaceable: Collection[str], *, what: str) -> Path:
    """Write `files` ({file name: bytes}) as the whole content of folder `out`, replacing an earlier set at once.

    `replaceable` names the files an earlier output set may hold (see `check_output_target`). Returns `out`.
    """
    out = Path(out)
    check_output_target(out, replaceable, what=what)
    out.resolve().parent.mkdir(parents=True, exist_ok=True)  # only now: a run refused earlier leaves no folder
    staging = Path(tempfile.mkdtemp(prefix=f"{_STAGING}{out.name}-new-", dir=out.resolve().parent))
    old: Path | None = None
    try:
        os.chmod(staging, 0o777 & ~_umask())  # mkdtemp makes 0700; results are meant to be read by others
        for name, data in files.items():
            if Path(name).name != name or name.startswith("."):
                raise SettingError("files", name, "an output file name must be a plain file name")
            with open(staging / name, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
        _fsync_dir(staging)
        with deferred_interrupts():
            if out.exists():
                if _exchange(staging, out):
                    old = staging  # after the exchange the staging path holds the old set
                else:
                    aside = staging.with_name(staging.name.replace("-new-", "-old-"))
                    os.rename(out, aside)
                    try:
                        os.rename(staging, out)
                    except BaseException:
                        os.rename(aside, out)  # put the old set back: never leave `out` missing
                        raise
                    old = aside
            else:
                os.rename(staging, out)
            _fsync_dir(out.resolve().parent)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return out


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


@contextlib.contextmanager
def deferred_interrupts() -> Iterator[None]:
    """Hold SIGINT/SIGTERM while the block runs, then act on them: nothing is lost, nothing is half-done. A
    signal the process ignores stays ignored.

    Outside the main thread signals cannot be handled here, and the block runs as it is.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    # a signal the process ignores (e.g. SIGINT inherited as ignored by a job started with `nohup … &`) stays ignored
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    previous = {sig: handler for sig, handler in previous.items() if handler is not signal.SIG_IGN}

    def hold(signum: int, frame: FrameType | None) -> None:
        received.append(signum)

    for sig in previous:
        signal.signal(sig, hold)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if received:
            signal.raise_signal(received[0])  # delivered now, to the handler that was in place


class InterruptGuard:
    """Ctrl-C for a long computation that never gets lost: the first SIGINT raises `KeyboardInterrupt` as
    usual; if a finaliser swallows it ("Exception ignored in …"), `check()` raises it again at the next
    checkpoint (the progress callbacks and before the output is written). A process that ignores SIGINT keeps
    ignoring it."""

    def __init__(self) -> None:
        self.pending = False
        self._previous: Any = None

    def __enter__(self) -> InterruptGuard:
        # an ignored SIGINT (inherited by a background job) stays ignored: never turned into a KeyboardInterrupt
        main = threading.current_thread() is threading.main_thread()
        if main and signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.pending = True
        raise KeyboardInterrupt

    def check(self) -> None:
        """Raise `KeyboardInterrupt` if a SIGINT arrived (and was swallowed somewhere) since the guard began."""
        if self.pending:
            raise KeyboardInterrupt


def prepare_out(out: str | os.PathLike[str], check: Callable[[Path], None] | None = None) -> Path:
    """Check, before any compute or model load, that a job can write `out`, and return it as a `Path`.

    The folder an output set is staged in (the parent of `out`) is made and a staging folder tried there; `check`
    is the output set's own check (e.g. one calling `check_output_target` with its file names and ``field="out"``),
    whose `SettingError` passes as it is. Without a `check`, `out` is a folder the job writes into: made now,
    refused when it is a file.

    Raises:
        SettingError: On ``out``, whatever the problem (a file, a folder that cannot be written, foreign files).
    """
    from lengthwise.core.errors import SettingError

    out = Path(out)
    try:
        parent = out.resolve().parent
        parent.mkdir(parents=True, exist_ok=True)
        if check is not None:
            check(out)
        elif out.exists() and not out.is_dir():
            raise SettingError("out", str(out), "exists and is not a directory; pass a directory path")
        else:
            out.mkdir(parents=True, exist_ok=True)
        Path(tempfile.mkdtemp(prefix=f"{_STAGING}probe-", dir=parent)).rmdir()  # the set is staged there
    except OSError as error:
        problem = f"cannot write there ({error.strerror}); pass a writable directory"
        raise SettingError("out", str(out), problem) from None
    return out
