"""The controlled, paired part of the retrieval length-bias audit (METHODS §6): build, embed, rank, compare.

For every sampled (query, relevant document) pair the perturbed sequences are built at the token level, the
distinct ones are decoded to text and embedded once (only these; the corpus embedding is reused), and each is
ranked against the cached corpus with its original left out (`lengthwise.core.search.score_ranks`). Every
setting is then compared with its control on the same pairs (`lengthwise.audit.retrieval.stats`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

import numpy as np
import torch

from lengthwise.audit.retrieval.perturb import (
    build_filler,
    cut_to_fit,
    dilute,
    insert_at_depth,
    repeat,
    shuffled_order,
    word_ids,
)
from lengthwise.audit.retrieval.result import Controlled, PositionUnit, Setting
from lengthwise.audit.retrieval.stats import friedman, paired_shift
from lengthwise.core.embed import TokenView, embed_side
from lengthwise.core.encoder import TextEncoder
from lengthwise.core.errors import DataFormatError
from lengthwise.core.search import exact_search, score_ranks
from lengthwise.core.tokens import split_sentences

if TYPE_CHECKING:
    from lengthwise.audit.retrieval.config import RetrievalAuditConfig, RetrievalSplit
    from lengthwise.audit.retrieval.sides import SearchSides

__all__ = ["Perturbation", "controlled_bias"]

Progress = Callable[[str, int, int], None]
Ref = tuple[str, int]  # ("corpus", document row) or ("bank", perturbed sequence row)


class Perturbation(NamedTuple):
    """What one perturbed sequence is: its family, what it changes, and its label in the results."""

    family: Literal["dilution", "repetition", "position"]
    target: str  # relevant / non_relevant (dilution, repetition); document / sentence (position)
    label: str  # "0.5x", "m=4", "25%": the key of the setting in the record


class _Entry(NamedTuple):
    before: Ref
    after: Ref
    skip: int  # the corpus row the perturbed copy stands in for (left out of its ranking)
    tokens: int  # content tokens of the perturbed sequence
    base_tokens: int  # content tokens of the control (the document, cut to fit, or the unit alone)
    cut: bool  # the document was cut to fit the window first


@dataclass
class _Bank:
    """Distinct perturbed sequences, each embedded once; an unchanged document points at its corpus row."""

    index: dict[tuple[int, ...], int] = field(default_factory=dict)

    def ref(self, ids: Sequence[int], original: Sequence[int], row: int) -> Ref:
        if len(ids) == len(original) and list(ids) == list(original):
            return ("corpus", row)
        return ("bank", self.index.setdefault(tuple(ids), len(self.index)))


def _others(queries, corpus, pair_q, relevant, exclude, rng: random.Random) -> list[int]:
    """Per pair, a random non-relevant document from its query's top 100 (any non-relevant one if none is)."""
    unique = sorted(set(pair_q.tolist()))
    top = exact_search(queries[unique], corpus, 100, exclude=[exclude[q] for q in unique])[1].tolist()
    tops = dict(zip(unique, top, strict=True))
    others = []
    for query in pair_q.tolist():
        candidates = [d for d in tops[query] if d not in relevant[query]]
        if not candidates:
            candidates = [d for d in range(corpus.shape[0]) if d not in relevant[query] and d != exclude[query]]
        if not candidates:
            problem = "every corpus document is relevant to the query; the audit needs non-relevant ones"
            raise DataFormatError(None, None, problem)
        others.append(rng.choice(candidates))
    return others


def _best_sentences(encoder, view, texts, queries, pair_q, pair_rows, config, progress) -> tuple[list[list[int]], int]:
    """Content ids of each pair's document sentence closest to its query (pysbd sentences, document side), and
    how many sentences were embedded."""
    sentences = [split_sentences(text) or [text] for text in texts]
    flat = [sentence for group in sentences for sentence in group]
    embedded = embed_side(encoder.encode_documents, flat, "embedding sentences", config.batch_size, progress)
    offsets = np.cumsum([0, *(len(group) for group in sentences)])
    chosen = []
    for query, row in zip(pair_q.tolist(), pair_rows, strict=True):
        similarity = embedded[offsets[row] : offsets[row + 1]] @ queries[query]  # (S,)
        chosen.append(sentences[row][int(torch.argmax(similarity))])
    encoded = view.tokenizer(chosen, add_special_tokens=False, verbose=False)["input_ids"]
    return [list(ids) for ids in encoded], len(flat)


