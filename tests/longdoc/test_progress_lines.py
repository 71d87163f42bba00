"""Progress off a terminal (issue 62.11): `encode`, `index build` and a Milvus load run under nohup or into a log
write a plain line every LENGTHWISE_PROGRESS_INTERVAL seconds (documents or windows done of all, rate, time left)
and one last line, never a carriage-return bar; on a terminal the bar stays."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.longdoc.conftest import haystack_rows

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
       "LENGTHWISE_PROGRESS_INTERVAL": "0"}  # fmt: skip
pytestmark = pytest.mark.usefixtures("one_thread")


def _logged(tmp_path: Path, *argv: object) -> str:
    """`lengthwise ARGV` run as `nohup … 2> log` would: stderr to a file (no terminal), the log's text returned."""
    log = tmp_path / "log.txt"
    with log.open("w") as stderr:
        done = subprocess.run([sys.executable, "-m", "lengthwise.cli", *map(str, argv)], env=ENV,
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr)  # fmt: skip
    text = log.read_text()
    assert done.returncode == 0, text
    assert "\r" not in text  # readable lines, not a bar redrawn in place
    return text


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("progress") / "corpus.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in haystack_rows(12)))
    return path


def test_encode_writes_progress_lines_off_a_terminal(tiny_model_dir: Path, corpus: Path, tmp_path: Path) -> None:
    log = _logged(tmp_path, "encode", "-d", corpus, "-o", tmp_path / "emb", "-m", tiny_model_dir, "--long",
                  "multi-vector", "--window", "24", "--shard-docs", "5")  # fmt: skip
    lines = re.findall(r"^encode: (\d+)/12 documents \(\d+%\), ([\d,]+) windows, .* left, [\d.?]+ documents/s$",
                       log, flags=re.MULTILINE)  # fmt: skip
    assert len(lines) >= 3, log  # a line as it goes (interval 0: after every document)
    assert re.search(r"^encode done: 12/12 documents \(100%\), [\d,]+ windows, ", log, flags=re.MULTILINE), log
    windows = [int(count.replace(",", "")) for _, count in lines]
    assert windows == sorted(windows) and windows[-1] > 12  # more windows than documents: 24-token windows


def test_encode_progress_counts_only_new_documents_when_resumed(
    tiny_model_dir: Path, corpus: Path, tmp_path: Path
) -> None:
    args = ["encode", "-d", corpus, "-o", tmp_path / "emb", "-m", tiny_model_dir, "--shard-docs", "5"]
    _logged(tmp_path, *args)
    for path in (tmp_path / "emb").glob("w0-00002*"):  # the last shard (2 documents) lost: embedded again
        path.unlink()
    log = _logged(tmp_path, *args)
    assert re.search(r"^encode: 10/12 documents", log, flags=re.MULTILINE), log  # the 10 kept, at the start
    assert re.search(r"^encode done: 12/12 documents", log, flags=re.MULTILINE), log


def test_index_build_writes_progress_lines_off_a_terminal(tiny_model_dir: Path, corpus: Path, tmp_path: Path) -> None:
    _logged(tmp_path, "encode", "-d", corpus, "-o", tmp_path / "emb", "-m", tiny_model_dir, "--long", "multi-vector",
            "--window", "24")  # fmt: skip
    log = _logged(tmp_path, "index", "build", tmp_path / "emb", "--out", tmp_path / "index")
    windows = r"^indexing windows: \d+/\d+ distinct windows \(\d+%\), .* distinct windows/s$"
    assert re.search(windows, log, flags=re.MULTILINE), log
    assert re.search(r"^indexing windows done: (\d+)/\1 distinct windows \(100%\)", log, flags=re.MULTILINE), log
    for side in ("window", "document"):  # BM25 at both granularities, the default
        assert re.search(rf"^indexing the text by {side} done: 12/12 documents \(100%\)", log, flags=re.M), log
    assert log.rstrip().splitlines()[-1].startswith("indexed "), log


def test_milvus_load_writes_progress_lines(tiny_model_dir: Path, corpus: Path, tmp_path: Path, capsys) -> None:
    pytest.importorskip("pymilvus")
    pytest.importorskip("milvus_lite")
    from lengthwise.core.progress import ProgressLines
    from lengthwise.facade import LongIndex
    from lengthwise.search.milvus.load import load_into_milvus

    _logged(tmp_path, "encode", "-d", corpus, "-o", tmp_path / "emb", "-m", tiny_model_dir, "--long", "multi-vector",
            "--window", "24")  # fmt: skip
    index = LongIndex.build(tmp_path / "emb", tmp_path / "index")
    capsys.readouterr()
    with ProgressLines("loading windows into Milvus", unit="windows", interval=0) as lines:
        load_into_milvus(index, str(tmp_path / "m.db"), "progress", batch=8, on_progress=lines.advance)
    log = capsys.readouterr().err
    windows = len(index.vectors)
    done = re.findall(rf"^loading windows into Milvus: (\d+)/{windows} windows \(\d+%\), .* windows/s$", log,
                      flags=re.MULTILINE)  # fmt: skip
    assert [int(n) for n in done] == [*range(8, windows, 8), windows], log  # after each batch (interval 0)
    assert re.search(rf"^loading windows into Milvus done: {windows}/{windows} windows", log, flags=re.MULTILINE), log


