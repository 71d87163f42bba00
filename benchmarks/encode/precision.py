#!/usr/bin/env python
"""Benchmark: int8 (`lengthwise.core.quantize`, issue 26) and bf16/fp16 (`lengthwise.core.precision`, issue 48)
against fp32 for all-MiniLM-L6-v2 on the CPU.

Stages (each writes its own section of the JSON, so a stage can be re-run alone; sections already written are kept):

- ``layers``: which Linear layers to keep fp32. For each candidate set of `keep_fp32` patterns: STS-B test
  Spearman ×100, mean/min cosine of int8 to fp32 embeddings over the STS-B test sentences, and the int8/fp32
  speed ratio at 128 tokens, one thread. The default is chosen from this table.
- ``speed``: tokens/s of fp32 and of the default int8 at 128, 256 and 512 tokens, at one thread and at two; runs
  alternate between the arms after an untimed warm-up; medians of `--repeats` and the ratio of medians.
- ``quality``: STS-B test Spearman and the STS12–16 average (×100) per precision.
- ``scifact``: SciFact test nDCG@10 (full corpus) per precision, with a paired per-query interval int8 − fp32.
- ``robustness_scifact``: the first64x8 attack (first 64 tokens vs 8 copies, N = 512) on SciFact same-topic pairs
  per precision, with the same paired bootstrap.
- ``onnx``: ONNX Runtime's `quantize_dynamic` (per-channel int8) on a `torch.onnx.export` of the model, no optimum:
  STS-B test Spearman and tokens/s against torch fp32 and torch int8 (needs `pip install onnxruntime onnx`; a
  measurement only, lengthwise does not ship it).
- ``profile``: torch.profiler's self CPU time by operator as a share of one forward pass (fp32, the default int8,
  every Linear int8; 16 × 128 and 16 × 512 tokens, one thread): what stays fp32 and bounds the int8 speed-up.
- ``robustness``: the STS-B test attack at m = 100 per precision (mean shift, share risen, JSD with its
  permutation null), and a paired bootstrap (`lengthwise.core.stats.paired_bootstrap`: paired,
  percentile, 2,000 resamples, seed 0) of the per-pair shift difference int8 − fp32.

- ``half_speed``: windows/s of fp32, bf16 and fp16 as lengthwise casts them (`load_plain_model(precision=)`), and of
  bf16 by `torch.autocast` around an fp32 model, at 32 and 128 tokens, one thread, arms alternated; with this CPU's
  native half support (`cpu_half_support`), which decides what `resolve_precision` allows and `auto` picks.
- ``half_quality``: mean/min cosine of bf16 and fp16 vectors to fp32 over the STS-B test sentences, and STS-B test
  Spearman ×100 per precision.
- ``half_scifact``: SciFact test nDCG@10 (full corpus) for fp32, bf16 and fp16, and the paired per-query interval of
  each half precision − fp32.
- ``query_precision``: an fp32 SciFact index (``LENGTHWISE_QUERY_INDEX``; default search/hybrid/'s quality-stage
  index) searched with its queries embedded at each precision (`LongIndex.set_query_precision`, what ``search`` and
  ``serve --precision`` do): cosine to the fp32 query vectors, test nDCG@10 dense and hybrid with the paired interval
  against fp32 queries, the share of fp32's top 10 kept, and ms per query embedded in batches of 1 and 11.

Half precisions this CPU has no native instructions for are left out (they are refused there).

Inputs for speed are built at the token level: the STS-B test sentences' tokens joined and cut into sequences of
exactly L tokens, embedded through `lengthwise.core.embed.embed_ids`. The load average is recorded per stage.

    python -m benchmarks.encode.precision layers speed quality robustness   # → docs/results/bench_precision.json
    python -m benchmarks.encode.precision half_speed half_quality half_scifact
    python -m benchmarks.encode.precision query_precision --repeats 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from lengthwise.core.results import write_json_atomic

REPO = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("LENGTHWISE_DATA", REPO.parent / "shared" / "data"))
DEFAULT_OUT = REPO / "docs" / "results" / "bench_precision.json"
STSB = DATA / "stsb" / "original" / "sts-test.csv.gz"
STS12_16 = DATA / "sts12-16" / "senteval_tokenized"
# query_precision: an fp32 index of SciFact with its text (`lengthwise encode` + `lengthwise index build`, the
# defaults; search/hybrid/'s quality stage builds one), and the BEIR folder its queries and qrels come from
QUERY_INDEX = Path(os.environ.get("LENGTHWISE_QUERY_INDEX", "/tmp/lengthwise-bench-hybrid/scifact/index"))
QUERY_DATA = DATA / "scifact"

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from benchmarks._measure import timed  # noqa: E402
from lengthwise.core.defaults import DEFAULT_MODEL  # noqa: E402
from lengthwise.core.models import load_plain_model  # noqa: E402
from lengthwise.core.quantize import quantized_engine  # noqa: E402

CANDIDATES: dict[str, tuple[str, ...]] = {
    "all Linear int8": (),
    "keep last layer": ("encoder.layer.5.*",),
    "keep attention output": ("*.attention.output.dense",),
    "keep FFN output": ("*.output.dense",),  # matches attention.output.dense too: both output projections
    "keep FFN output only": ("encoder.layer.*[0-9].output.dense",),
    "keep FFN in+out": ("*.intermediate.dense", "encoder.layer.*[0-9].output.dense"),
    "keep first+last layer": ("encoder.layer.0.*", "encoder.layer.5.*"),
}


def _load(
    precision: str, keep: Sequence[str] | None = None, max_length: int | None = None, engine: str | None = None
) -> Any:
    """`engine` overrides lengthwise's choice of quantized engine (to measure torch's default `x86` beside it)."""
    if precision in ("bf16", "fp16"):
        return load_plain_model(DEFAULT_MODEL, device="cpu", max_seq_length=max_length, precision=precision)
    model = load_plain_model(DEFAULT_MODEL, device="cpu", max_seq_length=max_length)
    if precision == "int8":
        from lengthwise.core.quantize import DEFAULT_KEEP_FP32, quantize_int8

        quantize_int8(model, DEFAULT_KEEP_FP32 if keep is None else keep, engine=engine)
    return model


def _sequences(model: Any, length: int, count: int) -> list[list[int]]:
    from lengthwise.core.embed import TokenView
    from lengthwise.evaluation.data import read_sts

    view = TokenView(model)
    pairs = read_sts(STSB)
    stream = [t for ids in view.content([p.text1 for p in pairs.pairs]) for t in ids]
    body = length - view.specials.count
    return [view.wrap(stream[i * body : (i + 1) * body]) for i in range(count)]


def _timed(run: Callable[[], Any]) -> float:
    return timed(run)[0]


def _spearman(model: Any) -> float:
    from lengthwise.core.encoder import as_encoder
    from lengthwise.evaluation.data import read_sts
    from lengthwise.evaluation.sts import evaluate_sts

    return float(evaluate_sts(as_encoder(model), read_sts(STSB), batch_size=64).scores["spearman"])


def stage_layers(repeats: int) -> dict[str, Any]:
    from lengthwise.core.embed import embed_ids
    from lengthwise.evaluation.data import read_sts

    torch.set_num_threads(1)
    fp32 = _load("fp32")
    texts = sorted({t for p in read_sts(STSB).pairs for t in (p.text1, p.text2)})
    reference = fp32.encode(texts, batch_size=64, normalize_embeddings=True)
    sequences = _sequences(fp32, 128, 64)
    rows = {"fp32": {"spearman": _spearman(fp32)}}
    for name, keep in CANDIDATES.items():
        model = _load("int8", keep)
        got = model.encode(texts, batch_size=64, normalize_embeddings=True)
        cosines = (got * reference).sum(axis=1)
        ratios = []
        for _ in range(repeats):
            base = _timed(lambda: embed_ids(fp32, sequences, batch_size=32))
            mine = _timed(lambda model=model: embed_ids(model, sequences, batch_size=32))
            ratios.append(base / mine)
        rows[name] = {
            "keep_fp32": list(keep),
            "spearman": _spearman(model),
            "cosine_mean": float(cosines.mean()),
            "cosine_min": float(cosines.min()),
            "speedup_128_1thread": statistics.median(ratios),
        }
        print(name, rows[name], flush=True)
    return {"rows": rows, "threads": 1, "repeats": repeats}


def _alternated(arms: dict[str, Any], sequences: list[list[int]], repeats: int) -> dict[str, float]:
    """Median seconds of each arm embedding `sequences` (batch 16) after one warm-up each, the arms alternating in
    order and reverse order, so drift in the machine's speed falls on every arm alike."""
    from lengthwise.core.embed import embed_ids

    times: dict[str, list[float]] = {arm: [] for arm in arms}
    for model in arms.values():
        embed_ids(model, sequences[:8], batch_size=16)  # warm-up
    for repeat in range(repeats):
        for arm in list(arms) if repeat % 2 == 0 else list(arms)[::-1]:
            times[arm].append(_timed(lambda arm=arm: embed_ids(arms[arm], sequences, batch_size=16)))
    return {arm: statistics.median(values) for arm, values in times.items()}


