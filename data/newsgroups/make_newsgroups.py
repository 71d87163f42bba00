"""Rebuild the 20 Newsgroups subject-line retrieval set in this folder from the "bydate" test split.

    curl -LO http://qwone.com/~jason/20Newsgroups/20news-bydate.tar.gz && tar xzf 20news-bydate.tar.gz
    python data/newsgroups/make_newsgroups.py 20news-bydate-test

The source is either the release's ``20news-bydate-test`` folder (``<group>/<number>`` files, read as latin-1 as
scikit-learn's ``fetch_20newsgroups`` does) or a JSON-lines file of the same posts (``{"id": "test/<group>/<number>",
"text": ...}``, optionally gzipped). Writes, beside this script, ``corpus.jsonl.gz``, ``queries.jsonl.gz``,
``qrels/dev.tsv`` and ``qrels/test.tsv`` in BEIR's layout; the output is deterministic (sorted input, a seeded
split, gzip with mtime 0). The procedure is in README.md.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import random
import re
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
MIN_WORDS, MAX_WORDS = 400, 1500  # a post's body, in whitespace-separated words
MIN_QUERY_WORDS = 3  # shorter subjects ("Help", "Clipper chip") name no one post
SEED = 0  # the seeded shuffle that splits the queries into dev and test halves
_SUBJECT = re.compile(r"^Subject:[ \t]*(.*)$", re.MULTILINE | re.IGNORECASE)
_REPLY = re.compile(r"^\s*((re|fwd?)\s*:\s*)+", re.IGNORECASE)


def _posts(source: Path) -> list[tuple[str, str]]:
    """(id, raw text) of every post, sorted by id: ``<group>-<number>``."""
    if source.is_dir():
        files = sorted(p for p in source.glob("*/*") if p.is_file())
        if not files:
            raise SystemExit(f"{source}: no <group>/<number> files; pass the 20news-bydate-test folder")
        return [(f"{p.parent.name}-{p.name}", p.read_bytes().decode("latin-1")) for p in files]
    opener = gzip.open if source.suffix == ".gz" else open
    with opener(source, "rt", encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    return sorted(("-".join(row["id"].split("/")[-2:]), row["text"]) for row in rows)


def _split(raw: str) -> tuple[str, str]:
    """The subject without reply prefixes, and the body (everything after the header block)."""
    header, _, body = raw.partition("\n\n")
    found = _SUBJECT.search(header)
    subject = _REPLY.sub("", found.group(1)) if found else ""
    return " ".join(subject.split()), body.strip()


def _write_gz(path: Path, rows: list[dict]) -> None:
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0, compresslevel=9) as out:
        for row in rows:
            out.write((json.dumps(row, ensure_ascii=False) + "\n").encode())
    path.write_bytes(buffer.getvalue())


def build(source: Path, out: Path = HERE) -> dict[str, int]:
    """Write the set from `source` into `out`; returns its counts."""
    corpus, by_subject, written = [], defaultdict(list), {}
    for doc_id, raw in _posts(source):
        subject, body = _split(raw)
        if MIN_WORDS <= len(body.split()) <= MAX_WORDS:
            corpus.append({"_id": doc_id, "title": "", "text": body})
            key = subject.lower()
            by_subject[key].append(doc_id)
            written.setdefault(key, subject)
    keys = sorted(k for k in by_subject if len(k.split()) >= MIN_QUERY_WORDS)
    queries = [{"_id": f"q{n:04d}", "text": written[key]} for n, key in enumerate(keys)]
    order = list(range(len(keys)))
    random.Random(SEED).shuffle(order)
    halves = {"dev": sorted(order[: len(order) // 2]), "test": sorted(order[len(order) // 2 :])}
    out.joinpath("qrels").mkdir(parents=True, exist_ok=True)
    _write_gz(out / "corpus.jsonl.gz", corpus)
    _write_gz(out / "queries.jsonl.gz", queries)
    counts = {"documents": len(corpus), "queries": len(queries)}
    for split, members in halves.items():
        lines = ["query-id\tcorpus-id\tscore"]
        lines += [f"q{n:04d}\t{doc}\t1" for n in members for doc in by_subject[keys[n]]]
        (out / "qrels" / f"{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
        counts[split] = len(members)
    return counts


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="the 20news-bydate-test folder, or a JSON-lines file of its posts")
    print(build(parser.parse_args().source))
