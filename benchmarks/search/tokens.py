"""The token side's study (issue 64): token MaxSim against the windows, BM25 and the default hybrid, each codec's loss,
and the fusions, per corpus and split, from exact scores; the encode's time against the window encode's.

Every corpus goes through the product: the windows and BM25 as the hybrid benchmark indexes them
(`benchmarks.search.hybrid._common._indexed`, reused when built), the tokens with `encode_tokens` at ``fp16`` (the
reference), and each codec fitted on that folder's first shard (as `encode_tokens` fits it) and applied to every
token. Arms (nDCG@10 per split):

- ``dense``, ``bm25-document``, ``bm25-window``, ``hybrid`` (the default: zscore over both granularities at 0.3);
- ``tokens:{codec}``: token MaxSim alone, per codec;
- ``hybrid+tokens:{t}``: the hybrid's fused top ``--rescore`` documents rescored as (1 − t) · z(hybrid) + t ·
  z(token MaxSim), the default codec; the hybrid's order below them is kept (``@{n}``: its top n only);
- ``four-way:{t}``: z-scores of dense, both BM25s and tokens over the hybrid's candidates, tokens at t and the rest
  sharing 1 − t as the hybrid shares 1;
- instead, with ``--colbert MODEL`` (a ColBERT folder, e.g. the one `benchmarks.train.colbert` trains; section
  ``colbert``): ``colbert:{codec}``, its token MaxSim alone (``fp16`` and one bit), ``hybrid+colbert:{t}``, and
  ``hybrid+tokens+colbert:{t}`` (both token sides, one bit, each at t);
- instead, with ``--around`` (section ``around``): the stage reading only the tokens inside each rescored document's
  best 1–16 windows by the dense side's cosine (``around{n}:{t}``);
- instead, with ``--synthetic passkey,needle`` (section ``synthetic``): Acc@1 by length on the realistic synthetic
  tasks' test sets of the hybrid, token MaxSim and the stage (`synthetic`); with ``--colbert`` too, the ColBERT's
  arms beside them.

    python -m benchmarks.search.tokens --sets qmsum            # writes docs/results/token_side.json
    python -m benchmarks.search.tokens --sets qmsum,newsgroups,replies,scifact --colbert /tmp/lengthwise-colbert/model
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._measure import command_line
from benchmarks.search.hybrid._common import (
    DEFAULT_MODEL,
    ROOT,
    _indexed,
    _load,
    _retrieval_sets,
    _score_matrices,
    corpus_options,
)

RESULTS = ROOT / "docs" / "results" / "token_side.json"
CODECS = ("fp16", "int8", "bin", "pca256-bin", "pca192-bin", "pca128-bin", "pca128-int8", "pca64-int8",
          "pca128-int4")  # fmt: skip
WEIGHTS = (0.2, 0.3, 0.4, 0.5, 0.6)
BOTH_WEIGHTS = (0.15, 0.2, 0.25, 0.3)  # --colbert: the training-free tokens and the ColBERT's, each at this weight
DEPTHS = (10, 20, 30, 50)  # the hybrid's documents rescored, beside --rescore
AROUND = (1, 2, 4, 8, 16)  # best windows whose tokens are read (`--around`)
STAGE_DEPTHS = (20, 30, 50)  # the stage (best 8 windows) rescoring fewer documents: ``around8:{t}@{n}``


def _hybrid(matrices: dict[str, np.ndarray]) -> np.ndarray:
    from benchmarks.search.hybrid.quality import _both

    return _both(matrices, 0.3)


def _top(scores: np.ndarray, n: int) -> np.ndarray:
    """The `n` best documents of one query's scores, best first (ties: the earlier), those scored (finite) only."""
    order = np.argsort(-scores, kind="stable")
    return order[np.isfinite(scores[order])][:n]


QUERY_CHUNK = 64  # queries scored together over every token: their products, a block at a time, stay small


def _token_matrix(side: Any, queries: list[np.ndarray]) -> np.ndarray:
    """(Q, n) token MaxSim of every query against every document, `QUERY_CHUNK` queries at a time (1,200 replies
    queries at once over its 1.7M tokens held 23 GB and were killed)."""
    parts = [side.scores_many(queries[first : first + QUERY_CHUNK]) for first in range(0, len(queries), QUERY_CHUNK)]
    return np.concatenate(parts) if parts else np.zeros((0, len(side.doc_ids)))


def _top_token_matrix(side: Any, queries: list[np.ndarray], hybrid: np.ndarray, depth: int) -> np.ndarray:
    """(Q, n) token MaxSim of each query's hybrid top `depth` documents over all their tokens, 0 elsewhere (never
    read: `_rescored` reads the top alone); what `_token_matrix` gives there, without scoring every document."""
    out = np.zeros(hybrid.shape)
    for q in range(len(hybrid)):
        top = _top(hybrid[q], depth)
        out[q, top] = side.scores_many([queries[q]], top)[0]
    return out


