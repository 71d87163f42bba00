"""Synthetic passkey and needle retrieval tasks built from any haystack text, seeded (LongEmbed-style, METHODS §5).

For each length L (tokens of the model's tokenizer, special tokens excluded) one stretch of the haystack of L
tokens is drawn, starting at a sentence start; each of the group's documents is that stretch with its own needle
written over it at a sentence start, at a recorded depth (0 = start, 1 = end). Documents of a group therefore
differ only in their needles, as in LongEmbed, and every document has exactly L tokens. Each needle has one query
("what is the pass key of Ada?", "what is the best thing to do in Oslo?") whose one relevant document is its own.

Written as a BEIR folder (corpus.jsonl, queries.jsonl, qrels/test.tsv) whose rows also carry ``group`` (the
length) and, for queries, ``depth``; ``longdoc.json`` records the task, seed, lengths and the haystack's hash.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from lengthwise.core.results import write_bytes_atomic, write_json_atomic
from lengthwise.longdoc.config import LongDocError

__all__ = [
    "DEFAULT_LENGTHS",
    "SyntheticItem",
    "SyntheticSet",
    "make_synthetic",
    "read_synthetic",
    "write_synthetic",
]

Task = Literal["passkey", "needle"]
DEFAULT_LENGTHS = (256, 512, 1024, 2048, 4096, 8192, 16384, 32768)
META_FILE = "longdoc.json"

_NAMES = [
    "Ada",
    "Ali",
    "Amara",
    "Anton",
    "Aiko",
    "Bea",
    "Boris",
    "Carmen",
    "Chen",
    "Dario",
    "Dmitri",
    "Elena",
    "Emeka",
    "Farah",
    "Felix",
    "Greta",
    "Hamid",
    "Hana",
    "Igor",
    "Ines",
    "Ivan",
    "Jonas",
    "Juno",
    "Kai",
    "Kiran",
    "Lars",
    "Leila",
    "Luca",
    "Maya",
    "Mateo",
    "Nadia",
    "Nils",
    "Omar",
    "Olga",
    "Pablo",
    "Priya",
    "Quinn",
    "Rafael",
    "Rosa",
    "Sami",
    "Sofia",
    "Tariq",
    "Tomas",
    "Uma",
    "Vera",
    "Viktor",
    "Wanda",
    "Xavier",
    "Yara",
    "Yusuf",
    "Zara",
    "Zoltan",
    "Agnes",
    "Bruno",
    "Celia",
    "Dante",
    "Edith",
    "Fiona",
    "Gustav",
    "Helga",
    "Isaac",
    "Julia",
    "Kenji",
    "Lorna",
]
_CITIES = [
    "Oslo",
    "Lima",
    "Cairo",
    "Quito",
    "Dublin",
    "Hanoi",
    "Nairobi",
    "Lisbon",
    "Prague",
    "Havana",
    "Seoul",
    "Dakar",
    "Bogota",
    "Vienna",
    "Manila",
    "Tunis",
    "Riga",
    "Accra",
    "Sydney",
    "Denver",
    "Kyoto",
    "Porto",
    "Bergen",
    "Malaga",
    "Krakow",
    "Zurich",
    "Munich",
    "Austin",
    "Boston",
    "Seattle",
    "Tehran",
    "Baghdad",
    "Kabul",
    "Lhasa",
    "Hobart",
    "Darwin",
    "Perth",
    "Quebec",
    "Halifax",
    "Calgary",
    "Tallinn",
    "Vilnius",
    "Sofia",
    "Skopje",
    "Tirana",
    "Malmo",
    "Aarhus",
    "Turku",
    "Tampere",
    "Gdansk",
    "Poznan",
    "Brno",
    "Graz",
    "Linz",
    "Basel",
    "Geneva",
    "Lyon",
    "Nantes",
    "Lille",
    "Bilbao",
    "Seville",
    "Genoa",
    "Turin",
    "Naples",
]
_ACTIVITIES = (
    "eat a sandwich in the old harbour on a sunny morning",
    "ride the cable car up to the hill at sunset",
    "swim in the cold lake before breakfast",
    "read a book in the botanical garden",
    "buy warm bread at the night market",
    "walk along the river wall in the evening",
    "listen to street musicians in the main square",
    "climb the cathedral tower at noon",
    "drink coffee at the tiny station cafe",
    "rent a bicycle and follow the coastal path",
    "watch the fishing boats come in at dawn",
    "visit the museum of old maps",
)


@dataclass(frozen=True)
class SyntheticItem:
    """One document with its needle and the query that asks for it."""

    doc_id: str
    query_id: str
    group: int  # the length group: tokens in the document (special tokens excluded)
    depth: float  # where the needle starts, as a fraction of the positions it could start at
    text: str
    query: str
    needle: str


@dataclass(frozen=True)
class SyntheticSet:
    """A generated task: its items and how they were made."""

    task: Task
    items: tuple[SyntheticItem, ...]
    meta: dict[str, Any]

    def groups(self) -> list[int]:
        return sorted({item.group for item in self.items})


def _needle(task: Task, index: int, rng: random.Random, entities: Sequence[str]) -> tuple[str, str]:
    entity = entities[index]
    if task == "passkey":
        key = rng.randint(10000, 99999)
        return f"{entity}'s pass key is {key}. Remember it. {key} is the pass key of {entity}.", (
            f"What is the pass key of {entity}?"
        )
    activity = rng.choice(_ACTIVITIES)
    return f"The best thing to do in {entity} is to {activity}.", f"What is the best thing to do in {entity}?"


def _haystack_ids(tokenizer, sentences: Sequence[str]) -> tuple[list[int], list[int]]:
    """Token ids of the haystack (no special tokens) and the positions where its sentences start."""
    texts = [s for s in sentences if s.strip()]
    encoded = tokenizer(texts, add_special_tokens=False, verbose=False)["input_ids"] if texts else []
    ids: list[int] = []
    starts: list[int] = []
    for sentence in encoded:
        if sentence:
            starts.append(len(ids))
            ids.extend(sentence)
    if not ids:
        raise LongDocError("the haystack has no text; pass a file with sentences or paragraphs (one per line)")
    return ids, starts


def make_synthetic(
    task: Task,
    haystack: Sequence[str],
    tokenizer,
    *,
    lengths: Sequence[int] = DEFAULT_LENGTHS,
    per_length: int = 50,
    seed: int = 0,
) -> SyntheticSet:
    """Generate `per_length` documents for each length from `haystack` sentences, with needles and queries.

    The haystack is repeated when it is shorter than the longest length (recorded in ``meta``). A document's text is
    the tokenizer's decoding of its ids; ``meta["round_trip_exact"]`` counts those that re-tokenize to the same ids.
    """
    if task not in ("passkey", "needle"):
        raise LongDocError("use passkey or needle", field="task", value=task)
    entities = _NAMES if task == "passkey" else _CITIES
    if not 1 <= per_length <= len(entities):
        raise LongDocError(
            f"use 1 to {len(entities)} (distinct needles per length)", field="per_length", value=per_length
        )
    rng = random.Random(seed)
    ids, starts = _haystack_ids(tokenizer, haystack)
    base = len(ids)
    repeats = 1 if base >= max(lengths) else -(-max(lengths) // base) + 1
    ids = ids * repeats
    starts = [start + r * base for r in range(repeats) for start in starts]
    items: list[SyntheticItem] = []
    exact = 0
    for length in sorted(set(lengths)):
        if length < 32:
            raise LongDocError("documents need at least 32 tokens to hold a needle", field="lengths", value=length)
        origin = rng.choice([s for s in starts if s + length <= len(ids)])
        stretch = ids[origin : origin + length]
        local_starts = [s - origin for s in starts if origin <= s < origin + length]
        order = rng.sample(range(len(entities)), per_length)
        for slot, entity_index in enumerate(order):
            needle, query = _needle(task, entity_index, rng, entities)
            needle_ids = tokenizer(needle, add_special_tokens=False)["input_ids"]
            if len(needle_ids) >= length:
                raise LongDocError(f"shorter than the needle ({len(needle_ids)} tokens)", field="lengths", value=length)
            room = length - len(needle_ids)
            target = rng.random() * room
            position = min((s for s in local_starts if s <= room), key=lambda s: abs(s - target), default=0)
            doc = stretch[:position] + needle_ids + stretch[position + len(needle_ids) :]
            text = tokenizer.decode(doc, clean_up_tokenization_spaces=True)
            exact += tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"] == doc
            items.append(
                SyntheticItem(
                    doc_id=f"{task}-{length}-{slot}",
                    query_id=f"q-{task}-{length}-{slot}",
                    group=length,
                    depth=round(position / room, 4) if room else 0.0,
                    text=text,
                    query=query,
                    needle=needle,
                )
            )
    meta = {
        "task": task,
        "seed": seed,
        "lengths": sorted(set(lengths)),
        "per_length": per_length,
        "haystack_sha256": hashlib.sha256("\n".join(haystack).encode()).hexdigest(),
        "haystack_tokens": base,
        "haystack_repeats": repeats,
        "tokenizer": getattr(tokenizer, "name_or_path", type(tokenizer).__name__),
        "round_trip_exact": exact,
        "n_documents": len(items),
        "protocol": "rank each query only against the documents of its own length group; Acc@1 per length",
    }
    return SyntheticSet(task, tuple(items), meta)


def _jsonl(rows: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode("utf-8")


def write_synthetic(data: SyntheticSet, folder: str | Path) -> Path:
    """Write `data` as a BEIR folder with length groups (see the module docstring); each file atomically."""
    folder = Path(folder)
    _check_target(folder)
    (folder / META_FILE).unlink(missing_ok=True)  # written last: a folder without it is refused as unfinished
    corpus = [{"_id": i.doc_id, "title": "", "text": i.text, "group": i.group} for i in data.items]
    queries = [{"_id": i.query_id, "text": i.query, "group": i.group, "depth": i.depth} for i in data.items]
    qrels = "query-id\tcorpus-id\tscore\n" + "".join(f"{i.query_id}\t{i.doc_id}\t1\n" for i in data.items)
    write_bytes_atomic(folder / "corpus.jsonl", _jsonl(corpus))
    write_bytes_atomic(folder / "queries.jsonl", _jsonl(queries))
    write_bytes_atomic(folder / "qrels" / "test.tsv", qrels.encode("utf-8"))
    write_json_atomic(folder / META_FILE, {**data.meta, "needles": [asdict(i) | {"text": None} for i in data.items]})
    return folder


_SET_NAMES = frozenset({"corpus.jsonl", "queries.jsonl", "qrels", META_FILE})


def _check_target(folder: Path) -> None:
    """Refuse a folder that holds anything but an earlier synthetic task, before a file of it is written."""
    if folder.exists() and not folder.is_dir():
        raise LongDocError("exists and is not a directory; pass a directory path", field="out", value=str(folder))
    if folder.is_dir():
        foreign = sorted(p.name for p in folder.iterdir() if p.name not in _SET_NAMES and not p.name.endswith(".tmp"))
        if foreign:
            raise LongDocError(
                f"holds files that are not part of a synthetic task ({', '.join(foreign[:3])}); pass a new or empty "
                "directory, or one that `lengthwise longdoc synth` wrote",
                field="out",
                value=str(folder),
            )


def read_synthetic(folder: str | Path) -> SyntheticSet:
    """Read a folder written by `write_synthetic`; raises `LongDocError` naming the missing file."""
    folder = Path(folder)
    meta_path = folder / META_FILE
    if not meta_path.is_file():
        raise LongDocError(f"{folder}: no {META_FILE}; write the task with `lengthwise longdoc synth` first")
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    texts: dict[str, str] = {}
    with (folder / "corpus.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                row = json.loads(line)
                texts[row["_id"]] = row["text"]
    items = tuple(SyntheticItem(**{**needle, "text": texts[needle["doc_id"]]}) for needle in meta.pop("needles"))
    return SyntheticSet(meta["task"], items, meta)
