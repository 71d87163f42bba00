"""Issue 62's careless-user sweep, the input and message items: `index tune` on qrels that judge nothing relevant or a
pair twice, and on weights that are none or outside [0, 1] (the index left untuned); `search --model` with the base
model of a TempScale index (the model given named, advice a command-line user can follow); a corpus whose text is a
number and a queries file whose id is null. Each must end in one line naming the file or the flag and the fix
(exit 2). Over HTTP (the driver of `reliability_cases.serve`): two queries with one id refused with a 422 as the CLI
refuses them, and `top_k` answered as its deprecated name `k`. Noise: `index build` without transformers' weight bar,
`encode --devices cpu,cpu` without a leaked-semaphore warning."""

from __future__ import annotations

import json
import re
from pathlib import Path

from reliability_cases import Case, Context
from reliability_cases.index_corpus import NO_MODEL, _beir, _rows, _untuned
from reliability_cases.longdoc import _cli, _corpus, _indexed
from reliability_cases.serve import _answers, _driven


def _judged(qrels: str):
    """An index, and its corpus as BEIR with the ``dev`` qrels `qrels` (rows after the header)."""

    def setup(tmp: Path, context: Context) -> None:
        _indexed(tmp, context)
        rows = _rows(tmp)
        _beir(tmp, rows, [row["_id"] for row in rows])
        (tmp / "beir" / "qrels" / "dev.tsv").write_text("query-id\tcorpus-id\tscore\n" + qrels, encoding="utf-8")

    return setup


def _tunable(tmp: Path, context: Context) -> None:
    _judged("".join(f"q{n}\td{n}\t1\n" for n in range(6)))(tmp, context)


def _tempscaled_index(tmp: Path, context: Context) -> None:
    """An index of a corpus encoded by the tiny BERT saved with a TempScale (t = 0.7) at ``{tmp}/ts``."""
    from lengthwise.tempscale import save_tempscaled

    save_tempscaled(context.tiny_model, 0.7, tmp / "ts")
    _corpus(tmp)
    _cli(tmp, context, ["encode", "-d", "{tmp}/c.jsonl", "-o", "{tmp}/e", "-m", "{tmp}/ts", "--long", "multi-vector",
                        "--window", "16"])  # fmt: skip
    _cli(tmp, context, ["index", "build", "{tmp}/e", "--out", "{tmp}/i"])


def _no_python_advice(_: Path, output: str) -> str | None:
    return "it told a command-line user to pass load_model=" if "load_model" in output else None


def _rows_file(name: str, *rows: dict, index: bool = False):
    def setup(tmp: Path, context: Context) -> None:
        if index:
            _indexed(tmp, context)
        (tmp / name).write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")

    return setup


def _ids_and_top_k(tmp: Path, _: str) -> str | None:
    got = _answers(tmp)
    duplicate = got.get("duplicate-ids") or [None, None, ""]
    if duplicate[:2] != [422, "queries"] or "give every query its own id" not in duplicate[2]:
        return f"two queries with one id: {duplicate}"
    if got.get("top_k") != [200, [2]] or got.get("k") != [200, [2]]:
        return f"top_k {got.get('top_k')}, k {got.get('k')}"
    return None if (got.get("both") or [None])[:2] == [422, "k"] else f"top_k and k: {got.get('both')}"


def _int8_index(tmp: Path, context: Context) -> None:
    """An index of a corpus encoded in int8 (which `auto` never means)."""
    _corpus(tmp)
    _cli(tmp, context, ["encode", "-d", "{tmp}/c.jsonl", "-o", "{tmp}/e", "-m", "{tiny}", "--long", "multi-vector",
                        "--window", "16", "--precision", "int8"])  # fmt: skip
    _cli(tmp, context, ["index", "build", "{tmp}/e", "--out", "{tmp}/i"])