def _recoded(reference: Any, spec: str, rows: int | None = None) -> Any:
    """The fp16 token side coded by `spec`, the codec fitted on its first shard's tokens (as `encode_tokens` does),
    or on its first `rows` tokens."""
    from dataclasses import replace

    from lengthwise.core.shards import shards
    from lengthwise.core.token_codec import TokenCodec

    if rows is None:
        first = np.load(f"{shards(reference.folder)[0].stem}.npy", allow_pickle=False).astype(np.float32)
    else:
        first = reference.codes[:rows].astype(np.float32)
    codec = TokenCodec.fit(spec, first)
    return replace(reference, codes=codec.encode(reference.codes.astype(np.float32)), codec=codec)


def _rescored(hybrid: np.ndarray, tokens: np.ndarray | list[np.ndarray], weight: float | list[float],
              depth: int) -> np.ndarray:  # fmt: skip
    """The hybrid's top `depth` per query rescored by (1 − w) z(hybrid) + w z(tokens), placed above the rest; with
    several token sides and a weight each, (1 − Σw) z(hybrid) + Σ w_i z(tokens_i)."""
    from lengthwise.core.fusion import fuse_normalised

    sides, weights = (tokens, weight) if isinstance(tokens, list) else ([tokens], [weight])
    assert isinstance(weights, list) and len(weights) == len(sides), "a weight for each token side"
    out = hybrid.copy()
    for q in range(len(hybrid)):
        top = _top(hybrid[q], depth)
        fused = fuse_normalised([hybrid[q, top], *(side[q, top] for side in sides)], [1.0 - sum(weights), *weights],
                                "zscore")  # fmt: skip
        out[q, top] = fused - fused.min() + 1.0 + np.nanmax(np.where(np.isfinite(hybrid[q]), np.abs(hybrid[q]), 0))
    return out


def _four_way(matrices: dict[str, np.ndarray], tokens: np.ndarray, weight: float) -> np.ndarray:
    from lengthwise.core.fusion import fuse_normalised
    from lengthwise.search.fusion import exact_candidates
    from lengthwise.search.types import DEPTH

    out = np.full(tokens.shape, -np.inf)
    for q, (d, doc, win, tok) in enumerate(zip(matrices["dense"], matrices["document"], matrices["window"], tokens,
                                               strict=True)):  # fmt: skip
        chosen = np.union1d(exact_candidates(d, doc, DEPTH), exact_candidates(d, win, DEPTH))
        rest = 1.0 - weight
        out[q, chosen] = fuse_normalised([d[chosen], doc[chosen], win[chosen], tok[chosen]],
                                         [rest * 0.7, rest * 0.15, rest * 0.15, weight], "zscore")  # fmt: skip
    return out


def _tokens_folder(name: str, corpus: Path, args: argparse.Namespace, model: str | None = None) -> tuple[Path, float]:
    from lengthwise.longdoc.storage.tokens import encode_tokens

    folder = args.work / name / ("tokens-fp16" if model is None else "tokens-colbert-fp16")
    started = time.perf_counter()
    encode_tokens(corpus, folder, model or args.model, codec="fp16", shard_docs=8, threads=args.threads,
                  show_progress=True)  # fmt: skip
    return folder, time.perf_counter() - started


def _colbert_arms(name: str, corpus: Path, args: argparse.Namespace, doc_ids: list[str]) -> Any:
    """(Queries, groups) → {arm: (Q, n) scores} of the ColBERT's tokens (fp16 and one bit), or None without
    ``--colbert``. `groups` (the synthetic sets: each query's length group, one a document too) scores each query
    against its own group's documents only, −inf elsewhere."""
    from lengthwise.core.models import load_token_model
    from lengthwise.longdoc.method import LONG_DOCUMENTS
    from lengthwise.search.tokens import TokenSide

    if args.colbert is None:
        return None
    folder, _ = _tokens_folder(name, corpus, args, str(args.colbert))
    reference = TokenSide.open(folder)
    assert reference.doc_ids == doc_ids, "the ColBERT's token folder's documents in the index's order"
    sides = {"fp16": reference, "bin": _recoded(reference, "bin")}
    model = load_token_model(str(args.colbert))

    def arms(texts: list[str], groups: np.ndarray | None = None) -> dict[str, np.ndarray]:
        vectors = LONG_DOCUMENTS.query_tokens(model, texts, reference.settings)
        if groups is None:
            return {f"colbert:{spec}": _token_matrix(side, vectors) for spec, side in sides.items()}
        out = {f"colbert:{spec}": np.full((len(texts), len(doc_ids)), -np.inf) for spec in sides}
        for group in np.unique(groups):
            members = np.flatnonzero(groups == group)
            for spec, side in sides.items():
                out[f"colbert:{spec}"][np.ix_(members, members)] = side.scores_many([vectors[q] for q in members],
                                                                                    members)  # fmt: skip
        return out

    return arms


