"""Bad inputs and faults for `lengthwise audit` and `lengthwise report`: each must end in one clear line (exit 2)
or a right, complete result (exit 0).

Cases that must fail before any computing name a model that does not exist (`NO_MODEL`): were the model loaded
first, the error would be about the model instead, and the case would fail on its expected message.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path

from reliability_cases import Case, Context

NO_MODEL = "/nonexistent/lengthwise-model"
FAST = ["--null-permutations", "20", "--no-curve"]
LOADED = 600.0  # seconds for a case that loads a model: a tiny audit takes 1–3 minutes on a busy 2-core machine


# --- inputs ----------------------------------------------------------------------------------------------------


def _file(name: str, data: bytes) -> Callable[[Path, Context], None]:
    def setup(tmp: Path, _: Context) -> None:
        (tmp / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp / name).write_bytes(data)

    return setup


def _lines(count: int = 12) -> bytes:
    return "".join(
        f"the cat number {i} sat on the mat\ta dog number {i} lay on the rug\n" for i in range(count)
    ).encode()


def _jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


def _beir(docs: int, qrels: str, group: bool = False) -> Callable[[Path, Context], None]:
    def setup(tmp: Path, _: Context) -> None:
        rows = [{"_id": f"d{i}", "text": f"argument {i} on topic {i // 2}"} for i in range(docs)]
        if group:
            for row in rows:
                row["group"] = row["text"].split()[-1]
        _jsonl(tmp / "beir" / "corpus.jsonl", rows)
        (tmp / "beir" / "qrels").mkdir()
        (tmp / "beir" / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + qrels, encoding="utf-8")

    return setup


def _truncated_gz(tmp: Path, _: Context) -> None:
    data = gzip.compress(_lines(4000))
    (tmp / "pairs.tsv.gz").write_bytes(data[: len(data) // 2])


def _unbalanced_quote(tmp: Path, _: Context) -> None:
    rows = "sentence1,sentence2,score\n" + "".join(f"a{i} b,c{i} d,{i % 5}\n" for i in range(1, 6))
    (tmp / "pairs.csv").write_text(rows + '"open quote,two,3\ne,"f",1\n', encoding="utf-8")


def _long_docs(tmp: Path, _: Context) -> None:
    """Documents almost all longer than the tiny model's 62-token window (the issue's news collection shape)."""
    sentence = "the council met again to discuss the budget and the new road across the river valley"
    words = sentence.split()
    docs = [" ".join(words[(i + j) % len(words)] for j in range(40 + 7 * i)) for i in range(40)]
    (tmp / "docs.txt").write_text("\n".join(docs) + "\n", encoding="utf-8")


def _old_set(tmp: Path, _: Context) -> None:
    """An earlier audit's output set (with a word-shuffle plot the next run will not have)."""
    (tmp / "pairs.tsv").write_bytes(_lines())
    out = tmp / "out"
    out.mkdir()
    (out / "audit.json").write_text('{"old": true}', encoding="utf-8")
    (out / "report.html").write_text("old report", encoding="utf-8")
    (out / "word_shuffle.png").write_bytes(b"old plot")


def _out_with_notes(tmp: Path, _: Context) -> None:
    (tmp / "pairs.tsv").write_bytes(_lines())
    (tmp / "out").mkdir()
    (tmp / "out" / "notes.txt").write_text("my notes\n", encoding="utf-8")


def _taken(tmp: Path, _: Context) -> None:
    (tmp / "pairs.tsv").write_bytes(_lines())
    (tmp / "taken").write_text("keep me\n", encoding="utf-8")


def _minimal_payload() -> dict:
    """A small, complete audit.json of 4 pairs (what `lengthwise audit` writes, minus provenance detail)."""
    before, after = [0.1, 0.3, 0.5, 0.7], [0.2, 0.35, 0.5, 0.9]
    bins = 20

    def counts(values: list[float]) -> list[int]:
        row = [0] * bins
        for v in values:
            row[min(int((v + 1) / 2 * bins), bins - 1)] += 1
        return row

    shift = {"n": 4, "mean_before": 0.4, "mean_after": 0.4875, "median_before": 0.4, "median_after": 0.425,
             "mean_shift": 0.0875, "median_shift": 0.075, "frac_increased": 0.75, "js_distance": 0.5}  # fmt: skip
    return {
        "attack": {
            **shift,
            "elongation": "8",
            "histogram": {"bins": bins, "range": [-1.0, 1.0], "before": counts(before), "after": counts(after)},
        },
        "tokens": {"max_length": 64, "special_tokens": 2, "m_mean": 8.0, "m_min": 8, "m_max": 8},
        "first_k_curve": [
            {"k": 16, "mean": 0.4, "median": 0.4, "std": 0.2, "js_distance_vs_full": 0.1, "histogram": counts(before)}
        ],
        "word_shuffle": None,
        "attack_by_kind": {},
        "similarities": {"before": before, "after": after},
        "settings": {"elongation": "8"},
        "model": {"name": "tiny"},
        "data": {"source": "inline", "n_pairs": 4},
        "meta": {"created": "2026-01-01T00:00:00+00:00", "seconds": 1.0},
    }


