"""The token stage's latency at scale (issue 64's goal: the default search with the stage at most 2× the hybrid's
p50 at 1M windows' worth of text), on the hybrid benchmark's scale index.

The scale index (`benchmarks.search.hybrid.scale`, built when absent: 50,000 documents of 20 windows, noisy
copies of real qmsum and SciFact windows, essay text of 150–600 words with both BM25 sides) gets a token folder of
its own: each document's tokens are where all-MiniLM-L6-v2's tokenizer cuts its text (spans from the tokenizer's
offsets, special tokens out), and each token's one-bit code is a real token's, drawn at random (seeded) from the
qmsum token folder the token study encoded (``tokens-auto``: the default codec, whose codec file and model record
are copied). The codes are not an encoding of the text; a token MaxSim costs the same whatever the bits hold, and
the stage reads the same rows, so the timing is the stage's at this size (the scores and hits are not a quality
figure). Arms, alternated, `--repeats` rounds, medians, 1 and 8 clients: dense, the default hybrid, and the hybrid
with the default stage (weight 0.4, depth 100, the tokens of the best 8 windows), each with its query's vector
(and token vectors) given, and the hybrid with and without the stage from the query's text (one forward: both from
the same pass).

    python -m benchmarks.search.token_scale --windows 1000000    # writes the "scale" section of token_side.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._measure import command_line
from benchmarks.search.hybrid._common import _load, _scale_texts, _timed
from benchmarks.search.hybrid.scale import PER_DOC, _scale_builds, _scale_key, _scale_queries, scale_fusion

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results" / "token_side.json"
SHARD_DOCS = 1000  # documents a token shard


def scale_tokens(index: Path, source: Path, docs: int) -> Path:
    """The scale index's token folder (``tokens`` beside its index; resumed shard by shard; see the module
    docstring). `source`: the real token folder whose codes are drawn."""
    from transformers import AutoTokenizer

    from lengthwise.core.models import resolve_model_path
    from lengthwise.core.token_codec import CODEC_FILE
    from lengthwise.longdoc.storage.store import EmbeddingStore
    from lengthwise.search.tokens import TokenSide

    real = TokenSide.open(source)
    folder = index.parent / "tokens"
    settings = {**real.settings, "data": "the scale corpus's essays (benchmarks.search.hybrid._common._scale_texts)",
                "copied": {"codes": f"drawn at random from {source} (seed 0), not an encoding of the text",
                           "spans": "the model's tokenizer's offsets of each document's text"}}  # fmt: skip
    store = EmbeddingStore(folder, settings)
    done, _ = store.repair()
    store.start()
    for name in (CODEC_FILE, "model.json"):
        shutil.copyfile(source / name, folder / name)
    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path(real.settings["model"]))
    texts, rng = _scale_texts(docs), np.random.default_rng(0)
    for number, first in enumerate(range(0, docs, SHARD_DOCS)):
        ids = [f"s{n}" for n in range(first, min(first + SHARD_DOCS, docs))]
        cut = tokenizer(texts[first : first + len(ids)], add_special_tokens=False, return_offsets_mapping=True,
                        verbose=False)["offset_mapping"]  # fmt: skip
        spans = [np.asarray(offsets, dtype=np.int64).reshape(-1, 2) for offsets in cut]
        counts = np.asarray([len(s) for s in spans], dtype=np.int64)
        codes = real.codes[rng.integers(0, len(real.codes), size=int(counts.sum()))]  # drawn on every run: the
        if ids[-1] in done:  # seeded stream, and so each shard, is the same whether resumed or not
            continue
        store.write("w0-", ids, _multi(codes, counts), number=number, extra=_spans_file(np.concatenate(spans)))
        print(f"tokens: {first + len(ids)}/{docs} documents, load {_load()}", flush=True)
    return folder


def _spans_file(spans: np.ndarray) -> Callable[[str], dict[str, bytes]]:
    """A shard's ``.spans.npy`` (int32), as `TokenShardEncoder.shard_extra` gives it to the store."""
    from lengthwise.longdoc.storage.store import _npy_bytes

    data = _npy_bytes(spans.astype(np.int32))
    return lambda stem: {f"{stem}.spans.npy": data}


def _multi(codes: np.ndarray, counts: np.ndarray) -> Any:
    from lengthwise.core.encoder import MultiVectors

    return MultiVectors(codes, np.concatenate([[0], np.cumsum(counts)]).astype(np.int64))


