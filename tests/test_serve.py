"""`lengthwise serve`: a real uvicorn process over a tiny index, talked to over HTTP with httpx.

One server process is shared by the module (the tiny random BERT, 24 documents with their text); a second one,
with an API key and a long batching wait, checks the key and then a SIGTERM that arrives while a request waits in
the batcher. The hits must be the library's (`LongIndex.search`) for the same queries; every bad request gets a 4xx
naming its field and the server keeps serving.
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lengthwise.core.errors import SettingError

httpx = pytest.importorskip("httpx", reason="needs httpx: pip install 'lengthwise[serve]'")
pytest.importorskip("fastapi", reason="needs FastAPI: pip install 'lengthwise[serve]'")
pytest.importorskip("uvicorn", reason="needs uvicorn: pip install 'lengthwise[serve]'")

HAYSTACK = Path(__file__).parent / "longdoc" / "haystack.txt"
RARE = "zanzibarite"  # a word only doc7 holds
QUERIES = ["the river and the old bridge", f"where was {RARE} found", "apples and honey at the autumn market"]
KEY = "s3cret-key-for-tests-0123456789"
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}


def _rows() -> list[dict[str, str]]:
    lines = [line for line in HAYSTACK.read_text().splitlines() if line.strip()]
    rows = [{"_id": f"doc{i}", "text": " ".join(lines[(i * 5 + j) % len(lines)] for j in range(2 + i % 5))}
            for i in range(24)]  # fmt: skip
    rows[7]["text"] += f" The mineral {RARE} was found under the old mill."
    return rows


@pytest.fixture(scope="module")
def index_dir(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """24 documents encoded multi-vector (24-token windows, stride 12) by the tiny BERT, indexed with their text."""
    import lengthwise as lw
    from lengthwise.longdoc import LongDocConfig

    folder = tmp_path_factory.mktemp("serve")
    (folder / "corpus.jsonl").write_text("".join(json.dumps(row) + "\n" for row in _rows()))
    long = LongDocConfig(strategy="multi-vector", window=24, stride=12)
    lw.encode(folder / "corpus.jsonl", folder / "emb", model=str(tiny_model_dir), long=long)
    lw.LongIndex.build(folder / "emb", folder / "idx", quantize="none", engine="faiss")
    return folder / "idx"


class Server:
    """A `lengthwise serve` process on a free port, its URL read from the ready line."""

    def __init__(self, index: Path, *args: str, log: Path) -> None:
        self.log = log
        command = [sys.executable, "-m", "lengthwise.cli", "serve", str(index), "--port", "0", *args]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log.open("w"), text=True, env=ENV)
        self.url = self._ready(timeout=180)

    def _ready(self, timeout: float) -> str:
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            readable, _, _ = select.select([self.process.stdout], [], [], 0.5)
            if readable:
                line = self.process.stdout.readline()
                if found := re.search(r" at (http://\S+) ", line):
                    return found.group(1)
            if self.process.poll() is not None:
                break
        self.process.kill()
        raise AssertionError(f"the server did not start: {self.log.read_text()}")

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=60)


@pytest.fixture(scope="module")
def server(index_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    running = Server(index_dir, "--batch-wait-ms", "20", log=tmp_path_factory.mktemp("log") / "server.log")
    yield running
    assert running.stop() == 0, running.log.read_text()


@pytest.fixture(scope="module")
def client(server: Server) -> Iterator[Any]:
    with httpx.Client(base_url=server.url, timeout=60) as session:
        yield session


@pytest.fixture(scope="module")
def library(index_dir: Path, tiny_model_dir: Path) -> Any:
    import lengthwise as lw

    return lw.LongIndex.open(index_dir)


@pytest.mark.parametrize("mode", ["dense", "lexical", "hybrid", None])
def test_search_answers_as_the_library(client: Any, library: Any, mode: str | None) -> None:
    body: dict[str, Any] = {"queries": QUERIES, "k": 5, "passages": 2}
    if mode is not None:
        body["mode"] = mode
    response = client.post("/search", json=body)
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    expected = library.search(QUERIES, 5, mode=mode, passages=2)
    assert len(results) == len(QUERIES)
    for got, hits in zip(results, expected, strict=True):
        assert "query_id" not in got  # bare strings: no id to echo
        assert [hit["id"] for hit in got["hits"]] == [hit.id for hit in hits]
        for served, made in zip(got["hits"], hits, strict=True):
            wanted = made.to_dict()
            assert served.keys() == wanted.keys()
            assert served["score"] == pytest.approx(wanted["score"], abs=1e-5)
            assert [(p["window"], p["start"], p["end"], p["text"]) for p in served["passages"]] == [
                (p["window"], p["start"], p["end"], p["text"]) for p in wanted["passages"]
            ]
    if mode == "lexical":
        assert results[1]["hits"][0]["id"] == "doc7"


def test_query_ids_are_echoed_and_context_surrounds_the_passage(client: Any, library: Any) -> None:
    body = {"queries": [{"id": "q-rare", "text": f"{RARE} under the mill"}, "the old bridge"], "k": 2,
            "mode": "lexical", "passages": 1, "context": 30}  # fmt: skip
    results = client.post("/search", json=body).json()["results"]
    assert results[0]["query_id"] == "q-rare" and "query_id" not in results[1]
    passage = results[0]["hits"][0]["passages"][0]
    doc = library.doc_ids.index(results[0]["hits"][0]["id"])
    text = library.lexical.text(doc)
    assert text[passage["start"] : passage["end"]] == passage["text"]
    assert passage["before"] == text[max(0, passage["start"] - 30) : passage["start"]]
    assert passage["after"] == text[passage["end"] : passage["end"] + 30]


def test_embed_gives_the_librarys_query_vectors(client: Any, library: Any) -> None:
    import numpy as np

    answer = client.post("/embed", json={"queries": QUERIES[:2]}).json()
    expected = np.asarray(library.embed_queries(QUERIES[:2]))
    assert answer["dim"] == expected.shape[1]
    np.testing.assert_allclose(np.asarray(answer["vectors"]), expected, atol=1e-5)


def test_health_info_and_openapi(client: Any, library: Any) -> None:
    from lengthwise import __version__

    assert client.get("/health").json() == {"status": "ok"}
    info = client.get("/info").json()
    assert info["lengthwise"] == __version__
    assert info["model"]["weights_sha256_16"] == library.settings["model"]["weights_sha256_16"]
    assert info["index"]["documents"] == 24 and info["index"]["windows"] == library.settings["windows"]
    assert info["lexical"]["documents"] == 24 and info["mode"] == "hybrid"
    assert info["limits"]["max_k"] == 1000 and info["threads"] == 1  # OMP_NUM_THREADS=1: torch's default here
    schema = client.get("/openapi.json").json()
    assert {"/search", "/embed", "/health", "/info"} <= set(schema["paths"])


def test_concurrent_requests_share_batches(client: Any, server: Server, library: Any) -> None:
    before = client.get("/info").json()["batches"]
    answers: list[Any] = [None] * 12

    def ask(n: int) -> None:
        with httpx.Client(base_url=server.url, timeout=60) as own:
            answers[n] = own.post("/search", json={"queries": [QUERIES[n % 3]], "k": 3, "mode": "dense"})

    threads = [threading.Thread(target=ask, args=(n,)) for n in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    expected = [[hit.id for hit in hits] for hits in library.search(QUERIES, 3, mode="dense")]
    for n, answer in enumerate(answers):
        assert answer.status_code == 200
        assert [hit["id"] for hit in answer.json()["results"][0]["hits"]] == expected[n % 3]
    after = client.get("/info").json()["batches"]
    assert after["queries"] - before["queries"] == 12
    assert after["run"] - before["run"] < 12  # some requests were embedded together


BAD = {
    "malformed JSON": (b'{"queries": ["a"', "body"),
    "not an object": (b'["a"]', "body"),
    "queries not a list": ({"queries": "the river"}, "queries"),
    "a query not text": ({"queries": [3]}, "queries[0]"),
    "k as text": ({"queries": ["a"], "k": "10"}, "k"),
    "k as a float": ({"queries": ["a"], "k": 2.5}, "k"),
    "k zero": ({"queries": ["a"], "k": 0}, "k"),
    "k negative": ({"queries": ["a"], "k": -3}, "k"),
    "k huge": ({"queries": ["a"], "k": 10**9}, "k"),
    "no queries": ({"queries": []}, "queries"),
    "missing queries": ({"k": 3}, "queries"),
    "empty query": ({"queries": [""]}, "queries[0].text"),
    "blank query": ({"queries": ["   "]}, "queries[0].text"),
    "query too long": ({"queries": ["word " * 1000]}, "queries[0].text"),
    "too many queries": ({"queries": ["a"] * 65}, "queries"),
    "unknown mode": ({"queries": ["a"], "mode": "semantic"}, "mode"),
    "passages huge": ({"queries": ["a"], "passages": 1000}, "passages"),
    "candidates zero": ({"queries": ["a"], "candidates": 0}, "candidates"),
    "candidates huge": ({"queries": ["a"], "windows": 10**6}, "windows"),  # the old name, checked as the new one
    "candidates twice": ({"queries": ["a"], "candidates": 5, "windows": 5}, "windows"),
    "unknown field": ({"queries": ["a"], "passage": 2}, "passage"),
    "top_k zero": ({"queries": ["a"], "top_k": 0}, "top_k"),
    "top_k and k": ({"queries": ["a"], "top_k": 3, "k": 3}, "k"),  # the deprecated name beside the new one
    "duplicate ids": ({"queries": [{"id": "a", "text": "river"}, "bridge", {"id": "a", "text": "mill"}]}, "queries"),
    "stop words only": ({"queries": ["the of and"], "mode": "lexical"}, "queries[0]"),
    "second query stop words": ({"queries": ["the old bridge", "the of and"], "mode": "lexical"}, "queries[1]"),
}

MALFORMED = {  # bodies FastAPI's parser raises on past its JSON errors: they were a 400 on `path`
    "invalid UTF-8": b'{"queries": ["the old \xff\xfe bridge"]}',
    "100,000-deep arrays": b'{"queries": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    "5,000-digit integer": b'{"queries": ["the old bridge"], "k": ' + b"9" * 5000 + b"}",
    "not JSON": b'{"queries": [',
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_a_body_that_cannot_be_parsed_gets_422_on_body(client: Any, name: str) -> None:
    """docs/serving.md: malformed JSON is a 422 whose `field` is `body`, whatever the parser tripped on."""
    response = client.post("/search", content=MALFORMED[name], headers={"Content-Type": "application/json"})
    assert response.status_code == 422, response.text
    error = response.json()
    assert error["field"] == "body" and error["detail"].startswith("body: the body ") and "\n" not in error["detail"]
    assert all(each["field"] == "body" for each in error.get("errors", [])), error
    assert client.post("/search", json={"queries": ["the old bridge"], "k": 1}).status_code == 200


def test_info_shows_no_path_of_the_servers_disk(client: Any, index_dir: Path, tiny_model_dir: Path) -> None:
    """`/info` names the model and the encoded folder by their last part only: where they lie is the server's."""
    info = client.get("/info")
    assert info.status_code == 200
    for private in (str(index_dir.parent), str(tiny_model_dir), str(Path.home())):
        assert private not in info.text, private
    assert info.json()["model"]["name"] == tiny_model_dir.name
    assert info.json()["index"]["encoded"] == "emb"