def _hit_lines(_: Path, output: str) -> str | None:
    """The query's label and its hits as `lengthwise search -q` prints them (rank, score, id), and nothing else."""
    lines = [line for line in output.splitlines() if line.strip()][1:] if output.startswith("q:") else []
    wrong = [line for line in lines if not re.fullmatch(r'\s*\d+\s+-?\d+\.\d+\s+"d\d+"', line)]
    return f"printed {wrong[:2]} beside the hits" if wrong or not lines else None


def _without(noise: str):
    def check(_: Path, output: str) -> str | None:
        return f"it printed {noise!r}" if noise in output else None

    return check


def _encoded_only(tmp: Path, context: Context) -> None:
    _corpus(tmp)
    _cli(tmp, context, ["encode", "-d", "{tmp}/c.jsonl", "-o", "{tmp}/e", "-m", "{tiny}", "--long", "multi-vector",
                        "--window", "16"])  # fmt: skip


_TUNE = ["index", "tune", "{tmp}/i", "--data", "{tmp}/beir", "--split", "dev"]
CASES: list[Case] = [
    Case("index-tune-qrels-judge-nothing-relevant", "62.2", _TUNE, 2,
         "dev.tsv: judges no document relevant; nothing to tune on",
         _judged("".join(f"q{n}\td{n}\t0\n" for n in range(6))), _untuned),
    Case("index-tune-qrels-pair-judged-twice", "62.2", _TUNE, 2,
         "dev.tsv:4: query 'q0' and document 'd0' judged 0 here and 1 at line 2; keep one line per pair",
         _judged("q0\td0\t1\nq1\td1\t1\nq0\td0\t0\n"), _untuned),
    Case("index-tune-weight-above-one", "62.9", [*_TUNE, "--weights", "0.3,1.5"], 2,
         "--weights 0.3, 1.5: 1.5 is not a lexical weight; give weights in [0, 1]", _tunable, _untuned),
    Case("index-tune-no-weights", "62.9", [*_TUNE, "--weights", ""], 2,
         "--weights '': no lexical weight to try", _tunable, _untuned),
    Case("search-base-model-of-a-tempscale-index", "62.8", ["search", "{tmp}/i", "-q", "river", "-m", "{tiny}"], 2,
         "this model has TempScale none, the index was built with", _tempscaled_index, _no_python_advice),
    Case("encode-text-a-number", "62.9", ["encode", "-d", "{tmp}/n.jsonl", "-o", "{tmp}/e", "-m", NO_MODEL], 2,
         "n.jsonl:2: 'text' is a number, not a string; give the text as a JSON string",
         _rows_file("n.jsonl", {"_id": "a", "text": "the river"}, {"_id": "b", "text": 123}),
         lambda tmp, _: "wrote an encode folder" if (tmp / "e").exists() else None),
    Case("search-queries-null-id", "62.9", ["search", "{tmp}/i", "--queries", "{tmp}/q.jsonl"], 2,
         "q.jsonl:2: _id is null; give every query its own id",
         _rows_file("q.jsonl", {"_id": "a", "text": "river"}, {"_id": None, "text": "bridge"}, index=True)),
    Case("serve-duplicate-ids-and-top-k", "62.9", ["serve", "{tmp}/i", "--port", "0"], 0, "stopped",
         _driven("ids-and-top-k"), _ids_and_top_k),
    Case("search-auto-precision-on-an-int8-index", "62.9", ["search", "{tmp}/i", "-q", "river", "--precision", "auto"],
         0, '"d', _int8_index, _hit_lines),  # on a CPU auto is the index's precision (on a GPU refused, naming it)
    Case("index-build-no-weight-loading-bar", "62.10", ["index", "build", "{tmp}/e", "--out", "{tmp}/i"], 0,
         "indexed", _encoded_only, _without("Loading weights")),
    Case("encode-two-processes-no-leaked-semaphore", "62.10", ["encode", "-d", "{tmp}/c.jsonl", "-o", "{tmp}/e", "-m",
         "{tiny}", "--long", "multi-vector", "--window", "16", "--devices", "cpu,cpu"], 0, "embedded 6 new documents",
         lambda tmp, _: _corpus(tmp), _without("leaked semaphore")),
]  # fmt: skip
