"""Document diagnostics (METHODS §1) over a collection: length probe, intra-document similarity, isotropy,
length collapse, the repeated-words curve and the attention filter rate σ_a, binned by token length, and how
much of the collection the window cuts (issue 12 item 6).

Batches come from the one batched forward pass, `lengthwise.core.embed.forward_batches`, and are reduced at
once to per-document numbers and per-layer sums: only the pooled embeddings (n, D) are kept. Attention maps
need eager attention: the audit switches the implementation for its own pass over a per-bin sample and
restores it afterwards.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
from sentence_transformers import SentenceTransformer

from lengthwise.audit.config import WORD_PAIRS, AttentionLayers, Diagnostic, DocAuditConfig
from lengthwise.audit.documents import metrics as dg
from lengthwise.audit.documents.corpus import DocSet
from lengthwise.audit.documents.probe import probe_section, truncation_section
from lengthwise.core.bins import LengthBins, token_lengths
from lengthwise.core.embed import ForwardBatch, TokenView, embed_ids, forward_batches, text_transformer
from lengthwise.core.errors import SettingError
from lengthwise.core.scoring import paired_cosine
from lengthwise.core.tokens import elongate, elongation_factor, first_k

__all__ = ["DIAGNOSTICS", "repeated_words_curve", "run_doc_audit"]

DIAGNOSTICS = tuple(d.value for d in Diagnostic)  # the 0.1 names, kept for callers that list them
BATCH_BYTES = 256 * 2**20  # cap on one batch's hidden states (all layers) or attention maps (all layers), float32
Progress = Callable[[str, int, int], None]
_Batch = ForwardBatch  # the 0.1 name


@contextmanager
def _eager_attention(model: SentenceTransformer) -> Iterator[None]:
    """Switch the Hugging Face model to eager attention (which can return attention maps), then restore."""
    transformer = text_transformer(model)
    previous = getattr(transformer.config, "_attn_implementation", None) or "eager"
    if previous != "eager":
        transformer.set_attn_implementation("eager")
    try:
        yield
    finally:
        if previous != "eager":
            transformer.set_attn_implementation(previous)


def run_doc_audit(
    model: SentenceTransformer,
    docs: DocSet | None,
    config: DocAuditConfig = DocAuditConfig(),
    *,
    on_progress: Progress | None = None,
) -> dict[str, Any]:
    """Run the diagnostics in `config` over `docs`; returns the ``diagnostics`` section of ``audit.json``.

    `on_progress(stage, done, total)` is called after each batch. Only ``words_curve`` runs without documents.
    Elongation comparisons use the documents that fit at least two copies (m ≥ 2), both sides on those.
    """
    view = TokenView(model)
    bins = LengthBins.default(view)
    if config.bin_width:
        bins = LengthBins(config.bin_width, view.max_content, bins.counting)
    binning = "content tokens after truncation to N, specials excluded; the last bin also holds cut texts"
    settings = {**config.to_dict(), "bin_width": bins.width, "max_length": view.max_length, "bins_over": binning}
    section: dict[str, Any] = {"settings": settings}
    if config.wants(Diagnostic.WORDS_CURVE):
        section["words_curve"] = repeated_words_curve(model, config.word_pairs, batch_size=config.batch_size)
    if config.needs_documents:
        if docs is None:
            raise SettingError("docs", None, "document diagnostics need documents; give a documents file")
        run = _DocumentRun(model, view, bins, config, docs.texts, docs.names())
        section.update(data=docs.describe(), **run.sections(on_progress or (lambda stage, done, total: None)))
    return section


class _DocumentRun:
    """One audit of one collection: token ids, length bins and m per document, then the passes and sections."""

    def __init__(self, model: SentenceTransformer, view: TokenView, bins: LengthBins, config: DocAuditConfig,
                 texts: Sequence[str], names: Sequence[str] | None = None) -> None:  # fmt: skip
        self.model, self.view, self.bins, self.config = model, view, bins, config
        names = list(names) if names is not None else [f"document #{i}" for i in range(len(texts))]
        chunks = (
            view.content(texts[start : start + 1000], names[start : start + 1000])
            for start in range(0, len(texts), 1000)
        )
        keep = view.max_content if config.first_k is None else config.first_k - view.specials.count
        self.ids = [np.asarray(first_k(ids, keep), dtype=np.int32) for chunk in chunks for ids in chunk]  # tok(S)
        self.lengths = np.array([len(ids) for ids in self.ids])  # what the model reads
        self.full_lengths = token_lengths(view, texts)  # before truncation: who is cut, and by how much
        self.bin_of = bins.assign(self.lengths)
        rng = random.Random(config.seed)
        m = [elongation_factor(int(n), view.max_content, config.elongation, rng) for n in self.lengths]
        self.factors = np.array(m)
        self.rows = np.flatnonzero(self.factors >= 2)  # m = 1 leaves a document unchanged: it is not elongated

    def sections(self, report: Progress) -> dict[str, Any]:
        """Embed the originals (and the elongated documents when needed), then compute each wanted section."""
        config, n = self.config, len(self.ids)
        states = config.wants(Diagnostic.INTRA)
        layers, subset, long_layers = dg.LayerTokenStats(n), dg.LayerTokenStats(n), dg.LayerTokenStats(len(self.rows))
        in_subset, every = self.factors >= 2, np.ones(config.batch_size, dtype=bool)

        def track_original(batch: ForwardBatch) -> None:
            layers.add(batch.index, batch.hidden, batch.mask, every[: len(batch.index)])
            subset.add(batch.index, batch.hidden, batch.mask, in_subset[batch.index])

        inputs = [self._wrap(ids) for ids in self.ids]
        original = self._pooled(inputs, track_original if states else None, "original", report)
        elongated = np.zeros((0, original.shape[1]), dtype=np.float32)
        if len(self.rows) and (config.wants(Diagnostic.INTRA) or config.wants(Diagnostic.ISOTROPY)):
            m, cap = self.factors, self.view.max_content
            inputs = [self._wrap(elongate(self.ids[r].tolist(), int(m[r]), cap)) for r in self.rows]
            track = (lambda b: long_layers.add(b.index, b.hidden, b.mask, every[: len(b.index)])) if states else None
            elongated = self._pooled(inputs, track, "elongated", report)
        del inputs
        out: dict[str, Any] = {
            "tokens": self._tokens(),
            "truncation": truncation_section(self.full_lengths, self.view.max_content),
        }
        if config.wants(Diagnostic.PROBE):
            out["probe"] = probe_section(original, self.lengths, self.full_lengths > self.view.max_content, config)
        if states:
            out["intra"] = {"layers": list(range(len(layers.moments))), "original": layers.summary()}
            if len(self.rows) >= 2:
                out["intra"].update(original_subset=subset.summary(self.rows), elongated=long_layers.summary())
        if config.wants(Diagnostic.ISOTROPY):
            out["isotropy"] = self._isotropy(original, elongated)
        if config.wants(Diagnostic.COLLAPSE):
            collapse = dg.length_collapse(original, self.bin_of)
            out["collapse"] = {"by_bin": [{**row, **self.bins.row(int(row["bin"] or 0))} for row in collapse]}
        if config.wants(Diagnostic.ATTENTION):
            out["attention"] = self._attention(report)
        return out

    def _wrap(self, ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """A full model input (special tokens once) as a compact int32 array."""
        return np.asarray(self.view.wrap(list(ids)), dtype=np.int32)

    def _pooled(self, inputs: list[np.ndarray], track: Callable[[ForwardBatch], None] | None, stage: str,
                report: Progress) -> np.ndarray:  # fmt: skip
        """Pooled embeddings (n, D) float32 of `inputs`; `track` sees each batch's hidden states (if not None)."""
        pooled = np.zeros((len(inputs), 0), dtype=np.float32)
        done = 0
        hf = text_transformer(self.model).config  # hidden states of every layer: (L + 1) × N × D floats per document
        per_doc = (hf.num_hidden_layers + 1) * self.view.max_length * hf.hidden_size * 4 if track else 0
        batch_size = self._capped_batch(per_doc)
        for batch in forward_batches(self.model, inputs, batch_size=batch_size, hidden_states=track is not None):
            if pooled.shape[1] == 0:
                pooled = np.zeros((len(inputs), batch.pooled.shape[1]), dtype=np.float32)
            pooled[batch.index] = batch.pooled
            if track is not None:
                track(batch)
            done += len(batch.index)
            report(stage, done, len(inputs))
        return pooled

    def _capped_batch(self, bytes_per_doc: int) -> int:
        """The configured batch size, lowered so that one batch's per-layer tensors stay under `BATCH_BYTES`."""
        return max(1, min(self.config.batch_size, BATCH_BYTES // max(bytes_per_doc, 1)))

    def _tokens(self) -> dict[str, Any]:
        lengths, long, bin_of = self.lengths, self.factors >= 2, self.bin_of
        per_bin = [{**self.bins.row(b), "n": int((bin_of == b).sum()), "elongated": int(long[bin_of == b].sum())}
                   for b in np.unique(bin_of)]  # fmt: skip
        return {"n_docs": len(lengths), "content_mean": float(lengths.mean()), "content_max": int(lengths.max()),
                "content_median": float(np.median(lengths)), "elongated_docs": int(long.sum()),
                "truncated_texts": int((self.full_lengths > self.view.max_content).sum()), "bins": per_bin,
                "m_mean_elongated": float(self.factors[long].mean()) if long.any() else None}  # fmt: skip

    def _isotropy(self, original: np.ndarray, elongated: np.ndarray) -> dict[str, Any]:
        """Anisotropy and uniformity of pooled embeddings, and original vs elongated on the same documents
        (with alignment of each text to its elongated self), overall and per bin."""
        out: dict[str, Any] = {"original": {"n": len(original), **dg.pooled_isotropy(original)}, "by_bin": []}
        out["elongation"] = self._elongation(original[self.rows], elongated)
        for b in np.unique(self.bin_of):
            members, in_bin = self.bin_of == b, self.bin_of[self.rows] == b
            row = {**self.bins.row(b), "n": int(members.sum()), "original": dg.pooled_isotropy(original[members])}
            out["by_bin"].append(
                {**row, "elongation": self._elongation(original[self.rows[in_bin]], elongated[in_bin])}
            )
        return out

    @staticmethod
    def _elongation(original: np.ndarray, elongated: np.ndarray) -> dict[str, Any]:
        return {"n": len(original), **(dg.elongation_isotropy(original, elongated) if len(original) >= 2 else {})}

    def _attention(self, report: Progress) -> dict[str, Any]:
        """σ_a per document on a seeded per-bin sample, in one eager-attention pass; mean ± std per bin."""
        config, cap, rng = self.config, self.config.attention_per_bin, random.Random(self.config.seed + 2)
        every_layer = config.attention_layers is AttentionLayers.ALL
        chosen: list[int] = []
        for b in np.unique(self.bin_of):
            members = np.flatnonzero(self.bin_of == b).tolist()
            chosen.extend(sorted(rng.sample(members, cap)) if cap is not None and len(members) > cap else members)
        hf = text_transformer(self.model).config
        per_doc = hf.num_hidden_layers * hf.num_attention_heads * self.view.max_length**2 * 4  # its maps, float32
        rates = np.full((len(chosen), hf.num_hidden_layers), np.nan)  # (docs, L)
        with _eager_attention(self.model):
            inputs = [self._wrap(self.ids[i]) for i in chosen]
            size = self._capped_batch(per_doc)
            for batch in forward_batches(self.model, inputs, batch_size=size, attentions=True):
                last = len(batch.attentions) - 1
                for layer in range(last + 1) if every_layer else [last]:
                    rates[batch.index, layer] = dg.batch_filter_rates(batch.attentions[layer], batch.lengths)
                report("attention", int((~np.isnan(rates[:, -1])).sum()), len(chosen))
        chosen_bins, by_bin = self.bin_of[np.array(chosen, dtype=np.int64)], []
        for b in np.unique(chosen_bins):
            sigma = rates[chosen_bins == b]  # (docs in bin, L)
            row = {**self.bins.row(b), "n": len(sigma), "sigma_mean": float(sigma[:, -1].mean()),
                   "sigma_std": float(sigma[:, -1].std())}  # fmt: skip
            by_bin.append({**row, "per_layer_mean": sigma.mean(axis=0).tolist()} if every_layer else row)
        return {"layers": config.attention_layers.value, "n_layers": int(hf.num_hidden_layers), "n": len(chosen),
                "docs_per_bin": cap, "by_bin": by_bin}  # fmt: skip


def repeated_words_curve(
    model: SentenceTransformer,
    word_pairs: Sequence[tuple[str, str]] = WORD_PAIRS,
    *,
    ks: Sequence[int] | None = None,
    batch_size: int = 32,
) -> dict[str, Any]:
    """Cosine of g(a a … a) and g(b b … b), each word's tokens repeated k times (length-collapse App. C.4).

    Two texts with no token in common should stay apart; a curve rising with k is length collapse by itself.
    Default k: powers of two up to the largest k that fits N, and that largest. Built at the token level.
    """
    view = TokenView(model)
    rows: list[dict[str, Any]] = []
    for a, b in word_pairs:
        ta, tb = view.content([a, b])
        cap = view.max_content // max(len(ta), len(tb))
        if cap < 1:
            raise SettingError("word_pairs", [a, b], f"the words do not fit the {view.max_length}-token window once")
        k_values = sorted({k for k in (ks or [2**p for p in range(cap.bit_length())] + [cap]) if 1 <= k <= cap})
        emb = embed_ids(model, [view.wrap(ids * k) for k in k_values for ids in (ta, tb)], batch_size=batch_size)
        rows.append({"words": [a, b], "ks": k_values, "cosine": paired_cosine(emb[0::2], emb[1::2]).tolist()})
    common = sorted(set.intersection(*(set(r["ks"]) for r in rows))) if rows else []
    mean = [float(np.mean([r["cosine"][r["ks"].index(k)] for r in rows])) for k in common]
    return {"pairs": rows, "mean": {"ks": common, "cosine": mean}}
