"""Issue 21.3: what the careless-user sweep of `longdoc synth|eval|tune|save`, `encode`, `index build` and `search`
found. Each case failed before its fix (a traceback, a silent wrong result, or lost output) and is now one line
naming the flag or file and the fix, with nothing already there lost."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lengthwise.cli import app

pytestmark = pytest.mark.usefixtures("one_thread")

HAYSTACK = Path(__file__).parent / "prose.txt"  # natural prose that names people and places (realistic synth)
runner = CliRunner()


def _run(args: list[object]) -> tuple[int, str]:
    result = runner.invoke(app, [str(a) for a in args])
    return result.exit_code, result.output


def _error(args: list[object]) -> str:
    code, output = _run(args)
    lines = [line for line in output.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error:"), output
    return lines[0]


def _synth(model: Path, out: Path, haystack: Path = HAYSTACK) -> list[object]:
    return ["longdoc", "synth", "-t", "passkey", "--haystack", haystack, "-o", out, "-m", model,
            "--lengths", "48,96", "--per-length", "2"]  # fmt: skip


@pytest.fixture(scope="module")
def task(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("careless") / "task"
    assert _run(_synth(tiny_model_dir, folder))[0] == 0
    return folder


def _corpus(path: Path, count: int) -> Path:
    rows = [{"_id": f"d{i}", "text": f"document {i} about the river and the bridge number {i}"} for i in range(count)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def test_synth_with_an_empty_haystack_names_the_file(tiny_model_dir: Path, tmp_path: Path) -> None:
    # before: IndexError from inside the tokenizer
    (tmp_path / "blank.txt").write_text("\n   \n", encoding="utf-8")
    line = _error(_synth(tiny_model_dir, tmp_path / "out", tmp_path / "blank.txt"))
    assert "--haystack" in line and "blank.txt" in line and "holds no text" in line


def test_synth_refuses_a_folder_of_other_files(tiny_model_dir: Path, tmp_path: Path) -> None:
    # before: the task's files were written among the user's own
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep\n", encoding="utf-8")
    line = _error(_synth(tiny_model_dir, tmp_path / "mine"))
    assert "notes.txt" in line and "--out" in line
    assert sorted(p.name for p in (tmp_path / "mine").iterdir()) == ["notes.txt"]


def test_top_k_on_a_single_vector_strategy_is_refused(task: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    # before: --top-k 3 (now --best-windows) with chunk-mean was silently ignored
    args = ["longdoc", "eval", "-d", task, "-m", tiny_model_dir, "-o", tmp_path / "ev", "--long", "chunk-mean"]
    line = _error([*args, "--best-windows", "3"])
    assert line.startswith("error: --best-windows 3:") and "multi-vector" in line
    for flag, value in (("--fuse-mean", "0.2"), ("--scales", "128")):
        line = _error([*args, flag, value])
        assert line.startswith(f"error: {flag} ") and value in line and "multi-vector" in line, line


def test_batch_size_zero_is_a_flag_error(task: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    # before: "error: range() arg 3 must not be zero"
    line = _error(["longdoc", "eval", "-d", task, "-m", tiny_model_dir, "-o", tmp_path / "ev", "--batch-size", "0"])
    assert line == "error: --batch-size 0: must be ≥ 1"


@pytest.mark.parametrize("inside", [False, True])
def test_tune_save_into_its_own_out_is_refused_before_compute(
    task: Path, tiny_model_dir: Path, tmp_path: Path, inside: bool
) -> None:
    # before: the model was saved into --out, which then could not take tune.json: the tuning was lost and
    # the folder left unusable for any later tuning
    out = tmp_path / "tune"
    save = out / "model" if inside else out
    args = ["longdoc", "tune", "-d", task, "-m", tiny_model_dir, "-o", out, "--windows", "16", "--save", save]
    line = _error([*args, "--strategies", "chunk-mean"])
    assert line.startswith("error: --save") and "other output" in line
    assert not out.exists() or not any(out.iterdir())


def test_tune_save_to_an_unwritable_place_is_refused_before_compute(
    task: Path, tiny_model_dir: Path, tmp_path: Path
) -> None:
    # before: a FileNotFoundError traceback after every candidate had been scored
    args = ["longdoc", "tune", "-d", task, "-m", tiny_model_dir, "-o", tmp_path / "t", "--windows", "16"]
    line = _error([*args, "--strategies", "chunk-mean", "--save", "/proc/lengthwise-model"])
    assert line.startswith("error: --save /proc/lengthwise-model: cannot write there")  # a path, as --out prints it


def test_longdoc_save_refuses_a_folder_of_other_files(tiny_model_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep\n", encoding="utf-8")
    line = _error(["longdoc", "save", "-o", tmp_path / "mine", "-m", tiny_model_dir])
    assert "not a saved model" in line and "notes.txt" in line
    assert sorted(p.name for p in (tmp_path / "mine").iterdir()) == ["notes.txt"]


def test_encode_refusals(tiny_model_dir: Path, tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "c.jsonl", 4)
    (tmp_path / "empty.jsonl").write_text("", encoding="utf-8")
    base = ["encode", "-m", tiny_model_dir]
    # before: "embedded 0 new documents", exit 0
    assert "holds no documents" in _error([*base, "-d", tmp_path / "empty.jsonl", "-o", tmp_path / "e1"])
    # before: "Number of processes must be at least 1"
    assert _error([*base, "-d", corpus, "-o", tmp_path / "e2", "--devices", ","]).startswith("error: --devices")
    # before: the refusal named --device, a flag encode does not have
    assert _error([*base, "-d", corpus, "-o", tmp_path / "e3", "--devices", "cuda:7"]).startswith("error: --devices")
    # before: shards were written among the user's files
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep\n", encoding="utf-8")
    assert "notes.txt" in _error([*base, "-d", corpus, "-o", tmp_path / "mine"])
    assert sorted(p.name for p in (tmp_path / "mine").iterdir()) == ["notes.txt"]
    assert _error([*base, "-d", corpus, "-o", tmp_path / "e4", "--batch-size", "0"]) == (
        "error: --batch-size 0: must be ≥ 1"
    )


def test_encode_takes_a_beir_folder(task: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    # before: "no such file" for the folder `longdoc synth` (or any BEIR set) writes
    code, output = _run(["encode", "-d", task, "-o", tmp_path / "e", "-m", tiny_model_dir])
    assert code == 0 and "embedded 4 new documents" in output, output


def test_index_and_search_refusals(tiny_model_dir: Path, tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "c.jsonl", 6)
    assert _run(["encode", "-d", corpus, "-o", tmp_path / "e", "-m", tiny_model_dir])[0] == 0
    # before: "'int4' is not a valid Quantize" (the enum's own message, no flag, no choices)
    line = _error(["index", "build", tmp_path / "e", "--out", tmp_path / "i", "--quantize", "int4"])
    assert line == "error: --quantize 'int4': use one of none, int8, ubinary"
    line = _error(["index", "build", tmp_path / "e", "--out", tmp_path / "i", "--engine", "annoy"])
    assert line == "error: --engine 'annoy': use one of faiss, usearch"
    assert _run(["index", "build", tmp_path / "e", "--out", tmp_path / "i"])[0] == 0
    # before: "document #0 is empty or whitespace-only" for an empty query
    assert "a query is empty" in _error(["search", tmp_path / "i", "--query", "  "])
