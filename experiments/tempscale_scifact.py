"""TempScale on SciFact: nDCG@10 per temperature, t tuned on train qrels, and the effect by relevant-document length.

Two commands, public lengthwise API only:

    # one JSON per model; rewritten atomically after every t, so a cut-short run keeps what it finished
    python experiments/tempscale_scifact.py run --model PATH --name minilm --t 1.0,0.8,0.9 \\
        --out docs/results/tempscale_scifact_minilm.json
    # tables (markdown, on stdout) and the figure from one or more of those JSONs
    python experiments/tempscale_scifact.py report docs/results/tempscale_scifact_*.json \\
        --figure docs/img/tempscale_scifact.png

For each t the corpus is encoded once with `TempScaleEncoder(model, TempScaleConfig(t=t))` and shared by the
splits evaluated at that t (the corpus and its embedding do not depend on the qrels split); nothing is reused
across temperatures. `--corpus-sample N` keeps every document judged in the evaluated splits plus a seeded random
sample of the others up to N documents (for models too slow to encode the 5,183 abstracts per t on a CPU).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np


@dataclass
class CorpusOnce:
    """A `TextEncoder` that encodes each distinct text list once per side (one temperature, several splits)."""

    encoder: Any
    cache: dict[tuple[str, tuple[str, ...]], np.ndarray] = field(default_factory=dict)

    def _get(self, side: str, texts: Sequence[str], batch_size: int, show_progress: bool) -> np.ndarray:
        key = (side, tuple(texts))
        if key not in self.cache:
            self.cache[key] = getattr(self.encoder, side)(texts, batch_size=batch_size, show_progress=show_progress)
        return self.cache[key]

    def encode(self, texts: Sequence[str], *, batch_size: int = 32, show_progress: bool = False) -> np.ndarray:
        return self._get("encode", texts, batch_size, show_progress)

    def encode_queries(self, texts: Sequence[str], *, batch_size: int = 32, show_progress: bool = False) -> np.ndarray:
        return self._get("encode_queries", texts, batch_size, show_progress)

    def encode_documents(
        self, texts: Sequence[str], *, batch_size: int = 32, show_progress: bool = False
    ) -> np.ndarray:
        return self._get("encode_documents", texts, batch_size, show_progress)


def _subcorpus(splits: dict[str, Any], size: int, seed: int) -> dict[str, Any]:
    """Every split restricted to one shared corpus: all judged documents plus random others, `size` in all."""
    first = next(iter(splits.values()))
    judged = {doc for data in splits.values() for docs in data.qrels.values() for doc in docs}
    others = [i for i, doc in enumerate(first.doc_ids) if doc not in judged]
    rng = np.random.default_rng(seed)
    extra = rng.choice(len(others), size=max(0, min(len(others), size - len(judged))), replace=False)
    keep = sorted([i for i, doc in enumerate(first.doc_ids) if doc in judged] + [others[j] for j in extra])
    return {
        name: replace(
            data,
            doc_ids=tuple(data.doc_ids[i] for i in keep),
            doc_texts=tuple(data.doc_texts[i] for i in keep),
            source=f"{data.source}, corpus sample {len(keep)} (all judged + random, seed {seed})",
        )
        for name, data in splits.items()
    }


def _per_query_ndcg(encoder: CorpusOnce, data: Any, config: Any, batch_size: int) -> dict[str, float]:
    """Per-query nDCG@10 (fraction) from the cached embeddings, as `evaluate_retrieval` computes it."""
    import torch

    from lengthwise.core.search import exact_search
    from lengthwise.evaluation.retrieval import trec_scores

    def unit(x: np.ndarray) -> torch.Tensor:
        return torch.nn.functional.normalize(torch.as_tensor(x, dtype=torch.float32), dim=-1)

    corpus = unit(encoder.encode_documents(data.doc_texts, batch_size=batch_size))
    queries = unit(encoder.encode_queries(data.query_texts, batch_size=batch_size))
    position = {doc: i for i, doc in enumerate(data.doc_ids)}
    exclude = [position.get(qid, -1) for qid in data.query_ids]
    scores, index = exact_search(queries, corpus, config.top_k, exclude=exclude)
    run = {
        qid: {data.doc_ids[j]: float(s) for s, j in zip(row_s.tolist(), row_i.tolist(), strict=True)}
        for qid, row_s, row_i in zip(data.query_ids, scores, index, strict=True)
    }
    per_query = trec_scores(data.qrels, run, config)
    return {qid: per_query[qid][f"ndcg@{config.ndcg_k}"] for qid in data.query_ids if qid in per_query}


def run(args: argparse.Namespace) -> None:
    import torch
    from transformers.utils import logging as hf_logging

    from lengthwise.core.embed import TokenView
    from lengthwise.core.models import load_plain_model, model_fingerprint
    from lengthwise.core.results import environment, write_json_atomic
    from lengthwise.evaluation import LengthBins, RetrievalConfig, evaluate_retrieval, read_beir
    from lengthwise.tempscale import TempScaleConfig, TempScaleEncoder

    torch.set_num_threads(args.threads)
    hf_logging.disable_progress_bar()
    splits = {split: read_beir(args.data, split) for split in args.splits.split(",")}
    if args.corpus_sample:
        splits = _subcorpus(splits, args.corpus_sample, args.seed)
    model = load_plain_model(args.model, device="cpu", max_seq_length=args.max_length)
    view = TokenView(model)
    bins = LengthBins.for_view(view, args.bin_width)
    config = RetrievalConfig()
    out = Path(args.out)
    payload: dict[str, Any] = {
        "experiment": "TempScale t sweep on SciFact (experiments/tempscale_scifact.py)",
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "name": args.name,
        "model": model_fingerprint(model, args.model),
        "data": {name: data.describe() for name, data in splits.items()},
        "settings": {
            "max_length": args.max_length,
            "batch_size": args.batch_size,
            "bin_width": args.bin_width,
            "threads": args.threads,
            "corpus_sample": args.corpus_sample,
            "seed": args.seed,
            "retrieval": asdict(config),
        },
        "bin_spec": bins.describe(),
        "environment": environment(),
        "runs": [],
    }
    for t in (float(x) for x in args.t.split(",")):
        started = time.perf_counter()
        encoder = CorpusOnce(TempScaleEncoder(model, TempScaleConfig(t=t)))
        entry: dict[str, Any] = {"t": t, "splits": {}}
        for name, data in splits.items():
            result = evaluate_retrieval(encoder, data, config, view=view, bins=bins, batch_size=args.batch_size)
            per_query = _per_query_ndcg(encoder, data, config, args.batch_size)
            mean = 100.0 * float(np.mean(list(per_query.values())))
            if abs(mean - result.scores["ndcg@10"]) > 1e-3:
                raise RuntimeError(f"per-query nDCG mean {mean} != evaluate_retrieval's {result.scores['ndcg@10']}")
            entry["splits"][name] = {
                "scores": result.scores,
                "document_bins": result.document_bins,
                "query_bins": result.query_bins,
                "per_query_ndcg@10": per_query,
            }
        entry["wall_time_s"] = round(time.perf_counter() - started, 1)
        payload["runs"].append(entry)
        write_json_atomic(out, payload)
        summary = ", ".join(f"{n} {s['scores']['ndcg@10']:.2f}" for n, s in entry["splits"].items())
        print(f"t = {t}: nDCG@10 {summary} ({entry['wall_time_s']} s)", flush=True)


def _paired_delta(run: dict[str, Any], base: dict[str, Any], split: str, seed: int = 0) -> tuple[float, float, float]:
    """Mean per-query nDCG@10 difference (×100) of `run` minus `base` and its 95 % paired-bootstrap interval
    (`scipy.stats.bootstrap`, queries resampled together, percentile interval)."""
    from lengthwise.core.stats import paired_bootstrap

    a, b = run["splits"][split]["per_query_ndcg@10"], base["splits"][split]["per_query_ndcg@10"]
    ours, theirs = (100.0 * np.asarray([scores[q] for q in b]) for scores in (a, b))  # (Q,) each
    return paired_bootstrap((theirs, ours), resamples=10_000, seed=seed)  # mean(ours − theirs)


def _merged(rows: list[dict[str, Any]], keep: Any) -> dict[str, float]:
    """Count-weighted means of the per-bin relevant-document metrics over the bins `keep(label)` selects."""
    chosen = [row for row in rows if keep(row["bin"]) and row["count"]]
    count = sum(row["count"] for row in chosen)
    merged = {"count": float(count)}
    for metric in ("recall@10", "recall@100", "mrr", "mean_rank"):
        merged[metric] = sum(row[metric] * row["count"] for row in chosen) / count if count else float("nan")
    return merged


def _length_groups(entry: dict[str, Any], split: str) -> dict[str, dict[str, float]]:
    rows = entry["splits"][split]["document_bins"]
    return {
        "fits (≤ N − 2 tokens)": _merged(rows, lambda label: "truncated" not in label),
        "truncated (> N − 2)": _merged(rows, lambda label: "truncated" in label),
        **{label: _merged(rows, lambda x, label=label: x == label) for label in (row["bin"] for row in rows)},
    }


def report(args: argparse.Namespace) -> None:
    """Print markdown tables for each results JSON and draw the figure."""
    import json

    payloads = [json.loads(Path(path).read_text(encoding="utf-8")) for path in args.results]
    for payload in payloads:
        runs = sorted(payload["runs"], key=lambda entry: -entry["t"])
        base = next(entry for entry in runs if entry["t"] == 1.0)
        splits = list(base["splits"])
        print(f"\n### {payload['name']} ({payload['data']['test']['n_documents']} documents)\n")
        columns = ["t", "test nDCG@10", "Δ vs t = 1 [95 % CI]", *(f"{s} nDCG@10" for s in splits[1:]), "wall s"]
        print("| " + " | ".join(columns) + " |\n" + "|---" * len(columns) + "|")
        for entry in runs:
            delta, low, high = _paired_delta(entry, base, "test")
            cells = [
                f"{entry['t']:g}",
                f"{entry['splits']['test']['scores']['ndcg@10']:.2f}",
                f"{delta:+.2f} [{low:+.2f}, {high:+.2f}]",
                *(f"{entry['splits'][s]['scores']['ndcg@10']:.2f}" for s in splits[1:]),
                f"{entry['wall_time_s']:.0f}",
            ]
            print("| " + " | ".join(cells) + " |")
        if "train" in splits:
            tuned = max(runs, key=lambda entry: entry["splits"]["train"]["scores"]["ndcg@10"])
            delta, low, high = _paired_delta(tuned, base, "test")
            print(
                f"\ntuned on train: t = {tuned['t']:g} (train {tuned['splits']['train']['scores']['ndcg@10']:.2f} "
                f"vs {base['splits']['train']['scores']['ndcg@10']:.2f} at t = 1) → test "
                f"{tuned['splits']['test']['scores']['ndcg@10']:.2f}, Δ {delta:+.2f} [{low:+.2f}, {high:+.2f}]"
            )
        for split in splits:
            groups = list(_length_groups(base, split))
            print(
                f"\nrelevant documents by length, {split} qrels: "
                "recall@10 / MRR (×100) / mean rank (judgements per group)\n"
            )
            counts = _length_groups(base, split)
            print("| t | " + " | ".join(f"{g} (n = {counts[g]['count']:.0f})" for g in groups) + " |")
            print("|---" * (1 + len(groups)) + "|")
            for entry in runs:
                cells = _length_groups(entry, split)
                print(
                    f"| {entry['t']:g} | "
                    + " | ".join(
                        f"{cells[g]['recall@10']:.1f} / {cells[g]['mrr']:.1f} / {cells[g]['mean_rank']:.1f}"
                        if cells[g]["count"]
                        else "–"
                        for g in groups
                    )
                    + " |"
                )
    if args.figure:
        _figure(payloads).savefig(args.figure, dpi=120)
        print(f"\nwrote {args.figure}")


def _figure(payloads: list[dict[str, Any]]) -> Any:
    from matplotlib.figure import Figure

    figure = Figure(figsize=(11.0, 3.8), layout="constrained")
    left, right = figure.subplots(1, 2)
    for payload, color in zip(payloads, ("tab:blue", "tab:orange", "tab:green"), strict=False):
        runs = sorted(payload["runs"], key=lambda entry: entry["t"])
        ts = [entry["t"] for entry in runs]
        base = next(entry for entry in runs if entry["t"] == 1.0)
        sample = payload["settings"]["corpus_sample"]
        name = f"{payload['name']}{f' ({sample} docs)' if sample else ''}"
        for split, style in (("test", "-o"), ("train", "--s")):
            if split in base["splits"]:
                values = [
                    entry["splits"][split]["scores"]["ndcg@10"] - base["splits"][split]["scores"]["ndcg@10"]
                    for entry in runs
                ]
                left.plot(ts, values, style, color=color, label=f"{name}, {split}")
        for group, style in (("fits (≤ N − 2 tokens)", "-o"), ("truncated (> N − 2)", "--s")):
            values = [
                _length_groups(entry, "test")[group]["mrr"] - _length_groups(base, "test")[group]["mrr"]
                for entry in runs
            ]
            right.plot(ts, values, style, color=color, label=f"{name}: {group}")
    left.axhline(0, color="0.5", linewidth=0.8)
    right.axhline(0, color="0.5", linewidth=0.8)
    left.set(xlabel="t", ylabel="Δ nDCG@10 vs t = 1 (×100)", title="SciFact: nDCG@10 vs attention temperature")
    right.set(
        xlabel="t",
        ylabel="Δ MRR of relevant docs vs t = 1 (×100)",
        title="test qrels: relevant documents by token length",
    )
    left.legend(frameon=False, fontsize="small")
    right.legend(frameon=False, fontsize="x-small")
    return figure


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    run_p = commands.add_parser("run", help="sweep t for one model; write one JSON")
    run_p.add_argument("--model", required=True)
    run_p.add_argument("--name", required=True)
    run_p.add_argument("--out", required=True)
    run_p.add_argument("--data", default="/work/shared/data/scifact")
    run_p.add_argument("--splits", default="test,train", help="qrels splits; train is the tuning split")
    run_p.add_argument("--t", default="1.0,0.8,0.9,0.7,0.85,0.95,0.75", help="temperatures, in the order run")
    run_p.add_argument("--max-length", type=int, default=256)
    run_p.add_argument("--batch-size", type=int, default=32)
    run_p.add_argument("--bin-width", type=int, default=100)
    run_p.add_argument("--corpus-sample", type=int, default=0)
    run_p.add_argument("--seed", type=int, default=0)
    run_p.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "2")))
    report_p = commands.add_parser("report", help="markdown tables and a figure from run JSONs")
    report_p.add_argument("results", nargs="+")
    report_p.add_argument("--figure", default=None)
    parsed = parser.parse_args()
    if parsed.command == "run":
        run(parsed)
    else:
        report(parsed)