def _audit_json(mutate: Callable[[dict], None]) -> Callable[[Path, Context], None]:
    def setup(tmp: Path, _: Context) -> None:
        payload = _minimal_payload()
        mutate(payload)
        (tmp / "run").mkdir()
        (tmp / "run" / "audit.json").write_text(json.dumps(payload), encoding="utf-8")

    return setup


# --- checks of what a run left behind ----------------------------------------------------------------------------


def _payload(tmp: Path, out: str = "out") -> dict:
    return json.loads((tmp / out / "audit.json").read_text(encoding="utf-8"))


def _complete_set(tmp: Path, output: str) -> str | None:
    """audit.json, report.html and the attack plot belong together; no staging folder is left behind."""
    payload, page = _payload(tmp), (tmp / "out" / "report.html").read_text(encoding="utf-8")
    if f"m={payload['settings']['elongation']}" not in page:
        return "report.html does not match audit.json"
    if (tmp / "out" / "word_shuffle.png").exists() and not payload.get("word_shuffle"):
        return "a stale word_shuffle.png from the earlier set survived"
    if any(p.name.startswith(".lengthwise-") for p in tmp.iterdir()):
        return "a staging folder was left behind"
    return None


def _kept(name: str, content: str) -> Callable[[Path, str], str | None]:
    def check(tmp: Path, output: str) -> str | None:
        return None if (tmp / name).read_text(encoding="utf-8") == content else f"{name} was changed"

    return check


def _expect(path: tuple[str, ...], predicate: Callable[[object], bool], what: str) -> Callable[[Path, str], str | None]:
    def check(tmp: Path, output: str) -> str | None:
        value: object = _payload(tmp)
        for key in path:
            value = value[key] if isinstance(value, dict) else None
        return None if predicate(value) else f"{'.'.join(path)} = {value!r}: expected {what}"

    return check


def _mostly_cut_probe(tmp: Path, output: str) -> str | None:
    diagnostics = _payload(tmp)["diagnostics"]
    probe = diagnostics["probe"]
    if probe.get("headline") != "ridge" or probe.get("truncated_share", 0) < 0.5:
        return f"probe headline {probe.get('headline')!r}, share cut {probe.get('truncated_share')}"
    if not any("cut at the window" in w for w in probe.get("warnings", [])):
        return "no warning that most documents are cut"
    if diagnostics["truncation"]["cut_share"] < 0.5:
        return "the truncation table misses the cut documents"
    return None


A = ["audit", "-o", "{tmp}/out"]
P = ["--pairs", "{tmp}/pairs.tsv"]
_EXACT = _file("pairs.tsv", (" ".join(["alpha"] * 62) + "\ta short text\n" + "two words\tthree more words\n").encode())

