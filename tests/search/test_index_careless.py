"""Issue 33, the index surface used as a careless user would: ids that hold line breaks, a rebuild over an index
(or a folder that holds other things), a resumed build whose shards changed, tampered index files, and the flags
of `lengthwise index build` / `lengthwise search`. Index folders are built from plain numpy shards (no model)
where the command needs none."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from lengthwise.core.encoder import MultiVectors
from lengthwise.facade import LongIndex
from lengthwise.longdoc.config import LongDocError
from lengthwise.longdoc.storage.store import EmbeddingStore, iter_shards, read_embeddings
from lengthwise.search.local.files import served_files

ODD_IDS = ["a\nb", "c\u2028d", "e\x85f", "g\rh", '"quoted"', "plain", "tab\there", "ünï"]


def _shards(folder: Path, ids: list[str], seed: int = 0, dim: int = 16, per_doc: int = 3) -> np.ndarray:
    """A shard folder of `ids`, `per_doc` random windows each; returns the vectors."""
    vectors = np.random.default_rng(seed).normal(size=(len(ids) * per_doc, dim)).astype(np.float32)
    store = EmbeddingStore(folder, {"model": "random", "long": {"strategy": "multi-vector"}})
    store.write("w0-", ids, MultiVectors(vectors, np.arange(len(ids) + 1) * per_doc))
    return vectors


def test_ids_with_line_breaks_round_trip_through_shards_and_the_index(tmp_path: Path) -> None:
    """Issue 33.1: ids were written raw, one per line, and read back with splitlines(): 10 documents read back as 13
    ids, and a search returned the wrong id with score 1.0. Ids are JSON strings now."""
    vectors = _shards(tmp_path / "enc", ODD_IDS)
    assert [ids for ids, _, _ in iter_shards(tmp_path / "enc")] == [ODD_IDS]
    assert read_embeddings(tmp_path / "enc")[0] == ODD_IDS
    index = LongIndex.build_windows(tmp_path / "enc", tmp_path / "idx", quantize="none")
    assert index.doc_ids == ODD_IDS and LongIndex.open(tmp_path / "idx").doc_ids == ODD_IDS
    found = index.search_vectors(vectors[::3], k=1)
    assert [row[0][0] for row in found] == ODD_IDS
    assert [row[0][1] for row in found] == pytest.approx([1.0] * len(ODD_IDS), abs=1e-5)


def test_a_shard_whose_ids_disagree_with_its_record_is_refused(tmp_path: Path) -> None:
    """A shard written before ids were JSON (raw lines, no ``id_format``) still reads; one whose raw ids hold a line
    break reads as more ids than its record counts, and is refused (a resumed encode embeds it again)."""
    from lengthwise.longdoc.storage.store import RECORD, _digest

    _shards(tmp_path / "enc", ["x", "y", "z"])
    stem = tmp_path / "enc" / "w0-00000"

    def old_format(ids: list[str]) -> None:
        data = "".join(f"{i}\n" for i in ids).encode("utf-8")
        Path(f"{stem}.ids.txt").write_bytes(data)
        record = json.loads(Path(f"{stem}{RECORD}").read_text())
        record.pop("id_format", None)
        record["files"]["w0-00000.ids.txt"] = _digest(data)
        Path(f"{stem}{RECORD}").write_text(json.dumps(record))

    old_format(["x", "y", "z"])
    assert [ids for ids, _, _ in iter_shards(tmp_path / "enc")] == [["x", "y", "z"]]
    old_format(["x", "y\nw", "z"])
    with pytest.raises(LongDocError, match=r"w0-00000\.npy: .*w0-00000\.ids\.txt holds 4 ids, its record says 3"):
        list(iter_shards(tmp_path / "enc"))
    with pytest.raises(LongDocError, match="holds 4 ids, its record says 3"):
        LongIndex.build_windows(tmp_path / "enc", tmp_path / "idx")
    assert not (tmp_path / "idx").exists()


def test_an_index_of_an_earlier_layout_is_refused_and_rebuilt_in_place(tmp_path: Path) -> None:
    """Format 3 (each build a generation folder, index.json naming it) replaced the files beside index.json of
    formats 1 and 2 (never released): such an index is refused in one line naming the rebuild, and a build over
    it replaces its files by a generation."""
    import shutil

    vectors = _shards(tmp_path / "enc", ["x", "y", "z"])
    LongIndex.build_windows(tmp_path / "enc", tmp_path / "idx", quantize="none", engine="faiss")
    folder = tmp_path / "idx"
    files = served_files(folder)
    settings = json.loads((folder / "index.json").read_text())
    for path in files.iterdir():
        shutil.move(path, folder / path.name)  # the layout of format 2: the files beside index.json
    files.rmdir()
    (folder / "readers.lock").unlink()
    del settings["generation"]
    (folder / "index.json").write_text(json.dumps({**settings, "format": 2}))
    earlier = r"an index of an earlier layout \(format 2; this lengthwise reads format 3\); build it again with `"
    with pytest.raises(LongDocError, match=earlier):
        LongIndex.open(folder)
    again = LongIndex.build_windows(tmp_path / "enc", folder, quantize="none", engine="faiss")
    assert [row[0][0] for row in again.search_vectors(vectors[[0, 4, 8]], k=1)] == ["x", "y", "z"]
    assert sorted(p.name for p in folder.iterdir()) == [again.files.name, "index.json"]


def test_a_resumed_build_whose_shards_changed_starts_afresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 33.2: the build plan recorded the path, the ids, the counts and the dimension, not the shards'
    contents: a build interrupted, the same path encoded again with new texts and the same ids, built again, kept
    the stale vectors (max difference 0.27 from a fresh build). The shard records' hashes are in the plan now."""
    import shutil

    from lengthwise.search.local import files as index_files

    monkeypatch.setattr(index_files, "CHUNK", 20)
    monkeypatch.setattr(index_files, "CHECKPOINT_SECONDS", 0.0)
    ids = [f"d{i}" for i in range(30)]
    _shards(tmp_path / "enc", ids, seed=0)

    def stop(done: int, _: int) -> None:
        if done >= 40:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        LongIndex.build_windows(tmp_path / "enc", tmp_path / "idx", quantize="none", engine="faiss", on_progress=stop)
    assert (tmp_path / ".idx-building" / "build.json").is_file()
    shutil.rmtree(tmp_path / "enc")
    fresh = _shards(tmp_path / "enc", ids, seed=1)  # the same ids, counts and dimension; other vectors
    built = LongIndex.build_windows(tmp_path / "enc", tmp_path / "idx", quantize="none", engine="faiss")
    np.testing.assert_allclose(np.asarray(built.vectors), fresh / np.linalg.norm(fresh, axis=1, keepdims=True),
                               rtol=1e-6, atol=1e-7)  # fmt: skip


