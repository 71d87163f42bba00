"""Synthetic passkey and needle retrieval tasks built from any haystack text, seeded (LongEmbed-style, METHODS §5).

Two styles. A document of length group L has L tokens of the model's tokenizer (special tokens excluded; the
realistic style keeps whole sentences, so up to one sentence fewer), holds one needle at a recorded depth
(0 = start, 1 = end), and has one query whose one relevant document is its own.

- ``realistic`` (the default): each document is its own stretch of natural prose (the haystack: essays or
  articles, one paragraph per line), so documents of a group differ in their text, not only in their needles. The
  needle names a person or place that the haystack itself mentions (its proper names, counted in the haystack),
  is one of several natural sentences, and its query is a paraphrase, not the needle's words turned round
  ("Which number is Plato's pass key?" for "For Plato, the pass key was always 48213."). A query therefore also
  matches haystack windows that mention its name or its common words.
- ``simple`` (the first generator, LongEmbed's layout): one stretch per length shared by the group's documents,
  which differ only in their needles; a needle names one of a fixed list of people or cities and the query repeats
  its words ("what is the pass key of Ada?", "what is the best thing to do in Oslo?").

Written as a BEIR folder (corpus.jsonl, queries.jsonl, qrels/test.tsv) whose rows also carry ``group`` (the
length) and, for queries, ``depth``; ``longdoc.json`` records the task, seed, lengths and the haystack's hash.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import numpy as np

from lengthwise.core.results import write_bytes_atomic, write_json_atomic
from lengthwise.longdoc.config import LongDocError

__all__ = [
    "DEFAULT_LENGTHS",
    "STYLES",
    "SyntheticItem",
    "SyntheticSet",
    "check_target",
    "haystack_names",
    "make_synthetic",
    "read_synthetic",
    "write_synthetic",
]

Task = Literal["passkey", "needle"]
Style = Literal["realistic", "simple"]
STYLES = ("realistic", "simple")
DEFAULT_LENGTHS = (256, 512, 1024, 2048, 4096, 8192, 16384, 32768)
META_FILE = "longdoc.json"


def _words() -> dict[str, Any]:
    """The generator's word lists (words.json beside this module, read through importlib.resources as `probes/`
    is): the simple style's people, cities and activities; the realistic style's needle and query templates ({x}:
    the name, {k}: the key); and the words `haystack_names` never takes for a name."""
    return json.loads(resources.files("lengthwise.longdoc.tasks").joinpath("words.json").read_text(encoding="utf-8"))


_WORDS = _words()
_NAMES: list[str] = _WORDS["names"]
_CITIES: list[str] = _WORDS["cities"]
_ACTIVITIES: tuple[str, ...] = tuple(_WORDS["activities"])


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


# --- the realistic style ------------------------------------------------------------------------------------------
# Needles name {x}, a proper name the haystack mentions; each query asks for the needle's fact in other words.
_PASSKEY_NEEDLES: tuple[str, ...] = tuple(_WORDS["passkey_needles"])
_PASSKEY_QUERIES: tuple[str, ...] = tuple(_WORDS["passkey_queries"])
_NEEDLE_PAIRS: tuple[tuple[str, str], ...] = tuple((needle, query) for needle, query in _WORDS["needle_pairs"])

_NAME = re.compile(r"^[A-Z][a-z]{3,}$")
_SENTENCE_SPLIT = re.compile(
    r"(?<!\bMr\.)(?<!\bMrs\.)(?<!\bDr\.)(?<!\bSt\.)(?:(?<=[.!?])|(?<=[.!?][\"'”’)]))\s+(?=[\"'“‘(]?[A-Z])"
)
_NOT_NAMES = frozenset(_WORDS["not_names"])  # months, days, faiths and peoples: capitalised, not names
_ADJECTIVE_ENDINGS = ("ish", "ian", "ean", "ese", "ans", "ican", "ics")
_WORD = re.compile(r"[A-Za-z]+")
_COMMON = frozenset(_WORDS["common"])  # words too common to be a name or to count as a needle's content


def _sentences(paragraphs: Sequence[str]) -> list[str]:
    """Paragraphs (one per line) split at sentence ends; blank lines dropped."""
    out: list[str] = []
    for paragraph in paragraphs:
        out.extend(part.strip() for part in _SENTENCE_SPLIT.split(paragraph.strip()) if part.strip())
    return out


def haystack_names(sentences: Sequence[str], *, minimum: int = 3) -> list[str]:
    """Proper names the haystack mentions: capitalised words (4+ letters) seen at least `minimum` times inside a
    sentence (not as its first word) and never in lower case, most frequent first (ties alphabetical)."""
    inside: dict[str, int] = {}
    lower: set[str] = set()
    for sentence in sentences:
        words = _WORD.findall(sentence)
        for position, word in enumerate(words):
            if word.islower():
                lower.add(word)
            elif position > 0 and _NAME.match(word):
                inside[word] = inside.get(word, 0) + 1
    names = [
        w
        for w, n in inside.items()
        if n >= minimum
        and w.lower() not in lower | _COMMON | _NOT_NAMES
        and not w.lower().endswith(_ADJECTIVE_ENDINGS)  # nationalities and peoples, not someone or somewhere
    ]
    return sorted(names, key=lambda w: (-inside[w], w))


def _realistic_needle(task: Task, slot: int, name: str, rng: random.Random) -> tuple[str, str]:
    if task == "passkey":
        key = rng.randint(10000, 99999)
        needle = _PASSKEY_NEEDLES[rng.randrange(len(_PASSKEY_NEEDLES))]
        query = _PASSKEY_QUERIES[rng.randrange(len(_PASSKEY_QUERIES))]
        return needle.format(x=name, k=key), query.format(x=name)
    needle, query = _NEEDLE_PAIRS[slot % len(_NEEDLE_PAIRS)]
    return needle.format(x=name), query.format(x=name)


def _content_words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text) if w.lower() not in _COMMON and len(w) > 2}


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
        raise LongDocError(
            None, None, "the haystack has no text; pass a file with sentences or paragraphs (one per line)"
        )
    return ids, starts


def make_synthetic(
    task: Task,
    haystack: Sequence[str],
    tokenizer,
    *,
    style: Style = "realistic",
    lengths: Sequence[int] = DEFAULT_LENGTHS,
    per_length: int = 50,
    seed: int = 0,
) -> SyntheticSet:
    """Generate `per_length` documents for each length from `haystack` (paragraphs or sentences, one per line).

    ``style="realistic"`` gives each document its own stretch of the haystack and a needle about a name the haystack
    mentions, asked for in other words; ``"simple"`` is LongEmbed's layout (see the module docstring). The haystack
    is repeated when it is shorter than the longest length (recorded in ``meta``). A document's text is the
    tokenizer's decoding of its ids; ``meta["round_trip_exact"]`` counts those that re-tokenize to the same ids.
    """
    if task not in ("passkey", "needle"):
        raise LongDocError("task", task, "use passkey or needle")
    if style not in STYLES:
        raise LongDocError("style", style, f"use {' or '.join(STYLES)}")
    rng = random.Random(seed)
    sentences = _sentences(haystack) if style == "realistic" else [s for s in haystack if s.strip()]
    if style == "realistic":
        entities = haystack_names(sentences)[: max(2 * per_length, 100)]
        if len(entities) < per_length:
            raise LongDocError(
                "haystack",
                f"{len(sentences)} sentences",
                f"the haystack names only {len(entities)} people or places (capitalised words seen 3+ times, never "
                f"lower-case), fewer than the {per_length} needles per length; pass more prose (essays, articles) "
                "or use the simple style",
            )
    else:
        entities = _NAMES if task == "passkey" else _CITIES
    if not 1 <= per_length <= len(entities):
        raise LongDocError("per_length", per_length, f"use 1 to {len(entities)} (distinct needles per length)")
    build = _realistic_items if style == "realistic" else _simple_items
    items, base, repeats, exact = build(task, sentences, tokenizer, entities, lengths, per_length, rng)
    meta = {
        "task": task,
        "style": style,
        "seed": seed,
        "lengths": sorted(set(lengths)),
        "per_length": per_length,
        "haystack_sha256": hashlib.sha256("\n".join(haystack).encode()).hexdigest(),
        "haystack_tokens": base,
        "haystack_repeats": repeats,
        "tokenizer": getattr(tokenizer, "name_or_path", type(tokenizer).__name__),
        ("round_trip_exact" if style == "simple" else "documents_of_exactly_L_tokens"): exact,
        "n_documents": len(items),
        "protocol": "rank each query only against the documents of its own length group; Acc@1 per length",
    }
    if style == "realistic":
        meta.update(_realism(items, sentences, entities))
    return SyntheticSet(task, tuple(items), meta)


def _simple_items(
    task: Task,
    sentences: Sequence[str],
    tokenizer,
    entities: Sequence[str],
    lengths: Sequence[int],
    per_length: int,
    rng: random.Random,
) -> tuple[list[SyntheticItem], int, int, int]:
    """LongEmbed's layout: one stretch per length, decoded from token ids (exactly L tokens), needles over it."""
    ids, starts = _haystack_ids(tokenizer, sentences)
    base = len(ids)
    repeats = _repeats(base, lengths)
    ids = ids * repeats
    starts = [start + r * base for r in range(repeats) for start in starts]
    items: list[SyntheticItem] = []
    exact = 0
    for length in _length_groups(lengths):
        shared = rng.choice([s for s in starts if s + length <= len(ids)])
        order = rng.sample(range(len(entities)), per_length)
        for slot, entity_index in enumerate(order):
            origin = shared
            stretch = ids[origin : origin + length]
            local_starts = [s - origin for s in starts if origin <= s < origin + length]
            needle, query = _needle(task, entity_index, rng, entities)
            needle_ids = _needle_ids(tokenizer, needle, length)
            room = length - len(needle_ids)
            target = rng.random() * room
            position = min((s for s in local_starts if s <= room), key=lambda s: abs(s - target), default=0)
            doc = stretch[:position] + needle_ids + stretch[position + len(needle_ids) :]
            text = tokenizer.decode(doc, clean_up_tokenization_spaces=True)
            exact += tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"] == doc
            depth = round(position / room, 4) if room else 0.0
            items.append(_item(task, length, slot, depth, text=text, query=query, needle=needle))
    return items, base, repeats, exact