# fmt: off
CASES = [
    # 13.1 / 13.2: BEIR folders that hung or audited one random pair
    Case("audit-beir-two-docs-one-query", "13.1", [*A, "-m", "{tiny}", "--pairs", "{tmp}/beir", *FAST], 0,
         "wrote", _beir(2, "q\td0\t1\nq\td1\t1\n"), _expect(("data", "kinds"), lambda k: k == {"same_topic": 1},
                                                            "one same-topic pair and no random pair"), timeout=LOADED),
    Case("audit-beir-one-relevant-each", "13.2", [*A, "-m", NO_MODEL, "--pairs", "{tmp}/beir"], 2,
         "no two documents share a topic", _beir(6, "".join(f"q{i}\td{i}\t1\n" for i in range(6)))),
    Case("audit-beir-group-field", "13.2", [*A, "-m", "{tiny}", "--pairs", "{tmp}/beir", *FAST], 0, "wrote",
         _beir(6, "".join(f"q{i}\td{i}\t1\n" for i in range(6)), group=True),
         _expect(("data", "kinds"), lambda k: k == {"same_group": 3, "random": 3}, "3 same-group + 3 random"),
         timeout=LOADED),
    # 13.4 and issue 12 item 6: a collection cut at the window
    Case("audit-docs-mostly-cut", "13.4", [*A, "-m", "{tiny}", "--docs", "{tmp}/docs.txt", "--probe", *FAST], 0,
         "wrote", _long_docs, _mostly_cut_probe, timeout=LOADED),
    # 13.5
    Case("audit-csv-unbalanced-quote", "13.5", [*A, "-m", NO_MODEL, "--pairs", "{tmp}/pairs.csv"], 2,
         "pairs.csv:7: malformed CSV", _unbalanced_quote),
    # 13.6
    Case("audit-max-length-3", "13.6", [*A, "-m", "{tiny}", *P, "--max-length", "3"], 2,
         "elongation changes no text", _file("pairs.tsv", _lines()), timeout=LOADED),
    Case("audit-elongate-1", "new", [*A, "-m", "{tiny}", *P, "--elongate", "1"], 2, "m = 1 to every text",
         _file("pairs.tsv", _lines()), timeout=LOADED),
    # 13.10
    Case("audit-exactly-n-minus-2-tokens", "13.10", [*A, "-m", "{tiny}", *P, *FAST, "--no-shuffle"], 0, "wrote",
         _EXACT, _expect(("tokens", "truncated_texts"), lambda n: n == 0, "0 (62 tokens fit N = 64)"), timeout=LOADED),
    # 13.12 / 13.13: the output folder
    Case("audit-out-is-a-file", "13.12", ["audit", "-m", NO_MODEL, *P, "-o", "{tmp}/taken"], 2,
         "exists and is not a directory", _taken, _kept("taken", "keep me\n")),
    Case("audit-out-unwritable-fs", "13.12", ["audit", "-m", NO_MODEL, *P, "-o", "/proc/lengthwise-audit-out"], 2,
         "--out '/proc/lengthwise-audit-out': cannot write there", _file("pairs.tsv", _lines())),
    Case("audit-out-holds-other-files", "13.13", [*A, "-m", NO_MODEL, *P], 2, "notes.txt", _out_with_notes,
         _kept("out/notes.txt", "my notes\n")),
    Case("audit-rerun-replaces-the-set", "13.13", [*A, "-m", "{tiny}", *P, *FAST, "--no-shuffle"], 0, "wrote",
         _old_set, _complete_set, timeout=LOADED),
    # 13.14 and more for `lengthwise report`
    Case("report-missing-field", "13.14", ["report", "{tmp}/run"], 2, "field attack.mean_shift is missing",
         _audit_json(lambda p: p["attack"].pop("mean_shift"))),
    Case("report-mistyped-field", "new", ["report", "{tmp}/run"], 2, "field attack.histogram.before[0] should be",
         _audit_json(lambda p: p["attack"]["histogram"]["before"].__setitem__(0, "x"))),
    Case("report-missing-optional-section", "new", ["report", "{tmp}/run"], 0, "wrote",
         _audit_json(lambda p: p.pop("first_k_curve"))),
    Case("report-not-json", "new", ["report", "{tmp}/run"], 2, "is not valid JSON",
         _file("run/audit.json", b"{half a file")),
    Case("report-empty-dir", "new", ["report", "{tmp}"], 2, "no audit at"),
    Case("report-out-is-a-file", "13.12", ["report", "{tmp}/run", "-o", "{tmp}/taken"], 2,
         "exists and is not a directory", lambda tmp, c: (_audit_json(lambda p: None)(tmp, c), _taken(tmp, c))),
    Case("report-label-count", "new", ["report", "{tmp}/run", "{tmp}/run", "--label", "one"], 2,
         "--label one: 1 labels for 2 audits; give one label per audit", _audit_json(lambda p: None)),
    # 13.15
    Case("audit-brackets-in-path", "13.15", [*A, "-m", NO_MODEL, "--pairs", "{tmp}/[red]pairs.tsv"], 2,
         "[red]pairs.tsv:2", _file("[red]pairs.tsv", b"a\tb\nonly one column\n")),
    # 13.16–13.18: files that cannot be read
    Case("audit-truncated-gz", "13.16", [*A, "-m", NO_MODEL, "--pairs", "{tmp}/pairs.tsv.gz"], 2,
         "truncated or corrupt", _truncated_gz),
    Case("audit-not-gzip", "new", [*A, "-m", NO_MODEL, "--pairs", "{tmp}/pairs.tsv.gz"], 2,
         "pairs.tsv.gz:1: the gzip data is truncated or corrupt", _file("pairs.tsv.gz", _lines())),
    Case("audit-not-utf8", "13.17", [*A, "-m", NO_MODEL, *P], 2, "pairs.tsv:5: not UTF-8",
         _file("pairs.tsv", _lines(4) + b"caf\xe9\tna\xefve\n")),
    Case("audit-docs-not-utf8", "13.17", [*A, "-m", NO_MODEL, "--docs", "{tmp}/docs.txt"], 2,
         "docs.txt:5: not UTF-8", _file("docs.txt", b"one\ntwo\nthree\nfour\nbad \xff byte\n")),
    Case("audit-zero-width-text", "13.18", [*A, "-m", NO_MODEL, *P], 2,
         "pairs.tsv:2: second text has no visible character",
         _file("pairs.tsv", "fine\talso fine\nstill fine\t\u200b\u200b\n".encode())),
    Case("audit-zero-width-document", "13.18", [*A, "-m", NO_MODEL, "--docs", "{tmp}/docs.jsonl"], 2,
         "docs.jsonl:2: text has no visible character",
         _file("docs.jsonl", b'{"text": "fine"}\n{"text": "\\u200b\\u2060"}\n')),
    # 13.19
    Case("audit-device-unknown", "13.19", [*A, "-m", NO_MODEL, "--device", "quantum"], 2, "not a torch device"),
    Case("audit-device-absent", "13.19", [*A, "-m", NO_MODEL, "--device", "cuda:7"], 2,
         "not available on this machine"),
    # 13.21 and other settings
    Case("audit-bins-huge", "13.21", [*A, "-m", NO_MODEL, "--bins", "1000000"], 2, "--bins 1000000: use 2 to 1000"),
    Case("audit-first-k-2", "new", [*A, "-m", NO_MODEL, "--first-k", "2"], 2, "--first-k 2: leaves no content"),
    Case("audit-elongate-negative", "new", [*A, "-m", NO_MODEL, "--elongate", "-3"], 2, "--elongate '-3'"),
    Case("audit-elongate-huge", "new", [*A, "-m", "{tiny}", *P, *FAST, "--elongate", "1" + "0" * 30], 0, "wrote",
         _file("pairs.tsv", _lines()), _expect(("tokens", "m_max"), lambda m: m <= 62, "m capped by N"),
         timeout=LOADED),
    Case("audit-max-pairs-zero", "new", [*A, "-m", NO_MODEL, "--max-pairs", "0"], 2, "--max-pairs 0"),
    # more hostile inputs
    Case("audit-pairs-missing", "new", [*A, "-m", NO_MODEL, "--pairs", "{tmp}/nope.tsv"], 2, "no such file"),
    Case("audit-pairs-empty-file", "new", [*A, "-m", NO_MODEL, *P], 2, "no text pairs found",
         _file("pairs.tsv", b"")),
    Case("audit-pairs-wrong-format", "new", [*A, "-m", NO_MODEL, "--pairs", "{tmp}/pairs.xlsx"], 2,
         "unknown pairs format", _file("pairs.xlsx", b"PK\x03\x04 not a pairs file")),
    Case("audit-pairs-binary-as-tsv", "new", [*A, "-m", NO_MODEL, *P], 2, "pairs.tsv:1: not UTF-8",
         _file("pairs.tsv", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00")),
    Case("audit-jsonl-nested-deep", "new", [*A, "-m", NO_MODEL, "--pairs", "{tmp}/pairs.jsonl"], 2,
         "pairs.jsonl:1:", _file("pairs.jsonl", b"[" * 100_000 + b"\n")),
    Case("audit-docs-is-a-directory", "new", [*A, "-m", NO_MODEL, "--docs", "{tmp}"], 2, "is a directory"),
    Case("audit-docs-empty", "new", [*A, "-m", NO_MODEL, "--docs", "{tmp}/docs.txt"], 2, "no documents found",
         _file("docs.txt", b"\n\n")),
    Case("audit-switch-without-docs", "new", [*A, "-m", NO_MODEL, "--probe"], 2, "--probe needs documents"),
    # the main job still works
    Case("audit-tiny-default-probe-set", "new", [*A, "-m", "{tiny}", *FAST], 0, "wrote", None, _complete_set,
         timeout=LOADED),
]
# fmt: on
