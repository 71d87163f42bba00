#!/usr/bin/env python
"""Benchmark: tokens/s of all-MiniLM-L6-v2 on CPU per inference backend, against fp32 PyTorch (issue 16).

Arms (``--arms``, default every one this environment can load):

- ``torch_fp32``: the model as loaded — the baseline every ratio is taken against.
- ``torch_bf16_autocast``: the same weights under ``torch.autocast("cpu", dtype=torch.bfloat16)``.
- ``torch_bf16_weights``: a copy of the model cast with ``.to(torch.bfloat16)`` (pooling/normalisation in bf16 too).
- ``openvino``: ``SentenceTransformer(path, backend="openvino")`` (needs optimum-intel; exported on load).
- ``openvino_int8``: that model quantized by optimum-intel's `OVQuantizer` (static post-training int8, its default
  `OVQuantizationConfig`), calibrated on 300 local STS-B dev sentences padded to 384 tokens — what
  `sentence_transformers.export_static_quantized_openvino_model` does, except that function always downloads its
  calibration set (GLUE SST-2) from the hub, which this machine cannot reach.
- ``onnx``: ``SentenceTransformer(path, backend="onnx")`` (needs optimum-onnx; exported on load).

An arm whose backend cannot be imported is recorded under ``unavailable`` with the reason, not silently dropped.

Inputs are built at the token level, the way the audit builds them: the STS-B test sentences' ``tok(S)`` are
joined into one id stream, cut into windows of exactly L - 2 content tokens and wrapped once in [CLS]/[SEP], so
every sequence has exactly L tokens and no padding; every arm embeds the same ids through
`lengthwise.core.embed.embed_ids` (the path the audit and the long-document encoder use). Runs alternate between
the arms (the order rotates every repeat) after one untimed warm-up each; reported are medians of wall time and
of process CPU time, and throughput ratios against ``torch_fp32`` from the same run (ratio of medians and median
of per-repeat paired ratios). With ``--quality``, each arm's STS-B test Spearman ×100 and its embeddings'
agreement with fp32 (max |Δ|, min cosine) are measured too.

    python -m benchmarks.encode.backends                          # → docs/results/bench_backends.json
    python -m benchmarks.encode.backends --arms torch_fp32 torch_bf16_autocast --repeats 5 --out /tmp/b.json
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DEFAULT_OUT = REPO / "docs" / "results" / "bench_backends.json"
DEFAULT_STSB = REPO.parent / "shared" / "data" / "stsb" / "original" / "sts-test.csv.gz"
DEFAULT_CALIBRATION = DEFAULT_STSB.with_name("sts-dev.csv.gz")
ARMS = ("torch_fp32", "torch_bf16_autocast", "torch_bf16_weights", "openvino", "openvino_int8", "onnx")
CALIBRATION_SAMPLES = 300
BASELINE = "torch_fp32"

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from sentence_transformers import SentenceTransformer  # noqa: E402

from benchmarks._measure import command_line  # noqa: E402
from lengthwise.core.embed import TokenView, embed_ids  # noqa: E402
from lengthwise.core.models import load_plain_model, resolve_model_path  # noqa: E402
from lengthwise.core.results import environment, write_json_atomic  # noqa: E402
from lengthwise.evaluation.data import read_sts  # noqa: E402


@dataclass
class Arm:
    """One way of running the model: the model object and the context its forward passes run in."""

    model: SentenceTransformer
    context: Callable[[], AbstractContextManager[Any]] = nullcontext


def openvino_int8(path: str, ov_config: dict[str, str], calibration: Path, workdir: Path) -> SentenceTransformer:
    """Export `path` to OpenVINO, quantize it to static int8 on local calibration sentences, load the result."""
    from datasets import Dataset
    from optimum.intel import OVConfig, OVQuantizationConfig, OVQuantizer

    fp32 = SentenceTransformer(path, device="cpu", backend="openvino", model_kwargs={"ov_config": ov_config})
    fp32.save(str(workdir))
    texts = list(dict.fromkeys(t for p in read_sts(calibration).pairs for t in (p.text1, p.text2)))
    features = fp32.tokenizer(texts[:CALIBRATION_SAMPLES], padding="max_length", max_length=384, truncation=True)
    config = OVConfig(quantization_config=OVQuantizationConfig(num_samples=CALIBRATION_SAMPLES))
    with tempfile.TemporaryDirectory() as out:
        OVQuantizer.from_pretrained(fp32.transformers_model).quantize(
            Dataset.from_dict(dict(features)), save_directory=out, ov_config=config
        )
        xml = next(Path(out).rglob("openvino_model.xml"))
        for suffix in (".xml", ".bin"):
            shutil.copy(xml.with_suffix(suffix), workdir / "openvino" / f"openvino_model_qint8_quantized{suffix}")
    kwargs = {"ov_config": ov_config, "file_name": "openvino/openvino_model_qint8_quantized.xml"}
    return SentenceTransformer(str(workdir), device="cpu", backend="openvino", model_kwargs=kwargs)


def build_arms(
    names: Sequence[str], path: str, threads: int, calibration: Path, workdir: Path
) -> tuple[dict[str, Arm], dict[str, str]]:
    """Load each requested arm; an arm that cannot be loaded goes to `unavailable` with a one-line reason."""
    arms: dict[str, Arm] = {}
    unavailable: dict[str, str] = {}
    base = load_plain_model(path, device="cpu", max_seq_length=512)
    for name in names:
        try:
            if name == "torch_fp32":
                arms[name] = Arm(base)
            elif name == "torch_bf16_autocast":
                arms[name] = Arm(base, lambda: torch.autocast("cpu", dtype=torch.bfloat16))
            elif name == "torch_bf16_weights":
                arms[name] = Arm(load_plain_model(path, device="cpu", max_seq_length=512).to(torch.bfloat16))
            elif name in {"openvino", "openvino_int8"}:
                ov = {"INFERENCE_NUM_THREADS": str(threads), "INFERENCE_PRECISION_HINT": "f32"}
                if name == "openvino":
                    model = SentenceTransformer(path, device="cpu", backend="openvino", model_kwargs={"ov_config": ov})
                else:
                    model = openvino_int8(path, ov, calibration, workdir)
                model.max_seq_length = 512
                arms[name] = Arm(model)
            elif name == "onnx":
                model = SentenceTransformer(path, device="cpu", backend="onnx")
                model.max_seq_length = 512
                arms[name] = Arm(model)
            else:
                raise ValueError(f"unknown arm {name!r}; choose from {', '.join(ARMS)}")
        except Exception as err:  # recorded, not raised: a missing extra must not hide the other arms
            first = (str(err).strip().splitlines() or [type(err).__name__])[0]
            unavailable[name] = f"{type(err).__name__}: {first}"[:300]
    return arms, unavailable


def windows_of_length(view: TokenView, texts: Sequence[str], length: int, count: int) -> list[list[int]]:
    """`count` sequences of exactly `length` tokens: consecutive windows of the texts' joined ``tok(S)``, wrapped."""
    stream = [token for ids in view.content(texts) for token in ids]
    width = length - view.specials.count
    if len(stream) < width * count:
        raise ValueError(f"the texts give {len(stream)} tokens; {width * count} are needed at L={length}")
    return [view.wrap(stream[i * width : (i + 1) * width]) for i in range(count)]


