"""The shape of ``audit.json``: one TypedDict per section (as mteb types its results), and a check that names
the first missing or mistyped field of a payload read back from disk.

Fields added after lengthwise 0.1 are ``NotRequired``, so older audits still load and re-render. (No
``from __future__ import annotations`` here: TypedDict must see ``NotRequired`` unevaluated-string-free.)
"""

import types
from collections.abc import Mapping
from typing import Any, Literal, Union, cast, get_args, get_origin

from typing_extensions import NotRequired, TypedDict, get_type_hints, is_typeddict

from lengthwise.audit.retrieval.result import RetrievalBias
from lengthwise.core.errors import DataFormatError

__all__ = [
    "AttackSection",
    "AuditPayload",
    "DiagnosticsSection",
    "FirstKRow",
    "SchemaError",
    "ShiftSection",
    "TokensSection",
    "check_payload",
]


class SchemaError(DataFormatError):
    """A payload does not have the shape of ``audit.json``; the message names the JSON field (``attack.tokens``),
    which is no setting, so `field` stays None."""


class JSNullSection(TypedDict):
    mean: float
    q95: float
    p_value: float
    permutations: int


class ShiftSection(TypedDict):
    """Paired similarities before → after (`lengthwise.audit.pairs.shift.similarity_shift`)."""

    n: int
    mean_before: float
    mean_after: float
    median_before: float
    median_after: float
    mean_shift: float
    median_shift: float
    frac_increased: float
    js_distance: float
    js_null: NotRequired[JSNullSection]


class HistogramSection(TypedDict):
    bins: NotRequired[int]
    range: NotRequired[list[float]]
    before: list[int]
    after: list[int]


class AttackSection(ShiftSection):
    elongation: NotRequired[str]
    histogram: HistogramSection


class TokensSection(TypedDict, total=False):
    max_length: int
    special_tokens: int
    content_mean: float
    content_median: float
    content_max: int
    truncated_texts: int
    elongated_mean: float
    m_mean: float
    m_min: int
    m_max: int
    sequences_embedded: int
    tokens_embedded: int
    texts_elongated: int  # texts with m ≥ 2 (the rest fill the window alone and stay unchanged)


class FirstKRow(TypedDict):
    k: int
    mean: float
    median: float
    std: float
    js_distance_vs_full: float
    histogram: list[int]


class WordShuffleSection(ShiftSection):
    histogram: NotRequired[list[int]]


class Similarities(TypedDict):
    before: list[float]
    after: list[float]
    kind: NotRequired[list[str | None]]


class ModelSection(TypedDict, total=False):
    name: str
    architecture: str
    max_seq_length: int
    weights_sha256_16: str
    precision: str  # fp32, bf16/fp16 (half transformer) or int8 (quantized Linear); absent before 0.2


class DataSection(TypedDict, total=False):
    source: str
    format: str
    n_pairs: int
    sha256: str
    kinds: dict[str, int]


class MetaSection(TypedDict, total=False):
    created: str
    seconds: float
    environment: dict[str, Any]


class BinRow(TypedDict):
    bin: int
    label: str
    middle: float


class ProbeSection(TypedDict, total=False):
    skipped: str
    n: int
    r2x100_mean: float
    r2x100_std: float
    folds: list[float]
    ridge_r2x100_mean: float
    ridge_r2x100_std: float
    headline: str
    truncated_share: float
    warnings: list[str]


class LayerSummary(TypedDict):
    n: int
    intra: list[float]
    anisotropy: list[float]
    adjusted: list[float]


class IntraSection(TypedDict):
    layers: list[int]
    original: LayerSummary
    original_subset: NotRequired[LayerSummary]
    elongated: NotRequired[LayerSummary]


class IsotropySection(TypedDict):
    original: dict[str, Any]
    elongation: dict[str, Any]
    by_bin: list[dict[str, Any]]


class CollapseRow(BinRow):
    n: int
    mean_cosine: float | None
    mean_distance_to_centroid: float


class CollapseSection(TypedDict):
    by_bin: list[CollapseRow]


class WordsCurvePair(TypedDict):
    words: list[str]
    ks: list[int]
    cosine: list[float]


class CurveMean(TypedDict):
    ks: list[int]
    cosine: list[float]


class WordsCurveSection(TypedDict):
    pairs: list[WordsCurvePair]
    mean: CurveMean


class AttentionRow(BinRow):
    n: int
    sigma_mean: float
    sigma_std: float
    per_layer_mean: NotRequired[list[float]]


class AttentionSection(TypedDict):
    layers: str
    n_layers: int
    n: int
    docs_per_bin: int | None
    by_bin: list[AttentionRow]


