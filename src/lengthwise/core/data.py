"""Text pairs for the audit: the embedded probe set, STS-style TSV/CSV, JSONL pairs and BEIR corpora.

Every reader names the file and line of a malformed row. Files may be gzipped (``.gz``).
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import resources
from itertools import combinations
from pathlib import Path
from typing import Any

from lengthwise.core.tokens import MAX_TEXT_CHARS

__all__ = [
    "DataFormatError",
    "PairSet",
    "TextPair",
    "beir_documents",
    "checked_text",
    "default_probe_pairs",
    "jsonl_objects",
    "open_text",
    "read_pairs",
]

_FIRST_KEYS = ("text1", "sentence1", "sentence_A", "sentence_a", "anchor", "premise", "query", "text_a")
_SECOND_KEYS = ("text2", "sentence2", "sentence_B", "sentence_b", "positive", "hypothesis", "text_b")
_SCORE_KEYS = ("score", "relatedness", "relatedness_score", "similarity", "label")


class DataFormatError(ValueError):
    """A data file could not be read; the message names the file, the line and the fix."""


@dataclass(frozen=True)
class TextPair:
    """Two texts, an optional gold score and an optional kind (e.g. ``same_topic`` / ``random``)."""

    text1: str
    text2: str
    score: float | None = None
    kind: str | None = None


@dataclass(frozen=True)
class PairSet:
    """Pairs plus where they came from; `sha256` hashes the pair texts, so any format gives one fingerprint."""

    pairs: tuple[TextPair, ...]
    source: str
    fmt: str
    sha256: str = field(init=False)

    def __post_init__(self) -> None:
        if not self.pairs:
            raise DataFormatError(f"{self.source}: no text pairs found; check the file format")
        digest = hashlib.sha256()
        for pair in self.pairs:
            digest.update(f"{pair.text1}\t{pair.text2}\n".encode())
        object.__setattr__(self, "sha256", digest.hexdigest())

    def __len__(self) -> int:
        return len(self.pairs)

    def sample(self, n: int, seed: int = 0) -> PairSet:
        """At most n pairs, drawn without replacement (seeded), in their original order."""
        if n < 1:
            raise ValueError(f"max pairs {n} must be ≥ 1")
        if n >= len(self):
            return self
        keep = sorted(random.Random(seed).sample(range(len(self)), n))
        return PairSet(tuple(self.pairs[i] for i in keep), f"{self.source} (sample of {n}, seed {seed})", self.fmt)

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


def open_text(path: Path) -> io.TextIOBase:
    """Open a UTF-8 text file (a leading BOM is dropped), gunzipping `.gz` files on the fly."""
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8-sig", newline="")
    return open(path, encoding="utf-8-sig", newline="")


def checked_text(path: Path, line: int, text: object, which: str) -> str:
    """`text` stripped, or a `DataFormatError` naming file and line when it is empty or over the size limit."""
    if not isinstance(text, str) or not text.strip():
        raise DataFormatError(f"{path}:{line}: {which} is empty or whitespace-only; remove the row or fill it in")
    if len(text) > MAX_TEXT_CHARS:
        raise DataFormatError(
            f"{path}:{line}: {which} has {len(text):,} characters (limit {MAX_TEXT_CHARS:,}); split or cut it"
        )
    return text.strip()


def _score(path: Path, line: int, value: object) -> float | None:
    if value is None or value == "":
        return None
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise DataFormatError(f"{path}:{line}: score {value!r} is not a number; fix or drop the column") from None


def jsonl_objects(path: Path, what: str = "a JSON object") -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line of a JSONL file; bad lines raise naming file and line."""
    with open_text(path) as handle:
        for line_no, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise DataFormatError(
                    f"{path}:{line_no}: not valid JSON ({err.msg}); one JSON object per line"
                ) from None
            if not isinstance(row, dict):
                raise DataFormatError(f"{path}:{line_no}: expected {what}")
            yield line_no, row


