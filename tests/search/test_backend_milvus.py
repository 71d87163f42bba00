"""The Milvus backend (issue 50) with the embedded engine (Milvus Lite, no server): a local index loaded into it gives
the same top-10 (ids and scores) dense, hybrid and lexical, with BM25 at each granularity (both, the default, window
and document); a load is resumable and served only when complete."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

pytest.importorskip("pymilvus")
pytest.importorskip("milvus_lite")

from lengthwise.cli import app
from lengthwise.core.errors import SettingError
from lengthwise.core.scoring import WindowScoring
from lengthwise.facade import LongIndex, MilvusIndex
from lengthwise.longdoc.config import LongDocError
from lengthwise.search.milvus import index as milvus_index
from lengthwise.search.milvus import lexical as milvus_lexical
from lengthwise.search.milvus import load as milvus_load
from lengthwise.search.milvus import store
from lengthwise.search.milvus import windows as milvus_windows

HAYSTACK = Path(__file__).parents[1] / "longdoc" / "haystack.txt"
QUERIES = [
    "the river and the old bridge",
    "a keyboard for the village school",
    "honey at the autumn market",
    "snow in winter on the ridge",
    "bread from the bakery at dawn",
]  # every one holds a corpus word (lexical)
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def encoded(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """40 different haystack documents encoded multi-vector (24-token windows, top-2 scoring) by the tiny BERT."""
    folder = tmp_path_factory.mktemp("milvus-local")
    lines = [line for line in HAYSTACK.read_text().splitlines() if line.strip()]
    rows = [{"_id": f"doc{i}", "text": " ".join(lines[(i * 3 + j) % len(lines)] for j in range(3 + i % 7))}
            for i in range(40)]  # fmt: skip
    assert len({row["text"] for row in rows}) == len(rows)
    (folder / "corpus.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    args = ["encode", "-d", folder / "corpus.jsonl", "-o", folder / "emb", "-m", tiny_model_dir, "--long",
            "multi-vector", "--window", "24", "--best-windows", "2"]  # fmt: skip
    run = CliRunner().invoke(app, [str(a) for a in args])
    assert run.exit_code == 0, run.output
    return folder / "emb"


@pytest.fixture(scope="module", params=["both", "window", "document"])
def local(encoded: Path, request: pytest.FixtureRequest) -> LongIndex:
    """The encoded documents indexed locally with their text, BM25 at one granularity (``both``: the default)."""
    out = encoded.parent / f"idx-{request.param}"
    index = LongIndex.build(encoded, out, quantize="none", engine="usearch", granularity=request.param)
    assert index.lexical.settings["granularity"] == request.param
    return index


def _ranked(rows: list) -> list[list[tuple[str, float]]]:
    return [[(hit.id, hit.score) for hit in row] for row in rows]


def _same(found: list[list[tuple[str, float]]], expected: list[list[tuple[str, float]]]) -> None:
    assert [[d for d, _ in row] for row in found] == [[d for d, _ in row] for row in expected]
    np.testing.assert_allclose([[s for _, s in row] for row in found], [[s for _, s in row] for row in expected],
                               rtol=1e-5, atol=1e-5)  # fmt: skip


def test_the_engine_gives_the_local_index_top_10_dense_hybrid_and_lexical(local: LongIndex, tmp_path: Path) -> None:
    engine = milvus_load.load_into_milvus(local, str(tmp_path / "milvus.db"), "haystack", batch=50)
    assert engine.doc_ids == local.doc_ids and np.array_equal(engine.offsets, local.offsets)
    vectors = np.asarray(local.embed_queries(QUERIES), dtype=np.float32)
    for mode in ("dense", "hybrid", "lexical"):
        expected = _ranked(local.search(QUERIES, k=10, mode=mode, vectors=vectors))
        found = _ranked(engine.search(QUERIES, k=10, mode=mode, vectors=vectors))
        assert all(len(row) for row in expected), mode
        _same(found, expected)
    # against the exact scan too (every document, both sides), not only against the local index's search
    exact = local.ranked_with_exact(QUERIES, 10, engine.search_mode("hybrid"))["exact"]
    _same(_ranked(engine.search(QUERIES, k=10, mode="hybrid", vectors=vectors)), exact)
    # each BM25 side the local index holds, scored by the engine as by bm25s (every document, not only the top 10)
    for query in QUERIES:
        np.testing.assert_allclose(engine.lexical.side_scores(query), local.lexical.side_scores(query), rtol=1e-5,
                                   atol=1e-5)  # fmt: skip
    # reopened by name: the same index, its text queries embedded by the recorded model
    again = MilvusIndex.open(str(tmp_path / "milvus.db"), "haystack")
    _same(
        _ranked(again.search(QUERIES[:2], k=10, mode="dense")), _ranked(local.search(QUERIES[:2], k=10, mode="dense"))
    )
    # the queries at another precision than the documents' (issue 48): embedded on either backend alike
    again.set_query_precision("int8")
    local_int8 = LongIndex.open(local.folder)
    local_int8.set_query_precision("int8")
    found = _ranked(again.search(QUERIES[:2], k=10, mode="dense"))
    assert again.query_precision == "int8" and found
    _same(found, _ranked(local_int8.search(QUERIES[:2], k=10, mode="dense")))


def test_a_tuning_is_refused_for_an_index_served_in_milvus(local: LongIndex, tmp_path: Path) -> None:
    """`tune_hybrid` records its choice in the index's own folder: an index opened from Milvus is refused in one
    line naming it, before the data is read (before: an AttributeError on `tune_fusion`)."""
    from lengthwise.pipelines import tune_hybrid

    milvus_load.load_into_milvus(local, str(tmp_path / "milvus.db"), "haystack")
    served = MilvusIndex.open(str(tmp_path / "milvus.db"), "haystack")
    with pytest.raises(SettingError, match=r"milvus\.db.*is served in Milvus.*tune the local index"):
        tune_hybrid(served, tmp_path / "no-such-beir", weights=(0.5,))


def test_the_nearest_windows_come_back_as_similarities_unless_the_scoring_fuses_a_mean(
    local: LongIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine's similarities rank the candidate documents (no vectors sent back) where the scoring reads only
    similarities; the vectors where it fuses the mean of a document's windows. The same top 10 either way."""
    engine = milvus_load.load_into_milvus(local, str(tmp_path / "milvus.db"), "haystack")
    asked: list[tuple[list[str], bool]] = []
    search = engine.client.search

    def recorded(*args: object, **kwargs: object) -> object:
        asked.append((kwargs["output_fields"], "filter" in kwargs))
        return search(*args, **kwargs)

    monkeypatch.setattr(engine.client, "search", recorded)
    vectors = np.asarray(local.embed_queries(QUERIES), dtype=np.float32)
    for scoring in (WindowScoring(best_windows=2), WindowScoring(best_windows=1, fuse_mean=0.3)):
        _same(
            engine.search_vectors(vectors, k=10, scoring=scoring), local.search_vectors(vectors, k=10, scoring=scoring)
        )
    candidates = [fields for fields, filtered in asked if not filtered]  # the engine-scored documents' are filtered
    assert candidates == [["id"], ["dense"]]


