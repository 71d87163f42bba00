"""An index folder's generations: each build's files in a folder of their own, switched in by one atomic rename.

An index folder holds ``index.json`` and one folder per generation, ``generation-{id}`` (the vectors, ids,
offsets, members, engine and ``lexical/``). ``index.json`` holds the index's settings and the id of the generation
it serves (`GENERATION`); the lexical side's ``lexical.json`` holds the same id. A build writes its generation in a
staging folder beside the index, renames it into the index folder, then renames its ``index.json`` over the index
folder's (`publish`): a reader reads ``index.json`` once, and everything it opens after that, the lexical side
included when it is opened later, comes from the generation it names (`hold`). Nothing a reader reads is ever
written in place, so an open index answers from one generation, whatever builds run beside it.

A generation that ``index.json`` no longer names is removed by the build that replaced it, right after the switch, when
no reader holds it (else by a later build): each reader keeps a shared lock (``flock``) on the generation's `READERS`
file while the index is open, and the build removes a generation only under an exclusive one. Where the system has no
``flock`` (Windows), no build can know that no reader holds an old generation, and old generations stay (delete them by
hand). A reader that finds its generation gone all the same is told in one line to open the index again (`rebuilt`). The
lock is the standard library's ``fcntl.flock``: shared and exclusive locks on one file, released by the kernel when a
process dies, which the file-lock libraries (``filelock``: exclusive only) do not offer together.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Final

from lengthwise.core.errors import LongDocError, SettingError

if TYPE_CHECKING:
    from lengthwise.search.types import IndexSettings

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "GENERATION",
    "INDEX_FILE",
    "MARKER",
    "Hold",
    "check_marked",
    "generation_folder",
    "hold",
    "is_generation",
    "mark",
    "new_generation",
    "publish",
    "rebuilt",
]

INDEX_FILE = "index.json"
GENERATION: Final = "generation"  # the key of the generation's id in index.json and lexical.json
PREFIX = f"{GENERATION}-"  # a generation's folder in the index folder: generation-{id}
READERS = "readers.lock"  # in a generation: each open index holds a shared lock on it
MARKER = ".lengthwise-staging"  # in a staging folder: lengthwise made it, and may remove it
OPEN_ATTEMPTS = 20  # reads of index.json by one `hold` while builds keep replacing it


def new_generation() -> str:
    """A new generation id: the UTC time and 8 random hex digits (``20261128T091500-1a2b3c4d``)."""
    return f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{secrets.token_hex(4)}"


def generation_folder(index: Path, generation: str) -> Path:
    """The folder of generation `generation` in the index folder `index`."""
    return index / f"{PREFIX}{generation}"


def is_generation(name: str) -> bool:
    """Whether `name` is a generation's folder name."""
    return name.startswith(PREFIX)


def rebuilt(index: Path, generation: str) -> LongDocError:
    """The one-line error of a reader whose generation was removed by a later build."""
    return LongDocError(None, None, f"{index} was rebuilt since it was opened (its generation {generation} is gone); "
                        "open it again")  # fmt: skip


def mark(staging: Path) -> None:
    """Mark `staging` as a folder lengthwise made (`check_marked` then lets a build remove it)."""
    (staging / MARKER).write_text(json.dumps({"made_by": "lengthwise"}), encoding="utf-8")


def check_marked(folder: Path, out: Path) -> None:
    """A `SettingError` on ``out`` when `folder` (a staging folder's place beside `out`) exists without the
    `MARKER` lengthwise puts in the folders it makes: it is someone else's, and a build never removes it."""
    if (folder.exists() or folder.is_symlink()) and not (folder.is_dir() and (folder / MARKER).is_file()):
        raise SettingError("out", str(out), f"{folder} is in the way of the build's staging folder and lengthwise did "
                           "not make it; move it, or pass another folder")  # fmt: skip


class Hold:
    """A reader's shared lock on one generation: while it is held, no build removes that generation."""

    def __init__(self, handle: IO[bytes]) -> None:
        self._release = weakref.finalize(self, handle.close)  # closed when the index is garbage-collected

    def release(self) -> None:
        """Let builds remove the generation (also done when the hold is garbage-collected)."""
        self._release()


def _take(folder: Path) -> Hold | None:
    """A shared lock on the generation at `folder`, or None when it is gone or being removed."""
    try:
        handle = open(folder / READERS, "rb")  # noqa: SIM115  (kept open while the index is)
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        if fcntl is not None:
            fcntl.flock(handle.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        if os.path.samestat(os.fstat(handle.fileno()), os.stat(folder / READERS)):  # not removed meanwhile
            return Hold(handle)
    except OSError:  # locked by a build removing it, or removed after the open
        pass
    handle.close()
    return None


def hold(index: Path, read: Callable[[Path], IndexSettings]) -> tuple[IndexSettings, Path, Hold]:
    """The settings of the index folder `index`, the folder of the generation they name and a `Hold` on it.

    `read` reads ``index.json`` (a `LongDocError` when there is none, or it is unreadable). A build that switches
    generations between the read and the lock is seen (its old generation is gone, or locked for removal) and
    ``index.json`` is read again."""
    for attempt in range(OPEN_ATTEMPTS):
        settings = read(index)
        files = generation_folder(index, settings[GENERATION])
        held = _take(files)
        if held is not None:
            return settings, files, held
        time.sleep(0.005 * attempt)
    if read(index)[GENERATION] == settings[GENERATION]:
        raise LongDocError(None, None, f"{index}: unreadable index ({files.name} is missing); build it again with "
                           "`lengthwise index build`")  # fmt: skip
    raise LongDocError(None, None, f"{index} was rebuilt again and again while it was being opened; open it again")


def publish(staging: Path, out: Path, generation: str, old_names: frozenset[str]) -> None:
    """Serve the finished generation in `staging` (its ``index.json`` naming `generation`) from the index folder
    `out`: renamed into it, then its ``index.json`` renamed over the folder's (the one switch a reader sees). Then
    the generations no reader holds are removed, and what an index of an earlier layout kept in `out` itself
    (`old_names`)."""
    (staging / READERS).touch()
    out.mkdir(exist_ok=True)
    folder = generation_folder(out, generation)
    os.rename(staging, folder)
    (folder / MARKER).unlink(missing_ok=True)  # a generation now, no more a staging folder
    os.replace(folder / INDEX_FILE, out / INDEX_FILE)
    _remove_unheld(out, folder.name)
    for name in old_names:
        path = out / name
        shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)


def _remove_unheld(out: Path, current: str) -> None:
    """Remove each generation in `out` but `current` that no reader holds (none, without ``flock``: they stay)."""
    if fcntl is None:  # pragma: no cover - Windows: no way to know that no reader holds it
        return
    for folder in out.iterdir():
        if not is_generation(folder.name) or folder.name == current or not folder.is_dir():
            continue
        try:
            handle = open(folder / READERS, "rb")  # noqa: SIM115
        except FileNotFoundError:  # a removal stopped half-way
            shutil.rmtree(folder, ignore_errors=True)
            continue
        with handle:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # a reader still holds it: the next build removes it
            shutil.rmtree(folder, ignore_errors=True)