def _colbert_rescored(hybrid: np.ndarray, plain: np.ndarray, colbert: np.ndarray, depth: int) -> dict[str, np.ndarray]:
    """The hybrid's best `depth` rescored by the ColBERT's tokens at each of `WEIGHTS` (``hybrid+colbert:{t}``) and
    by both token sides at once, each at t of `BOTH_WEIGHTS` (``hybrid+tokens+colbert:{t}``)."""
    return {**{f"hybrid+colbert:{w}": _rescored(hybrid, colbert, w, depth) for w in WEIGHTS},
            **{f"hybrid+tokens+colbert:{w}": _rescored(hybrid, [plain, colbert], [w, w], depth)
               for w in BOTH_WEIGHTS}}  # fmt: skip


def _corpus_file(name: str, entry: dict[str, Any], args: argparse.Namespace) -> Path:
    if entry.get("corpus") is not None:
        return Path(entry["corpus"])
    return args.work / name / "corpus.jsonl"  # written by `_indexed`


def study(args: argparse.Namespace) -> dict[str, Any]:
    from benchmarks.search.hybrid.quality import _ndcg
    from lengthwise.core.models import load_plain_model
    from lengthwise.longdoc.token_vectors import encode_token_vectors
    from lengthwise.search.tokens import TokenSide

    model = load_plain_model(args.model)
    table: dict[str, dict[str, float]] = {}
    sizes: dict[str, Any] = {}
    for name, entry in _retrieval_sets(args).items():
        if name not in args.sets:
            continue
        index = _indexed(name, entry["ids"], entry["texts"], args, entry.get("corpus"))
        folder, _ = _tokens_folder(name, _corpus_file(name, entry, args), args)
        reference = TokenSide.open(folder)
        assert reference.doc_ids == list(index.doc_ids), "the token folder's documents in the index's order"
        sides = {spec: reference if spec == "fp16" else _recoded(reference, spec) for spec in args.codecs}
        sizes[name] = {"documents": len(reference.doc_ids), "tokens": len(reference.codes),
                       "windows": int(index.settings["windows"]),
                       "bytes_per_token": {spec: side.bytes_per_token for spec, side in sides.items()}}  # fmt: skip
        for split, queries in entry["splits"].items():
            matrices = _score_matrices(index, queries["texts"], args)
            vectors = [t.vectors for t in encode_token_vectors(model, queries["texts"], role="query")]
            tokens = {spec: _token_matrix(side, vectors) for spec, side in sides.items()}
            hybrid = _hybrid(matrices)
            arms = {"dense": matrices["dense"], "bm25-document": matrices["document"],
                    "bm25-window": matrices["window"], "hybrid": hybrid}  # fmt: skip
            arms.update({f"tokens:{spec}": scores for spec, scores in tokens.items()})
            default = tokens[args.default_codec]
            for weight in WEIGHTS:
                arms[f"hybrid+tokens:{weight}"] = _rescored(hybrid, default, weight, args.rescore)
                arms[f"four-way:{weight}"] = _four_way(matrices, default, weight)
                for depth in DEPTHS:  # fewer documents rescored: a cheaper stage
                    arms[f"hybrid+tokens:{weight}@{depth}"] = _rescored(hybrid, default, weight, depth)
            table[f"{name}-{split}"] = {arm: _ndcg(s, list(index.doc_ids), queries) for arm, s in arms.items()}
            print(f"{name}-{split}: " + ", ".join(f"{a} {v:.2f}" for a, v in table[f"{name}-{split}"].items()),
                  flush=True)  # fmt: skip
    return {"table": table, "sizes": sizes}


def _around_matrix(index: Any, side: Any, hybrid: np.ndarray, dense_queries: np.ndarray, token_queries: list[
        np.ndarray], count: int, depth: int) -> np.ndarray:  # fmt: skip
    """(Q, n) token MaxSim of each query's hybrid top `depth` documents over only the tokens inside their `count`
    best windows by dense cosine (`TokenSide.rows_within`); 0 elsewhere (never read: `_rescored` reads the top)."""
    out = np.zeros(hybrid.shape)
    for q in range(len(hybrid)):
        top = _top(hybrid[q], depth)
        rows = []
        for doc in top.tolist():
            first, last = int(index.offsets[doc]), int(index.offsets[doc + 1])
            near = np.argsort(-(np.asarray(index.vectors[first:last]) @ dense_queries[q]), kind="stable")[:count]
            rows.append(side.rows_within(doc, [index.lexical.passage(first + int(w)) for w in near]))
        out[q, top] = side.scores_many([token_queries[q]], top, rows)[0]
    return out


