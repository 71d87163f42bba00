"""`lengthwise encode --runner ray`: the same vectors as one local process, the same shards, Parquet window rows,
resume after a lost shard record, a worker killed mid-shard, and the install hint without Ray. A 2-CPU local Ray
cluster, the tiny model."""

from __future__ import annotations

import builtins
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from lengthwise.cli import app

from .test_parquet_format import assert_window_rows

HAYSTACK = Path(__file__).parent / "haystack.txt"
COUNT = 11  # documents: 3 shards of 4 (the last one short)


def _ray() -> Any:
    try:
        import ray
        import ray.data
    except ImportError:
        pytest.skip("needs Ray Data (pip install 'lengthwise[ray]'); the Ray runner cannot run without it")
    return ray


@pytest.fixture(scope="module")
def cluster() -> Any:
    ray = _ray()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def _corpus(folder: Path) -> Path:
    lines = [line for line in HAYSTACK.read_text().splitlines() if line.strip()]
    folder.mkdir(parents=True, exist_ok=True)
    corpus = folder / "c.jsonl"
    with corpus.open("w") as handle:
        for i in range(COUNT):  # 1 to 5 haystack lines: one window or several
            text = " ".join(lines[(i + j) % len(lines)] for j in range(1 + i % 5))
            handle.write(json.dumps({"_id": f"d{i}", "title": "T" if i % 3 else "", "text": text}) + "\n")
    return corpus


def _encode(corpus: Path, out: Path, model: Path, runner: str, long: str = "multi-vector", workers: int = 1) -> int:
    from lengthwise import encode
    from lengthwise.longdoc import LongDocConfig

    config = LongDocConfig.named(long).updated(window=32, stride=24 if long == "multi-vector" else None)
    extra = {"workers": workers} if runner == "ray" else {}  # each actor loads torch and the model: a few seconds
    return encode(corpus, out, model, long=config, shard_docs=4, batch_size=8, threads=1, runner=runner, **extra)


