"""The search stage on several threads (issue 48, part 3): `LongIndex.search` of many queries spread over search
threads answers exactly as one query at a time (ids, scores, each side's score, passages) in every mode, through the
engine and through the exact scan; the service's batcher searches several batches at once; a server with several
search threads answers many concurrent clients as the library answers them one by one."""

from __future__ import annotations

import asyncio
import json
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lengthwise.core.errors import SettingError

HAYSTACK = Path(__file__).parents[1] / "longdoc" / "haystack.txt"
RARE = "zanzibarite"  # a word only doc7 holds
MODES = ["dense", "lexical", "hybrid"]


def _lines() -> list[str]:
    return [line for line in HAYSTACK.read_text().splitlines() if line.strip()]


def _rows() -> list[dict[str, str]]:
    lines = _lines()
    rows = [{"_id": f"doc{i}", "text": " ".join(lines[(i * 7 + j) % len(lines)] for j in range(2 + i % 6))}
            for i in range(40)]  # fmt: skip
    rows[7]["text"] += f" The mineral {RARE} was found under the old mill."
    return rows


def _same_hits(got: list[Any], want: list[Any], within: float = 0.0) -> bool:
    """Hits (dicts) equal, scores to the bit (a query's vector does not depend on its batch, issue 62.1), or within
    `within` where two ways of scoring are compared (a whole scan of the windows against each document's own: the
    same products summed in other orders)."""
    if isinstance(got, dict) and isinstance(want, dict):
        return got.keys() == want.keys() and all(_same_hits(got[key], want[key], within) for key in got)
    if isinstance(got, list) and isinstance(want, list):
        return len(got) == len(want) and all(_same_hits(a, b, within) for a, b in zip(got, want, strict=True))
    if isinstance(got, float) and isinstance(want, float):
        return abs(got - want) <= within
    return bool(got == want)


def _queries() -> list[str]:
    """Sixteen queries: words cut from the haystack's lines, and one only a single document holds."""
    words = [line.split() for line in _lines()]
    found = [" ".join(line[n % 3 : n % 3 + 5]) for n, line in enumerate(words[:15]) if len(line) >= 8]
    return [*found[:15], f"where was {RARE} found"]


