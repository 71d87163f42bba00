"""`lengthwise longdoc synth/eval/tune/save`, `lengthwise encode` and `lengthwise eval --long` on the tiny model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from lengthwise.cli import app

pytestmark = pytest.mark.usefixtures("one_thread")

HAYSTACK = Path(__file__).parent / "haystack.txt"
PROSE = Path(__file__).parent / "prose.txt"  # names people and places, as the realistic synth needs
runner = CliRunner()


def _ok(args: list[str]) -> str:
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.output


def _error(args: list[str]) -> str:
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and "Traceback" not in result.output, result.output
    return lines[0]


@pytest.fixture(scope="module")
def passkey(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("synth") / "passkey"
    args = ["longdoc", "synth", "--task", "passkey", "--haystack", PROSE, "--out", folder]
    _ok([*args, "--model", tiny_model_dir, "--lengths", "48,160", "--per-length", "4"])
    return folder


def test_synth_writes_a_grouped_beir_folder(passkey: Path) -> None:
    rows = [json.loads(line) for line in (passkey / "corpus.jsonl").read_text().splitlines()]
    assert sorted({row["group"] for row in rows}) == [48, 160] and len(rows) == 8
    assert (passkey / "qrels" / "test.tsv").is_file()


def test_longdoc_eval_scores_by_length(passkey: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    args = ["longdoc", "eval", "--data", passkey, "--model", tiny_model_dir, "--out", tmp_path]
    _ok([*args, "--long", "multi-vector", "--window", "32"])
    result = json.loads((tmp_path / "results.json").read_text())["result"]
    assert set(result["by_length"]) == {"48", "160"}
    assert result["mean"] == pytest.approx(np.mean(list(result["by_length"].values())), abs=0.01)


def test_tune_saves_a_choice_that_load_model_picks_up(passkey: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    from lengthwise.facade import load_model
    from lengthwise.longdoc import LongEncoder

    saved = tmp_path / "model"
    args = ["longdoc", "tune", "--data", passkey, "--model", tiny_model_dir, "--out", tmp_path / "tune"]
    _ok([*args, "--strategies", "chunk-mean,multi-vector", "--windows", "32,64", "--overlaps", "0", "--save", saved])
    record = json.loads((tmp_path / "tune" / "tune.json").read_text())["result"]
    assert len(record["candidates"]) == 5  # truncate baseline + 2 strategies × 2 windows
    assert (tmp_path / "tune" / "tune.png").is_file()
    encoder = LongEncoder(load_model(saved, device="cpu"))
    assert encoder.config.to_dict() == record["best"]


def test_eval_long_on_a_beir_folder(passkey: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    args = ["eval", "--task-type", "retrieval", "--data", passkey, "--model", tiny_model_dir, "--out", tmp_path]
    _ok([*args, "--long", "multi-vector", "--window", "32", "--stride", "16", "--tempscale", "0.8"])
    payload = json.loads((tmp_path / "results.json").read_text())
    text = json.dumps(payload)
    assert '"multi-vector"' in text and '"stride": 16' in text


def test_encode_resumes_after_a_kill(tiny_model_dir: Path, tmp_path: Path) -> None:
    from lengthwise.longdoc.storage.store import read_embeddings

    corpus = tmp_path / "corpus.jsonl"
    lines = HAYSTACK.read_text().splitlines()
    corpus.write_text("".join(json.dumps({"_id": f"d{i}", "text": " ".join(lines[i:])}) + "\n" for i in range(7)))
    out = tmp_path / "emb"
    args = ["encode", "--data", corpus, "--out", out, "--model", tiny_model_dir, "--long", "chunk-mean"]
    _ok([*args, "--window", "32", "--shard-docs", "3"])
    ids, full = read_embeddings(out)
    assert ids == [f"d{i}" for i in range(7)]
    last = sorted(out.glob("*.ids.txt"))[-1]  # a run killed before its last shard was complete
    last.unlink()
    assert "embedded 1 new documents" in _ok([*args, "--window", "32", "--shard-docs", "3"])
    again_ids, again = read_embeddings(out)
    assert again_ids == ids
    np.testing.assert_allclose(again, full, atol=1e-6)
    assert "other settings" in _error([*args, "--window", "48"])  # another window into the same folder


def test_encode_multi_vector_keeps_windows(tiny_model_dir: Path, tmp_path: Path) -> None:
    from lengthwise.core.encoder import MultiVectors
    from lengthwise.longdoc.storage.store import read_embeddings

    corpus = tmp_path / "docs.txt"
    corpus.write_text(HAYSTACK.read_text())
    out = tmp_path / "mv"
    _ok(
        [
            "encode",
            "--data",
            corpus,
            "--out",
            out,
            "--model",
            tiny_model_dir,
            "--long",
            "multi-vector",
            "--window",
            "16",
        ]
    )
    ids, windows = read_embeddings(out)
    assert isinstance(windows, MultiVectors) and len(windows) == len(ids) == 20


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--long", "chunky"], "--long 'chunky': not a strategy"),
        (["--window", "32", "--stride", "40"], "--stride 40: not below the window (32)"),
        (["--window", "4096"], "--window 4096: above the model's limit"),
    ],
)
def test_bad_flags_are_one_line_errors(tiny_model_dir: Path, tmp_path: Path, extra: list[str], message: str) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text("one document\n")
    assert message in _error(["encode", "--data", corpus, "--out", tmp_path / "o", "--model", tiny_model_dir, *extra])


def test_a_corpus_line_without_text_names_the_file_and_line(tiny_model_dir: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"_id": "a", "text": "fine"}\n{"_id": "b", "title": "no text"}\n')
    message = _error(["encode", "--data", corpus, "--out", tmp_path / "o", "--model", tiny_model_dir])
    assert f"{corpus}:2" in message and "'text'" in message


def _corpus(tmp_path: Path, count: int, ids: list[str] | None = None) -> Path:
    lines = [line for line in HAYSTACK.read_text().splitlines() if line.strip()]
    ids = ids or [f"d{i}" for i in range(count)]
    texts = [" ".join(lines[(i + j) % len(lines)] for j in range(3)) for i in range(count)]
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"_id": ids[i], "text": texts[i]}) + "\n" for i in range(count)))
    return corpus


def test_a_damaged_shard_is_refused_by_the_reader_and_repaired_by_a_rerun(tiny_model_dir: Path, tmp_path: Path) -> None:
    # issue 21 item 2: a shard truncated to 200 bytes was taken as done ("embedded 0 new documents") and
    # read_embeddings then failed with numpy's own error
    from lengthwise.longdoc.config import LongDocError
    from lengthwise.longdoc.storage.store import read_embeddings

    out = tmp_path / "e"
    args = [
        "encode",
        "--data",
        _corpus(tmp_path, 40),
        "--out",
        out,
        "--model",
        tiny_model_dir,
        "--window",
        "32",
        "--long",
        "chunk-mean",
    ]
    _ok([*args, "--shard-docs", "16"])
    ids, full = read_embeddings(out)
    shard = out / "w0-00000.npy"
    shard.write_bytes(shard.read_bytes()[:200])  # a full disk or a partial copy
    with pytest.raises(LongDocError, match=r"w0-00000\.npy: damaged or incomplete shard .*rerun `lengthwise encode`"):
        read_embeddings(out)
    output = _ok([*args, "--shard-docs", "16"])
    assert "repair: w0-00000: w0-00000.npy has 200 bytes" in output and "embedded 16 new documents" in output
    again_ids, again = read_embeddings(out)
    order = [again_ids.index(doc_id) for doc_id in ids]
    assert sorted(again_ids) == sorted(ids) and len(again_ids) == 40  # each document once
    np.testing.assert_allclose(again[order], full, atol=1e-6)


def test_a_changed_shard_of_the_right_size_is_caught_by_its_hash(tiny_model_dir: Path, tmp_path: Path) -> None:
    from lengthwise.longdoc.config import LongDocError
    from lengthwise.longdoc.storage.store import read_embeddings

    out = tmp_path / "e"
    _ok(["encode", "--data", _corpus(tmp_path, 5), "--out", out, "--model", tiny_model_dir, "--window", "32"])
    shard = out / "w0-00000.npy"
    data = bytearray(shard.read_bytes())
    data[-1] ^= 0xFF
    shard.write_bytes(bytes(data))
    with pytest.raises(LongDocError, match="does not match its sha256"):
        read_embeddings(out)


def test_duplicate_ids_are_refused_before_any_compute(tiny_model_dir: Path, tmp_path: Path) -> None:
    # two documents with _id "a" gave two vectors both called "a"
    corpus = _corpus(tmp_path, 4, ids=["a", "b", "a", "c"])
    out = tmp_path / "e"
    message = _error(["encode", "--data", corpus, "--out", out, "--model", tiny_model_dir])
    assert f"{corpus}:3: duplicate _id 'a' (first at line 1)" in message
    assert not (out / "manifest.json").exists()


@pytest.mark.slow
def test_two_local_processes_give_the_vectors_of_one(tiny_model_dir: Path, tmp_path: Path) -> None:
    from lengthwise.longdoc.storage.store import read_embeddings

    corpus = _corpus(tmp_path, 9)
    base = [
        "encode",
        "--data",
        corpus,
        "--model",
        tiny_model_dir,
        "--window",
        "32",
        "--shard-docs",
        "2",
        "--long",
        "chunk-mean",
    ]
    _ok([*base, "--out", tmp_path / "one"])
    _ok([*base, "--out", tmp_path / "two", "--devices", "cpu,cpu", "--threads", "1"])
    ids1, one = read_embeddings(tmp_path / "one")
    ids2, two = read_embeddings(tmp_path / "two")
    assert sorted(ids2) == ids1 and len(ids2) == 9
    np.testing.assert_allclose(two[[ids2.index(i) for i in ids1]], one, atol=1e-6)