def _realistic_items(
    task: Task,
    sentences: Sequence[str],
    tokenizer,
    entities: Sequence[str],
    lengths: Sequence[int],
    per_length: int,
    rng: random.Random,
) -> tuple[list[SyntheticItem], int, int, int]:
    """Each document its own run of whole haystack sentences, as written (case and punctuation kept), up to L tokens
    with the needle sentence set between two of them (so a document has L tokens less at most one sentence);
    ``exact`` counts documents of exactly L tokens."""
    counts = [len(ids) for ids in tokenizer(list(sentences), add_special_tokens=False, verbose=False)["input_ids"]]
    keep = [i for i, n in enumerate(counts) if n > 0]
    sentences, counts = [sentences[i] for i in keep], [counts[i] for i in keep]
    base = sum(counts)
    if not base:
        raise LongDocError(
            None, None, "the haystack has no text; pass a file with sentences or paragraphs (one per line)"
        )
    repeats = _repeats(base, lengths)
    sentences, counts = list(sentences) * repeats, counts * repeats
    items: list[SyntheticItem] = []
    exact = 0
    for length in _length_groups(lengths):
        order = rng.sample(range(len(entities)), per_length)
        for slot, entity_index in enumerate(order):
            needle, query = _realistic_needle(task, slot, entities[entity_index], rng)
            room = length - len(_needle_ids(tokenizer, needle, length))
            start, used = 0, 0
            chosen: list[str] = []
            for _ in range(100):  # a start whose first sentence fits (almost every one does)
                start = rng.randrange(len(sentences))
                chosen, used = _fill(sentences, counts, start, room)
                if chosen:
                    break
            else:
                raise LongDocError("lengths", length, f"the haystack's sentences are longer than {room} tokens")
            # the needle goes between two sentences, at the boundary nearest a uniform target depth
            before = np.cumsum([0, *(counts[(start + i) % len(sentences)] for i in range(len(chosen)))])
            target = rng.random() * used
            cut = int(np.argmin(np.abs(before - target)))
            text = " ".join([*chosen[:cut], needle, *chosen[cut:]])
            exact += used == room
            depth = round(float(before[cut]) / used, 4) if used else 0.0
            items.append(_item(task, length, slot, depth, text=text, query=query, needle=needle))
    return items, base, repeats, exact


