"""Issue 33, the encode / eval / CLI side of the corpus-scale surfaces: `encode` resumed over a changed corpus or
among the user's files, a refused `encode` leaving nothing, `eval --index` against another corpus or with the
settings an index fixes. Each must end in one clear line (exit 2) or a right result, and lose nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from reliability_cases import Case, Context
from reliability_cases.longdoc import _cli

NO_MODEL = "/nonexistent/lengthwise-model"
HAYSTACK = Path(__file__).resolve().parents[2] / "tests" / "longdoc" / "prose.txt"
TEXTS = ["the recipe needs flour and eggs", "pianos have eighty-eight keys", "the moon orbits the earth",
         "rivers run to the sea", "a bridge spans the old river"]  # fmt: skip


def _corpus(path: Path, texts: list[str] = TEXTS) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [{"_id": f"d{i}", "text": text} for i, text in enumerate(texts)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


def _beir(folder: Path, texts: list[str]) -> None:
    _corpus(folder / "corpus.jsonl", texts)
    (folder / "queries.jsonl").write_text('{"_id": "q0", "text": "keys of a piano"}\n', encoding="utf-8")
    (folder / "qrels").mkdir()
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq0\td1\t1\n", encoding="utf-8")


_ENCODE = ["encode", "-d", "{tmp}/c.jsonl", "-o", "{tmp}/e", "-m", "{tiny}", "--long", "truncate", "--shard-docs", "2"]


def _encoded(tmp: Path, context: Context) -> None:
    _corpus(tmp / "c.jsonl")
    _cli(tmp, context, _ENCODE)


def _changed_text(tmp: Path, context: Context) -> None:
    _encoded(tmp, context)
    _corpus(tmp / "c.jsonl", [*TEXTS[:3], "a different text about cats", TEXTS[4]])


def _user_files(tmp: Path, context: Context) -> None:
    _encoded(tmp, context)
    (tmp / "e" / "my_labels.npy").write_bytes(b"the user's own")
    (tmp / "e" / "w0-00001.shard.json").unlink()


def _other_texts(tmp: Path, context: Context) -> None:
    _beir(tmp / "a", TEXTS)
    _beir(tmp / "b", [text.upper() + " and more" for text in TEXTS])
    _cli(tmp, context, ["encode", "-d", "{tmp}/a", "-o", "{tmp}/e", "-m", "{tiny}", "--long", "truncate"])
    _cli(tmp, context, ["index", "build", "{tmp}/e", "-o", "{tmp}/i"])


def _indexed(tmp: Path, context: Context) -> None:
    _encoded(tmp, context)
    _cli(tmp, context, ["index", "build", "{tmp}/e", "-o", "{tmp}/i"])
    (tmp / "q.jsonl").write_text('{"_id": "[/x]", "text": "keys of a piano"}\n', encoding="utf-8")


def _pairs(tmp: Path, _: Context) -> None:
    rows = [{"anchor": f"question {i}", "positive": f"answer {i}"} for i in range(8)]
    (tmp / "pairs.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    (tmp / "mine").mkdir()
    (tmp / "mine" / "notes.txt").write_text("keep me\n", encoding="utf-8")


# --- checks ----------------------------------------------------------------------------------------------------


def _current(tmp: Path, _: str) -> str | None:
    """Every shard stands for the corpus as it is now (its recorded text digests)."""
    from lengthwise.longdoc.storage.store import _shards, corpus_digests, read_embeddings

    corpus = corpus_digests(tmp / "c.jsonl")
    stale = [problem for shard in _shards(tmp / "e") if (problem := shard.stale(corpus))]
    ids = sorted(read_embeddings(tmp / "e")[0])
    return stale[0] if stale else None if ids == sorted(corpus) else f"the shards hold {ids}"


def _labels_kept(tmp: Path, output: str) -> str | None:
    path = tmp / "e" / "my_labels.npy"
    return None if path.is_file() and path.read_bytes() == b"the user's own" else "my_labels.npy was removed"


def _absent(folder: str):
    def check(tmp: Path, _: str) -> str | None:
        return None if not (tmp / folder).exists() else f"{folder} was left: {os.listdir(tmp / folder)}"

    return check


def _int8_batch_one(tmp: Path, context: Context) -> None:
    _corpus(tmp / "c.jsonl", [*TEXTS, " ".join(TEXTS * 3)])  # one long text pads its batch-mates
    _cli(tmp, context, [*_ENCODE[:4], "{tmp}/one", *_ENCODE[5:], "--precision", "int8", "--batch-size", "1"])


def _same_vectors(tmp: Path, _: str) -> str | None:
    """int8 vectors of texts embedded one by one equal those embedded together (to fp32 rounding)."""
    import numpy as np

    from lengthwise.longdoc.storage.store import read_embeddings

    ids, alone = read_embeddings(tmp / "one")
    ids_mixed, mixed = read_embeddings(tmp / "e")
    order = [ids_mixed.index(doc_id) for doc_id in ids]
    difference = float(np.abs(np.asarray(alone) - np.asarray(mixed)[order]).max())
    return None if difference < 1e-5 else f"vectors differ by {difference:.3g} with the batch"


def _int8_recorded(tmp: Path, _: str) -> str | None:
    precision = json.loads((tmp / "e" / "manifest.json").read_text(encoding="utf-8"))["settings"]["precision"]
    return None if precision == "int8" else f"the folder records precision {precision!r}"


def _auto_recorded(tmp: Path, _: str) -> str | None:
    """``--precision auto`` is recorded as what it meant on the device (issue 48), so a search embeds queries so."""
    from lengthwise.core.precision import resolve_precision

    precision = json.loads((tmp / "e" / "manifest.json").read_text(encoding="utf-8"))["settings"]["precision"]
    expected = resolve_precision("auto", "cpu").value
    return None if precision == expected else f"the folder records precision {precision!r}, not {expected!r}"


def _results_on_stdout(tmp: Path, _: str) -> str | None:
    """The same search again, its stdout alone: the hits must be there (`search … > hits.txt`)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    argv = [sys.executable, "-m", "lengthwise.cli", "search", str(tmp / "i"), "--queries", str(tmp / "q.jsonl")]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=tmp)
    lines = done.stdout.splitlines()
    return None if lines[:1] == ["[/x]:"] and len(lines) == 6 else f"stdout held {lines}"


