"""Bad inputs and faults for the long-document surfaces (issue 21.3): `longdoc synth|eval|tune|save`, `encode`,
`index build`, `search`, and `train --recipe`. Each must end in one clear line (exit 2) or a right result, and
leave what was already there as it was.

Cases that must fail before any computing name a model that does not exist (`NO_MODEL`) where the check comes
before the model loads.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from reliability_cases import Case, Context

NO_MODEL = "/nonexistent/lengthwise-model"
HAYSTACK = Path(__file__).resolve().parents[2] / "tests" / "longdoc" / "prose.txt"
_SMALL = ["--lengths", "48,96", "--per-length", "2"]


def _cli(tmp: Path, context: Context, argv: list[str]) -> None:
    """Run `lengthwise` in a setup (a task, shards, an index to work on); raise if it fails."""
    argv = [part.format(tmp=tmp, tiny=context.tiny_model) for part in argv]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "lengthwise.cli", *argv], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"setup `lengthwise {' '.join(argv)}` failed: {done.stdout}{done.stderr}")


def _corpus(tmp: Path, count: int = 6, ids: list[str] | None = None) -> None:
    ids = ids or [f"d{i}" for i in range(count)]
    rows = [{"_id": i, "text": f"document {i} about the river and the old bridge {n}"} for n, i in enumerate(ids)]
    (tmp / "c.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


def _task(tmp: Path, context: Context) -> None:
    _cli(tmp, context, ["longdoc", "synth", "-t", "passkey", "--haystack", str(HAYSTACK), "-o", "{tmp}/task",
                        "-m", "{tiny}", *_SMALL])  # fmt: skip


def _notes(tmp: Path, name: str = "mine") -> None:
    (tmp / name).mkdir(exist_ok=True)
    (tmp / name / "notes.txt").write_text("keep me\n", encoding="utf-8")


def _encoded(tmp: Path, context: Context) -> None:
    _corpus(tmp)
    _cli(tmp, context, ["encode", "-d", "{tmp}/c.jsonl", "-o", "{tmp}/e", "-m", "{tiny}", "--long", "multi-vector",
                        "--window", "16"])  # fmt: skip


def _indexed(tmp: Path, context: Context) -> None:
    _encoded(tmp, context)
    _cli(tmp, context, ["index", "build", "{tmp}/e", "--out", "{tmp}/i"])


def _damaged_shard(tmp: Path, context: Context) -> None:
    _encoded(tmp, context)
    shard = tmp / "e" / "w0-00000.npy"
    shard.write_bytes(shard.read_bytes()[:200])


def _file(name: str, text: str):
    def setup(tmp: Path, _: Context) -> None:
        (tmp / name).write_text(text, encoding="utf-8")

    return setup


# --- checks ----------------------------------------------------------------------------------------------------


def _kept(tmp: Path, _: str) -> str | None:
    names = sorted(p.name for p in (tmp / "mine").iterdir())
    return None if names == ["notes.txt"] else f"the user's folder now holds {names}"


def _nothing_in(folder: str):
    def check(tmp: Path, _: str) -> str | None:
        path = tmp / folder
        return None if not path.exists() or not any(path.iterdir()) else f"{folder} holds {os.listdir(path)}"

    return check


def _six_vectors(tmp: Path, _: str) -> str | None:
    from lengthwise.longdoc.storage.store import read_embeddings

    ids = read_embeddings(tmp / "e")[0]
    return None if sorted(ids) == [f"d{i}" for i in range(6)] else f"the shards hold {ids}, not d0…d5 once each"


def _json_hits(tmp: Path, output: str) -> str | None:
    line = next((line for line in output.splitlines() if line.startswith("{")), None)
    if line is None:
        return "no JSON line"
    hits = json.loads(line)["hits"]
    return None if len(hits) == 3 and hits[0]["score"] >= hits[-1]["score"] else f"hits not 3, best first: {hits}"


_SYNTH = ["longdoc", "synth", "-t", "passkey", "--haystack", str(HAYSTACK), "-m", "{tiny}", *_SMALL]
_EVAL = ["longdoc", "eval", "-d", "{tmp}/task", "-m", "{tiny}", "-o", "{tmp}/ev"]
_TUNE = ["longdoc", "tune", "-d", "{tmp}/task", "-m", "{tiny}", "-o", "{tmp}/tune", "--windows", "16",
         "--strategies", "chunk-mean"]  # fmt: skip
_ENCODE = ["encode", "-d", "{tmp}/c.jsonl", "-m", "{tiny}"]

CASES: list[Case] = [
    Case("longdoc-synth-empty-haystack", "21.3",
         ["longdoc", "synth", "-t", "passkey", "--haystack", "{tmp}/blank.txt", "-o", "{tmp}/t", "-m", NO_MODEL], 2,
         "holds no text", _file("blank.txt", "\n   \n")),
    Case("longdoc-synth-into-a-users-folder", "21.3", [*_SYNTH, "-o", "{tmp}/mine"], 2, "notes.txt",
         lambda tmp, _: _notes(tmp), _kept),
    Case("longdoc-synth-lengths-not-numbers", "21.3", [*_SYNTH, "-o", "{tmp}/t", "--lengths", "long"], 2,
         "--lengths 'long' is not comma-separated integers"),
    Case("longdoc-synth-unknown-task", "21.3", [*_SYNTH, "-o", "{tmp}/t", "-t", "haystack"], 2, "--task 'haystack'"),
    Case("longdoc-eval-top-k-on-chunk-mean", "21.3", [*_EVAL, "--long", "chunk-mean", "--best-windows", "3"], 2,
         "--best-windows 3: scores multi-vector", _task),
    Case("longdoc-eval-old-top-k-spelling", "47", [*_EVAL, "--long", "chunk-mean", "--top-k", "3"], 2,
         "`lengthwise longdoc --top-k` is now --best-windows", _task),
    Case("longdoc-eval-batch-size-zero", "21.3", [*_EVAL, "--batch-size", "0"], 2, "--batch-size 0: must be ≥ 1",
         _task),
    Case("longdoc-eval-not-a-task", "21.3", [*_EVAL[:3], "{tmp}", *_EVAL[4:]], 2,
         "write the task with `lengthwise longdoc synth` first"),
    Case("longdoc-eval-stride-not-below-window", "21.3", [*_EVAL, "--long", "multi-vector", "--window", "16",
                                                          "--stride", "16"], 2, "--stride 16: not below the window"),
    Case("longdoc-tune-save-into-its-out", "21.3", [*_TUNE, "--save", "{tmp}/tune/model"], 2,
         "this command's other output", _task, _nothing_in("tune")),
    Case("longdoc-tune-save-unwritable", "21.3", [*_TUNE, "--save", "/proc/lengthwise-model"], 2,
         "--save /proc/lengthwise-model: cannot write there", _task),
    Case("longdoc-tune-overlap-one", "21.3", [*_TUNE, "--overlaps", "1"], 2, "each overlap must be in [0, 1)",
         _task),
    Case("longdoc-save-into-a-users-folder", "21.3", ["longdoc", "save", "-o", "{tmp}/mine", "-m", "{tiny}"], 2,
         "not a saved model", lambda tmp, _: _notes(tmp), _kept),
    Case("encode-empty-corpus", "21.3", [*_ENCODE, "-o", "{tmp}/e"], 2, "holds no documents",
         _file("c.jsonl", "")),
    Case("encode-duplicate-id", "21.2", [*_ENCODE[:4], NO_MODEL, "-o", "{tmp}/e"], 2, "c.jsonl:3: duplicate _id 'a'",
         lambda tmp, _: _corpus(tmp, ids=["a", "b", "a"]), _nothing_in("e")),
    Case("encode-no-devices", "21.3", [*_ENCODE, "-o", "{tmp}/e", "--devices", ","], 2,
         "--devices : name at least one device", lambda tmp, _: _corpus(tmp)),
    Case("encode-into-a-users-folder", "21.3", [*_ENCODE, "-o", "{tmp}/mine"], 2, "notes.txt",
         lambda tmp, _: (_corpus(tmp), _notes(tmp)), _kept),
    Case("encode-a-beir-folder", "21.3", ["encode", "-d", "{tmp}/task", "-m", "{tiny}", "-o", "{tmp}/e"], 0,
         "embedded 4 new documents", _task),
    Case("encode-repairs-a-damaged-shard", "21.2",
         [*_ENCODE, "-o", "{tmp}/e", "--long", "multi-vector", "--window", "16"], 0, "repair:", _damaged_shard,
         _six_vectors),
    Case("index-build-unknown-quantize", "21.3",
         ["index", "build", "{tmp}/e", "--out", "{tmp}/i", "--quantize", "int4"], 2,
         "--quantize 'int4': use one of none, int8, ubinary", _encoded),
    Case("index-build-not-encoded", "21.3", ["index", "build", "{tmp}", "--out", "{tmp}/i"], 2, "no manifest.json"),
    Case("index-build-over-a-users-folder", "21.3", ["index", "build", "{tmp}/e", "--out", "{tmp}/mine"], 2,
         "exists and is not an index", lambda tmp, ctx: (_encoded(tmp, ctx), _notes(tmp)), _kept),
    Case("search-json", "21.3", ["search", "{tmp}/i", "--query", "the old bridge", "--top-k", "3", "--json"], 0, "hits",
         _indexed, _json_hits),
    Case("search-old-k-spelling", "47", ["search", "{tmp}/i", "--query", "the old bridge", "--k", "3", "--json"], 0,
         "`lengthwise search --k` is now --top-k", _indexed, _json_hits),
    Case("search-empty-query", "21.3", ["search", "{tmp}/i", "--query", "  "], 2, "a query is empty", _indexed),
    Case("search-no-index", "21.3", ["search", "{tmp}", "--query", "bridge"], 2, "no index.json"),
    Case("train-unknown-recipe", "21.3", ["train", "--recipe", "fastest", "-d", "{tmp}/c.jsonl", "-o", "{tmp}/r",
                                          "-m", NO_MODEL], 2, "--recipe 'fastest': not known",
         lambda tmp, _: _corpus(tmp), _nothing_in("r")),
    Case("train-recipe-with-another-method", "21.3", ["train", "--recipe", "length-robust", "--method", "simcse",
                                                      "-d", "{tmp}/c.jsonl", "-o", "{tmp}/r", "-m", NO_MODEL], 2,
         "--method 'simcse': the recipe length-robust trains with method copy-concat", lambda tmp, _: _corpus(tmp),
         _nothing_in("r")),
]  # fmt: skip
