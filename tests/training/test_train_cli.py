"""`lengthwise train` on the command line: config file + flags + --set, dev evaluation, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lengthwise.cli import app

runner = CliRunner()


def test_config_file_flags_and_set_with_dev_evaluation(tiny_model_dir: Path, tmp_path: Path, one_thread) -> None:
    texts = tmp_path / "texts.txt"
    texts.write_text("".join(f"sentence number {i} about topic {i % 5}.\n" for i in range(40)), encoding="utf-8")
    dev = tmp_path / "dev.tsv"
    dev.write_text("".join(f"a cat sat {i}\ta cat sits {i}\t{i % 5}\n" for i in range(12)), encoding="utf-8")
    config = tmp_path / "run.yaml"
    config.write_text("method: hicl\nsegment-length: 8\nbatch_size: 4\nmax-steps: 2\nlr: 0.001\n", encoding="utf-8")
    out = tmp_path / "run"
    result = runner.invoke(
        app,
        ["train", "--config", str(config), "--data", str(texts), "--out", str(out), "--model", str(tiny_model_dir),
         "--max-length", "32", "--eval-data", str(dev), "--save-steps", "2", "--set", "alpha=0.15", "--device", "cpu"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    record = json.loads((out / "train.json").read_text())
    assert record["config"]["method"] == "hicl" and record["config"]["alpha"] == 0.15
    assert record["config"]["segment_length"] == 8 and record["config"]["max_steps"] == 2
    evaluated = [entry for entry in record["log_history"] if any(key.startswith("eval_dev") for key in entry)]
    assert evaluated, record["log_history"]  # the STS dev evaluator ran during training
    assert (out / "model" / "modules.json").exists()


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--method", "simcse", "--out", "o"], "training needs data"),
        (["--method", "nope", "--data", "d", "--out", "o"], "--method 'nope': not known"),
        (["--method", "simcse", "--data", "d", "--out", "o", "--lr", "inf"], "--lr inf: must be a finite number"),
        (["--method", "simcse", "--data", "d", "--out", "o", "--device", "quantum"], "--device 'quantum'"),
        (["--method", "hicl", "--data", "d", "--out", "o", "--set", "alpha=2"], "--set alpha=2.0"),
        (["--method", "hicl", "--data", "d", "--out", "o", "--alpha", "2"], "--alpha 2.0: must lie in [0, 1]"),
        (["--method", "pairs", "--data", "d", "--out", "o", "--alpha", "0.1"], "--alpha 0.1: applies to hicl only"),
        (["--method", "simcse", "--data", "missing.txt", "--out", "o", "--model", "MODEL"], "no such file"),
        (["--method", "copy-concat", "--data", "TEXTS", "--out", "o", "--model", "MODEL"], "needs positive pairs"),
        (["--method", "simcse", "--data", "d", "--out", "o", "--set", "alpha"], "KEY=VALUE"),
    ],
)
def test_bad_input_gets_a_one_line_error(
    arguments: list[str], message: str, tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "texts.txt").write_text("one text\nanother text\n", encoding="utf-8")
    arguments = [
        str(tiny_model_dir) if a == "MODEL" else str(tmp_path / "texts.txt") if a == "TEXTS" else a for a in arguments
    ]
    result = runner.invoke(app, ["train", *arguments])
    assert result.exit_code == 2
    assert message in " ".join(result.output.split())
    assert result.output.count("error:") == 1


def test_the_install_hint_keeps_its_brackets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """13.15: rich markup swallowed `[train]`, printing `pip install 'lengthwise'`."""
    import lengthwise.training.run as run

    def absent() -> None:  # what the check raises without the extras (sentence-transformers 6 itself needs them,
        raise ImportError(f"training needs datasets and accelerate: {run.INSTALL_HINT}")  # so they can't be absent)

    monkeypatch.setattr(run, "_require_training_extras", absent)
    (tmp_path / "texts.txt").write_text("one text\nanother text\n", encoding="utf-8")
    result = runner.invoke(
        app, ["train", "--method", "simcse", "--data", str(tmp_path / "texts.txt"), "--out", str(tmp_path / "o")]
    )
    assert result.exit_code == 2
    assert "pip install 'lengthwise[train]'" in " ".join(result.output.split())
    assert not (tmp_path / "o").exists()