@pytest.mark.parametrize("complete", [True, False])
def test_documents_scored_by_the_engine_get_the_local_scores(
    local: LongIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, complete: bool
) -> None:
    """On Milvus's C++ core (a server, Milvus Lite 2.x) a document is scored on the similarities of a dense search
    among its own windows (no vectors read back: at 1M windows a read of 2,000 took 67 ms, the search 20 ms); a
    search that sends fewer windows back than asked (an approximate filtered search) reads the vectors instead. The
    local index's exact scores either way. Milvus Lite 3.x's filtered search is approximate (it sends fewer back), so
    there it always reads them (`kind` ``lite-python``); told it is a server, it reads them too."""
    engine = milvus_load.load_into_milvus(local, str(tmp_path / "milvus.db"), "haystack")
    if engine.kind == "lite-python":
        if complete:
            pytest.skip("Milvus Lite 3.x (a Python engine) searches a filter approximately: its windows are read")
        engine.windows.kind = "server"
    reads: list[int] = []
    windows, search = engine.windows._windows, engine.client.search
    monkeypatch.setattr(engine.windows, "_windows", lambda docs: reads.append(len(docs)) or windows(docs))

    def searched(*args: object, **kwargs: object) -> object:
        found = search(*args, **kwargs)
        return [hits[:-1] for hits in found] if "filter" in kwargs and not complete else found

    monkeypatch.setattr(engine.client, "search", searched)
    docs = np.asarray([0, 3, 4, 9, int(np.argmax(np.diff(local.offsets)))])
    query = torch.nn.functional.normalize(torch.as_tensor(local.embed_queries(QUERIES[:1])[0]), dim=-1)
    for scoring in (WindowScoring(best_windows=1), WindowScoring(best_windows=2)):
        np.testing.assert_allclose(engine.windows.document_scores(query, docs, scoring),
                                   local.windows.document_scores(query, docs, scoring),
                                   rtol=1e-5, atol=1e-6)  # fmt: skip
    assert reads == ([] if complete else [len(docs), len(docs)])


