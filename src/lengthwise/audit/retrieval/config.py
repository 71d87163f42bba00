"""Settings and inputs of the retrieval length-bias audit (METHODS §6), light to import (no torch).

`RetrievalSplit` is the shape of a BEIR split (`lengthwise.evaluation.data.RetrievalData` has it; the command
line, which may join rooms, reads the folder). `RetrievalRequest` is what `lengthwise audit --retrieval DIR`
hands to the audit pipeline: the split, the settings and, optionally, the encoder to audit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from lengthwise.core.errors import SettingError
from lengthwise.core.fusion import LEXICAL_WEIGHT, Mode

if TYPE_CHECKING:
    import numpy as np

    from lengthwise.core.encoder import TextEncoder

__all__ = ["SEARCHES", "LexicalScorer", "RetrievalAuditConfig", "RetrievalRequest", "RetrievalSplit"]

SEARCHES = tuple(mode.value for mode in Mode)  # what ranks the corpus (dense: the encoder's cosines, always audited)


class RetrievalSplit(Protocol):
    """A BEIR split: documents (``title + " " + text``), the judged queries and graded qrels."""

    @property
    def doc_ids(self) -> Sequence[str]: ...
    @property
    def doc_texts(self) -> Sequence[str]: ...
    @property
    def query_ids(self) -> Sequence[str]: ...
    @property
    def query_texts(self) -> Sequence[str]: ...
    @property
    def qrels(self) -> Mapping[str, Mapping[str, int]]: ...
    def describe(self) -> dict[str, object]: ...


class LexicalScorer(Protocol):
    """Lexical scores against one corpus's statistics (`lengthwise.search.lexical.scorer.BM25Scorer` is one)."""

    def corpus_scores(self, query: str) -> np.ndarray:
        """(N,) scores of every corpus document for `query`."""
        ...

    def text_scores(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """(T,) scores of texts outside the corpus, each as one more corpus document."""
        ...

    def describe(self) -> dict[str, Any]:
        """What ranks, for the record."""
        ...


@dataclass(frozen=True)
class RetrievalAuditConfig:
    """Settings of the retrieval length-bias audit (METHODS §6 defaults); a bad value raises `SettingError`."""

    dilution: tuple[float, ...] = field(
        default=(0.5, 1.0, 2.0, 4.0), metadata={"help": "Filler appended, as multiples of the document's length."}
    )
    repetition: tuple[int, ...] = field(default=(2, 4), metadata={"help": "Copies m of f(doc, m)."})
    depths: tuple[float, ...] = field(
        default=(0.0, 0.25, 0.5, 0.75, 1.0), metadata={"help": "Depths (0–1) of the unit in the position probe."}
    )
    window: int | None = field(
        default=None,
        metadata={
            "help": "Content tokens the encoder sees; perturbed documents are cut to fit. Default: the model's "
            "max length minus special tokens (give more for a long-document encoder)."
        },
    )
    position_length: int | None = field(
        default=None, metadata={"help": "Content tokens of a position probe (unit + filler). Default: the window."}
    )
    top_k: int = field(default=10, metadata={"help": "Recall cut-off and the top k whose lengths are compared."})
    bin_width: int = field(default=100, metadata={"help": "Length-bin width (tokens) of the rank table."})
    max_pairs: int | None = field(
        default=1000,
        metadata={"help": "At most this many (query, relevant document) pairs are perturbed (a seeded sample)."},
    )
    max_negatives: int | None = field(
        default=10000, metadata={"help": "Non-relevant documents per query in the score–length correlation."}
    )
    filler_pool: int = field(default=2000, metadata={"help": "Corpus documents that filler is cut from."})
    drop_self_hits: bool = field(default=True, metadata={"help": "A document whose id is the query id is skipped."})
    alpha: float = field(default=0.05, metadata={"help": "Significance level of the verdicts."})
    bootstrap_resamples: int = field(default=2000, metadata={"help": "Resamples of each bootstrap interval."})
    batch_size: int = field(default=32, metadata={"help": "Texts per encoder call."})
    seed: int = field(default=0, metadata={"help": "Seed of every sample and of the filler."})
    searches: tuple[str, ...] = field(
        default=("dense",),
        metadata={
            "help": "What ranks the corpus: dense (the encoder), lexical (BM25), hybrid (both, by convex fusion at "
            "the lexical weight: the index's default before its z-score fusion of both BM25 granularities); dense "
            "is always audited, the others on the same pairs and perturbed texts."
        },
    )
    lexical_weight: float = field(
        default=LEXICAL_WEIGHT, metadata={"help": "The lexical weight of the hybrid search's convex fusion."}
    )

    def __post_init__(self) -> None:
        if not self.dilution or any(r <= 0 for r in self.dilution):
            raise SettingError("dilution", list(self.dilution), "ratios must be > 0 (0.5 = half the length)")
        if not self.repetition or any(m < 2 for m in self.repetition):
            raise SettingError("repetition", list(self.repetition), "copies must be ≥ 2")
        if any(not 0 <= d <= 1 for d in self.depths) or 0 < len(self.depths) < 3:
            raise SettingError("depths", list(self.depths), "give three or more depths in [0, 1] (or none)")
        for name in ("window", "position_length"):
            value = getattr(self, name)
            if value is not None and value < 8:
                raise SettingError(name, value, "leaves no room to perturb; use at least 8 tokens")
        counts = {"top_k": self.top_k, "bin_width": self.bin_width, "filler_pool": self.filler_pool}
        counts |= {"batch_size": self.batch_size, "bootstrap_resamples": self.bootstrap_resamples}
        counts |= {"max_pairs": 1 if self.max_pairs is None else self.max_pairs}
        counts |= {"max_negatives": 3 if self.max_negatives is None else self.max_negatives}
        for name, value in counts.items():
            if value < (3 if name == "max_negatives" else 1):
                raise SettingError(name, value, "is too small; use a positive count")
        unknown = [name for name in self.searches if name not in SEARCHES]
        if unknown or not self.searches:
            raise SettingError("searches", list(self.searches), f"use one or more of {', '.join(SEARCHES)}")
        if not 0.0 <= self.lexical_weight <= 1.0:
            raise SettingError("lexical_weight", self.lexical_weight, "must be in [0, 1]")
        if not 0 < self.alpha < 1:
            raise SettingError("alpha", self.alpha, "must lie strictly between 0 and 1")

    @property
    def lexical_searches(self) -> tuple[str, ...]:
        """The searches besides the dense one: each needs a lexical scorer."""
        return tuple(search for search in self.searches if search != "dense")


@dataclass(frozen=True)
class RetrievalRequest:
    """A retrieval audit to run beside the attack: the split, the settings, and the encoder (None: the audited
    model as it is). `encoder_note` says what the encoder is (e.g. ``"TempScale t=0.876"``) for the record."""

    data: RetrievalSplit
    config: RetrievalAuditConfig = field(default_factory=RetrievalAuditConfig)
    encoder: TextEncoder | None = None
    encoder_note: str | None = None
    lexical: LexicalScorer | None = None  # needed when config.lexical_searches is not empty

    @classmethod
    def of(
        cls,
        data: RetrievalSplit,
        config: RetrievalAuditConfig,
        *,
        encoder_note: str | None = None,
        lexical: Callable[[Sequence[str]], LexicalScorer] | None = None,
    ) -> RetrievalRequest:
        """The request, its lexical scorer built over the corpus by `lexical` (e.g. `BM25Scorer`) only when one of
        ``config.searches`` needs it, before any model work."""
        scorer = lexical(data.doc_texts) if lexical is not None and config.lexical_searches else None
        return cls(data, config, encoder_note=encoder_note, lexical=scorer)