def _rewrite(stem: Path, suffix: str, array: np.ndarray) -> None:
    """Replace one file of a shard, and its digest in the shard's record (a change the hashes cannot catch)."""
    import io

    from lengthwise.longdoc.storage.store import RECORD, _digest

    buffer = io.BytesIO()
    np.save(buffer, array)
    Path(f"{stem}{suffix}").write_bytes(buffer.getvalue())
    record = json.loads(Path(f"{stem}{RECORD}").read_text())
    record["files"][f"{stem.name}{suffix}"] = _digest(buffer.getvalue())
    Path(f"{stem}{RECORD}").write_text(json.dumps(record))


def _good_index(tmp_path: Path) -> LongIndex:
    _shards(tmp_path / "enc", ["x", "y", "z"])
    return LongIndex.build_windows(tmp_path / "enc", tmp_path / "idx", quantize="none", engine="faiss")


def test_a_rebuild_that_fails_keeps_the_working_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 33.6: the new index was renamed into place before it was checked: a rebuild whose result did not open
    ("files disagree") destroyed the working index. It is opened in its staging folder first now."""
    from lengthwise.search.local import build as build_module
    from lengthwise.search.local import engines as _engines

    good = _good_index(tmp_path)
    expected = good.search_vectors(np.array(good.vectors[:3]), k=1)
    _shards(tmp_path / "enc2", ["x", "y", "z", "w"], seed=3)
    fill = build_module.fill_engine

    def broken(path: Path, *args: object) -> None:  # an engine that ends short of its vectors
        fill(path, *args)  # type: ignore[arg-type]
        engine = _engines._Faiss.load(path, _engines.Quantize.NONE)
        engine.index.remove_ids(np.arange(1, dtype=np.int64))
        engine.save(path)

    monkeypatch.setattr(build_module, "fill_engine", broken)
    with pytest.raises(LongDocError, match="the index files disagree"):
        LongIndex.build_windows(tmp_path / "enc2", tmp_path / "idx", quantize="none", engine="faiss")
    again = LongIndex.open(tmp_path / "idx")
    assert again.doc_ids == ["x", "y", "z"] and again.search_vectors(np.array(good.vectors[:3]), k=1) == expected
    assert sorted(p.name for p in tmp_path.iterdir()) == ["enc", "enc2", "idx"]  # no staging or set-aside folder


def test_an_out_that_holds_other_things_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 33.5: a rebuild into an earlier index deleted everything in it, the user's files and even the input
    folder nested inside (`index build idx/emb -o idx`), and `cd idx && index build ../enc -o .` emptied it."""
    from lengthwise.core.errors import SettingError

    _good_index(tmp_path)
    (tmp_path / "idx" / "notes.txt").write_text("mine")
    with pytest.raises(SettingError, match=r"holds notes\.txt, which is not the index's"):
        LongIndex.build_windows(tmp_path / "enc", tmp_path / "idx")
    (tmp_path / "idx" / "notes.txt").unlink()
    (tmp_path / "enc").rename(tmp_path / "idx" / "emb")
    with pytest.raises(SettingError, match=r"holds .*emb, the folder to index"):
        LongIndex.build_windows(tmp_path / "idx" / "emb", tmp_path / "idx")
    (tmp_path / "idx" / "emb").rename(tmp_path / "enc")
    monkeypatch.chdir(tmp_path / "idx")
    with pytest.raises(SettingError, match="holds the working directory"):
        LongIndex.build_windows(tmp_path / "enc", ".")
    monkeypatch.chdir(tmp_path)
    files = served_files(tmp_path / "idx")
    assert sorted(p.name for p in (tmp_path / "idx").iterdir()) == [files.name, "index.json"]
    assert sorted(p.name for p in files.iterdir()) == sorted(["engine.faiss", "ids.txt", "member_starts.npy",
                                                              "members.npy", "offsets.npy", "readers.lock",
                                                              "vectors.npy"])  # fmt: skip
    LongIndex.build_windows(tmp_path / "enc", tmp_path / "idx", quantize="ubinary")  # an index alone is replaced


