"""Document diagnostics (METHODS §1) over a collection: length probe, intra-document similarity, isotropy,
length collapse, the repeated-words curve and the attention filter rate σ_a, binned by token length.

Token states stream batch by batch through the Hugging Face model inside the `SentenceTransformer`
(``model[0].auto_model``) and are reduced at once to per-document numbers and per-layer sums: only the
pooled embeddings (n, D) are kept. Pooling goes through the model's own modules, so pooled vectors equal
`lengthwise.core.embed.embed_ids`. Attention maps need eager attention: the audit switches the implementation for
its own pass over a per-bin sample and restores it afterwards.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from sentence_transformers import SentenceTransformer

from lengthwise.audit import metrics as dg
from lengthwise.audit.shift import paired_cosine
from lengthwise.core.data import DataFormatError, checked_text, open_text
from lengthwise.core.embed import TokenView, batch_features, embed_ids
from lengthwise.core.tokens import Elongation, elongate, elongation_factor, first_k

__all__ = ["DIAGNOSTICS", "DocAuditConfig", "DocSet", "read_docs", "repeated_words_curve", "run_doc_audit"]

DIAGNOSTICS = ("probe", "intra", "isotropy", "collapse", "words_curve", "attention")
DOC_DIAGNOSTICS = ("probe", "intra", "isotropy", "collapse", "attention")  # the ones that need documents
WORD_PAIRS = (("dog", "word"), ("apple", "theorem"), ("river", "keyboard"), ("music", "tax"))
BATCH_BYTES = 256 * 2**20  # cap on one batch's hidden states (all layers) or attention maps (all layers), float32
Progress = Callable[[str, int, int], None]
_HINT = "expected JSONL with a 'text' field (optional 'title') or plain text with one document per line"


@dataclass(frozen=True)
class DocSet:
    """Documents plus where they came from; `sha256` hashes the texts, so a sample has its own fingerprint."""

    texts: tuple[str, ...]
    source: str
    fmt: str
    n_in_file: int
    sha256: str = field(init=False)

    def __post_init__(self) -> None:
        if not self.texts:
            raise DataFormatError(f"{self.source}: no documents found; {_HINT}")
        digest = hashlib.sha256()
        for text in self.texts:
            digest.update(text.encode() + b"\n")
        object.__setattr__(self, "sha256", digest.hexdigest())

    def describe(self) -> dict[str, Any]:
        fields = ("source", "fmt", "n_in_file", "sha256")
        return {"n_docs": len(self.texts), **{name: getattr(self, name) for name in fields}}


def read_docs(path: str | Path, *, max_docs: int | None = None, seed: int = 0) -> DocSet:
    """Documents from JSONL (``text``; a non-empty ``title`` is prepended as ``title + " " + text``) or plain
    text, one document per line (blank lines skipped); ``.gz`` is fine. `max_docs` keeps a seeded sample in
    file order. A bad line raises `DataFormatError` naming the file and line.
    """
    path = Path(path)
    if not path.is_file():
        raise DataFormatError(f"{path}: no such file; {_HINT}")
    texts: list[str] = []
    fmt, line_no = "", 0
    try:
        with open_text(path) as handle:
            for line_no, line in enumerate(handle, 1):
                if not (stripped := line.strip()):
                    continue
                fmt = fmt or ("jsonl" if stripped.startswith("{") else "lines")
                text = _jsonl_text(path, line_no, stripped) if fmt == "jsonl" else stripped
                texts.append(checked_text(path, line_no, text, "text"))
    except UnicodeDecodeError as error:
        raise DataFormatError(f"{path}:{line_no + 1}: not UTF-8 text ({error.reason}); re-encode the file") from None
    total, source = len(texts), str(path)
    if max_docs is not None and max_docs < 1:
        raise ValueError(f"max docs {max_docs} must be ≥ 1")
    if max_docs is not None and max_docs < total:
        texts = [texts[i] for i in sorted(random.Random(seed).sample(range(total), max_docs))]
        source = f"{path} (sample of {max_docs}, seed {seed})"
    return DocSet(tuple(texts), source, fmt or "lines", total)


def _jsonl_text(path: Path, line_no: int, line: str) -> object:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as error:
        raise DataFormatError(f"{path}:{line_no}: not valid JSON ({error.msg}); {_HINT}") from None
    if not isinstance(row, dict) or "text" not in row:
        raise DataFormatError(f"{path}:{line_no}: no 'text' field; {_HINT}")
    title, text = row.get("title"), row["text"]
    return f"{title.strip()} {text}" if isinstance(title, str) and title.strip() and isinstance(text, str) else text


@dataclass(frozen=True)
class DocAuditConfig:
    """Which diagnostics to run, and how. `bin_width` None → `LengthBins.default`. `first_k` cuts every
    document to its first k tokens (special tokens included) before anything else, as `AuditConfig.first_k`.
    `attention_per_bin` caps the documents per bin in the eager attention pass (None: all);
    `attention_layers` is "last" or "all"."""

    diagnostics: tuple[str, ...] = DIAGNOSTICS
    bin_width: int | None = None
    elongation: Elongation = field(default_factory=lambda: Elongation("fixed", 100))
    first_k: int | None = None
    attention_per_bin: int | None = 100
    attention_layers: Literal["last", "all"] = "last"
    probe_folds: int = 5
    word_pairs: tuple[tuple[str, str], ...] = WORD_PAIRS
    batch_size: int = 32
    seed: int = 0

    def __post_init__(self) -> None:
        unknown = sorted(set(self.diagnostics) - set(DIAGNOSTICS))
        if unknown or not self.diagnostics:
            raise ValueError(f"diagnostics {unknown or '(none)'} unknown; choose from {', '.join(DIAGNOSTICS)}")
        if (self.bin_width is not None and self.bin_width < 1) or self.batch_size < 1 or self.probe_folds < 2:
            raise ValueError("bin width and batch size must be ≥ 1, probe folds ≥ 2")
        if self.first_k is not None and self.first_k < 3:
            raise ValueError(f"first_k={self.first_k} leaves no content token; use at least 3")
        if self.attention_per_bin is not None and self.attention_per_bin < 1:
            raise ValueError(f"attention docs per bin {self.attention_per_bin} must be ≥ 1")
        if self.attention_layers not in ("last", "all"):
            raise ValueError(f"attention_layers {self.attention_layers!r} must be 'last' or 'all'")

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "elongation": self.elongation.describe(), "diagnostics": list(self.diagnostics)}


@dataclass
class _Batch:
    """One forward pass: which inputs, their lengths, pooled embeddings and (if asked) per-layer tensors."""

    index: np.ndarray  # (B,) positions in the input list
    lengths: list[int]
    mask: torch.Tensor  # (B, T)
    pooled: np.ndarray  # (B, D)
    hidden: tuple[torch.Tensor, ...]  # L + 1 tensors (B, T, D); layer 0 is the embedding layer
    attentions: tuple[torch.Tensor, ...]  # L tensors (B, H, T, T)


def _transformer(model: SentenceTransformer) -> Any:
    """The Hugging Face model inside `model`; ValueError unless model[0] is a plain text Transformer."""
    text = (getattr(model[0], "modality_config", None) or {}).get("text", {})
    output = text.get("method_output_name", "last_hidden_state")
    plain = text.get("method", "forward") == "forward" and output in ("last_hidden_state", ("last_hidden_state",))
    if not hasattr(model[0], "auto_model") or not plain:
        raise ValueError("document diagnostics need a model whose first module is a Hugging Face text Transformer")
    return model[0].auto_model


@contextmanager
def _eager_attention(model: SentenceTransformer) -> Iterator[None]:
    """Switch the Hugging Face model to eager attention (which can return attention maps), then restore."""
    transformer = _transformer(model)
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
    bins = dg.LengthBins(config.bin_width, view.max_content) if config.bin_width else dg.LengthBins.default(view)
    binning = "content tokens after truncation to N, specials excluded; the last bin also holds cut texts"
    settings = {**config.to_dict(), "bin_width": bins.width, "max_length": view.max_length, "bins_over": binning}
    section: dict[str, Any] = {"settings": settings}
    if "words_curve" in config.diagnostics:
        section["words_curve"] = repeated_words_curve(model, config.word_pairs, batch_size=config.batch_size)
    if set(config.diagnostics) & set(DOC_DIAGNOSTICS):
        if docs is None:
            raise ValueError("document diagnostics need documents; pass --docs FILE")
        run = _DocumentRun(model, view, bins, config, docs.texts)
        section.update(data=docs.describe(), **run.sections(on_progress or (lambda stage, done, total: None)))
    return section


class _DocumentRun:
    """One audit of one collection: token ids, length bins and m per document, then the passes and sections."""

    def __init__(self, model: SentenceTransformer, view: TokenView, bins: dg.LengthBins, config: DocAuditConfig,
                 texts: Sequence[str]) -> None:  # fmt: skip
        self.model, self.view, self.bins, self.config = model, view, bins, config
        chunks = (view.content(texts[start : start + 1000]) for start in range(0, len(texts), 1000))
        keep = view.max_content if config.first_k is None else config.first_k - view.specials.count
        self.ids = [np.asarray(first_k(ids, keep), dtype=np.int32) for chunk in chunks for ids in chunk]  # tok(S)
        self.lengths = np.array([len(ids) for ids in self.ids])
        self.bin_of = bins.assign(self.lengths)
        rng = random.Random(config.seed)
        m = [elongation_factor(int(n), view.max_content, config.elongation, rng) for n in self.lengths]
        self.factors = np.array(m)
        self.rows = np.flatnonzero(self.factors >= 2)  # m = 1 leaves a document unchanged: it is not elongated

    def sections(self, report: Progress) -> dict[str, Any]:
        """Embed the originals (and the elongated documents when needed), then compute each wanted section."""
        wanted, n, config = set(self.config.diagnostics), len(self.ids), self.config
        states = "intra" in wanted
        layers, subset, long_layers = dg.LayerTokenStats(n), dg.LayerTokenStats(n), dg.LayerTokenStats(len(self.rows))
        in_subset, every = self.factors >= 2, np.ones(config.batch_size, dtype=bool)

        def track_original(batch: _Batch) -> None:
            layers.add(batch.index, batch.hidden, batch.mask, every[: len(batch.index)])
            subset.add(batch.index, batch.hidden, batch.mask, in_subset[batch.index])

        inputs = [self._wrap(ids) for ids in self.ids]
        original = self._pooled(inputs, track_original if states else None, "original", report)
        elongated = np.zeros((0, original.shape[1]), dtype=np.float32)
        if len(self.rows) and wanted & {"intra", "isotropy"}:
            m, cap = self.factors, self.view.max_content
            inputs = [self._wrap(elongate(self.ids[r].tolist(), int(m[r]), cap)) for r in self.rows]
            track = (lambda b: long_layers.add(b.index, b.hidden, b.mask, every[: len(b.index)])) if states else None
            elongated = self._pooled(inputs, track, "elongated", report)
        del inputs
        out: dict[str, Any] = {"tokens": self._tokens()}
        if "probe" in wanted and (skip := _probe_skip(self.lengths, config.probe_folds)):
            out["probe"] = {"skipped": skip, "n": n}
        elif "probe" in wanted:
            score, ridge = (dg.length_probe_r2(original, self.lengths, folds=config.probe_folds, seed=config.seed,
                                               regressor=r) for r in ("linear", "ridge"))  # fmt: skip
            out["probe"] = {"r2x100_mean": score.mean, "r2x100_std": score.std, "folds": list(score.folds), "n": n,
                            "ridge_r2x100_mean": ridge.mean, "ridge_r2x100_std": ridge.std,
                            "target": "content tokens", "regressor": "OLS (paper); ridge_*: RidgeCV"}  # fmt: skip
        if states:
            out["intra"] = {"layers": list(range(len(layers.moments))), "original": layers.summary()}
            if len(self.rows) >= 2:
                out["intra"].update(original_subset=subset.summary(self.rows), elongated=long_layers.summary())
        if "isotropy" in wanted:
            out["isotropy"] = self._isotropy(original, elongated)
        if "collapse" in wanted:
            collapse = dg.length_collapse(original, self.bin_of)
            out["collapse"] = {"by_bin": [{**row, **self.bins.row(int(row["bin"] or 0))} for row in collapse]}
        if "attention" in wanted:
            out["attention"] = self._attention(report)
        return out

    def _wrap(self, ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """A full model input (special tokens once) as a compact int32 array."""
        return np.asarray(self.view.wrap(list(ids)), dtype=np.int32)

    def _stream(self, inputs: Sequence[np.ndarray], consume: Callable[[_Batch], None], *, batch_size: int = 0,
                hidden: bool = False, attentions: bool = False) -> None:  # fmt: skip
        """Run `inputs` (full model inputs) longest-first and hand each batch to `consume`."""
        model, transformer, tail = self.model, _transformer(self.model), list(self.model)[1:]
        order = np.argsort([-len(ids) for ids in inputs], kind="stable")
        batch_size = batch_size or self.config.batch_size
        model.eval()
        with torch.inference_mode():
            for start in range(0, len(order), batch_size):
                index = order[start : start + batch_size]
                batch = [inputs[i] for i in index]
                features = batch_features(model.tokenizer, batch, model.device)
                out = transformer(**features, output_hidden_states=hidden, output_attentions=attentions)
                pooled = {**features, "token_embeddings": out.last_hidden_state}
                for module in tail:  # the model's own pooling / dense / normalize modules
                    pooled = module(pooled)
                embedding = pooled["sentence_embedding"].float().cpu().numpy()  # (B, D)
                maps = (tuple(out.hidden_states or ()), tuple(out.attentions or ()))
                consume(_Batch(index, [len(ids) for ids in batch], features["attention_mask"], embedding, *maps))

    def _pooled(self, inputs: list[np.ndarray], track: Callable[[_Batch], None] | None, stage: str,
                report: Progress) -> np.ndarray:  # fmt: skip
        """Pooled embeddings (n, D) float32 of `inputs`; `track` sees each batch's hidden states (if not None)."""
        pooled = np.zeros((len(inputs), 0), dtype=np.float32)
        done = 0

        def take(batch: _Batch) -> None:
            nonlocal pooled, done
            if pooled.shape[1] == 0:
                pooled = np.zeros((len(inputs), batch.pooled.shape[1]), dtype=np.float32)
            pooled[batch.index] = batch.pooled
            if track is not None:
                track(batch)
            done += len(batch.index)
            report(stage, done, len(inputs))

        hf = _transformer(self.model).config  # hidden states of every layer: (L + 1) × N × D floats per document
        per_doc = (hf.num_hidden_layers + 1) * self.view.max_length * hf.hidden_size * 4 if track else 0
        self._stream(inputs, take, batch_size=self._capped_batch(per_doc), hidden=track is not None)
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
                "truncated_texts": int((lengths >= self.view.max_content).sum()), "bins": per_bin,
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
        chosen: list[int] = []
        for b in np.unique(self.bin_of):
            members = np.flatnonzero(self.bin_of == b).tolist()
            chosen.extend(sorted(rng.sample(members, cap)) if cap is not None and len(members) > cap else members)
        hf = _transformer(self.model).config
        per_doc = hf.num_hidden_layers * hf.num_attention_heads * self.view.max_length**2 * 4  # its maps, float32
        rates = np.full((len(chosen), hf.num_hidden_layers), np.nan)  # (docs, L)

        def take(batch: _Batch) -> None:
            last = len(batch.attentions) - 1
            for layer in range(last + 1) if config.attention_layers == "all" else [last]:
                rates[batch.index, layer] = dg.batch_filter_rates(batch.attentions[layer], batch.lengths)
            report("attention", int((~np.isnan(rates[:, -1])).sum()), len(chosen))

        with _eager_attention(self.model):
            inputs = [self._wrap(self.ids[i]) for i in chosen]
            self._stream(inputs, take, batch_size=self._capped_batch(per_doc), attentions=True)
        chosen_bins, by_bin = self.bin_of[np.array(chosen, dtype=np.int64)], []
        for b in np.unique(chosen_bins):
            sigma = rates[chosen_bins == b]  # (docs in bin, L)
            row = {**self.bins.row(b), "n": len(sigma), "sigma_mean": float(sigma[:, -1].mean()),
                   "sigma_std": float(sigma[:, -1].std())}  # fmt: skip
            by_bin.append(
                {**row, "per_layer_mean": sigma.mean(axis=0).tolist()} if config.attention_layers == "all" else row
            )
        return {"layers": config.attention_layers, "n_layers": int(hf.num_hidden_layers), "n": len(chosen),
                "docs_per_bin": cap, "by_bin": by_bin}  # fmt: skip


def _probe_skip(lengths: np.ndarray, folds: int) -> str | None:
    """Why the length probe cannot run on these documents (None when it can), instead of failing the audit."""
    if len(lengths) < 2 * folds:
        return f"{len(lengths)} documents; the {folds}-fold probe needs at least {2 * folds}"
    return "every document has the same token count (e.g. all cut by --first-k)" if np.ptp(lengths) == 0 else None


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
        k_values = sorted({k for k in (ks or [2**p for p in range(cap.bit_length())] + [cap]) if 1 <= k <= cap})
        emb = embed_ids(model, [view.wrap(ids * k) for k in k_values for ids in (ta, tb)], batch_size=batch_size)
        rows.append({"words": [a, b], "ks": k_values, "cosine": paired_cosine(emb[0::2], emb[1::2]).tolist()})
    common = sorted(set.intersection(*(set(r["ks"]) for r in rows))) if rows else []
    mean = [float(np.mean([r["cosine"][r["ks"].index(k)] for r in rows])) for k in common]
    return {"pairs": rows, "mean": {"ks": common, "cosine": mean}}