def test_milvus_index_build_writes_load_lines_off_a_terminal(
    tiny_model_dir: Path, corpus: Path, tmp_path: Path
) -> None:
    pytest.importorskip("pymilvus")
    pytest.importorskip("milvus_lite")
    _logged(tmp_path, "encode", "-d", corpus, "-o", tmp_path / "emb", "-m", tiny_model_dir, "--long", "multi-vector",
            "--window", "24")  # fmt: skip
    log = _logged(tmp_path, "index", "build", tmp_path / "emb", "--out", tmp_path / "index", "--backend", "milvus",
                  "--uri", tmp_path / "m.db", "--name", "progress")  # fmt: skip
    assert re.search(r"^loading windows into Milvus done: (\d+)/\1 windows \(100%\)", log, flags=re.MULTILINE), log


def test_stopped_job_says_stopped(capsys) -> None:
    from lengthwise.core.progress import ProgressLines

    with pytest.raises(KeyboardInterrupt), ProgressLines("encode", total=10, unit="documents", interval=60) as lines:
        lines.update(3)
        raise KeyboardInterrupt
    log = capsys.readouterr().err
    assert log.splitlines() == [log.splitlines()[0], log.splitlines()[-1]] and "encode: 0/10 documents" in log
    assert log.splitlines()[-1].startswith("encode stopped: 3/10 documents (30%)"), log


def test_ray_encode_writes_progress_lines_off_a_terminal(tiny_model_dir: Path, corpus: Path, tmp_path: Path) -> None:
    pytest.importorskip("ray.data")
    log = _logged(tmp_path, "encode", "-d", corpus, "-o", tmp_path / "emb", "-m", tiny_model_dir, "--runner", "ray",
                  "--workers", "1", "--shard-docs", "5")  # fmt: skip
    # the driver counts the shards as they come back (each actor's lines for its shard follow, when Ray forwards them
    # before it shuts down: `(MapWorker(…) pid=…) encode shard w0-00000: 3/5 documents …`)
    assert re.search(r"^encode: 5/12 documents \(42%\), .* documents/s$", log, flags=re.MULTILINE), log
    assert re.search(r"^encode done: 12/12 documents \(100%\)", log, flags=re.MULTILINE), log
    assert "embedded 12 new documents" in log, log  # the count the actors sent back


def _beir(folder: Path, texts: list[str]) -> Path:
    """A small BEIR folder: query i (the first words of document i) judged relevant to document i."""
    folder.mkdir()
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": f"d{i}", "text": t}) + "\n"
                                                 for i, t in enumerate(texts)))  # fmt: skip
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": f"q{i}", "text": " ".join(t.split()[:6])}) + "\n"
                                                  for i, t in enumerate(texts)))  # fmt: skip
    (folder / "qrels").mkdir()
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n"
                                               + "".join(f"q{i}\td{i}\t1\n" for i in range(len(texts))))  # fmt: skip
    return folder


def test_eval_writes_progress_lines_off_a_terminal(tiny_model_dir: Path, corpus: Path, tmp_path: Path) -> None:
    """`lengthwise eval` into a log said nothing until its table (minutes on SciFact): now a line per interval for
    the documents and for the queries, plain (the model's encode at the whole batch list: the same vectors), and
    `--long` reads whole documents with the same lines."""
    texts = [json.loads(line)["text"] for line in corpus.read_text().splitlines()]
    data = _beir(tmp_path / "beir", texts)
    log = _logged(tmp_path, "eval", "--task-type", "retrieval", "-d", data, "-m", tiny_model_dir, "-o",
                  tmp_path / "out", "--batch-size", "4")  # fmt: skip
    assert re.search(r"^encode documents: 4/12 texts \(33%\), ", log, flags=re.MULTILINE), log
    assert re.search(r"^encode documents done: 12/12 texts \(100%\), ", log, flags=re.MULTILINE), log
    assert re.search(r"^encode queries done: 12/12 texts \(100%\), ", log, flags=re.MULTILINE), log
    log = _logged(tmp_path, "eval", "--task-type", "retrieval", "-d", data, "-m", tiny_model_dir, "-o",
                  tmp_path / "long", "--long", "multi-vector", "--window", "24")  # fmt: skip
    assert re.search(r" done: 12/12 documents \(100%\), ", log, flags=re.MULTILINE), log


def test_progress_lines_leave_the_vectors_and_the_model_as_they_were(tiny_model, capsys) -> None:
    import numpy as np
    import sentence_transformers.sentence_transformer.model as st_model

    from lengthwise.core.encoder import SentenceTransformerEncoder

    texts = [f"text {i} " + "word " * (i % 7) for i in range(21)]
    plain = SentenceTransformerEncoder(tiny_model).encode_documents(texts, batch_size=4)
    before = st_model.trange
    lined = SentenceTransformerEncoder(tiny_model).encode_documents(texts, batch_size=4, show_progress=True)  # lines
    assert st_model.trange is before
    np.testing.assert_array_equal(lined, plain)
    assert "encode documents done: 21/21 texts (100%)" in capsys.readouterr().err