def time_lengths(
    arms: dict[str, Arm], texts: Sequence[str], length: int, count: int, batch_size: int, repeats: int
) -> dict[str, Any]:
    """Alternating timed runs of every arm on the same `count` × `length` token ids."""
    sequences = windows_of_length(TokenView(arms[BASELINE].model), texts, length, count)
    assert all(len(ids) == length for ids in sequences)
    names = list(arms)
    outputs: dict[str, np.ndarray] = {}
    for name in names:  # warm-up (also compiles/initialises the backend), and each arm's embeddings
        with arms[name].context():
            outputs[name] = embed_ids(arms[name].model, sequences, batch_size=batch_size)
    wall: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    for repeat in range(repeats):
        for name in names[repeat % len(names) :] + names[: repeat % len(names)]:
            with arms[name].context():
                start, start_cpu = time.perf_counter(), time.process_time()
                embed_ids(arms[name].model, sequences, batch_size=batch_size)
                wall[name].append(time.perf_counter() - start)
                cpu[name].append(time.process_time() - start_cpu)
    rows: dict[str, Any] = {}
    for name in names:
        median = statistics.median(wall[name])
        rows[name] = {
            "median_wall_s": round(median, 4),
            "tokens_per_s": round(count * length / median, 1),
            "speedup_wall": _ratios(wall[BASELINE], wall[name]),
            "speedup_cpu": _ratios(cpu[BASELINE], cpu[name]),
            "max_abs_diff_vs_fp32": float(np.abs(outputs[name] - outputs[BASELINE]).max()),
            "wall_s": [round(x, 4) for x in wall[name]],
            "cpu_s": [round(x, 4) for x in cpu[name]],
        }
    return {"length": length, "sequences": count, "batch_size": batch_size, "repeats": repeats, "arms": rows}


def _ratios(baseline: list[float], arm: list[float]) -> dict[str, float]:
    """Throughput of `arm` over the baseline's (> 1: faster): ratio of medians and median of paired ratios."""
    return {
        "of_medians": round(statistics.median(baseline) / statistics.median(arm), 4),
        "paired_median": round(statistics.median(b / a for b, a in zip(baseline, arm, strict=True)), 4),
    }


