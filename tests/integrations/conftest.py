"""Shared by the retriever tests: one tiny index (24 documents with their text, the tiny random BERT), the same index
loaded into Milvus Lite, and one `lengthwise serve` over it, each made once for the session; and each framework's
retriever read back as plain rows, so every test compares them with `LongIndex.search`."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.longdoc.conftest import haystack_rows

RARE = "zanzibarite"  # a word only doc7 holds
# Haystack reads this when it is first imported (before any test module here imports it): no telemetry from tests
os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")

QUERIES = ["the river and the old bridge", f"where was {RARE} found", "apples and honey at the autumn market"]
MODES = ["dense", "lexical", "hybrid"]


def rows() -> list[dict[str, str]]:
    """24 haystack documents, doc7 with a word no other holds, doc3 with the report docs/integrations.md asks about."""
    found = haystack_rows(24)
    found[7]["text"] += f" The mineral {RARE} was found under the old mill."
    found[3]["text"] += " The village council wrote the report on the harvest."
    return found


@pytest.fixture(scope="session")
def encoded(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The documents encoded multi-vector (24-token windows, stride 12) by the tiny BERT."""
    import lengthwise as lw
    from lengthwise.longdoc import LongDocConfig

    folder = tmp_path_factory.mktemp("integrations")
    (folder / "corpus.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows()))
    long = LongDocConfig(strategy="multi-vector", window=24, stride=12)
    lw.encode(folder / "corpus.jsonl", folder / "emb", model=str(tiny_model_dir), long=long)
    return folder / "emb"


@pytest.fixture(scope="session")
def index_dir(encoded: Path) -> Path:
    """The documents indexed with their text (FAISS, no quantization)."""
    import lengthwise as lw

    lw.LongIndex.build(encoded, encoded.parent / "idx", quantize="none", engine="faiss")
    return encoded.parent / "idx"


@pytest.fixture(scope="session")
def library(index_dir: Path) -> Any:
    """The index opened by the library: what every retriever is compared with."""
    import lengthwise as lw

    return lw.LongIndex.open(index_dir)


@pytest.fixture(scope="session")
def milvus(encoded: Path) -> tuple[str, str]:
    """(uri, name): the documents indexed again and loaded into a Milvus Lite database (`build_index`), under the
    default name (``milvus.db`` beside ``idx/``, as docs/integrations.md's examples name them)."""
    pytest.importorskip("pymilvus")
    pytest.importorskip("milvus_lite")
    from lengthwise.facade import build_index
    from lengthwise.search.backend import Backend

    uri = str(encoded.parent / "milvus.db")
    build_index(encoded, encoded.parent / "idx-milvus", Backend("milvus", uri), quantize="none", engine="faiss")
    return uri, "lengthwise"


@pytest.fixture(scope="session")
def server(index_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A `lengthwise serve` process over the index (`tests/test_serve.py`'s helper)."""
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    from tests.test_serve import Server

    running = Server(index_dir, "--batch-wait-ms", "5", log=tmp_path_factory.mktemp("log") / "server.log")
    yield running
    assert running.stop() == 0, running.log.read_text()


@pytest.fixture(scope="session", params=["local", "milvus", "service"])
def where(request: pytest.FixtureRequest, index_dir: Path) -> dict[str, Any]:
    """Where a retriever searches, as its keyword arguments: the index folder, the index in Milvus, the service."""
    if request.param == "local":
        return {"index": str(index_dir)}
    if request.param == "milvus":
        uri, name = request.getfixturevalue("milvus")
        return {"milvus_uri": uri, "milvus_name": name}
    return {"url": request.getfixturevalue("server").url}


def expected_rows(library: Any, query: str, k: int, mode: str | None, passages: int = 1) -> list[tuple[Any, ...]]:
    """(id, score, dense, lexical, passage spans) of the library's hits, best first."""
    (hits,) = library.search(query, k, mode=mode, passages=passages)
    return [(hit.id, hit.score, hit.dense, hit.lexical, [(p.window, p.start, p.end) for p in hit.passages])
            for hit in hits]  # fmt: skip


def assert_same_rows(found: list[tuple[Any, ...]], expected: list[tuple[Any, ...]]) -> None:
    """The same ids in the same order, the same passages, scores within the service's rounding (6 places)."""
    assert [row[0] for row in found] == [row[0] for row in expected]
    assert [row[4] for row in found] == [row[4] for row in expected]
    for got, made in zip(found, expected, strict=True):
        for side in (1, 2, 3):
            assert (got[side] is None) == (made[side] is None)
            if made[side] is not None:
                assert got[side] == pytest.approx(made[side], abs=1e-5)


def metadata_rows(documents: list[tuple[str, float, dict[str, Any]]]) -> list[tuple[Any, ...]]:
    """(id, score, metadata) per framework document as `expected_rows`' rows; each metadata checked for its keys."""
    found = []
    for doc_id, score, metadata in documents:
        assert metadata["id"] == doc_id and metadata["score"] == score
        assert {"backend", "model", "long", "fusion"} <= metadata["index"].keys()
        spans = [(p["window"], p["start"], p["end"]) for p in metadata["passages"]]
        found.append((doc_id, score, metadata["dense"], metadata["lexical"], spans))
    return found