def _splits(args: argparse.Namespace) -> Iterator[tuple[str, Any, Any, dict[str, Any], np.ndarray, list[np.ndarray]]]:
    """Per corpus (``--sets``) and split: (corpus, index, its token side in the default codec, the queries, the
    default hybrid's (Q, n) scores, the queries' token vectors)."""
    from lengthwise.core.models import load_plain_model
    from lengthwise.longdoc.token_vectors import encode_token_vectors
    from lengthwise.search.tokens import TokenSide

    model = load_plain_model(args.model)
    for name, entry in _retrieval_sets(args).items():
        if name not in args.sets:
            continue
        index = _indexed(name, entry["ids"], entry["texts"], args, entry.get("corpus"))
        folder, _ = _tokens_folder(name, _corpus_file(name, entry, args), args)
        side = _recoded(TokenSide.open(folder), args.default_codec)
        assert side.doc_ids == list(index.doc_ids), "the token folder's documents in the index's order"
        for split, queries in entry["splits"].items():
            hybrid = _hybrid(_score_matrices(index, queries["texts"], args))
            tokens = [t.vectors for t in encode_token_vectors(model, queries["texts"], role="query")]
            yield f"{name}-{split}", index, side, queries, hybrid, tokens


def _scored(index: Any, queries: dict[str, Any], arms: dict[str, np.ndarray], key: str) -> dict[str, float]:
    from benchmarks.search.hybrid.quality import _ndcg

    found = {arm: _ndcg(s, list(index.doc_ids), queries) for arm, s in arms.items()}
    print(f"{key}: " + ", ".join(f"{a} {v:.2f}" for a, v in found.items()), flush=True)
    return found


def colbert_study(args: argparse.Namespace) -> dict[str, Any]:
    """A ColBERT's tokens (``--colbert``) against the training-free ones and the hybrid: nDCG@10 per corpus and
    split of ``colbert:{fp16,bin}`` alone and ``hybrid+colbert:{t}`` (the hybrid's best `--rescore` rescored)."""
    table: dict[str, dict[str, float]] = {}
    colberts: dict[str, Any] = {}
    for key, index, side, queries, hybrid, tokens in _splits(args):
        name = key.rsplit("-", 1)[0]
        if name not in colberts:
            colberts[name] = _colbert_arms(name, _corpus_file(name, _retrieval_sets(args)[name], args), args,
                                           list(index.doc_ids))  # fmt: skip
        plain = _token_matrix(side, tokens)
        arms = {"hybrid": hybrid, f"tokens:{args.default_codec}": plain,
                "hybrid+tokens:0.4": _rescored(hybrid, plain, 0.4, args.rescore)}  # fmt: skip
        arms.update(colberts[name](queries["texts"]))
        arms.update(_colbert_rescored(hybrid, plain, arms["colbert:bin"], args.rescore))
        table[key] = _scored(index, queries, arms, key)
    return table


def around(args: argparse.Namespace) -> dict[str, Any]:
    """The token stage reading only the tokens around each rescored document's best windows (by the dense side's
    cosine), against the stage over every token and the hybrid: nDCG@10 per corpus and split, default codec."""
    table: dict[str, dict[str, float]] = {}
    for key, index, side, queries, hybrid, tokens in _splits(args):
        dense = np.asarray(index.embed_queries(queries["texts"]), dtype=np.float32)
        dense /= np.linalg.norm(dense, axis=1, keepdims=True)
        every = _top_token_matrix(side, tokens, hybrid, args.rescore)
        arms = {"hybrid": hybrid, "hybrid+tokens:0.4": _rescored(hybrid, every, 0.4, args.rescore)}
        for count in AROUND:
            near = _around_matrix(index, side, hybrid, dense, tokens, count, args.rescore)
            for weight in (0.3, 0.4, 0.5):
                arms[f"around{count}:{weight}"] = _rescored(hybrid, near, weight, args.rescore)
            if count == 8:
                arms.update(_shallower(hybrid, near))
        table[key] = _scored(index, queries, arms, key)
    return table


def _shallower(hybrid: np.ndarray, near: np.ndarray) -> dict[str, np.ndarray]:
    """The stage (the tokens of the best 8 windows: `near`) rescoring only the hybrid's best n documents for each n
    of `STAGE_DEPTHS`, at w = 0.4 and 0.5: a cheaper stage (``around8:{t}@{n}``). A document's token score does not
    depend on how many are rescored, so `near` (made for the best ``--rescore``) serves every n below it."""
    return {f"around8:{w}@{n}": _rescored(hybrid, near, w, n) for w in (0.4, 0.5) for n in STAGE_DEPTHS}


