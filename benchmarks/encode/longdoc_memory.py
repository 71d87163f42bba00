"""Peak memory of `lengthwise encode` (streaming) at 1k vs 10k documents of ~4k tokens each.

Each size runs `lengthwise encode` in its own process on a generated corpus.jsonl (sentences of the wiki1m head in
a seeded order, ~4k tokens per document) and reads that process's own peak RSS (``VmHWM``, `run_measured`). A tiny
random BERT (2 layers, 32 wide, 512 positions, MiniLM's tokenizer) is used: 10k × 4k tokens = 40M tokens would
take hours with MiniLM on the shared CPU, and what is measured (memory held by the streaming reader, the windows of
a block, the shards) does not depend on the model's width beyond its fixed weights.

    nice -n 5 python -m benchmarks.encode.longdoc_memory
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks._measure import peak_rss_bytes, run_measured
from lengthwise.core.results import environment, write_json_atomic
from lengthwise.testing import tiny_bert

HAYSTACK = Path("../shared/data/wiki1m_simcse_head/wiki1m_for_simcse.head11914.txt.gz")


def _corpus(path: Path, docs: int, doc_chars: int) -> None:
    with gzip.open(HAYSTACK, "rt", encoding="utf-8") as handle:
        sentences = [line for line in handle.read().splitlines() if line.strip()]
    rng = random.Random(0)
    with path.open("w", encoding="utf-8") as out:
        for index in range(docs):
            parts, size = [], 0
            while size < doc_chars:
                sentence = sentences[rng.randrange(len(sentences))]
                parts.append(sentence)
                size += len(sentence) + 1
            out.write(json.dumps({"_id": f"d{index}", "text": " ".join(parts)}) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--doc-chars", type=int, default=20000, help="~4k MiniLM tokens")
    parser.add_argument("--long", default="chunk-mean")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("docs/results/longdoc_memory.json"))
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        model = root / "model" / "st"
        tiny_bert(root / "model" / "hf", model, max_positions=512, max_seq_length=256)
        for size in args.sizes:
            corpus = root / f"corpus-{size}.jsonl"
            _corpus(corpus, size, args.doc_chars)
            command = [sys.executable, "-m", "lengthwise.cli", "encode", "--data", str(corpus), "--out"]
            command += [str(root / f"emb-{size}"), "--model", str(model), "--long", args.long]
            command += ["--threads", str(args.threads)]
            load = os.getloadavg()
            run = run_measured(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            if run["returncode"] != 0:
                raise SystemExit(f"encode failed for {size} documents (exit {run['returncode']})")
            rows.append(
                {
                    "documents": size,
                    "corpus_mb": round(corpus.stat().st_size / 2**20, 1),
                    "peak_rss_mb": round(run["peak_rss_bytes"] / 2**20, 1),
                    "seconds": round(run["wall_s"], 1),
                    "load_average": load,
                }
            )
            print(rows[-1], flush=True)
            corpus.unlink()
    ratio = rows[-1]["peak_rss_mb"] / rows[0]["peak_rss_mb"]
    write_json_atomic(
        args.out,
        {
            "rows": rows,
            "ratio_peak_rss_largest_vs_smallest": round(ratio, 4),
            "model": "tiny random BERT (2 layers, 32 wide, 512 positions; MiniLM tokenizer), window 256",
            "settings": vars(args) | {"out": str(args.out)},
            "self_maxrss_mb": round(peak_rss_bytes() / 2**20, 1),
            "environment": environment(),
        },
    )
    print(f"peak RSS ratio {rows[-1]['documents']} vs {rows[0]['documents']} documents: {ratio:.3f}")


if __name__ == "__main__":
    main()
