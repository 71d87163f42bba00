"""Rebuild the 20 Newsgroups thread-reconstruction set in this folder from the "bydate" train split.

    curl -LO http://qwone.com/~jason/20Newsgroups/20news-bydate.tar.gz && tar xzf 20news-bydate.tar.gz
    python data/replies/make_replies.py 20news-bydate-train

The source is either the release's ``20news-bydate-train`` folder (``<group>/<number>`` files, read as latin-1 as
scikit-learn's ``fetch_20newsgroups`` does) or a JSON-lines file of the same posts (``{"id": "train/<group>/<number>",
"text": ...}``, optionally gzipped). A reply's query is its own text (quotes, attribution lines and headers removed);
the relevant document is the post it quotes, found by exact matching of the quoted lines. Writes, beside this
script, ``corpus.jsonl.gz``, ``queries.jsonl.gz``, ``qrels/dev.tsv`` and ``qrels/test.tsv`` in BEIR's layout; the
output is deterministic (sorted input, seeded sampling and split, gzip with mtime 0). The procedure is in README.md.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import random
import re
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
MIN_LINE_CHARS = 30  # a quoted line shorter than this (normalised) is not evidence of which post it quotes
MIN_QUOTED = 2  # a reply is labelled only when at least this many of its quoted lines are some post's own lines
QUERY_WORDS = 64  # the query: the first words of the reply's own text
MIN_QUERY_WORDS = 10  # a reply with fewer words of its own ("Me too.") is not a query
MAX_WORDS = 1500  # a post longer than this (FAQs, archives) is not in the corpus (and a reply to it is no query)
MIN_WORDS = 20  # nor a post shorter than this
CORPUS_SIZE = 4000  # every parent, then seeded other posts up to this many documents
MATCH_CHARS = 20  # a query line whose normalised text (at least this long) is a line of a corpus post is dropped
SEED = 0  # the seeded sample of distractors and the seeded split of the parents into dev and test halves
_PREFIX = re.compile(r"^[ \t]*((?:[>|:}][ \t]*)+)")  # a quoted line's prefix: a run of quote marks
_ATTRIBUTION = re.compile(r"^\s*(in article\b|in <)|(writes|wrote|says|said)\s*:\s*$", re.IGNORECASE)


def _posts(source: Path) -> list[tuple[str, str]]:
    """(id, raw text) of every post, sorted by id: ``<group>-<number>``."""
    if source.is_dir():
        files = sorted(p for p in source.glob("*/*") if p.is_file())
        if not files:
            raise SystemExit(f"{source}: no <group>/<number> files; pass the 20news-bydate-train folder")
        return [(f"{p.parent.name}-{p.name}", p.read_bytes().decode("latin-1")) for p in files]
    opener = gzip.open if source.suffix == ".gz" else open
    with opener(source, "rt", encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    return sorted(("-".join(row["id"].split("/")[-2:]), row["text"]) for row in rows)


def _norm(line: str) -> str:
    """A line compared for quoting: lower case, letters and digits only, single spaces."""
    return " ".join(re.sub(r"[^a-z0-9]", " ", line.lower()).split())


def _level(line: str) -> int:
    """How deep a line is quoted: 0 for the post's own lines; the ``>`` marks of its prefix (else ``|``, ``:``)."""
    found = _PREFIX.match(line)
    if not found:
        return 0
    marks = found.group(1)
    return marks.count(">") or sum(marks.count(c) for c in "|:}")


def _unquoted(line: str) -> str:
    found = _PREFIX.match(line)
    return line[found.end() :] if found else line


def _own_lines(body: str) -> list[str]:
    """The post's own lines: not quoted, not an attribution ("In article <…>" up to "X writes:", at most three
    lines), and before the signature (a line ``--``)."""
    lines, attribution = [], 0
    for line in body.splitlines():
        if line.strip() == "--":
            break
        if attribution or _ATTRIBUTION.search(line):
            ends = line.rstrip().endswith(":")
            attribution = 0 if ends else (attribution or 3) - 1
            continue
        if not _level(line):
            lines.append(line)
    return lines