@pytest.mark.parametrize(("best_windows", "by_document"), [(1, True), (1, False), (2, True)])
def test_a_filtered_search_that_skips_a_window_never_lowers_a_score(
    local: LongIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, best_windows: int, by_document: bool
) -> None:
    """An approximate filtered search (Milvus Lite 2.5.1's, where the filter keeps many rows: it searches them through
    its own IVF index) may skip a document's best window. Grouped by document it would still send one window back for
    that document, its score lowered unseen; asked for every window, one fewer comes back and the windows are read
    instead. Simulated here: each filtered search leaves out the best window of one document. The local index's exact
    scores either way, on every engine kind that scores with its similarities, the windows kept by document number
    or by row number (`_rows_filter`: by document where they are many on Milvus Lite, always on a server)."""
    monkeypatch.setattr(milvus_windows, "ROWS_BY_DOCUMENT", {"lite": 10**9 if by_document else 1, "server": 0})
    engine = milvus_load.load_into_milvus(local, str(tmp_path / "milvus.db"), "haystack")
    query = torch.nn.functional.normalize(torch.as_tensor(local.embed_queries(QUERIES[:1])[0]), dim=-1)
    docs = np.arange(len(local.doc_ids))[::2]
    longest = int(docs[np.argmax(np.diff(local.offsets)[docs])])
    first, last = int(local.offsets[longest]), int(local.offsets[longest + 1])
    skipped = first + int(np.argmax(local.vectors[first:last] @ query.numpy()))  # its best window
    search, asked = engine.client.search, []

    def approximate(*args: object, **kwargs: object) -> object:
        if "filter" in kwargs:
            asked.append((engine.kind, str(kwargs["filter"]).split(" in ")[0]))
            kwargs["filter"] = f"({kwargs['filter']}) and id != {skipped}"
        return search(*args, **kwargs)

    monkeypatch.setattr(engine.client, "search", approximate)
    scoring = WindowScoring(best_windows=best_windows)
    for kind in ("lite", "server"):
        engine.windows.kind = kind
        np.testing.assert_allclose(engine.windows.document_scores(query, docs, scoring),
                                   local.windows.document_scores(query, docs, scoring),
                                   rtol=1e-5, atol=1e-6)  # fmt: skip
    assert {field for kind, field in asked if kind == "lite"} == {"doc" if by_document else "id"}
    assert {field for kind, field in asked if kind == "server"} == {"doc"}  # a server's by document always