@pytest.fixture(scope="module")
def multi(cluster: Any, tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("ray-multi")
    corpus = _corpus(folder)
    assert _encode(corpus, folder / "local", tiny_model_dir, "local") == COUNT
    assert _encode(corpus, folder / "ray", tiny_model_dir, "ray", workers=2) == COUNT  # two actors, three shards
    return {"corpus": corpus, "local": folder / "local", "ray": folder / "ray"}


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def test_ray_actors_give_the_windows_of_one_local_process(multi: dict[str, Path]) -> None:
    from lengthwise.longdoc.storage.store import read_embeddings

    ids_local, local = read_embeddings(multi["local"])
    ids_ray, ray = read_embeddings(multi["ray"])
    assert ids_ray == ids_local == [f"d{i}" for i in range(COUNT)]  # same ids, corpus order
    np.testing.assert_array_equal(ray.offsets, local.offsets)  # same windows per document
    assert ray.offsets[-1] > COUNT  # several windows somewhere
    assert _cosines(ray.vectors, local.vectors).min() >= 0.9999
    shards = sorted(p.name for p in multi["ray"].glob("*.shard.json"))
    assert shards == ["w0-00000.shard.json", "w0-00001.shard.json", "w0-00002.shard.json"]


def test_ray_actors_code_the_tokens_of_one_local_process(cluster: Any, tiny_model_dir: Path, tmp_path: Path) -> None:
    """`encode-tokens --runner ray`: the codec fitted on the driver (the first shard's documents, as one process
    fits it), each actor coding whole shards with it: every document's codes and spans are the local run's; a
    second call has nothing to do."""
    from lengthwise.longdoc.storage.tokens import encode_tokens
    from lengthwise.search.tokens import TokenSide

    corpus = _corpus(tmp_path)
    common = {"codec": "pca16-int8", "window": 32, "overlap": 8, "shard_docs": 4, "threads": 1}
    assert encode_tokens(corpus, tmp_path / "local", tiny_model_dir, **common) == COUNT
    assert encode_tokens(corpus, tmp_path / "ray", tiny_model_dir, runner="ray", workers=2, **common) == COUNT
    assert (tmp_path / "ray" / "codec.npz").read_bytes() == (tmp_path / "local" / "codec.npz").read_bytes()
    local, ray = TokenSide.open(tmp_path / "local"), TokenSide.open(tmp_path / "ray")
    assert ray.doc_ids == local.doc_ids
    np.testing.assert_array_equal(ray.offsets, local.offsets)
    np.testing.assert_array_equal(ray.codes, local.codes)
    for doc in range(COUNT):
        np.testing.assert_array_equal(ray.spans(doc), local.spans(doc))
    assert encode_tokens(corpus, tmp_path / "ray", tiny_model_dir, runner="ray", workers=2, **common) == 0


def test_parquet_rows_are_the_windows_of_the_shards(multi: dict[str, Path]) -> None:
    assert_window_rows(multi["ray"])  # Parquet is the Ray runner's default format


def test_ray_writes_no_parquet_when_asked_for_npy(cluster: Any, tiny_model_dir: Path, tmp_path: Path) -> None:
    from lengthwise import encode

    corpus, out = _corpus(tmp_path), tmp_path / "ray-npy"
    assert encode(corpus, out, tiny_model_dir, long="chunk-mean", shard_docs=6, runner="ray", format="npy") == COUNT
    assert len(list(out.glob("*.shard.json"))) == 2 and not (out / "parquet").exists()


def _as_before_the_rename(folder: Path) -> None:
    """`folder`'s manifest as a lengthwise before 0.2 wrote it: the runner recorded as ``engine``."""
    path = folder / "manifest.json"
    manifest = json.loads(path.read_text())
    settings = manifest["settings"]
    assert settings.pop("runner") == "ray"
    path.write_text(json.dumps({**manifest, "settings": {**settings, "engine": "ray"}}))


def test_a_folder_that_records_the_runner_as_engine_resumes(tmp_path: Path) -> None:
    """Before 0.2 the manifest recorded ``"engine": "ray"``: such a folder resumes (and is indexed) as if it said
    ``"runner"``, and its manifest says ``runner`` once the run ends. Needs no Ray: the store alone."""
    from lengthwise.facade import LongIndex
    from lengthwise.longdoc.storage.store import EmbeddingStore

    settings = {"model": "random", "long": {"strategy": "chunk-mean"}, "runner": "ray"}
    EmbeddingStore(tmp_path / "enc", settings).write("w0-", ["a", "b"], np.eye(2, 8, dtype=np.float32))
    _as_before_the_rename(tmp_path / "enc")
    store = EmbeddingStore(tmp_path / "enc", settings)  # refused before: "made with other settings (engine, runner)"
    assert store.done_ids() == {"a", "b"}
    store.write("w0-", ["c"], np.eye(1, 8, 2, dtype=np.float32))
    store.finish()
    assert json.loads((tmp_path / "enc" / "manifest.json").read_text())["settings"]["runner"] == "ray"
    _as_before_the_rename(tmp_path / "enc")
    index = LongIndex.build_windows(tmp_path / "enc", tmp_path / "idx", quantize="none")
    assert index.settings["encode_settings"]["runner"] == "ray" and "engine" not in index.settings["encode_settings"]
    assert index.doc_ids == ["a", "b", "c"]


def test_a_rerun_embeds_only_the_shard_whose_record_is_gone(cluster: Any, tiny_model_dir: Path, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    from lengthwise.longdoc.storage.store import read_embeddings

    corpus, out = _corpus(tmp_path), tmp_path / "ray"
    assert _encode(corpus, out, tiny_model_dir, "ray", long="chunk-mean") == COUNT
    ids, before = read_embeddings(out)
    (out / "w0-00001.shard.json").unlink()  # a worker killed before its record: the shard never counted
    _as_before_the_rename(out)  # and the folder written by a lengthwise before 0.2: it resumes all the same
    assert _encode(corpus, out, tiny_model_dir, "ray", long="chunk-mean") == 4  # only that shard's documents
    assert json.loads((out / "manifest.json").read_text())["settings"]["runner"] == "ray"
    ids_after, after = read_embeddings(out)
    assert sorted(ids_after) == sorted(ids) and len(ids_after) == COUNT
    np.testing.assert_allclose(after[[ids_after.index(i) for i in ids]], before, atol=1e-6)
    assert not (out / "parquet" / "part-w0-00001.parquet").exists()  # removed with its shard
    rows = pq.read_table(out / "parquet").to_pydict()  # single vector: one row per document, window 0
    assert sorted(rows["doc_id"]) == sorted(ids) and set(rows["window"]) == {0}
    assert all(start == 0 < end for start, end in zip(rows["start"], rows["end"], strict=True))
    assert _encode(corpus, out, tiny_model_dir, "ray", long="chunk-mean") == 0


def test_a_worker_killed_mid_shard_loses_and_duplicates_nothing(
    multi: dict[str, Path], tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A live kill: the first actor to finish a shard dies (``os._exit``) after writing its vectors, ids and Parquet
    part but before the shard's record. Ray restarts the actor and retries the shard; the run's documents are each
    written once, in corpus order, with the vectors of one local process."""
    import lengthwise.facade
    from lengthwise.longdoc.storage.store import read_embeddings

    marker = tmp_path / "killed"

    def dying_loader(name: str, **options: Any) -> Any:  # runs in each actor (cloudpickled by value)
        import os

        import lengthwise.longdoc.storage.store as store
        from lengthwise.core.models import load_plain_model

        write_record = store.write_json_atomic

        def die_once(path: Path, payload: Any) -> Path:
            try:
                os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))  # only the first record, ever
            except FileExistsError:
                return write_record(path, payload)
            os._exit(1)  # the worker process dies here: shard files written, no record

        store.write_json_atomic = die_once
        return load_plain_model(name, **options)

    monkeypatch.setattr(lengthwise.facade, "load_model", dying_loader)  # what `encode` hands the actors
    out = tmp_path / "ray"
    assert _encode(multi["corpus"], out, tiny_model_dir, "ray", workers=2) == COUNT
    assert marker.exists()  # a worker did die
    ids, killed = read_embeddings(out)
    ids_local, local = read_embeddings(multi["local"])
    assert ids == ids_local  # each document once, in corpus order
    np.testing.assert_array_equal(killed.offsets, local.offsets)
    assert _cosines(killed.vectors, local.vectors).min() >= 0.9999
    assert len(list(out.glob("*.shard.json"))) == 3 and len(list((out / "parquet").glob("*.parquet"))) == 3


def test_bad_input_gives_the_local_one_line_error(cluster: Any, tiny_model_dir: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"_id": "a", "text": "some text"}\n{"_id": "a", "text": "more text"}\n')
    runner = CliRunner()
    args = ["encode", "--data", corpus, "--model", tiny_model_dir]
    local = runner.invoke(app, [str(a) for a in [*args, "--out", tmp_path / "l"]])
    ray = runner.invoke(app, [str(a) for a in [*args, "--out", tmp_path / "r", "--runner", "ray"]])
    assert local.exit_code == ray.exit_code == 2
    assert ray.output == local.output and "duplicate _id 'a'" in ray.output


def test_without_ray_the_runner_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, tiny_model_dir: Path, tmp_path: Path
) -> None:
    from lengthwise import encode
    from lengthwise.core.errors import SettingError

    real_import = builtins.__import__

    def no_ray(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "ray" or name.startswith("ray."):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"_id": "a", "text": "some text"}\n')
    with pytest.raises(SettingError) as caught:
        encode(corpus, tmp_path / "out", tiny_model_dir, runner="ray")
    assert caught.value.field == "runner" and "pip install 'lengthwise[ray]'" in str(caught.value)
    assert not (tmp_path / "out").exists()  # refused before anything is written
    args = ["encode", "--data", corpus, "--model", tiny_model_dir, "--out", tmp_path / "o", "--runner", "ray"]
    result = CliRunner().invoke(app, [str(a) for a in args])
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert "--runner 'ray'" in lines[0] and "pip install 'lengthwise[ray]'" in lines[0]


def test_a_text_file_reads_as_with_the_local_runner(cluster: Any, tiny_model_dir: Path, tmp_path: Path) -> None:
    from lengthwise.longdoc.storage.store import read_embeddings

    lines = [line for line in HAYSTACK.read_text().splitlines() if line.strip()][:5]
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(lines) + "\n")  # one document per line, id = line number
    assert _encode(corpus, tmp_path / "local", tiny_model_dir, "local", long="chunk-mean") == 5
    assert _encode(corpus, tmp_path / "ray", tiny_model_dir, "ray", long="chunk-mean") == 5
    (ids_local, local), (ids_ray, ray) = read_embeddings(tmp_path / "local"), read_embeddings(tmp_path / "ray")
    assert ids_ray == ids_local == ["1", "2", "3", "4", "5"]
    assert _cosines(ray, local).min() >= 0.9999


class _Resources:
    """A stand-in for the `ray` module's `cluster_resources()`: the pool is sized from it alone."""

    def __init__(self, **resources: float) -> None:
        self.resources = resources

    def cluster_resources(self) -> dict[str, float]:
        return self.resources


@pytest.mark.parametrize(
    ("resources", "workers", "shards", "want"),
    [
        # a GPU cluster (4 nodes of 1 GPU and 4 CPUs): one actor per GPU, under one CPU each, no torch threads set
        ({"CPU": 16, "GPU": 4}, None, 10, {"size": 4, "num_gpus": 1, "num_cpus": 1, "device": "cuda", "threads": None}),
        ({"CPU": 16, "GPU": 4}, 2, 10, {"size": 2, "num_gpus": 1, "num_cpus": 1, "device": "cuda", "threads": None}),
        (
            {"CPU": 2, "GPU": 4},
            None,
            3,
            {"size": 3, "num_gpus": 1, "num_cpus": 1 / 3, "device": "cuda", "threads": None},
        ),
        # CPU only: one actor per 4 CPUs, the CPUs split into torch threads, one CPU left for Ray Data's tasks
        ({"CPU": 16}, None, 10, {"size": 4, "num_gpus": 0, "num_cpus": 3.75, "device": "cpu", "threads": 4}),
        ({"CPU": 2}, None, 10, {"size": 1, "num_gpus": 0, "num_cpus": 1, "device": "cpu", "threads": 2}),
        ({"CPU": 2}, 2, 10, {"size": 2, "num_gpus": 0, "num_cpus": 0.5, "device": "cpu", "threads": 1}),
    ],
)
def test_the_actor_pool_follows_the_cluster(
    resources: dict[str, float], workers: int | None, shards: int, want: dict[str, Any]
) -> None:
    from lengthwise.longdoc.storage._raydata import _pool

    assert _pool(_Resources(**resources), workers, None, shards) == pytest.approx(want)


def test_a_pool_of_no_workers_is_refused() -> None:
    from lengthwise.core.errors import SettingError
    from lengthwise.longdoc.storage._raydata import _pool

    with pytest.raises(SettingError, match="workers"):
        _pool(_Resources(CPU=2), 0, None, 3)
