"""Training faults lose nothing and say what happened: divergence, finished runs, half-written checkpoints,
bad data found before step 1 (with file and line), and an --out that is only created once everything is checked."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import TrainerCallback

from lengthwise.core.errors import DataFormatError, SettingError
from lengthwise.training import TrainingDiverged
from lengthwise.training.config import TrainConfig, config_from_mapping
from lengthwise.training.run import run_training

pytest.importorskip("accelerate")
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def texts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("data") / "texts.txt"
    words = ["length", "robust", "embeddings", "need", "training", "data", "with", "many", "different", "words"]
    lines = [" ".join(words[(i + j) % len(words)] for j in range(4 + i % 7)) + f" number {i}." for i in range(48)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _config(model: Path, data: Path, out: Path, **changes) -> TrainConfig:
    values = dict(
        method="simcse",
        data=str(data),
        out=str(out),
        model=str(model),
        max_steps=4,
        batch_size=8,
        max_length=32,
        lr=1e-3,
        save_steps=2,
        logging_steps=1,
        device="cpu",
        seed=3,
    )
    values.update(changes)
    return config_from_mapping(values)


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_diverging_run_stops_with_an_error_and_saves_no_model(tiny_model_dir: Path, texts: Path, tmp_path) -> None:
    """13.7: --lr 1e6 made a NaN model with exit 0 and "last logged loss 0.0000"."""
    config = _config(tiny_model_dir, texts, tmp_path / "nan", lr=1e6)
    with pytest.raises(TrainingDiverged, match=r"diverged at step \d+: .*not finite.*lr=1e\+06"):
        run_training(config)
    assert not (tmp_path / "nan" / "model").exists() and not (tmp_path / "nan" / "train.json").exists()
    saved = [p for p in (tmp_path / "nan" / "checkpoints").rglob("model.safetensors")]
    for path in saved:  # a checkpoint written before the divergence holds finite weights only
        assert all(torch.isfinite(t).all() for t in load_file(str(path)).values())


def test_resume_of_a_finished_run_changes_nothing(tiny_model_dir: Path, texts: Path, tmp_path: Path) -> None:
    """13.8: --resume on a finished run added steps past max_steps (4 → 5 → 6) and rewrote model/ and train.json."""
    config = _config(tiny_model_dir, texts, tmp_path / "done")
    first = run_training(config)
    before = _snapshot(tmp_path / "done")
    again = run_training(config, resume=True)
    assert again.already_finished and again.global_step == first.global_step == 4
    assert _snapshot(tmp_path / "done") == before  # not one byte changed
    with pytest.raises(SettingError, match=r"settings differ.*max_steps"):
        run_training(_config(tiny_model_dir, texts, tmp_path / "done", max_steps=6), resume=True)


def test_a_run_stopped_after_its_last_checkpoint_finishes_without_extra_steps(
    tiny_model_dir: Path, texts: Path, tmp_path: Path
) -> None:
    """The final checkpoint is there but model/ and train.json are not (killed while finishing): resuming writes
    them from that checkpoint instead of training a step past max_steps."""
    config = _config(tiny_model_dir, texts, tmp_path / "run")
    run_training(config)
    final = load_file(str(tmp_path / "run" / "model" / "model.safetensors"))
    shutil.rmtree(tmp_path / "run" / "model")
    (tmp_path / "run" / "train.json").unlink()
    resumed = run_training(config, resume=True)
    record = json.loads((tmp_path / "run" / "train.json").read_text())
    assert resumed.global_step == record["global_step"] == 4 and record["resumed_from"].endswith("checkpoint-4")
    assert [e["step"] for e in record["log_history"] if "loss" in e] == [1, 2, 3, 4]
    again = load_file(str(tmp_path / "run" / "model" / "model.safetensors"))
    assert all(torch.equal(again[name], final[name]) for name in final)


class _Stop(Exception):
    pass


class _StopAt(TrainerCallback):
    """Stop the run like a kill after `step` (its checkpoint, if any, is not written)."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            raise _Stop