def test_a_load_stopped_between_an_insert_and_its_record_resumes_without_duplicates(
    local: LongIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows are inserted (an upsert slows as the collection grows, on Milvus Lite 2.5): a load stopped after a
    batch's insert and before its progress record deletes that batch's rows when it resumes, so no window is there
    twice (Milvus keeps both rows of a primary key inserted twice)."""
    uri = str(tmp_path / "milvus.db")
    write = milvus_load.write_records

    def stopped(client: object, collection: str, records: object) -> None:
        if isinstance(records, dict) and records.get("progress") == 80:
            raise KeyboardInterrupt  # the second batch is in, its record is not
        write(client, collection, records)

    monkeypatch.setattr(milvus_load, "write_records", stopped)
    with pytest.raises(KeyboardInterrupt):
        milvus_load.load_into_milvus(local, uri, "haystack", batch=40)
    monkeypatch.setattr(milvus_load, "write_records", write)
    engine = milvus_load.load_into_milvus(local, uri, "haystack", batch=40)
    rows = engine.client.query(engine.collection, filter="id >= 0", output_fields=["count(*)"])[0]["count(*)"]
    assert rows == int(local.offsets[-1])  # a query's rows are one per primary key; the count is of rows stored


def test_the_engine_kind_sets_the_dense_index_and_the_read_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """A URL is a server (HNSW); a path is Milvus Lite, whose 2.x builds no HNSW (IVF_FLAT) and reads a long
    ``id in [...]`` slowly (small reads), and whose 3.x walks the collection each query (large reads)."""
    import importlib.metadata

    assert store.engine_kind("http://milvus:19530") == "server"
    for installed, kind, index in (("2.5.1", "lite", "IVF_FLAT"), ("3.2.2", "lite-python", "HNSW")):
        monkeypatch.setattr(importlib.metadata, "version", lambda name, v=installed: v)
        assert store.engine_kind("out/milvus.db") == kind
        assert store.dense_index(kind)["index_type"] == index
    assert store.dense_index("server")["index_type"] == "HNSW"
    assert store.READ_ROWS["lite"] < store.READ_ROWS["lite-python"]


@pytest.mark.parametrize("rows_per_proposal", [1, 3])
def test_a_hybrid_search_asks_each_bm25_side_for_its_proposals_rows_and_fuses_the_local_scores(
    local: LongIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rows_per_proposal: int
) -> None:
    """A hybrid search needs each BM25 side's `depth` best documents: a side first asks for that many rows (windows:
    `ROWS_PER_PROPOSAL` a document), and again for `BM25_LIMIT` only where fewer documents came back from a cut
    search; its proposals are then scored exactly. The same hits (ids, fused and side scores) as the local index, at
    a depth under the corpus's size, whichever way each side went."""
    from lengthwise.core.fusion import Mode
    from lengthwise.search.types import FusionSettings

    if local.lexical.settings["granularity"] == "document":
        pytest.skip("one whole-document side: a document is one row, its first search always enough")
    engine = milvus_load.load_into_milvus(local, str(tmp_path / "milvus.db"), "haystack")
    monkeypatch.setattr(milvus_lexical, "ROWS_PER_PROPOSAL", rows_per_proposal)
    limits: list[int] = []
    search = engine.client.search

    def recorded(*args: object, **kwargs: object) -> object:
        if kwargs.get("anns_field") == "bm25" and "filter" not in kwargs:
            limits.append(int(kwargs["limit"]))  # type: ignore[call-overload]
        return search(*args, **kwargs)

    monkeypatch.setattr(engine.client, "search", recorded)
    fusion = FusionSettings(depth=12)
    vectors = np.asarray(local.embed_queries(QUERIES), dtype=np.float32)
    units = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    found = engine.searcher.rank(units, QUERIES, 1, Mode.HYBRID, fusion)
    expected = local.searcher.rank(units, QUERIES, 1, Mode.HYBRID, fusion)
    assert [[h.id for h in row] for row in found] == [[h.id for h in row] for row in expected]
    for got, want in zip(found, expected, strict=True):
        np.testing.assert_allclose([[h.dense, h.lexical] for h in got], [[h.dense, h.lexical] for h in want],
                                   rtol=1e-5, atol=1e-5)  # fmt: skip
        # the fused score is a z-score over the proposals, whose dense cosines the tiny BERT packs within a few
        # thousandths (std 0.002-0.007): a last-bit difference in one of them (1.2e-7 between the engine's read-back
        # and the local whole scan, measured) moves it by up to 6e-5
        np.testing.assert_allclose([h.score for h in got], [h.score for h in want], rtol=1e-4, atol=1e-4)
    first, again = [n for n in limits if n < milvus_lexical.BM25_LIMIT], limits.count(milvus_lexical.BM25_LIMIT)
    assert max(first) <= 12 * rows_per_proposal + 1, limits  # each side's first search asked for its proposals' rows
    if rows_per_proposal == 1:  # 13 windows: too few documents, or a tie at the last row: the window side asks again
        assert again > 0, limits
    else:  # 37 windows decide some sides' 12 best documents
        assert again < len(first), limits


