"""The token side of a search: a document scored by every one of its tokens (late interaction, MaxSim).

`TokenSide` reads a token folder (`lengthwise encode-tokens`: checked shards of coded token vectors, their
documents' rows and character spans, the codec) and scores a query's token vectors against documents: for each
query token its best document token's dot product, summed over the query's tokens (``sentence_transformers.util.
maxsim`` on the decoded vectors; `maxsim_exact` is that reference). The query's tokens are projected by the codec,
not coded. `passage` gives the span of the document where the query's best-matched tokens gather.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from lengthwise.core.errors import LongDocError, SettingError
from lengthwise.core.shards import MANIFEST, REPAIR, SPANS, read_manifest, shards
from lengthwise.core.token_codec import CODEC_FILE, TokenCodec, read_codec
from lengthwise.search.rows import documents_of
from lengthwise.search.types import ModelRecord, TokenSettings

__all__ = [
    "TOKEN_AROUND",
    "TOKEN_BLOCK",
    "TOKEN_DEPTH",
    "TOKEN_PASSAGE",
    "TOKEN_WEIGHT",
    "TokenSide",
    "TokenStage",
    "flat_rows",
    "maxsim_exact",
]

TOKEN_BLOCK = 8192  # document tokens decoded and scored at once (12 MB of float32 at 384 dimensions)


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
            ranges = np.stack([self.offsets[docs], self.offsets[docs + 1]], axis=1)
            places = np.arange(len(docs))
        else:
            ranges = np.asarray([r for spans in rows for r in spans], dtype=np.int64).reshape(-1, 2)
            places = np.repeat(np.arange(len(rows)), [len(spans) for spans in rows])
        return self.scores_of_ranges(queries, len(docs), ranges, places)

    def scores_of_ranges(
        self, queries: Sequence[np.ndarray], count: int, ranges: np.ndarray, places: np.ndarray
    ) -> np.ndarray:
        """(len(queries), count) MaxSim over the token rows of `ranges` (R, 2) (absolute, ``[start, end)``; they may
        overlap: each token is scored once), range r read for the document in place ``places[r]`` (< `count`; two
        places never share a row); a place given no token scores −inf. The rows are gathered, decoded and scored
        `TOKEN_BLOCK` at a time, each block once for all the queries."""
        projected = [self.codec.project(query).astype(np.float32) for query in queries]  # (q, d) each
        if not projected:
            return np.empty((0, count), dtype=np.float64)
        sizes = np.cumsum([0] + [len(p) for p in projected])
        together = np.concatenate(projected)
        prepared = self.codec.prepare(together)  # the query side once for every block
        best = np.full((len(together), count), -np.inf, dtype=np.float32)
        flat, owners = flat_rows(np.asarray(ranges, dtype=np.int64).reshape(-1, 2), np.asarray(places, np.int64))
        for first in range(0, len(flat), TOKEN_BLOCK):
            owner = owners[first : first + TOKEN_BLOCK]
            products = self.codec.products(prepared, self.codes[flat[first : first + TOKEN_BLOCK]])  # every query's
            runs = np.concatenate([[0], np.flatnonzero(owner[1:] != owner[:-1]) + 1])  # each owner's rows here
            pieces = np.maximum.reduceat(products, runs, axis=1)  # (tokens, runs): each run's best token
            np.maximum.at(best.T, owner[runs], pieces.T)  # a view: an owner's rows may go on in the next block
        return np.stack([best[a:b].sum(axis=0, dtype=np.float64) for a, b in itertools.pairwise(sizes)]).reshape(
            len(projected), count
        )

    def rows_within(self, doc: int, spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
        """The token rows (absolute, merged ranges in order) of document `doc` whose token starts inside one of the
        character `spans` (``text[start:end]``, e.g. a document's best windows)."""
        merged: list[tuple[int, int]] = []
        for lo, hi in sorted(map(tuple, self.ranges_within(doc, spans).tolist())):
            if lo >= hi:
                continue
            if merged and lo <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
            else:
                merged.append((lo, hi))
        return merged

    def ranges_within(self, doc: int, spans: np.ndarray | Sequence[tuple[int, int]]) -> np.ndarray:
        """(len(spans), 2) int64: for each character span of document `doc`, the absolute token rows ``[start,
        end)`` whose token starts inside it (empty where none; not merged: `flat_rows` reads overlaps once)."""
        first = int(self.offsets[doc])
        starts = self.starts[first : int(self.offsets[doc + 1])]
        edges = np.asarray(spans, dtype=np.int64).reshape(-1, 2)  # every span's two ends looked up at once
        return first + np.searchsorted(starts, edges.ravel(), "left").reshape(-1, 2)

    def passage(self, query: np.ndarray, doc: int, tokens: int = 128) -> tuple[int, int, float]:
        """(start, end, score) of the document's span of `tokens` tokens holding most of the query's best matches:
        each query token's best document token adds its similarity where it sits; the span with the largest sum
        wins (ties: the earliest)."""
        codes = self.codes[self.offsets[doc] : self.offsets[doc + 1]]
        similarity = self.codec.products(self.codec.project(query), codes)  # (q, n)
        best = similarity.argmax(axis=1)
        weight = np.zeros(len(codes))
        np.add.at(weight, best, similarity[np.arange(len(best)), best])
        width = min(tokens, len(codes))
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


TOKEN_WEIGHT = 0.5  # the token side's share of a rescored hybrid score: the hybrid's rule over seven corpus-model pairs
# (docs/longdoc.md, "Is the stage the default?"; 0.4 before, from QMSum's dev split alone)
TOKEN_DEPTH = 30  # the hybrid's best documents the token side rescores: the rule's best arm that serves ≥ 0.7× the
# default's throughput (docs/longdoc.md, "How many documents the stage rescores"; 100 before)
TOKEN_AROUND: int | None = 8  # a rescored document's best windows whose tokens are read (None: every token)
TOKEN_PASSAGE = 128  # the tokens of a hit's `matched` passage (`TokenSide.passage`)


@dataclass(eq=False)
class TokenStage:
    """The token side as a stage of a hybrid search: the hybrid's `depth` best documents rescored as
    ``(1 − weight) · z(hybrid) + weight · z(token MaxSim)`` (z-scores over those documents), the rest dropped.

    Args:
        side: The token folder, read.
        rows: Each of the index's documents' row in `side` (the index numbers its documents in its own order).
        encode: Queries → each one's token vectors, as the folder's model reads them.
        weight: The token side's share, in [0, 1].
        depth: The hybrid's best documents rescored (where more are asked for, the rest follow in its order).
        around: Score a document by the tokens inside its `around` best windows (by the dense side's cosine with
            the query) only, not by all its tokens (None: every token).
    """

    side: TokenSide
    rows: np.ndarray
    encode: Callable[[Sequence[str]], list[np.ndarray]]
    weight: float = TOKEN_WEIGHT
    depth: int = TOKEN_DEPTH
    around: int | None = None
    _windows: np.ndarray | None = field(default=None, init=False, repr=False)  # `window_tokens`'s (W, 2); −1: unread

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

    def window_tokens(self, rows: np.ndarray, offsets: np.ndarray, spans: Callable[[int], np.ndarray]) -> np.ndarray:
        """(len(rows), 2) int64: the token rows ``[start, end)`` (absolute, in `side`) whose tokens start inside each
        of the index's window `rows` (`offsets`: the index's window offsets; `spans(doc)`: the character spans of
        every window of document `doc`). A document's windows are looked up the first time one is asked for and
        kept: 16 bytes a window of the index, filled as searches reach its documents."""
        if self._windows is None or len(self._windows) != int(offsets[-1]):
            self._windows = np.full((int(offsets[-1]), 2), -1, dtype=np.int64)
        known = self._windows
        unread = rows[known[rows, 0] < 0]
        for doc in np.unique(documents_of(offsets, unread)).tolist():  # each written whole: a racing search reads
            first, last = int(offsets[doc]), int(offsets[doc + 1])  # it whole or computes it again, the same
            known[first:last] = self.side.ranges_within(int(self.rows[doc]), spans(doc))
        return known[rows]

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
        windows: Callable[[np.ndarray, int], tuple[np.ndarray, np.ndarray]] | None = None,
    ) -> tuple[np.ndarray, ...]:
        """(documents, scores, token scores) of the `k` best after rescoring the hybrid's `depth` best; `docs` and
        `fused`: the hybrid's documents (the index's numbers) and fused scores, in any order; `query`: the query's
        token vectors; `windows(docs, n)`: the token rows of each of `docs`' `n` best windows for this query, as
        (ranges (R, 2), each range's place in `docs`) (`window_tokens`; read when the stage scores `around` them;
        without it, every token is scored). Where `k` exceeds the depth, the hybrid's next documents follow the
        rescored ones in its order, scored as if their tokens matched as little as the least of those read (their
        token score NaN: not read), so a search's first `depth` hits do not depend on `k`."""
        from lengthwise.core.fusion import fuse_normalised, normalised

        order = np.argsort(-fused, kind="stable")[: max(self.depth, k)]
        order, rest = order[: self.depth], order[self.depth :]
        chosen = docs[order]
        if self.around is not None and windows is not None:
            ranges, places = windows(chosen, self.around)
            tokens = self.side.scores_of_ranges([query], len(chosen), ranges, places)[0]
        else:
            tokens = self.side.scores_many([query], self.rows[chosen])[0]
        scores = fuse_normalised([fused[order], tokens], [1.0 - self.weight, self.weight], "zscore")
        best = np.argsort(-scores, kind="stable")[:k]
        found, kept, read = docs[order[best]], scores[best], tokens[best]
        if len(rest):  # below every rescored document: hybrid z-scores on the rescored ones' scale, tokens at least
            spread = float(fused[order].std()) if len(order) > 1 else 0.0
            hybrid = (fused[rest] - fused[order].mean()) / spread if spread > 0 else np.zeros(len(rest))
            floor = float(normalised(tokens, "zscore").min())
            below = (1.0 - self.weight) * hybrid + self.weight * floor
            found, kept = np.concatenate([found, docs[rest]]), np.concatenate([kept, below])
            read = np.concatenate([read, np.full(len(rest), np.nan)])
        return found, kept, read


