"""`--backend milvus --uri U` on `index build`, `search`, `eval --index` and `serve` (issue 50), with the embedded
engine (Milvus Lite in tmp_path, no server, no network): each answers as the same command on the local index (ids
and scores to 1e-5, the same metrics), and each wrong combination of the flags is refused in one line."""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

pytest.importorskip("pymilvus")
pytest.importorskip("milvus_lite")

from lengthwise.cli import app

HAYSTACK = Path(__file__).parents[1] / "longdoc" / "haystack.txt"
QUERIES = [
    "the river and the old bridge",
    "a keyboard for the village school",
    "honey at the autumn market",
    "snow in winter on the ridge",
    "bread from the bakery at dawn",
]
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
runner = CliRunner()
pytestmark = pytest.mark.usefixtures("one_thread")


def _invoke(*args: Any) -> Any:
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def built(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """40 haystack documents as a BEIR folder, encoded multi-vector by the tiny BERT, indexed locally (FAISS over
    fp32, every list probed: exact candidates) and, by the same command with --backend milvus, into Milvus Lite: at
    the default BM25 granularity (both) as ``haystack``, and at --granularity window as ``haystack_window``."""
    folder = tmp_path_factory.mktemp("milvus-cli")
    lines = [line for line in HAYSTACK.read_text().splitlines() if line.strip()]
    rows = [{"_id": f"doc{i}", "text": " ".join(lines[(i * 3 + j) % len(lines)] for j in range(3 + i % 7))}
            for i in range(40)]  # fmt: skip
    beir = folder / "beir"
    (beir / "qrels").mkdir(parents=True)
    (beir / "corpus.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    (beir / "queries.jsonl").write_text("".join(json.dumps({"_id": f"q{i}", "text": t}) + "\n"
                                                for i, t in enumerate(QUERIES)))  # fmt: skip
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\tdoc{3 * i + 1}\t1\n"
                                             for i in range(len(QUERIES))))  # fmt: skip
    run = _invoke("encode", "-d", beir / "corpus.jsonl", "-o", folder / "emb", "-m", tiny_model_dir, "--long",
                  "multi-vector", "--window", "24", "--best-windows", "2")  # fmt: skip
    assert run.exit_code == 0, run.output
    settings = ["--quantize", "none", "--engine", "faiss"]
    uri = folder / "milvus.db"
    for suffix, granularity in (("", []), ("_window", ["--granularity", "window"])):
        run = _invoke("index", "build", folder / "emb", "--out", folder / f"local{suffix}", *settings, *granularity)
        assert run.exit_code == 0, run.output
        run = _invoke("index", "build", folder / "emb", "--out", folder / f"for-milvus{suffix}", *settings,
                      *granularity, "--backend", "milvus", "--uri", uri, "--name", f"haystack{suffix}")  # fmt: skip
        assert run.exit_code == 0, run.output
        assert f"served from {uri} as haystack{suffix}" in run.output
    return {"folder": folder, "beir": beir, "local": folder / "local", "uri": uri, "emb": folder / "emb",
            "local_window": folder / "local_window"}  # fmt: skip


def _searched(queries: Path, *where: Any, mode: str) -> list[dict[str, Any]]:
    run = _invoke("search", *where, "--queries", queries, "--mode", mode, "--passages", "2", "--json")
    assert run.exit_code == 0, run.output
    return [json.loads(line) for line in run.stdout.splitlines()]


