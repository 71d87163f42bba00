"""Issue 50, the Milvus backend on the command line (`--backend milvus --uri U --name N` on `index build`, `search`,
`serve`): each wrong combination of the flags ends in one line naming the flag (exit 2) before any model loads or
anything is built, a search never makes a Milvus Lite database, a name that is not served is one line (no pymilvus
traceback), a wrong BM25 granularity is refused before the Milvus Lite file is made, and an index loaded into an
embedded Milvus (BM25 at both granularities, the default) is searched.

Issue 62: an existing file at ``--uri`` that is not a Milvus Lite database (a user's SQLite database, a text file) is
refused before anything is written, and left as it was; a folder, a missing folder or one where no file can be made
is named as what it is, with none of the engine's log lines; a second process is refused while one holds the
database; a Milvus command prints nothing but its answer (no pkg_resources warning)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from reliability_cases import Case, Context

SEARCH = ["search", "--query", "the old bridge"]


def _run(tmp: Path, argv: list[str], context: Context) -> None:
    """Run `lengthwise` (in `tmp`) in a setup; raise if it fails."""
    argv = [part.format(tmp=tmp, tiny=context.tiny_model) for part in argv]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "lengthwise.cli", *argv], cwd=tmp, env=env, capture_output=True,
                          text=True)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"setup `lengthwise {' '.join(argv)}` failed: {done.stdout}{done.stderr}")


def _encoded(tmp: Path, context: Context) -> None:
    rows = [(f"d{i}", f"document {i} about the river and the old bridge {i}") for i in range(6)]
    (tmp / "c.jsonl").write_text("".join(json.dumps({"_id": i, "text": t}) + "\n" for i, t in rows), encoding="utf-8")
    _run(tmp, ["encode", "-d", "c.jsonl", "-o", "e", "-m", "{tiny}", "--long", "multi-vector", "--window", "16"],
         context)  # fmt: skip


def _loaded(tmp: Path, context: Context) -> None:
    _encoded(tmp, context)
    _run(tmp, ["index", "build", "e", "--out", "i", "--backend", "milvus", "--uri", "m.db", "--name", "docs"], context)


def _no(name: str):
    def check(tmp: Path, _: str) -> str | None:
        return f"{name} was made" if (tmp / name).exists() else None

    return check


def _none_made(*names: str):
    def check(tmp: Path, _: str) -> str | None:
        made = [name for name in names if (tmp / name).exists()]
        return f"{', '.join(made)} made" if made else None

    return check


def _blocked(module: str):
    """A setup: `module` made unimportable for the case (a file of its name first on the path, in the cwd)."""

    def setup(tmp: Path, _: Context) -> None:
        message = f"No module named {module!r}"
        (tmp / f"{module}.py").write_text(f"raise ModuleNotFoundError({message!r}, name={module!r})\n")

    return setup


def _hits(_: Path, output: str) -> str | None:
    rows = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    if len(rows) != 1 or len(rows[0]["hits"]) != 3:
        return f"expected one query with 3 hits, got {output[:200]!r}"
    return None


HOLD = """
import sys, time
from pathlib import Path
from lengthwise.search.milvus.store import connect
client = connect(sys.argv[1])
print("held", flush=True)
stop = time.monotonic() + 300
while Path(sys.argv[1]).exists() and time.monotonic() < stop:  # until the case's folder is removed
    time.sleep(0.2)
"""
NOISE = ("pkg_resources", "Init milvus failed", "Open ", "Start milvus-lite")  # the engine's lines, its warning


def _users_sqlite(tmp: Path, context: Context) -> None:
    """A user's own SQLite database at app.db (a copy kept to compare), and an encoded corpus."""
    _encoded(tmp, context)
    with sqlite3.connect(tmp / "app.db") as db:
        db.execute("CREATE TABLE users (id INTEGER, name TEXT)")
        db.execute("INSERT INTO users VALUES (1, 'ann')")
    (tmp / "app.copy").write_bytes((tmp / "app.db").read_bytes())


def _notes(tmp: Path, _: Context) -> None:
    (tmp / "notes.db").write_text("my notes\n", encoding="utf-8")
    (tmp / "notes.copy").write_text("my notes\n", encoding="utf-8")


def _folder(tmp: Path, _: Context) -> None:
    (tmp / "f.db").mkdir()


def _as_it_was(name: str, *absent: str):
    """A check: `name` unchanged (its copy beside it), and nothing else made (`absent`, no lock file)."""

    def check(tmp: Path, _: str) -> str | None:
        if (tmp / name).read_bytes() != (tmp / name).with_suffix(".copy").read_bytes():
            return f"{name} was written to"
        made = [n for n in (*absent, f"{name}.lengthwise.lock", f".{name}.lock") if (tmp / n).exists()]
        return f"{', '.join(made)} made" if made else None

    return check


def _held(tmp: Path, context: Context) -> None:
    """An index loaded into m.db as docs, then m.db held by another process until the case's folder is removed."""
    _loaded(tmp, context)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp / "m.db")], cwd=tmp, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)  # fmt: skip
    if holder.stdout is None or holder.stdout.readline().strip() != "held":
        raise RuntimeError("setup: the holding process did not open m.db")