def latency(args: argparse.Namespace) -> dict[str, Any]:
    """p50 / p99 / q/s of each arm at 1 and 8 clients (module docstring), medians of `args.repeats` alternated
    rounds, with the token folder's size."""
    from lengthwise.core.fusion import Mode
    from lengthwise.core.scoring import WindowScoring
    from lengthwise.facade import LongIndex
    from lengthwise.search.lexical.bm25 import open_lexical
    from lengthwise.search.searcher import Searcher
    from lengthwise.search.tokens import TOKEN_AROUND, TOKEN_DEPTH, TOKEN_WEIGHT, TokenSide, TokenStage

    docs = args.windows // PER_DOC
    scale = argparse.Namespace(windows=args.windows, work=args.work, granularity="both")
    folder, lexical_folder, _ = _scale_builds(scale, _scale_key(args.windows, "both", "default"))
    started = time.perf_counter()
    tokens_folder = scale_tokens(folder, args.work / "qmsum" / "tokens-auto", docs)
    token_build = time.perf_counter() - started
    load_before = _load()
    index, lexical = LongIndex.open(folder), open_lexical(lexical_folder)
    side = TokenSide.open(tokens_folder)

    def encode(texts: Any) -> list[np.ndarray]:
        return index.queries.tokens(texts, side.settings)

    stage = TokenStage.bound(side, index.windows.doc_ids, encode, weight=TOKEN_WEIGHT, depth=TOKEN_DEPTH,
                             around=TOKEN_AROUND)  # fmt: skip
    plain = Searcher(index.windows, lexical, index.queries, WindowScoring(), "no text")
    staged = Searcher(index.windows, lexical, index.queries, WindowScoring(), "no text", tokens=stage)
    vectors, texts = _scale_queries(index.windows, docs, args.queries)
    token_queries = encode(texts)
    settings = scale_fusion("default")
    arms: dict[str, Callable[[int], Any]] = {
        "dense": lambda n: plain.rank(vectors[n : n + 1], texts[n : n + 1], 10, Mode.DENSE, settings),
        "hybrid": lambda n: plain.rank(vectors[n : n + 1], texts[n : n + 1], 10, Mode.HYBRID, settings),
        "hybrid+tokens": lambda n: staged.rank(vectors[n : n + 1], texts[n : n + 1], 10, Mode.HYBRID, settings,
                                               tokens=token_queries[n : n + 1]),
        "hybrid:text": lambda n: _from_text(plain, texts[n], settings),
        "hybrid+tokens:text": lambda n: _from_text(staged, texts[n], settings),
    }  # fmt: skip
    runs: dict[tuple[str, int], list[dict[str, float]]] = {}
    asked = list(range(args.queries))
    for _, clients, (arm, search) in itertools.product(range(args.repeats), (1, 8), arms.items()):
        runs.setdefault((arm, clients), []).append(_timed(search, asked, clients))
        print(arm, clients, runs[arm, clients][-1], flush=True)
    rows: dict[str, Any] = {}
    for (arm, clients), timed in runs.items():
        rows.setdefault(arm, {})[f"clients_{clients}"] = {
            key: round(statistics.median(run[key] for run in timed), 2) for key in timed[0]
        }
    ratios = {f"{arm}_over_{base}_p50_clients_{c}": round(rows[arm][f"clients_{c}"]["p50_ms"]
                                                          / rows[base][f"clients_{c}"]["p50_ms"], 2)
              for arm, base in (("hybrid+tokens", "hybrid"), ("hybrid+tokens:text", "hybrid:text"),
                                ("hybrid", "dense"))
              for c in (1, 8)}  # fmt: skip
    bytes_on_disk = sum(p.stat().st_size for p in tokens_folder.glob("w0-*.npy") if ".offsets" not in p.name)
    return {"windows": args.windows, "documents": docs, "index": str(folder), "lexical_side": str(lexical_folder),
            "tokens": len(side.codes), "token_bytes_on_disk": bytes_on_disk,
            "token_folder_build_s": round(token_build), "stage": stage.describe(), "fusion": settings.to_dict(),
            "queries": args.queries, "repeats": args.repeats, "latency": rows, **ratios,
            "load": [load_before, _load()]}  # fmt: skip


def _from_text(searcher: Any, text: str, settings: Any) -> Any:
    """A hybrid search from the query's text: its vector (and token vectors, from the same pass) read, then ranked."""
    from lengthwise.core.fusion import Mode

    vectors, tokens = searcher.embed_for_search([text], Mode.HYBRID)
    return searcher.rank(vectors, [text], 10, Mode.HYBRID, settings, tokens=tokens)


def main(argv: list[str] | None = None) -> None:
    from lengthwise.core.results import environment, write_json_atomic

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/lengthwise-bench-hybrid"))
    parser.add_argument("--windows", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3, help="alternated rounds of each arm (medians)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--label", default=None,
                        help="recorded as WINDOWS-LABEL beside the plain key (another checkout's run)")  # fmt: skip
    args = parser.parse_args(argv)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    import lengthwise

    section = {**latency(args), "environment": environment(), "lengthwise": str(Path(lengthwise.__file__).parent),
               "command": command_line("benchmarks.search.token_scale", argv)}  # fmt: skip
    earlier = json.loads(RESULTS.read_text(encoding="utf-8")) if RESULTS.is_file() else {}
    key = f"{args.windows}-{args.label}" if args.label else str(args.windows)
    scale = {**earlier.get("scale", {}), key: section}
    write_json_atomic(RESULTS, {**earlier, "scale": scale})
    print(json.dumps({k: v for k, v in section.items() if k != "environment"}, indent=1), flush=True)


if __name__ == "__main__":
    main()