def test_bad_outs_and_inputs_are_one_line_refusals(tmp_path: Path) -> None:
    """Issue 33.13: `-o file/sub` (FileExistsError), `-o` a symbolic link to an index (OSError), `-o /proc/x`
    ("needs about 0.0 GB … 0.0 GB is free"), a malformed manifest.json (no file name), shards of two dimensions
    ("could not broadcast") and tampered window offsets (IndexError)."""
    from lengthwise.core.errors import SettingError

    _good_index(tmp_path)
    (tmp_path / "file").write_text("x")
    with pytest.raises(SettingError, match=r"file is a file; pass a folder path"):
        LongIndex.build_windows(tmp_path / "enc", tmp_path / "file" / "sub")
    (tmp_path / "link").symlink_to(tmp_path / "idx")
    with pytest.raises(SettingError, match="is a symbolic link"):
        LongIndex.build_windows(tmp_path / "enc", tmp_path / "link")
    with pytest.raises(SettingError, match="cannot write in /proc"):
        LongIndex.build_windows(tmp_path / "enc", "/proc/lengthwise-index")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "manifest.json").write_text('{"format": 2 "settings": {}}')
    with pytest.raises(LongDocError, match=r"bad/manifest\.json: unreadable \(Expecting ',' delimiter"):
        LongIndex.build_windows(tmp_path / "bad", tmp_path / "idx2")
    store = EmbeddingStore(tmp_path / "two", {"model": "random"})
    store.write("w0-", ["a"], np.ones((1, 8), dtype=np.float32))
    store.write("w0-", ["b"], np.ones((1, 16), dtype=np.float32))
    with pytest.raises(LongDocError, match=r"w0-00001\.npy: 16 dimensions, the folder's first shard has 8"):
        LongIndex.build_windows(tmp_path / "two", tmp_path / "idx2")
    _shards(tmp_path / "offsets", ["a", "b"], per_doc=2)  # then its offsets tampered with, and its record too
    _rewrite(tmp_path / "offsets" / "w0-00000", ".offsets.npy", np.array([0, 3, 9]))
    with pytest.raises(LongDocError, match="window offsets that do not run from 0 to its 4 windows"):
        LongIndex.build_windows(tmp_path / "offsets", tmp_path / "idx2")
    np.save(served_files(tmp_path / "idx") / "offsets.npy", np.array([0, 7, 2, 9]))  # the index's own, tampered
    with pytest.raises(LongDocError, match="the index files disagree"):
        LongIndex.open(tmp_path / "idx")
    assert not (tmp_path / "idx2").exists() and not list(tmp_path.glob(".*"))


