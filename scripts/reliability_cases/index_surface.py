"""Issue 33, the index surface (`lengthwise index build`, `lengthwise search`) used as a careless user would:
identical windows, ids with line breaks, a resumed build whose shards changed, a rebuild over an index holding
other things or from a broken folder, a relative model path, and bad `--out`s, manifests, shards and flags. Each
must end in one clear line (exit 2) before any model load, or a right result, and leave what was there as it was.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

from reliability_cases import Case, Context

NO_MODEL = "/nonexistent/lengthwise-model"
FILLER = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. " * 6


def _run(tmp: Path, argv: list[str], context: Context | None = None) -> None:
    """Run `lengthwise` (in `tmp`) in a setup; raise if it fails."""
    argv = [part.format(tmp=tmp, tiny=context.tiny_model if context else "") for part in argv]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "lengthwise.cli", *argv], cwd=tmp, env=env, capture_output=True,
                          text=True)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"setup `lengthwise {' '.join(argv)}` failed: {done.stdout}{done.stderr}")


def _corpus(tmp: Path, rows: list[tuple[str, str]], name: str = "c.jsonl") -> None:
    (tmp / name).write_text("".join(json.dumps({"_id": i, "text": t}) + "\n" for i, t in rows), encoding="utf-8")


def _encoded(tmp: Path, context: Context, rows: list[tuple[str, str]] | None = None, out: str = "e") -> None:
    _corpus(tmp, rows or [(f"d{i}", f"document {i} about the river and the old bridge {i}") for i in range(6)])
    _run(tmp, ["encode", "-d", "c.jsonl", "-o", out, "-m", "{tiny}", "--long", "multi-vector", "--window", "16"],
         context)  # fmt: skip


def _indexed(tmp: Path, context: Context) -> None:
    _encoded(tmp, context)
    _run(tmp, ["index", "build", "e", "--out", "i"], context)


def _manifest_model(folder: Path, model: str) -> None:
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    manifest["settings"]["model"] = model
    (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")


# --- setups ------------------------------------------------------------------------------------------------------


def _passkey(tmp: Path, context: Context) -> None:
    _encoded(tmp, context, [(f"d{i}", f"{FILLER}The pass key is {1000 + 37 * i}. {FILLER}") for i in range(8)])


def _line_break_ids(tmp: Path, context: Context) -> None:
    rows = [("a\nb", "the recipe needs flour and eggs"), ("piano", "pianos have eighty-eight keys"),
            ("moon", "the moon orbits the earth"), ("c\u2028d", "a quiet harbour at dawn")]  # fmt: skip
    _corpus(tmp, rows)
    _run(tmp, ["encode", "-d", "c.jsonl", "-o", "e", "-m", "{tiny}", "--long", "truncate"], context)


_INTERRUPT = """
import sys
from lengthwise.facade import LongIndex
def stop(done, total):
    raise KeyboardInterrupt
try:
    LongIndex.build_windows(sys.argv[1], sys.argv[2], on_progress=stop)
except KeyboardInterrupt:
    pass
