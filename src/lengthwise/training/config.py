"""What a training run is: the method, its knobs and the run settings, as one frozen, validated dataclass.

The CLI and config files (YAML or JSON) map onto `TrainConfig`; nothing else holds a copy of its fields.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from lengthwise.core.defaults import DEFAULT_MODEL
from lengthwise.core.tokens import Elongation

__all__ = ["DataKind", "Method", "TrainConfig", "config_from_mapping", "parse_method", "read_config_file"]


class Method(str, Enum):
    """The training objectives of METHODS §3; compositions are named by their aliases (see `parse_method`)."""

    SIMCSE = "simcse"
    LASER_SELF = "laser-self"
    LASER_INTRA = "laser-intra"
    COCO_DR = "coco-dr"
    PAIRS = "pairs"
    COPY_CONCAT = "copy-concat"
    HICL = "hicl"
    SIMDE = "simde"


class DataKind(str, Enum):
    """What one training example must be: a text, a document of ≥ 2 sentences, or a positive pair."""

    TEXT = "text"
    DOCUMENT = "document"
    PAIR = "pair"


DATA_KIND = {
    Method.SIMCSE: DataKind.TEXT,
    Method.LASER_SELF: DataKind.TEXT,  # anchor = the first (or a random) sentence of the text
    Method.LASER_INTRA: DataKind.DOCUMENT,
    Method.COCO_DR: DataKind.DOCUMENT,
    Method.PAIRS: DataKind.PAIR,
    Method.COPY_CONCAT: DataKind.PAIR,
    Method.HICL: DataKind.TEXT,
    Method.SIMDE: DataKind.DOCUMENT,
}

# The compositions METHODS §3 names, by the objective that implements each.
ALIASES = {
    "simcse+hicl": Method.HICL,
    "hicl+simcse": Method.HICL,
    "simcse+laser-self": Method.LASER_SELF,
    "laser": Method.LASER_SELF,
    "coco-dr+laser-intra": Method.LASER_INTRA,
    "coco-dr+laser": Method.LASER_INTRA,
    "supervised": Method.PAIRS,
}


def parse_method(name: str | Method) -> Method:
    """A method from its name or an alias; a one-line error lists the valid names otherwise."""
    if isinstance(name, Method):
        return name
    key = name.strip().lower()
    if key in ALIASES:
        return ALIASES[key]
    try:
        return Method(key)
    except ValueError:
        valid = ", ".join([m.value for m in Method] + sorted(ALIASES))
        raise ValueError(f"--method {name!r} is not known; use one of: {valid}") from None


@dataclass(frozen=True)
class TrainConfig:
    """One training run. Paper defaults (METHODS §3): lr 3e-5, 1 epoch, batch 64, N = 256, τ = 0.05."""

    method: Method
    data: str
    out: str
    model: str = DEFAULT_MODEL
    max_steps: int | None = None  # None: `epochs` passes over the data
    epochs: float = 1.0
    batch_size: int = 64  # global batch: split over processes under torchrun
    max_length: int = 256  # N, special tokens included (length-attack uses 512 for copy-concat)
    lr: float = 3e-5
    warmup_ratio: float = 0.0
    seed: int = 42
    pooling: str | None = None  # None: the method's default (cls for simde, else the model's own)
    elongate: str = "random"  # m for LA(SER)³ and copy-and-concat: random, twice or an integer
    anchor: str = "first"  # LA(SER)³ / COCO-DR anchor sentence: first or random
    segment_length: int = 32  # HiCL L
    alpha: float = 0.05  # HiCL local weight
    same_sequence: str = "neither"  # HiCL: same-sequence segments as neither / positive / negative
    denominator: str = "summation"  # HiCL: summation or averaging
    mlm_weight: float = 0.0  # SimDE auxiliary MLM loss weight (the paper's option: 0.1)
    cache_batch: int | None = None  # GradCache mini-batch size for pair objectives
    max_examples: int | None = None  # seeded sample of the training data
    save_steps: int = 500
    save_total_limit: int | None = 2
    keep_checkpoints: bool = True  # False: delete OUT/checkpoints once OUT/model is written (saves disk)
    logging_steps: int = 10
    eval_data: str | None = None  # an STS file for dev evaluation during training
    eval_steps: int | None = None  # None: at every save
    precision: str = "auto"  # auto (bf16/fp16 on GPU, fp32 on CPU), fp32, fp16, bf16
    device: str | None = None
    trust_remote_code: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "method", parse_method(self.method))
        Elongation.parse(self.elongate)  # raises a one-line error for a bad value
        checks = [
            (self.batch_size >= 2, f"--batch-size {self.batch_size}: in-batch negatives need at least 2"),
            (self.max_length >= 8, f"--max-length {self.max_length} is too short to train on"),
            (self.max_steps is None or self.max_steps >= 1, f"--max-steps {self.max_steps} must be ≥ 1"),
            (self.epochs > 0, f"epochs={self.epochs} must be > 0"),
            (self.lr > 0, f"--lr {self.lr} must be > 0"),
            (self.pooling in (None, "mean", "cls", "max"), f"pooling={self.pooling!r}: use mean, cls or max"),
            (self.anchor in ("first", "random"), f"anchor={self.anchor!r}: use first or random"),
            (self.segment_length >= 1, f"segment_length={self.segment_length} must be ≥ 1"),
            (0.0 <= self.alpha <= 1.0, f"alpha={self.alpha} must lie in [0, 1]"),
            (self.same_sequence in ("neither", "positive", "negative"), f"same_sequence={self.same_sequence!r}"),
            (self.denominator in ("summation", "averaging"), f"denominator={self.denominator!r}"),
            (self.mlm_weight >= 0.0, f"mlm_weight={self.mlm_weight} must be ≥ 0"),
            (self.mlm_weight == 0.0 or self.method is Method.SIMDE, "mlm_weight applies to simde only"),
            (self.cache_batch is None or self.cache_batch >= 1, f"--cache-batch {self.cache_batch} must be ≥ 1"),
            (self.cache_batch is None or self.method is not Method.HICL, "--cache-batch is not available for hicl"),
            (self.max_examples is None or self.max_examples >= 2, "--max-examples must be ≥ 2"),
            (self.save_steps >= 1 and self.logging_steps >= 1, "save_steps and logging_steps must be ≥ 1"),
            (self.precision in ("auto", "fp32", "fp16", "bf16"), f"precision={self.precision!r}"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)

    @property
    def data_kind(self) -> DataKind:
        return DATA_KIND[self.method]

    @property
    def elongation(self) -> Elongation:
        return Elongation.parse(self.elongate)

    @property
    def effective_pooling(self) -> str | None:
        """The pooling the run uses: the explicit one, CLS for SimDE (METHODS §3), else the model's own."""
        if self.pooling is not None:
            return self.pooling
        return "cls" if self.method is Method.SIMDE else None

    def to_dict(self) -> dict[str, Any]:
        payload = dataclasses.asdict(self)
        payload["method"] = self.method.value
        return payload