class TruncationRow(TypedDict):
    bin: str
    count: int
    cut: NotRequired[int]
    cut_share: NotRequired[float]
    tokens: NotRequired[int]
    tokens_beyond_window: NotRequired[int]
    tokens_beyond_share: NotRequired[float]


class TruncationSection(TypedDict):
    window: int
    n_docs: int
    cut: int
    cut_share: float
    tokens: int
    tokens_beyond_window: int
    tokens_beyond_share: float
    by_bin: list[TruncationRow]


class DiagnosticsSection(TypedDict, total=False):
    settings: dict[str, Any]
    data: dict[str, Any]
    tokens: dict[str, Any]
    truncation: TruncationSection
    probe: ProbeSection
    intra: IntraSection
    isotropy: IsotropySection
    collapse: CollapseSection
    words_curve: WordsCurveSection
    attention: AttentionSection


class AuditPayload(TypedDict):
    """All of ``audit.json``. `lengthwise audit` writes every section; a report needs only ``attack``, and each
    other section, when present, in the shape below."""

    attack: AttackSection
    tokens: NotRequired[TokensSection]
    first_k_curve: NotRequired[list[FirstKRow]]
    word_shuffle: NotRequired[WordShuffleSection | None]
    attack_by_kind: NotRequired[dict[str, ShiftSection]]
    similarities: NotRequired[Similarities]
    settings: NotRequired[dict[str, Any]]
    model: NotRequired[ModelSection]
    data: NotRequired[DataSection]
    meta: NotRequired[MetaSection]
    warnings: NotRequired[list[str]]
    diagnostics: NotRequired[DiagnosticsSection]
    retrieval_bias: NotRequired[RetrievalBias]  # `lengthwise audit --retrieval DIR` (METHODS §6)


_NAMES = {float: "a number", int: "an integer", str: "a string", bool: "true or false", type(None): "null"}


def _is_instance(value: Any, hint: Any) -> bool:
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)


def _check(value: Any, hint: Any, path: str) -> None:
    """Raise `SchemaError` naming `path` (e.g. ``attack.histogram.before``) where `value` does not fit `hint`."""
    origin = get_origin(hint)
    if hint is Any:
        return
    if is_typeddict(hint):
        if not isinstance(value, Mapping):
            raise SchemaError(
                None, None, f"field {path or '(top level)'} should be an object, got {type(value).__name__}"
            )
        required: frozenset[str] = getattr(hint, "__required_keys__", frozenset())
        for key, sub in get_type_hints(hint).items():
            where = f"{path}.{key}" if path else key
            if key not in value:
                if key in required:
                    raise SchemaError(None, None, f"field {where} is missing")
                continue
            _check(value[key], sub, where)
        return
    if origin in (Union, types.UnionType):
        options = get_args(hint)
        errors = []
        for option in options:
            try:
                _check(value, option, path)
                return
            except SchemaError as error:
                errors.append(error)
        raise (
            errors[0]
            if len(options) == 2 and value is not None
            else SchemaError(None, None, f"field {path} has a wrong type")
        )
    if origin is Literal:
        if value not in get_args(hint):
            raise SchemaError(None, None, f"field {path} is {value!r}, expected one of {get_args(hint)}")
        return
    if origin is list:
        if not isinstance(value, list):
            raise SchemaError(None, None, f"field {path} should be a list, got {type(value).__name__}")
        (item,) = get_args(hint) or (Any,)
        for index, element in enumerate(value):
            _check(element, item, f"{path}[{index}]")
        return
    if origin is dict:
        if not isinstance(value, Mapping):
            raise SchemaError(None, None, f"field {path} should be an object, got {type(value).__name__}")
        _, item = get_args(hint) or (str, Any)
        for key, element in value.items():
            _check(element, item, f"{path}.{key}")
        return
    if isinstance(hint, type) and not _is_instance(value, hint):
        raise SchemaError(
            None, None, f"field {path} should be {_NAMES.get(hint, hint.__name__)}, got {type(value).__name__}"
        )


def _check_probe(payload: Mapping[str, Any]) -> None:
    """A measured probe (not skipped) has its figures."""
    probe = (payload.get("diagnostics") or {}).get("probe")
    if isinstance(probe, Mapping) and "skipped" not in probe:
        for key in ("r2x100_mean", "r2x100_std", "n"):
            if key not in probe:
                raise SchemaError(None, None, f"field diagnostics.probe.{key} is missing")


def check_payload(payload: Any, where: str) -> AuditPayload:
    """`payload` typed as `AuditPayload`, or `SchemaError` naming `where` and the first bad field."""
    try:
        _check(payload, AuditPayload, "")
        _check_probe(payload)
    except SchemaError as error:
        raise SchemaError(
            None, None, f"{where}: {error}; re-run `lengthwise audit` to write a complete audit.json"
        ) from None
    return cast(AuditPayload, payload)