def codec_sample(args: argparse.Namespace) -> dict[str, Any]:
    """Token MaxSim alone (nDCG@10 per corpus and split) with each codec of `--codecs` fitted on the first N documents'
    tokens for each N of ``--codec-sample`` (`encode-tokens` fits on its first shard: 32 documents by default, 8 in
    this study), to see what a projection's fitting sample costs (section ``codec_sample``; ``{spec}@{N}``)."""
    from benchmarks.search.hybrid.quality import _ndcg
    from lengthwise.core.models import load_plain_model
    from lengthwise.longdoc.token_vectors import encode_token_vectors
    from lengthwise.search.tokens import TokenSide

    model = load_plain_model(args.model)
    table: dict[str, Any] = {}
    for name, entry in _retrieval_sets(args).items():
        if name not in args.sets:
            continue
        folder, _ = _tokens_folder(name, _corpus_file(name, entry, args), args)
        reference = TokenSide.open(folder)
        counts = sorted({min(n, len(reference.doc_ids)) for n in args.codec_sample})
        table[f"{name}:sample_tokens"] = {str(n): int(reference.offsets[n]) for n in counts}
        sides = {f"{spec}@{n}": _recoded(reference, spec, int(reference.offsets[n]))
                 for spec in args.codecs for n in counts}  # fmt: skip
        for split, queries in entry["splits"].items():
            vectors = [t.vectors for t in encode_token_vectors(model, queries["texts"], role="query")]
            table[f"{name}-{split}"] = {arm: _ndcg(side.scores_many(vectors), list(reference.doc_ids), queries)
                                        for arm, side in sides.items()}  # fmt: skip
            print(f"{name}-{split}: {table[f'{name}-{split}']}", flush=True)
    return table


def synthetic(args: argparse.Namespace) -> dict[str, Any]:
    """Realistic passkey and needle, test (``--per-length`` documents a length, seed 0) and with ``--synthetic-splits
    dev,test`` dev (``--dev-per-length``, seed 1), as the hybrid quality stage makes them: Acc@1 within each length
    of the hybrid, token MaxSim alone, and the hybrid rescored by every token (w = 0.4) and by the tokens of its best
    8 windows (w = 0.3, 0.4, 0.5; the default codec), each query ranking its own length's documents; with
    ``--colbert``, the ColBERT's arms (`colbert_study`'s) too."""
    from benchmarks.search.hybrid._common import _synthetic_sets
    from benchmarks.search.hybrid.quality import _acc1
    from lengthwise.core.models import load_plain_model
    from lengthwise.longdoc.token_vectors import encode_token_vectors
    from lengthwise.search.tokens import TokenSide

    model = load_plain_model(args.model)
    made = _synthetic_sets(argparse.Namespace(per_length=args.per_length, dev_per_length=args.dev_per_length),
                           model.tokenizer)  # fmt: skip
    table: dict[str, Any] = {}
    for name in (f"{task}-{split}" for task in args.synthetic for split in args.synthetic_splits):
        entry = made[name]
        index = _indexed(name, entry["ids"], entry["texts"], args)
        folder, seconds = _tokens_folder(name, args.work / name / "corpus.jsonl", args)
        side = _recoded(TokenSide.open(folder), args.default_codec)
        assert side.doc_ids == list(index.doc_ids), "the token folder's documents in the index's order"
        texts = [item.query for item in entry["data"].items]
        dense = np.asarray(index.embed_queries(texts), dtype=np.float32)
        dense /= np.linalg.norm(dense, axis=1, keepdims=True)
        hybrid = _hybrid(_score_matrices(index, texts, args))
        queries = [t.vectors for t in encode_token_vectors(model, texts, role="query")]
        grouped, tokens = np.full(hybrid.shape, -np.inf), np.zeros(hybrid.shape)
        groups = np.asarray([item.group for item in entry["data"].items])
        for group in np.unique(groups):  # each query ranks its own length's documents (query i asks for document i)
            members = np.flatnonzero(groups == group)
            grouped[np.ix_(members, members)] = hybrid[np.ix_(members, members)]
            tokens[np.ix_(members, members)] = side.scores_many([queries[q] for q in members], members)
        near = _around_matrix(index, side, grouped, dense, queries, 8, args.rescore)
        arms = {"hybrid": grouped, f"tokens:{args.default_codec}": tokens,
                "hybrid+tokens:0.4": _rescored(grouped, tokens, 0.4, args.rescore),
                **{f"around8:{w}": _rescored(grouped, near, w, args.rescore) for w in (0.3, 0.4, 0.5)},
                **_shallower(grouped, near)}  # fmt: skip
        colbert = _colbert_arms(name, args.work / name / "corpus.jsonl", args, list(index.doc_ids))
        if colbert is not None:  # --colbert: its tokens alone and rescoring the hybrid (every token, per length)
            arms.update(colbert(texts, groups))
            arms.update(_colbert_rescored(grouped, tokens, arms["colbert:bin"], args.rescore))
        found = {arm: _acc1(scores, entry["data"]) for arm, scores in arms.items()}
        table[name] = {arm: result["mean"] for arm, result in found.items()}
        table[f"{name}:by_length"] = {arm: result["by_length"] for arm, result in found.items()}
        table[f"{name}:size"] = {"documents": len(side.doc_ids), "tokens": len(side.codes),
                                 "token_encode_seconds": round(seconds, 1)}  # fmt: skip
        print(f"{name}: " + ", ".join(f"{a} {v:.2f}" for a, v in table[name].items()), flush=True)
    return table