def test_the_disk_message_gives_a_readable_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil
    from collections import namedtuple

    from lengthwise.core.errors import SettingError
    from lengthwise.search.local import build as build_module

    _shards(tmp_path / "enc", ["x", "y", "z"])
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(build_module.shutil, "disk_usage", lambda _: usage(10**9, 10**9 - 10, 10))
    with pytest.raises(SettingError, match=r"needs about \d\.\d kB of disk for 9 windows and 10 bytes is free"):
        LongIndex.build_windows(tmp_path / "enc", tmp_path / "idx")
    assert shutil.disk_usage is not None


def test_settings_are_checked_before_the_model_loads(tmp_path: Path) -> None:
    """Issue 33.13: `--quantize` / `--engine` were checked only after the model loaded, and a folder without a
    manifest was reported as "--encoded …", a flag that does not exist."""
    from typer.testing import CliRunner

    from lengthwise.cli import app

    _shards(tmp_path / "enc", ["x"])
    manifest = json.loads((tmp_path / "enc" / "manifest.json").read_text())
    manifest["settings"]["model"] = "/nonexistent/lengthwise-model"  # loading it would fail
    (tmp_path / "enc" / "manifest.json").write_text(json.dumps(manifest))
    runner = CliRunner()
    for flag, value in (("--quantize", "int4"), ("--engine", "annoy")):
        run = runner.invoke(app, ["index", "build", str(tmp_path / "enc"), "-o", str(tmp_path / "idx"), flag, value])
        assert run.exit_code == 2 and run.output.strip().startswith(f"error: {flag} '{value}': use "), run.output
    run = runner.invoke(app, ["index", "build", str(tmp_path), "-o", str(tmp_path / "idx")])
    assert run.exit_code == 2 and "--encoded" not in run.output and "no manifest.json" in run.output, run.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["enc"]