def _users_folder_kept(tmp: Path, _: str) -> str | None:
    names = sorted(p.name for p in (tmp / "mine").iterdir())
    return None if names == ["notes.txt"] else f"the user's folder now holds {names}"


_SYNTH = ["longdoc", "synth", "-t", "passkey", "--haystack", str(HAYSTACK), "--lengths", "48", "-o", "{tmp}/new/t"]
_BEIR = ["eval", "-t", "retrieval", "-d", "{tmp}/a", "-o", "{tmp}/new/out"]

CASES: list[Case] = [
    Case("encode-resume-after-the-text-changed", "33.3", _ENCODE, 0, "1 of its 2 documents have another text",
         _changed_text, _current),
    Case("encode-resume-keeps-the-users-files", "33.7", _ENCODE, 0, "w0-00001: no shard record", _user_files,
         _labels_kept),
    Case("encode-refused-precision-leaves-nothing", "33.8", [*_ENCODE, "--precision", "fp8"], 2,
         "--precision 'fp8': use auto, fp32, bf16, fp16 or int8", lambda tmp, _: _corpus(tmp / "c.jsonl"),
         _absent("e")),
    Case("encode-refused-model-leaves-nothing", "33.8", [*_ENCODE[:5], "-m", NO_MODEL], 2, "lengthwise-model",
         lambda tmp, _: _corpus(tmp / "c.jsonl"), _absent("e")),
    Case("eval-index-of-other-texts", "33.4",
         ["eval", "-t", "retrieval", "-d", "{tmp}/b", "--index", "{tmp}/i", "-o", "{tmp}/out"], 2,
         "with other texts", _other_texts, _absent("out")),
    Case("eval-index-with-a-model", "33.4",
         ["eval", "-t", "retrieval", "-d", "{tmp}", "--index", "{tmp}/i", "-o", "{tmp}/out", "-m", NO_MODEL], 2,
         "the index fixes the model", None, _absent("out")),
    Case("eval-index-with-tempscale", "33.4",
         ["eval", "-t", "retrieval", "-d", "{tmp}", "--index", "{tmp}/i", "-o", "{tmp}/out", "--tempscale", "0.8"],
         2, "--tempscale 0.8: the index fixes", None, _absent("out")),
    Case("encode-out-with-brackets", "33.9", [*_ENCODE[:4], "{tmp}/e[/x]", *_ENCODE[5:]], 0,
         "embedded 5 new documents", lambda tmp, _: _corpus(tmp / "c.jsonl")),
    Case("search-results-on-stdout", "33.10", ["search", "{tmp}/i", "--queries", "{tmp}/q.jsonl"], 0, "[/x]:",
         _indexed, _results_on_stdout),
    Case("encode-ray-address-no-answer", "33.11", [*_ENCODE, "--runner", "ray", "--address", "127.0.0.1:1"], 2,
         "--address '127.0.0.1:1': no Ray cluster answers there", lambda tmp, _: _corpus(tmp / "c.jsonl"),
         _absent("e"), timeout=120),
    Case("encode-threads-zero", "33.13", [*_ENCODE, "--threads", "0"], 2, "--threads 0: must be ≥ 1",
         lambda tmp, _: _corpus(tmp / "c.jsonl"), _absent("e")),
    Case("encode-precision-upper-case", "33.13", [*_ENCODE, "--precision", "INT8"], 0, "embedded 5 new documents",
         lambda tmp, _: _corpus(tmp / "c.jsonl"), _int8_recorded),
    Case("encode-auto-precision-records-what-ran", "48", [*_ENCODE, "--precision", "auto", "--devices", "cpu"], 0,
         "embedded 5 new documents", lambda tmp, _: _corpus(tmp / "c.jsonl"), _auto_recorded),
    Case("encode-int8-independent-of-the-batch", "33.4b", [*_ENCODE, "--precision", "int8", "--batch-size", "8"], 0,
         "embedded 6 new documents", _int8_batch_one, _same_vectors),
    Case("encode-duplicate-scales", "33.13", [*_ENCODE[:-4], "--long", "multi-vector", "--window", "16",
                                              "--scales", "8,8"], 2, "--scales '8,8': a size is given twice",
         lambda tmp, _: _corpus(tmp / "c.jsonl"), _absent("e")),
    Case("search-empty-queries-file", "33.13", ["search", "{tmp}", "--queries", "{tmp}/q.jsonl"], 2,
         "q.jsonl: holds no queries", lambda tmp, _: (tmp / "q.jsonl").write_text("")),
    Case("eval-refused-leaves-no-out", "33.13", [*_BEIR, "-m", NO_MODEL], 2, "lengthwise-model",
         lambda tmp, _: _beir(tmp / "a", TEXTS), _absent("new")),
    Case("synth-refused-leaves-no-out", "33.13", [*_SYNTH, "-m", NO_MODEL], 2, "lengthwise-model", None,
         _absent("new")),
    Case("train-into-a-users-folder", "33.13", ["train", "--method", "pairs", "-d", "{tmp}/pairs.jsonl", "-o",
                                                "{tmp}/mine", "-m", "{tiny}"], 2, "notes.txt", _pairs,
         _users_folder_kept),
]  # fmt: skip