def latency(args: argparse.Namespace) -> dict[str, Any]:
    """p50 and p99 of one hybrid query on the corpus's index, without and with the token stage (default codec,
    rescoring 100 and 20 documents by every token, and 100 by the tokens of their best `--around-counts` windows),
    alternated: its vector embedded beforehand (the query's token pass included), and from its text (``_text``:
    the query model's pass included; with the stage, one pass gives both the vector and the tokens)."""
    import lengthwise as lw
    from benchmarks._measure import p50_ms, p99_ms
    from lengthwise.evaluation.data import read_beir
    from lengthwise.longdoc.storage.tokens import encode_tokens

    name = args.sets[0]
    folder = args.work / name / "tokens-auto"
    started = time.perf_counter()
    encode_tokens(_corpus_file(name, _retrieval_sets(args)[name], args), folder, args.model, shard_docs=8,
                  threads=args.threads, show_progress=True)  # fmt: skip
    encoded = time.perf_counter() - started
    index = lw.LongIndex.open(args.work / name / "index")
    texts = list(read_beir(args.qmsum, "test").query_texts)[: args.queries]
    vectors = np.asarray(index.embed_queries(texts), dtype=np.float32)
    arms: dict[str, tuple[float | None, int, int | None]] = {
        "hybrid": (None, 0, None), "tokens@100": (0.4, 100, 0), "tokens@20": (0.4, 20, 0),  # 0: every token
        **{f"tokens@100-around{n}": (0.4, 100, n) for n in args.around_counts}}  # fmt: skip
    spent: dict[str, dict[str, list[float]]] = {arm: {key: [] for key in ("p50", "p99", "p50_text", "p99_text")}
                                                for arm in arms}  # fmt: skip
    for _ in range(args.rounds):
        for arm, (weight, depth, near) in arms.items():
            index.use_tokens(None if weight is None else folder, weight=weight, depth=depth or None, around=near)

            def one(n: int) -> None:  # the query's vector given: the search alone (and the query's token pass)
                index.search([texts[n]], k=10, mode="hybrid", vectors=vectors[n : n + 1], search_threads=1)

            def text(n: int) -> None:  # text in, hits out: the query model's pass(es) included
                index.search([texts[n]], k=10, mode="hybrid", search_threads=1)

            one(0)  # warm
            text(0)
            for key, run in (("", one), ("_text", text)):
                spent[arm][f"p50{key}"].append(round(p50_ms(run, len(texts)), 2))
                spent[arm][f"p99{key}"].append(round(p99_ms(run, len(texts)), 2))
    import statistics

    medians = {arm: {key: statistics.median(values) for key, values in found.items()} for arm, found in spent.items()}
    return {"corpus": name, "queries": len(texts), "rounds": args.rounds, "ms": spent, "median_ms": medians,
            "ratio_p50": {arm: round(m["p50"] / medians["hybrid"]["p50"], 2) for arm, m in medians.items()},
            "ratio_p50_text": {arm: round(m["p50_text"] / medians["hybrid"]["p50_text"], 2)
                               for arm, m in medians.items()},
            "token_encode_seconds_auto": round(encoded, 1), "load": _load()}  # fmt: skip


AROUND_ARMS = ("hybrid", "hybrid+tokens:0.4", "around4:0.4", "around8:0.4", "around16:0.4")


def choose_around(around: dict[str, dict[str, float]]) -> dict[str, Any]:
    """Leave one corpus out over the ``around`` section's corpora (no new scoring): for each corpus held out, the arm
    with the best mean dev nDCG@10 over the others, its test score on the held-out corpus and its regret against
    that corpus's best test arm; beside it, each arm kept fixed everywhere (its worst and mean test regret)."""
    corpora = sorted({key.rsplit("-", 1)[0] for key in around})
    folds: dict[str, Any] = {}
    regrets: dict[str, list[float]] = {arm: [] for arm in AROUND_ARMS}
    for held in corpora:
        others = [c for c in corpora if c != held]
        dev = {arm: sum(around[f"{c}-dev"][arm] for c in others) / len(others) for arm in AROUND_ARMS}
        chosen = max(AROUND_ARMS, key=lambda arm: dev[arm])  # ties: the earlier arm
        test = {arm: around[f"{held}-test"][arm] for arm in AROUND_ARMS}
        best = max(test.values())
        folds[held] = {
            "chosen": chosen,
            "test": test[chosen],
            "best_test": best,
            "regret": round(best - test[chosen], 2),
        }
        for arm in AROUND_ARMS:
            regrets[arm].append(round(best - test[arm], 2))
    fixed = {arm: {"worst_regret": max(r), "mean_regret": round(sum(r) / len(r), 2)} for arm, r in regrets.items()}
    return {"corpora": corpora, "folds": folds, "fixed": fixed}


DEFAULT_ARMS = ("hybrid", "hybrid+tokens:0.4", "around8:0.3", "around8:0.4", "around8:0.5")  # the search's default?
DEPTH_ARMS = ("hybrid", "around8:0.5", *(f"around8:{w}@{n}" for w in (0.4, 0.5) for n in STAGE_DEPTHS))  # how deep?


