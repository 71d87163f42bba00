"""Issue 33: the careless-user sweep of the corpus-scale surfaces, on the encode, eval and CLI side (`encode`
resume and refusals, `eval --index`, printing). Each case failed before its fix."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from lengthwise.cli import app

pytestmark = pytest.mark.usefixtures("one_thread")

runner = CliRunner()
HAYSTACK = Path(__file__).parent / "prose.txt"
TEXTS = ["the recipe needs flour and eggs", "pianos have eighty-eight keys", "the moon orbits the earth",
         "rivers run to the sea", "a bridge spans the old river"]  # fmt: skip


def _run(args: list[object]) -> tuple[int, str]:
    result = runner.invoke(app, [str(a) for a in args])
    return result.exit_code, result.output


def _error(args: list[object]) -> str:
    code, output = _run(args)
    lines = [line for line in output.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error:"), output
    return lines[0]


def _corpus(path: Path, texts: list[str] = TEXTS) -> Path:
    rows = [{"_id": f"d{i}", "text": text} for i, text in enumerate(texts)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def _encode(corpus: Path, out: Path, model: Path, *extra: object) -> str:
    code, output = _run(["encode", "-d", corpus, "-o", out, "-m", model, "--long", "truncate", *extra])
    assert code == 0, output
    return output


def _vectors(folder: Path) -> dict[str, np.ndarray]:
    from lengthwise.longdoc.storage.store import read_embeddings

    ids, vectors = read_embeddings(folder)
    assert isinstance(vectors, np.ndarray)
    return dict(zip(ids, vectors, strict=True))


def test_a_resumed_encode_embeds_again_the_documents_whose_text_changed(tiny_model_dir: Path, tmp_path: Path) -> None:
    # before: "embedded 0 new documents", the old vectors kept under the same ids
    corpus = _corpus(tmp_path / "c.jsonl")
    _encode(corpus, tmp_path / "e", tiny_model_dir, "--shard-docs", "2")
    changed = [*TEXTS[:3], "a different text about cats", TEXTS[4]]
    _corpus(corpus, changed)
    output = _encode(corpus, tmp_path / "e", tiny_model_dir, "--shard-docs", "2")
    assert "repair: w0-00001: 1 of its 2 documents have another text" in output and "'d3'" in output, output
    assert "embedded 2 new documents" in output, output  # the shard holding d3, not the others
    _encode(_corpus(tmp_path / "fresh.jsonl", changed), tmp_path / "fresh", tiny_model_dir)
    resumed, fresh = _vectors(tmp_path / "e"), _vectors(tmp_path / "fresh")
    assert sorted(resumed) == sorted(fresh)
    for doc_id, vector in fresh.items():
        np.testing.assert_allclose(resumed[doc_id], vector, atol=1e-6)
    # a document gone from the corpus goes from the folder too
    _corpus(corpus, changed[:4])
    output = _encode(corpus, tmp_path / "e", tiny_model_dir, "--shard-docs", "2")
    assert "w0-00002: 1 of its 1 documents are gone from the corpus (first: 'd4')" in output, output
    assert sorted(_vectors(tmp_path / "e")) == ["d0", "d1", "d2", "d3"]


def test_encode_resume_keeps_files_that_are_not_shards(tiny_model_dir: Path, tmp_path: Path) -> None:
    # before: a resumed encode deleted my_labels.npy (any *.npy, *.ids.txt, … was taken for a shard)
    corpus = _corpus(tmp_path / "c.jsonl")
    _encode(corpus, tmp_path / "e", tiny_model_dir, "--shard-docs", "2")
    mine = {"my_labels.npy": b"labels", "notes.ids.txt": b"mine\n", "w0-1.npy": b"not a shard"}
    for name, data in mine.items():
        (tmp_path / "e" / name).write_bytes(data)
    (tmp_path / "e" / "w0-00001.shard.json").unlink()  # an interrupted shard: removed, and said so
    output = _encode(corpus, tmp_path / "e", tiny_model_dir, "--shard-docs", "2")
    assert "repair: w0-00001: no shard record" in output and "embedded 2 new documents" in output, output
    for name, data in mine.items():
        assert (tmp_path / "e" / name).read_bytes() == data
    assert sorted(_vectors(tmp_path / "e")) == [f"d{i}" for i in range(5)]


@pytest.mark.parametrize(
    "bad", [["--precision", "fp8"], ["-m", "/nonexistent/lengthwise-model"], ["--window", "100000"]]
)
def test_a_refused_encode_leaves_nothing_and_the_corrected_run_works(
    tiny_model_dir: Path, tmp_path: Path, bad: list[str]
) -> None:
    # before: manifest.json was left behind, and the corrected run was refused ("holds embeddings made with other
    # settings"); the refused run also left an empty --out
    corpus = _corpus(tmp_path / "c.jsonl")
    args = ["encode", "-d", corpus, "-o", tmp_path / "e", "-m", tiny_model_dir, "--long", "chunk-mean"]
    line = _error([*args, *bad])
    assert bad[0] in line or "could not load it" in line, line
    assert not (tmp_path / "e").exists()
    assert "embedded 5 new documents" in _run(args)[1]


def test_a_folder_holding_only_a_manifest_is_new(tiny_model_dir: Path, tmp_path: Path) -> None:
    # before: a manifest left by an earlier refused run blocked every other setting
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "manifest.json").write_text('{"format": 2, "settings": {"model": "other"}}')
    assert "embedded 5 new documents" in _encode(_corpus(tmp_path / "c.jsonl"), tmp_path / "e", tiny_model_dir)


def _beir(folder: Path, texts: list[str]) -> Path:
    folder.mkdir()
    _corpus(folder / "corpus.jsonl", texts)
    (folder / "queries.jsonl").write_text('{"_id": "q0", "text": "keys of a piano"}\n', encoding="utf-8")
    (folder / "qrels").mkdir()
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq0\td1\t1\n", encoding="utf-8")
    return folder


def test_eval_through_an_index_of_other_texts_with_the_same_ids_is_refused(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    # before: nDCG@10 100 for an index of corpus A scored on corpus B (same ids, other texts)
    a = _beir(tmp_path / "a", TEXTS)
    b = _beir(tmp_path / "b", [text.upper() + " and more" for text in TEXTS])
    _encode(a / "corpus.jsonl", tmp_path / "e", tiny_model_dir)
    assert _run(["index", "build", tmp_path / "e", "-o", tmp_path / "i"])[0] == 0
    line = _error(["eval", "-t", "retrieval", "-d", b, "--index", tmp_path / "i", "-o", tmp_path / "out"])
    assert line.startswith("error: --index") and "other texts" in line, line
    assert not (tmp_path / "out").exists()
    code, output = _run(["eval", "-t", "retrieval", "-d", a, "--index", tmp_path / "i", "-o", tmp_path / "out"])
    assert code == 0, output


def test_eval_index_embeds_the_queries_at_the_precision_asked_and_records_it(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    # --precision was refused with --index; it now sets the queries' precision (issue 48), and the record says so
    a = _beir(tmp_path / "a", TEXTS)
    _encode(a / "corpus.jsonl", tmp_path / "e", tiny_model_dir)
    assert _run(["index", "build", tmp_path / "e", "-o", tmp_path / "i"])[0] == 0
    records = {}
    for name, extra in (("index", []), ("int8", ["--precision", "int8"])):
        code, output = _run(["eval", "-t", "retrieval", "-d", a, "--index", tmp_path / "i", "-o", tmp_path / name,
                             *extra])  # fmt: skip
        assert code == 0, output
        records[name] = json.loads((tmp_path / name / "results.json").read_text(encoding="utf-8"))
    assert records["index"]["index"]["query_precision"] == "fp32"
    assert records["int8"]["index"]["query_precision"] == "int8"
    line = _error(["eval", "-t", "retrieval", "-d", a, "--index", tmp_path / "i", "-o", tmp_path / "bad",
                   "--precision", "half"])  # fmt: skip
    assert line.startswith("error: --precision") and not (tmp_path / "bad").exists()


@pytest.mark.parametrize(
    "flag",
    [["-m", "x"], ["--tempscale", "0.8"], ["--long", "chunk-mean"], ["--max-length", "64"]],
)
def test_eval_index_refuses_the_settings_the_index_fixes(tmp_path: Path, flag: list[str]) -> None:
    # before: each was silently ignored (the index's model and settings were used)
    line = _error(["eval", "-t", "retrieval", "-d", tmp_path, "--index", tmp_path / "i", "-o", tmp_path / "o",
                   *flag])  # fmt: skip
    assert line.startswith(f"error: {'--model' if flag[0] == '-m' else flag[0]} ") and "the index fixes" in line
    assert not (tmp_path / "o").exists()


def test_encode_refuses_zero_threads_and_records_one_spelling_of_int8(tiny_model_dir: Path, tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "c.jsonl")
    args = ["encode", "-d", corpus, "-o", tmp_path / "e", "-m", tiny_model_dir, "--long", "truncate"]
    # before: --threads 0 was taken (as "no setting")
    assert _error([*args, "--threads", "0"]) == "error: --threads 0: must be ≥ 1"
    # before: "INT8" was recorded as it was typed, so a later `--precision int8` run was refused
    assert "embedded 5 new documents" in _run([*args, "--precision", "INT8"])[1]
    manifest = json.loads((tmp_path / "e" / "manifest.json").read_text())
    assert manifest["settings"]["precision"] == "int8"
    assert "embedded 0 new documents" in _run([*args, "--precision", "int8"])[1]


def test_a_ray_address_where_nothing_answers_is_refused_at_once(tiny_model_dir: Path, tmp_path: Path) -> None:
    # before: no word for 150 s and more while Ray retried its connection
    pytest.importorskip("ray")
    import time

    corpus = _corpus(tmp_path / "c.jsonl")
    started = time.perf_counter()
    line = _error(["encode", "-d", corpus, "-o", tmp_path / "e", "-m", tiny_model_dir, "--runner", "ray",
                   "--address", "127.0.0.1:1"])  # fmt: skip
    assert line.startswith("error: --address '127.0.0.1:1': no Ray cluster answers there"), line
    assert time.perf_counter() - started < 60 and not (tmp_path / "e").exists()
    line = _error(["encode", "-d", corpus, "-o", tmp_path / "e", "-m", tiny_model_dir, "--address", "10.0.0.1:6379"])
    assert line.startswith("error: --address '10.0.0.1:6379': is for the ray runner"), line


def test_user_strings_print_as_they_are_and_search_results_go_to_stdout(tiny_model_dir: Path, tmp_path: Path) -> None:
    # before: `-o 'enc[/x]'` and a query id `[/x]` raised rich's MarkupError (for encode, after the work was done),
    # and `search` wrote its text results to stderr (`search … > out.txt` left the file empty)
    corpus, out = _corpus(tmp_path / "c.jsonl"), tmp_path / "enc[/x]"
    code, output = _run(["encode", "-d", corpus, "-o", out, "-m", tiny_model_dir, "--long", "truncate"])
    assert code == 0 and f"into {out} (truncate)" in " ".join(output.split()), output
    assert _run(["index", "build", out, "-o", tmp_path / "i"])[0] == 0
    (tmp_path / "q.jsonl").write_text('{"_id": "[/x]", "text": "keys of a piano"}\n', encoding="utf-8")
    result = runner.invoke(app, ["search", str(tmp_path / "i"), "--queries", str(tmp_path / "q.jsonl"), "--top-k", "2"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == "[/x]:" and len(result.stdout.splitlines()) >= 3, result.stdout
    assert "[/x]" not in result.stderr


def test_an_empty_queries_file_is_named(tmp_path: Path) -> None:
    # before: "error: --query : a query is empty" (a flag not given, and no file named)
    (tmp_path / "q.jsonl").write_text("", encoding="utf-8")
    line = _error(["search", tmp_path, "--queries", tmp_path / "q.jsonl"])
    assert line.startswith(f"error: --queries {tmp_path / 'q.jsonl'}: holds no queries"), line


def test_duplicate_scales_are_refused(tiny_model_dir: Path, tmp_path: Path) -> None:
    # before: each window of a repeated scale was stored once per repeat
    args = ["encode", "-d", _corpus(tmp_path / "c.jsonl"), "-o", tmp_path / "e", "-m", tiny_model_dir]
    line = _error([*args, "--long", "multi-vector", "--window", "16", "--scales", "8,8"])
    assert line.startswith("error: --scales '8,8': a size is given twice"), line


@pytest.mark.parametrize("command", ["encode", "eval", "synth"])
def test_a_refusal_after_the_out_check_leaves_no_empty_out(tmp_path: Path, command: str) -> None:
    # before: --out was made by the check and left empty when the model then failed to load
    no_model, out = "/nonexistent/lengthwise-model", tmp_path / "new" / "out"
    args = {
        "encode": ["encode", "-d", _corpus(tmp_path / "c.jsonl"), "--long", "truncate"],
        "eval": ["eval", "-t", "retrieval", "-d", _beir(tmp_path / "b", TEXTS)],
        "synth": ["longdoc", "synth", "-t", "passkey", "--haystack", HAYSTACK, "--lengths", "48"],
    }[command]
    assert "lengthwise-model" in _error([*args, "-o", out, "-m", no_model])
    assert not (tmp_path / "new").exists()


def test_train_refuses_a_folder_of_the_users_files(tiny_model_dir: Path, tmp_path: Path) -> None:
    # before: checkpoints/, config.json and model/ were written beside the user's files
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps({"anchor": f"q {i}", "positive": f"a {i}"}) + "\n" for i in range(8)))
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep\n", encoding="utf-8")
    line = _error(["train", "--method", "pairs", "-d", pairs, "-o", tmp_path / "mine", "-m", tiny_model_dir])
    assert line.startswith("error: --out") and "notes.txt" in line and "new or empty" in line, line
    assert sorted(p.name for p in (tmp_path / "mine").iterdir()) == ["notes.txt"]