def _half_written(source: Path, target: Path) -> None:
    """A checkpoint folder as a kill -9 leaves it mid-save: the weights are written, the rest is not."""
    target.mkdir()
    shutil.copy(source / "model.safetensors", target / "model.safetensors")
    (target / "config.json").write_text('{"archi', encoding="utf-8")


def test_resume_skips_a_half_written_checkpoint(tiny_model_dir: Path, texts: Path, tmp_path: Path) -> None:
    """13.11: a half-written checkpoint-N made --resume crash with a raw OSError; now it resumes from the last
    complete one, reaches the same weights as an uninterrupted run, and the half-written folder is gone."""
    whole = run_training(_config(tiny_model_dir, texts, tmp_path / "whole"))
    run = tmp_path / "run"
    with pytest.raises(_Stop):
        run_training(_config(tiny_model_dir, texts, run), callbacks=[_StopAt(3)])  # checkpoint-2 complete; step 3 lost
    _half_written(run / "checkpoints" / "checkpoint-2", run / "checkpoints" / "checkpoint-4")
    with pytest.raises(SettingError, match="holds an earlier run; resume it, or pick a new out"):
        run_training(_config(tiny_model_dir, texts, run))  # checkpoint-2 is complete work: a fresh run is still refused
    resumed = run_training(_config(tiny_model_dir, texts, run), resume=True)
    record = json.loads((run / "train.json").read_text())
    assert record["resumed_from"].endswith("checkpoint-2") and resumed.global_step == 4
    expected = load_file(str(whole.model_dir / "model.safetensors"))
    got = load_file(str(run / "model" / "model.safetensors"))
    for name in expected:
        torch.testing.assert_close(got[name], expected[name], rtol=0, atol=1e-6, msg=name)
    assert (run / "checkpoints" / "checkpoint-4" / "trainer_state.json").is_file()  # rewritten whole


def test_a_half_written_checkpoint_alone_does_not_block_a_fresh_run(
    tiny_model_dir: Path, texts: Path, tmp_path: Path
) -> None:
    """13.11: a fresh run was refused because of a checkpoint that holds nothing usable."""
    donor = run_training(_config(tiny_model_dir, texts, tmp_path / "donor", max_steps=2))
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    _half_written(donor.out / "checkpoints" / "checkpoint-2", run / "checkpoints" / "checkpoint-2")
    result = run_training(_config(tiny_model_dir, texts, run, max_steps=2))
    assert result.global_step == 2 and (run / "checkpoints" / "checkpoint-2" / "trainer_state.json").is_file()


def test_a_line_without_tokens_is_found_before_step_one_with_file_and_line(
    tiny_model_dir: Path, texts: Path, tmp_path: Path
) -> None:
    """13.18: such a line was found only mid-run, as "text #0 has no tokens", with no file or line. U+FFFD is a
    visible character that BERT's tokenizer drops, so the readers let it through and only the tokenizer can tell."""
    lines = texts.read_text(encoding="utf-8").splitlines()
    lines[40] = "\ufffd \ufffd"
    bad = tmp_path / "bad.txt"
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=rf"{bad.name}:41: the text has no tokens"):
        run_training(_config(tiny_model_dir, bad, tmp_path / "out"))
    assert not (tmp_path / "out").exists()  # 13.21: --out is created only once the data is checked
    pairs = tmp_path / "pairs.jsonl"
    rows = [{"anchor": f"question {i}", "positive": f"answer {i}"} for i in range(12)]
    rows[7]["positive"] = "\ufffd"
    pairs.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"pairs\.jsonl:8: the second text of the pair has no tokens"):
        run_training(_config(tiny_model_dir, pairs, tmp_path / "out", method="pairs"))


def test_an_unusable_out_is_refused_before_any_work(tiny_model_dir: Path, texts: Path, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a folder", encoding="utf-8")
    with pytest.raises(SettingError, match="exists and is not a directory") as error:
        run_training(_config(tiny_model_dir, texts, tmp_path / "file"))
    assert error.value.field == "out"
    with pytest.raises(SettingError, match="not available on this machine"):
        run_training(_config(tiny_model_dir, texts, tmp_path / "x", device="cuda:7"))
    assert not (tmp_path / "x").exists()