def _default_rows(results: dict[str, Any]) -> dict[str, dict[str, dict[str, float]]]:
    """model → {"{corpus}-{split}": {arm: score}}: the ``around`` and ``synthetic`` rows of the default model and of
    each model under ``models`` (per-length and size rows left out)."""
    sources = {Path(results.get("model", DEFAULT_MODEL)).name: results, **results.get("models", {})}
    return {model: {key: row for section in ("around", "synthetic") for key, row in found.get(section, {}).items()
                    if ":" not in key} for model, found in sources.items()}  # fmt: skip


def _pick_arm(dev: list[dict[str, float]], arms: tuple[str, ...] = DEFAULT_ARMS) -> dict[str, Any]:
    """The hybrid's rule over these dev rows: each arm's worst regret and mean, the admissible arms (worst regret ≤
    1 point) and the chosen one (the highest mean among them; none admissible: the smallest worst regret)."""
    from benchmarks.search.hybrid._rule import TOLERANCE

    worst = {a: max(max(row[b] for b in arms) - row[a] for row in dev) for a in arms}
    means = {a: float(np.mean([row[a] for row in dev])) for a in arms}
    admissible = [a for a in arms if worst[a] <= TOLERANCE + 1e-9]
    key = (lambda a: -round(means[a], 6)) if admissible else (lambda a: (round(worst[a], 6), -round(means[a], 6)))
    return {"worst_regret": {a: round(w, 2) for a, w in worst.items()},
            "means": {a: round(m, 2) for a, m in means.items()}, "admissible": admissible,
            "chosen": sorted(admissible or arms, key=key)[0]}  # fmt: skip


def choose_default(results: dict[str, Any], arms: tuple[str, ...] = DEFAULT_ARMS) -> dict[str, Any]:
    """The default re-chosen with the token stage among `arms` (`DEFAULT_ARMS`; `DEPTH_ARMS`: how deep it rescores)
    by the hybrid's rule (`_pick_arm`; `benchmarks.search.hybrid._rule.RULE`) over every (corpus, model) whose dev
    and test rows hold all the arms.
    Leave one corpus out: the rule on the other corpora's dev splits (every model), scored on the held-out corpus's
    test split of each model. The rule's corpora (`SETS`) without rows for a model are named under ``missing``."""
    from benchmarks.search.hybrid._rule import SETS

    rows = _default_rows(results)
    pairs = sorted((c, m) for m, table in rows.items() for c in SETS
                   if all(set(arms) <= set(table.get(f"{c}-{s}", {})) for s in ("dev", "test")))  # fmt: skip
    out: dict[str, Any] = {"arms": list(arms), "pairs": [list(p) for p in pairs],
                           "missing": [[c, m] for m in sorted(rows) for c in SETS if (c, m) not in pairs]}  # fmt: skip
    if pairs:
        out.update(_pick_arm([rows[m][f"{c}-dev"] for c, m in pairs], arms))
    out["held_out"] = {}
    for held in sorted({c for c, _ in pairs}):
        rest = [rows[m][f"{c}-dev"] for c, m in pairs if c != held]
        chosen = _pick_arm(rest, arms)["chosen"] if rest else None
        for model in (m for c, m in pairs if c == held and chosen is not None):
            test = rows[model][f"{held}-test"]
            best = max(arms, key=lambda a: test[a])
            out["held_out"][f"{held}/{model}"] = {"chosen": chosen, "test": test[chosen], "best": best,
                                                  "loss": round(test[best] - test[chosen], 2)}  # fmt: skip
    return out


def _results() -> dict[str, Any]:
    """The results file as it is now (read again before each write: two runs of the study may overlap)."""
    return json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}


def _auto_codec(model: str) -> str:
    """The codec `encode-tokens` chooses for `model` by default (`auto_codec` of its dimension)."""
    from lengthwise.core.models import load_plain_model
    from lengthwise.longdoc.storage.tokens import auto_codec

    return auto_codec(int(load_plain_model(model).get_embedding_dimension()))


def _merged(args: argparse.Namespace, sections: dict[str, dict[str, Any]], runs: str, run: dict[str, Any]) -> None:
    """Write `sections` (each merged into the one recorded: a run of some corpora keeps the others' rows) and append
    `run` to the list `runs`: at the top of the results file for the default model, else under ``models`` keyed by
    the model's folder name. The file is read again here: two runs of this study may overlap."""
    from lengthwise.core.results import write_json_atomic

    earlier = _results()
    name = Path(args.model).name
    other = args.model != DEFAULT_MODEL
    target = earlier.get("models", {}).get(name, {}) if other else earlier
    out = {**target, **{key: {**target.get(key, {}), **rows} for key, rows in sections.items()},
           runs: [*target.get(runs, []), run]}  # fmt: skip
    if other:
        out = {**earlier, "models": {**earlier.get("models", {}), name: {
            **out, "model": args.model, "default_codec": args.default_codec, "rescore": args.rescore}}}  # fmt: skip
    write_json_atomic(RESULTS, out)


def _ints(value: str) -> tuple[int, ...]:
    return tuple(int(n) for n in value.split(","))