def _same_hits(found: list[dict[str, Any]], expected: list[dict[str, Any]]) -> None:
    """The same ids, scores to 1e-5, and the same passages (window, span, text; score to 1e-5)."""
    assert [[h["id"] for h in row["hits"]] for row in found] == [[h["id"] for h in row["hits"]] for row in expected]
    scores = [[[h["score"] for h in row["hits"]] for row in rows] for rows in (found, expected)]
    np.testing.assert_allclose(scores[0], scores[1], rtol=1e-5, atol=1e-5)

    def cut(rows: list[dict[str, Any]]) -> list[Any]:
        return [[(p["window"], p["start"], p["end"], p["text"]) for h in r["hits"] for p in h.get("passages", [])]
                for r in rows]  # fmt: skip

    assert cut(found) == cut(expected)
    cuts = [[p["score"] for r in rows for h in r["hits"] for p in h.get("passages", [])] for rows in (found, expected)]
    np.testing.assert_allclose(cuts[0], cuts[1], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("suffix", ["", "_window"])
@pytest.mark.parametrize("mode", ["dense", "hybrid", "lexical"])
def test_search_on_milvus_gives_the_local_top_10_and_passages(built: dict[str, Path], mode: str, suffix: str) -> None:
    """The default build (BM25 at both granularities, on either backend), and one at --granularity window."""
    queries = built["beir"] / "queries.jsonl"
    expected = _searched(queries, built[f"local{suffix}"], mode=mode)
    found = _searched(queries, "--backend", "milvus", "--uri", built["uri"], "--name", f"haystack{suffix}", mode=mode)
    assert all(len(row["hits"]) == 10 and all(len(h["passages"]) == 2 for h in row["hits"]) for row in expected)
    _same_hits(found, expected)


def test_eval_through_milvus_gives_the_local_metrics(built: dict[str, Path], tmp_path: Path) -> None:
    common = ["eval", "-t", "retrieval", "-d", built["beir"], "--mode", "hybrid"]
    run = _invoke(*common, "--index", built["local"], "-o", tmp_path / "local")
    assert run.exit_code == 0, run.output
    run = _invoke(*common, "--backend", "milvus", "--uri", built["uri"], "--name", "haystack", "-o", tmp_path / "m")
    assert run.exit_code == 0, run.output
    local, milvus = (json.loads((tmp_path / out / "results.json").read_text()) for out in ("local", "m"))
    assert milvus["scores"] == pytest.approx(local["scores"], abs=1e-9)
    assert milvus["exact_scores"] == pytest.approx(local["exact_scores"], abs=1e-9)
    assert milvus["index"]["overlap"] == local["index"]["overlap"] == 1.0
    assert milvus["settings"]["index"] == f"milvus:{built['uri']}#haystack" and milvus["index"]["engine"] == "milvus"


def _refusal(*args: Any) -> str:
    run = _invoke(*args)
    assert run.exit_code == 2, run.output
    lines = run.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), run.output
    return lines[0]


def test_wrong_backend_flags_are_refused_in_one_line(built: dict[str, Path], tmp_path: Path) -> None:
    uri = built["uri"]
    assert "--uri: --backend milvus needs the Milvus to use" in _refusal("search", "--backend", "milvus", "-q", "x")
    assert "add --backend milvus, or leave it out" in _refusal("search", built["local"], "--uri", uri, "-q", "x")
    assert "--backend 'qdrant': use local or milvus" in _refusal("search", "--backend", "qdrant", "-q", "x")
    assert "leave the folder out" in _refusal("search", built["local"], "--backend", "milvus", "--uri", uri, "-q", "x")
    assert "no index given" in _refusal("search", "-q", "x")
    assert "ends in .db" in _refusal("search", "--backend", "milvus", "--uri", tmp_path / "plain", "-q", "x")
    missing = _refusal("search", "--backend", "milvus", "--uri", tmp_path / "none.db", "-q", "x")
    assert "no such Milvus Lite database" in missing and not (tmp_path / "none.db").exists()
    unserved = _refusal("search", "--backend", "milvus", "--uri", uri, "--name", "other", "-q", "x")
    assert "no index is served as 'other'" in unserved
    with_model = _refusal("search", "--backend", "milvus", "--uri", uri, "--name", "haystack", "-m", "x", "-q", "x")
    assert "--model" in with_model
    # a build whose Milvus cannot be opened refuses before anything is built
    line = _refusal("index", "build", built["emb"], "--out", tmp_path / "idx", "--backend", "milvus", "--uri",
                    "http://127.0.0.1:1")  # fmt: skip
    assert "--uri" in line and not (tmp_path / "idx").exists()
    line = _refusal("index", "build", built["emb"], "--out", tmp_path / "idx", "--backend", "milvus", "--uri",
                    tmp_path / "m.db", "--granularity", "sentence")  # fmt: skip
    assert "--granularity 'sentence': use one of document, window, both" in line
    assert not (tmp_path / "idx").exists() and not (tmp_path / "m.db").exists()


