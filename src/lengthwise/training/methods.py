"""Each training method's own settings, as a sentence-transformers loss owns its arguments.

`TrainConfig` holds what every run has (data, model, schedule, batch, N, seed, …); the knobs of one objective live
in that objective's settings dataclass, listed in `SETTINGS` by method. A method without knobs of its own has
`NoSettings`. The CLI generates one flag per field of every settings class (``--alpha``, ``--invariance-weight``),
with the help written here, and a setting given to a method it does not belong to is refused by name.

Example::

    from lengthwise.training.config import TrainConfig
    from lengthwise.training.methods import HiCLSettings

    config = TrainConfig(method="hicl", data="texts.txt", out="runs/hicl", settings=HiCLSettings(alpha=0.15))

This module imports no torch: ``lengthwise train --help`` reads it.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, ClassVar

from lengthwise.core.errors import SettingError, enum_member

__all__ = [
    "SETTINGS",
    "AnchorChoice",
    "AnchorSettings",
    "CopyConcatSettings",
    "Denominator",
    "HiCLSettings",
    "LengthInvariantSettings",
    "MethodSettings",
    "NoSettings",
    "Reference",
    "SameSequence",
    "SimDESettings",
    "enum_value",
    "settings_class",
    "settings_fields",
]

SIMDE_MLM_WEIGHT = 0.1  # the SimDE paper's auxiliary MLM weight (METHODS §3)


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


def enum_value(kind: type[Enum], name: str, value: Any) -> Any:
    """`value` as a member of `kind` (None kept: the setting is unset), or a `SettingError` listing the values."""
    return None if value is None else enum_member(kind, name, value)


@dataclass(frozen=True)
class MethodSettings:
    """The base of every method's settings: Enum fields coerced from their values, numbers checked finite, then
    the class's own `checks`. `label` names the methods the settings belong to in help and errors."""

    label: ClassVar[str] = ""

    def __post_init__(self) -> None:
        for item in dataclasses.fields(self):
            value = getattr(self, item.name)
            kind = item.metadata.get("enum")
            if kind is not None:
                object.__setattr__(self, item.name, enum_value(kind, item.name, value))
            elif isinstance(value, float) and not math.isfinite(value):
                raise SettingError(item.name, value, "must be a finite number")
        for name, ok, problem in self.checks():
            if not ok:
                raise SettingError(name, getattr(self, name), problem)

    def checks(self) -> list[tuple[str, bool, str]]:
        """(field, condition that must hold, problem and fix) for each rule of the settings."""
        return []

    def to_dict(self) -> dict[str, Any]:
        """The settings as plain JSON values (Enums by their value)."""
        payload = dataclasses.asdict(self)
        return {key: value.value if isinstance(value, Enum) else value for key, value in payload.items()}


@dataclass(frozen=True)
class NoSettings(MethodSettings):
    """simcse, pairs: nothing beyond the common settings."""


@dataclass(frozen=True)
class AnchorSettings(MethodSettings):
    """LA(SER)³ and COCO-DR: which sentence of a document is the anchor."""

    label: ClassVar[str] = "laser-self, laser-intra, coco-dr"
    anchor: AnchorChoice = field(
        default=AnchorChoice.FIRST,
        metadata={"help": "The anchor sentence: first or random.", "enum": AnchorChoice},
    )


@dataclass(frozen=True)
class CopyConcatSettings(MethodSettings):
    """Copy-and-concat: how many batches are elongated."""

    label: ClassVar[str] = "copy-concat"
    copy_concat_share: float = field(
        default=1.0,
        metadata={
            "help": "Share of batches whose pairs are elongated, in (0, 1]; the other batches train on the plain "
            "pairs (the length-robust recipe mixes them to keep quality)."
        },
    )

    def checks(self) -> list[tuple[str, bool, str]]:
        share = self.copy_concat_share
        return [("copy_concat_share", 0.0 < share <= 1.0, "must lie in (0, 1]: a share of the batches")]