@pytest.fixture(scope="module")
def index(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """40 documents encoded multi-vector (24-token windows, stride 12) by the tiny BERT, USearch int8, with text."""
    import lengthwise as lw
    from lengthwise.longdoc import LongDocConfig

    folder = tmp_path_factory.mktemp("parallel")
    (folder / "corpus.jsonl").write_text("".join(json.dumps(row) + "\n" for row in _rows()))
    long = LongDocConfig(strategy="multi-vector", window=24, stride=12)
    lw.encode(folder / "corpus.jsonl", folder / "emb", model=str(tiny_model_dir), long=long)
    lw.LongIndex.build(folder / "emb", folder / "idx", quantize="int8", engine="usearch")
    return lw.LongIndex.open(folder / "idx")


@pytest.fixture
def ranked_on(monkeypatch: pytest.MonkeyPatch) -> set[str]:
    """The names of the threads each query of a search was ranked on (`Searcher._ranked`)."""
    from lengthwise.search.searcher import Searcher

    names: set[str] = set()
    ranked = Searcher._ranked
    # the first two queries on pool threads meet before either is ranked: a pool thread that finished every query
    # before a second one started (a loaded machine) cannot make a parallel search look serial
    meet, met = threading.Barrier(2), threading.Event()

    def watched(self: Any, *args: Any, **kwargs: Any) -> Any:
        name = threading.current_thread().name
        if name.startswith("lengthwise-search") and not met.is_set():
            try:
                meet.wait(timeout=10)
                met.set()
            except threading.BrokenBarrierError:
                pass  # only one pool thread ever came: the check below says so
        names.add(name)
        return ranked(self, *args, **kwargs)

    monkeypatch.setattr(Searcher, "_ranked", watched)
    return names


@pytest.mark.parametrize("candidates", [None, 5])  # the exact scan of every distinct vector; the engine (HNSW)
@pytest.mark.parametrize("mode", MODES)
def test_many_queries_on_threads_equal_one_at_a_time(
    index: Any, ranked_on: set[str], mode: str, candidates: int | None
) -> None:
    queries = _queries()
    vectors = index.embed_queries(queries)
    settings: dict[str, Any] = {"mode": mode, "passages": 2, "candidates": candidates}
    alone = [index.search([query], 5, vectors=vectors[n : n + 1], search_threads=1, **settings)[0]
             for n, query in enumerate(queries)]  # fmt: skip
    assert len({thread for thread in ranked_on if thread.startswith("lengthwise-search")}) == 0
    together = index.search(queries, 5, vectors=vectors, search_threads=4, **settings)
    assert len({thread for thread in ranked_on if thread.startswith("lengthwise-search")}) > 1  # really parallel
    assert together == alone  # ids, fused and each side's scores, passages (spans, text, scores): exactly
    assert index.search(queries, 5, vectors=vectors, search_threads=1, **settings) == alone
    assert sum(len(hits) for hits in alone) > len(queries)  # something was found to compare
    if mode != "dense":
        assert alone[-1][0].id == "doc7"


def test_search_vectors_and_proposals_on_threads_equal_one_at_a_time(index: Any) -> None:
    vectors = index.embed_queries(_queries())
    for candidates in (None, 5):
        alone = [index.search_vectors(vectors[n : n + 1], 5, candidates=candidates, search_threads=1)[0]
                 for n in range(len(vectors))]  # fmt: skip
        assert index.search_vectors(vectors, 5, candidates=candidates, search_threads=3) == alone
        proposed = index.windows.proposals(vectors, 10, candidates=candidates, search_threads=3)
        for n, docs in enumerate(proposed):
            assert docs.tolist() == index.windows.proposals(vectors[n : n + 1], 10, candidates=candidates)[0].tolist()


def test_row_products_give_each_query_the_same_bits_in_a_batch_of_any_size() -> None:
    import torch

    from lengthwise.core.encoder import ROW_BLOCK, row_products

    generator = torch.Generator().manual_seed(0)
    matrix = torch.randn(2 * ROW_BLOCK + 37, 48, generator=generator)  # three blocks, the last one short
    queries = torch.randn(7, 48, generator=generator)
    together = row_products(queries, matrix)
    for n in range(len(queries)):
        assert torch.equal(together[n], row_products(queries[n : n + 1], matrix)[0])
    torch.testing.assert_close(together, queries @ matrix.T, rtol=0, atol=1e-5)
    with ThreadPoolExecutor(3) as pool:  # the blocks spread over threads: the same bits
        assert torch.equal(row_products(queries, matrix, pool=pool), together)


@pytest.mark.parametrize("mode", ["dense", "hybrid"])
def test_a_few_documents_are_scored_for_the_whole_batch_in_one_read(index: Any, monkeypatch, mode: str) -> None:
    """An index of no more documents than a query's rescoring reaches (40 here) reads every window once for the
    batch, not once a query; the hits equal those of scoring each query's documents on their own."""
    from lengthwise.core import encoder
    from lengthwise.search.local import windows as _dense

    queries = _queries()
    vectors = index.embed_queries(queries)
    whole_reads = []
    scores = encoder.multi_vector_scores

    def counted(units, documents, *args, **kwargs):
        if kwargs.get("products") and len(documents.vectors) == len(index.vectors):  # every window, rescoring
            whole_reads.append(len(units))
        return scores(units, documents, *args, **kwargs)

    monkeypatch.setattr(_dense, "multi_vector_scores", counted)
    found = index.search(queries, 5, mode=mode, vectors=vectors, search_threads=2)
    assert whole_reads == [len(queries)]  # one read of the windows for all 16 queries
    monkeypatch.setattr(_dense.LocalWindows, "whole_scans", lambda self, units, *args, **kwargs: [None] * len(units))
    each_alone = index.search(queries, 5, mode=mode, vectors=vectors, search_threads=2)
    assert [[hit.id for hit in row] for row in found] == [[hit.id for hit in row] for row in each_alone]
    assert _same_hits([[hit.to_dict() for hit in row] for row in found],
                      [[hit.to_dict() for hit in row] for row in each_alone], within=1e-5)  # fmt: skip


def test_whole_scans_stop_where_the_index_holds_more_documents_than_a_query_reaches(index: Any) -> None:
    import torch

    units = torch.nn.functional.normalize(torch.as_tensor(index.embed_queries(_queries()[:3])), dim=-1)
    documents = len(index.doc_ids)
    assert index.windows.whole_scans(units, index.scoring, documents - 1) == [None] * 3
    wholes = index.windows.whole_scans(units, index.scoring, documents)
    for unit, whole in zip(units, wholes, strict=True):
        every = index.windows.document_scores(unit, np.arange(documents), index.scoring)
        np.testing.assert_allclose(whole.numpy(), every, rtol=0, atol=1e-6)


def test_search_threads_below_one_are_refused_naming_the_field(index: Any) -> None:
    from lengthwise.service.config import ServeConfig

    with pytest.raises(SettingError, match="search_threads"):
        index.search(["the river"], 3, mode="lexical", search_threads=0)
    for wrong in (0, 33):
        with pytest.raises(SettingError, match="search_threads"):
            ServeConfig(search_threads=wrong)


def test_the_default_search_threads_share_the_cores_among_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    from lengthwise.core import parallel
    from lengthwise.service.config import ServeConfig

    monkeypatch.setattr(parallel, "available_cores", lambda: 16)
    assert parallel.default_search_threads() == 15  # one core left to the model thread
    assert ServeConfig().search_threads_used == 15
    assert ServeConfig(workers=4).search_threads_used == 3
    assert ServeConfig(workers=32).search_threads_used == 1
    assert ServeConfig(search_threads=3, workers=4).search_threads_used == 3
    monkeypatch.setattr(parallel, "available_cores", lambda: 2)
    assert ServeConfig().search_threads_used == 1  # two cores: one search thread, the design before
    monkeypatch.setattr(parallel, "available_cores", lambda: 64)
    assert ServeConfig().search_threads_used == parallel.SEARCH_THREADS_AT_MOST


def test_the_batcher_searches_several_batches_at_once() -> None:
    """With two search threads the first batch's search waits until a second batch is being searched beside it,
    which one search thread (the design before) never reaches; each request still gets its own answers."""
    from lengthwise.service.batching import Batcher

    second_searched = threading.Event()
    threads: set[str] = set()

    class Stages:
        def prepare(self, key: Any, texts: list[str]) -> list[str]:
            return [text.upper() for text in texts]

        def finish(self, key: Any, texts: list[str], prepared: Any) -> list[str]:
            threads.add(threading.current_thread().name)
            if "second" in texts:
                second_searched.set()
            if "first" in texts and not second_searched.wait(timeout=10):
                raise TimeoutError("the second batch was not searched while the first was")
            return [f"{text}>{item}" for text, item in zip(texts, prepared, strict=True)]

    async def main() -> list[Any]:
        batcher = Batcher(Stages(), max_batch=64, wait_s=0.01, search_threads=2)
        await batcher.start()
        first = asyncio.ensure_future(batcher.submit("a", ["first"]))
        await asyncio.sleep(0.2)  # the first batch is being searched
        second = await batcher.submit("a", ["second", "x"])
        found = [await first, second]
        await batcher.stop()
        return found

    assert asyncio.run(main()) == [["first>FIRST"], ["second>SECOND", "x>X"]]
    assert len(threads) == 2


def test_the_batcher_answers_many_concurrent_requests_as_serial_ones(index: Any) -> None:
    """Many concurrent requests of mixed settings through the service's handler on four search threads: each answer
    equals the library's serial one."""
    from lengthwise.service.app import SEARCH_FIELDS, Searcher
    from lengthwise.service.batching import Batcher

    queries = _queries()
    asked = [(("search", 3 + n % 3, MODES[n % 3], n % 2, 0, False, None, None, None), [queries[n % len(queries)]])
             for n in range(48)]  # fmt: skip
    assert all(len(key) == 1 + len(SEARCH_FIELDS) for key, _ in asked)

    async def main(threads: int) -> list[Any]:
        batcher = Batcher(Searcher(index, threads), max_batch=16, wait_s=0.005, search_threads=threads)
        await batcher.start()
        found = await asyncio.gather(*(batcher.submit(key, texts) for key, texts in asked))
        await batcher.stop()
        return found

    served = asyncio.run(main(4))
    for (key, texts), answer in zip(asked, served, strict=True):
        hits = index.search(texts, key[1], mode=key[2], passages=key[3], search_threads=1)
        assert _same_hits(answer, [[hit.to_dict() for hit in row] for row in hits]), (answer, hits)
    assert _same_hits(asyncio.run(main(1)), served)


@pytest.fixture(scope="module")
def server(index: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`lengthwise serve INDEX --search-threads 3` on a free port: its URL, read from the ready line."""
    for module in ("httpx", "fastapi", "uvicorn"):
        pytest.importorskip(module, reason="needs pip install 'lengthwise[serve]'")
    log = tmp_path_factory.mktemp("log") / "server.log"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    command = [sys.executable, "-m", "lengthwise.cli", "serve", str(index.folder), "--port", "0",
               "--search-threads", "3"]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log.open("w"), text=True, env=env)
    assert process.stdout is not None
    url, deadline = None, time.monotonic() + 180
    while url is None and time.monotonic() < deadline and process.poll() is None:
        if select.select([process.stdout], [], [], 0.5)[0]:
            found = re.search(r" at (http://\S+) ", process.stdout.readline())
            url = found.group(1) if found else None
    if url is None:
        process.kill()
        raise AssertionError(f"the server did not start: {log.read_text()}")
    yield url
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) == 0, log.read_text()


def test_a_server_on_three_search_threads_answers_concurrent_clients_as_the_library(server: str, index: Any) -> None:
    import httpx

    queries = _queries()
    answers: list[Any] = [None] * 32

    def ask(n: int) -> None:
        body = {"queries": [queries[n % len(queries)]], "k": 4, "mode": MODES[n % 3], "passages": 1}
        with httpx.Client(base_url=server, timeout=60) as own:
            answers[n] = own.post("/search", json=body)

    clients = [threading.Thread(target=ask, args=(n,)) for n in range(32)]
    for client in clients:
        client.start()
    for client in clients:
        client.join()
    for n, answer in enumerate(answers):
        assert answer.status_code == 200, answer.text
        alone = index.search([queries[n % len(queries)]], 4, mode=MODES[n % 3], passages=1, search_threads=1)
        assert _same_hits(answer.json()["results"][0]["hits"], [hit.to_dict() for hit in alone[0]]), answer.json()
    info = httpx.get(f"{server}/info", timeout=60).json()
    assert info["batching"]["search_threads"] == 3


@pytest.mark.parametrize("value", ["0", "33"])
def test_serve_search_threads_out_of_range_is_refused_in_one_line_naming_the_flag(index: Any, value: str) -> None:
    from typer.testing import CliRunner

    from lengthwise.cli import app

    run = CliRunner().invoke(app, ["serve", str(index.folder), "--port", "0", "--search-threads", value])
    assert run.exit_code == 2
    lines = run.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and "--search-threads" in lines[0], run.output


@pytest.mark.parametrize("scoring", [(1, 0.0), (3, 0.0), (2, 0.25)], ids=["max", "best-3", "best-2-fused"])
def test_whole_scans_in_passes_of_one_query_equal_one_pass(index: Any, monkeypatch, scoring) -> None:
    """The bound on what a pass holds (the products, or every document's padded windows when a document scores by
    its best few) splits the queries into passes without changing a bit."""
    import torch

    from lengthwise.core.scoring import WindowScoring
    from lengthwise.search.local import windows as _dense

    units = torch.nn.functional.normalize(torch.as_tensor(index.embed_queries(_queries()[:5])), dim=-1)
    rule = WindowScoring(best_windows=scoring[0], fuse_mean=scoring[1])
    one_pass = index.windows.whole_scans(units, rule, len(index.doc_ids))
    monkeypatch.setattr(_dense, "WHOLE_SCAN_FLOATS", 1)  # one query a pass
    for together, alone in zip(one_pass, index.windows.whole_scans(units, rule, len(index.doc_ids)), strict=True):
        assert torch.equal(together, alone)
    every = index.windows.document_scores(units[0], np.arange(len(index.doc_ids)), rule)
    np.testing.assert_allclose(one_pass[0].numpy(), every, rtol=0, atol=1e-6)
