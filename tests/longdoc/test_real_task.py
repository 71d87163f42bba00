"""The real long-document task shipped in the repository (`data/qmsum`, issue 24): its files, and that `eval` and
`longdoc tune` run on it (mechanics, with the tiny random BERT; the scores are in docs/longdoc.md)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lengthwise.cli import app

QMSUM = Path(__file__).resolve().parents[2] / "data" / "qmsum"
pytestmark = [
    pytest.mark.usefixtures("one_thread"),
    pytest.mark.skipif(not (QMSUM / "corpus.jsonl.gz").is_file(), reason="data/qmsum is not in this tree"),
]


def test_qmsum_is_long_documents_with_one_relevant_meeting_per_query() -> None:
    corpus = [json.loads(line) for line in gzip.decompress((QMSUM / "corpus.jsonl.gz").read_bytes()).splitlines()]
    rows = gzip.decompress((QMSUM / "queries.jsonl.gz").read_bytes()).splitlines()
    queries = {json.loads(row)["_id"] for row in rows}
    ids = {doc["_id"] for doc in corpus}
    assert len(corpus) == 70 and len(ids) == 70
    assert sum(len(doc["text"].split()) > 1500 for doc in corpus) >= 65  # ~2k tokens and more: long documents
    assert not any("{vocalsound}" in doc["text"] for doc in corpus)  # transcription marks removed
    judged = []
    for split in ("dev", "test"):
        rows = (QMSUM / "qrels" / f"{split}.tsv").read_text().splitlines()[1:]
        pairs = [row.split("\t") for row in rows]
        assert all(q in queries and d in ids and r == "1" and q.startswith(d + "-q") for q, d, r in pairs)
        judged += [q for q, _, _ in pairs]
    assert sorted(judged) == sorted(queries)  # every query judged once, in one split


def test_eval_and_tune_run_on_qmsum(tiny_model_dir: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    common = ["-d", str(QMSUM), "-m", str(tiny_model_dir)]
    run = runner.invoke(app, ["eval", "-t", "retrieval", *common, "--split", "dev", "--long", "multi-vector",
                              "--window", "128", "-o", str(tmp_path / "eval")])  # fmt: skip
    assert run.exit_code == 0, run.output
    record = json.loads((tmp_path / "eval" / "results.json").read_text())
    assert record["data"]["n_documents"] == 70 and record["data"]["n_queries"] == 233
    assert 0 <= record["scores"]["ndcg@10"] <= 100
    run = runner.invoke(app, ["longdoc", "tune", *common, "--split", "dev", "--strategies", "multi-vector",
                              "--windows", "128", "--overlaps", "0", "--fuse-means", "0,0.5",
                              "-o", str(tmp_path / "tune")])  # fmt: skip
    assert run.exit_code == 0, run.output
    tune = json.loads((tmp_path / "tune" / "tune.json").read_text())
    labels = [c["label"] for c in tune["result"]["candidates"]]
    assert labels == ["truncate", "multi-vector w128", "multi-vector w128 fuse0.5"]