def test_serving_several_workers_from_a_milvus_lite_file_is_refused(built: dict[str, Path]) -> None:
    line = _refusal("serve", "--backend", "milvus", "--uri", built["uri"], "--name", "haystack", "--workers", "2")
    assert "--workers 2: a Milvus Lite database is opened by one process" in line


def test_without_pymilvus_the_milvus_backend_names_the_extra(
    built: dict[str, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "pymilvus", None)  # `import pymilvus` raises ImportError
    line = _refusal("index", "build", built["emb"], "--out", tmp_path / "idx", "--backend", "milvus", "--uri",
                    tmp_path / "m.db")  # fmt: skip
    assert "pip install 'lengthwise[milvus]'" in line and not (tmp_path / "idx").exists()


def _serve(*args: Any, log: Path) -> tuple[subprocess.Popen[str], str]:
    command = [sys.executable, "-m", "lengthwise.cli", "serve", "--port", "0", *map(str, args)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log.open("w"), text=True, env=ENV)
    assert process.stdout is not None
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and process.poll() is None:
        ready = select.select([process.stdout], [], [], 0.5)[0]
        if ready and (found := re.search(r" at (http://\S+) ", process.stdout.readline())):
            return process, found.group(1)
    process.kill()
    raise AssertionError(f"the server did not start: {log.read_text()}")


def test_serve_from_milvus_answers_as_the_local_index(built: dict[str, Path], tmp_path: Path) -> None:
    """The Milvus Lite database is opened by one process: this one loads a file of its own through a command in another
    process (this test process holds the module's file), and the server opens it."""
    httpx = pytest.importorskip("httpx")
    pytest.importorskip("fastapi")
    uri = tmp_path / "served.db"
    load = [sys.executable, "-m", "lengthwise.cli", "index", "build", str(built["emb"]), "--out", str(tmp_path / "i"),
            "--quantize", "none", "--engine", "faiss", "--backend", "milvus", "--uri", str(uri)]  # fmt: skip
    made = subprocess.run(load, capture_output=True, text=True, env=ENV, timeout=300)
    assert made.returncode == 0, made.stderr
    answers = {}
    for name, where in (("local", [built["local"]]), ("milvus", ["--backend", "milvus", "--uri", uri])):
        process, url = _serve(*where, log=tmp_path / f"{name}.log")
        try:
            with httpx.Client(base_url=url, timeout=120) as client:
                body = {"queries": QUERIES, "k": 10, "mode": "hybrid", "passages": 2, "context": 20}
                response = client.post("/search", json=body)
                assert response.status_code == 200, response.text
                answers[name] = response.json()["results"]
                assert client.get("/info").json()["backend"] == name
        finally:
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=60) == 0, (tmp_path / f"{name}.log").read_text()
    _same_hits(answers["milvus"], answers["local"])
    before = [[(p["before"], p["after"]) for h in r["hits"] for p in h["passages"]] for r in answers["milvus"]]
    assert before == [[(p["before"], p["after"]) for h in r["hits"] for p in h["passages"]] for r in answers["local"]]


def test_the_default_build_holds_bm25_at_both_granularities_on_either_backend(built: dict[str, Path]) -> None:
    """`index build --backend milvus` without --granularity builds what the local default does (both), and the
    engine holds the two BM25 sides; with --granularity window, the window side alone."""
    from lengthwise.facade import LongIndex, MilvusIndex

    assert LongIndex.open(built["local"]).lexical.settings["granularity"] == "both"
    engine = MilvusIndex.open(str(built["uri"]), "haystack")
    assert engine.lexical.settings["granularity"] == "both" and len(engine.lexical.sides) == 2
    window = MilvusIndex.open(str(built["uri"]), "haystack_window")
    assert window.lexical.settings["granularity"] == "window" and len(window.lexical.sides) == 1


def test_a_rebuild_of_the_same_shards_resumes_the_same_load(built: dict[str, Path]) -> None:
    """`index build --backend milvus` run again after a Ctrl-C in its load builds the local index anew (another
    generation); the load is named by what its rows are made of, so it finds the interrupted one and resumes it."""
    from lengthwise.facade import LongIndex
    from lengthwise.search.milvus.load import _load_id

    first, again = LongIndex.open(built["local"]), LongIndex.open(built["folder"] / "for-milvus")
    assert first.settings["generation"] != again.settings["generation"]
    assert _load_id(first) == _load_id(again)
