"""Bad inputs and faults for `lengthwise eval`: every one must end in one clear line (exit 2) or a right result.

Cases that must fail before any computing name a model that does not exist (`NO_MODEL`): were the model loaded
first, the error would be about the model instead, and the case would fail on its expected message.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from reliability_cases import Case, Context

NO_MODEL = "/nonexistent/lengthwise-model"


# --- inputs ----------------------------------------------------------------------------------------------------


def _pairs(tmp: Path, _: Context | None = None) -> None:
    rows = [f"the cat number {i} sat on the mat\ta dog number {i} lay on the rug\t{i % 5}" for i in range(30)]
    (tmp / "pairs.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")


def _jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


def _beir(folder: Path, *, qrels: str | None = "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\n") -> None:
    docs = [{"_id": f"d{i}", "title": "", "text": f"document {i} about topic {i % 3}"} for i in range(1, 6)]
    _jsonl(folder / "corpus.jsonl", docs)
    _jsonl(folder / "queries.jsonl", [{"_id": "q1", "text": "topic 1"}, {"_id": "q2", "text": "topic 2"}])
    if qrels is not None:
        (folder / "qrels").mkdir(parents=True, exist_ok=True)
        (folder / "qrels" / "test.tsv").write_text(qrels, encoding="utf-8")


def _beir_ok(tmp: Path, _: Context) -> None:
    _beir(tmp / "beir")


def _beir_no_qrels(tmp: Path, _: Context) -> None:
    _beir(tmp / "beir", qrels=None)


def _beir_unknown_query(tmp: Path, _: Context) -> None:
    _beir(tmp / "beir", qrels="q1\td1\t1\nq7\td2\t1\n")


def _beir_bad_corpus(tmp: Path, _: Context) -> None:
    _beir(tmp / "beir")
    with open(tmp / "beir" / "corpus.jsonl", "a", encoding="utf-8") as handle:
        handle.write("{not json\n")


def _self_judged(tmp: Path, name: str) -> None:
    """ArguAna's shape: the query is corpus document a1; it is judged relevant to itself and to a2."""
    folder = tmp / name
    docs = [("a1", "cats purr when content"), ("a2", "cats purr to heal"), ("a3", "stock markets fell")]
    _jsonl(folder / "corpus.jsonl", [{"_id": i, "title": "", "text": t} for i, t in docs])
    _jsonl(folder / "queries.jsonl", [{"_id": "a1", "text": docs[0][1]}])
    (folder / "qrels").mkdir()
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\na1\ta1\t1\na1\ta2\t1\n", encoding="utf-8")


def _labelled(tmp: Path, _: Context, *, per_class: int = 6, test: bool = True) -> None:
    sport = [f"the team won match {i}" for i in range(per_class)]
    food = [f"bake the bread number {i}" for i in range(per_class)]
    rows = [{"text": t, "label": "sport"} for t in sport] + [{"text": t, "label": "food"} for t in food]
    _jsonl(tmp / "cls" / "train.jsonl", rows)
    if test:
        _jsonl(tmp / "cls" / "test.jsonl", rows[:2] + rows[-2:])


def _file_named(name: str, data: bytes):
    def setup(tmp: Path, _: Context) -> None:
        (tmp / name).write_bytes(data)

    return setup


def _taken(tmp: Path, _: Context) -> None:
    _pairs(tmp)
    (tmp / "taken").write_text("keep me\n", encoding="utf-8")


def _out_with_notes(tmp: Path, _: Context) -> None:
    _pairs(tmp)
    (tmp / "out").mkdir()
    (tmp / "out" / "notes.txt").write_text("mine\n", encoding="utf-8")


def _earlier_set(tmp: Path, _: Context) -> None:
    """What an earlier retrieval eval left in --out: its record and a plot this STS run does not draw."""
    _pairs(tmp)
    (tmp / "out").mkdir()
    (tmp / "out" / "results.json").write_text('{"task": "retrieval"}\n', encoding="utf-8")
    (tmp / "out" / "retrieval_query_bins.png").write_bytes(b"an earlier plot")


