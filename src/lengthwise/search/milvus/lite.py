"""A Milvus Lite database at a path, as `lengthwise.search.milvus.store.connect` opens it (docs/engines.md,
"A Milvus Lite database"):

- what is at the path is looked at before the engine starts (`check_path`, `check_tables`): nothing (made when new),
  an empty file, a database Milvus Lite made, or something else, refused in one line that says what it is (a user's
  SQLite file, a text file, a folder, a folder that is missing), so nothing is written into a file that is not one;
- lengthwise's own lock beside it (``NAME.lengthwise.lock``, `hold`), taken before the engine starts and held until
  the process exits, as the engine is (pymilvus stops it only then). Milvus Lite 2.5.1 locks the database with a file
  of its own, but a start that finds that file locked removes it, so the next start (another try, another process)
  opened the database too: two engines on one file;
- the engine started with a HOME of its own and its log kept out of the terminal (`quiet_start`), its own error
  named when it fails (`Start.said`).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import re
import shutil
import sqlite3
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from lengthwise.core.errors import SettingError
from lengthwise.search.milvus.client import MilvusClient

__all__ = ["LITE_ATTEMPTS", "open_client"]

GLOG_DIR = "GLOG_log_dir"  # glog's log folder (its flags are read from GLOG_<flag>, the flag's own case)
LITE_ATTEMPTS = 3  # starts of the engine before its error is reported (`_milvus_store.connect`)
LOCK_SUFFIX = ".lengthwise.lock"  # lengthwise's lock file beside a database: NAME.db.lengthwise.lock
SQLITE = b"SQLite format 3\x00"  # the first bytes of a SQLite database, which Milvus Lite 2.x keeps its data in
MILVUS_TABLE = "collection_meta"  # the table Milvus Lite 2.x makes in its SQLite database when it starts
LITE_NAME = re.compile(r"^[A-Za-z0-9._-]{1,36}$")  # a database file name Milvus Lite 2.x takes
BUSY = ("opened by another program", "another process holds the lock")  # the engine's words (2.x, 3.x) for a lock
GENERIC = ("Init milvus failed", "Start milvus-lite failed")  # the engine's errors that name no cause
ENGINE_ERROR = re.compile(r"^E\d{8} [\d:.]+\s+\d+ \S+\] (?:\[[^\]]*\])*(.+)$")  # one error line of the engine's log
NOTHING_WRITTEN = "; nothing was written to it: give a new path (made when new) or a database Milvus Lite made"
SEVERAL = "Milvus Lite opens a database in one process at a time: stop that process first, or serve several from a " \
          "Milvus server (http://host:19530)"  # fmt: skip
_HELD: dict[str, int] = {}  # a database's resolved path → the descriptor that holds its lock until this process exits
_LOCK = threading.Lock()  # one open at a time in this process (`open_client`): `_HELD`, HOME, file descriptor 2


def open_client(pymilvus: ModuleType, uri: str, kind: str) -> MilvusClient:
    """A `pymilvus.MilvusClient` on the Milvus Lite database at `uri` (made when new), served by an engine of `kind`
    (``lite``: 2.x, a SQLite file; ``lite-python``: 3.x, a folder). On this process's first open of `uri`: the path
    checked, the lock taken, another program's engine asked for, the tables read, then the engine started; later
    opens reach the same engine (pymilvus keeps it until the process exits). One open at a time in a process.

    Raises:
        SettingError: On ``uri``: what is there is not a Milvus Lite database, or cannot be one; another process
            has it open; the engine could not open it (its error named).
    """
    with _LOCK:
        check_path(uri, kind)
        made = hold(uri)
        if made is None:
            return _start(pymilvus, uri)
        try:
            if kind == "lite" and _engine_holds(uri):
                raise _refused(uri, busy("another program"))
            check_tables(uri)
            return _start(pymilvus, uri)
        except SettingError:
            release(uri, remove=made)
            raise


def _start(pymilvus: ModuleType, uri: str) -> MilvusClient:
    """The client, its engine started quietly (`quiet_start`), tried `LITE_ATTEMPTS` times: Milvus Lite's channel,
    throttled (gRPC GOAWAY) on a busy machine, can fail a first connect. Not tried again when the engine found the
    database open in another program: Milvus Lite 2.5.1 removes its lock file then, and the next try would open it."""
    error: Exception | None = None
    said: list[str] = []
    for attempt in range(LITE_ATTEMPTS):
        if attempt:
            time.sleep(0.5 * attempt)
        with quiet_start() as start:
            try:
                return pymilvus.MilvusClient(uri)
            except Exception as failed:  # pymilvus raises its own MilvusException, or ConnectionError/OSError
                error = failed
        if start.busy:
            raise _refused(uri, busy("another program"))
        said = start.said
    cause = Start(said).error() or f"{type(error).__name__}: {error}"
    raise _refused(uri, f"Milvus Lite could not open it ({cause})")


def check_path(uri: str, kind: str) -> None:
    """Refuse a path Milvus Lite of `kind` cannot open, or that holds something else, naming what is there, before
    anything is written. A SQLite file's tables are read later, under the lock (`check_tables`).

    Raises:
        SettingError: On ``uri``.
    """
    path = Path(uri)
    parent = path.absolute().parent
    if not parent.is_dir():
        raise _refused(uri, f"{parent} is a file, not a folder; give a path in a folder" if parent.exists() else
                       f"no folder {parent}; make it first, or give a path in a folder that exists")  # fmt: skip
    if kind == "lite" and not LITE_NAME.match(path.name):
        raise _refused(uri, "Milvus Lite takes a file name of at most 36 letters, digits, '.', '-' or '_'")
    if path.exists():
        problem = _folder_problem(path) if kind == "lite-python" else _file_problem(path)
        if problem:
            raise _refused(uri, problem + NOTHING_WRITTEN)


def _file_problem(path: Path) -> str | None:
    """Milvus Lite 2.x keeps a database in a SQLite file, made when new."""
    if path.is_dir():
        return "a folder, not a Milvus Lite database file"
    if not path.is_file():
        return "not a regular file, so not a Milvus Lite database"
    try:
        with path.open("rb") as opened:
            head = opened.read(len(SQLITE))
    except OSError as failed:
        return f"a file that cannot be read ({failed.strerror})"
    if head and head != SQLITE:  # an empty file holds nothing to lose (SQLite reads it as an empty database)
        return "a file that is not a Milvus Lite database (not a SQLite database)"
    return None


def _folder_problem(path: Path) -> str | None:
    """Milvus Lite 3.x keeps a database in a folder (``LOCK``, ``collections/``), made when new."""
    if not path.is_dir():
        return "a file, not a Milvus Lite database (Milvus Lite 3.x keeps one in a folder)"
    if any(path.iterdir()) and not (path / "collections").is_dir():
        return "a folder that is not a Milvus Lite database"
    return None


def check_tables(uri: str) -> None:
    """Refuse a SQLite file at `uri` without Milvus Lite 2.x's tables (read only, under `hold`'s lock, so no
    lengthwise engine writes it meanwhile). A file SQLite cannot read here is left to the engine.

    Raises:
        SettingError: On ``uri``: a SQLite database, not Milvus Lite's.
    """
    path = Path(uri).absolute()
    if not path.is_file() or path.stat().st_size == 0:
        return
    try:
        with contextlib.closing(sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=5)) as db:
            tables = sorted(row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
    except sqlite3.Error:  # a journal to roll back, a lock held elsewhere: the engine decides
        return
    if MILVUS_TABLE not in tables:
        named = (", ".join(tables[:3]) + (", …" if len(tables) > 3 else "")) if tables else "no tables"
        raise _refused(uri, f"a SQLite database without Milvus Lite's tables ({named}), not a Milvus Lite database"
                       + NOTHING_WRITTEN)  # fmt: skip


def _engine_holds(uri: str) -> bool:
    """Whether another program's Milvus Lite 2.x holds `uri` (its POSIX lock on ``.NAME.lock``), asked before this
    process starts an engine there, so that a start finding it held does not remove that program's lock file. Only
    asked where this process has no engine on `uri` (its first `hold`): closing the descriptor drops this process's
    POSIX locks on the file."""
    import fcntl

    path = Path(uri).absolute()
    try:
        fd = os.open(path.with_name(f".{path.name}.lock"), os.O_RDWR)  # none there: none held
    except OSError:
        return False
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


def hold(uri: str) -> bool | None:
    """Lock `uri` for this process until it exits (`fcntl.flock` on ``NAME.lengthwise.lock`` beside it, which keeps
    this process's id). Returns whether the lock file was made here (`release` removes it then), or None when this
    process holds it already. Where there is no `fcntl` (Windows, which gets Milvus Lite 3.x), the engine's own lock,
    which 3.x keeps, is the one. Called under `_LOCK`.

    Raises:
        SettingError: On ``uri``: another process holds it (its id named), or no lock file can be made there.
    """
    path = Path(uri).absolute()
    if str(path.resolve()) in _HELD:
        return None
    try:
        import fcntl
    except ImportError:
        return False
    lock = path.with_name(path.name + LOCK_SUFFIX)
    made = not lock.exists()
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as failed:
        raise _refused(uri, f"cannot make its lock file {lock} ({failed.strerror}); give a path in a folder this "
                       "process can write to") from None  # fmt: skip
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = os.read(fd, 32).decode(errors="replace").strip()
        os.close(fd)
        raise _refused(
            uri, busy(f"another process (pid {holder})" if holder.isdigit() else "another process")
        ) from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    _HELD[str(path.resolve())] = fd
    return made


def release(uri: str, remove: bool) -> None:
    """Give up this process's lock on `uri` (refused after `hold`), removing the lock file if `remove` (under
    `_LOCK`)."""
    path = Path(uri).absolute()
    fd = _HELD.pop(str(path.resolve()), None)
    if fd is not None:
        if remove:
            path.with_name(path.name + LOCK_SUFFIX).unlink(missing_ok=True)
        os.close(fd)


def busy(who: str) -> str:
    """The refusal of a database open in `who` (another process, another program)."""
    return f"open in {who}; {SEVERAL}"


@dataclass
class Start:
    """What the engine said while it started: the error lines of its own log, then milvus-lite's log records."""

    said: list[str] = field(default_factory=list)

    @property
    def busy(self) -> bool:
        """Whether it found the database open in another program (its own lock held)."""
        return any(words in line for line in self.said for words in BUSY)

    def error(self) -> str | None:
        """Its first error that names a cause (not "Init milvus failed", "Start milvus-lite failed"), or None."""
        return next((line for line in self.said if not line.endswith(GENERIC)), None)


