"""Issue 50, the Milvus backend on the command line (`--backend milvus --uri U --name N` on `index build`, `search`,
`serve`): each wrong combination of the flags ends in one line naming the flag (exit 2) before any model loads or
anything is built, a search never makes a Milvus Lite database, a name that is not served is one line (no pymilvus
traceback), a wrong BM25 granularity is refused before the Milvus Lite file is made, and an index loaded into an
embedded Milvus (BM25 at both granularities, the default) is searched."""

from __future__ import annotations

import json
import os
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
]  # fmt: skip
