"""A first stage for the token side (issue 64): MUVERA's fixed-dimensional encodings (Dhulipala et al. 2024,
arXiv:2405.19504) against the hybrid's proposals, per corpus and split, from exact scores (section
``first_stage`` of docs/results/token_side.json).

The token stage rescores what the hybrid proposes. A first stage over the tokens themselves would propose what the
windows and BM25 miss; MUVERA turns each document's tokens into one vector whose inner product with a query's
approximates token MaxSim, so any single-vector engine could search it. Here every FDE is scored exactly (no ANN:
the best such an engine could do), and the question is which proposals hold what token MaxSim ranks first:

- ``recall@N:{first}``: of the exact token MaxSim's best 10 documents, the share inside the first stage's best N
  (``hybrid``: the default hybrid; ``fde:k{k}p{p}r{r}``: MUVERA with 2^k buckets, projections to p dimensions, r
  repetitions; ``union``: the hybrid's best N/2 and the FDE's best N/2);
- ``ndcg:{first}@N``: nDCG@10 when the first stage's best N are ranked by token MaxSim alone (the rest below);
- ``ndcg:fde:…`` and ``ndcg:tokens``: the FDE alone and token MaxSim over every document.

Tokens: the study's float16 folder (`benchmarks.search.tokens`), coded one bit a dimension as `encode-tokens`
codes them by default; the FDEs are built from those decoded codes, as a product would build them from its folder.
MUVERA is written here in NumPy (the encoding is ~30 lines; fastembed's `Muvera` would bring fastembed and
onnxruntime into the environment and loops over tokens in Python).

    python -m benchmarks.search.token_first_stage --sets scifact,replies
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import numpy as np

from benchmarks._measure import command_line, recall
from benchmarks.search.hybrid._common import _load, corpus_options
from benchmarks.search.tokens import RESULTS, _results, _splits, _top

DEPTHS = (10, 20, 50, 100)
SETTINGS = ((5, 16, 20), (4, 32, 20), (3, 64, 10))  # (k: 2^k buckets, p: projected dims, r: repetitions)


class Fde:
    """MUVERA's fixed-dimensional encoding: per repetition, SimHash buckets of the token vectors (k random
    hyperplanes), each bucket's vectors summed (a query) or averaged (a document, an empty bucket filled by the
    nearest occupied bucket's first token by Hamming distance), projected by a random ±1 matrix to p dimensions.
    Checked by hand against fastembed 0.9.1's `Muvera.process` given the same random matrices: equal to 1e-5."""

    def __init__(self, dim: int, k: int, p: int, r: int, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        self.k, self.p, self.r = k, p, r
        self.planes = rng.standard_normal((r, dim, k)).astype(np.float32)
        self.projections = (rng.choice([-1.0, 1.0], size=(r, dim, p)) / np.sqrt(p)).astype(np.float32)
        ids = np.arange(2**k)
        self.hamming = np.array([[bin(a ^ b).count("1") for b in ids] for a in ids])

    @property
    def dims(self) -> int:
        return self.r * 2**self.k * self.p

    def encode(self, vectors: np.ndarray, document: bool) -> np.ndarray:
        buckets = 2**self.k
        ids = (np.einsum("nd,rdk->rnk", vectors, self.planes) > 0).astype(np.int64) @ (1 << np.arange(self.k))
        projected = np.einsum("nd,rdp->rnp", vectors, self.projections)
        out = np.zeros((self.r, buckets, self.p), dtype=np.float32)
        for rep in range(self.r):
            np.add.at(out[rep], ids[rep], projected[rep])
            if not document:
                continue
            counts = np.bincount(ids[rep], minlength=buckets)
            full = counts > 0
            out[rep, full] /= counts[full, None]
            occupied = np.flatnonzero(full)  # an empty bucket: the nearest occupied one's first token (ties: lowest)
            for empty in np.flatnonzero(~full):
                nearest = occupied[int(np.argmin(self.hamming[empty, occupied]))]
                out[rep, empty] = projected[rep, int(np.argmax(ids[rep] == nearest))]
        return out.reshape(-1)


def _ranked(candidates: list[np.ndarray], tokens: np.ndarray) -> np.ndarray:
    """(Q, n): each query's candidates ordered by token MaxSim, placed above every other document (−inf)."""
    out = np.full(tokens.shape, -np.inf)
    for q, chosen in enumerate(candidates):
        out[q, chosen] = tokens[q, chosen]
    return out


def _split_arms(hybrid: np.ndarray, tokens: np.ndarray, fdes: dict[str, np.ndarray],
                queries: dict[str, Any], doc_ids: list[str]) -> dict[str, float]:  # fmt: skip
    from benchmarks.search.hybrid.quality import _ndcg

    best = [set(_top(row, 10).tolist()) for row in tokens]
    found = {"ndcg:tokens": _ndcg(tokens, doc_ids, queries), "ndcg:hybrid": _ndcg(hybrid, doc_ids, queries)}
    for name, scores in fdes.items():
        found[f"ndcg:{name}"] = _ndcg(scores, doc_ids, queries)
    firsts = {"hybrid": hybrid, **fdes}
    union_of = next(iter(fdes))
    for depth in DEPTHS:
        proposed = {name: [_top(row, depth) for row in s] for name, s in firsts.items()}
        halves = zip((_top(r, depth // 2) for r in hybrid), (_top(r, depth) for r in fdes[union_of]), strict=True)
        proposed["union"] = [_union(h, f, depth) for h, f in halves]
        for name, tops in proposed.items():
            found[f"recall@{depth}:{name}"] = _recall(best, tops)
            found[f"ndcg:{name}@{depth}"] = _ndcg(_ranked(tops, tokens), doc_ids, queries)
    return found


def _recall(best: list[set[int]], tops: list[np.ndarray]) -> float:
    """Mean share (%) of each query's `best` documents inside its `tops`."""
    return round(100 * recall([t.tolist() for t in tops], [sorted(b) for b in best]), 2)


def _union(hybrid: np.ndarray, fde: np.ndarray, depth: int) -> np.ndarray:
    """The hybrid's best depth/2, filled to `depth` by the FDE's best not among them."""
    taken = set(hybrid.tolist())
    return np.concatenate([hybrid, [d for d in fde.tolist() if d not in taken]])[:depth].astype(int)


def study(args: argparse.Namespace) -> dict[str, Any]:
    table: dict[str, dict[str, float]] = {}
    sizes: dict[str, Any] = {}
    encoders: dict[str, Fde] = {}
    documents: dict[str, dict[str, np.ndarray]] = {}
    for key, index, side, queries, hybrid, token_queries in _splits(args):
        name = key.rsplit("-", 1)[0]
        if name not in documents:
            started, dim = time.perf_counter(), side.vectors(0).shape[1]
            encoders = {f"fde:k{k}p{p}r{r}": Fde(dim, k, p, r) for k, p, r in SETTINGS}
            count = len(side.doc_ids)
            documents[name] = {arm: np.stack([fde.encode(side.vectors(d), document=True) for d in range(count)])
                               for arm, fde in encoders.items()}  # fmt: skip
            sizes[name] = {"documents": count, "tokens": len(side.codes),
                           "fde_bytes_per_document": {arm: 4 * fde.dims for arm, fde in encoders.items()},
                           "token_bytes_per_document": round(side.bytes_per_token * len(side.codes) / count),
                           "fde_seconds": round(time.perf_counter() - started, 1)}  # fmt: skip
        tokens = side.scores_many(token_queries)
        fdes = {arm: np.stack([fde.encode(q, document=False) for q in token_queries]) @ documents[name][arm].T
                for arm, fde in encoders.items()}  # fmt: skip
        table[key] = _split_arms(hybrid, tokens, fdes, queries, list(index.doc_ids))
        print(f"{key}: " + ", ".join(f"{a} {v:.2f}" for a, v in table[key].items()), flush=True)
    return {"table": table, "sizes": sizes}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    corpus_options(parser, "scifact")
    parser.add_argument("--default-codec", default="bin")
    args = parser.parse_args(argv)
    args.codecs = (args.default_codec,)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    torch.set_num_threads(args.threads)
    from lengthwise.core.results import environment, write_json_atomic

    started, load = time.perf_counter(), _load()
    found = study(args)
    earlier = _results()
    mine = earlier.get("first_stage", {})
    run = {"sets": list(args.sets), "command": command_line("benchmarks.search.token_first_stage", argv),
           "load": [load, _load()], "seconds": round(time.perf_counter() - started),
           "environment": environment()}  # fmt: skip
    write_json_atomic(RESULTS, {**earlier, "first_stage": {
        "settings": [list(s) for s in SETTINGS], "depths": list(DEPTHS), "codec": args.default_codec,
        "table": {**mine.get("table", {}), **found["table"]}, "sizes": {**mine.get("sizes", {}), **found["sizes"]},
        "runs": [*mine.get("runs", []), run]}})  # fmt: skip


if __name__ == "__main__":
    main()
