"""Bad inputs and faults for `lengthwise train`: each ends in one clear line (exit 2) or a right result, and
nothing a run has written is lost. Every run uses the tiny random BERT, a few steps and N = 32, so a case takes
seconds; cases that must fail before any model work name a model that does not exist (`NO_MODEL`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from reliability_cases import Case, Context, write_remote_code_model

NO_MODEL = "/nonexistent/lengthwise-model"
_RUN = ["--batch-size", "8", "--max-length", "32", "--max-steps", "4", "--save-steps", "2", "--device", "cpu"]


def _texts(tmp: Path, _: Context | None = None, *, bad: dict[int, str] | None = None) -> None:
    words = ["length", "robust", "embeddings", "need", "training", "data", "with", "many", "words"]
    lines = [" ".join(words[(i + j) % len(words)] for j in range(4 + i % 6)) + f" number {i}." for i in range(40)]
    for number, text in (bad or {}).items():
        lines[number - 1] = text
    (tmp / "texts.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _train(*extra: str, method: str = "simcse", data: str = "{tmp}/texts.txt", model: str = "{tiny}") -> list[str]:
    return ["train", "--method", method, "--data", data, "--out", "{tmp}/run", "-m", model, *_RUN, *extra]


def _cli(tmp: Path, context: Context, argv: list[str]) -> None:
    """Run `lengthwise` in a setup (to leave a finished or stopped run behind); raise if it fails."""
    argv = [part.format(tmp=tmp, tiny=context.tiny_model, minilm=context.minilm) for part in argv]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "lengthwise.cli", *argv], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"setup failed: {done.stderr[-500:]}")


def _digest(folder: Path) -> str:
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    return hashlib.sha256(b"".join(str(p.relative_to(folder)).encode() + p.read_bytes() for p in files)).hexdigest()


def _finished_run(tmp: Path, context: Context) -> None:
    _texts(tmp)
    _cli(tmp, context, _train())
    (tmp / "digest").write_text(_digest(tmp / "run"), encoding="utf-8")


def _unchanged(tmp: Path, output: str) -> str | None:
    if _digest(tmp / "run") != (tmp / "digest").read_text(encoding="utf-8"):
        return "the finished run's files changed"
    record = json.loads((tmp / "run" / "train.json").read_text(encoding="utf-8"))
    return None if record["global_step"] == 4 else f"global_step {record['global_step']} != 4"


def _half_written_last(tmp: Path, context: Context) -> None:
    """A max-steps-4 run killed while writing checkpoint-4: that folder lacks its state, optimizer and scheduler."""
    _finished_run(tmp, context)
    shutil.rmtree(tmp / "run" / "model")
    (tmp / "run" / "train.json").unlink()
    for name in ("trainer_state.json", "optimizer.pt", "scheduler.pt", "rng_state.pth"):
        (tmp / "run" / "checkpoints" / "checkpoint-4" / name).unlink(missing_ok=True)


def _resumed_from_two(tmp: Path, output: str) -> str | None:
    record = json.loads((tmp / "run" / "train.json").read_text(encoding="utf-8"))
    if not str(record["resumed_from"]).endswith("checkpoint-2") or record["global_step"] != 4:
        return f"resumed from {record['resumed_from']} to step {record['global_step']}"
    state = tmp / "run" / "checkpoints" / "checkpoint-4" / "trainer_state.json"
    return None if state.is_file() else "checkpoint-4 was not written again in full"


def _only_half_checkpoint(tmp: Path, _: Context) -> None:
    _texts(tmp)
    folder = tmp / "run" / "checkpoints" / "checkpoint-2"
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(b"\x00" * 100)  # cut short by the kill


def _model_written(tmp: Path, output: str) -> str | None:
    return None if (tmp / "run" / "model" / "modules.json").is_file() else "no model/ written"


def _no_model(tmp: Path, output: str) -> str | None:
    if (tmp / "run" / "model").exists() or (tmp / "run" / "train.json").exists():
        return "a model or train.json was written"
    return None


def _no_out(tmp: Path, output: str) -> str | None:
    return "--out was created before the error" if (tmp / "run").exists() else None


def _out_is_file(tmp: Path, _: Context) -> None:
    _texts(tmp)
    (tmp / "run").write_text("keep me\n", encoding="utf-8")


def _file_kept(tmp: Path, output: str) -> str | None:
    return None if (tmp / "run").read_text(encoding="utf-8") == "keep me\n" else "the file at --out was changed"


def _remote_code(tmp: Path, context: Context) -> None:
    _texts(tmp)
    write_remote_code_model(context.tiny_model, tmp / "remote")


def _docs(tmp: Path, _: Context) -> None:
    rows = [{"text": f"Doc {i} starts here. It has a second sentence. And a third, {i}."} for i in range(24)]
    (tmp / "docs.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


def _simde_record(tmp: Path, output: str) -> str | None:
    record = json.loads((tmp / "run" / "train.json").read_text(encoding="utf-8"))
    if record["config"]["mlm_weight"] != 0.1 or record["mlm_head"] != "new":
        return f"mlm_weight {record['config']['mlm_weight']}, head {record['mlm_head']}"
    modules = json.loads((tmp / "run" / "model" / "modules.json").read_text(encoding="utf-8"))
    return "the saved model carries the MLM head" if any("MaskedLM" in m["type"] for m in modules) else None


def _pairs(tmp: Path, _: Context) -> None:
    rows = [{"anchor": f"question {i}", "positive": f"answer {i}"} for i in range(16)]
    (tmp / "pairs.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


def _named(name: str, text: str):
    def setup(tmp: Path, _: Context) -> None:
        _texts(tmp)
        (tmp / name).write_text(text, encoding="utf-8")

    return setup


CASES = [
    Case("train-lr-huge-diverges", "13.7", _train("--lr", "1e6"), 2, "training diverged at step", _texts, _no_model),
    Case("train-lr-inf", "13.21", _train("--lr", "inf", model=NO_MODEL), 2, "--lr inf: must be a finite number",
         _texts, _no_out),
    Case("train-lr-nan", "new", _train("--lr", "nan", model=NO_MODEL), 2, "--lr nan: must be a finite", _texts,
         _no_out),
    Case("train-lr-zero", "new", _train("--lr", "0", model=NO_MODEL), 2, "--lr 0.0: must be > 0", _texts, _no_out),
    Case("train-warmup-ratio-one", "13.24", _train("--warmup-ratio", "1", model=NO_MODEL), 2,
         "--warmup-ratio 1.0: must lie in [0, 1)", _texts, _no_out),
    Case("train-resume-finished", "13.8", _train("--resume"), 0, "nothing to do", _finished_run, _unchanged),
    Case("train-fresh-over-finished", "new", _train(), 2, "holds an earlier run; resume it", _finished_run,
         _unchanged),
    Case("train-resume-half-written-checkpoint", "13.11", _train("--resume"), 0, "trained 4 steps",
         _half_written_last, _resumed_from_two),
    Case("train-fresh-over-half-checkpoint", "13.11", _train(), 0, "trained 4 steps", _only_half_checkpoint,
         _model_written),
    Case("train-zero-width-line", "13.18", _train(), 2, "texts.txt:5", lambda t, c: _texts(t, bad={5: "\u200b\u200b"}),
         _no_out),
    Case("train-no-token-line", "13.18", _train(), 2, "texts.txt:37: the text has no tokens",
         lambda t, c: _texts(t, bad={37: "\ufffd \ufffd"}), _no_out),
    Case("train-out-is-a-file", "13.12", _train(), 2, "exists and is not a directory", _out_is_file, _file_kept),
    Case("train-out-unwritable", "13.12",
         ["train", "--method", "simcse", "--data", "{tmp}/texts.txt", "--out", "/proc/lw-train", "-m", "{tiny}",
          *_RUN], 2, "--out '/proc/lw-train'", _texts),
    Case("train-bad-data-creates-no-out", "13.21", _train(data="{tmp}/bad.jsonl"), 2, "bad.jsonl:2",
         _named("bad.jsonl", '{"text": "fine"}\n{"text": \n'), _no_out),
    Case("train-device-unknown", "13.19", _train("--device", "quantum", model=NO_MODEL), 2, "not a torch device",
         _texts, _no_out),
    Case("train-device-absent", "13.19", _train("--device", "cuda:7", model=NO_MODEL), 2,
         "not available on this machine", _texts, _no_out),
    Case("train-remote-code-hint", "13.20", _train(model="{tmp}/remote"), 2, "without --trust-remote-code",
         _remote_code, _no_model),
    Case("train-simde-mlm-default", "13.23", _train(method="simde", data="{tmp}/docs.jsonl"), 0,
         "no pretrained MLM head", _docs, _simde_record),
    Case("train-pairs-for-simcse", "new", _train(data="{tmp}/pairs.jsonl"), 2, "trains on single texts", _pairs,
         _no_out),
    Case("train-texts-for-pairs", "new", _train(method="pairs"), 2, "needs positive pairs", _texts, _no_out),
    Case("train-unknown-setting", "new", _train("--set", "alpah=1", model=NO_MODEL), 2, "unknown training setting",
         _texts, _no_out),
    Case("train-bad-set-value", "new", _train("--set", "alpha=2", model=NO_MODEL), 2, "--set alpha=2 (or", _texts,
         _no_out),
    Case("train-bad-yaml", "new", _train("--config", "{tmp}/run.yaml", model=NO_MODEL), 2, "not valid YAML",
         _named("run.yaml", "method: [simcse\n"), _no_out),
    Case("train-batch-size-one", "new", _train("--batch-size", "1", model=NO_MODEL), 2, "--batch-size 1", _texts,
         _no_out),
    Case("train-max-length-beyond-model", "new", _train("--max-length", "100000"), 2, "exceeds the model's", _texts,
         _no_out),
    Case("train-empty-data", "new", _train(data="{tmp}/empty.txt", model=NO_MODEL), 2, "no training examples",
         _named("empty.txt", "\n\n"), _no_out),
    Case("train-missing-data", "new", _train(data="{tmp}/nope.txt", model=NO_MODEL), 2, "no such file", _texts,
         _no_out),
    Case("train-unknown-method", "new", _train(method="bert", model=NO_MODEL), 2, "--method 'bert': not known",
         _texts, _no_out),
]  # fmt: skip
