"""Bad inputs for `lengthwise audit --retrieval DIR` (issue 17): each must end in one clear line (exit 2) before
any model work, or in a complete audit.

Cases that must fail before computing name a model that does not exist (`NO_MODEL`): were the model loaded
first, the error would be about the model instead, and the case would fail on its expected message.
"""

from __future__ import annotations

import json
from pathlib import Path

from reliability_cases import Case, Context

NO_MODEL = "/nonexistent/lengthwise-model"


def _jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


def _beir(tmp: Path, qrels: str = "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\n") -> None:
    words = ["river", "mountain", "engine", "garden", "violin", "harbour", "planet", "lantern"]
    docs = [
        {
            "_id": f"d{i}",
            "title": "",
            "text": f"A note on the {words[i % 8]}. It has {i} parts and one {words[(i + 3) % 8]}.",
        }
        for i in range(1, 25)
    ]
    _jsonl(tmp / "beir" / "corpus.jsonl", docs)
    _jsonl(tmp / "beir" / "queries.jsonl", [{"_id": "q1", "text": "mountain parts"}, {"_id": "q2", "text": "garden"}])
    (tmp / "beir" / "qrels").mkdir(parents=True, exist_ok=True)
    (tmp / "beir" / "qrels" / "test.tsv").write_text(qrels, encoding="utf-8")


def _beir_ok(tmp: Path, _: Context) -> None:
    _beir(tmp)


def _beir_judges_nothing_in_the_corpus(tmp: Path, _: Context) -> None:
    _beir(tmp, qrels="q1\td99\t1\nq2\td98\t1\n")


def _complete(tmp: Path, _: str) -> str | None:
    payload = json.loads((tmp / "out" / "audit.json").read_text(encoding="utf-8"))
    section = payload.get("retrieval_bias") or {}
    if section.get("controlled", {}).get("n_pairs") != 2 or not section.get("verdicts"):
        return "audit.json has no complete retrieval_bias section"
    return None


def _complete_by_search(tmp: Path, output: str) -> str | None:
    reason = _complete(tmp, output)
    section = json.loads((tmp / "out" / "audit.json").read_text(encoding="utf-8"))["retrieval_bias"]
    found = section.get("by_search") or {}
    if reason is None and (set(found) != {"lexical", "hybrid"} or not all(p["verdicts"] for p in found.values())):
        return "audit.json has no complete by_search section (lexical, hybrid)"
    return reason


_QUICK = ["--elongate", "2", "--no-curve", "--no-shuffle", "--null-permutations", "0", "--max-pairs", "8"]


def _audit(*extra: str, model: str = NO_MODEL, folder: str = "{tmp}/beir") -> list[str]:
    return ["audit", "-m", model, *extra, "--retrieval", folder, "--out", "{tmp}/out"]


CASES = [
    Case("retrieval: folder missing", "17", _audit(folder="{tmp}/nowhere"), 2, "nowhere"),
    Case(
        "retrieval: split without qrels", "17", _audit("--retrieval-split", "dev"), 2, "qrels/dev.tsv", setup=_beir_ok
    ),
    Case(
        "retrieval: --retrieval-pairs 0", "17", _audit("--retrieval-pairs", "0"), 2, "--retrieval-pairs", setup=_beir_ok
    ),
    Case("retrieval: --tempscale 0", "17", _audit("--tempscale", "0"), 2, "--tempscale 0", setup=_beir_ok),
    Case(
        "retrieval: no relevant document in the corpus",
        "17",
        _audit(*_QUICK, model="{tiny}"),
        2,
        "no query has a relevant document in the corpus",
        setup=_beir_judges_nothing_in_the_corpus,
    ),
    Case(
        "retrieval: an unknown --retrieval-search",
        "35.5",
        _audit("--retrieval-search", "lexical,bm25"),
        2,
        "use one or more of dense, lexical, hybrid",
        setup=_beir_ok,
    ),
    Case(
        "retrieval: --retrieval-search without --retrieval",
        "35.5",
        ["audit", "-m", NO_MODEL, "--retrieval-search", "hybrid", "--out", "{tmp}/out"],
        2,
        "add --retrieval DIR",
    ),
    Case(
        "retrieval: a small BEIR folder through BM25 and the hybrid search",
        "35.5",
        _audit(*_QUICK, "--retrieval-search", "lexical,hybrid", model="{tiny}"),
        0,
        "retrieval (hybrid)",
        setup=_beir_ok,
        check=_complete_by_search,
        timeout=600.0,
    ),
    Case(
        "retrieval: a small BEIR folder gives a complete section",
        "17",
        _audit(*_QUICK, model="{tiny}"),
        0,
        "wrote",
        setup=_beir_ok,
        check=_complete,
        timeout=600.0,
    ),
]