def test_no_page_loads_from_a_cdn(client: Any) -> None:
    """FastAPI's /docs and /redoc load Swagger UI and ReDoc from a CDN (blank offline): they are off; the schema
    is served, and the search page holds no address outside the server."""
    assert client.get("/docs").status_code == 404 and client.get("/redoc").status_code == 404
    assert client.get("/openapi.json").status_code == 200
    page = client.get("/").text
    assert "cdn" not in page.lower() and not re.search(r"(src|href)=\"https?://", page)


@pytest.mark.parametrize("name", list(BAD))
def test_bad_requests_get_a_4xx_naming_the_field(client: Any, name: str) -> None:
    body, field = BAD[name]
    if isinstance(body, bytes):
        response = client.post("/search", content=body, headers={"Content-Type": "application/json"})
    else:
        response = client.post("/search", json=body)
    assert 400 <= response.status_code < 500, response.text
    error = response.json()
    assert error["field"] == field, error
    assert field in error["detail"] and "\n" not in error["detail"]
    assert client.post("/search", json={"queries": ["the old bridge"], "k": 1}).status_code == 200


def test_candidates_and_their_old_name_windows_answer_as_the_library(client: Any, library: Any) -> None:
    """`candidates` (the dense side's candidate windows per query) was `windows` before 0.2: both are answered."""
    expected = [hit.id for hit in library.search(QUERIES[:1], 5, mode="dense", candidates=1, probes=1)[0]]
    for name in ("candidates", "windows"):
        body = {"queries": QUERIES[:1], "k": 5, "mode": "dense", name: 1, "probes": 1}
        response = client.post("/search", json=body)
        assert response.status_code == 200, response.text
        assert [hit["id"] for hit in response.json()["results"][0]["hits"]] == expected
    assert "candidates" in client.get("/openapi.json").text


