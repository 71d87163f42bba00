"""Bad inputs and faults for hybrid search (issue 35): the text an index is built with, the search mode, stop-word
queries and passages. Each must end in one clear line (exit 2) or a right result, and touch nothing the user owns.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from reliability_cases import Case, Context
from reliability_cases.longdoc import _cli, _encoded, _indexed


def _changed_corpus(tmp: Path, context: Context) -> None:
    """An encoded folder, and a copy of its corpus with one document's text changed."""
    _encoded(tmp, context)
    rows = [json.loads(line) for line in (tmp / "c.jsonl").read_text().splitlines()]
    rows[2]["text"] += " and a new sentence"
    (tmp / "changed.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


def _short_corpus(tmp: Path, context: Context) -> None:
    _encoded(tmp, context)
    lines = (tmp / "c.jsonl").read_text().splitlines()
    (tmp / "short.jsonl").write_text("\n".join(lines[1:]) + "\n", encoding="utf-8")


def _without_text(tmp: Path, context: Context) -> None:
    """An index whose recorded corpus was deleted before it was built: dense only."""
    _encoded(tmp, context)
    (tmp / "c.jsonl").unlink()
    _cli(tmp, context, ["index", "build", "{tmp}/e", "--out", "{tmp}/i"])


_STOP_LEXICAL = """
import sys
import lengthwise as lw
from lengthwise.search.lexical import shards as _bm25_build

def stop(*args, **kwargs):
    raise KeyboardInterrupt

_bm25_build._write_bm25 = stop  # Ctrl-C once the lexical build has tokenized every shard
try:
    lw.LongIndex.build(sys.argv[1], sys.argv[2], granularity=sys.argv[3])
except KeyboardInterrupt:
    pass
"""


def _stopped_in_the_lexical_build(tmp: Path, granularity: str) -> None:
    """`index build e --out i` stopped by Ctrl-C in its lexical part (in a setup process)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    subprocess.run([sys.executable, "-c", _STOP_LEXICAL, str(tmp / "e"), str(tmp / "i"), granularity], check=True,
                   cwd=tmp, env=env, capture_output=True)  # fmt: skip
    if not (tmp / ".i-building" / ".lexical-building" / "build.json").is_file():
        raise RuntimeError("setup: the stopped build left no lexical staging to resume")


def _stopped_build(tmp: Path, context: Context) -> None:
    """A build stopped in its lexical part, and the inode of its finished dense engine."""
    _encoded(tmp, context)
    _stopped_in_the_lexical_build(tmp, "document")
    (tmp / "engine.inode").write_text(str((tmp / ".i-building" / "engine.usearch").stat().st_ino))


def _other_granularity() -> str:
    from lengthwise.core.fusion import LEXICAL_GRANULARITY

    return "document" if LEXICAL_GRANULARITY == "window" else "window"


def _stopped_rebuild(tmp: Path, context: Context) -> None:
    """An index (the default granularity), then a rebuild of it with the other granularity stopped in its lexical
    part."""
    _indexed(tmp, context)
    _stopped_in_the_lexical_build(tmp, _other_granularity())


def _resumed(tmp: Path, _: str) -> str | None:
    from lengthwise.facade import LongIndex
    from lengthwise.search.local.files import served_files

    if (served_files(tmp / "i") / "engine.usearch").stat().st_ino != int((tmp / "engine.inode").read_text()):
        return "the dense engine was built again"
    if LongIndex.open(tmp / "i").lexical is None:
        return "the index has no lexical side"
    return "the staging folder is left" if (tmp / ".i-building").exists() else None


def _earlier_served(tmp: Path, _: str) -> str | None:
    from lengthwise.search.local.files import served_files

    granularity = json.loads((served_files(tmp / "i") / "lexical" / "lexical.json").read_text())["granularity"]
    if granularity == _other_granularity():
        return f"the index at i is the stopped build's ({granularity})"
    return None if (tmp / ".i-building").is_dir() else "the stopped build's staging is gone (nothing to resume)"


def _no_index(folder: str):
    def check(tmp: Path, _: str) -> str | None:
        return None if not (tmp / folder).exists() else f"{folder} was written"

    return check


def _passages(tmp: Path, output: str) -> str | None:
    line = next((line for line in output.splitlines() if line.startswith("{")), None)
    if line is None:
        return "no JSON line"
    hits = json.loads(line)["hits"]
    source = {json.loads(r)["_id"]: json.loads(r)["text"] for r in (tmp / "c.jsonl").read_text().splitlines()}
    for hit in hits:
        for passage in hit.get("passages", []):
            if source[hit["id"]][passage["start"] : passage["end"]] != passage["text"]:
                return f"passage {passage} is not the text at its span"
    return None if hits and all(hit.get("passages") for hit in hits) else f"hits without passages: {hits}"


_BUILD = ["index", "build", "{tmp}/e", "--out", "{tmp}/i"]
CASES: list[Case] = [
    Case(
        "index-build-text-changed",
        "35",
        [*_BUILD, "--text", "{tmp}/changed.jsonl"],
        2,
        "are not the ones encoded",
        _changed_corpus,
        _no_index("i"),
    ),
    Case(
        "index-build-text-missing-a-document",
        "35",
        [*_BUILD, "--text", "{tmp}/short.jsonl"],
        2,
        "are not the ones encoded",
        _short_corpus,
        _no_index("i"),
    ),
    Case(
        "index-build-text-not-a-file",
        "35",
        [*_BUILD, "--text", "{tmp}/nowhere.jsonl"],
        2,
        "nowhere.jsonl: no such corpus file",
        _encoded,
        _no_index("i"),
    ),
    Case(
        "index-build-unknown-granularity",
        "35",
        [*_BUILD, "--granularity", "sentence"],
        2,
        "--granularity 'sentence': use one of document, window, both",
        _encoded,
        _no_index("i"),
    ),
    Case(
        "index-build-recorded-corpus-gone",
        "35",
        _BUILD,
        0,
        "built without text",
        lambda tmp, ctx: (_encoded(tmp, ctx), (tmp / "c.jsonl").unlink()),
    ),
    Case(
        "index-build-resumes-a-stopped-lexical-build",
        "35.6",
        _BUILD,
        0,
        "indexed",
        _stopped_build,
        _resumed,
    ),
    Case(
        "search-an-index-whose-rebuild-stopped-in-its-lexical-build",
        "35.6",
        ["search", "{tmp}/i", "--query", "bridge", "--mode", "lexical", "--json"],
        0,
        '"hits"',
        _stopped_rebuild,
        _earlier_served,
    ),
    Case(
        "search-hybrid-without-text",
        "35",
        ["search", "{tmp}/i", "--query", "bridge", "--mode", "hybrid"],
        2,
        "was built without its documents' text",
        _without_text,
    ),
    Case(
        "search-unknown-mode",
        "35",
        ["search", "{tmp}/i", "--query", "bridge", "--mode", "sparse"],
        2,
        "--mode 'sparse': use dense, lexical or hybrid",
        _indexed,
    ),
    Case(
        "search-lexical-stop-words-only",
        "35",
        ["search", "{tmp}/i", "--query", "the and of it", "--mode", "lexical"],
        2,
        "holds no word the documents hold",
        _indexed,
    ),
    Case(
        "search-hybrid-passages",
        "35",
        ["search", "{tmp}/i", "--query", "the old bridge", "--top-k", "2", "--passages", "1", "--json"],
        0,
        "passages",
        _indexed,
        _passages,
    ),
    Case(
        "search-negative-passages",
        "35",
        ["search", "{tmp}/i", "--query", "bridge", "--passages", "-1"],
        2,
        "Invalid value for '--passages'",
        _indexed,
    ),
    Case(
        "search-zero-depth",
        "35",
        ["search", "{tmp}/i", "--query", "bridge", "--mode", "hybrid", "--depth", "0"],
        2,
        "Invalid value for '--depth'",
        _indexed,
    ),
    Case(
        "search-unknown-query-precision",
        "48",
        ["search", "{tmp}/i", "--query", "bridge", "--precision", "half"],
        2,
        "--precision 'half': use auto, fp32, bf16, fp16 or int8",
        _indexed,
    ),
    Case(
        "search-int8-queries-on-an-fp32-index",
        "48",
        ["search", "{tmp}/i", "--query", "bridge", "--precision", "int8", "--json"],
        0,
        '"hits"',
        _indexed,
    ),
    Case(
        "eval-index-unknown-query-precision",
        "48",
        ["eval", "-t", "retrieval", "-d", "{tmp}", "--index", "{tmp}/i", "-o", "{tmp}/out", "--precision", "fp8"],
        2,
        "--precision 'fp8': use auto, fp32, bf16, fp16 or int8",
        _indexed,
        lambda tmp, _: "wrote an output folder" if (tmp / "out").exists() else None,
    ),
]
