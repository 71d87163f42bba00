"""Training runs on the tiny random BERT: kill and resume, DDP vs one process, refusals that protect saved work."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from lengthwise.core.errors import SettingError
from lengthwise.training.config import TrainConfig, config_from_mapping
from lengthwise.training.run import run_training

pytest.importorskip("accelerate")

TINY_STEPS = 6


@pytest.fixture(scope="module")
def texts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("data") / "texts.txt"
    words = [
        "length",
        "robust",
        "embeddings",
        "need",
        "training",
        "data",
        "with",
        "many",
        "different",
        "words",
        "in",
        "them",
    ]
    lines = [" ".join(words[(i + j) % len(words)] for j in range(4 + i % 9)) + f" number {i}." for i in range(96)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def pairs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("pairs") / "pairs.jsonl"
    rows = [
        {"anchor": f"question {i} about topic {i % 7}", "positive": f"answer {i} on topic {i % 7}"} for i in range(64)
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def _weights(run: Path) -> dict[str, torch.Tensor]:
    return load_file(str(next((run / "model").rglob("model.safetensors"))))


def _config(model: Path, data: Path, out: Path, **changes) -> TrainConfig:
    values = dict(
        method="simcse",
        data=str(data),
        out=str(out),
        model=str(model),
        max_steps=TINY_STEPS,
        batch_size=8,
        max_length=32,
        lr=1e-3,
        save_steps=2,
        logging_steps=1,
        device="cpu",
        seed=7,
    )
    values.update(changes)
    return config_from_mapping(values)


KILLER = """
import json, os, signal, sys
from transformers import TrainerCallback
from lengthwise.training.config import config_from_mapping
from lengthwise.training.run import run_training