def test_top_k_and_its_deprecated_name_k_answer_alike(client: Any, library: Any) -> None:
    """Every flag and the Python API say `top_k` / `--top-k`; the HTTP field was `k` (issue 62.9): `top_k` now, `k`
    still answered (deprecated, said in the schema)."""
    expected = [hit.id for hit in library.search(QUERIES[:1], 3, mode="dense")[0]]
    for name in ("top_k", "k"):
        response = client.post("/search", json={"queries": QUERIES[:1], name: 3, "mode": "dense"})
        assert response.status_code == 200, response.text
        assert [hit["id"] for hit in response.json()["results"][0]["hits"]] == expected
    schema = client.get("/openapi.json").json()["components"]["schemas"]["SearchRequest"]["properties"]
    assert "top_k" in schema and "k" not in schema and "deprecated" in schema["top_k"]["description"].lower()


def test_duplicate_query_ids_are_refused_as_the_cli_refuses_them(client: Any) -> None:
    """`search --queries` refuses two queries under one id (their answers could not be told apart); POST /search
    answered both under it."""
    body = {"queries": [{"id": "a", "text": "the river"}, {"id": "a", "text": "the old mill"}], "top_k": 1}
    response = client.post("/search", json=body)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert "queries[1].id 'a' is queries[0]'s too; give every query its own id" in detail, detail
    alike = {"queries": [{"id": "a", "text": "the river"}, "the river", "the river"], "top_k": 1}
    assert client.post("/search", json=alike).status_code == 200  # ids absent more than once are no ids


