"""Training throughput: HiCL vs SimCSE at max length 512, and training tokens/s vs encode tokens/s.

Both objectives see the same documents truncated to N = 512: SimCSE encodes each whole sequence twice, HiCL its
32-token segments twice (hicl §3.3 and App. A.1 report about 2.3× faster training at 512). Runs alternate
(SimCSE, HiCL, SimCSE, ...) so drifting machine load hits both; step times after the first step of each run
are pooled and the medians compared. Encode throughput is `SentenceTransformer.encode` on the same texts.

    python -m benchmarks.train.train --out docs/results/bench_train.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch
from transformers import TrainerCallback

from benchmarks._measure import command_line
from lengthwise.core.models import load_plain_model, set_max_length
from lengthwise.core.results import environment, write_json_atomic
from lengthwise.training.config import TrainConfig
from lengthwise.training.run import run_training

DATA = (
    Path(os.environ.get("LENGTHWISE_DATA", Path(__file__).resolve().parents[3] / "shared" / "data"))
    / "imdb"
    / "test.jsonl.gz"
)


class StepTimer(TrainerCallback):
    """Wall time of every optimizer step (forward, backward, update)."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self._start = 0.0

    def on_step_begin(self, args, state, control, **kwargs):  # type: ignore[no-untyped-def]
        self._start = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):  # type: ignore[no-untyped-def]
        self.times.append(time.perf_counter() - self._start)


def long_texts(path: Path, model_path: str, count: int, min_tokens: int) -> list[str]:
    """The first `count` reviews with at least `min_tokens` tokens, so every sequence fills N."""
    from lengthwise.core._textio import jsonl_objects

    tokenizer = load_plain_model(model_path, device="cpu").tokenizer
    chosen: list[str] = []
    for _, row in jsonl_objects(path):
        if len(tokenizer(row["text"], add_special_tokens=False)["input_ids"]) >= min_tokens:
            chosen.append(row["text"])
            if len(chosen) == count:
                break
    return chosen


def run_method(method: str, data: Path, model: str, args: argparse.Namespace, work: Path, tag: str) -> dict:
    timer = StepTimer()
    config = TrainConfig(
        method=method,  # type: ignore[arg-type]
        data=str(data),
        out=str(work / f"{method}-{tag}"),
        model=model,
        max_steps=args.steps,
        batch_size=args.batch_size,
        max_length=args.max_length,
        save_steps=10_000,
        logging_steps=1,
        device=args.device,
        seed=0,  # HiCL's segment length is its default, 32
    )
    result = run_training(config, callbacks=[timer])
    steady = timer.times[1:]  # the first step pays for lazy initialisation
    return {"step_s": steady, "tokens_per_s": result.tokens_per_second}


def encode_throughput(texts: list[str], model_path: str, args: argparse.Namespace) -> dict:
    model = load_plain_model(model_path, device=args.device)
    set_max_length(model, args.max_length)
    tokens = sum(min(len(ids), args.max_length) for ids in model.tokenizer(texts)["input_ids"])
    times = []
    for _ in range(args.repeats):
        started = time.perf_counter()
        model.encode(texts, batch_size=args.batch_size, convert_to_numpy=True)
        times.append(time.perf_counter() - started)
    return {"seconds": times, "tokens": tokens, "tokens_per_s": tokens / statistics.median(times)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="model directory (default: the packaged all-MiniLM-L6-v2)")
    parser.add_argument("--data", type=Path, default=DATA, help="JSONL with `text` (default: IMDB test)")
    parser.add_argument("--max-length", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--steps", type=int, default=6, help="optimizer steps per run")
    parser.add_argument("--repeats", type=int, default=3, help="alternating runs per method")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", type=Path, default=Path("docs/results/bench_train.json"))
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    from lengthwise.core.models import resolve_model_path

    model = args.model or resolve_model_path("sentence-transformers/all-MiniLM-L6-v2")
    texts = long_texts(args.data, model, args.batch_size * args.steps, args.max_length)
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        data = work / "texts.jsonl"
        data.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
        runs: dict[str, list[dict]] = {"simcse": [], "hicl": []}
        for repeat in range(args.repeats):
            for method in runs:
                runs[method].append(run_method(method, data, model, args, work, str(repeat)))
    encode = encode_throughput(texts, model, args)
    summary = {}
    for method, results in runs.items():
        steps = [t for result in results for t in result["step_s"]]
        summary[method] = {
            "median_step_s": statistics.median(steps),
            "median_tokens_per_s_train": statistics.median(r["tokens_per_s"] for r in results),
            "step_s": steps,
        }
    speedup = summary["simcse"]["median_step_s"] / summary["hicl"]["median_step_s"]
    payload = {
        "what": "HiCL vs SimCSE training step time at N=512 (same documents, same batch), and train vs encode tokens/s",
        "command": command_line("benchmarks.train.train"),
        "settings": {k: str(v) for k, v in vars(args).items()},
        "n_texts": len(texts),
        "methods": summary,
        "hicl_speedup_median_step": speedup,
        "encode": encode,
        "train_over_encode_tokens_per_s": {
            method: summary[method]["median_tokens_per_s_train"] / encode["tokens_per_s"] for method in summary
        },
        "torch_threads": torch.get_num_threads(),
        "environment": environment(),
    }
    write_json_atomic(args.out, payload)
    print(json.dumps({k: payload[k] for k in ("hicl_speedup_median_step", "train_over_encode_tokens_per_s")}, indent=1))
    for method in summary:
        print(method, f"median step {summary[method]['median_step_s']:.2f} s")
    print(f"encode {encode['tokens_per_s']:.0f} tokens/s")


if __name__ == "__main__":
    main()