"""


def _changed_after_an_interrupted_build(tmp: Path, context: Context) -> None:
    _encoded(tmp, context)
    subprocess.run([sys.executable, "-c", _INTERRUPT, str(tmp / "e"), str(tmp / "i")], check=True, cwd=tmp)
    assert (tmp / ".i-building" / "build.json").is_file()
    shutil.rmtree(tmp / "e")
    _encoded(tmp, context, [(f"d{i}", f"a different text {i} about mountains and snow") for i in range(6)])


def _index_with_notes(tmp: Path, context: Context) -> None:
    _indexed(tmp, context)
    (tmp / "i" / "notes.txt").write_text("keep me\n", encoding="utf-8")


def _encoded_inside_index(tmp: Path, context: Context) -> None:
    _indexed(tmp, context)
    shutil.copytree(tmp / "e", tmp / "i" / "emb")


def _broken_over_good(tmp: Path, context: Context) -> None:
    _indexed(tmp, context)
    _encoded(tmp, context, out="e2")
    shard = tmp / "e2" / "w0-00000.npy"
    shard.write_bytes(shard.read_bytes()[:200])


def _relative_model(tmp: Path, context: Context) -> None:
    shutil.copytree(context.tiny_model, tmp / "model")
    _corpus(tmp, [(f"d{i}", f"document {i} about rivers") for i in range(4)])
    _run(tmp, ["encode", "-d", "c.jsonl", "-o", "e", "-m", "model", "--long", "truncate"])


def _not_loadable(tmp: Path, context: Context) -> None:
    _encoded(tmp, context)
    _manifest_model(tmp / "e", NO_MODEL)


def _file_and_link(tmp: Path, context: Context) -> None:
    _indexed(tmp, context)
    (tmp / "file").write_text("x", encoding="utf-8")
    (tmp / "link").symlink_to(tmp / "i")


def _bad_manifest(tmp: Path, _: Context) -> None:
    (tmp / "e").mkdir()
    (tmp / "e" / "manifest.json").write_text('{"format": 2 "settings": {}}', encoding="utf-8")


def _two_dimensions(tmp: Path, context: Context) -> None:
    from lengthwise.longdoc.storage.store import EmbeddingStore

    store = EmbeddingStore(tmp / "e", {"model": str(context.tiny_model)})  # the shards are checked after it loads
    store.write("w0-", ["a"], np.ones((1, 8), dtype=np.float32))
    store.write("w0-", ["b"], np.ones((1, 16), dtype=np.float32))


def _tampered_offsets(tmp: Path, context: Context) -> None:
    from lengthwise.search.local.files import served_files

    _indexed(tmp, context)
    offsets = np.load(served_files(tmp / "i") / "offsets.npy")
    np.save(served_files(tmp / "i") / "offsets.npy", offsets[::-1].copy())


def _users_folder_by_the_staging_name(tmp: Path, context: Context) -> None:
    """Issue 47.6: a folder of the user's by the name of the build's staging folder, beside `--out`."""
    _encoded(tmp, context)
    (tmp / ".i-building").mkdir()
    (tmp / ".i-building" / "mine.txt").write_text("mine", encoding="utf-8")


def _users_folder_kept(tmp: Path, _: str) -> str | None:
    mine = tmp / ".i-building" / "mine.txt"
    return None if mine.is_file() and mine.read_text(encoding="utf-8") == "mine" else "the user's folder is gone"


# --- checks ------------------------------------------------------------------------------------------------------


def _distinct(tmp: Path, _: str) -> str | None:
    made = json.loads((tmp / "i" / "index.json").read_text(encoding="utf-8"))
    if not made["distinct"] < made["windows"]:
        return f"{made['distinct']} distinct vectors for {made['windows']} windows"
    from lengthwise.facade import LongIndex

    index = LongIndex.open(tmp / "i")
    filler = np.array(index.vectors[:1])  # the first window: filler, in every document
    found = {doc for doc, _ in index.search_vectors(filler, k=8, candidates=1)[0]}
    return None if len(found) == 8 else f"one shared candidate vector brought {sorted(found)}, not all 8 documents"


def _piano_first(tmp: Path, output: str) -> str | None:
    from lengthwise.facade import LongIndex

    ids = LongIndex.open(tmp / "i").doc_ids
    line = next((line for line in output.splitlines() if line.startswith("{")), "{}")
    hits = json.loads(line).get("hits", [])
    if ids != ["a\nb", "piano", "moon", "c\u2028d"]:
        return f"the index holds the ids {ids}"
    return None if hits and hits[0]["id"] == "piano" else f"hits {hits}"


def _fresh_vectors(tmp: Path, _: str) -> str | None:
    from lengthwise.longdoc.storage.store import read_embeddings

    windows = read_embeddings(tmp / "e")[1].vectors
    expected = windows / np.linalg.norm(windows, axis=1, keepdims=True)
    from lengthwise.search.local.files import served_files

    built = np.load(served_files(tmp / "i") / "vectors.npy")
    gap = float(np.abs(built - expected).max()) if built.shape == expected.shape else float("inf")
    return None if gap < 1e-5 else f"the index's vectors differ from the shards' by {gap:.3f} (stale)"


def _index_kept(names: list[str]):
    def check(tmp: Path, _: str) -> str | None:
        from lengthwise.facade import LongIndex

        try:
            LongIndex.open(tmp / "i")
        except Exception as err:  # any failure is the finding
            return f"the earlier index no longer opens: {err}"
        missing = [name for name in names if not (tmp / "i" / name).exists()]
        return f"{missing} gone from the index folder" if missing else None

    return check


def _absolute_model(tmp: Path, _: str) -> str | None:
    name = json.loads((tmp / "i" / "index.json").read_text(encoding="utf-8"))["model"]["name"]
    return None if name == str(tmp / "model") else f"the index records the model as {name!r}"


def _nothing_new(tmp: Path, _: str) -> str | None:
    left = sorted(p.name for p in tmp.iterdir() if p.name in {"i2", ".i2-building"})
    return f"left {left}" if left else None


_BUILD = ["index", "build", "{tmp}/e", "--out"]

# fmt: off
CASES: list[Case] = [
    Case("index-identical-windows", "33.0", [*_BUILD, "{tmp}/i"], 0, "distinct", _passkey, _distinct),
    Case("index-id-with-line-break", "33.1", ["search", "{tmp}/i", "-q", "pianos have eighty-eight keys", "--top-k",
         "1", "--json"], 0, "piano", lambda tmp, ctx: (_line_break_ids(tmp, ctx), _run(tmp, ["index", "build", "e",
         "-o", "i"], ctx)), _piano_first),
    Case("index-resume-after-re-encode", "33.2", [*_BUILD, "{tmp}/i"], 0, "indexed",
         _changed_after_an_interrupted_build, _fresh_vectors),
    Case("index-build-over-an-index-with-user-files", "33.5", [*_BUILD, "{tmp}/i"], 2,
         "holds notes.txt, which is not the index's", _index_with_notes, _index_kept(["notes.txt", "index.json"])),
    Case("index-build-input-inside-out", "33.5", ["index", "build", "{tmp}/i/emb", "--out", "{tmp}/i"], 2,
         "the folder to index", _encoded_inside_index, _index_kept(["emb", "index.json"])),
    Case("index-build-broken-folder-over-an-index", "33.6", ["index", "build", "{tmp}/e2", "--out", "{tmp}/i"], 2,
         "damaged or incomplete shard", _broken_over_good, _index_kept(["index.json"])),
    Case("index-relative-model-path", "33.12", ["index", "build", "e", "--out", "i"], 0, "indexed",
         _relative_model, _absolute_model),
    Case("index-build-unknown-quantize-before-model", "33.13", [*_BUILD, "{tmp}/i2", "--quantize", "int4"], 2,
         "--quantize 'int4': use", _not_loadable, _nothing_new),
    Case("index-build-unknown-engine-before-model", "33.13", [*_BUILD, "{tmp}/i2", "--engine", "annoy"], 2,
         "--engine 'annoy': use", _not_loadable, _nothing_new),
    Case("index-build-out-under-a-file", "33.13", [*_BUILD, "{tmp}/file/sub"], 2, "file is a file; pass a folder",
         _file_and_link),
    Case("index-build-out-a-symlink", "33.13", [*_BUILD, "{tmp}/link"], 2, "is a symbolic link", _file_and_link,
         _index_kept(["index.json"])),
    Case("index-build-out-in-proc", "33.13", [*_BUILD, "/proc/lengthwise-index"], 2, "cannot write in /proc",
         _not_loadable),
    Case("index-build-malformed-manifest", "33.13", [*_BUILD, "{tmp}/i2"], 2,
         "manifest.json: unreadable (Expecting ',' delimiter", _bad_manifest, _nothing_new),
    Case("index-build-two-dimensions", "33.13", [*_BUILD, "{tmp}/i2"], 2, "16 dimensions, the folder's first shard",
         _two_dimensions, _nothing_new),
    Case("index-build-not-encoded-no-flag-label", "33.13", ["index", "build", "{tmp}", "--out", "{tmp}/i2"], 2,
         "no manifest.json; pass a folder"),
    Case("index-build-user-folder-named-like-staging", "47.6", [*_BUILD, "{tmp}/i"], 2,
         "is in the way of the build's staging folder and lengthwise did not make it",
         _users_folder_by_the_staging_name, _users_folder_kept),
    Case("search-tampered-offsets", "33.13", ["search", "{tmp}/i", "-q", "bridge", "--mode", "dense"], 2,
         "the index files disagree", _tampered_offsets),
    Case("search-probes-past-the-index", "33.13", ["search", "{tmp}/i", "-q", "bridge", "--mode", "dense",
         "--probes", str(2**64), "--json"], 0, "hits", _indexed),
]
# fmt: on