def test_depth_reaches_the_hybrid_search_and_a_depth_of_0_is_refused(
    client: Any, library: Any, hybrid_settings: list
) -> None:
    """`depth` (documents each side proposes to a hybrid search) is part of a request's settings, handed to the
    library's search as `lengthwise search --depth` hands it (the batcher's handler, in this process, where the
    search can be watched); the server answers it as the library does, and refuses 0 on the field."""
    from lengthwise.service.app import SEARCH_FIELDS, Searcher

    asked = {"top_k": 3, "mode": "hybrid", "passages": 0, "context": 0, "document": False, "candidates": None,
             "probes": None, "depth": 37}  # fmt: skip
    key = ("search", *(asked[name] for name in SEARCH_FIELDS))
    searcher = Searcher(library)
    handled = searcher.finish(key, QUERIES[:1], searcher.prepare(key, QUERIES[:1]))
    expected = [hit.id for hit in library.search(QUERIES[:1], 3, mode="hybrid", depth=37)[0]]
    assert [s.depth for s in hybrid_settings] == [37, 37] and [hit["id"] for hit in handled[0]] == expected
    response = client.post("/search", json={"queries": QUERIES[:1], "k": 3, "mode": "hybrid", "depth": 37})
    assert response.status_code == 200, response.text
    assert [hit["id"] for hit in response.json()["results"][0]["hits"]] == expected
    refused = client.post("/search", json={"queries": QUERIES[:1], "depth": 0})
    assert refused.status_code == 422 and refused.json()["field"] == "depth"