def quality(arms: dict[str, Arm], stsb: Path, batch_size: int) -> dict[str, Any]:
    """STS-B test Spearman ×100 per arm, and its embeddings' agreement with fp32 on the same texts."""
    from lengthwise.core.scoring import paired_cosine
    from lengthwise.evaluation.sts import correlations

    pairs = read_sts(stsb)
    unique = list(dict.fromkeys(text for pair in pairs.pairs for text in (pair.text1, pair.text2)))
    position = {text: i for i, text in enumerate(unique)}
    gold = np.asarray([pair.score for pair in pairs.pairs], dtype=np.float64)
    embeddings: dict[str, np.ndarray] = {}
    rows: dict[str, Any] = {}
    for name, arm in arms.items():
        view = TokenView(arm.model)
        sequences = [view.wrap(ids) for ids in view.content(unique)]
        start = time.perf_counter()
        with arm.context():
            embeddings[name] = embed_ids(arm.model, sequences, batch_size=batch_size)  # (U, D)
        seconds = time.perf_counter() - start
        first = embeddings[name][[position[p.text1] for p in pairs.pairs]]
        second = embeddings[name][[position[p.text2] for p in pairs.pairs]]
        rows[name] = {"stsb_test": correlations(paired_cosine(first, second), gold), "encode_s": round(seconds, 2)}
    for name in arms:
        ref, got = embeddings[BASELINE], embeddings[name]
        cosine = (ref * got).sum(1) / (np.linalg.norm(ref, axis=1) * np.linalg.norm(got, axis=1))
        rows[name]["max_abs_diff_vs_fp32"] = float(np.abs(got - ref).max())
        rows[name]["min_cosine_vs_fp32"] = float(cosine.min())
        rows[name]["spearman_delta_vs_fp32"] = round(
            rows[name]["stsb_test"]["spearman"] - rows[BASELINE]["stsb_test"]["spearman"], 4
        )
    return {"data": str(stsb), "n_pairs": len(pairs), "texts": len(unique), "arms": rows}


def machine(threads: int) -> dict[str, Any]:
    """The CPU, its vector extensions that matter for bf16/int8, the thread setting and the load."""
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    lines = info.splitlines()
    name = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), "unknown")
    flags = next((line.split(":", 1)[1].split() for line in lines if line.startswith("flags")), [])
    wanted = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_int8", "avx_vnni")
    return {
        "cpu": name,
        "cores": os.cpu_count(),
        "cpu_flags": {flag: flag in flags for flag in wanted},
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "threads": threads,
        "load_average_start": os.getloadavg(),
    }


def backend_versions() -> dict[str, str | None]:
    """Installed versions of the packages the non-torch arms depend on (None: not installed)."""
    versions: dict[str, str | None] = {}
    for package in ("transformers", "optimum", "optimum-onnx", "onnxruntime", "optimum-intel", "openvino", "nncf"):
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = None
    return versions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="sentence-transformers/all-MiniLM-L6-v2")
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=ARMS)
    parser.add_argument("--lengths", nargs="+", type=int, default=[128, 256, 512])
    parser.add_argument("--tokens-per-run", type=int, default=4096, help="sequences per run = this / L")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1, help="torch / backend threads (1 is steadier when shared)")
    parser.add_argument("--quality", action="store_true", help="also STS-B test Spearman and agreement per arm")
    parser.add_argument("--stsb", type=Path, default=DEFAULT_STSB)
    parser.add_argument("--calibration", type=Path, default=DEFAULT_CALIBRATION, help="int8 calibration pairs")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    if BASELINE not in args.arms:
        parser.error(f"--arms must include the baseline {BASELINE}")
    torch.set_num_threads(args.threads)
    started = machine(args.threads)
    path = resolve_model_path(args.model)
    workdir = Path(tempfile.mkdtemp(prefix="bench_backends_"))
    arms, unavailable = build_arms(args.arms, path, args.threads, args.calibration, workdir)
    texts = list(dict.fromkeys(t for p in read_sts(args.stsb).pairs for t in (p.text1, p.text2)))
    results = [
        time_lengths(arms, texts, length, max(1, args.tokens_per_run // length), args.batch_size, args.repeats)
        for length in args.lengths
    ]
    payload: dict[str, Any] = {
        "benchmark": "CPU inference backends: tokens/s against fp32 PyTorch",
        "model": args.model,
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": started | {"load_average_end": os.getloadavg()},
        "unavailable": unavailable,
        "results": results,
        "quality": quality(arms, args.stsb, args.batch_size) if args.quality else None,
        "environment": environment(),
        "backend_versions": backend_versions(),
        "command": command_line("benchmarks.encode.backends"),
    }
    write_json_atomic(args.out, payload)
    shutil.rmtree(workdir, ignore_errors=True)
    print(f"wrote {args.out}; load average {started['load_average_start']} → {os.getloadavg()}")
    for name, reason in unavailable.items():
        print(f"unavailable: {name}: {reason}")
    print("| L | arm | tokens/s | speed-up wall (medians / paired) | speed-up CPU (medians) | max |Δ| vs fp32 |")
    for result in results:
        for name, row in result["arms"].items():
            w, c = row["speedup_wall"], row["speedup_cpu"]
            print(
                f"| {result['length']} | {name} | {row['tokens_per_s']:.0f} | {w['of_medians']:.2f} / "
                f"{w['paired_median']:.2f} | {c['of_medians']:.2f} | {row['max_abs_diff_vs_fp32']:.1e} |"
            )
    if payload["quality"]:
        for name, row in payload["quality"]["arms"].items():
            spearman, delta = row["stsb_test"]["spearman"], row["spearman_delta_vs_fp32"]
            print(f"STS-B test {name}: Spearman {spearman:.2f} (Δ {delta:+.2f} vs fp32)")


if __name__ == "__main__":
    main()
