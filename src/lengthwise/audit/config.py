"""The audit's settings, once: frozen dataclasses validated in ``__post_init__``, `str` Enums for the settings
with a fixed set of values, and a help text on every field that the CLI reads for its flags. Light to import
(no numpy, no torch), so `lengthwise --help` can read it.

A bad value raises `SettingError` naming the *field*; the command line maps the field to its flag.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lengthwise.audit.retrieval.config import RetrievalAuditConfig
from lengthwise.core.errors import SettingError
from lengthwise.core.tokens import Elongation, ElongationMode

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "DEFAULT_CURVE_KS",
    "MAX_BINS",
    "WORD_PAIRS",
    "AttentionLayers",
    "AuditConfig",
    "AuditJob",
    "Diagnostic",
    "DocAuditConfig",
    "HistogramSpec",
]

DEFAULT_CURVE_KS = (16, 32, 64, 128, 256, 512)
MAX_BINS = 1000  # 1000 bins over [-1, 1] is 0.002 wide, below any cosine difference worth reading
WORD_PAIRS = (("dog", "word"), ("apple", "theorem"), ("river", "keyboard"), ("music", "tax"))


class Diagnostic(str, Enum):
    """The document diagnostics of METHODS §1, by their section name in ``audit.json``."""

    PROBE = "probe"
    INTRA = "intra"
    ISOTROPY = "isotropy"
    COLLAPSE = "collapse"
    WORDS_CURVE = "words_curve"
    ATTENTION = "attention"

    @property
    def needs_documents(self) -> bool:
        return self is not Diagnostic.WORDS_CURVE


class AttentionLayers(str, Enum):
    """Which layers' attention filter rate σ_a is measured."""

    LAST = "last"
    ALL = "all"


@dataclass(frozen=True)
class HistogramSpec:
    """Fixed histogram bins for similarity distributions: `bins` equal bins over [low, high]."""

    bins: int = field(
        default=100, metadata={"help": f"Histogram bins over [-1, 1] for the JS distance (2–{MAX_BINS})."}
    )
    low: float = -1.0
    high: float = 1.0

    def __post_init__(self) -> None:
        if not 2 <= self.bins <= MAX_BINS:
            raise SettingError("bins", self.bins, f"use 2 to {MAX_BINS} bins (every histogram is stored per bin)")
        if not self.low < self.high:
            raise SettingError("histogram", [self.low, self.high], "the range is empty")

    @property
    def edges(self) -> np.ndarray:
        import numpy as np  # here, so that the CLI reads these settings without loading numpy

        return np.linspace(self.low, self.high, self.bins + 1)


def _default_elongation() -> Elongation:
    return Elongation(ElongationMode.FIXED, 100)


@dataclass(frozen=True)
class AuditConfig:
    """Settings of one elongation audit on pairs (METHODS §1).

    `first_k` truncates every text to its first k tokens (special tokens included) before anything else —
    the length-attack paper's "first 64 tokens vs 8 copies" setting is ``first_k=64, elongation=8`` at N=512.
    `curve_ks` are input lengths (special tokens included) for the semantic-altered curve; k > N is skipped.
    `null_permutations` within-pair swaps give the JS distance's noise level and p-value (0 = skip).
    """

    elongation: Elongation = field(
        default_factory=_default_elongation,
        metadata={"help": "Copies m per text: an integer (capped by N), 'random' or 'twice'."},
    )
    first_k: int | None = field(
        default=None,
        metadata={"help": "Truncate every pair text to its first k tokens (specials included) before anything else."},
    )
    curve_ks: tuple[int, ...] = field(
        default=DEFAULT_CURVE_KS, metadata={"help": "Lengths k of the first-k curve (repeatable)."}
    )
    word_shuffle: bool = field(default=True, metadata={"help": "Run the word-shuffle probe."})
    histogram: HistogramSpec = field(default_factory=HistogramSpec)
    batch_size: int = field(default=32, metadata={"help": "Sequences per forward pass."})
    seed: int = field(default=0, metadata={"help": "Seed for sampling, random m and word shuffles."})
    null_permutations: int = field(
        default=200,
        metadata={"help": "Within-pair swaps for the JSD's noise level and p-value; 0 = skip."},
    )

    def __post_init__(self) -> None:
        if self.null_permutations < 0:
            raise SettingError("null_permutations", self.null_permutations, "must be ≥ 0 (0 skips the null)")
        if self.first_k is not None and self.first_k < 3:
            raise SettingError("first_k", self.first_k, "leaves no content token; use at least 3")
        if any(k < 3 for k in self.curve_ks):
            raise SettingError("curve_ks", list(self.curve_ks), "every length must be ≥ 3 tokens")
        if self.batch_size < 1:
            raise SettingError("batch_size", self.batch_size, "must be ≥ 1")

    def to_dict(self) -> dict[str, Any]:
        settings = asdict(self)
        settings["elongation"] = self.elongation.describe()
        settings["histogram"] = {"bins": self.histogram.bins, "range": [self.histogram.low, self.histogram.high]}
        return settings