def _repeats(base: int, lengths: Sequence[int]) -> int:
    """How many copies of a haystack of `base` tokens the documents are cut from: enough for the longest one."""
    return 1 if base >= max(lengths) else -(-max(lengths) // base) + 1


def _length_groups(lengths: Sequence[int]) -> Iterator[int]:
    """The length groups, shortest first; raises `LongDocError` at one too short to hold a needle."""
    for length in sorted(set(lengths)):
        if length < 32:
            raise LongDocError("lengths", length, "documents need at least 32 tokens to hold a needle")
        yield length


def _needle_ids(tokenizer, needle: str, length: int) -> list[int]:
    """The needle's token ids (no special tokens); raises `LongDocError` when a document of `length` tokens
    cannot hold it with at least one haystack token."""
    ids = tokenizer(needle, add_special_tokens=False)["input_ids"]
    if len(ids) >= length:
        raise LongDocError("lengths", length, f"shorter than the needle ({len(ids)} tokens)")
    return ids


def _item(task: Task, length: int, slot: int, depth: float, *, text: str, query: str, needle: str) -> SyntheticItem:
    """Document `slot` of the `length` group, with the document and query ids every synthetic task uses."""
    return SyntheticItem(
        doc_id=f"{task}-{length}-{slot}",
        query_id=f"q-{task}-{length}-{slot}",
        group=length,
        depth=depth,
        text=text,
        query=query,
        needle=needle,
    )


def _fill(sentences: Sequence[str], counts: Sequence[int], start: int, room: int) -> tuple[list[str], int]:
    """Whole sentences from `start` on (wrapping round) while they fit in `room` tokens: (sentences, tokens)."""
    chosen: list[str] = []
    used = 0
    index = start
    while counts[index % len(sentences)] + used <= room and len(chosen) < len(sentences):
        chosen.append(sentences[index % len(sentences)])
        used += counts[index % len(sentences)]
        index += 1
    return chosen, used


def _realism(items: Sequence[SyntheticItem], sentences: Sequence[str], entities: Sequence[str]) -> dict[str, Any]:
    """How hard the realistic set is, measured: the needles' content words found in the haystack, the queries'
    content words that are not the needle's (the paraphrase), and queries whose name another document mentions."""
    vocabulary = set().union(*(_content_words(s) for s in sentences))
    words = [(_content_words(i.needle), _content_words(i.query)) for i in items]
    in_haystack = [len(needle & vocabulary) / max(1, len(needle)) for needle, _ in words]
    new_words = [len(query - needle) / max(1, len(query)) for needle, query in words]
    named_elsewhere = 0
    by_group: dict[int, list[SyntheticItem]] = {}
    for item in items:
        by_group.setdefault(item.group, []).append(item)
    for group in by_group.values():
        for item in group:
            name = next(e for e in entities if e in item.needle)
            named_elsewhere += any(name in other.text for other in group if other is not item)
    return {
        "names_pool": len(entities),
        "needle_words_in_haystack": round(float(sum(in_haystack) / len(items)), 4),
        "query_words_not_in_needle": round(float(sum(new_words) / len(items)), 4),
        "queries_whose_name_another_document_mentions": round(named_elsewhere / len(items), 4),
    }


def _jsonl(rows: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode("utf-8")


def write_synthetic(data: SyntheticSet, folder: str | Path) -> Path:
    """Write `data` as a BEIR folder with length groups (see the module docstring); each file atomically."""
    folder = Path(folder)
    check_target(folder)
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


def check_target(folder: Path) -> None:
    """Refuse a folder that holds anything but an earlier synthetic task, before a file of it is written."""
    if folder.exists() and not folder.is_dir():
        raise LongDocError("out", str(folder), "exists and is not a directory; pass a directory path")
    if folder.is_dir():
        foreign = sorted(p.name for p in folder.iterdir() if p.name not in _SET_NAMES and not p.name.endswith(".tmp"))
        if foreign:
            raise LongDocError(
                "out",
                str(folder),
                f"holds files that are not part of a synthetic task ({', '.join(foreign[:3])}); pass a new or empty "
                "directory, or one that `lengthwise longdoc synth` wrote",
            )


def read_synthetic(folder: str | Path) -> SyntheticSet:
    """Read a folder written by `write_synthetic`; raises `LongDocError` naming the missing file."""
    folder = Path(folder)
    meta_path = folder / META_FILE
    if not meta_path.is_file():
        raise LongDocError(
            None, None, f"{folder}: no {META_FILE}; write the task with `lengthwise longdoc synth` first"
        )
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    texts: dict[str, str] = {}
    with (folder / "corpus.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                row = json.loads(line)
                texts[row["_id"]] = row["text"]
    items = tuple(SyntheticItem(**{**needle, "text": texts[needle["doc_id"]]}) for needle in meta.pop("needles"))
    return SyntheticSet(meta["task"], items, meta)
