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
import warnings
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from lengthwise.core.defaults import DEFAULT_MODEL
from lengthwise.core.errors import DataFormatError, SettingError
from lengthwise.core.tokens import Elongation
from lengthwise.training.methods import MethodSettings, enum_value, settings_class, settings_fields

__all__ = [
    "DataKind",
    "Method",
    "MixedPrecision",
    "Pooling",
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


class MixedPrecision(str, Enum):
    """Training's mixed precision: auto (bf16, else fp16, on a GPU; fp32 on a CPU) or one fixed choice. (Inference
    precision, auto/fp32/bf16/fp16/int8, is `lengthwise.core.precision.Precision`: another concept, another name.)"""

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
    """`value` as a member of `kind`, or a `SettingError` listing the valid values (int8 refused for training)."""
    if kind is MixedPrecision and str(getattr(value, "value", value)).strip().lower() == "int8":
        valid = ", ".join(str(member.value) for member in kind)
        raise SettingError(name, value, f"int8 is for inference on the CPU, not training; use one of {valid}")
    return enum_value(kind, name, value)


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
    settings: MethodSettings | None = field(
        default=None,
        metadata={"help": "The method's own settings (`lengthwise.training.methods`; default: the method's defaults)."},
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
    mixed_precision: MixedPrecision = field(
        default=MixedPrecision.AUTO,
        metadata={"help": "Mixed precision: auto (bf16/fp16 on GPU, fp32 on CPU), fp32, fp16 or bf16."},
    )
    device: str | None = field(default=None, metadata={"help": "cpu, cuda, cuda:N, mps (default: the best available)."})
    trust_remote_code: bool = field(default=False, metadata={"help": "Allow the model repository's own code to run."})

    def __post_init__(self) -> None:
        object.__setattr__(self, "pooling", _enum(Pooling, "pooling", self.pooling))
        object.__setattr__(self, "mixed_precision", _enum(MixedPrecision, "mixed_precision", self.mixed_precision))
        object.__setattr__(self, "method", parse_method(self.method))
        kind = settings_class(self.method)
        if self.settings is None:
            object.__setattr__(self, "settings", kind())
        elif type(self.settings) is not kind:
            problem = f"{self.method.value} takes {kind.__name__} (lengthwise.training.methods)"
            raise SettingError("settings", type(self.settings).__name__, problem)
        try:
            Elongation.parse(self.elongate)
        except ValueError:
            raise SettingError("elongate", self.elongate, "use a positive integer, random or twice") from None
        for name in ("lr", "epochs", "warmup_ratio"):
            if not math.isfinite(float(getattr(self, name))):
                raise SettingError(name, getattr(self, name), "must be a finite number")
        checks = [
            ("batch_size", self.batch_size >= 2, "in-batch negatives need at least 2"),
            ("max_length", self.max_length >= 8, "too short to train on; use at least 8"),
            ("max_steps", self.max_steps is None or self.max_steps >= 1, "must be ≥ 1"),
            ("epochs", self.epochs > 0, "must be > 0"),
            ("lr", self.lr > 0, "must be > 0, e.g. 3e-5"),
            ("warmup_ratio", 0.0 <= self.warmup_ratio < 1.0, "must lie in [0, 1): a share of the steps"),
            ("eval_attack", self.eval_attack is None or self.eval_attack >= 2, "copies m must be ≥ 2, e.g. 100"),
            ("eval_attack", self.eval_attack is None or bool(self.eval_data), "needs eval_data (the pairs to attack)"),
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
        """The MLM auxiliary weight in force: SimDE's `mlm_weight`, 0 for every other method."""
        return float(getattr(self.settings, "mlm_weight", 0.0))

    @property
    def effective_pooling(self) -> Pooling | None:
        """The pooling the run uses: the explicit one, CLS for SimDE (METHODS §3), else the model's own."""
        if self.pooling is not None:
            return self.pooling
        return Pooling.CLS if self.method is Method.SIMDE else None

    def to_dict(self) -> dict[str, Any]:
        """The settings as plain JSON values (Enums by their value), the method's own flat beside the common ones,
        as a config file or `config_from_mapping` takes them."""
        common = {item.name: getattr(self, item.name) for item in dataclasses.fields(self) if item.name != "settings"}
        payload = {key: value.value if isinstance(value, Enum) else value for key, value in common.items()}
        assert self.settings is not None  # resolved in __post_init__
        return {**payload, **self.settings.to_dict()}


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


RENAMED_SETTINGS = {"precision": "mixed_precision"}  # old name → new one; the old one is read until 0.4


def renamed_settings(values: dict[str, Any]) -> dict[str, Any]:
    """`values` with each renamed setting under its new name (a config file or a saved run written before the
    rename), warning once per name; a mapping that gives both names keeps the new one's value."""
    out = dict(values)
    for old, new in RENAMED_SETTINGS.items():
        if old in out:
            warnings.warn(f"training setting {old!r} is now {new!r}; {old!r} stops working in 0.4", FutureWarning,
                          stacklevel=3)  # fmt: skip
            value = out.pop(old)
            out.setdefault(new, value)
    return out


def config_from_mapping(values: dict[str, Any]) -> TrainConfig:
    """A `TrainConfig` from a flat mapping (config file merged with flags) over the defaults of the recipe it names
    (``recipe``, see `lengthwise.training.recipes`). The method's own settings (``alpha``, ``invariance_weight``, …)
    go to its settings class; a setting of another method, or an unknown key, gets a one-line error."""
    from lengthwise.training.recipes import apply_recipe

    values = apply_recipe(renamed_settings(values))
    fields = [item.name for item in dataclasses.fields(TrainConfig) if item.name != "settings"]
    own = settings_fields()
    valid = [*fields, *own]  # in declaration order: the common settings, then each method's
    unknown = sorted(set(values) - set(valid))
    if unknown:
        import difflib

        close = {name: difflib.get_close_matches(name, valid, n=1) for name in unknown}
        hints = "".join(f" ({name}: did you mean {match[0]}?)" for name, match in close.items() if match)
        problem = f"unknown training setting(s) {', '.join(unknown)}{hints}; valid: {', '.join(valid)}"
        raise SettingError(None, None, problem)
    missing = [name for name in ("method", "data", "out") if name not in values]
    if missing:
        raise SettingError(None, None, f"training needs {' and '.join(missing)}; set {'them' if missing[1:] else 'it'}")
    types_of = typing.get_type_hints(TrainConfig)
    common = {name: _coerce(name, types_of[name], value) for name, value in values.items() if name in fields}
    method = parse_method(common["method"])
    kind = settings_class(method)
    mine: dict[str, Any] = {}
    for name in sorted(set(values) & set(own)):
        owner, _ = own[name]
        if owner is not kind:
            raise SettingError(name, values[name], f"applies to {owner.label} only")
        mine[name] = _coerce(name, typing.get_type_hints(kind)[name], values[name])
    return TrainConfig(**common, settings=kind(**mine))


def read_config_file(path: str | Path) -> dict[str, Any]:
    """A YAML or JSON mapping of `TrainConfig` fields (dashes or underscores); a file that cannot be read is a
    `DataFormatError` on ``config``."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or "not UTF-8 text"
        raise DataFormatError("config", path, f"cannot read ({reason})") from None
    if path.suffix != ".json":
        from lengthwise.core._optional import require

        yaml = require("yaml", extra="train", field="config", value=path)  # before the parse: not a parse error
    try:
        payload = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except ValueError as error:  # json.JSONDecodeError
        raise DataFormatError("config", path, f"not valid JSON ({error})") from None
    except Exception as error:  # yaml.YAMLError: the first line names the place
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise DataFormatError("config", path, f"not valid YAML ({first})") from None
    if not isinstance(payload, dict):
        raise DataFormatError("config", path, f"expected a mapping of settings, got {type(payload).__name__}")
    return {str(key).replace("-", "_"): value for key, value in payload.items()}