def _quiet(*absent: str):
    """A check: nothing in `absent` made, and none of the engine's own lines (its log, milvus-lite's warning)."""

    def check(tmp: Path, output: str) -> str | None:
        made = [name for name in absent if (tmp / name).exists()]
        noise = [words for words in NOISE if words in output]
        return f"{', '.join(made)} made" if made else f"printed {noise}" if noise else None

    return check


def _only_json(tmp: Path, output: str) -> str | None:
    other = [line for line in output.splitlines() if line.strip() and not line.startswith("{")]
    return f"printed {other[:2]}" if other else _hits(tmp, output)


CASES = [
    Case("milvus-search-without-uri", "50", [*SEARCH, "--backend", "milvus"], 2,
         "--uri: --backend milvus needs the Milvus to use", timeout=60),
    Case("milvus-uri-with-the-local-backend", "50", [*SEARCH, "{tmp}/i", "--uri", "{tmp}/m.db"], 2,
         "add --backend milvus, or leave it out", timeout=60),
    Case("milvus-folder-and-milvus", "50", [*SEARCH, "{tmp}", "--backend", "milvus", "--uri", "{tmp}/m.db"], 2,
         "leave the folder out", timeout=60),
    Case("milvus-lite-file-missing", "50", [*SEARCH, "--backend", "milvus", "--uri", "{tmp}/none.db"], 2,
         "no such Milvus Lite database", check=_no("none.db"), timeout=60),
    Case("milvus-lite-path-not-db", "50", [*SEARCH, "--backend", "milvus", "--uri", "{tmp}/plain"], 2,
         "ends in .db", check=_no("plain"), timeout=60),
    Case("milvus-without-pymilvus", "50", [*SEARCH, "--backend", "milvus", "--uri", "http://127.0.0.1:9"], 2,
         "pip install 'lengthwise[milvus]'", _blocked("pymilvus"), timeout=60),
    Case("milvus-build-no-server", "50", ["index", "build", "{tmp}/e", "--out", "{tmp}/i", "--backend", "milvus",
                                          "--uri", "http://127.0.0.1:9"], 2, "--uri 'http://127.0.0.1:9'",
         _encoded, _no("i")),
    Case("milvus-build-bad-granularity", "50", ["index", "build", "{tmp}/e", "--out", "{tmp}/i", "--backend",
                                                "milvus", "--uri", "{tmp}/m.db", "--granularity", "sentence"], 2,
         "--granularity 'sentence': use one of document, window, both", _encoded, _none_made("i", "m.db")),
    Case("milvus-name-not-served", "50", [*SEARCH, "--backend", "milvus", "--uri", "{tmp}/m.db", "--name", "other"],
         2, "no index is served as 'other'", _loaded),
    Case("milvus-serve-workers-on-lite", "50", ["serve", "--backend", "milvus", "--uri", "{tmp}/m.db", "--workers",
                                                "2"], 2, "a Milvus Lite database is opened by one process", _loaded),
    Case("milvus-search-json", "50", [*SEARCH, "--backend", "milvus", "--uri", "{tmp}/m.db", "--name", "docs",
                                      "--top-k", "3", "--json"], 0, "hits", _loaded, _hits),
    Case("milvus-uri-users-sqlite-database", "62.3", ["index", "build", "{tmp}/e", "--out", "{tmp}/i",
                                                     "--backend", "milvus", "--uri", "{tmp}/app.db"], 2,
         "a SQLite database without Milvus Lite's tables (users)", _users_sqlite, _as_it_was("app.db", "i")),
    Case("milvus-uri-text-file", "62.3", [*SEARCH, "--backend", "milvus", "--uri", "{tmp}/notes.db"], 2,
         "not a SQLite database", _notes, _as_it_was("notes.db"), timeout=60),
    Case("milvus-uri-folder", "62.6", [*SEARCH, "--backend", "milvus", "--uri", "{tmp}/f.db"], 2,
         "a folder, not a Milvus Lite database file", _folder, _quiet("f.db.lengthwise.lock"), timeout=60),
    Case("milvus-uri-missing-folder", "62.6", ["index", "build", "{tmp}/e", "--out", "{tmp}/i", "--backend", "milvus",
                                               "--uri", "{tmp}/none/m.db"], 2, "; make it first",
         _encoded, _quiet("i", "none")),
    Case("milvus-uri-in-proc", "62.6", ["index", "build", "{tmp}/e", "--out", "{tmp}/i", "--backend", "milvus",
                                        "--uri", "/proc/m.db"], 2,
         "cannot make its lock file /proc/m.db.lengthwise.lock", _encoded, _quiet("i")),
    Case("milvus-lite-second-process", "62.4", ["index", "build", "{tmp}/e", "--out", "{tmp}/i2", "--backend",
                                                "milvus", "--uri", "{tmp}/m.db", "--name", "docs"], 2,
         "open in another process (pid", _held, _quiet("i2")),
    Case("milvus-search-prints-only-its-answer", "62.10", [*SEARCH, "--backend", "milvus", "--uri", "{tmp}/m.db",
                                                           "--name", "docs", "--top-k", "3", "--json"], 0, "hits",
         _loaded, _only_json),
]  # fmt: skip
