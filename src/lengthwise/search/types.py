"""The search room's vocabulary: what a search is asked (its mode, its fusion), what an index holds (its lexical
granularity, its engine and candidate vectors), the token stage asked for (`TokenChoice`) and what it answers (`Hit`,
`Passage`).

The search modes and fusion rules themselves (`Mode`, `Fusion`) are the hall's (`lengthwise.core.fusion`), shared with
the retrieval audit.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol, TypedDict

from lengthwise.core.errors import SettingError, enum_member
from lengthwise.core.fusion import FUSION, FUSION_WEIGHT, Fusion

__all__ = [
    "DEFAULT_RULE",
    "DEPTH",
    "RESCORED",
    "RESCORED_AT_LEAST",
    "EncodeSettings",
    "EncodedManifest",
    "Engine",
    "FusionRecord",
    "FusionSettings",
    "Granularity",
    "Hit",
    "HitRecord",
    "IndexSettings",
    "LexicalSettings",
    "ModelRecord",
    "Passage",
    "PassageRecord",
    "Quantize",
    "TokenChoice",
    "TokenSettings",
]

DEPTH = 100  # documents each side proposes per query (at least 10·k)
RESCORED = 10  # documents a dense query scores on all their windows, per one asked for (`rows.rescored_count`)
RESCORED_AT_LEAST = 100  # and at least these
DEFAULT_RULE = Fusion(FUSION)  # the default rule (lengthwise.core.fusion says how chosen)


class Granularity(str, Enum):
    """What BM25 ranks: whole documents (BM25's own length normalisation), the dense index's windows (a document
    scores its best window, passage retrieval), or both (two BM25 sides, each its share of the lexical weight in a
    hybrid search; `BothGranularities`)."""

    DOCUMENT = "document"
    WINDOW = "window"
    BOTH = "both"


class Engine(str, Enum):
    """The ANN library behind the candidate stage."""

    FAISS = "faiss"
    USEARCH = "usearch"


class Quantize(str, Enum):
    """How the candidate stage stores the window vectors."""

    NONE = "none"  # fp32 (exact inner product in the engine)
    INT8 = "int8"  # 8-bit scalar quantization, 1 byte per dimension
    UBINARY = "ubinary"  # the sign bit of each dimension, packed: D / 8 bytes


class FusionRecord(TypedDict, total=False):
    """`FusionSettings` as an index records it (``lexical.json`` "fusion"; records before issue 41 lack the depth)."""

    fusion: str  # a `Fusion` value
    weight: float
    depth: int


@dataclass(frozen=True)
class FusionSettings:
    """How a hybrid search fuses: the rule, the lexical weight (convex) and each side's proposals per query.

    Args:
        fusion: ``convex``, ``rrf``, ``zscore``, ``minmax``, ``dbsf`` or ``adaptive`` (module docstring).
        weight: The lexical side's weight in [0, 1] (0: dense only, 1: BM25 only) for convex, zscore, minmax and
            dbsf; rrf and adaptive do not use it.
        depth: Documents each side proposes per query (at least 10 · k are taken).
    """

    fusion: Fusion = DEFAULT_RULE
    weight: float = FUSION_WEIGHT
    depth: int = DEPTH

    def __post_init__(self) -> None:
        object.__setattr__(self, "fusion", enum_member(Fusion, "fusion", self.fusion))
        if not isinstance(self.weight, (int, float)) or not 0.0 <= self.weight <= 1.0:
            raise SettingError("weight", self.weight, "the lexical weight must be in [0, 1]")
        if self.depth < 1:
            raise SettingError("depth", self.depth, "must be ≥ 1")

    def to_dict(self) -> FusionRecord:
        return {"fusion": self.fusion.value, "weight": self.weight, "depth": self.depth}

    @classmethod
    def from_dict(cls, data: FusionRecord) -> FusionSettings:
        return cls(Fusion(data["fusion"]), float(data["weight"]), int(data.get("depth", DEPTH)))

    @classmethod
    def recorded(cls, lexical: LexicalSettings | Mapping[str, Any] | None) -> FusionSettings:
        """The fusion recorded in an index's lexical settings (None: it holds no text); the defaults where none is."""
        found = lexical.get("fusion") if lexical is not None else None
        return cls.from_dict(found) if found else cls()


class ModelRecord(TypedDict, total=False):
    """The model that embedded an index (`lengthwise.core.models.model_fingerprint`; ``index.json`` "model")."""

    name: str
    architecture: str
    model_type: str | None
    max_seq_length: int
    modules: list[str]
    pooling: dict[str, Any] | None
    weights_sha256_16: str
    tempscale: dict[str, Any] | None  # the live TempScale patch the model carried (`describe()`), if any
    precision: str
    device: str


class EncodeSettings(TypedDict, total=False):
    """How the windows were embedded (the encoded folder's manifest settings; ``index.json`` "encode_settings")."""

    model: str
    data: str
    long: dict[str, Any]  # `lengthwise.longdoc.config.LongDocConfig.to_dict()`
    workers: int
    precision: str
    runner: str  # "ray" when Ray Data encoded them
    format: str  # "parquet" or "npy", when not the runner's default
    texts_sha256: str  # the digest of every (id, text) encoded (`lengthwise.core.corpus.TEXTS`)


class EncodedManifest(TypedDict):
    """An encoded folder's ``manifest.json`` as an index build reads it (`lengthwise.core.shards.read_manifest`)."""

    format: int
    settings: EncodeSettings


class TokenSettings(TypedDict, total=False):
    """How a token folder was made (its manifest's settings, `lengthwise encode-tokens`)."""

    kind: str  # "tokens"
    model: str
    data: str
    codec: str  # the codec asked for (`lengthwise.core.token_codec`; "auto" by default)
    window: int | None  # tokens a pass reads (None: the model's longest)
    overlap: int  # tokens consecutive passes share
    precision: str
    colbert: bool  # read as a ColBERT (`MultiVectorEncoder`)
    texts_sha256: str  # the digest of every (id, text) encoded


class IndexSettings(TypedDict, total=False):
    """An index's record, ``index.json``: what the dense side was built from and how. The file's keys, typed; the
    file itself is read and written as JSON, unchanged."""

    format: int
    generation: str  # the generation served (`lengthwise.search.local.generations`)
    quantize: str  # a `Quantize` value
    engine: str  # an `Engine` value
    windows: int
    dim: int
    encoded: str  # the encoded folder built from
    ids_sha256: str
    shards_sha256: str
    documents: int
    distinct: int  # distinct window vectors (a duplicated text's windows share one)
    nlist: int | None  # FAISS's IVF lists (None: USearch)
    encode_settings: EncodeSettings
    model: ModelRecord


class LexicalSettings(TypedDict, total=False):
    """A lexical side's record, ``lexical.json``: BM25's parameters and the mode and fusion a tuning chose."""

    format: int
    engine: str  # "bm25s"
    granularity: str  # a `Granularity` value
    language: str
    k1: float
    b: float
    documents: int
    units: int
    texts_sha256: str
    generation: str
    fusion: FusionRecord  # `FusionSettings.to_dict()`
    tokens: dict[str, float] | None  # the token side's weight `index tune --tokens` chose (None: it did not win)
    mode: str  # a `lengthwise.core.fusion.Mode` value, once `index tune` chose one
    tuned: dict[str, Any] | None  # what the tuning was scored on


@dataclass(frozen=True)
class Passage:
    """A window of a hit: its number in the document, its character span in the text, the text and its score."""

    window: int
    start: int
    end: int
    score: float
    text: str

    def to_dict(self) -> PassageRecord:
        """JSON-ready, the score rounded to 6 places."""
        return {"window": self.window, "start": self.start, "end": self.end, "score": round(self.score, 6),
                "text": self.text}  # fmt: skip


class PassageRecord(TypedDict):
    """A `Passage` as a search's JSON gives it (`Passage.to_dict`)."""

    window: int
    start: int
    end: int
    score: float
    text: str


class HitRecord(TypedDict, total=False):
    """A `Hit` as a search's JSON gives it (`Hit.to_dict`): each side's score only where computed."""

    id: str
    score: float
    dense: float
    lexical: float
    tokens: float
    passages: list[PassageRecord]
    matched: PassageRecord


@dataclass(frozen=True)
class Hit:
    """One document found for a query: its id and fused score (the side's own score in a one-sided mode), each
    side's exact score where computed, and its best passages; with the token stage and passages asked, `matched`:
    the span where the query's best-matched tokens gather (`lengthwise.search.tokens.TokenSide.passage`)."""

    id: str
    score: float
    dense: float | None = None
    lexical: float | None = None
    passages: tuple[Passage, ...] = field(default_factory=tuple)
    tokens: float | None = None  # the token side's MaxSim, when it rescored the hit
    matched: Passage | None = None  # the token side's passage (its `window`: the window where it starts)

    def to_dict(self) -> HitRecord:
        """JSON-ready: scores rounded to 6 places, passages only when there are some."""
        out: HitRecord = {"id": self.id, "score": round(self.score, 6)}
        if self.dense is not None:
            out["dense"] = round(self.dense, 6)
        if self.lexical is not None:
            out["lexical"] = round(self.lexical, 6)
        if self.tokens is not None:
            out["tokens"] = round(self.tokens, 6)
        if self.passages:
            out["passages"] = [p.to_dict() for p in self.passages]
        if self.matched is not None:
            out["matched"] = self.matched.to_dict()
        return out


class _TakesTokens(Protocol):
    """What `TokenChoice.apply` needs of an index (`SearchIndex.use_tokens`)."""

    def use_tokens(
        self,
        folder: str | os.PathLike[str] | None,
        *,
        weight: float | None = None,
        depth: int | None = None,
        around: int | None = None,
    ) -> None: ...


@dataclass(frozen=True)
class TokenChoice:
    """A token stage as asked for (``--tokens``, ``--token-weight``, ``--token-around``, ``--token-depth``;
    `SearchIndex.use_tokens`): the folder of `lengthwise encode-tokens` and the stage's weight, windows read and
    documents rescored (None: the defaults)."""

    folder: str | os.PathLike[str] | None = None
    weight: float | None = None
    around: int | None = None
    depth: int | None = None

    @classmethod
    def of(cls, tokens: TokenChoice | str | os.PathLike[str] | None) -> TokenChoice:
        """`tokens` as a choice: a folder alone is the stage at its default weight and windows."""
        return tokens if isinstance(tokens, TokenChoice) else cls(tokens)

    @property
    def asked(self) -> bool:
        """Whether any of the four was given."""
        return any(value is not None for value in (self.folder, self.weight, self.around, self.depth))

    def given(self) -> dict[str, object]:
        """The settings given, by their names in a `SettingError` (``tokens``, ``token_weight``, ...)."""
        named = {"tokens": self.folder, "token_weight": self.weight, "token_around": self.around,
                 "token_depth": self.depth}  # fmt: skip
        return {name: value for name, value in named.items() if value is not None}

    def apply(self, index: _TakesTokens) -> None:
        """Put the stage on `index` (`use_tokens`, which refuses a folder that does not fit) when anything was asked;
        else leave the index as it is."""
        if self.asked:
            index.use_tokens(self.folder, weight=self.weight, depth=self.depth, around=self.around)