def test_an_index_of_a_relative_model_path_searches_from_anywhere(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 33.12: the index recorded `-m` as given (a relative path), so `search` from another directory failed
    with a hub error. The index records the model folder's absolute path."""
    import shutil

    from typer.testing import CliRunner

    from lengthwise.cli import app

    shutil.copytree(tiny_model_dir, tmp_path / "model")
    (tmp_path / "c.jsonl").write_text("".join(json.dumps({"_id": f"d{i}", "text": f"document {i} about rivers"}) + "\n"
                                              for i in range(4)))  # fmt: skip
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    run = runner.invoke(app, ["encode", "-d", "c.jsonl", "-o", "enc", "-m", "model", "--long", "truncate"])
    assert run.exit_code == 0, run.output
    run = runner.invoke(app, ["index", "build", "enc", "-o", "idx"])
    assert run.exit_code == 0, run.output
    assert json.loads((tmp_path / "idx" / "index.json").read_text())["model"]["name"] == str(tmp_path / "model")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    run = runner.invoke(app, ["search", "../idx", "-q", "document 2 about rivers", "--top-k", "1", "--json"])
    assert run.exit_code == 0, run.output
    assert json.loads(run.output)["hits"][0]["id"] == "d2"


def test_probes_past_what_the_index_has_are_all_of_them(tmp_path: Path) -> None:
    """Issue 33.13: `--probes 10**12` ran out of memory, 2**64 raised TypeError / OverflowError."""
    for engine in ("usearch", "faiss"):
        _shards(tmp_path / f"enc-{engine}", ["x", "y", "z"])
        index = LongIndex.build_windows(tmp_path / f"enc-{engine}", tmp_path / f"idx-{engine}", engine=engine)
        queries = np.array(index.vectors[[0, 3, 6]])
        for probes in (10**12, 2**64):
            found = index.search_vectors(queries, k=1, probes=probes, candidates=2**64)
            assert [row[0][0] for row in found] == ["x", "y", "z"]


def test_search_takes_a_model_in_place_of_the_recorded_one_and_checks_its_weights(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 33.12: `search --model` queries with a model folder given in place of the recorded one (here the
    recorded folder was moved), checked against the recorded weight hash: another model is refused in one line."""
    import shutil

    from typer.testing import CliRunner

    from lengthwise.cli import app

    shutil.copytree(tiny_model_dir, tmp_path / "model")
    (tmp_path / "c.jsonl").write_text("".join(json.dumps({"_id": f"d{i}", "text": f"document {i} about rivers"}) + "\n"
                                              for i in range(4)))  # fmt: skip
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    assert (
        runner.invoke(app, ["encode", "-d", "c.jsonl", "-o", "enc", "-m", "model", "--long", "truncate"]).exit_code == 0
    )
    assert runner.invoke(app, ["index", "build", "enc", "-o", "idx"]).exit_code == 0
    shutil.move(tmp_path / "model", tmp_path / "moved")
    gone = runner.invoke(app, ["search", "idx", "-q", "document 2 about rivers", "--top-k", "1", "--mode", "dense"])
    assert gone.exit_code != 0
    run = runner.invoke(app, ["search", "idx", "-q", "document 2 about rivers", "--top-k", "1", "--mode", "dense",
                              "--json", "--model", str(tmp_path / "moved")])  # fmt: skip
    assert run.exit_code == 0, run.output
    assert json.loads(run.stdout.strip().splitlines()[-1])["hits"][0]["id"] == "d2"
    other = tmp_path / "other"
    shutil.copytree(tmp_path / "moved", other)
    from safetensors.torch import load_file, save_file

    weights = load_file(other / "model.safetensors")
    first = next(iter(weights))
    weights[first] = weights[first] + 1.0
    save_file(weights, other / "model.safetensors")
    refused = runner.invoke(app, ["search", "idx", "-q", "rivers", "--model", str(other)])
    assert refused.exit_code == 2 and "the index was built with weights" in refused.output


def test_what_a_stopped_lexical_build_leaves_does_not_block_the_rebuild(tmp_path: Path) -> None:
    """A Ctrl-C'd lexical build keeps INDEX/.lexical-building to resume from (issue 35.6); the rerun of
    `index build` into that index was refused as if the folder were the user's."""
    _good_index(tmp_path)
    (tmp_path / "idx" / ".lexical-building").mkdir()
    (tmp_path / "idx" / ".lexical-building" / "build.json").write_text("{}")
    LongIndex.build_windows(tmp_path / "enc", tmp_path / "idx")
    assert LongIndex.open(tmp_path / "idx").doc_ids == ["x", "y", "z"]


def test_another_workers_manifest_being_written_is_not_a_strangers_file(tmp_path: Path) -> None:
    """`encode --devices cpu,cpu`: the worker that starts the folder writes its manifest through a temporary file, and
    the other worker, checking the folder at that moment, saw that file without the manifest and refused the folder
    as holding foreign files (an intermittent failure of `test_two_local_processes_give_the_vectors_of_one`). The
    temporary file of a manifest is lengthwise's own; any other file still makes the folder refused."""
    settings = {"model": "random", "long": {"strategy": "multi-vector"}}
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / ".manifest.json.17noqd1g.tmp").write_text("{")  # the first worker, mid-write
    store = EmbeddingStore(folder, settings)
    store.write("w1-", ["a"], MultiVectors(np.ones((2, 4), dtype=np.float32), np.array([0, 2])))
    assert read_embeddings(folder)[0] == ["a"]
    stranger = tmp_path / "other"
    stranger.mkdir()
    (stranger / "notes.tmp").write_text("mine")
    with pytest.raises(LongDocError, match="not embeddings written by lengthwise"):
        EmbeddingStore(stranger, settings)