class KillAfter(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == 3:  # checkpoint-2 exists, step 3 is done but not saved
            os.kill(os.getpid(), signal.SIGKILL)

run_training(config_from_mapping(json.loads(sys.argv[1])), callbacks=[KillAfter()])
"""


def test_kill_and_resume_reach_the_same_weights(tiny_model_dir: Path, texts: Path, tmp_path: Path, one_thread) -> None:
    whole = run_training(_config(tiny_model_dir, texts, tmp_path / "whole"))
    assert whole.global_step == TINY_STEPS
    config = _config(tiny_model_dir, texts, tmp_path / "killed")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    killed = subprocess.run(
        [sys.executable, "-c", KILLER, json.dumps(config.to_dict())], env=env, capture_output=True, text=True
    )
    assert killed.returncode == -9, killed.stderr[-2000:]  # really killed, mid-run
    assert not (tmp_path / "killed" / "model").exists()
    assert (tmp_path / "killed" / "checkpoints" / "checkpoint-2").is_dir()
    with pytest.raises(SettingError, match="holds an earlier run; resume it, or pick a new out"):
        run_training(config)  # a plain re-run must not overwrite the checkpoints
    from transformers import TrainerCallback

    done: list[int] = []

    class Steps(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            done.append(state.global_step)

    resumed = run_training(config, resume=True, callbacks=[Steps()])
    record = json.loads((tmp_path / "killed" / "train.json").read_text())
    assert record["resumed_from"].endswith("checkpoint-2") and resumed.global_step == TINY_STEPS
    assert done == [3, 4, 5, 6]  # steps 1-2 were not redone; step 3 (lost with the kill) was
    assert [e["step"] for e in record["log_history"] if "loss" in e] == list(range(1, TINY_STEPS + 1))
    before, after = _weights(tmp_path / "whole"), _weights(tmp_path / "killed")
    assert before.keys() == after.keys()
    for name in before:
        torch.testing.assert_close(after[name], before[name], rtol=0, atol=1e-6, msg=name)
    fresh = run_training(_config(tiny_model_dir, texts, tmp_path / "other-seed", seed=8))
    assert any(not torch.allclose(_weights(fresh.out)[n], before[n]) for n in before)  # the check can fail


def test_keep_checkpoints_false_leaves_only_the_model(
    tiny_model_dir: Path, texts: Path, tmp_path: Path, one_thread
) -> None:
    result = run_training(_config(tiny_model_dir, texts, tmp_path / "lean", max_steps=2, keep_checkpoints=False))
    assert (result.model_dir / "modules.json").exists() and (result.out / "train.json").exists()
    assert not (result.out / "checkpoints").exists()
    kept = run_training(_config(tiny_model_dir, texts, tmp_path / "kept", max_steps=2))
    assert (kept.out / "checkpoints" / "checkpoint-2").is_dir()


def test_resume_refuses_changed_settings(tiny_model_dir: Path, texts: Path, tmp_path: Path, one_thread) -> None:
    run_training(_config(tiny_model_dir, texts, tmp_path / "run", max_steps=2))
    with pytest.raises(SettingError, match=r"settings differ.*lr"):
        run_training(_config(tiny_model_dir, texts, tmp_path / "run", max_steps=2, lr=5e-4), resume=True)


def test_every_method_runs_and_records_loss_parts(
    tiny_model_dir: Path, texts: Path, pairs: Path, tmp_path: Path, one_thread
) -> None:
    docs = tmp_path / "docs.jsonl"
    docs.write_text(
        "".join(
            json.dumps({"text": f"Doc {i} starts here. It has a second sentence. And a third, {i}."}) + "\n"
            for i in range(32)
        ),
        encoding="utf-8",
    )
    sources = {
        "simcse": texts,
        "hicl": texts,
        "laser-self": texts,
        "pairs": pairs,
        "copy-concat": pairs,
        "coco-dr": docs,
        "laser-intra": docs,
        "simde": docs,
    }
    for method, data in sources.items():
        extra = {"mlm_weight": 0.1} if method == "simde" else {}
        result = run_training(_config(tiny_model_dir, data, tmp_path / method, method=method, max_steps=2, **extra))
        record = json.loads((result.out / "train.json").read_text())
        logged = [entry for entry in record["log_history"] if "loss" in entry]
        assert result.global_step == 2 and logged and all(torch.isfinite(torch.tensor(e["loss"])) for e in logged), (
            method
        )
        assert record["data"]["n_rows"] > 0 and record["tokens_per_second"] > 0
        if method == "hicl":
            assert {"hicl_local", "hicl_global"} <= logged[0].keys()
        if method == "simde":
            assert {"contrastive", "mlm"} <= logged[0].keys() and logged[0]["mlm"] > 0


def _losses(run: Path) -> list[float]:
    record = json.loads((run / "train.json").read_text())
    return [entry["loss"] for entry in record["log_history"] if "loss" in entry]


def test_ddp_two_processes_match_one_process(tiny_model_dir: Path, pairs: Path, tmp_path: Path) -> None:
    """Same global batch (8) as 2 × 4 under torchrun/gloo: the same loss curve, dropout off so it is exact."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(tiny_model_dir), device="cpu")
    model[0].auto_model.config.hidden_dropout_prob = 0.0
    model[0].auto_model.config.attention_probs_dropout_prob = 0.0
    model.save(str(tmp_path / "no-dropout"))
    common = [
        "--method",
        "copy-concat",
        "--data",
        str(pairs),
        "--model",
        str(tmp_path / "no-dropout"),
        "--max-steps",
        "4",
        "--batch-size",
        "8",
        "--max-length",
        "32",
        "--lr",
        "1e-3",
        "--seed",
        "3",
        "--device",
        "cpu",
        "--set",
        "logging_steps=1",
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    single = subprocess.run(
        [sys.executable, "-m", "lengthwise.cli", "train", *common, "--out", str(tmp_path / "one")],
        env=env,
        capture_output=True,
        text=True,
    )
    assert single.returncode == 0, single.stderr[-3000:]
    double = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node",
            "2",
            "-m",
            "lengthwise.cli",
            "train",
            *common,
            "--out",
            str(tmp_path / "two"),
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    assert double.returncode == 0, double.stderr[-3000:]
    record = json.loads((tmp_path / "two" / "train.json").read_text())
    assert record["world_size"] == 2
    one, two = _losses(tmp_path / "one"), _losses(tmp_path / "two")
    assert len(one) == len(two) == 4
    assert two == pytest.approx(one, rel=1e-3, abs=1e-4)
    assert one[0] != pytest.approx(one[-1], rel=1e-3)  # the curve moves, so agreement means something


def test_gradcache_matches_the_plain_loss_without_dropout(
    tiny_model_dir: Path, pairs: Path, tmp_path: Path, one_thread
) -> None:
    """GradCache (--cache-batch) only changes memory, not the maths: same weights after training, dropout off."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(tiny_model_dir), device="cpu")
    model[0].auto_model.config.hidden_dropout_prob = 0.0
    model[0].auto_model.config.attention_probs_dropout_prob = 0.0
    model.save(str(tmp_path / "no-dropout"))
    plain = run_training(_config(tmp_path / "no-dropout", pairs, tmp_path / "plain", method="copy-concat", max_steps=3))
    cached = run_training(
        _config(tmp_path / "no-dropout", pairs, tmp_path / "cached", method="copy-concat", max_steps=3, cache_batch=2)
    )
    assert _losses(cached.out) == pytest.approx(_losses(plain.out), rel=1e-4)
    before, after = _weights(plain.out), _weights(cached.out)
    for name in before:
        torch.testing.assert_close(after[name], before[name], rtol=1e-4, atol=1e-5, msg=name)
    with_dropout = run_training(
        _config(tiny_model_dir, pairs, tmp_path / "dropout", method="copy-concat", max_steps=2, cache_batch=2)
    )
    assert all(loss > 0 for loss in _losses(with_dropout.out))


def test_eval_data_without_an_evaluator_is_refused_not_ignored(
    tiny_model_dir: Path, texts: Path, tmp_path: Path
) -> None:
    # training.run_training used to drop eval_data / eval_attack silently; only lengthwise.train builds the evaluator
    config = _config(tiny_model_dir, texts, tmp_path / "run", max_steps=1, eval_data=str(texts))
    with pytest.raises(SettingError, match=r"eval_data=.*lengthwise\.train"):
        run_training(config)
    assert not (tmp_path / "run" / "model").exists()