def _read_jsonl(path: Path) -> Iterator[TextPair]:
    for line_no, row in jsonl_objects(path, "a JSON object with two text fields"):
        first = next((k for k in _FIRST_KEYS if k in row), None)
        second = next((k for k in _SECOND_KEYS if k in row), None)
        if first is None or second is None:
            raise DataFormatError(f"{path}:{line_no}: no text pair; use fields text1/text2 (or sentence1/sentence2)")
        score_key = next((k for k in _SCORE_KEYS if k in row), None)
        yield TextPair(
            checked_text(path, line_no, row[first], first),
            checked_text(path, line_no, row[second], second),
            _score(path, line_no, row[score_key]) if score_key else None,
            str(row["kind"]) if "kind" in row else None,
        )


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _read_delimited(path: Path) -> Iterator[TextPair]:
    """STS-B (7+ tab columns, score in column 5), a header with sentence columns, or bare `s1<TAB>s2[<TAB>score]`."""
    name = path.name.removesuffix(".gz")
    rows = _csv_rows(path) if name.endswith(".csv") and not _looks_tab_separated(path) else _tab_rows(path)
    header: dict[str, int] | None = None
    for line_no, row in rows:
        if not row or not any(cell.strip() for cell in row):
            continue
        if header is None and line_no == 1 and not any(_is_number(cell) for cell in row):
            lowered = {cell.strip(): i for i, cell in enumerate(row)}
            if any(k in lowered for k in _FIRST_KEYS):
                header = lowered
                continue
        yield _delimited_row(path, line_no, row, header)


def _tab_rows(path: Path) -> Iterator[tuple[int, list[str]]]:
    """Tab-separated rows with no quoting (STS files contain bare quotes), numbered by file line."""
    with open_text(path) as handle:
        for line_no, line in enumerate(handle, start=1):
            yield line_no, line.rstrip("\r\n").split("\t")


def _csv_rows(path: Path) -> Iterator[tuple[int, list[str]]]:
    """Comma-separated rows with standard quoting, numbered by the line where each row starts."""
    csv.field_size_limit(max(csv.field_size_limit(), 4 * MAX_TEXT_CHARS))  # let the length check name the row
    with open_text(path) as handle:
        reader = csv.reader(handle)
        start = 1
        while True:
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as err:
                raise DataFormatError(f"{path}:{start}: malformed CSV ({err}); check quoting") from None
            yield start, row
            start = reader.line_num + 1


def _looks_tab_separated(path: Path) -> bool:
    with open_text(path) as handle:
        first = handle.readline()
    return "\t" in first


def _delimited_row(path: Path, line_no: int, row: list[str], header: dict[str, int] | None) -> TextPair:
    if header is not None:
        first = next(header[k] for k in _FIRST_KEYS if k in header)
        second = next((header[k] for k in _SECOND_KEYS if k in header), None)
        score = next((header[k] for k in _SCORE_KEYS if k in header), None)
        if second is None or len(row) <= max(first, second):
            raise DataFormatError(f"{path}:{line_no}: row has {len(row)} columns; expected the header's text columns")
        value = row[score] if score is not None and score < len(row) else None
        return TextPair(
            checked_text(path, line_no, row[first], "first text"),
            checked_text(path, line_no, row[second], "second text"),
            _score(path, line_no, value),
        )
    if len(row) >= 7 and _is_number(row[4]):  # STS benchmark: genre, file, year, id, score, s1, s2[, sources]
        return TextPair(
            checked_text(path, line_no, row[5], "sentence1"),
            checked_text(path, line_no, row[6], "sentence2"),
            float(row[4]),
        )
    if len(row) in (2, 3):
        gold = _score(path, line_no, row[2]) if len(row) == 3 else None
        return TextPair(
            checked_text(path, line_no, row[0], "first text"),
            checked_text(path, line_no, row[1], "second text"),
            gold,
        )
    raise DataFormatError(
        f"{path}:{line_no}: cannot read a pair from {len(row)} columns; expected STS-B rows "
        "(genre, file, year, id, score, s1, s2), `s1<TAB>s2[<TAB>score]` or a header naming sentence1/sentence2"
    )


