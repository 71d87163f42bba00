"""The token side of a search: a document scored by every one of its tokens (late interaction, MaxSim).

`TokenSide` reads a token folder (`lengthwise encode-tokens`: checked shards of coded token vectors, their
documents' rows and character spans, the codec) and scores a query's token vectors against documents: for each
query token its best document token's dot product, summed over the query's tokens (``sentence_transformers.util.
maxsim`` on the decoded vectors; `maxsim_exact` is that reference). The query's tokens are projected by the codec,
not coded. `passage` gives the span of the document where the query's best-matched tokens gather.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from lengthwise.core.errors import LongDocError, SettingError
from lengthwise.core.shards import MANIFEST, REPAIR, SPANS, read_manifest, shards
from lengthwise.core.token_codec import CODEC_FILE, TokenCodec, read_codec
from lengthwise.search.types import ModelRecord, TokenSettings

__all__ = ["TOKEN_AROUND", "TOKEN_BLOCK", "TOKEN_DEPTH", "TOKEN_WEIGHT", "TokenSide", "TokenStage", "maxsim_exact"]

TOKEN_BLOCK = 2048  # document tokens decoded and scored at once (3 MB of float32 at 384 dimensions: in cache)


@dataclass(eq=False)
class TokenSide:
    """A token folder in memory: `codes` (T, bytes), `offsets` (n + 1,) the rows each document owns, `spans`
    (T, 2) int32 memory-mapped per shard, the `codec`, the document ids and the folder's settings."""

    folder: Path
    doc_ids: list[str]
    codes: np.ndarray
    offsets: np.ndarray
    span_parts: list[np.ndarray]
    codec: TokenCodec
    settings: TokenSettings
    model: ModelRecord

    @classmethod
    def open(cls, folder: str | os.PathLike[str]) -> TokenSide:
        """Read a token folder, every shard checked (a damaged one raises `LongDocError` naming it)."""
        folder = Path(folder)
        if not (folder / MANIFEST).is_file() or not (folder / CODEC_FILE).is_file():
            raise SettingError("tokens", str(folder), "not a token folder; make one with `lengthwise encode-tokens`")
        settings: TokenSettings = read_manifest(folder)["settings"]
        if settings.get("kind") != "tokens":
            raise SettingError(
                "tokens", str(folder), "holds window embeddings, not tokens; use `lengthwise encode-tokens`"
            )
        codec = read_codec(folder)
        assert codec is not None  # checked above
        ids: list[str] = []
        codes, counts, spans = [], [], []
        for shard in shards(folder):
            if problem := shard.problem():
                raise LongDocError(None, None, f"{shard.stem}.npy: damaged or incomplete shard ({problem}); {REPAIR}")
            ids.extend(shard.ids())
            codes.append(np.load(f"{shard.stem}.npy", allow_pickle=False))
            counts.append(np.diff(np.load(f"{shard.stem}.offsets.npy", allow_pickle=False)))
            spans.append(np.load(f"{shard.stem}{SPANS}", allow_pickle=False, mmap_mode="r"))
        if not ids:
            raise SettingError("tokens", str(folder), "holds no finished shard; run `lengthwise encode-tokens` on it")
        model_file = folder / "model.json"
        model: ModelRecord = json.loads(model_file.read_text(encoding="utf-8")) if model_file.is_file() else {}
        offsets = np.concatenate([[0], np.cumsum(np.concatenate(counts))]).astype(np.int64)
        return cls(folder, ids, np.concatenate(codes), offsets, spans, codec, settings, model)

    @cached_property
    def numbers(self) -> dict[str, int]:
        """Each document id's row in `offsets`."""
        return {doc_id: n for n, doc_id in enumerate(self.doc_ids)}

    @cached_property
    def starts(self) -> np.ndarray:
        """(T,) int32: each token's first character in its document, read from the span shards once (4 bytes a
        token in memory; `rows_within` reads a document's in one slice)."""
        return np.concatenate([np.asarray(part[:, 0], dtype=np.int32) for part in self.span_parts])

    @property
    def bytes_per_token(self) -> int:
        return self.codec.bytes_per_token

    def vectors(self, doc: int) -> np.ndarray:
        """Document `doc`'s decoded token vectors (n, d) float32."""
        return self.codec.decode(self.codes[self.offsets[doc] : self.offsets[doc + 1]])

    def spans(self, doc: int) -> np.ndarray:
        """Document `doc`'s token spans (n, 2): ``text[start:end]`` is the token."""
        first, last = int(self.offsets[doc]), int(self.offsets[doc + 1])
        out, base = [], 0
        for part in self.span_parts:
            lo, hi = max(first - base, 0), min(last - base, len(part))
            if lo < hi:
                out.append(np.asarray(part[lo:hi]))
            base += len(part)
        return np.concatenate(out) if out else np.empty((0, 2), dtype=np.int32)

    def scores(self, query: np.ndarray, docs: Sequence[int] | np.ndarray | None = None) -> np.ndarray:
        """MaxSim of one query's token vectors `query` (q, D) (unit rows, as `encode_token_vectors` gives) against
        documents `docs` (numbers; None: every document), as float64, in the order given."""
        return self.scores_many([query], docs)[0]

    def scores_many(
        self,
        queries: Sequence[np.ndarray],
        docs: Sequence[int] | np.ndarray | None = None,
        rows: Sequence[Sequence[tuple[int, int]]] | None = None,
    ) -> np.ndarray:
        """(len(queries), len(docs)) MaxSim of several queries against the same documents: each block of document
        tokens is decoded once for all of them. `rows`: per document, the token rows scored (ranges of absolute
        rows, `rows_within`) instead of all its tokens; a document given none scores −inf."""
        docs = np.arange(len(self.doc_ids)) if docs is None else np.asarray(docs, dtype=np.int64)
        if rows is None:
            rows = [[(int(self.offsets[d]), int(self.offsets[d + 1]))] for d in docs.tolist()]
        projected = [self.codec.project(query).astype(np.float32) for query in queries]  # (q, d) each
        if self.codec.bits == 8:
            assert self.codec.scale is not None
            projected = [p * self.codec.scale for p in projected]  # int8's decode folded in: codes · (q ⊙ scale)
        best = [np.full((len(p), len(docs)), -np.inf, dtype=np.float32) for p in projected]
        for ranges, starts, places in self._blocks(rows):
            stacked = np.concatenate([self.codes[a:b] for a, b in ranges])
            raw = stacked.astype(np.float32) if self.codec.bits == 8 else self.codec.decode(stacked)
            for query, found in zip(projected, best, strict=True):
                pieces = np.maximum.reduceat(query @ raw.T, starts, axis=1)  # (q, pieces): each piece's best token
                np.maximum.at(found.T, places, pieces.T)  # a view: a document may have several pieces here
        return np.stack([found.sum(axis=0, dtype=np.float64) for found in best]).reshape(len(projected), len(docs))

    @staticmethod
    def _blocks(
        ranges: Sequence[Sequence[tuple[int, int]]],
    ) -> Iterator[tuple[list[tuple[int, int]], np.ndarray, np.ndarray]]:
        """Blocks of at most `TOKEN_BLOCK` document tokens, decoded and scored together while they sit in the CPU's
        cache: (row ranges, where each piece starts in the block, each piece's place in `ranges`: its document). A
        range longer than a block is cut into pieces of a block; no block holds two pieces of one range."""
        rows: list[tuple[int, int]] = []
        starts: list[int] = []
        places: list[int] = []
        size = 0
        for place, spans in enumerate(ranges):
            for first, last in spans:
                for start in range(first, last, TOKEN_BLOCK):
                    stop = min(start + TOKEN_BLOCK, last)
                    if size and size + stop - start > TOKEN_BLOCK:
                        yield rows, np.asarray(starts), np.asarray(places)
                        rows, starts, places, size = [], [], [], 0
                    rows.append((start, stop))
                    starts.append(size)
                    places.append(place)
                    size += stop - start
        if rows:
            yield rows, np.asarray(starts), np.asarray(places)

    def rows_within(self, doc: int, spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
        """The token rows (absolute, merged ranges in order) of document `doc` whose token starts inside one of the
        character `spans` (``text[start:end]``, e.g. a document's best windows)."""
        first = int(self.offsets[doc])
        starts = self.starts[first : int(self.offsets[doc + 1])]
        edges = np.asarray(spans, dtype=np.int64).reshape(-1, 2)  # every span's two ends looked up at once
        found = np.searchsorted(starts, edges.ravel(), "left").reshape(-1, 2)
        merged: list[tuple[int, int]] = []
        for lo, hi in sorted(map(tuple, found.tolist())):
            if lo >= hi:
                continue
            if merged and lo <= merged[-1][1] - first:
                merged[-1] = (merged[-1][0], max(merged[-1][1], first + hi))
            else:
                merged.append((first + lo, first + hi))
        return merged

    def passage(self, query: np.ndarray, doc: int, tokens: int = 128) -> tuple[int, int, float]:
        """(start, end, score) of the document's span of `tokens` tokens holding most of the query's best matches:
        each query token's best document token adds its similarity where it sits; the span with the largest sum
        wins (ties: the earliest)."""
        vectors = self.vectors(doc)  # (n, d)
        similarity = self.codec.project(query).astype(np.float32) @ vectors.T  # (q, n)
        best = similarity.argmax(axis=1)
        weight = np.zeros(len(vectors))
        np.add.at(weight, best, similarity[np.arange(len(best)), best])
        width = min(tokens, len(vectors))
        sums = np.convolve(weight, np.ones(width), mode="valid")  # sums[i]: tokens i .. i + width - 1
        first = int(np.argmax(sums))
        spans = self.spans(doc)
        return int(spans[first, 0]), int(spans[first + width - 1, 1]), float(sums[first])


def maxsim_exact(query: np.ndarray, documents: Sequence[np.ndarray]) -> np.ndarray:
    """The reference: `sentence_transformers.util.maxsim` of one query (q, d) against decoded documents, float64."""
    import torch
    from sentence_transformers.util import maxsim

    scores = maxsim([torch.from_numpy(np.asarray(query, dtype=np.float32))],
                    [torch.from_numpy(np.asarray(d, dtype=np.float32)) for d in documents])  # fmt: skip
    return scores.numpy()[0].astype(np.float64)


TOKEN_WEIGHT = 0.4  # the token side's share of a rescored hybrid score (docs/longdoc.md, "Token vectors")
TOKEN_DEPTH = 100  # the hybrid's best documents the token side rescores
TOKEN_AROUND: int | None = 8  # a rescored document's best windows whose tokens are read (None: every token)


@dataclass(eq=False)
class TokenStage:
    """The token side as a stage of a hybrid search: the hybrid's `depth` best documents rescored as
    ``(1 − weight) · z(hybrid) + weight · z(token MaxSim)`` (z-scores over those documents), the rest dropped.

    Args:
        side: The token folder, read.
        rows: Each of the index's documents' row in `side` (the index numbers its documents in its own order).
        encode: Queries → each one's token vectors, as the folder's model reads them.
        weight: The token side's share, in [0, 1].
        depth: The hybrid's best documents rescored (at least the k asked for).
        around: Score a document by the tokens inside its `around` best windows (by the dense side's cosine with
            the query) only, not by all its tokens (None: every token).
    """

    side: TokenSide
    rows: np.ndarray
    encode: Callable[[Sequence[str]], list[np.ndarray]]
    weight: float = TOKEN_WEIGHT
    depth: int = TOKEN_DEPTH
    around: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.weight, (int, float)) or not 0.0 <= self.weight <= 1.0:
            raise SettingError("token_weight", self.weight, "the token side's weight must be in [0, 1]")
        if self.depth < 1:
            raise SettingError("token_depth", self.depth, "must be ≥ 1")
        if self.around is not None and self.around < 1:
            raise SettingError("token_around", self.around, "must be ≥ 1 (None: every token)")

    @classmethod
    def bound(
        cls,
        side: TokenSide,
        doc_ids: Sequence[str],
        encode: Callable[[Sequence[str]], list[np.ndarray]],
        *,
        weight: float = TOKEN_WEIGHT,
        depth: int = TOKEN_DEPTH,
        around: int | None = None,
    ) -> TokenStage:
        """The stage for an index holding `doc_ids`; refused when the token folder lacks one of them."""
        missing = [doc_id for doc_id in doc_ids if doc_id not in side.numbers]
        if missing:
            raise SettingError("tokens", str(side.folder), f"holds no tokens for {len(missing)} of the index's "
                               f"documents (first: {missing[0]!r}); encode the index's corpus with "
                               "`lengthwise encode-tokens`")  # fmt: skip
        rows = np.asarray([side.numbers[doc_id] for doc_id in doc_ids], dtype=np.int64)
        return cls(side, rows, encode, weight, depth, around)

    def describe(self) -> dict[str, object]:
        """What a result records of the stage: the folder, its codec and model, the weight and depth."""
        return {"folder": str(self.side.folder), "codec": self.side.codec.spec, "model": self.side.settings["model"],
                "weight": self.weight, "depth": self.depth,
                **({} if self.around is None else {"around": self.around})}  # fmt: skip

    def rescore(
        self,
        docs: np.ndarray,
        fused: np.ndarray,
        query: np.ndarray,
        k: int,
        windows: Callable[[int, int], Sequence[tuple[int, int]]] | None = None,
    ) -> tuple[np.ndarray, ...]:
        """(documents, scores, token scores) of the `k` best after rescoring; `docs` and `fused`: the hybrid's
        documents (the index's numbers) and fused scores, in any order; `query`: the query's token vectors;
        `windows(doc, n)`: the character spans of the document's `n` best windows for this query (read when the
        stage scores `around` them; without it, every token is scored)."""
        from lengthwise.core.fusion import fuse_normalised

        order = np.argsort(-fused, kind="stable")[: max(self.depth, k)]
        chosen = docs[order]
        rows = None
        if self.around is not None and windows is not None:
            rows = [self.side.rows_within(int(self.rows[d]), windows(int(d), self.around)) for d in chosen]
        tokens = self.side.scores_many([query], self.rows[chosen], rows)[0]
        scores = fuse_normalised([fused[order], tokens], [1.0 - self.weight, self.weight], "zscore")
        best = np.argsort(-scores, kind="stable")[:k]
        return docs[order[best]], scores[best], tokens[best]