def _coerce(name: str, kind: Any, value: Any) -> Any:
    """`value` (from YAML/JSON or a ``--set KEY=VALUE`` string) as the field's type."""
    options = [t for t in typing.get_args(kind) if t is not type(None)] if isinstance(kind, types.UnionType) else [kind]
    optional = isinstance(kind, types.UnionType) and type(None) in typing.get_args(kind)
    if value is None or (optional and isinstance(value, str) and value.lower() in ("none", "null")):
        if optional:
            return None
        raise ValueError(f"config field {name} cannot be empty")
    target = options[0]
    if target not in (bool, int, float, str):
        return value
    try:
        if target is bool and isinstance(value, str):
            if value.lower() not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError
            return value.lower() in ("true", "1", "yes")
        if target is int and isinstance(value, str):
            return int(float(value)) if float(value).is_integer() else int(value)
        return target(value)
    except (TypeError, ValueError):
        raise ValueError(f"config field {name}={value!r}: expected {target.__name__}") from None


def config_from_mapping(values: dict[str, Any]) -> TrainConfig:
    """A `TrainConfig` from a mapping (config file merged with flags); unknown keys get a one-line error."""
    fields = {field.name: field for field in dataclasses.fields(TrainConfig)}
    hints = typing.get_type_hints(TrainConfig)
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise ValueError(f"unknown training setting(s) {', '.join(unknown)}; valid: {', '.join(fields)}")
    coerced = {name: _coerce(name, hints[name], value) for name, value in values.items()}
    missing = [name for name in ("method", "data", "out") if name not in coerced]
    if missing:
        raise ValueError(f"training needs {', '.join('--' + name for name in missing)}")
    return TrainConfig(**coerced)


def read_config_file(path: str | Path) -> dict[str, Any]:
    """A YAML or JSON mapping of `TrainConfig` fields (dashes or underscores)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ValueError(f"--config {path}: cannot read ({error.strerror})") from None
    if path.suffix == ".json":
        payload = json.loads(text)
    else:
        import yaml

        payload = yaml.safe_load(text)
    if not isinstance(payload, dict):
        raise ValueError(f"--config {path}: expected a mapping of settings, got {type(payload).__name__}")
    return {str(key).replace("-", "_"): value for key, value in payload.items()}