def stage_speed(repeats: int) -> dict[str, Any]:

    arms = {  # 512 = the model's positions
        "fp32": _load("fp32", max_length=512),
        "int8": _load("int8", max_length=512),
        "int8, x86 engine": _load("int8", max_length=512, engine="x86"),
        "int8, every Linear": _load("int8", (), max_length=512),
    }
    table = []
    for threads in (1, 2):
        torch.set_num_threads(threads)
        for length in (128, 256, 512):
            sequences = _sequences(arms["fp32"], length, 8192 // length * 4)
            tokens = sum(len(s) for s in sequences)
            medians = _alternated(arms, sequences, repeats)
            row = {
                "threads": threads,
                "tokens": length,
                "sequences": len(sequences),
                "tokens_per_s": {arm: tokens / medians[arm] for arm in arms},
                "speedup": medians["fp32"] / medians["int8"],
                "speedup_by_arm": {arm: medians["fp32"] / medians[arm] for arm in arms},
            }
            print(row, flush=True)
            table.append(row)
    return {"rows": table, "repeats": repeats, "engine": quantized_engine()}


def _per_tensor(model: Any) -> Any:
    """`model` (int8 by `quantize_int8`) with each `RowScaledLinear` swapped back for its inner dynamic Linear and
    bias: torch's own per-batch activation quantization, the int8 before issue 33.4b (a text's vector then depends
    on its batch-mates), kept only to measure what the row scaling costs."""
    from lengthwise.core.quantize import RowScaledLinear

    network = model[0].auto_model
    for name, module in list(network.named_modules()):
        if isinstance(module, RowScaledLinear):
            module.inner.set_weight_bias(module.inner.weight(), module.bias)
            parent_name, _, child = name.rpartition(".")
            setattr(network.get_submodule(parent_name) if parent_name else network, child, module.inner)
    return model


def stage_row_scaling(repeats: int) -> dict[str, Any]:
    """What the per-row activation scaling (issue 33.4b) costs: the shipped int8 against torch's per-batch int8,
    for the default layer set and for every Linear, one thread, 128 and 512 tokens, arms alternated."""

    torch.set_num_threads(1)
    arms = {
        "fp32": _load("fp32", max_length=512),
        "int8": _load("int8", max_length=512),
        "int8, per batch": _per_tensor(_load("int8", max_length=512)),
        "int8, every Linear": _load("int8", (), max_length=512),
        "int8, every Linear, per batch": _per_tensor(_load("int8", (), max_length=512)),
    }
    table = []
    for length in (128, 512):
        sequences = _sequences(arms["fp32"], length, 8192 // length * 2)
        tokens = sum(len(s) for s in sequences)
        medians = _alternated(arms, sequences, repeats)
        row = {
            "threads": 1,
            "tokens": length,
            "sequences": len(sequences),
            "tokens_per_s": {arm: tokens / medians[arm] for arm in arms},
            "speedup_by_arm": {arm: medians["fp32"] / medians[arm] for arm in arms},
        }
        print(row, flush=True)
        table.append(row)
    return {"rows": table, "repeats": repeats, "engine": quantized_engine()}


def stage_quality(_: int) -> dict[str, Any]:
    from lengthwise.core.encoder import as_encoder
    from lengthwise.evaluation.data import read_sts
    from lengthwise.evaluation.sts import evaluate_sts

    torch.set_num_threads(2)
    rows = {}
    for precision in ("fp32", "int8"):
        encoder = as_encoder(_load(precision))
        scores = {"stsb": float(evaluate_sts(encoder, read_sts(STSB), batch_size=64).scores["spearman"])}
        for folder in sorted(STS12_16.glob("STS1[2-6]-en-test")):
            scores[folder.name] = float(evaluate_sts(encoder, read_sts(folder), batch_size=64).scores["spearman"])
        scores["sts12_16_avg"] = statistics.mean(v for k, v in scores.items() if k.startswith("STS1"))
        rows[precision] = scores
        print(precision, scores, flush=True)
    return {"rows": rows}


def _attack_per_precision(pairs: Any, config: Any, max_length: int | None = None) -> dict[str, Any]:
    """The attack per precision (mean shift, share risen, JSD with its null, quartile shifts) and a paired
    bootstrap of the per-pair shift difference int8 − fp32."""
    from lengthwise.audit.pairs.attack import run_audit
    from lengthwise.core.stats import paired_bootstrap

    torch.set_num_threads(2)
    rows, shifts = {}, {}
    for precision in ("fp32", "int8"):
        result = run_audit(_load(precision, max_length=max_length), pairs, config)
        attack = result.attack
        before = np.array(result.similarities["before"])
        after = np.array(result.similarities["after"])
        shifts[precision] = after - before
        low = before <= np.quantile(before, 0.25)
        high = before >= np.quantile(before, 0.75)
        rows[precision] = {
            "mean_shift": attack["mean_shift"],
            "frac_increased": attack["frac_increased"],
            "js_distance": attack["js_distance"],
            "js_null": attack.get("js_null"),
            "low_quartile_shift": float(shifts[precision][low].mean()),
            "high_quartile_shift": float(shifts[precision][high].mean()),
        }
        print(precision, rows[precision], flush=True)
    estimate, low, high = paired_bootstrap((shifts["fp32"], shifts["int8"]))  # mean(int8 − fp32), 2,000, seed 0
    rows["int8_minus_fp32_mean_shift"] = {"estimate": estimate, "ci95": [low, high]}
    return rows


def stage_robustness(_: int) -> dict[str, Any]:
    from lengthwise.audit.config import AuditConfig
    from lengthwise.core.tokens import Elongation
    from lengthwise.evaluation.data import read_sts

    pairs = read_sts(STSB)
    config = AuditConfig(elongation=Elongation.parse("100"), curve_ks=(), word_shuffle=False, null_permutations=1000)
    return {"rows": _attack_per_precision(pairs, config), "pairs": len(pairs), "m": 100}


def stage_robustness_scifact(_: int) -> dict[str, Any]:
    """The first64x8 attack (first 64 tokens vs 8 copies at N = 512) on SciFact same-topic pairs, per precision."""
    from dataclasses import replace

    from lengthwise.audit.config import AuditConfig
    from lengthwise.core.data import read_pairs
    from lengthwise.core.tokens import Elongation

    drawn = read_pairs(DATA / "scifact", max_pairs=100_000, seed=0)
    pairs = replace(drawn, pairs=tuple(p for p in drawn.pairs if p.kind == "same_topic"))
    config = AuditConfig(elongation=Elongation.parse("8"), first_k=64, curve_ks=(), word_shuffle=False,
                         null_permutations=1000)  # fmt: skip
    return {"rows": _attack_per_precision(pairs, config, max_length=512), "pairs": len(pairs), "m": 8, "first_k": 64}


def stage_scifact(_: int) -> dict[str, Any]:
    """SciFact test nDCG@10 (full corpus, 5,183 abstracts) per precision, and the paired per-query interval."""
    from lengthwise.core.encoder import as_encoder
    from lengthwise.core.stats import paired_bootstrap
    from lengthwise.evaluation.data import read_beir
    from lengthwise.evaluation.retrieval import evaluate_retrieval

    torch.set_num_threads(2)
    data = read_beir(DATA / "scifact", "test")
    rows, per_query = {}, {}
    for precision in ("fp32", "int8"):
        started = time.perf_counter()
        result = evaluate_retrieval(as_encoder(_load(precision)), data, batch_size=32)
        rows[precision] = {"ndcg@10": float(result.scores["ndcg@10"]), "seconds": round(time.perf_counter() - started)}
        per_query[precision] = {q: 100 * v["ndcg@10"] for q, v in result.per_query.items()}
        print(precision, rows[precision], flush=True)
    queries = sorted(per_query["fp32"])
    point, low, high = paired_bootstrap([[per_query[p][q] for q in queries] for p in ("fp32", "int8")], seed=0)
    return {"rows": rows, "int8_minus_fp32": {"diff": point, "low": low, "high": high}, "queries": len(queries)}


class _OrtEncoder:
    """all-MiniLM-L6-v2 exported with `torch.onnx.export` and run by ONNX Runtime: mean pooling and L2 norm as the
    sentence-transformers model does (`TextEncoder` for `evaluate_sts`)."""

    def __init__(self, path: Path, tokenizer: Any, threads: int) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.tokenizer = tokenizer

    def run_ids(self, sequences: Sequence[Sequence[int]], batch_size: int = 16) -> np.ndarray:
        out = []
        for start in range(0, len(sequences), batch_size):
            batch = sequences[start : start + batch_size]
            width = max(len(s) for s in batch)
            ids = np.zeros((len(batch), width), dtype=np.int64)
            mask = np.zeros_like(ids)
            for row, seq in enumerate(batch):
                ids[row, : len(seq)], mask[row, : len(seq)] = seq, 1
            (states,) = self.session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": 0 * ids})
            pooled = (states * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
            out.append(pooled / np.linalg.norm(pooled, axis=1, keepdims=True))
        return np.concatenate(out)

    def encode(self, texts: Sequence[str], *, batch_size: int = 64, show_progress: bool = False) -> np.ndarray:
        ids = self.tokenizer(list(texts), truncation=True, max_length=256)["input_ids"]
        return self.run_ids(ids, batch_size)

    encode_queries = encode_documents = encode


def _onnx_models(folder: Path) -> dict[str, Path]:
    """fp32 export, ORT dynamic int8 (per-channel) of every MatMul, and of every MatMul but the output projections."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    model = _load("fp32", max_length=512)
    bert = model[0].auto_model.eval()
    folder.mkdir(parents=True, exist_ok=True)
    fp32 = folder / "minilm-fp32.onnx"
    example = {k: torch.ones((2, 16), dtype=torch.long) for k in ("input_ids", "attention_mask", "token_type_ids")}
    axes = {name: {0: "batch", 1: "tokens"} for name in [*example, "last_hidden_state"]}

    class Hidden(torch.nn.Module):  # positional inputs, one output: what the exporter traces cleanly
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.bert(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)[0]

    torch.onnx.export(
        Hidden().eval(), tuple(example.values()), str(fp32), input_names=list(example),
        output_names=["last_hidden_state"], dynamic_axes=axes, opset_version=17, dynamo=False,
    )  # fmt: skip
    import onnx

    graph = onnx.load(str(fp32)).graph
    outputs = [n.name for n in graph.node if n.op_type == "MatMul" and "output/dense" in n.name]
    paths = {"onnx fp32": fp32, "onnx int8 (all MatMul)": folder / "minilm-int8.onnx",
             "onnx int8 (output projections fp32)": folder / "minilm-int8-keep.onnx"}  # fmt: skip
    quantize_dynamic(str(fp32), str(paths["onnx int8 (all MatMul)"]), weight_type=QuantType.QInt8, per_channel=True)
    quantize_dynamic(str(fp32), str(paths["onnx int8 (output projections fp32)"]), weight_type=QuantType.QInt8,
                     per_channel=True, nodes_to_exclude=outputs)  # fmt: skip
    return paths


def stage_onnx(repeats: int) -> dict[str, Any]:
    """ONNX Runtime's own dynamic int8 on a `torch.onnx.export` (no optimum) against torch fp32 / int8: speed at
    128/256/512 tokens and 1/2 threads (alternating, medians), STS-B test Spearman."""
    import tempfile

    from lengthwise.core.embed import embed_ids
    from lengthwise.evaluation.data import read_sts
    from lengthwise.evaluation.sts import evaluate_sts

    paths = _onnx_models(Path(tempfile.mkdtemp(prefix="lengthwise-onnx-")))
    torch_arms = {"torch fp32": _load("fp32", max_length=512), "torch int8 (default)": _load("int8", max_length=512)}
    tokenizer = torch_arms["torch fp32"].tokenizer
    quality = {}
    for name, path in paths.items():
        quality[name] = float(
            evaluate_sts(_OrtEncoder(path, tokenizer, 2), read_sts(STSB), batch_size=64).scores["spearman"]
        )
        print(name, "STS-B", quality[name], flush=True)
    table = []
    for threads in (1, 2):
        torch.set_num_threads(threads)
        runners: dict[str, Callable[[list[list[int]]], Any]] = {
            name: (lambda seqs, m=model: embed_ids(m, seqs, batch_size=16)) for name, model in torch_arms.items()
        }
        for name, path in paths.items():
            runners[name] = _OrtEncoder(path, tokenizer, threads).run_ids
        for length in (128, 256, 512):
            sequences = _sequences(torch_arms["torch fp32"], length, 8192 // length * 4)
            tokens = sum(len(s) for s in sequences)
            for run in runners.values():
                run(sequences[:8])  # warm-up
            times: dict[str, list[float]] = {name: [] for name in runners}
            for repeat in range(repeats):
                for name in list(runners) if repeat % 2 == 0 else list(runners)[::-1]:
                    times[name].append(_timed(lambda run=runners[name], seqs=sequences: run(seqs)))
            medians = {name: statistics.median(values) for name, values in times.items()}
            row = {"threads": threads, "tokens": length, "tokens_per_s": {n: tokens / m for n, m in medians.items()},
                   "vs_torch_fp32": {n: medians["torch fp32"] / m for n, m in medians.items()}}  # fmt: skip
            print(row, flush=True)
            table.append(row)
    return {"stsb_spearman": quality, "rows": table, "repeats": repeats}


def stage_profile(_: int) -> dict[str, Any]:
    """Where a forward pass spends its time: torch.profiler's self CPU time by operator, as a share of the pass,
    for fp32, the default int8 and every Linear in int8, one thread, 16 sequences of 128 and of 512 tokens."""
    from torch.profiler import profile

    torch.set_num_threads(1)
    arms = {"fp32": _load("fp32", max_length=512), "int8": _load("int8", max_length=512),
            "int8, every Linear": _load("int8", (), max_length=512)}  # fmt: skip
    rows: dict[str, Any] = {}
    for length in (128, 512):
        ids = torch.tensor(_sequences(arms["fp32"], length, 16))
        inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
        for name, model in arms.items():
            network = model[0].auto_model
            with torch.inference_mode():
                network(**inputs)  # warm-up
                with profile() as prof:
                    network(**inputs)
            events = prof.key_averages()
            total = sum(e.self_cpu_time_total for e in events)
            top = sorted(events, key=lambda e: -e.self_cpu_time_total)[:6]
            rows[f"{name}/{length}"] = {e.key: round(e.self_cpu_time_total / total, 3) for e in top}
            print(name, length, rows[f"{name}/{length}"], flush=True)
    return {"rows": rows, "threads": 1, "sequences": 16}


def _half_arms() -> list[str]:
    """The half precisions this CPU runs natively (the others are refused by `resolve_precision`)."""
    from lengthwise.core.precision import cpu_half_support

    support = cpu_half_support()
    return [name for name in ("bf16", "fp16") if support[name]]


class _Autocast:
    """An fp32 model run under `torch.autocast(bf16)` (`embed_ids` sees the model; the context wraps each call)."""

    def __init__(self, model: Any) -> None:
        self.model = model

    def __call__(self, sequences: list[list[int]], batch_size: int) -> Any:
        from lengthwise.core.embed import embed_ids

        with torch.autocast("cpu", dtype=torch.bfloat16):
            return embed_ids(self.model, sequences, batch_size=batch_size)


def stage_half_speed(repeats: int) -> dict[str, Any]:
    """Windows/s of fp32, each native half precision and bf16 autocast, 32, 128 and 256 tokens, one thread, batch 32."""
    from lengthwise.core.embed import embed_ids
    from lengthwise.core.precision import cpu_half_support

    torch.set_num_threads(1)
    fp32 = _load("fp32")
    runners: dict[str, Callable[[list[list[int]], int], Any]] = {
        "fp32": lambda seqs, batch: embed_ids(fp32, seqs, batch_size=batch)
    }
    for name in _half_arms():
        runners[name] = lambda seqs, batch, m=_load(name): embed_ids(m, seqs, batch_size=batch)
    if "bf16" in runners:
        runners["bf16 autocast"] = _Autocast(fp32)
    table = []
    for length, count in ((32, 512), (128, 128), (256, 64)):
        sequences = _sequences(fp32, length, count)
        for run in runners.values():
            run(sequences[:32], 32)  # warm-up
        times: dict[str, list[float]] = {name: [] for name in runners}
        for repeat in range(repeats):
            for name in list(runners) if repeat % 2 == 0 else list(runners)[::-1]:
                times[name].append(_timed(lambda run=runners[name], seqs=sequences: run(seqs, 32)))
        medians = {name: statistics.median(values) for name, values in times.items()}
        row = {"threads": 1, "tokens": length, "windows": count,
               "windows_per_s": {name: count / m for name, m in medians.items()},
               "speedup": {name: medians["fp32"] / m for name, m in medians.items()}}  # fmt: skip
        print(row, flush=True)
        table.append(row)
    return {"rows": table, "repeats": repeats, "batch_size": 32, "cpu_half_support": cpu_half_support()}


def stage_half_quality(_: int) -> dict[str, Any]:
    """Cosine of each native half precision's vectors to fp32 over the STS-B test sentences; STS-B test Spearman."""
    from lengthwise.evaluation.data import read_sts

    torch.set_num_threads(2)
    texts = sorted({t for p in read_sts(STSB).pairs for t in (p.text1, p.text2)})
    rows: dict[str, Any] = {}
    reference = None
    for precision in ("fp32", *_half_arms()):
        model = _load(precision)
        vectors = model.encode(texts, batch_size=64, normalize_embeddings=True)
        row: dict[str, Any] = {"stsb": _spearman(model), "dtype": str(vectors.dtype)}
        if reference is None:
            reference = vectors
        else:
            cosines = (vectors * reference).sum(axis=1)
            row.update(cosine_mean=float(cosines.mean()), cosine_min=float(cosines.min()))
            row["stsb_minus_fp32"] = row["stsb"] - rows["fp32"]["stsb"]
        rows[precision] = row
        print(precision, row, flush=True)
    return {"rows": rows, "texts": len(texts)}


def stage_half_scifact(_: int) -> dict[str, Any]:
    """SciFact test nDCG@10 (full corpus) for fp32 and each native half precision, with paired intervals."""
    from lengthwise.core.encoder import as_encoder
    from lengthwise.core.stats import paired_bootstrap
    from lengthwise.evaluation.data import read_beir
    from lengthwise.evaluation.retrieval import evaluate_retrieval

    torch.set_num_threads(2)
    data = read_beir(DATA / "scifact", "test")
    rows, per_query = {}, {}
    for precision in ("fp32", *_half_arms()):
        started = time.perf_counter()
        result = evaluate_retrieval(as_encoder(_load(precision)), data, batch_size=32)
        rows[precision] = {"ndcg@10": float(result.scores["ndcg@10"]), "seconds": round(time.perf_counter() - started)}
        per_query[precision] = {q: 100 * v["ndcg@10"] for q, v in result.per_query.items()}
        print(precision, rows[precision], flush=True)
    queries = sorted(per_query["fp32"])
    for precision in list(rows)[1:]:
        scores = [[per_query[p][q] for q in queries] for p in ("fp32", precision)]
        point, low, high = paired_bootstrap(scores, seed=0)
        rows[precision]["minus_fp32"] = {"diff": point, "low": low, "high": high}
    return {"rows": rows, "queries": len(queries)}


QUERY_ARMS = ("fp32", "bf16", "fp16", "int8")  # the queries' precisions on an fp32 index (those this CPU runs)


def _query_vectors(index: Any, texts: list[str], batch: int, repeats: int) -> tuple[np.ndarray, float]:
    """The queries' vectors from `index` (its query precision), and the median seconds a query takes to embed in
    batches of `batch` (the model loaded and warmed first)."""
    index.embed_queries(texts[:batch], batch_size=batch)  # loads, checks and casts the model; warms it
    seconds = []
    for _ in range(repeats):
        began = time.perf_counter()
        vectors = np.concatenate([np.asarray(index.embed_queries(texts[i : i + batch], batch_size=batch))
                                  for i in range(0, len(texts), batch)])  # fmt: skip
        seconds.append((time.perf_counter() - began) / len(texts))
    return vectors, statistics.median(seconds)


def stage_query_precision(repeats: int) -> dict[str, Any]:
    """The queries of an fp32 index embedded at each precision this CPU runs (`set_query_precision`, what
    ``search``/``serve --precision`` do): the query vectors' cosine to fp32's, test nDCG@10 dense and hybrid through
    the index with the paired per-query interval against fp32 queries, the share of fp32's top 10 kept, and the
    milliseconds a query takes to embed in batches of 1 and 11 (serve's batch at 32 clients), one torch thread."""
    from lengthwise.core.precision import cpu_half_support
    from lengthwise.core.stats import paired_bootstrap
    from lengthwise.evaluation.config import RetrievalConfig
    from lengthwise.evaluation.data import read_beir
    from lengthwise.evaluation.retrieval import trec_scores
    from lengthwise.facade import LongIndex

    torch.set_num_threads(1)
    data = read_beir(QUERY_DATA, "test")
    texts = list(data.query_texts)
    support = cpu_half_support()
    arms = [arm for arm in QUERY_ARMS if arm in ("fp32", "int8") or support[arm]]
    rows: dict[str, Any] = {}
    per_query: dict[str, dict[str, dict[str, float]]] = {}
    tops: dict[str, dict[str, list[list[str]]]] = {}
    reference = None
    for arm in arms:
        index = LongIndex.open(QUERY_INDEX)
        index.set_query_precision(arm)
        vectors, _ = _query_vectors(index, texts, 11, 1)
        row: dict[str, Any] = {"ms_per_query": {}}
        for batch in (1, 11):
            row["ms_per_query"][str(batch)] = 1e3 * _query_vectors(index, texts[:110], batch, repeats)[1]
        if reference is None:
            reference = vectors
        else:
            cosines = (
                (vectors * reference).sum(axis=1) / np.linalg.norm(vectors, axis=1) / np.linalg.norm(reference, axis=1)
            )
            row.update(cosine_mean=float(cosines.mean()), cosine_min=float(cosines.min()))
        per_query[arm], tops[arm] = {}, {}
        for mode in ("dense", "hybrid"):
            hits = index.search(texts, 10, mode=mode, vectors=vectors, search_threads=1)
            run = {q: {h.id: h.score for h in row_hits} for q, row_hits in zip(data.query_ids, hits, strict=True)
                   if q in data.qrels}  # fmt: skip
            scores = trec_scores({q: data.qrels[q] for q in run}, run, RetrievalConfig())
            per_query[arm][mode] = {q: 100 * v["ndcg@10"] for q, v in scores.items()}
            row[f"{mode}_ndcg@10"] = float(np.mean(list(per_query[arm][mode].values())))
            tops[arm][mode] = [[h.id for h in row_hits] for row_hits in hits]
        rows[arm] = row
        print(arm, row, flush=True)
    for arm in arms[1:]:
        for mode in ("dense", "hybrid"):
            queries = sorted(per_query["fp32"][mode])
            scores = [[per_query[p][mode][q] for q in queries] for p in ("fp32", arm)]
            point, low, high = paired_bootstrap(scores, seed=0)
            kept = [
                len(set(a) & set(b)) / max(1, len(a)) for a, b in zip(tops["fp32"][mode], tops[arm][mode], strict=True)
            ]
            rows[arm][f"{mode}_minus_fp32"] = {"diff": point, "low": low, "high": high}
            rows[arm][f"{mode}_top10_kept"] = float(np.mean(kept))
    return {"rows": rows, "queries": len(texts), "index": str(QUERY_INDEX), "threads": 1,
            "cpu_half_support": support}  # fmt: skip


STAGES = {"layers": stage_layers, "speed": stage_speed, "quality": stage_quality, "robustness": stage_robustness,
          "scifact": stage_scifact, "onnx": stage_onnx, "robustness_scifact": stage_robustness_scifact,
          "profile": stage_profile, "row_scaling": stage_row_scaling, "half_speed": stage_half_speed,
          "half_quality": stage_half_quality, "half_scifact": stage_half_scifact,
          "query_precision": stage_query_precision}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("stages", nargs="+", choices=sorted(STAGES))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    if not STSB.is_file():
        raise SystemExit(f"error: {STSB}: STS-B test not found; set LENGTHWISE_DATA to the shared data folder")
    results = json.loads(args.out.read_text()) if args.out.is_file() else {}
    for stage in args.stages:
        load_before = os.getloadavg()
        started = time.perf_counter()
        section = STAGES[stage](args.repeats)
        section.update(
            load_before=load_before,
            load_after=os.getloadavg(),
            seconds=round(time.perf_counter() - started),
            date=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            torch=torch.__version__,
            quantized_engine=quantized_engine(),
        )
        results[stage] = section
        write_json_atomic(args.out, results)  # after each stage: a later stage's failure keeps this one


if __name__ == "__main__":
    main()
