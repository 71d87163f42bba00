"""What a training run is: the method, its knobs and the run settings, as one frozen, validated dataclass.

The CLI and config files (YAML or JSON) map onto `TrainConfig`; nothing else holds a copy of its fields. Each
field carries its help text (``metadata["help"]``), which ``lengthwise train --help`` shows. Settings with a fixed
set of values are ``str`` Enums shared with the code that uses them (the losses, the views, the run).
"""

from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from lengthwise.core.defaults import DEFAULT_MODEL
from lengthwise.core.errors import SettingError
from lengthwise.core.tokens import Elongation

__all__ = [
    "AnchorChoice",
    "DataKind",
    "Denominator",
    "Method",
    "Pooling",
    "Precision",
    "Reference",
    "SameSequence",
    "TrainConfig",
    "config_from_mapping",
    "parse_method",
    "read_config_file",
]


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
    LENGTH_INVARIANT = "length-invariant"


class DataKind(str, Enum):
    """What one training example must be: a text, a document of ≥ 2 sentences, or a positive pair."""

    TEXT = "text"
    DOCUMENT = "document"
    PAIR = "pair"


class Pooling(str, Enum):
    """How token vectors become the sentence vector (the model's own Pooling module is switched to it)."""

    MEAN = "mean"
    CLS = "cls"
    MAX = "max"


class AnchorChoice(str, Enum):
    """Which sentence of a document is the anchor for LA(SER)³ and COCO-DR."""

    FIRST = "first"
    RANDOM = "random"


class SameSequence(str, Enum):
    """HiCL: what the other segments of a segment's own sequence are in the local loss (hicl §3.2 ablation)."""

    NEITHER = "neither"
    POSITIVE = "positive"
    NEGATIVE = "negative"


class Denominator(str, Enum):
    """HiCL: each other-sequence negative weighs 1 ("summation") or 1 / its sequence's segments ("averaging")."""

    SUMMATION = "summation"
    AVERAGING = "averaging"


class Reference(str, Enum):
    """length-invariant: where an elongated text is pulled to, the starting model's embedding of the original (a
    frozen copy, "teacher") or the student's own, with the gradient stopped ("self", no copy)."""

    TEACHER = "teacher"
    SELF = "self"


class Precision(str, Enum):
    """Training precision: auto (bf16, else fp16, on a GPU; fp32 on a CPU) or one fixed choice."""

    AUTO = "auto"
    FP32 = "fp32"
    FP16 = "fp16"
    BF16 = "bf16"


