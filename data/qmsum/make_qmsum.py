"""Rebuild the QMSum retrieval set in this folder from a QMSum checkout.

    git clone https://github.com/Yale-LILY/QMSum && python data/qmsum/make_qmsum.py QMSum

Reads ``data/ALL/val/*.json`` and ``data/ALL/test/*.json`` of the checkout and writes, beside this
script, ``corpus.jsonl.gz``, ``queries.jsonl.gz``, ``qrels/dev.tsv`` and ``qrels/test.tsv`` in BEIR's
layout. Each meeting is one document; each query is relevant to the meeting it was written for. The
output is deterministic (sorted input, gzip with mtime 0).
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import re
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
SPLITS = {"val": "dev", "test": "test"}
# Transcription marks of the AMI and ICSI corpora ({vocalsound}, {disfmarker}, {gap}, ...): not words.
_MARK = re.compile(r"\{\w+\}")
_SPACES = re.compile(r"[ \t]+")


def _key(query: str) -> str:
    return re.sub(r"\W+", " ", query.lower()).strip()


def _turn(turn: dict) -> str:
    content = _SPACES.sub(" ", _MARK.sub(" ", turn["content"])).strip()
    return f"{turn['speaker'].strip()}: {content}" if content else ""


def _write_gz(path: Path, rows: list[dict]) -> None:
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0, compresslevel=9) as out:
        for row in rows:
            out.write((json.dumps(row, ensure_ascii=False) + "\n").encode())
    path.write_bytes(buffer.getvalue())


def build(checkout: Path, out: Path = HERE) -> dict[str, int]:
    meetings: dict[str, tuple[str, dict]] = {}
    for source, split in SPLITS.items():
        folder = checkout / "data" / "ALL" / source
        files = sorted(folder.glob("*.json"))
        if not files:
            raise SystemExit(f"{folder}: no meeting files; pass the root of a QMSum checkout")
        for file in files:
            meetings[file.stem] = (split, json.loads(file.read_text(encoding="utf-8")))
    # A query asked of several meetings ("Summarize the whole meeting.") names no one meeting: dropped
    # (compared in lower case without punctuation).
    asked = Counter(
        _key(q["query"])
        for _, data in meetings.values()
        for q in data["general_query_list"] + data["specific_query_list"]
    )
    corpus, queries, qrels = [], [], {split: [] for split in SPLITS.values()}
    for name, (split, data) in meetings.items():
        text = "\n".join(t for t in map(_turn, data["meeting_transcripts"]) if t)
        corpus.append({"_id": name, "title": "", "text": text})
        kept = {_key(q["query"]): q["query"].strip() for q in data["general_query_list"] + data["specific_query_list"]}
        for i, query in enumerate(q for key, q in kept.items() if asked[key] == 1):
            qid = f"{name}-q{i}"
            queries.append({"_id": qid, "text": query})
            qrels[split].append((qid, name))
    out.joinpath("qrels").mkdir(parents=True, exist_ok=True)
    _write_gz(out / "corpus.jsonl.gz", corpus)
    _write_gz(out / "queries.jsonl.gz", queries)
    for split, pairs in qrels.items():
        lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t1" for q, d in pairs]
        (out / "qrels" / f"{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return {"documents": len(corpus), "queries": len(queries), **{s: len(p) for s, p in qrels.items()}}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkout", type=Path, help="root of a QMSum checkout (github.com/Yale-LILY/QMSum)")
    print(build(parser.parse_args().checkout))