@contextlib.contextmanager
def quiet_start() -> Iterator[Start]:
    """While an embedded Milvus Lite starts: HOME set to a new folder of its own, its log lines kept out of the
    terminal, and what it said collected in the `Start` yielded (filled when the block ends).

    HOME: Milvus Lite 2.5.1 makes ``~/.cache/milvus`` when it starts and removes it when it stops, so two engines
    started about together under one HOME broke each other (one then refused every collection: "Mmap manager has not
    been init"). The folder stays empty but for the engine's logs (its stderr and glog's files, `_home`), and is
    removed when this process exits. Another
    thread reading HOME, or writing to the process's stderr, in that half second would see the folder or write to the
    log: `connect` runs where an index opens, not while searching.

    Log: the engine's process keeps the stderr it starts with, so it is started with file descriptor 2 on a log file
    in that folder (its ``E2026… Init milvus failed`` lines went to the terminal), and milvus-lite's own log records
    (the root logger's "Start milvus-lite failed") are caught.
    """
    home = tempfile.mkdtemp(prefix="lengthwise-milvus-home-")
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    start, log = Start(), Path(home) / "milvus-lite.log"
    caught = _EngineRecords()
    loggers = [logging.getLogger(), logging.getLogger("milvus_lite.server_manager")]  # 2.x's, 3.x's
    for logger in loggers:
        logger.addFilter(caught)
    try:
        with _home(home), _stderr_to(log):
            yield start
    finally:
        for logger in loggers:
            logger.removeFilter(caught)
        start.said = [*_engine_errors(log), *caught.messages]