def test_a_10_mb_body_is_refused_and_the_server_keeps_serving(client: Any) -> None:
    body = json.dumps({"queries": ["x" * (10 * 1024 * 1024)]}).encode()
    response = client.post("/search", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 413 and response.json()["field"] == "body"
    assert client.get("/health").status_code == 200
    assert client.post("/embed", json={"queries": ["the old bridge"]}).status_code == 200


def test_no_endpoint_writes_or_reads_paths(client: Any) -> None:
    assert client.get("/../../etc/passwd").status_code == 404
    assert client.post("/search", json={"queries": ["a"], "index": "/etc"}).status_code == 422
    assert client.delete("/search").status_code == 405


def test_a_missing_damaged_or_changed_index_refuses_in_one_line(index_dir: Path, tmp_path: Path) -> None:
    from lengthwise.search.local.files import served_files

    damaged, changed = tmp_path / "damaged", tmp_path / "changed"
    shutil.copytree(index_dir, damaged)
    (served_files(damaged) / "offsets.npy").write_bytes(b"not numpy")
    shutil.copytree(index_dir, changed)  # built with other weights than the recorded model's
    settings = json.loads((changed / "index.json").read_text())
    settings["model"]["weights_sha256_16"] = "0" * 16
    (changed / "index.json").write_text(json.dumps(settings))
    folders = (tmp_path / "missing", damaged, changed)
    runs = [subprocess.Popen([sys.executable, "-m", "lengthwise.cli", "serve", str(folder), "--port", "0"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
            for folder in folders]  # fmt: skip
    for folder, run in zip(folders, runs, strict=True):
        stdout, stderr = run.communicate(timeout=300)
        assert run.returncode == 2, stderr
        assert stdout == "" and len(stderr.strip().splitlines()) == 1, stderr
        assert stderr.startswith("error:") and str(folder) in stderr.replace("\n", "")


@pytest.fixture(scope="module")
def keyed(index_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A second server: API key required, and a batching wait long enough to send SIGTERM during a request."""
    folder = tmp_path_factory.mktemp("keyed")
    (folder / "key").write_text(KEY + "\n")
    running = Server(index_dir, "--api-key-file", str(folder / "key"), "--batch-wait-ms", "800", "--threads", "2",
                     log=folder / "log")  # fmt: skip
    yield running
    running.stop()


def test_the_api_key_is_required_when_configured(keyed: Server) -> None:
    body = {"queries": ["the old bridge"], "k": 2}
    with httpx.Client(base_url=keyed.url, timeout=60) as session:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": KEY}):
            refused = session.post("/search", json=body, headers=headers)
            assert refused.status_code == 401 and refused.json()["field"] == "authorization"
        assert session.get("/info").status_code == 401
        assert session.get("/health").status_code == 200  # for load balancers: says nothing about the index
        assert session.post("/search", json=body, headers={"Authorization": f"Bearer {KEY}"}).status_code == 200
        info = session.get("/info", headers={"Authorization": f"Bearer {KEY}"}).json()
        assert info["threads"] == 2  # --threads, over the environment's OMP_NUM_THREADS=1


def test_sigterm_drains_in_flight_requests_and_exits_0(keyed: Server) -> None:
    answer: dict[str, Any] = {}

    def ask() -> None:
        with httpx.Client(base_url=keyed.url, timeout=60, headers={"Authorization": f"Bearer {KEY}"}) as own:
            answer["response"] = own.post("/search", json={"queries": ["the old bridge"], "k": 2})

    thread = threading.Thread(target=ask)
    thread.start()
    time.sleep(0.3)  # the request now waits in the batcher (800 ms)
    keyed.process.send_signal(signal.SIGTERM)
    thread.join(timeout=60)
    assert answer["response"].status_code == 200 and len(answer["response"].json()["results"][0]["hits"]) == 2
    assert keyed.process.wait(timeout=60) == 0, keyed.log.read_text()
    with pytest.raises(httpx.ConnectError):
        httpx.get(keyed.url + "/health", timeout=5)


STALLED = """
import sys
from lengthwise.service import ServeConfig, serve
serve(sys.argv[1], ServeConfig(port=0, shutdown_grace_s=1), on_ready=lambda url: print("ready at", url, flush=True))
"""


def test_sigterm_with_a_stalled_client_answers_503_and_logs_no_traceback(index_dir: Path, tmp_path: Path) -> None:
    """A client that sent half its body and stalled: after the grace, uvicorn cancels its request. That was a
    `CancelledError` traceback in the log and a 500; now one line and a 503 on the one error shape."""
    import socket

    log = tmp_path / "log"
    process = subprocess.Popen([sys.executable, "-c", STALLED, str(index_dir)], stdout=subprocess.PIPE,
                               stderr=log.open("w"), text=True, env=ENV)  # fmt: skip
    assert process.stdout is not None
    url = process.stdout.readline().split("ready at ")[-1].strip()
    assert url.startswith("http://"), log.read_text()
    host, port = url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=60) as stalled:
        stalled.sendall(b"POST /search HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                        b"Content-Length: 100\r\n\r\n{\"queries\"")  # fmt: skip
        time.sleep(0.5)
        process.send_signal(signal.SIGTERM)
        answer = b""
        while chunk := stalled.recv(65536):
            answer += chunk
    assert process.wait(timeout=60) == 0, log.read_text()
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 503"), answer
    assert json.loads(body)["field"] == "server"
    said = log.read_text()
    assert "Traceback" not in said and "CancelledError" not in said, said
    assert len([line for line in said.splitlines() if "ERROR" in line]) <= 1, said


def test_a_public_host_without_a_key_warns_once(index_dir: Path, tmp_path: Path) -> None:
    running = Server(index_dir, "--host", "0.0.0.0", log=tmp_path / "log")
    assert running.stop() == 0
    warnings = [line for line in running.log.read_text().splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "0.0.0.0 is reachable from other machines" in warnings[0], warnings


def _chromium() -> str:
    pytest.importorskip("playwright.sync_api", reason="needs Playwright: pip install playwright")
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.skip("needs the system Chromium: apt-get install chromium")
    return path


@pytest.mark.slow
def test_search_page_in_chromium(server: Server, tmp_path: Path) -> None:
    """Type a query into the page, choose lexical, and see doc7 first with its passage highlighted in context."""
    from playwright.sync_api import sync_playwright

    errors: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=_chromium(), args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1100, "height": 900})
        page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(server.url + "/")
        page.wait_for_function("document.getElementById('about').textContent.includes('24 documents')")
        page.fill("#q", f"where was {RARE} found")
        page.select_option("#mode", "lexical")
        page.click("button[type=submit]")
        page.wait_for_selector("li.hit")
        first = page.locator("li.hit").first
        assert first.locator(".doc").inner_text() == "doc7"
        assert RARE in first.locator("mark").inner_text()
        assert first.locator(".passage").inner_text().index(first.locator("mark").inner_text()) >= 0
        assert '"engine": "faiss"' in (page.locator("#settings").text_content() or "")
        page.screenshot(path=str(os.environ.get("LENGTHWISE_SCREENSHOT", tmp_path / "serve.png")))
        browser.close()
    assert errors == []


def test_the_batcher_groups_by_key_and_isolates_a_failing_request() -> None:
    """Concurrent submissions of one key share a handler call; a bad text fails only its own request."""
    import asyncio

    from lengthwise.service.batching import Batcher

    calls: list[tuple[Any, list[str]]] = []

    def handler(key: Any, texts: list[str]) -> list[str]:
        calls.append((key, texts))
        if "bad" in texts:
            raise ValueError("bad text")
        return [f"{key}:{text}" for text in texts]

    async def main() -> list[Any]:
        batcher = Batcher(handler, max_batch=64, wait_s=0.05)
        await batcher.start()
        asked = [("a", ["1"]), ("a", ["2", "3"]), ("b", ["4"]), ("a", ["bad"])]
        found = await asyncio.gather(*(batcher.submit(key, texts) for key, texts in asked), return_exceptions=True)
        await batcher.stop()
        return found

    found = asyncio.run(main())
    assert found[:3] == [["a:1"], ["a:2", "a:3"], ["b:4"]]
    assert isinstance(found[3], ValueError)
    assert calls[0] == ("a", ["1", "2", "3", "bad"]) and ("b", ["4"]) in calls  # one call per key, then alone
    assert ("a", ["bad"]) in calls and ("a", ["1"]) in calls


def test_the_batcher_embeds_the_next_batch_while_one_is_searched() -> None:
    """Two stages on two threads: the first batch's search waits until the second batch is being prepared, which a
    batcher running both stages on one thread (as before) never reaches; a failure in either stage fails only its
    own request, and the second stage gets each request's own slice of the first stage's items."""
    import asyncio

    from lengthwise.service.batching import Batcher

    second_prepared = threading.Event()
    threads: dict[str, set[str]] = {"prepare": set(), "finish": set()}

    class Stages:
        def prepare(self, key: Any, texts: list[str]) -> list[str]:
            threads["prepare"].add(threading.current_thread().name)
            if "late" in texts:
                second_prepared.set()
            if "unembeddable" in texts:
                raise ValueError("cannot embed")
            return [text.upper() for text in texts]

        def finish(self, key: Any, texts: list[str], prepared: Any) -> list[str]:
            threads["finish"].add(threading.current_thread().name)
            if "first" in texts and not second_prepared.wait(timeout=10):
                raise TimeoutError("the next batch was not prepared while this one was searched")
            if "unsearchable" in texts:
                raise ValueError("cannot search")
            return [f"{text}>{item}" for text, item in zip(texts, prepared, strict=True)]

    async def main() -> list[Any]:
        batcher = Batcher(Stages(), max_batch=64, wait_s=0.02)
        await batcher.start()
        first = asyncio.ensure_future(batcher.submit("a", ["first"]))
        await asyncio.sleep(0.2)  # the first batch is being searched
        asked = [["late"], ["unembeddable"], ["x", "y"], ["unsearchable"]]
        rest = await asyncio.gather(*(batcher.submit("a", texts) for texts in asked), return_exceptions=True)
        found = [await first, *rest]
        await batcher.stop()
        return found

    found = asyncio.run(main())
    assert found[0] == ["first>FIRST"] and found[1] == ["late>LATE"] and found[3] == ["x>X", "y>Y"]
    assert isinstance(found[2], ValueError) and "embed" in str(found[2])
    assert isinstance(found[4], ValueError) and "search" in str(found[4])
    assert len(threads["prepare"]) == 1 and len(threads["finish"]) == 1 and threads["prepare"] != threads["finish"]


def test_search_with_vectors_made_beforehand_answers_as_without(library: Any) -> None:
    vectors = library.embed_queries(QUERIES)
    for mode in ("dense", "hybrid"):
        given = library.search(QUERIES, 5, mode=mode, passages=1, vectors=vectors)
        assert given == library.search(QUERIES, 5, mode=mode, passages=1)
    with pytest.raises(SettingError, match="vectors"):
        library.search(QUERIES, 5, mode="dense", vectors=vectors[:1])


def test_threads_below_one_is_refused_in_one_line(index_dir: Path) -> None:
    from typer.testing import CliRunner

    from lengthwise.cli import app

    run = CliRunner().invoke(app, ["serve", str(index_dir), "--port", "0", "--threads", "0"])
    assert run.exit_code == 2
    lines = run.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and "threads" in lines[0], run.output


def test_served_with_tokens_answers_as_the_library_with_them(index_dir: Path, tiny_model_dir: Path,
                                                             tmp_path: Path) -> None:  # fmt: skip
    import lengthwise as lw
    from lengthwise.longdoc.storage.tokens import encode_tokens

    tokens = tmp_path / "tokens"
    encode_tokens(index_dir.parent / "corpus.jsonl", tokens, tiny_model_dir, window=32, overlap=8)
    library = lw.LongIndex.open(index_dir)
    library.use_tokens(tokens, weight=0.5, around=2, depth=4)
    expected = library.search(QUERIES, k=5, mode="hybrid")
    running = Server(index_dir, "--tokens", str(tokens), "--token-weight", "0.5", "--token-around", "2",
                     "--token-depth", "4", log=tmp_path / "server.log")  # fmt: skip
    try:
        with httpx.Client(base_url=running.url, timeout=60) as session:
            answer = session.post("/search", json={"queries": QUERIES, "top_k": 5, "mode": "hybrid"})
            assert answer.status_code == 200, answer.text
            for got, hits in zip(answer.json()["results"], expected, strict=True):
                assert [hit["id"] for hit in got["hits"]] == [hit.id for hit in hits]
                read, want = [hit.get("tokens") for hit in got["hits"]], [hit.tokens for hit in hits]
                assert [t is None for t in read] == [t is None for t in want] == [False] * 4 + [True]  # 5th: depth 4
                assert [t for t in read if t is not None] == pytest.approx([t for t in want if t is not None], abs=1e-5)
            asked = {"queries": QUERIES[:1], "top_k": 3, "mode": "hybrid", "passages": 1, "context": 5}
            hits = session.post("/search", json=asked).json()["results"][0]["hits"]
            with_passages = library.search(QUERIES[:1], k=3, mode="hybrid", passages=1)[0]
            for got, hit in zip(hits, with_passages, strict=True):  # the token stage's passage, with its context
                assert hit.matched is not None and got["matched"]["text"] == hit.matched.text
                text = library.lexical.text(library.numbers[hit.id])
                assert got["matched"]["before"] == text[max(0, hit.matched.start - 5) : hit.matched.start]
            info = session.get("/info").json()["tokens"]
            assert info["codec"] == "bin" and info["weight"] == 0.5 and info["folder"] == "tokens"
            assert info["around"] == 2 and info["depth"] == 4
    finally:
        assert running.stop() == 0, running.log.read_text()