def test_a_bm25_side_cut_at_the_engine_limit_still_fuses_exact_scores(
    local: LongIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A BM25 side's search returns its best `BM25_LIMIT` rows: where more rows hold a query term, a document beyond
    them read 0, and a hybrid query fused it on that 0 (at 1M windows the fused top 10 matched the local index's for
    0.3 of the queries). Each proposal is now scored exactly, among its own rows, on a side that was cut."""
    engine = milvus_load.load_into_milvus(local, str(tmp_path / "milvus.db"), "haystack")
    monkeypatch.setattr(milvus_lexical, "BM25_LIMIT", 3)
    asked: list[list[str]] = []
    search = engine.client.search
    monkeypatch.setattr(engine.client, "search", lambda *a, **kw: asked.append(kw["output_fields"]) or search(*a, **kw))
    held = [(local.lexical.side_scores(query) > 0).sum(axis=1).min() for query in QUERIES]
    assert min(held) > 3  # every side of every query holds more matching documents than the limit returns
    vectors = np.asarray(local.embed_queries(QUERIES), dtype=np.float32)
    expected = _ranked(local.search(QUERIES, k=10, mode="hybrid", vectors=vectors))
    _same(_ranked(engine.search(QUERIES, k=10, mode="hybrid", vectors=vectors)), expected)
    # the exact scan through the engine too (its z-score candidates scored among their own rows)
    _same(engine.ranked_with_exact(QUERIES, 10, engine.search_mode("hybrid"))["exact"],
          local.ranked_with_exact(QUERIES, 10, local.search_mode("hybrid"))["exact"])  # fmt: skip
    cut = engine.lexical.side_scores(QUERIES[0])  # as cut: fewer documents than bm25s finds
    assert (cut > 0).sum() < (local.lexical.side_scores(QUERIES[0]) > 0).sum()
    # every search, cut or again among a document's rows, asks for the ids alone: asked for no field, the engine
    # sends every field back (each row's sparse weights and vector), 8x the time of a search at 1M windows
    assert len(asked) > len(QUERIES) and all(fields == ["id"] for fields in asked)


def test_an_interrupted_load_resumes_and_is_served_only_when_complete(
    local: LongIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri = str(tmp_path / "milvus.db")
    seen: list[int] = []

    def interrupted(done: int, total: int) -> None:
        seen.append(done)
        if len(seen) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        milvus_load.load_into_milvus(local, uri, "haystack", batch=40, on_progress=interrupted)
    with pytest.raises(LongDocError, match="no index is served as 'haystack'"):
        MilvusIndex.open(uri, "haystack")  # half loaded: not served
    written: list[int] = []
    row = milvus_load._window_row
    monkeypatch.setattr(milvus_load, "_window_row", lambda *a: written.append(a[3]) or row(*a))
    engine = milvus_load.load_into_milvus(local, uri, "haystack", batch=40)
    windows = int(local.offsets[-1])
    assert written == list(range(80, windows))  # resumed after the two finished batches
    assert engine.client.query(engine.collection, filter="id >= 0", output_fields=["count(*)"])[0]["count(*)"] \
        == windows  # fmt: skip


@pytest.mark.parametrize("begun_with_weights", [False, True])
def test_an_index_without_window_bm25_loads_without_a_sparse_field(
    encoded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, begun_with_weights: bool
) -> None:
    """An index without text (or with BM25 over whole documents alone) loads with no BM25 field on its windows: no
    placeholder weights stored, and a Milvus without sparse vectors (2.3) takes it. A load begun by an earlier
    lengthwise, whose collection has the field, resumes with it. Dense search gives the local top 10 either way."""
    local = LongIndex.build_windows(encoded, tmp_path / "dense")
    uri = str(tmp_path / "milvus.db")
    if begun_with_weights:  # the first batch written as an earlier lengthwise wrote it, then stopped
        made, row = milvus_load._windows_schema, milvus_load._window_row
        monkeypatch.setattr(milvus_load, "_windows_schema", lambda c, d, k, s: made(c, d, k, True))
        monkeypatch.setattr(milvus_load, "_window_row", lambda v, o, w, r, s: row(v, o, w, r, True))

        def stopped(done: int, total: int) -> None:
            raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            milvus_load.load_into_milvus(local, uri, "dense", batch=40, on_progress=stopped)
        monkeypatch.undo()
    engine = milvus_load.load_into_milvus(local, uri, "dense", batch=40)
    fields = {field["name"] for field in engine.client.describe_collection(engine.collection)["fields"]}
    assert fields == {"id", "doc", "dense"} | ({"bm25"} if begun_with_weights else set())
    assert engine.lexical is None
    vectors = np.asarray(local.vectors[[0, 50, 100]], dtype=np.float32)
    _same(engine.search_vectors(vectors, k=10), local.search_vectors(vectors, k=10))


def test_records_are_read_at_strong_consistency(
    local: LongIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server reads at bounded staleness unless asked: a load's progress, and the name it has just published, read
    back at once were not there yet (Milvus 2.3.5 standalone: the load's own `open` found no index served). Every
    read of the records (the load's, the open's) asks for strong consistency."""
    engine = milvus_load.load_into_milvus(local, str(tmp_path / "milvus.db"), "haystack")
    levels: list[tuple[str, object]] = []
    query = engine.client.query

    def recorded(collection: str, *args: object, **kwargs: object) -> object:
        levels.append((collection, kwargs.get("consistency_level")))
        return query(collection, *args, **kwargs)

    monkeypatch.setattr(engine.client, "query", recorded)
    for module in (milvus_load, milvus_index):  # the same client, its queries recorded
        monkeypatch.setattr(module, "connect", lambda uri: engine.client)
    milvus_load.load_into_milvus(local, str(tmp_path / "milvus.db"), "haystack")  # done: reads, publishes again
    MilvusIndex.open(str(tmp_path / "milvus.db"), "haystack")
    records = [level for collection, level in levels if collection.endswith((store.RECORDS, store.SERVED))]
    assert records and set(records) == {"Strong"}


def test_a_server_without_sparse_vectors_is_refused_in_one_line(
    local: LongIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Milvus older than 2.4 refuses a collection with a sparse field (2.3.5: "create index on 104 field is not
    supported"). The load says so in one line on the URI, with the fix, where the collection has BM25."""
    uri = str(tmp_path / "milvus.db")
    client = store.connect(uri)

    def refused(collection: str, schema: object = None, **kwargs: object) -> None:
        if any(field.name == "bm25" for field in schema.fields):  # type: ignore[attr-defined]
            create(collection, schema=schema)  # made, as a server makes it, before its index is refused
            raise RuntimeError("create index on 104 field is not supported")
        return create(collection, schema=schema, **kwargs)

    create = client.create_collection
    monkeypatch.setattr(client, "create_collection", refused)
    monkeypatch.setattr(milvus_load, "connect", lambda uri: client)
    with pytest.raises(SettingError, match=r"refused the collection .*104.*Milvus 2\.4 or later.*without text") as err:
        milvus_load.load_into_milvus(local, uri, "haystack")
    assert "\n" not in str(err.value)
    refused_name = str(err.value).split("refused the collection ")[1].split(" ")[0]
    assert not client.has_collection(refused_name)  # nothing half-made left


def test_refusals_name_the_uri_or_name_and_the_fix(local: LongIndex, tmp_path: Path) -> None:
    with pytest.raises(SettingError, match="collection name"):
        milvus_load.load_into_milvus(local, str(tmp_path / "m.db"), "bad-name")
    with pytest.raises(LongDocError, match=r"m2\.db: no index is served as 'nothing'; load one"):
        MilvusIndex.open(str(tmp_path / "m2.db"), "nothing")


@pytest.mark.parametrize("lost", ["collection", "vocabulary"])
def test_a_load_without_its_whole_document_side_is_refused(local: LongIndex, tmp_path: Path, lost: str) -> None:
    """Searched without its whole-document BM25, an index of granularity both or document would fuse (or rank) other
    scores than the local index's: a load whose document side is gone is refused, naming the URI and the fix."""
    if local.lexical.settings["granularity"] == "window":
        pytest.skip("a window index has no whole-document side")
    uri = str(tmp_path / "milvus.db")
    engine = milvus_load.load_into_milvus(local, uri, "haystack")
    if lost == "collection":
        engine.client.drop_collection(engine.collection + store.DOCUMENTS)
    elif local.lexical.settings["granularity"] == "both":
        engine.client.delete(engine.collection + store.RECORDS, filter='key == "lexical_document"')
    else:
        pytest.skip("a document index's vocabulary is its one lexical record")
    with pytest.raises(LongDocError, match=r"milvus\.db: the index served as 'haystack' holds BM25 at granularity "
                       r"\w+ without its whole-document side; load it again"):  # fmt: skip
        MilvusIndex.open(uri, "haystack")


def test_windows_read_back_by_row_are_the_local_ones(
    local: LongIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every window read back (rows, documents, fp32 vectors) is the local index's, whether its document's windows come
    in one query with other documents' or, for a document of more windows than one query returns, over several."""
    engine = milvus_load.load_into_milvus(local, str(tmp_path / "milvus.db"), "haystack")
    counts = np.diff(local.offsets)
    monkeypatch.setitem(store.READ_ROWS, engine.kind, int(np.median(counts)))  # the longest over several queries
    assert counts.max() > engine.windows.read_rows
    rows, docs, vectors = engine.windows._windows(np.arange(len(local.doc_ids)))
    assert np.array_equal(rows, np.arange(int(local.offsets[-1])))
    assert np.array_equal(docs, np.repeat(np.arange(len(local.doc_ids)), counts))
    assert vectors.dtype == np.float32 and np.array_equal(vectors, np.asarray(local.vectors, dtype=np.float32))
    some = np.asarray([1, 7, int(np.argmax(counts))])
    rows, docs, _ = engine.windows._windows(np.sort(some))
    assert np.array_equal(np.unique(docs), np.sort(some)) and len(rows) == counts[some].sum()


def test_a_load_is_flushed_and_loaded_again_before_it_is_served(
    local: LongIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A finished load's collections are flushed (sealed segments, which the engine indexes) and loaded again before
    the name moves to them: left in growing segments, the engine scans them (a SciFact query several times slower,
    docs/benchmarks.md). The order of the client's calls is the contract: no row store (the engine's own counts and
    index states do not tell a flushed collection from one that is not, in Milvus Lite)."""
    calls: list[tuple[str, str]] = []
    connect = store.connect

    class Recorded:
        def __init__(self, client: object) -> None:
            self.client = client

        def __getattr__(self, name: str) -> object:
            method = getattr(self.client, name)

            def call(*args: object, **kwargs: object) -> object:
                calls.append((name, str(args[0]) if args else ""))
                return method(*args, **kwargs)

            return call

    monkeypatch.setattr(milvus_load, "connect", lambda uri: Recorded(connect(uri)))
    engine = milvus_load.load_into_milvus(local, str(tmp_path / "milvus.db"), "haystack")
    served = calls.index(("upsert", "haystack" + store.SERVED))  # the name's record names the collection
    collections = [engine.collection, engine.collection + store.RECORDS]
    if local.lexical.settings["granularity"] != "window":
        collections.append(engine.collection + store.DOCUMENTS)
    for collection in collections:
        steps = [calls.index((step, collection)) for step in ("flush", "release_collection", "load_collection")]
        assert steps == sorted(steps) and steps[-1] < served, collection
        written = [
            n for n, (name, on) in enumerate(calls[:served]) if on == collection and name in ("insert", "upsert")
        ]
        assert max(written) < steps[0]


def test_a_collection_load_that_fails_once_is_tried_again(
    local: LongIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Milvus Lite can read a flushed segment's index file while its own thread still writes it: the load after the
    flush failed (LoadCollection: "Failed to read all data for array", a busy machine, once in a run of this file)
    and the whole load was lost. A failed collection load is tried again; one that keeps failing is reported."""
    import pymilvus

    failed: list[str] = []
    connect = store.connect

    class Flaky:
        def __init__(self, client: object) -> None:
            self.client = client

        def __getattr__(self, name: str) -> object:
            return getattr(self.client, name)

        def load_collection(self, collection: str) -> None:
            if collection not in failed:  # each collection's first load fails
                failed.append(collection)
                raise pymilvus.MilvusException(1, "Failed to read all data for array (file seems not fully written?)")
            self.client.load_collection(collection)

    monkeypatch.setattr(milvus_load, "connect", lambda uri: Flaky(connect(uri)))
    monkeypatch.setattr(store.time, "sleep", lambda seconds: None)
    engine = milvus_load.load_into_milvus(local, str(tmp_path / "milvus.db"), "haystack")
    assert engine.collection in failed
    vectors = np.asarray(local.embed_queries(["the pass key"]), dtype=np.float32)
    assert [h.id for h in engine.search(["the pass key"], k=3, mode="dense", vectors=vectors)[0]] == [
        h.id for h in local.search(["the pass key"], k=3, mode="dense", vectors=vectors)[0]
    ]
    always = Flaky(connect(str(tmp_path / "other.db")))
    always.load_collection = lambda collection: 1 / 0  # type: ignore[method-assign]
    with pytest.raises(ZeroDivisionError):
        store.load_collection(always, "anything")


def test_a_milvus_lite_connect_that_fails_once_is_tried_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh Milvus Lite channel throttled by its server (gRPC GOAWAY "too_many_pings") failed `index build`'s
    first connect on a busy machine (a test of the CLI, once in a full run): one failure ended the command."""
    import pymilvus

    calls: list[str] = []

    def flaky(uri: str) -> str:
        calls.append(uri)
        if len(calls) == 1:
            raise pymilvus.MilvusException(2, "Fail connecting to server, illegal connection params or unavailable")
        return "client"

    monkeypatch.setattr(pymilvus, "MilvusClient", flaky)
    monkeypatch.setattr(store.time, "sleep", lambda seconds: None)
    assert store.connect(str(tmp_path / "m.db")) == "client" and len(calls) == 2
    calls.clear()
    monkeypatch.setattr(pymilvus, "MilvusClient", lambda uri: calls.append(uri) or 1 / 0)
    with pytest.raises(SettingError, match="ZeroDivisionError"):
        store.connect("http://127.0.0.1:9")  # a server's URL: tried once, each try waits for its own timeout
    assert len(calls) == 1


def test_the_engine_reads_any_row_range_of_window_vectors_as_the_local_index_holds_them(
    local: LongIndex, tmp_path: Path
) -> None:
    """`MilvusWindows.window_vectors(first, last)`: the rows read back by primary key, any range (across documents,
    one row, none), equal to the local index's; a range past the last row is refused in one line. (Before, a
    slice-only stand-in read whole documents and kept the rows asked for.)"""
    if local.lexical.settings["granularity"] != "both":
        pytest.skip("the windows are the same at every granularity")
    engine = milvus_load.load_into_milvus(local, str(tmp_path / "milvus.db"), "haystack")
    total = int(local.offsets[-1])
    for first, last in [(0, total), (3, 17), (int(local.offsets[5]) - 1, int(local.offsets[5]) + 2), (7, 8), (4, 4)]:
        got = engine.windows.window_vectors(first, last)
        assert got.shape[0] == last - first
        if last > first:
            np.testing.assert_array_equal(got, np.asarray(local.vectors[first:last]))
    with pytest.raises(LongDocError, match="missing"):
        engine.windows.window_vectors(total - 1, total + 2)
    rows = np.flatnonzero(np.random.default_rng(0).random(total) < 0.3)  # any ascending rows: `rows_vectors`
    for windows in (engine.windows, local.store):
        np.testing.assert_array_equal(windows.rows_vectors(rows), np.asarray(local.vectors[rows]))
    with pytest.raises(LongDocError, match="missing"):
        engine.windows.rows_vectors(np.asarray([0, total + 5]))


def test_the_token_side_rescores_a_milvus_hybrid_search_as_the_local_one(encoded: Path, tiny_model_dir: Path,
                                                                        tmp_path: Path) -> None:  # fmt: skip
    from lengthwise.longdoc.storage.tokens import encode_tokens

    local = LongIndex.build(encoded, tmp_path / "idx", quantize="none", engine="usearch")
    engine = milvus_load.load_into_milvus(local, str(tmp_path / "milvus.db"), "tokens")
    tokens = tmp_path / "tokens"
    encode_tokens(encoded.parent / "corpus.jsonl", tokens, tiny_model_dir, window=32, overlap=8)
    for index in (local, engine):
        index.use_tokens(tokens, weight=0.6)
    vectors = np.asarray(local.embed_queries(QUERIES), dtype=np.float32)
    expected = local.search(QUERIES, k=10, mode="hybrid", vectors=vectors)
    found = engine.search(QUERIES, k=10, mode="hybrid", vectors=vectors)
    _same(_ranked(found), _ranked(expected))
    assert [[hit.tokens for hit in row] for row in found] == [[hit.tokens for hit in row] for row in expected]
    assert all(hit.tokens is not None for row in found for hit in row)
    near = local.search(QUERIES[:1], k=3, mode="hybrid", vectors=vectors[:1], passages=1)[0]
    far = engine.search(QUERIES[:1], k=3, mode="hybrid", vectors=vectors[:1], passages=1)[0]
    assert [hit.matched for hit in far] == [hit.matched for hit in near]  # where the tokens matched, read back
    assert all(hit.matched is not None for hit in far)
