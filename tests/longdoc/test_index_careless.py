"""Issue 33, the index surface used as a careless user would: ids that hold line breaks, a rebuild over an index
(or a folder that holds other things), a resumed build whose shards changed, tampered index files, and the flags
of `lengthwise index build` / `lengthwise search`. Index folders are built from plain numpy shards (no model)
where the command needs none."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from lengthwise.core.encoder import MultiVectors
from lengthwise.longdoc.config import LongDocError
from lengthwise.longdoc.index import WindowIndex
from lengthwise.longdoc.store import EmbeddingStore, iter_shards, read_embeddings

ODD_IDS = ["a\nb", "c\u2028d", "e\x85f", "g\rh", '"quoted"', "plain", "tab\there", "ünï"]


def _shards(folder: Path, ids: list[str], seed: int = 0, dim: int = 16, per_doc: int = 3) -> np.ndarray:
    """A shard folder of `ids`, `per_doc` random windows each; returns the vectors."""
    vectors = np.random.default_rng(seed).normal(size=(len(ids) * per_doc, dim)).astype(np.float32)
    store = EmbeddingStore(folder, {"model": "random", "long": {"strategy": "multi-vector"}})
    store.write("w0-", ids, MultiVectors(vectors, np.arange(len(ids) + 1) * per_doc))
    return vectors


def test_ids_with_line_breaks_round_trip_through_shards_and_the_index(tmp_path: Path) -> None:
    """Issue 33.1: ids were written raw, one per line, and read back with splitlines(): 10 documents read back as 13
    ids, and a search returned the wrong id with score 1.0. Ids are JSON strings now."""
    vectors = _shards(tmp_path / "enc", ODD_IDS)
    assert [ids for ids, _, _ in iter_shards(tmp_path / "enc")] == [ODD_IDS]
    assert read_embeddings(tmp_path / "enc")[0] == ODD_IDS
    index = WindowIndex.build(tmp_path / "enc", tmp_path / "idx", quantize="none")
    assert index.doc_ids == ODD_IDS and WindowIndex.open(tmp_path / "idx").doc_ids == ODD_IDS
    found = index.search_vectors(vectors[::3], k=1)
    assert [row[0][0] for row in found] == ODD_IDS
    assert [row[0][1] for row in found] == pytest.approx([1.0] * len(ODD_IDS), abs=1e-5)


def test_a_shard_whose_ids_disagree_with_its_record_is_refused(tmp_path: Path) -> None:
    """A shard written before ids were JSON (raw lines, no ``id_format``) still reads; one whose raw ids hold a line
    break reads as more ids than its record counts, and is refused (a resumed encode embeds it again)."""
    from lengthwise.longdoc.store import RECORD, _digest

    _shards(tmp_path / "enc", ["x", "y", "z"])
    stem = tmp_path / "enc" / "w0-00000"

    def old_format(ids: list[str]) -> None:
        data = "".join(f"{i}\n" for i in ids).encode("utf-8")
        Path(f"{stem}.ids.txt").write_bytes(data)
        record = json.loads(Path(f"{stem}{RECORD}").read_text())
        record.pop("id_format", None)
        record["files"]["w0-00000.ids.txt"] = _digest(data)
        Path(f"{stem}{RECORD}").write_text(json.dumps(record))

    old_format(["x", "y", "z"])
    assert [ids for ids, _, _ in iter_shards(tmp_path / "enc")] == [["x", "y", "z"]]
    old_format(["x", "y\nw", "z"])
    with pytest.raises(LongDocError, match=r"w0-00000\.npy: .*w0-00000\.ids\.txt holds 4 ids, its record says 3"):
        list(iter_shards(tmp_path / "enc"))
    with pytest.raises(LongDocError, match="holds 4 ids, its record says 3"):
        WindowIndex.build(tmp_path / "enc", tmp_path / "idx")
    assert not (tmp_path / "idx").exists()


def test_an_index_of_the_first_format_still_opens(tmp_path: Path) -> None:
    """Indexes built before distinct vectors (format 1: one engine key per window, raw id lines) open and search."""
    vectors = _shards(tmp_path / "enc", ["x", "y", "z"])
    index = WindowIndex.build(tmp_path / "enc", tmp_path / "idx", quantize="none", engine="faiss")
    folder = tmp_path / "idx"
    settings = json.loads((folder / "index.json").read_text())
    settings["format"] = 1
    del settings["distinct"]
    (folder / "index.json").write_text(json.dumps(settings))
    (folder / "ids.txt").write_text("x\ny\nz\n")
    for name in ("members.npy", "member_starts.npy"):
        (folder / name).unlink()
    assert index.engine.count() == 9  # random windows: all distinct, so the keys are the window numbers
    old = WindowIndex.open(folder)
    assert old.doc_ids == ["x", "y", "z"]
    assert [row[0][0] for row in old.search_vectors(vectors[[0, 4, 8]], k=1)] == ["x", "y", "z"]