def _parents(bodies: dict[str, str]) -> dict[str, str]:
    """reply id → the id of the one post whose own lines hold most of its once-quoted lines (ambiguous: none)."""
    holders: dict[str, set[str]] = defaultdict(set)
    for doc_id, body in bodies.items():
        for line in body.splitlines():
            key = _norm(line)
            if not _level(line) and len(key) >= MIN_LINE_CHARS:
                holders[key].add(doc_id)
    out = {}
    for doc_id, body in bodies.items():
        quoted = [_norm(_unquoted(line)) for line in body.splitlines() if _level(line) == 1]
        quoted = [q for q in quoted if len(q) >= MIN_LINE_CHARS]
        counts = Counter(p for q in quoted for p in holders.get(q, ()) if p != doc_id)
        if not counts:
            continue
        best = max(counts.values())
        top = [p for p, n in counts.items() if n == best]
        if len(top) == 1 and best >= MIN_QUOTED and 2 * best >= len(quoted):
            out[doc_id] = top[0]
    return out


def _write_gz(path: Path, rows: list[dict]) -> None:
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0, compresslevel=9) as out:
        for row in rows:
            out.write((json.dumps(row, ensure_ascii=False) + "\n").encode())
    path.write_bytes(buffer.getvalue())


def build(source: Path, out: Path = HERE) -> dict[str, int]:
    """Write the set from `source` into `out`; returns its counts."""
    bodies = {doc_id: raw.partition("\n\n")[2].strip() for doc_id, raw in _posts(source)}
    fits = {d for d, body in bodies.items() if MIN_WORDS <= len(body.split()) <= MAX_WORDS}
    quoting = _parents(bodies)
    edges = {reply: parent for reply, parent in quoting.items() if parent in fits}
    parents = set(edges.values())
    replies = sorted(r for r in edges if r not in parents)  # a post both quoted and quoting is a document
    queried = set(replies)
    answered = queried | {r for r, p in quoting.items() if p in queried}  # a query, or a reply to one
    others = sorted(fits - parents - answered)
    corpus_ids = parents | set(random.Random(SEED).sample(others, min(len(others), max(0, CORPUS_SIZE - len(parents)))))
    corpus = [{"_id": d, "title": "", "text": bodies[d]} for d in sorted(corpus_ids)]
    known = {key for row in corpus for line in row["text"].splitlines() if len(key := _norm(line)) >= MATCH_CHARS}
    queries, targets = [], {}
    for reply in replies:
        own = [line for line in _own_lines(bodies[reply]) if _norm(line) not in known]
        words = " ".join(own).split()
        if len(words) >= MIN_QUERY_WORDS:
            qid = f"q{len(queries):04d}"
            queries.append({"_id": qid, "text": " ".join(words[:QUERY_WORDS])})
            targets[qid] = edges[reply]
    order = sorted(set(targets.values()))
    random.Random(SEED).shuffle(order)
    dev = set(order[: len(order) // 2])
    out.joinpath("qrels").mkdir(parents=True, exist_ok=True)
    _write_gz(out / "corpus.jsonl.gz", corpus)
    _write_gz(out / "queries.jsonl.gz", queries)
    counts = {"documents": len(corpus), "parents": len(parents), "queries": len(queries)}
    for split in ("dev", "test"):
        lines = ["query-id\tcorpus-id\tscore"]
        lines += [f"{q}\t{doc}\t1" for q, doc in targets.items() if (doc in dev) == (split == "dev")]
        (out / "qrels" / f"{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
        counts[split] = len(lines) - 1
    return counts


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="the 20news-bydate-train folder, or a JSON-lines file of its posts")
    print(build(parser.parse_args().source))