def _pair_entries(doc, other, sentence, filler, row: int, other_row: int, window: int, total: int, bank, config):
    """Every perturbed sequence of one pair, keyed by its `Perturbation`."""
    entries: dict[Perturbation, _Entry] = {}
    for ratio in config.dilution:
        base = cut_to_fit(doc, int(window / (1 + ratio)))
        after = dilute(base, filler, min(max(1, int(ratio * len(base) + 0.5)), window - len(base)))
        entries[Perturbation("dilution", "relevant", f"{ratio:g}x")] = _Entry(
            bank.ref(base, doc, row), bank.ref(after, doc, row), row, len(after), len(base), len(base) < len(doc)
        )
    for m in config.repetition:
        for target, ids, source in (("relevant", doc, row), ("non_relevant", other, other_row)):
            base = cut_to_fit(ids, window // m)
            after = repeat(base, m, window)
            before = bank.ref(base, ids, source)
            entries[Perturbation("repetition", target, f"m={m}")] = _Entry(
                before, bank.ref(after, ids, source), source, len(after), len(base), len(base) < len(ids)
            )
    for unit, ids in (("document", doc), ("sentence", sentence)):
        base = cut_to_fit(ids, total // 2)
        around = filler.head(total - len(base))
        alone = bank.ref(base, doc, row)
        for depth in config.depths:
            after = insert_at_depth(base, around, depth)
            entries[Perturbation("position", unit, f"{depth:.0%}")] = _Entry(
                alone, bank.ref(after, doc, row), row, len(after), len(base), len(base) < len(ids)
            )
    return entries


def _score_and_rank(queries, corpus, embedded, keys: dict[tuple[int, str, int, int], int], exclude):
    """Score and full rank of every (query, ref, left-out row) key: two (K,) arrays."""
    q = torch.as_tensor([key[0] for key in keys], dtype=torch.long)
    rows = torch.as_tensor([key[2] for key in keys], dtype=torch.long)
    in_bank = torch.as_tensor([key[1] == "bank" for key in keys])
    vectors = torch.empty((len(keys), corpus.shape[1]), dtype=corpus.dtype)  # (K, D)
    vectors[in_bank] = embedded[rows[in_bank]]
    vectors[~in_bank] = corpus[rows[~in_bank]]
    scores = (queries[q] * vectors).sum(dim=1)  # (K,)
    skip = np.asarray([key[3] for key in keys])
    ranks = score_ranks(queries, corpus, q.numpy(), scores, skip=skip, exclude=exclude, pair_chunk=512)
    return scores.numpy(), ranks


def _setting(label: str, rows: list[tuple[int, int, _Entry]], scores, ranks, config) -> Setting:
    before, after = np.asarray([r[0] for r in rows]), np.asarray([r[1] for r in rows])
    rank_before, rank_after = ranks[before], ranks[after]
    seed, resamples = config.seed, config.bootstrap_resamples
    return Setting(
        label=label,
        n=len(rows),
        n_cut=sum(entry.cut for _, _, entry in rows),
        tokens_before_mean=float(np.mean([entry.base_tokens for _, _, entry in rows])),
        tokens_mean=float(np.mean([entry.tokens for _, _, entry in rows])),
        rank=paired_shift(rank_before, rank_after, seed=seed, resamples=resamples),
        score=paired_shift(scores[before], scores[after], seed=seed, resamples=resamples),
        recall_before=float(np.mean(rank_before <= config.top_k)),
        recall_after=float(np.mean(rank_after <= config.top_k)),
        delta_rank=(rank_after - rank_before).astype(int).tolist(),
    )


def _position(unit: str, settings: Mapping[Perturbation, Setting], rows, ranks, total: int, config) -> PositionUnit:
    keys = [Perturbation("position", unit, f"{depth:.0%}") for depth in config.depths]
    first = rows[keys[0]]
    alone = ranks[np.asarray([before for before, _, _ in first])]
    after = np.stack([ranks[np.asarray([a for _, a, _ in rows[key]])] for key in keys])
    return PositionUnit(
        unit_tokens_mean=float(np.mean([entry.base_tokens for _, _, entry in first])),
        total_tokens=total,
        alone_recall=float(np.mean(alone <= config.top_k)),
        alone_mean_rank=float(alone.mean()),
        depths={key.label: settings[key] for key in keys},
        friedman=friedman(after),
    )


def controlled_bias(
    encoder: TextEncoder,
    view: TokenView,
    data: RetrievalSplit,
    embedded: tuple[torch.Tensor, torch.Tensor],
    pairs: tuple[np.ndarray, np.ndarray],
    relevant: list[set[int]],
    exclude: list[int],
    window: int,
    config: RetrievalAuditConfig,
    progress: Progress,
    sides: SearchSides | None = None,
    searches: Sequence[str] = (),
) -> tuple[Controlled, dict[str, Any], dict[str, Controlled]]:
    """The controlled section for the given (query rows, document rows) pairs, what it cost, and the section under
    each of `searches` (lexical, hybrid: scored through `sides` on the same keys)."""
    queries, corpus = embedded
    pair_q, pair_d = pairs
    # one seeded generator per purpose (and per pair for filler), so two encoders audited with the same seed get
    # the same filler around the same documents: their audits compare pair by pair
    rng = random.Random(f"others:{config.seed}")
    tokenizer, total = view.tokenizer, config.position_length or window
    others = _others(queries, corpus, pair_q, relevant, exclude, rng)
    docs = sorted(set(pair_d.tolist()) | set(others))
    encoded = tokenizer([data.doc_texts[d] for d in docs], add_special_tokens=False, verbose=False)["input_ids"]
    tokens = {d: list(ids) for d, ids in zip(docs, encoded, strict=True)}
    relevant_rows = sorted(set(pair_d.tolist()))
    position = {d: i for i, d in enumerate(relevant_rows)}
    texts = [data.doc_texts[d] for d in relevant_rows]
    sentences, n_sentences = _best_sentences(
        encoder, view, texts, queries, pair_q, [position[d] for d in pair_d.tolist()], config, progress
    )
    pool = random.Random(f"pool:{config.seed}").sample(
        range(len(data.doc_texts)), min(config.filler_pool, len(data.doc_texts))
    )
    pool_words = word_ids(tokenizer, [data.doc_texts[d] for d in pool])
    bank, per_pair = _Bank(), []
    for p, (query, row, other) in enumerate(zip(pair_q.tolist(), pair_d.tolist(), others, strict=True)):
        skip = {i for i, d in enumerate(pool) if d in relevant[query] or d == row}
        order = shuffled_order(len(pool), random.Random(f"filler:{config.seed}:{query}:{row}"), skip)
        filler = build_filler(pool_words, order, max(window, total))
        per_pair.append(
            (
                query,
                _pair_entries(
                    tokens[row], tokens[other], sentences[p], filler, row, other, window, total, bank, config
                ),
            )
        )
    sequences = [list(ids) for ids in bank.index]
    decoded = [tokenizer.decode(ids) for ids in sequences]
    back = tokenizer(decoded, add_special_tokens=False, verbose=False)["input_ids"] if decoded else []
    roundtrip = float(np.mean([list(b) == s for b, s in zip(back, sequences, strict=True)])) if sequences else 1.0
    stage = "embedding perturbed documents"
    vectors = embed_side(encoder.encode_documents, decoded, stage, config.batch_size, progress) if decoded else corpus
    keys: dict[tuple[int, str, int, int], int] = {}
    rows: dict[Perturbation, list[tuple[int, int, _Entry]]] = {}
    for query, entries in per_pair:
        for name, entry in entries.items():
            before = keys.setdefault((query, *entry.before, entry.skip), len(keys))
            after = keys.setdefault((query, *entry.after, entry.skip), len(keys))
            rows.setdefault(name, []).append((before, after, entry))
    scores, ranks = _score_and_rank(queries, corpus, vectors, keys, exclude)
    controlled = _controlled(rows, scores, ranks, len(pair_q), total, config)
    by_search = {}
    if sides is not None and searches:
        progress("scoring perturbed documents lexically", 0, 1)
        query = np.asarray([key[0] for key in keys], dtype=np.int64)
        row = np.asarray([key[2] for key in keys], dtype=np.int64)
        stands_for = np.asarray([key[3] for key in keys], dtype=np.int64)
        in_bank = np.asarray([key[1] == "bank" for key in keys])
        at = np.where(in_bank, 0, row)  # a bank row is no corpus row: its scores come below
        dense = np.where(in_bank, scores.astype(np.float64), sides.dense[query, at])
        lexical = sides.lexical[query, at].copy()
        lexical[in_bank] = sides.text_scores(query[in_bank], [decoded[r] for r in row[in_bank]])
        for search in searches:
            own, rank = sides.key_scores(search, query, dense, lexical, stands_for)
            by_search[search] = _controlled(rows, own, rank, len(pair_q), total, config)
        progress("scoring perturbed documents lexically", 1, 1)
    cost = {"perturbed_embedded": len(sequences), "sentences_embedded": n_sentences, "roundtrip_exact": roundtrip}
    return controlled, cost, by_search


def _controlled(rows, scores, ranks, n_pairs: int, total: int, config) -> Controlled:
    """The controlled section from every key's score and rank under one search."""
    settings = {key: _setting(key.label, group, scores, ranks, config) for key, group in rows.items()}
    return Controlled(
        n_pairs=n_pairs,
        pairs_available=0,
        dilution={key.label: s for key, s in settings.items() if key.family == "dilution"},
        repetition={
            target: {key.label: s for key, s in settings.items() if key[:2] == ("repetition", target)}
            for target in ("relevant", "non_relevant")
        },
        position={
            unit: _position(unit, settings, rows, ranks, total, config)
            for unit in ("document", "sentence")
            if config.depths
        },
    )