DATA_KIND = {
    Method.SIMCSE: DataKind.TEXT,
    Method.LASER_SELF: DataKind.TEXT,  # anchor = the first (or a random) sentence of the text
    Method.LASER_INTRA: DataKind.DOCUMENT,
    Method.COCO_DR: DataKind.DOCUMENT,
    Method.PAIRS: DataKind.PAIR,
    Method.COPY_CONCAT: DataKind.PAIR,
    Method.HICL: DataKind.TEXT,
    Method.SIMDE: DataKind.DOCUMENT,
    Method.LENGTH_INVARIANT: DataKind.PAIR,  # the plain pair, and each side elongated for the invariance term
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
METHOD_HELP = (
    "simcse, laser-self (SimCSE + LA(SER)³ self-ref), laser-intra (COCO-DR + LA(SER)³ intra-ref), coco-dr, "
    "pairs (supervised InfoNCE), copy-concat, hicl (HiCL on SimCSE), simde, length-invariant (pairs + "
    "self-distillation of elongated texts to the starting model)."
)
DATA_HELP = "Texts (one per line; JSONL `text`; BEIR folder) or positive pairs (JSONL, MRPC TSV); hf:NAME[:SPLIT]."
SIMDE_MLM_WEIGHT = 0.1  # the SimDE paper's auxiliary MLM weight (METHODS §3)


def parse_method(name: str | Method) -> Method:
    """A method from its name or an alias; a one-line error lists the valid names otherwise."""
    if isinstance(name, Method):
        return name
    key = str(name).strip().lower()
    if key in ALIASES:
        return ALIASES[key]
    try:
        return Method(key)
    except ValueError:
        valid = ", ".join([m.value for m in Method] + sorted(ALIASES))
        raise SettingError("method", name, f"not known; use one of: {valid}") from None


def _enum(kind: type[Enum], name: str, value: Any) -> Any:
    """`value` as a member of `kind`, or a `SettingError` listing the valid values."""
    if value is None or isinstance(value, kind):
        return value
    try:
        return kind(str(value).strip().lower())
    except ValueError:
        valid = ", ".join(str(member.value) for member in kind)
        if kind is Precision and str(value).strip().lower() == "int8":
            problem = f"int8 is for inference on the CPU, not training; use one of: {valid}"
            raise SettingError(name, value, problem) from None
        raise SettingError(name, value, f"use one of: {valid}") from None


@dataclass(frozen=True)
class TrainConfig:
    """One training run. Paper defaults (METHODS §3): lr 3e-5, 1 epoch, batch 64, N = 256, τ = 0.05."""

    method: Method = field(metadata={"help": METHOD_HELP})
    data: str = field(metadata={"help": DATA_HELP})
    out: str = field(metadata={"help": "Run directory (config.json, checkpoints/, model/, train.json)."})
    model: str = field(default=DEFAULT_MODEL, metadata={"help": "Starting model: directory or hub id."})
    max_steps: int | None = field(
        default=None, metadata={"help": "Stop after this many optimizer steps (default: `epochs` passes)."}
    )
    epochs: float = field(default=1.0, metadata={"help": "Passes over the data when max_steps is not set."})
    batch_size: int = field(default=64, metadata={"help": "Global batch (split over processes under torchrun)."})
    max_length: int = field(
        default=256, metadata={"help": "N, special tokens included (length-attack uses 512 for copy-concat)."}
    )
    lr: float = field(default=3e-5, metadata={"help": "Peak learning rate (linear schedule)."})
    warmup_ratio: float = field(
        default=0.0, metadata={"help": "Share of the steps spent warming the learning rate up, in [0, 1)."}
    )
    seed: int = field(default=42, metadata={"help": "Seed for data order, views, masking and dropout."})
    pooling: Pooling | None = field(
        default=None, metadata={"help": "mean, cls or max (default: cls for simde, else the model's own)."}
    )
    elongate: str = field(
        default="random", metadata={"help": "m for laser-*/copy-concat: random, twice or an integer."}
    )
    copy_concat_share: float = field(
        default=1.0,
        metadata={
            "help": "copy-concat: share of batches whose pairs are elongated, in (0, 1]; the other batches train on "
            "the plain pairs (the length-robust recipe mixes them to keep quality)."
        },
    )
    anchor: AnchorChoice = field(
        default=AnchorChoice.FIRST, metadata={"help": "LA(SER)³ / COCO-DR anchor sentence: first or random."}
    )
    segment_length: int = field(default=32, metadata={"help": "HiCL segment length L in tokens."})
    alpha: float = field(default=0.05, metadata={"help": "HiCL weight of the local (segment) loss, in [0, 1]."})
    same_sequence: SameSequence = field(
        default=SameSequence.NEITHER,
        metadata={"help": "HiCL: same-sequence segments as neither, positive or negative."},
    )
    denominator: Denominator = field(
        default=Denominator.SUMMATION, metadata={"help": "HiCL: summation or averaging denominator."}
    )
    invariance_weight: float = field(
        default=1.0,
        metadata={"help": "length-invariant: weight of pulling each elongated text to the starting model's original."},
    )
    consistency_weight: float = field(
        default=0.0,
        metadata={"help": "length-invariant: weight of matching the batch's elongated cosines to the originals'."},
    )
    invariance_reference: Reference = field(
        default=Reference.TEACHER,
        metadata={"help": "length-invariant: the originals' embeddings from the starting model (teacher) or the "
                  "student itself, gradient stopped (self)."},
    )  # fmt: skip
    consistency_reference: Reference | None = field(
        default=None,
        metadata={"help": "length-invariant: the reference cosines of the consistency term, teacher or self "
                  "(default: invariance_reference)."},
    )  # fmt: skip
    mlm_weight: float | None = field(
        default=None, metadata={"help": "SimDE's auxiliary MLM loss weight (default: simde 0.1, the paper's)."}
    )
    cache_batch: int | None = field(
        default=None, metadata={"help": "GradCache mini-batch size for pair objectives (big batches)."}
    )
    max_examples: int | None = field(default=None, metadata={"help": "Seeded random sample of the training data."})
    save_steps: int = field(default=500, metadata={"help": "Checkpoint every N steps."})
    save_total_limit: int | None = field(default=2, metadata={"help": "Checkpoints kept (oldest deleted first)."})
    keep_checkpoints: bool = field(
        default=True, metadata={"help": "Keep OUT/checkpoints once OUT/model is written (false saves disk)."}
    )
    logging_steps: int = field(default=10, metadata={"help": "Log the loss every N steps."})
    eval_data: str | None = field(default=None, metadata={"help": "An STS file for dev evaluation during training."})
    eval_steps: int | None = field(default=None, metadata={"help": "Evaluate every N steps (default: at every save)."})
    eval_attack: int | None = field(
        default=None,
        metadata={
            "help": "Also watch the elongation attack on eval_data's pairs, each text copied m times (e.g. 100): "
            "mean similarity shift, share risen and JSD logged next to the dev score."
        },
    )
    recipe: str | None = field(
        default=None, metadata={"help": "A named recipe whose settings are the defaults (e.g. length-robust)."}
    )
    precision: Precision = field(
        default=Precision.AUTO, metadata={"help": "auto (bf16/fp16 on GPU, fp32 on CPU), fp32, fp16 or bf16."}
    )
    device: str | None = field(default=None, metadata={"help": "cpu, cuda, cuda:N, mps (default: the best available)."})
    trust_remote_code: bool = field(default=False, metadata={"help": "Allow the model repository's own code to run."})

    def __post_init__(self) -> None:
        for name, kind in (
            ("pooling", Pooling),
            ("anchor", AnchorChoice),
            ("same_sequence", SameSequence),
            ("denominator", Denominator),
            ("invariance_reference", Reference),
            ("consistency_reference", Reference),
            ("precision", Precision),
        ):
            object.__setattr__(self, name, _enum(kind, name, getattr(self, name)))
        object.__setattr__(self, "method", parse_method(self.method))
        if self.mlm_weight is None:
            object.__setattr__(self, "mlm_weight", SIMDE_MLM_WEIGHT if self.method is Method.SIMDE else 0.0)
        try:
            Elongation.parse(self.elongate)
        except ValueError:
            raise SettingError("elongate", self.elongate, "use a positive integer, random or twice") from None
        for name in ("lr", "epochs", "alpha", "warmup_ratio", "mlm_weight", "copy_concat_share", "invariance_weight",
                     "consistency_weight"):  # fmt: skip
            if not math.isfinite(float(getattr(self, name))):
                raise SettingError(name, getattr(self, name), "must be a finite number")
        checks = [
            ("batch_size", self.batch_size >= 2, "in-batch negatives need at least 2"),
            ("max_length", self.max_length >= 8, "too short to train on; use at least 8"),
            ("max_steps", self.max_steps is None or self.max_steps >= 1, "must be ≥ 1"),
            ("epochs", self.epochs > 0, "must be > 0"),
            ("lr", self.lr > 0, "must be > 0, e.g. 3e-5"),
            ("warmup_ratio", 0.0 <= self.warmup_ratio < 1.0, "must lie in [0, 1): a share of the steps"),
            ("copy_concat_share", 0.0 < self.copy_concat_share <= 1.0, "must lie in (0, 1]: a share of the batches"),
            (
                "copy_concat_share",
                self.copy_concat_share == 1.0 or self.method is Method.COPY_CONCAT,
                "applies to copy-concat only",
            ),
            ("eval_attack", self.eval_attack is None or self.eval_attack >= 2, "copies m must be ≥ 2, e.g. 100"),
            ("eval_attack", self.eval_attack is None or bool(self.eval_data), "needs eval_data (the pairs to attack)"),
            ("invariance_weight", self.invariance_weight >= 0.0, "must be ≥ 0"),
            ("consistency_weight", self.consistency_weight >= 0.0, "must be ≥ 0"),
            (
                "invariance_reference",
                self.invariance_reference is Reference.TEACHER or self.method is Method.LENGTH_INVARIANT,
                "applies to length-invariant only",
            ),
            (
                "consistency_reference",
                self.consistency_reference is None or self.method is Method.LENGTH_INVARIANT,
                "applies to length-invariant only",
            ),
            (
                "consistency_weight",
                self.consistency_weight == 0.0 or self.method is Method.LENGTH_INVARIANT,
                "applies to length-invariant only",
            ),
            ("segment_length", self.segment_length >= 1, "must be ≥ 1"),
            ("alpha", 0.0 <= self.alpha <= 1.0, "must lie in [0, 1]"),
            ("mlm_weight", self.mlm_loss_weight >= 0.0, "must be ≥ 0"),
            ("mlm_weight", self.mlm_loss_weight == 0.0 or self.method is Method.SIMDE, "applies to simde only"),
            ("cache_batch", self.cache_batch is None or self.cache_batch >= 1, "must be ≥ 1"),
            ("cache_batch", self.cache_batch is None or self.method is not Method.HICL, "not available for hicl"),
            ("max_examples", self.max_examples is None or self.max_examples >= 2, "must be ≥ 2"),
            ("save_steps", self.save_steps >= 1, "must be ≥ 1"),
            ("save_total_limit", self.save_total_limit is None or self.save_total_limit >= 1, "must be ≥ 1"),
            ("logging_steps", self.logging_steps >= 1, "must be ≥ 1"),
            ("eval_steps", self.eval_steps is None or self.eval_steps >= 1, "must be ≥ 1"),
        ]
        for name, ok, problem in checks:
            if not ok:
                raise SettingError(name, getattr(self, name), problem)

    @property
    def data_kind(self) -> DataKind:
        return DATA_KIND[self.method]

    @property
    def elongation(self) -> Elongation:
        return Elongation.parse(self.elongate)

    @property
    def mlm_loss_weight(self) -> float:
        """The MLM auxiliary weight in force (the method's default resolved)."""
        return float(self.mlm_weight or 0.0)

    @property
    def effective_pooling(self) -> Pooling | None:
        """The pooling the run uses: the explicit one, CLS for SimDE (METHODS §3), else the model's own."""
        if self.pooling is not None:
            return self.pooling
        return Pooling.CLS if self.method is Method.SIMDE else None

    def to_dict(self) -> dict[str, Any]:
        """The settings as plain JSON values (Enums by their value)."""
        payload = dataclasses.asdict(self)
        return {key: value.value if isinstance(value, Enum) else value for key, value in payload.items()}


def _coerce(name: str, kind: Any, value: Any) -> Any:
    """`value` (from YAML/JSON or a ``--set KEY=VALUE`` string) as the field's type."""
    options = [t for t in typing.get_args(kind) if t is not type(None)] if isinstance(kind, types.UnionType) else [kind]
    optional = isinstance(kind, types.UnionType) and type(None) in typing.get_args(kind)
    if value is None or (optional and isinstance(value, str) and value.lower() in ("none", "null")):
        if optional:
            return None
        raise SettingError(name, value, "cannot be empty")
    target = options[0]
    if target not in (bool, int, float, str):
        return value  # Enums and Method: validated, with the valid values, in TrainConfig.__post_init__
    try:
        if target is bool and isinstance(value, str):
            if value.lower() not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError
            return value.lower() in ("true", "1", "yes")
        if target is int and isinstance(value, str):
            return int(float(value)) if float(value).is_integer() else int(value)
        if target is int and isinstance(value, float):
            if not value.is_integer():
                raise ValueError
            return int(value)
        return target(value)
    except (TypeError, ValueError, OverflowError):
        raise SettingError(name, value, f"expected {target.__name__}") from None


def config_from_mapping(values: dict[str, Any]) -> TrainConfig:
    """A `TrainConfig` from a mapping (config file merged with flags) over the defaults of the recipe it names
    (``recipe``, see `lengthwise.training.recipes`); unknown keys get a one-line error."""
    from lengthwise.training.recipes import apply_recipe

    values = apply_recipe(values)
    fields = {item.name: item for item in dataclasses.fields(TrainConfig)}
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
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or "not UTF-8 text"
        raise ValueError(f"--config {path}: cannot read ({reason})") from None
    try:
        if path.suffix == ".json":
            payload = json.loads(text)
        else:
            import yaml

            payload = yaml.safe_load(text)
    except ValueError as error:  # json.JSONDecodeError
        raise ValueError(f"--config {path}: not valid JSON ({error})") from None
    except Exception as error:  # yaml.YAMLError: the first line names the place
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ValueError(f"--config {path}: not valid YAML ({first})") from None
    if not isinstance(payload, dict):
        raise ValueError(f"--config {path}: expected a mapping of settings, got {type(payload).__name__}")
    return {str(key).replace("-", "_"): value for key, value in payload.items()}