@contextlib.contextmanager
def _home(home: str) -> Iterator[None]:
    """HOME, and the engine's log folder (glog's ``GLOG_log_dir``, unless the user set one), on `home` for the
    block: without it Milvus Lite wrote a log file into the system's temporary folder at every start, and left it."""
    names = ["HOME"] + ([] if os.environ.get(GLOG_DIR) else [GLOG_DIR])
    before = {name: os.environ.get(name) for name in names}
    os.environ.update(dict.fromkeys(names, home))
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def _stderr_to(log: Path) -> Iterator[None]:
    """File descriptor 2 on `log` for the block (nothing where the process has no stderr)."""
    try:
        saved = os.dup(2)
    except OSError:
        yield
        return
    if sys.stderr is not None:
        sys.stderr.flush()
    with log.open("ab") as out:
        os.dup2(out.fileno(), 2)
    try:
        yield
    finally:
        if sys.stderr is not None:
            sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


class _EngineRecords(logging.Filter):
    """milvus-lite's log records, kept from every handler and collected (message, and the error of a traceback)."""

    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def filter(self, record: logging.LogRecord) -> bool:
        if f"{os.sep}milvus_lite{os.sep}" not in record.pathname:
            return True
        error = record.exc_info[1] if record.exc_info else None
        self.messages.append(record.getMessage() + (f": {error}" if error else ""))
        return False


def _engine_errors(log: Path) -> list[str]:
    """The messages of the error lines in the engine's log (glog: ``E20261205 06:58:55.02 6837 f.cpp:65] [..]msg``)."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return []
    return [found.group(1).strip() for line in lines if (found := ENGINE_ERROR.match(line))]


def _refused(uri: str, problem: str) -> SettingError:
    return SettingError("uri", uri, problem)
