"""The CPU a service spends embedding its queries: batches of one padded width against runs of the batch size.

`lengthwise serve` embeds the queries that arrive together in one `LongEncoder.encode_queries` call (up to its
``--max-batch``); the encoder sorts them longest first and used to send runs of 32, each padded to its longest
query. QMSum's queries run from 7 to 42 tokens, so a batch of 32 padded to about 1.8× the tokens it held, and the
forward's cost is in proportion to the padded tokens. On a CPU each query is now padded to the next multiple of 8
tokens and a batch holds queries of one padded width (`lengthwise.longdoc._pipeline.padded_batches`), so a query's
vector does not depend on its batch-mates (issue 62.1) and a mixed batch pads little.

Here the real all-MiniLM-L6-v2 embeds batches of QMSum's queries (drawn at random, seeded) of 1, 8, 32 and 64, as
the service's batcher hands them on, in fp32 and, where the CPU has native bf16, in bf16 (the service's
``--precision``), pinned to one core on one torch thread. Arms: ``runs`` (runs of 32, the encoder before) and
``bucketed`` (the default now), alternating, each timed in CPU seconds of the process; the figure is the median over
the repeats of the CPU milliseconds a query. The vectors of the two arms are compared (largest difference and
lowest cosine), and the padded tokens each arm sent are counted.

    python -m benchmarks.serve.query_batches --out docs/results/bench_query_batches.json
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks.encode.longdoc_throughput import _minilm
from lengthwise.core.models import load_plain_model
from lengthwise.core.precision import cpu_half_support
from lengthwise.core.results import environment, write_json_atomic
from lengthwise.longdoc import LongEncoder
from lengthwise.longdoc import encoder as encoder_module

QUERIES = Path(__file__).resolve().parents[2] / "data/qmsum/queries.jsonl.gz"
ARMS = {"runs": None, "bucketed": encoder_module._QUERY_BUCKET}


def _tokens_sent(model: Any) -> list[int]:
    """A list that gathers the padded tokens (rows × width) of every forward `model` runs from now on."""
    sent: list[int] = []
    forward = type(model).forward

    def counted(self: Any, features: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        sent.append(int(features["input_ids"].numel()))
        return forward(self, features, *args, **kwargs)

    type(model).forward = counted
    return sent


def measure(precision: str, sizes: list[int], batches: int, repeats: int) -> dict[str, Any]:
    """Each batch size: CPU ms a query per arm (median over repeats), padded tokens a query, the vectors' agreement."""
    model = load_plain_model(_minilm(), device="cpu", precision=precision)
    encoder = LongEncoder(model, cache_bytes=0)
    with gzip.open(QUERIES, "rt", encoding="utf-8") as handle:
        texts = [json.loads(line)["text"] for line in handle]
    rng = np.random.default_rng(0)
    sent = _tokens_sent(model)
    out: dict[str, Any] = {}
    for size in sizes:
        drawn = [[texts[i] for i in rng.choice(len(texts), size, replace=False)] for _ in range(batches)]
        ms: dict[str, list[float]] = {arm: [] for arm in ARMS}
        tokens: dict[str, int] = {}
        vectors: dict[str, np.ndarray] = {}
        for arm, bucket in ARMS.items():  # warm-up, the tokens sent and the vectors
            encoder_module._QUERY_BUCKET = bucket
            sent.clear()
            vectors[arm] = np.concatenate([encoder.encode_queries(batch, batch_size=32) for batch in drawn])
            tokens[arm] = sum(sent)
        for _ in range(repeats):
            for arm, bucket in ARMS.items():
                encoder_module._QUERY_BUCKET = bucket
                began = time.process_time()
                for batch in drawn:
                    encoder.encode_queries(batch, batch_size=32)
                ms[arm].append((time.process_time() - began) / (size * batches) * 1e3)
        cosine = np.sum(vectors["runs"] * vectors["bucketed"], axis=1)
        median = {arm: statistics.median(values) for arm, values in ms.items()}
        out[str(size)] = {
            "cpu_ms_per_query": {arm: round(value, 3) for arm, value in median.items()},
            "bucketed_over_runs": round(median["bucketed"] / median["runs"], 3),
            "tokens_per_query": {arm: round(count / (size * batches), 2) for arm, count in tokens.items()},
            "max_abs_diff": float(np.abs(vectors["runs"] - vectors["bucketed"]).max()),
            "min_cosine": float(cosine.min()),
            "cpu_ms_per_query_all": {arm: [round(v, 3) for v in values] for arm, values in ms.items()},
        }
        print(precision, size, json.dumps(out[str(size)]["cpu_ms_per_query"]), out[str(size)]["bucketed_over_runs"],
              flush=True)  # fmt: skip
    encoder_module._QUERY_BUCKET = ARMS["bucketed"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/results/bench_query_batches.json"))
    parser.add_argument("--sizes", default="1,8,32,64", help="queries a batch, comma-separated")
    parser.add_argument("--batches", type=int, default=8, help="batches of each size (drawn, seeded)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:1])
    torch.set_num_threads(1)
    load_before = os.getloadavg()
    sizes = [int(size) for size in args.sizes.split(",")]
    precisions = ["fp32", "bf16"] if cpu_half_support()["bf16"] else ["fp32"]
    results = {precision: measure(precision, sizes, args.batches, args.repeats) for precision in precisions}
    payload = {
        "benchmark": "CPU a query of the service's query embedding: batches of one padded width vs runs of 32",
        "results": results,
        "skipped": {} if "bf16" in precisions else {"bf16": "this CPU has no native bf16 (AMX or AVX512-BF16)"},
        "settings": {
            **{"sizes": sizes, "batches": args.batches, "repeats": args.repeats, "bucket": ARMS["bucketed"]},
            **{"batch_size": 32, "cores": 1, "torch_threads": 1, "queries": QUERIES.name},
        },
        "load_average": {"before": load_before, "after": os.getloadavg()},
        "environment": environment(),
    }
    write_json_atomic(args.out, payload)


if __name__ == "__main__":
    main()