def _names(value: str) -> tuple[str, ...]:
    return tuple(value.split(","))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    corpus_options(parser, "qmsum")
    parser.add_argument("--codecs", default=",".join(CODECS), type=lambda v: v.split(","))
    parser.add_argument("--default-codec", default="bin",
                        help="the fused arms' codec; auto: what encode-tokens chooses for --model")  # fmt: skip
    parser.add_argument("--colbert", type=Path, default=None, help="also score with this ColBERT model's tokens")
    parser.add_argument("--rescore", type=int, default=100, help="hybrid documents the token side rescores")
    parser.add_argument("--latency", action="store_true", help="time the search with the token stage instead")
    parser.add_argument("--around", action="store_true", help="score only the tokens around the best windows instead")
    parser.add_argument(
        "--choose",
        action="store_true",
        help="the default re-chosen over the recorded corpora and models, the stage among the arms",
    )
    parser.add_argument("--choose-depth", action="store_true",
                        help="the same rule over the stage's depths (STAGE_DEPTHS): section depth_choice")  # fmt: skip
    parser.add_argument("--choose-around", action="store_true",
                        help="leave one corpus out over the recorded around section (around_choice)")  # fmt: skip
    parser.add_argument("--per-length", type=int, default=20, help="--synthetic: test documents a length")
    parser.add_argument("--dev-per-length", type=int, default=20, help="--synthetic: dev documents a length")
    parser.add_argument("--synthetic-splits", default=("test",), type=_names,
                        help="--synthetic: the splits scored, e.g. dev,test")  # fmt: skip
    lists = (
        ("--around-counts", _ints, "--latency: also time the stage around these counts of best windows, e.g. 4,8"),
        ("--synthetic", _names, "passkey,needle: the realistic synthetic tasks' test sets instead (synthetic)"),
        ("--codec-sample", _ints, "fit --codecs on the first N documents' tokens for each N, e.g. 8,32,450"),
    )
    for flag, kind, text in lists:  # comma-separated lists, empty by default
        parser.add_argument(flag, default=(), type=kind, help=text)
    parser.add_argument("--queries", type=int, default=40, help="--latency: queries timed")
    parser.add_argument("--rounds", type=int, default=3, help="--latency: alternated rounds (medians)")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    torch.set_num_threads(args.threads)
    from lengthwise.core.results import environment, write_json_atomic

    started, load = time.perf_counter(), _load()
    if args.default_codec == "auto":
        args.default_codec = _auto_codec(args.model)
    if args.model != DEFAULT_MODEL:  # another model family: its own work folder, its section under "models"
        args.work = args.work / f"model-{Path(args.model).name}"

    def run(**fields: Any) -> dict[str, Any]:
        return {"sets": list(args.sets), "command": command_line("benchmarks.search.tokens", argv),
                "load": [load, _load()], "seconds": round(time.perf_counter() - started), "environment": environment(),
                **fields}  # fmt: skip

    if args.choose or args.choose_depth:
        earlier = _results()
        section, arms = ("depth_choice", DEPTH_ARMS) if args.choose_depth else ("default_choice", DEFAULT_ARMS)
        write_json_atomic(RESULTS, {**earlier, section: {**choose_default(earlier, arms), "command": command_line(
            "benchmarks.search.tokens", argv)}})  # fmt: skip
        return
    if args.choose_around:
        earlier = _results()
        choice = {**choose_around(earlier["around"]), "command": command_line("benchmarks.search.tokens", argv)}
        write_json_atomic(RESULTS, {**earlier, "around_choice": choice})
        return
    if args.latency:
        timing = {**latency(args), "load_before": load, "environment": environment(),
                  "command": command_line("benchmarks.search.tokens", argv)}  # fmt: skip
        write_json_atomic(RESULTS, {**_results(), "latency": timing})
        return
    if args.synthetic:
        scored = synthetic(args)
        _merged(args, {"synthetic": scored}, "synthetic_runs", run(
            sets=[], tasks=list(args.synthetic), splits=list(args.synthetic_splits), per_length=args.per_length,
            dev_per_length=args.dev_per_length))  # fmt: skip
        return
    if args.colbert is not None:
        scored = colbert_study(args)
        earlier = _results()
        found = {**earlier.get("colbert", {}), **scored}
        command = f"python -m benchmarks.search.tokens --sets {','.join(args.sets)} --colbert {args.colbert}"
        write_json_atomic(RESULTS, {**earlier, "colbert": found, "colbert_load": [load, _load()],
                                    "colbert_model": str(args.colbert), "colbert_command": command})  # fmt: skip
        return
    if args.around:
        _merged(args, {"around": around(args)}, "around_runs", run())
        return
    if args.codec_sample:
        _merged(args, {"codec_sample": codec_sample(args)}, "codec_sample_runs", run())
        return
    result = study(args)
    _merged(args, {"table": result["table"], "sizes": result["sizes"]}, "runs", run())


if __name__ == "__main__":
    main()
