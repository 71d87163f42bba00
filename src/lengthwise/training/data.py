"""Training data: single texts (one per line, JSONL ``text``, a BEIR corpus) or positive pairs (JSONL, MRPC, ...).

Recognised without flags: ``.txt`` (one text per line, e.g. SimCSE's wiki1m), JSONL with ``text`` (documents; IMDB,
20 Newsgroups), JSONL pairs (``anchor``/``positive``, ``sentence1``/``sentence2``, ``text1``/``text2``,
``premise``/``hypothesis``; a ``label`` keeps only positives: 1, true or "entailment"), JSONL ``captions`` lists
(Flickr8k: two disjoint caption pairs per image), the MRPC TSV (``Quality`` = 1 rows), a BEIR folder (its corpus), a
folder written by `datasets.Dataset.save_to_disk`, and ``hf:NAME[:SPLIT]`` for the hub. Every file may be gzipped.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lengthwise.core._textio import checked_text, jsonl_objects, open_text
from lengthwise.core.data import beir_documents
from lengthwise.core.errors import DataFormatError, SettingError

__all__ = ["TrainingData", "read_training_data"]

_PAIR_KEYS = (("anchor", "positive"), ("sentence1", "sentence2"), ("text1", "text2"), ("premise", "hypothesis"))
_POSITIVE_LABELS = (1, True, "1", "entailment", "positive")


@dataclass(frozen=True)
class TrainingData:
    """Texts or positive pairs (never both) read from one source, with a content hash for the results.

    `where` gives, for each example, where it came from (``file:line``, a BEIR document id, a dataset row), so a
    problem found later (e.g. a text this model's tokenizer reads as nothing) can be reported at its place.
    """

    source: str
    texts: tuple[str, ...] = ()
    pairs: tuple[tuple[str, str], ...] = ()
    where: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if bool(self.texts) == bool(self.pairs):
            raise DataFormatError(
                None, None, f"{self.source}: no training examples found (or a mix of texts and pairs)"
            )
        if not self.where:
            object.__setattr__(self, "where", tuple(f"{self.source} example #{i + 1}" for i in range(len(self))))
        if len(self.where) != len(self):
            problem = f"locations for {len(self)} examples of {self.source}; give one location per example"
            raise SettingError("where", len(self.where), problem)

    @property
    def kind(self) -> str:
        return "pair" if self.pairs else "text"

    def __len__(self) -> int:
        return len(self.pairs) if self.pairs else len(self.texts)

    @property
    def sha256(self) -> str:
        payload = json.dumps(self.pairs if self.pairs else self.texts, ensure_ascii=False).encode("utf-8")
        return hashlib.sha256(payload).hexdigest()

    def describe(self) -> dict[str, Any]:
        return {"source": self.source, "kind": self.kind, "n_examples": len(self), "sha256": self.sha256}


Found = tuple[list[str], list[tuple[str, str]], list[str]]  # texts, pairs, where each came from


def _row_pair(path: Path, line_no: int, row: dict[str, Any]) -> tuple[str, str] | None:
    for first, second in _PAIR_KEYS:
        if first in row and second in row:
            if "label" in row and row["label"] not in _POSITIVE_LABELS:
                return None
            return checked_text(path, line_no, row[first], first), checked_text(path, line_no, row[second], second)
    return None


def _read_jsonl(path: Path) -> Found:
    texts: list[str] = []
    pairs: list[tuple[str, str]] = []
    where: list[str] = []
    for line_no, row in jsonl_objects(path):
        if "captions" in row and isinstance(row["captions"], list):
            captions = [checked_text(path, line_no, text, "caption") for text in row["captions"]]
            found = list(zip(captions[0:-1:2], captions[1::2], strict=False))
            pairs.extend(found)
            where.extend([f"{path}:{line_no}"] * len(found))
        elif any(first in row and second in row for first, second in _PAIR_KEYS):
            pair = _row_pair(path, line_no, row)
            if pair is not None:
                pairs.append(pair)
                where.append(f"{path}:{line_no}")
        elif "text" in row:
            texts.append(checked_text(path, line_no, row["text"], "text"))
            where.append(f"{path}:{line_no}")
        else:
            raise DataFormatError(
                None,
                None,
                f"{path}:{line_no}: no `text` and no pair columns (anchor/positive, sentence1/sentence2, ...)",
            )
    return texts, pairs, where


def _read_lines(path: Path) -> Found:
    texts, where = [], []
    with open_text(path) as handle:
        for line_no, line in enumerate(handle, start=1):
            if line.strip():
                texts.append(checked_text(path, line_no, line, "line"))
                where.append(f"{path}:{line_no}")
    return texts, [], where


def _read_mrpc(path: Path) -> Found:
    pairs, where = [], []
    with open_text(path) as handle:
        next(handle)
        for line_no, line in enumerate(handle, start=2):
            cells = line.rstrip("\r\n").split("\t")
            if len(cells) != 5:
                raise DataFormatError(
                    None, None, f"{path}:{line_no}: expected 5 tab-separated MRPC columns, got {len(cells)}"
                )
            if cells[0] == "1":
                pairs.append(
                    (
                        checked_text(path, line_no, cells[3], "#1 String"),
                        checked_text(path, line_no, cells[4], "#2 String"),
                    )
                )
                where.append(f"{path}:{line_no}")
    return [], pairs, where


def _read_hf(rows: Any, source: str) -> Found:
    columns = set(rows.column_names)
    for first, second in _PAIR_KEYS:
        if {first, second} <= columns:
            pairs, where = [], []
            for number, row in enumerate(rows, start=1):  # rows numbered from 1, like lines
                if "label" not in row or row["label"] in _POSITIVE_LABELS:
                    pair = (
                        checked_text(source, number, row[first], first),
                        checked_text(source, number, row[second], second),
                    )
                    pairs.append(pair)
                    where.append(f"{source}:{number}")
            return [], pairs, where
    if "text" in columns:
        texts, where = [], []
        for number, text in enumerate(rows["text"], start=1):
            if str(text).strip():
                texts.append(checked_text(source, number, str(text), "text"))
                where.append(f"{source}:{number}")
        return texts, [], where
    raise DataFormatError(
        None, None, f"{source}: columns {sorted(columns)} hold neither `text` nor a known pair of columns"
    )


def _read_source(spec: str) -> Found:
    if spec.startswith("hf:"):
        from lengthwise.core._optional import require

        hub = require("datasets", extra="train", purpose="training data from the hub")
        name, _, split = spec[3:].partition(":")
        return _read_hf(hub.load_dataset(name, split=split or "train"), spec)
    path = Path(spec)
    if not path.exists():
        raise DataFormatError("data", spec, "no such file or folder")
    if path.is_dir():
        if (path / "dataset_info.json").exists() or (path / "state.json").exists():
            import datasets

            return _read_hf(datasets.load_from_disk(str(path)), spec)
        documents = beir_documents(path)
        return list(documents.values()), [], [f"{path} document {doc_id!r}" for doc_id in documents]
    name = path.name.removesuffix(".gz")
    if name.endswith((".jsonl", ".json")):
        return _read_jsonl(path)
    with open_text(path) as handle:
        first_line = handle.readline()
    if first_line.startswith("Quality\t"):
        return _read_mrpc(path)
    if name.endswith((".txt", ".text")) or "\t" not in first_line:
        return _read_lines(path)
    raise DataFormatError("data", spec, "unknown format; use one text per line, JSONL, an MRPC TSV or a BEIR folder")


def read_training_data(spec: str | Path, *, max_examples: int | None = None, seed: int = 0) -> TrainingData:
    """Read `spec` (file, folder or ``hf:NAME[:SPLIT]``); `max_examples` keeps a seeded random sample, in order."""
    texts, pairs, where = _read_source(str(spec))
    if texts and pairs:
        raise DataFormatError("data", str(spec), "holds both single texts and pairs; split it into two files")
    examples: list[Any] = pairs or texts
    if max_examples is not None and len(examples) > max_examples:
        keep = sorted(random.Random(seed).sample(range(len(examples)), max_examples))
        examples = [examples[index] for index in keep]
        where = [where[index] for index in keep]
    if pairs:
        return TrainingData(str(spec), pairs=tuple(examples), where=tuple(where))
    return TrainingData(str(spec), texts=tuple(examples), where=tuple(where))
