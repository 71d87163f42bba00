"""Text pairs for the audit: the embedded probe set, STS-style TSV/CSV, JSONL pairs, grouped documents and BEIR.

Every reader names the file and line of a malformed row (`DataFormatError`) and checks every text before any
model work. Files may be gzipped (``.gz``). File reading itself lives in `lengthwise.core._textio`.
"""

from __future__ import annotations

import hashlib
import random
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from importlib import resources
from itertools import combinations
from pathlib import Path

from lengthwise.core._textio import checked_text, delimited_rows, jsonl_objects, row_id
from lengthwise.core.errors import DataFormatError, SettingError

__all__ = [
    "GROUP_KEYS",
    "PairSet",
    "TextPair",
    "beir_documents",
    "default_probe_pairs",
    "read_pairs",
    "read_qrels",
]

_FIRST_KEYS = ("text1", "sentence1", "sentence_A", "sentence_a", "anchor", "premise", "query", "text_a")
_SECOND_KEYS = ("text2", "sentence2", "sentence_B", "sentence_b", "positive", "hypothesis", "text_b")
_SCORE_KEYS = ("score", "relatedness", "relatedness_score", "similarity", "label")
GROUP_KEYS = ("group", "topic")  # a document field naming its group: documents of one group form same-group pairs
_QRELS_HEADS = {"query-id", "query_id", "qid", "query", "score", "relevance", "rel"}
_GROUP_HINT = "add a 'group' (or 'topic') field to the documents to pair documents of one group, or pass a pairs file"


@dataclass(frozen=True)
class TextPair:
    """Two texts, an optional gold score and an optional kind (e.g. ``same_topic`` / ``random``).

    `origin` says where the pair was read (``file:line``), for error messages; it takes no part in equality.
    """

    text1: str
    text2: str
    score: float | None = None
    kind: str | None = None
    origin: str | None = field(default=None, compare=False)


@dataclass(frozen=True)
class PairSet:
    """Pairs plus where they came from; `sha256` hashes the pair texts, so any format gives one fingerprint."""

    pairs: tuple[TextPair, ...]
    source: str
    fmt: str
    sha256: str = field(init=False)

    def __post_init__(self) -> None:
        if not self.pairs:
            raise DataFormatError(None, None, f"{self.source}: no text pairs found; check the file format")
        digest = hashlib.sha256()
        for pair in self.pairs:
            digest.update(f"{pair.text1}\t{pair.text2}\n".encode())
        object.__setattr__(self, "sha256", digest.hexdigest())

    def __len__(self) -> int:
        return len(self.pairs)

    def sample(self, n: int, seed: int = 0) -> PairSet:
        """At most n pairs, drawn without replacement (seeded), in their original order."""
        if n < 1:
            raise SettingError("n", n, "a sample needs at least 1 pair")
        if n >= len(self):
            return self
        keep = sorted(random.Random(seed).sample(range(len(self)), n))
        return PairSet(tuple(self.pairs[i] for i in keep), f"{self.source} (sample of {n}, seed {seed})", self.fmt)

    def names(self, side: int) -> list[str]:
        """A name for each pair's text on `side` (1 or 2) for error messages: ``file:line (text1)`` or ``pair #i``."""
        return [f"{pair.origin or f'pair #{i}'} (text{side})" for i, pair in enumerate(self.pairs)]

    def describe(self) -> dict[str, object]:
        kinds: dict[str, int] = {}
        for pair in self.pairs:
            if pair.kind is not None:
                kinds[pair.kind] = kinds.get(pair.kind, 0) + 1
        return {
            "source": self.source,
            "format": self.fmt,
            "n_pairs": len(self),
            "sha256": self.sha256,
            "kinds": kinds,
        }


def _score(path: Path, line: int, value: object) -> float | None:
    if value is None or value == "":
        return None
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise DataFormatError(
            None, None, f"{path}:{line}: score {value!r} is not a number; fix or drop the column"
        ) from None


