"""`lengthwise encode --format parquet` on the local engine: one Parquet row per window beside the shards, the same
files from the CLI and from Python, readable by pyarrow and polars, the format kept by the folder, refusals."""

from __future__ import annotations

import builtins
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from lengthwise.cli import app
from lengthwise.core.errors import SettingError

HAYSTACK = Path(__file__).parent / "haystack.txt"


def _corpus(folder: Path, count: int = 7) -> Path:
    lines = [line for line in HAYSTACK.read_text().splitlines() if line.strip()]
    corpus = folder / "c.jsonl"
    with corpus.open("w") as handle:
        for i in range(count):  # 1 to 4 haystack lines: one window or several
            text = " ".join(lines[(i + j) % len(lines)] for j in range(1 + i % 4))
            handle.write(json.dumps({"_id": f"d{i}", "text": text}) + "\n")
    return corpus


def assert_window_rows(folder: Path) -> None:
    """The Parquet rows under `folder` are exactly the windows of its shards: ids, window numbers, spans, vectors."""
    import pyarrow.parquet as pq

    from lengthwise.core.encoder import MultiVectors
    from lengthwise.longdoc.storage.store import read_embeddings

    ids, windows = read_embeddings(folder)
    assert isinstance(windows, MultiVectors)
    table = pq.read_table(folder / "parquet")
    assert table.column_names == ["doc_id", "window", "start", "end", "vector"]
    rows = table.to_pydict()
    order = np.lexsort((rows["window"], [ids.index(i) for i in rows["doc_id"]]))
    assert len(order) == windows.offsets[-1]  # one row per window
    doc_ids, numbers = np.asarray(rows["doc_id"])[order], np.asarray(rows["window"])[order]
    starts, ends = np.asarray(rows["start"])[order], np.asarray(rows["end"])[order]
    for k, doc_id in enumerate(ids):
        first, last = windows.offsets[k], windows.offsets[k + 1]
        assert list(doc_ids[first:last]) == [doc_id] * (last - first)
        assert list(numbers[first:last]) == list(range(last - first))
        assert starts[first] == 0 and np.all(np.diff(starts[first:last]) > 0)
        assert np.all(np.diff(ends[first:last]) > 0) and np.all(ends[first:last] > starts[first:last])
    np.testing.assert_array_equal(np.asarray(rows["vector"], dtype=np.float32)[order], windows.vectors)


def _python(corpus: Path, out: Path, model: Path, **kwargs: Any) -> int:
    from lengthwise import encode

    return encode(corpus, out, model, long="multi-vector", shard_docs=3, batch_size=8, **kwargs)


def _cli(*args: Any) -> Any:
    return CliRunner().invoke(app, ["encode", *[str(a) for a in args]])


def test_local_parquet_rows_are_the_windows_and_the_cli_writes_the_same_files(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    pytest.importorskip("pyarrow", reason="--format parquet needs pyarrow (pip install 'lengthwise[parquet]')")
    corpus = _corpus(tmp_path)
    assert _python(corpus, tmp_path / "py", tiny_model_dir, format="parquet") == 7
    run = _cli("-d", corpus, "-o", tmp_path / "cli", "-m", tiny_model_dir, "--long", "multi-vector",
               "--shard-docs", "3", "--batch-size", "8", "--format", "parquet")  # fmt: skip
    assert run.exit_code == 0, run.output
    assert_window_rows(tmp_path / "py")
    parts = sorted(p.name for p in (tmp_path / "py" / "parquet").glob("*.parquet"))
    assert parts == ["part-w0-00000.parquet", "part-w0-00001.parquet", "part-w0-00002.parquet"]
    for path in sorted((tmp_path / "py").rglob("*")):
        if path.is_file() and path.name != "manifest.json":  # the manifest names its own folder's data path only
            twin = tmp_path / "cli" / path.relative_to(tmp_path / "py")
            assert twin.read_bytes() == path.read_bytes(), path.name
    record = json.loads((tmp_path / "py" / "w0-00000.shard.json").read_text())
    assert "parquet/part-w0-00000.parquet" in record["files"]  # checked and repaired with its shard


def test_npy_stays_the_local_default_and_a_folder_keeps_its_format(tiny_model_dir: Path, tmp_path: Path) -> None:
    corpus = _corpus(tmp_path)
    assert _python(corpus, tmp_path / "npy", tiny_model_dir) == 7
    assert not (tmp_path / "npy" / "parquet").exists()
    manifest = json.loads((tmp_path / "npy" / "manifest.json").read_text())
    assert "format" not in manifest["settings"]  # folders made before --format still resume
    pytest.importorskip("pyarrow", reason="--format parquet needs pyarrow (pip install 'lengthwise[parquet]')")
    with pytest.raises(ValueError, match="other settings"):  # half its shards would have no rows
        _python(corpus, tmp_path / "npy", tiny_model_dir, format="parquet")


def test_polars_reads_the_rows_into_an_index(tiny_model_dir: Path, tmp_path: Path) -> None:
    """The docs' example: the Parquet rows into a matrix and an exact search, with polars."""
    pl = pytest.importorskip("polars", reason="the polars example needs polars")
    pytest.importorskip("pyarrow", reason="--format parquet needs pyarrow (pip install 'lengthwise[parquet]')")
    from lengthwise.longdoc.storage.store import read_embeddings

    _python(_corpus(tmp_path), tmp_path / "out", tiny_model_dir, format="parquet")
    rows = pl.read_parquet(tmp_path / "out" / "parquet" / "*.parquet").sort(["doc_id", "window"])
    vectors = np.stack(rows["vector"].to_numpy()).astype(np.float32)
    ids, windows = read_embeddings(tmp_path / "out")
    assert vectors.shape == windows.vectors.shape
    best = rows.with_columns(pl.Series("score", vectors @ windows.vectors[0])).group_by("doc_id").agg(pl.max("score"))
    assert best.sort("score", descending=True)["doc_id"][0] == ids[0]  # its own first window ranks it first


def test_bad_format_and_missing_pyarrow_are_refused_before_any_compute(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus = _corpus(tmp_path)
    with pytest.raises(SettingError, match="format='csv': use npy"):
        _python(corpus, tmp_path / "a", tiny_model_dir, format="csv")
    real = builtins.__import__

    def no_pyarrow(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "pyarrow" or name.startswith("pyarrow."):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pyarrow)
    run = _cli("-d", corpus, "-o", tmp_path / "b", "-m", tiny_model_dir, "--format", "parquet")
    assert run.exit_code != 0 and "pip install 'lengthwise[parquet]'" in run.output
    assert len(run.output.strip().splitlines()) == 1 and not list((tmp_path / "b").glob("*"))  # nothing written
