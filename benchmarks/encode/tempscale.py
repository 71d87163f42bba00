#!/usr/bin/env python
"""Benchmark: `SentenceTransformer.encode` throughput with TempScale on vs off (all-MiniLM-L6-v2, CPU).

Arms, all at t = 0.8 except the baseline:

- ``unpatched``: the model as loaded (SDPA attention).
- ``tempscale``: `lengthwise.tempscale` with a scalar t — the modules' ``scaling`` attribute changes, SDPA stays.
- ``tempscale_schedule``: a length schedule — the per-sequence path (a hook dividing the query projection's
  output per sequence; the path MPNet and ModernBERT always take), SDPA stays.
- ``reference_eager``: what the paper's code does — every attention computed by an eager matmul + softmax
  copy with the logits divided by t (registered through `AttentionInterface`, with its mask function).

Every text is cut to exactly L tokens (L = 128 and 512, max_seq_length 512), so there is no padding. Runs
alternate between the arms (the order rotates every repeat) after one untimed warm-up each. The ratio is
throughput(arm) / throughput(unpatched), all from one process, by three estimators on wall time — ratio of
medians, median of per-repeat paired ratios, ratio of minimums — and on process CPU time, which other
jobs on a shared CPU disturb far less than wall time. Target: tempscale ratio ≥ 0.98.

    python -m benchmarks.encode.tempscale                       # → docs/results/bench_tempscale.json
    python -m benchmarks.encode.tempscale --repeats 5 --out /tmp/bench.json
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, contextmanager, nullcontext
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DEFAULT_OUT = REPO / "docs" / "results" / "bench_tempscale.json"
TARGET_RATIO = 0.98
T = 0.8
REFERENCE = "lengthwise_reference_eager"

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from sentence_transformers import SentenceTransformer  # noqa: E402
from transformers import AttentionInterface  # noqa: E402
from transformers.masking_utils import AttentionMaskInterface, eager_mask  # noqa: E402

from benchmarks._measure import command_line  # noqa: E402
from lengthwise.core.data import default_probe_pairs  # noqa: E402
from lengthwise.core.models import load_plain_model  # noqa: E402
from lengthwise.core.results import environment, write_json_atomic  # noqa: E402
from lengthwise.tempscale import LengthSchedule, TempScaleConfig, detect_family, tempscale  # noqa: E402


def reference_eager_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The paper's approach: eager attention, logits divided by the module's temperature. (B, H, T, d) in."""
    scale = query.size(-1) ** -0.5 if scaling is None else scaling
    logits = torch.matmul(query, key.transpose(2, 3)) * scale / module.reference_temperature  # (B, H, T, T)
    if attention_mask is not None:
        logits = logits + attention_mask
    probs = torch.softmax(logits, dim=-1, dtype=torch.float32).to(query.dtype)
    probs = torch.nn.functional.dropout(probs, p=dropout, training=module.training)
    return torch.matmul(probs, value).transpose(1, 2).contiguous(), probs  # (B, T, H, d)


AttentionInterface.register(REFERENCE, reference_eager_attention)
AttentionMaskInterface.register(REFERENCE, eager_mask)  # without it the padding mask would silently be None


@contextmanager
def reference_patch(model: SentenceTransformer, t: float):
    """Switch the model to the reference eager function with temperature t; restore SDPA afterwards."""
    _, hf_model, attentions = detect_family(model)
    previous = hf_model.config._attn_implementation
    for attention in attentions:
        attention.reference_temperature = t
    hf_model.set_attn_implementation(REFERENCE)
    try:
        yield
    finally:
        hf_model.set_attn_implementation(previous)
        for attention in attentions:
            del attention.reference_temperature


def texts_of_length(model: SentenceTransformer, length: int, count: int) -> list[str]:
    """`count` texts of at least `length` tokens (so encode cuts each to exactly `length`), from the probe set."""
    pool = sorted({p.text1 for p in default_probe_pairs().pairs} | {p.text2 for p in default_probe_pairs().pairs})
    rng = np.random.default_rng(0)
    texts = []
    for _ in range(count):
        parts: list[str] = []
        while len(model.tokenizer(" ".join(parts), verbose=False)["input_ids"]) < length + 8:
            parts.append(pool[int(rng.integers(len(pool)))])
        texts.append(" ".join(parts))
    return texts