def _read_jsonl(path: Path, max_pairs: int, seed: int) -> tuple[list[TextPair], str]:
    """Pairs from JSONL rows with two text fields, or same-group pairs from documents with `text` and a group."""
    rows = list(jsonl_objects(path, "a JSON object with two text fields"))
    if rows and _is_grouped_document(rows[0][1]):
        documents: dict[str, str] = {}
        origins: dict[str, str] = {}
        groups: dict[str, list[str]] = defaultdict(list)
        for line_no, row in rows:
            if not _is_grouped_document(row):
                raise DataFormatError(
                    None, None, f"{path}:{line_no}: expected 'text' and 'group' (or 'topic') like line 1"
                )
            doc_id = str(line_no)
            documents[doc_id] = checked_text(path, line_no, row["text"], "text")
            origins[doc_id] = f"{path}:{line_no}"
            groups[str(row[next(k for k in GROUP_KEYS if k in row)])].append(doc_id)
        return _grouped_pairs(path, documents, origins, list(groups.values()), max_pairs, seed, "same_group"), "grouped"
    pairs = []
    for line_no, row in rows:
        first = next((k for k in _FIRST_KEYS if k in row), None)
        second = next((k for k in _SECOND_KEYS if k in row), None)
        if first is None or second is None:
            raise DataFormatError(
                None,
                None,
                f"{path}:{line_no}: no text pair; use fields text1/text2 (or sentence1/sentence2), "
                "or documents with 'text' and 'group'",
            )
        score_key = next((k for k in _SCORE_KEYS if k in row), None)
        pairs.append(
            TextPair(
                checked_text(path, line_no, row[first], first),
                checked_text(path, line_no, row[second], second),
                _score(path, line_no, row[score_key]) if score_key else None,
                str(row["kind"]) if "kind" in row else None,
                f"{path}:{line_no}",
            )
        )
    return pairs, "jsonl"


def _is_grouped_document(row: dict[str, object]) -> bool:
    return "text" in row and any(k in row for k in GROUP_KEYS) and not any(k in row for k in _FIRST_KEYS)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _read_delimited(path: Path) -> Iterator[TextPair]:
    """STS-B (7+ tab columns, score in column 5), a header with sentence columns, or bare `s1<TAB>s2[<TAB>score]`."""
    header: dict[str, int] | None = None
    for line_no, row in delimited_rows(path):
        if not row or not any(cell.strip() for cell in row):
            continue
        if header is None and line_no == 1 and not any(_is_number(cell) for cell in row):
            lowered = {cell.strip(): i for i, cell in enumerate(row)}
            if any(k in lowered for k in _FIRST_KEYS):
                header = lowered
                continue
        yield _delimited_row(path, line_no, row, header)


def _delimited_row(path: Path, line_no: int, row: list[str], header: dict[str, int] | None) -> TextPair:
    origin = f"{path}:{line_no}"
    if header is not None:
        first = next(header[k] for k in _FIRST_KEYS if k in header)
        second = next((header[k] for k in _SECOND_KEYS if k in header), None)
        score = next((header[k] for k in _SCORE_KEYS if k in header), None)
        if second is None or len(row) <= max(first, second):
            raise DataFormatError(
                None, None, f"{path}:{line_no}: row has {len(row)} columns; expected the header's text columns"
            )
        if len(row) > len(header):
            raise DataFormatError(
                None,
                None,
                f"{path}:{line_no}: row has {len(row)} columns, the header {len(header)}; quote fields that hold "
                "the delimiter",
            )
        value = row[score] if score is not None and score < len(row) else None
        return TextPair(
            checked_text(path, line_no, row[first], "first text"),
            checked_text(path, line_no, row[second], "second text"),
            _score(path, line_no, value),
            origin=origin,
        )
    if len(row) >= 7 and _is_number(row[4]):  # STS benchmark: genre, file, year, id, score, s1, s2[, sources]
        return TextPair(
            checked_text(path, line_no, row[5], "sentence1"),
            checked_text(path, line_no, row[6], "sentence2"),
            float(row[4]),
            origin=origin,
        )
    if len(row) in (2, 3):
        gold = _score(path, line_no, row[2]) if len(row) == 3 else None
        return TextPair(
            checked_text(path, line_no, row[0], "first text"),
            checked_text(path, line_no, row[1], "second text"),
            gold,
            origin=origin,
        )
    raise DataFormatError(
        None,
        None,
        f"{path}:{line_no}: cannot read a pair from {len(row)} columns; expected STS-B rows "
        "(genre, file, year, id, score, s1, s2), `s1<TAB>s2[<TAB>score]` or a header naming sentence1/sentence2",
    )


def _corpus_path(folder: Path) -> Path:
    corpus = next((folder / name for name in ("corpus.jsonl", "corpus.jsonl.gz") if (folder / name).exists()), None)
    if corpus is None:
        raise DataFormatError(
            None, None, f"{folder}: no corpus.jsonl(.gz); a BEIR folder holds corpus, queries and qrels/"
        )
    return corpus