def _truncated_gz(tmp: Path, _: Context) -> None:
    text = "".join(f"sentence {i} one\tsentence {i} two\t{i % 5}\n" for i in range(3000)).encode()
    packed = gzip.compress(text)
    (tmp / "pairs.tsv.gz").write_bytes(packed[: len(packed) // 2])


# --- checks of what a run left behind ----------------------------------------------------------------------------


def _results(tmp: Path, out: str = "out") -> dict:
    return json.loads((tmp / out / "results.json").read_text(encoding="utf-8"))


def _kept(path: str, text: str):
    def check(tmp: Path, _: str) -> str | None:
        return None if (tmp / path).read_text(encoding="utf-8") == text else f"{path} was changed"

    return check


def _complete_set(tmp: Path, _: str) -> str | None:
    out = tmp / "out"
    if [p.name for p in tmp.iterdir() if p.name.startswith(".")]:
        return "a staging folder was left behind"
    if sorted(p.name for p in out.iterdir()) != ["results.json", "sts_bins.png"]:
        return f"--out holds {sorted(p.name for p in out.iterdir())}, not this run's results.json and sts_bins.png"
    return None if _results(tmp)["result"]["n_pairs"] == 30 else "results.json does not count 30 pairs"


def _recall(expected: float, drop: bool):
    def check(tmp: Path, _: str) -> str | None:
        record = _results(tmp)
        got, dropped = record["scores"]["recall@100"], record["settings"]["retrieval"]["drop_self_hits"]
        if dropped is not drop:
            return f"drop_self_hits is {dropped}, expected {drop}"
        return None if got == expected else f"recall@100 {got}, expected {expected} (self-hit counted wrongly)"

    return check


def _two_bins(tmp: Path, _: str) -> str | None:
    labels = _results(tmp)["bin_spec"]["labels"]
    return None if len(labels) == 2 else f"expected one bin plus the truncated bin, got {labels}"


# --- the cases -----------------------------------------------------------------------------------------------------

_STS = ["eval", "-t", "sts", "-d", "{tmp}/pairs.tsv", "-o", "{tmp}/out"]

CASES: list[Case] = [
    Case("eval-device-unknown", "13.19", [*_STS, "-m", NO_MODEL, "--device", "quantum"], 2,
         "not a torch device", _pairs),
    Case("eval-device-absent", "13.19", [*_STS, "-m", NO_MODEL, "--device", "cuda:7"], 2,
         "not available on this machine", _pairs),
    Case("eval-out-is-a-file", "13.12",
         ["eval", "-m", NO_MODEL, "-t", "sts", "-d", "{tmp}/pairs.tsv", "-o", "{tmp}/taken"], 2,
         "exists and is not a directory", _taken, _kept("taken", "keep me\n")),
    Case("eval-out-below-a-file", "13.12",
         ["eval", "-m", NO_MODEL, "-t", "sts", "-d", "{tmp}/pairs.tsv", "-o", "{tmp}/taken/sub"], 2,
         "--out", _taken, _kept("taken", "keep me\n")),
    Case("eval-out-unwritable-fs", "13.12",
         ["eval", "-m", NO_MODEL, "-t", "sts", "-d", "{tmp}/pairs.tsv", "-o", "/proc/lengthwise-eval-out"], 2,
         "--out /proc/lengthwise-eval-out", _pairs),
    Case("eval-out-holds-other-files", "13.13", [*_STS, "-m", NO_MODEL], 2, "not part of an evaluation's output",
         _out_with_notes, _kept("out/notes.txt", "mine\n")),
    Case("eval-out-replaces-an-earlier-set", "13.13", [*_STS, "-m", "{tiny}"], 0, "wrote", _earlier_set,
         _complete_set),
    Case("eval-bin-width-zero", "13.21", [*_STS, "-m", NO_MODEL, "--bin-width", "0"], 2,
         "--bin-width 0: must be ≥ 1", _pairs),
    Case("eval-bin-width-huge", "13.21", [*_STS, "-m", "{tiny}", "--bin-width", "1000000"], 0, "wrote", _pairs,
         _two_bins),
    Case("eval-batch-size-zero", "new", [*_STS, "-m", NO_MODEL, "--batch-size", "0"], 2,
         "--batch-size 0: must be ≥ 1", _pairs),
    Case("eval-top-k-below-cutoff", "new",
         ["eval", "-m", NO_MODEL, "-t", "retrieval", "-d", "{tmp}/beir", "-o", "{tmp}/out", "--top-k", "5"], 2,
         "--top-k 5: must be ≥ every cut-off", _beir_ok),
    Case("eval-old-task-spelling", "47",
         ["eval", "-m", NO_MODEL, "--task", "retrieval", "-d", "{tmp}/beir", "-o", "{tmp}/out", "--top-k", "5"], 2,
         "`lengthwise eval --task` is now --task-type", _beir_ok),
    Case("eval-tempscale-zero", "new", [*_STS, "-m", "{tiny}", "--tempscale", "0"], 2,
         "positive finite temperature", _pairs),
    Case("eval-data-missing", "new", [*_STS[:4], "{tmp}/nope.tsv", *_STS[5:], "-m", NO_MODEL], 2,
         "no such file or directory"),
    Case("eval-sts-empty-file", "new", [*_STS, "-m", NO_MODEL], 2, "no text pairs", _file_named("pairs.tsv", b"")),
    Case("eval-sts-wrong-format", "new",
         ["eval", "-m", NO_MODEL, "-t", "sts", "-d", "{tmp}/pairs.xlsx", "-o", "{tmp}/out"], 2,
         "unknown pairs format", _file_named("pairs.xlsx", b"PK\x03\x04 not a pairs file")),
    Case("eval-sts-no-scores", "new", [*_STS, "-m", NO_MODEL], 2, "no gold score",
         _file_named("pairs.tsv", b"a cat\ta dog\nthe sun\tthe moon\n")),
    Case("eval-sts-unbalanced-quote", "13.5",
         ["eval", "-m", NO_MODEL, "-t", "sts", "-d", "{tmp}/pairs.csv", "-o", "{tmp}/out"], 2,
         "pairs.csv:7", _file_named("pairs.csv", ("sentence1,sentence2,score\n" + "".join(
             f"a{i} b,c{i} d,{i % 5}\n" for i in range(1, 6)) + '"open quote,two,3\ne,f,1\n').encode())),
    Case("eval-sts-truncated-gz", "13.16",
         ["eval", "-m", NO_MODEL, "-t", "sts", "-d", "{tmp}/pairs.tsv.gz", "-o", "{tmp}/out"], 2,
         "truncated or corrupt", _truncated_gz),
    Case("eval-sts-not-utf8", "13.17", [*_STS, "-m", NO_MODEL], 2, "pairs.tsv:3",
         _file_named("pairs.tsv", b"a\tb\t1\nc\td\t2\ne\xe9\tf\t3\n")),
    Case("eval-beir-missing-qrels", "new",
         ["eval", "-m", NO_MODEL, "-t", "retrieval", "-d", "{tmp}/beir", "-o", "{tmp}/out"], 2,
         "qrels/test.tsv", _beir_no_qrels),
    Case("eval-beir-missing-split", "new",
         ["eval", "-m", NO_MODEL, "-t", "retrieval", "-d", "{tmp}/beir", "-o", "{tmp}/out", "--split", "dev"], 2,
         "qrels/dev.tsv", _beir_ok),
    Case("eval-beir-unknown-query", "new",
         ["eval", "-m", NO_MODEL, "-t", "retrieval", "-d", "{tmp}/beir", "-o", "{tmp}/out"], 2,
         "not in queries.jsonl", _beir_unknown_query),
    Case("eval-beir-bad-corpus-line", "new",
         ["eval", "-m", NO_MODEL, "-t", "retrieval", "-d", "{tmp}/beir", "-o", "{tmp}/out"], 2,
         "corpus.jsonl:6", _beir_bad_corpus),
    Case("eval-self-hits-auto-arguana", "13.24",
         ["eval", "-m", "{tiny}", "-t", "retrieval", "-d", "{tmp}/arguana", "-o", "{tmp}/out"], 0, "wrote",
         lambda tmp, _: _self_judged(tmp, "arguana"), _recall(50.0, True)),
    Case("eval-self-hits-auto-other", "13.24",
         ["eval", "-m", "{tiny}", "-t", "retrieval", "-d", "{tmp}/mine", "-o", "{tmp}/out"], 0, "wrote",
         lambda tmp, _: _self_judged(tmp, "mine"), _recall(100.0, False)),
    Case("eval-self-hits-bad-value", "13.24",
         ["eval", "-m", NO_MODEL, "-t", "retrieval", "-d", "{tmp}/beir", "-o", "{tmp}/out", "--self-hits", "maybe"],
         2, "Invalid value", _beir_ok),
    Case("eval-classification-no-test", "new",
         ["eval", "-m", NO_MODEL, "-t", "classification", "-d", "{tmp}/cls", "-o", "{tmp}/out"], 2,
         "expected train.jsonl and test.jsonl", lambda tmp, ctx: _labelled(tmp, ctx, test=False)),
    Case("eval-classification-few-shot-too-big", "new",
         ["eval", "-m", "{tiny}", "-t", "classification", "-d", "{tmp}/cls", "-o", "{tmp}/out", "--few-shot", "50"],
         2, "--few-shot 50: class 0 has 6 training examples, fewer than k", _labelled),
    Case("eval-classification-bad-sampler", "new",
         ["eval", "-m", NO_MODEL, "-t", "classification", "-d", "{tmp}/cls", "-o", "{tmp}/out",
          "--few-shot-sampler", "random"], 2, "Invalid value", _labelled),
    Case("eval-classification-max-train-zero", "new",
         ["eval", "-m", NO_MODEL, "-t", "classification", "-d", "{tmp}/cls", "-o", "{tmp}/out", "--max-train", "0"],
         2, "--max-train 0: must be ≥ 1", _labelled),
    Case("eval-hub-offline", "new",
         ["eval", "-m", NO_MODEL, "-t", "sts", "-d", "hf:mteb/stsbenchmark-sts", "-o", "{tmp}/out"], 2,
         "hf:mteb/stsbenchmark-sts", timeout=120.0),
]  # fmt: skip