def beir_documents(folder: Path) -> dict[str, str]:
    """A BEIR corpus as id → ``title + " " + text`` (METHODS §4), empty documents dropped."""
    corpus = next((folder / name for name in ("corpus.jsonl", "corpus.jsonl.gz") if (folder / name).exists()), None)
    if corpus is None:
        raise DataFormatError(f"{folder}: no corpus.jsonl(.gz); a BEIR folder holds corpus, queries and qrels/")
    documents: dict[str, str] = {}
    with open_text(corpus) as handle:
        for line_no, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                doc_id, text, title = str(row["_id"]), row.get("text", ""), row.get("title", "")
            except (json.JSONDecodeError, KeyError, TypeError, AttributeError):
                raise DataFormatError(f"{corpus}:{line_no}: expected a JSON object with _id, title and text") from None
            full = f"{title} {text}".strip() if title else str(text).strip()
            if full:
                documents[doc_id] = full
    return documents


def _beir_groups(folder: Path, documents: dict[str, str]) -> list[list[str]]:
    """Documents relevant to one query, per query (qrels in any split)."""
    qrels = sorted((folder / "qrels").glob("*.tsv")) if (folder / "qrels").is_dir() else []
    if not qrels:
        raise DataFormatError(f"{folder}: no qrels/*.tsv; same-topic pairs come from documents relevant to one query")
    groups: dict[str, list[str]] = {}
    for path in qrels:
        with open_text(path) as handle:
            for line_no, line in enumerate(handle, start=1):
                cells = line.rstrip("\n").split("\t")
                if line_no == 1 and not _is_number(cells[-1]):
                    continue
                if len(cells) < 3 or not _is_number(cells[-1]):
                    raise DataFormatError(f"{path}:{line_no}: expected `query-id<TAB>corpus-id<TAB>score`")
                if float(cells[-1]) > 0 and cells[-2] in documents:
                    members = groups.setdefault(cells[0], [])
                    if cells[-2] not in members:
                        members.append(cells[-2])
    return [members for members in groups.values() if len(members) > 1]


def _read_beir(folder: Path, max_pairs: int, seed: int) -> list[TextPair]:
    """Same-topic pairs (two documents relevant to one query) and as many random document pairs."""
    documents = beir_documents(folder)
    rng = random.Random(seed)
    same = [pair for group in _beir_groups(folder, documents) for pair in combinations(sorted(group), 2)]
    rng.shuffle(same)
    same = same[: max_pairs // 2]
    related = {frozenset(pair) for pair in same}
    ids = sorted(documents)
    randoms: list[tuple[str, str]] = []
    while len(randoms) < max(len(same), 1) and len(ids) > 1:
        a, b = rng.sample(ids, 2)
        if frozenset((a, b)) not in related:
            randoms.append((a, b))
    return [TextPair(documents[a], documents[b], None, "same_topic") for a, b in same] + [
        TextPair(documents[a], documents[b], None, "random") for a, b in randoms
    ]


def read_pairs(path: str | Path, *, max_pairs: int = 2000, seed: int = 0) -> PairSet:
    """Read text pairs from a file or BEIR folder; the format follows from the name (see module docs).

    `max_pairs` and `seed` apply to BEIR folders, whose same-topic and random pairs are drawn.
    """
    path = Path(path)
    if path.is_dir():
        return PairSet(tuple(_read_beir(path, max_pairs, seed)), str(path), "beir")
    if not path.exists():
        raise DataFormatError(f"{path}: no such file or directory")
    name = path.name.removesuffix(".gz")
    if name.endswith((".jsonl", ".json")):
        return PairSet(tuple(_read_jsonl(path)), str(path), "jsonl")
    if name.endswith((".tsv", ".csv", ".txt")):
        return PairSet(tuple(_read_delimited(path)), str(path), "delimited")
    raise DataFormatError(
        f"{path}: unknown pairs format; use .jsonl, .tsv, .csv, .txt (optionally .gz) or a BEIR folder"
    )


def default_probe_pairs() -> PairSet:
    """The embedded probe set: English pairs written for lengthwise, of varied topic, relatedness and length."""
    resource = resources.files("lengthwise") / "probes" / "default_pairs.jsonl"
    with resources.as_file(resource) as path:
        pairs = tuple(_read_jsonl(path))
    return PairSet(pairs, "lengthwise:probes/default_pairs.jsonl", "jsonl")