@dataclass(frozen=True)
class HiCLSettings(MethodSettings):
    """HiCL's segment loss (hicl §3): segment length, weight and the two ablations."""

    label: ClassVar[str] = "hicl"
    segment_length: int = field(default=32, metadata={"help": "Segment length L in tokens."})
    alpha: float = field(default=0.05, metadata={"help": "Weight of the local (segment) loss, in [0, 1]."})
    same_sequence: SameSequence = field(
        default=SameSequence.NEITHER,
        metadata={"help": "Same-sequence segments as neither, positive or negative.", "enum": SameSequence},
    )
    denominator: Denominator = field(
        default=Denominator.SUMMATION,
        metadata={"help": "Summation or averaging denominator.", "enum": Denominator},
    )

    def checks(self) -> list[tuple[str, bool, str]]:
        return [
            ("segment_length", self.segment_length >= 1, "must be ≥ 1"),
            ("alpha", 0.0 <= self.alpha <= 1.0, "must lie in [0, 1]"),
        ]


@dataclass(frozen=True)
class SimDESettings(MethodSettings):
    """SimDE's auxiliary masked-LM loss."""

    label: ClassVar[str] = "simde"
    mlm_weight: float = field(
        default=SIMDE_MLM_WEIGHT, metadata={"help": "Weight of the auxiliary MLM loss (0 turns it off; paper: 0.1)."}
    )

    def checks(self) -> list[tuple[str, bool, str]]:
        return [("mlm_weight", self.mlm_weight >= 0.0, "must be ≥ 0")]


@dataclass(frozen=True)
class LengthInvariantSettings(MethodSettings):
    """length-invariant (METHODS §3): the distillation and consistency terms, and where their references come from."""

    label: ClassVar[str] = "length-invariant"
    invariance_weight: float = field(
        default=1.0, metadata={"help": "Weight of pulling each elongated text to its reference original."}
    )
    consistency_weight: float = field(
        default=0.0, metadata={"help": "Weight of matching the batch's elongated cosines to the originals'."}
    )
    invariance_reference: Reference = field(
        default=Reference.TEACHER,
        metadata={
            "help": "The originals' embeddings from the starting model (teacher) or the student itself, gradient "
            "stopped (self).",
            "enum": Reference,
        },
    )
    retention_weight: float = field(
        default=0.0,
        metadata={
            "help": "Weight of holding each plain text's embedding at the starting model's (a frozen teacher is kept "
            "for it): the space the elongated texts are pulled to stays where the teacher has it."
        },
    )
    consistency_reference: Reference | None = field(
        default=None,
        metadata={
            "help": "The reference cosines of the consistency term, teacher or self (default: invariance_reference).",
            "enum": Reference,
        },
    )

    def checks(self) -> list[tuple[str, bool, str]]:
        return [
            ("invariance_weight", self.invariance_weight >= 0.0, "must be ≥ 0"),
            ("consistency_weight", self.consistency_weight >= 0.0, "must be ≥ 0"),
            ("retention_weight", self.retention_weight >= 0.0, "must be ≥ 0"),
        ]

    @property
    def references(self) -> tuple[Reference, Reference]:
        """(distillation's, consistency's) reference, the default resolved."""
        return self.invariance_reference, self.consistency_reference or self.invariance_reference


# Each method's settings, by the method's value (Method is defined in config, which imports this module).
SETTINGS: dict[str, type[MethodSettings]] = {
    "simcse": NoSettings,
    "pairs": NoSettings,
    "laser-self": AnchorSettings,
    "laser-intra": AnchorSettings,
    "coco-dr": AnchorSettings,
    "copy-concat": CopyConcatSettings,
    "hicl": HiCLSettings,
    "simde": SimDESettings,
    "length-invariant": LengthInvariantSettings,
}


def settings_class(method: Any) -> type[MethodSettings]:
    """The settings class of `method` (a `Method` or its value)."""
    return SETTINGS[str(getattr(method, "value", method))]


def settings_fields() -> dict[str, tuple[type[MethodSettings], dataclasses.Field[Any]]]:
    """Every method setting by name → (its settings class, its field); each name belongs to one class."""
    fields: dict[str, tuple[type[MethodSettings], dataclasses.Field[Any]]] = {}
    for kind in dict.fromkeys(SETTINGS.values()):
        for item in dataclasses.fields(kind):
            fields[item.name] = (kind, item)
    return fields
