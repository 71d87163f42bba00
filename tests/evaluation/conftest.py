"""Helpers for the evaluation tests: a deterministic fake encoder and tiny on-disk data sets."""

from __future__ import annotations

import gzip
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest


class TableEncoder:
    """A `TextEncoder` that looks embeddings up in a dict (unknown texts: a hash-seeded random vector)."""

    def __init__(self, table: dict[str, Sequence[float]] | None = None, dim: int = 8) -> None:
        self.table = {text: np.asarray(vector, dtype=np.float32) for text, vector in (table or {}).items()}
        self.dim = dim if not self.table else len(next(iter(self.table.values())))
        self.calls: list[tuple[str, int]] = []

    def _embed(self, texts: Sequence[str], side: str) -> np.ndarray:
        self.calls.append((side, len(texts)))
        rows = []
        for text in texts:
            if text in self.table:
                rows.append(self.table[text])
            else:
                seed = int.from_bytes(text.encode()[:8].ljust(8, b"\0"), "little") ^ len(text)
                rows.append(np.random.default_rng(seed).normal(size=self.dim).astype(np.float32))
        return np.stack(rows)

    def encode(self, texts: Sequence[str], *, batch_size: int = 32, show_progress: bool = False) -> np.ndarray:
        return self._embed(texts, "symmetric")

    def encode_queries(self, texts: Sequence[str], *, batch_size: int = 32, show_progress: bool = False) -> np.ndarray:
        return self._embed(texts, "query")

    def encode_documents(
        self, texts: Sequence[str], *, batch_size: int = 32, show_progress: bool = False
    ) -> np.ndarray:
        return self._embed(texts, "document")


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    text = "".join(json.dumps(row) + "\n" for row in rows)
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture()
def beir_folder(tmp_path: Path) -> Path:
    """Three documents (one untitled), two judged queries and one unjudged; corpus gzipped."""
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    write_jsonl(
        folder / "corpus.jsonl.gz",
        [
            {"_id": "d1", "title": "Cats", "text": "Cats purr when they are content."},
            {"_id": "d2", "title": "", "text": "Stock markets fell sharply on Monday."},
            {"_id": "d3", "title": "Rain", "text": "It rained all day in the valley."},
        ],
    )
    write_jsonl(
        folder / "queries.jsonl",
        [
            {"_id": "q1", "text": "why do cats purr"},
            {"_id": "q2", "text": "market crash monday"},
            {"_id": "q9", "text": "not judged"},
        ],
    )
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t2\n", encoding="utf-8")
    return folder


@pytest.fixture()
def labelled_folder(tmp_path: Path) -> Path:
    """Two classes with string labels, 12 train and 6 test texts of clearly different topics."""
    folder = tmp_path / "cls"
    folder.mkdir()
    sport = ["the team won the match", "a late goal decided the game", "the striker scored twice"]
    food = ["bake the bread for an hour", "add salt to the soup", "the cake needs more sugar"]
    train = [{"text": f"{t} {i}", "label": "sport"} for i in range(2) for t in sport]
    train += [{"text": f"{t} {i}", "label": "food"} for i in range(2) for t in food]
    test = [{"text": f"{t} again", "label": "sport"} for t in sport] + [
        {"text": f"{t} again", "label": "food"} for t in food
    ]
    write_jsonl(folder / "train.jsonl.gz", train)
    write_jsonl(folder / "test.jsonl", test)
    return folder