def flat_rows(ranges: np.ndarray, places: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every row of the row `ranges` (R, 2) once per place, with the place of the range it came from, a place's rows
    ascending and together: a range overlapping an earlier one of its place is cut where that one ends."""
    order = np.lexsort((ranges[:, 0], places))  # by place, then start
    starts, ends, owners = ranges[order, 0], ranges[order, 1], places[order]
    shift = owners * (1 << 40)  # a place's rows after every earlier place's: one running max serves them all
    reached = np.maximum.accumulate(ends + shift) - shift  # the furthest row a range of this place up to here covers
    if len(starts) > 1:
        same = owners[1:] == owners[:-1]
        starts[1:][same] = np.maximum(starts[1:][same], reached[:-1][same])  # what earlier ranges hold, dropped
    lengths = np.maximum(ends - starts, 0)
    kept = lengths > 0
    starts, lengths, owners = starts[kept], lengths[kept], owners[kept]
    if not len(starts):
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    steps = np.ones(int(lengths.sum()), dtype=np.int64)  # consecutive rows, a jump where each range begins
    steps[0] = starts[0]
    steps[np.cumsum(lengths)[:-1]] = starts[1:] - (starts[:-1] + lengths[:-1] - 1)
    return np.cumsum(steps), np.repeat(owners, lengths)