def _corpus_rows(folder: Path) -> Iterator[tuple[Path, int, str, str, str | None]]:
    """(corpus path, line, id, ``title + " " + text``, group or None) per non-empty document of a BEIR corpus."""
    corpus = _corpus_path(folder)
    for line_no, row in jsonl_objects(corpus, "a JSON object with _id, title and text"):
        if "_id" not in row:
            raise DataFormatError(None, None, f"{corpus}:{line_no}: expected a JSON object with _id, title and text")
        text, title = row.get("text", ""), row.get("title", "")
        full = f"{title} {text}".strip() if title else str(text).strip()
        if full:
            full = checked_text(corpus, line_no, full, "document")
            group = next((str(row[k]) for k in GROUP_KEYS if row.get(k) not in (None, "")), None)
            yield corpus, line_no, row_id(corpus, line_no, row, None), full, group


def beir_documents(folder: Path) -> dict[str, str]:
    """A BEIR corpus as id → ``title + " " + text`` (METHODS §4), empty documents dropped."""
    return {doc_id: text for _, _, doc_id, text, _ in _corpus_rows(Path(folder))}


def read_qrels(path: str | Path) -> dict[str, dict[str, int]]:
    """BEIR or TREC relevance judgements as ``{query_id: {doc_id: relevance}}`` (the one qrels reader).

    Rows are ``query-id<TAB>corpus-id<TAB>score`` (BEIR, optional header) or ``qid<TAB>iteration<TAB>docid<TAB>rel``
    (TREC). A score of 0 or below judges the document not relevant, as trec_eval and pytrec_eval count it (no gain in
    nDCG, not relevant for recall or MAP); it is kept as given. A malformed row, or a (query, document) pair judged
    again with another score, raises `DataFormatError` naming file and line (the same pair with the same score is
    read once).
    """
    path = Path(path)
    qrels: dict[str, dict[str, int]] = defaultdict(dict)
    lines: dict[tuple[str, str], int] = {}  # where each pair was first judged
    for line_no, cells in delimited_rows(path):
        if not any(cell.strip() for cell in cells):
            continue
        if line_no == 1 and (cells[0].strip().lower() in _QRELS_HEADS or cells[-1].strip().lower() in _QRELS_HEADS):
            continue  # header
        query, doc, score = _qrels_row(path, line_no, cells)
        first = qrels[query].get(doc)
        if first is not None and first != score:
            problem = f"judged {score} here and {first} at line {lines[query, doc]}; keep one line per pair"
            raise DataFormatError(None, None, f"{path}:{line_no}: query {query!r} and document {doc!r} {problem}")
        lines.setdefault((query, doc), line_no)
        qrels[query][doc] = score
    return dict(qrels)


def _qrels_row(path: Path, line_no: int, cells: list[str]) -> tuple[str, str, int]:
    """(query id, document id, score) of one qrels row, BEIR's three cells or TREC's four."""
    if len(cells) == 4:  # TREC qrels: qid, iteration, docid, rel
        cells = [cells[0], cells[2], cells[3]]
    try:
        if len(cells) != 3:
            raise ValueError
        return cells[0].strip(), cells[1].strip(), int(float(cells[2]))
    except ValueError:
        raise DataFormatError(None, None, f"{path}:{line_no}: expected `query-id<TAB>corpus-id<TAB>score`") from None


def _qrels_groups(folder: Path, documents: dict[str, str]) -> list[list[str]]:
    """Documents relevant to one query, per query (qrels of every split)."""
    paths = sorted((folder / "qrels").glob("*.tsv*")) if (folder / "qrels").is_dir() else []
    if not paths:
        raise DataFormatError(
            None,
            None,
            f"{folder}: no qrels/*.tsv; same-topic pairs come from documents relevant to one query; {_GROUP_HINT}",
        )
    groups: dict[str, list[str]] = {}
    for path in paths:
        for query, judged in read_qrels(path).items():
            members = groups.setdefault(query, [])
            members.extend(d for d, rel in judged.items() if rel > 0 and d in documents and d not in members)
    return list(groups.values())


def _read_beir(folder: Path, max_pairs: int, seed: int) -> tuple[list[TextPair], str]:
    """Same-group pairs (documents sharing a `group`/`topic` field) or, without one, same-topic pairs (two
    documents relevant to one query), and as many random document pairs."""
    documents: dict[str, str] = {}
    origins: dict[str, str] = {}
    user_groups: dict[str, list[str]] = defaultdict(list)
    for corpus, line_no, doc_id, text, group in _corpus_rows(folder):
        documents[doc_id], origins[doc_id] = text, f"{corpus}:{line_no}"
        if group is not None:
            user_groups[group].append(doc_id)
    if user_groups:
        groups, kind = list(user_groups.values()), "same_group"
    else:
        groups, kind = _qrels_groups(folder, documents), "same_topic"
    return _grouped_pairs(folder, documents, origins, groups, max_pairs, seed, kind), "beir"