def arms(model: SentenceTransformer) -> dict[str, Callable[[], AbstractContextManager[Any]]]:
    schedule = TempScaleConfig(t=T, schedule=LengthSchedule((64.0, 512.0), (1.0, 0.9)))
    return {
        "unpatched": nullcontext,
        "tempscale": lambda: tempscale(model, TempScaleConfig(t=T)),
        "tempscale_schedule": lambda: tempscale(model, schedule),
        "reference_eager": lambda: reference_patch(model, T),
    }


def run(model: SentenceTransformer, length: int, count: int, batch_size: int, repeats: int) -> dict[str, Any]:
    model.max_seq_length = length
    texts = texts_of_length(model, length, count)
    tokens = model.preprocess(texts)["attention_mask"].sum(-1)
    assert int(tokens.min()) == int(tokens.max()) == length, "every text must fill the window exactly"
    contexts = arms(model)
    names = list(contexts)
    outputs = {}
    for name in names:  # warm-up, and the embeddings every arm produces
        with contexts[name]():
            outputs[name] = model.encode(texts, batch_size=batch_size, convert_to_numpy=True)
    wall: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    for repeat in range(repeats):
        for name in names[repeat % len(names) :] + names[: repeat % len(names)]:
            with contexts[name]():
                start, start_cpu = time.perf_counter(), time.process_time()
                model.encode(texts, batch_size=batch_size, convert_to_numpy=True)
                wall[name].append(time.perf_counter() - start)
                cpu[name].append(time.process_time() - start_cpu)
    rows = {}
    for name in names:
        median = statistics.median(wall[name])
        rows[name] = {
            "median_wall_s": round(median, 4),
            "texts_per_s": round(count / median, 2),
            "tokens_per_s": round(count * length / median, 1),
            "ratio_wall": _ratios(wall["unpatched"], wall[name]),
            "ratio_cpu": _ratios(cpu["unpatched"], cpu[name]),
            "wall_s": [round(x, 4) for x in wall[name]],
            "cpu_s": [round(x, 4) for x in cpu[name]],
        }
    agreement = float(np.abs(outputs["tempscale"] - outputs["reference_eager"]).max())
    return {"length": length, "texts": count, "batch_size": batch_size, "repeats": repeats, "arms": rows} | {
        "max_abs_diff_tempscale_vs_reference": agreement
    }


def _ratios(baseline: list[float], arm: list[float]) -> dict[str, float]:
    """Throughput of `arm` relative to `baseline` (> 1: faster) by three estimators of the same runs:
    ratio of medians, median of per-repeat paired ratios (robust to load drifting between repeats), and
    ratio of minimums (the least-disturbed run of each)."""
    return {
        "of_medians": round(statistics.median(baseline) / statistics.median(arm), 4),
        "paired_median": round(statistics.median(b / a for b, a in zip(baseline, arm, strict=True)), 4),
        "of_minimums": round(min(baseline) / min(arm), 4),
    }


def machine() -> dict[str, Any]:
    model_name = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if "model name" in line
        ),
        platform.processor(),
    )
    return {
        "cpu": model_name,
        "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "load_average": os.getloadavg(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--texts-128", type=int, default=16, help="texts per run at 128 tokens")
    parser.add_argument("--texts-512", type=int, default=4, help="texts per run at 512 tokens")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1 is steadier on a shared CPU)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = load_plain_model(device="cpu", max_seq_length=512)
    started = machine()
    results = [
        run(model, 128, args.texts_128, args.batch_size, args.repeats),
        run(model, 512, args.texts_512, args.batch_size, args.repeats),
    ]
    payload = {
        "benchmark": "tempscale encode throughput",
        "model": "sentence-transformers/all-MiniLM-L6-v2",
        "t": T,
        "target_ratio": TARGET_RATIO,
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": started | {"load_average_end": os.getloadavg()},
        "results": results,
        "environment": environment(),
        "command": command_line("benchmarks.encode.tempscale"),
    }
    write_json_atomic(args.out, payload)
    print(f"wrote {args.out}")
    print("| L | arm | median wall s | texts/s | wall: of medians / paired / of minimums | CPU: of medians / paired |")
    for result in results:
        for name, row in result["arms"].items():
            w, c = row["ratio_wall"], row["ratio_cpu"]
            print(
                f"| {result['length']} | {name} | {row['median_wall_s']:.3f} | {row['texts_per_s']:.1f} | "
                f"{w['of_medians']:.3f} / {w['paired_median']:.3f} / {w['of_minimums']:.3f} | "
                f"{c['of_medians']:.3f} / {c['paired_median']:.3f} |"
            )
        print(
            f"max |tempscale − reference| at L={result['length']}: {result['max_abs_diff_tempscale_vs_reference']:.2e}"
        )


if __name__ == "__main__":
    main()