@dataclass(frozen=True)
class DocAuditConfig:
    """Which document diagnostics to run, and how (METHODS §1). `bin_width` None: `LengthBins.default`."""

    diagnostics: tuple[Diagnostic, ...] = field(
        default=tuple(Diagnostic), metadata={"help": "The diagnostics to run (all by default)."}
    )
    bin_width: int | None = field(
        default=None, metadata={"help": "Length-bin width in tokens; default N/8 (32 at N=256)."}
    )
    elongation: Elongation = field(default_factory=_default_elongation, metadata={"help": "Copies m per document."})
    first_k: int | None = field(
        default=None,
        metadata={"help": "Truncate every document to its first k tokens (specials included); 0 = no cut."},
    )
    attention_per_bin: int | None = field(
        default=100, metadata={"help": "Documents per length bin in the σ_a pass; 0 = all."}
    )
    attention_layers: AttentionLayers = field(
        default=AttentionLayers.LAST, metadata={"help": "σ_a of the last layer, or of every layer."}
    )
    probe_folds: int = field(default=5, metadata={"help": "Cross-validation folds of the length probe."})
    word_pairs: tuple[tuple[str, str], ...] = WORD_PAIRS
    batch_size: int = 32
    seed: int = 0

    def __post_init__(self) -> None:
        names = ", ".join(d.value for d in Diagnostic)
        unknown = [name for name in self.diagnostics if name not in {d.value for d in Diagnostic}]
        if unknown or not self.diagnostics:
            raise SettingError("diagnostics", unknown or [], f"unknown or none; choose from {names}")
        chosen = tuple(Diagnostic(name) for name in self.diagnostics)
        if self.attention_layers not in {layers.value for layers in AttentionLayers}:
            raise SettingError("attention_layers", self.attention_layers, "use 'last' or 'all'")
        object.__setattr__(self, "attention_layers", AttentionLayers(self.attention_layers))
        object.__setattr__(self, "diagnostics", chosen)
        if self.bin_width is not None and self.bin_width < 1:
            raise SettingError("bin_width", self.bin_width, "must be ≥ 1 token")
        if self.batch_size < 1:
            raise SettingError("batch_size", self.batch_size, "must be ≥ 1")
        if self.probe_folds < 2:
            raise SettingError("probe_folds", self.probe_folds, "must be ≥ 2")
        if self.first_k is not None and self.first_k < 3:
            raise SettingError("first_k", self.first_k, "leaves no content token; use at least 3")
        if self.attention_per_bin is not None and self.attention_per_bin < 1:
            raise SettingError("attention_per_bin", self.attention_per_bin, "must be ≥ 1 (or None for all)")

    def wants(self, diagnostic: Diagnostic) -> bool:
        return diagnostic in self.diagnostics

    @property
    def needs_documents(self) -> bool:
        return any(d.needs_documents for d in self.diagnostics)

    def to_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "elongation": self.elongation.describe(),
            "diagnostics": [d.value for d in self.diagnostics],
            "attention_layers": self.attention_layers.value,
        }


@dataclass(frozen=True)
class AuditJob:
    """One `lengthwise audit` run: what to read, what to measure, and where to write the output set."""

    out: Path = field(
        default=Path("lengthwise-audit"),
        metadata={"help": "Output directory; it is replaced as one unit, so it must be new or an earlier audit's."},
    )
    pairs: Path | None = field(
        default=None,
        metadata={
            "help": "Text pairs: STS TSV/CSV, JSONL (text1/text2, or text + group), or a BEIR folder. "
            "Default: the embedded probe set."
        },
    )
    max_pairs: int | None = field(default=None, metadata={"help": "Use at most this many pairs (seeded sample)."})
    docs: Path | None = field(
        default=None,
        metadata={"help": "Documents for the diagnostics: JSONL with a 'text' field, or one per line."},
    )
    max_docs: int | None = field(
        default=2000, metadata={"help": "Use at most this many documents (seeded sample); 0 = all."}
    )
    attack: AuditConfig = field(default_factory=AuditConfig)
    diagnostics: DocAuditConfig | None = None
    retrieval_data: Path | None = field(
        default=None,
        metadata={
            "help": "A BEIR folder (corpus, queries, qrels/SPLIT.tsv): also audit retrieval length bias (METHODS §6)."
        },
    )
    retrieval_split: str = field(default="test", metadata={"help": "The qrels split of the retrieval data."})
    retrieval: RetrievalAuditConfig = field(default_factory=RetrievalAuditConfig)

    def __post_init__(self) -> None:
        if self.max_pairs is not None and self.max_pairs < 1:
            raise SettingError("max_pairs", self.max_pairs, "must be ≥ 1")
        if self.max_docs is not None and self.max_docs < 1:
            raise SettingError("max_docs", self.max_docs, "must be ≥ 1 (or None for all)")
        if self.diagnostics is not None and self.diagnostics.needs_documents and self.docs is None:
            raise SettingError("docs", None, "the document diagnostics need documents")