def _grouped_pairs(
    source: Path,
    documents: dict[str, str],
    origins: dict[str, str],
    groups: Sequence[Sequence[str]],
    max_pairs: int,
    seed: int,
    kind: str,
) -> list[TextPair]:
    """Up to ``max_pairs // 2`` pairs of documents from one group (seeded) and as many random pairs of documents
    from no common group. A collection where no group holds two documents is an error, not an empty audit."""
    rng = random.Random(seed)
    # two queries (or groups) can share the same two documents: keep each pair once, in first-seen order
    same = list(dict.fromkeys(pair for group in groups for pair in combinations(sorted(set(group)), 2)))
    if not same:
        shape = "every query has one relevant document" if kind == "same_topic" else "every group has one document"
        what = kind.removeprefix("same_")
        raise DataFormatError(None, None, f"{source}: no two documents share a {what} ({shape}); {_GROUP_HINT}")
    rng.shuffle(same)
    same = same[: max(1, max_pairs // 2)]
    member_of: dict[str, set[int]] = defaultdict(set)
    for index, group in enumerate(groups):
        for doc_id in group:
            member_of[doc_id].add(index)
    randoms = _random_pairs(sorted(documents), member_of, len(same), rng)

    def pair(a: str, b: str, what: str) -> TextPair:
        return TextPair(documents[a], documents[b], None, what, f"{origins[a]} & {origins[b]}")

    return [pair(a, b, kind) for a, b in same] + [pair(a, b, "random") for a, b in randoms]


def _random_pairs(
    ids: list[str], member_of: dict[str, set[int]], count: int, rng: random.Random
) -> list[tuple[str, str]]:
    """Up to `count` distinct random pairs of `ids` whose documents share no group, seeded.

    Draws pairs and rejects repeats and same-group pairs; when that stalls (few allowed pairs left, e.g. two
    documents that share a group, or one group holding almost every document) it takes the rest from the full
    list of allowed pairs, so it always ends and never repeats a pair.
    """
    chosen: list[tuple[str, str]] = []
    seen: set[frozenset[str]] = set()

    def allowed(a: str, b: str) -> bool:
        return not (member_of.get(a, set()) & member_of.get(b, set()))

    attempts = 20 * count + 1000
    while len(chosen) < count and attempts > 0 and len(ids) > 1:
        attempts -= 1
        a, b = rng.sample(ids, 2)
        if (key := frozenset((a, b))) not in seen and allowed(a, b):
            seen.add(key)
            chosen.append((a, b))
    if len(chosen) < count:
        rest = [(a, b) for a, b in combinations(ids, 2) if allowed(a, b) and frozenset((a, b)) not in seen]
        chosen += rng.sample(rest, min(count - len(chosen), len(rest)))
    return chosen


def read_pairs(path: str | Path, *, max_pairs: int = 2000, seed: int = 0) -> PairSet:
    """Read text pairs from a file or BEIR folder; the format follows from the name (see module docs).

    `max_pairs` and `seed` apply where pairs are drawn: BEIR folders and JSONL documents with a ``group``.
    """
    path = Path(path)
    if path.is_dir():
        pairs, fmt = _read_beir(path, max_pairs, seed)
        return PairSet(tuple(pairs), str(path), fmt)
    if not path.exists():
        raise DataFormatError(None, None, f"{path}: no such file or directory")
    name = path.name.removesuffix(".gz")
    if name.endswith((".jsonl", ".json")):
        pairs, fmt = _read_jsonl(path, max_pairs, seed)
        return PairSet(tuple(pairs), str(path), fmt)
    if name.endswith((".tsv", ".csv", ".txt")):
        return PairSet(tuple(_read_delimited(path)), str(path), "delimited")
    raise DataFormatError(
        None, None, f"{path}: unknown pairs format; use .jsonl, .tsv, .csv, .txt (optionally .gz) or a BEIR folder"
    )


def default_probe_pairs() -> PairSet:
    """The embedded probe set: English pairs written for lengthwise, of varied topic, relatedness and length."""
    resource = resources.files("lengthwise") / "probes" / "default_pairs.jsonl"
    with resources.as_file(resource) as path:
        pairs, _ = _read_jsonl(path, 2000, 0)
    return PairSet(tuple(pairs), "lengthwise:probes/default_pairs.jsonl", "jsonl")
