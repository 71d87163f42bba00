"""Long-document settings (METHODS §5): the strategy, the window and its stride, as a frozen dataclass.

Validated on construction with `LongDocError`s that name the field; what depends on the model (the window against the
model's position table, the stride against the window's content budget) is checked by `LongEncoder`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

from lengthwise.core.errors import LongDocError  # the long-document kind of `SettingError`, re-exported here
from lengthwise.core.scoring import WindowScoring
from lengthwise.core.shards import renamed_long

__all__ = ["ATTRIBUTE", "DEFAULT", "RECOMMENDED", "LongDocConfig", "LongDocError", "Strategy", "saved_longdoc"]

DEFAULT = "default"  # the name that selects RECOMMENDED wherever a strategy name is accepted
ATTRIBUTE = "lengthwise_longdoc"  # where a loaded model keeps the choice saved with it (`persist.attach_saved_longdoc`)


class Strategy(str, Enum):
    """How a text longer than the window becomes an embedding."""

    truncate = "truncate"  # today's behaviour: the first window only
    chunk_mean = "chunk-mean"  # mean of the window vectors (LongEmbed's chunk-and-pool)
    chunk_weighted = "chunk-weighted"  # mean weighted by window token counts (HiCL)
    multi_vector = "multi-vector"  # every window kept; a document scores max (or top-k mean) over them
    late_chunking = "late-chunking"  # one pass over the longest input the positions allow, pooled per chunk

    @classmethod
    def parse(cls, value: str | Strategy) -> Strategy:
        """`value` as a strategy; raises `LongDocError` naming the ``strategy`` field and the choices."""
        if isinstance(value, Strategy):
            return value
        try:
            return cls(str(value).strip().lower().replace("_", "-"))
        except ValueError:
            choices = ", ".join(s.value for s in cls)
            raise LongDocError("strategy", value, f"not a strategy; use one of {choices}") from None


@dataclass(frozen=True)
class LongDocConfig:
    """A long-document encoding: strategy, window (tokens incl. special tokens), stride, cuts and pooling."""

    strategy: Strategy = field(
        default=Strategy.chunk_mean,
        metadata={
            "help": "default (the recommended setting, see docs/longdoc.md), truncate, chunk-mean, chunk-weighted, "
            "multi-vector or late-chunking."
        },
    )
    window: int | None = field(
        default=None,
        metadata={"help": "Tokens per window, special tokens included (default: the model's max length)."},
    )
    stride: int | None = field(
        default=None,
        metadata={"help": "Step between window starts in tokens, < window (default: no overlap)."},
    )
    sentence_cuts: bool = field(
        default=False,
        metadata={"help": "Move a cut back to a sentence end in the window's last quarter when there is one."},
    )
    best_windows: int = field(
        default=1, metadata={"help": "multi-vector: score a document by the mean of its k best windows (1 = max)."}
    )
    macro_window: int | None = field(
        default=None,
        metadata={"help": "late-chunking: tokens per transformer pass (default: the model's position limit)."},
    )
    scales: tuple[int, ...] = field(
        default=(),
        metadata={
            "help": "multi-vector: more window sizes whose windows are kept beside the main ones (multi-scale), "
            "each cut without overlap, e.g. 256."
        },
    )
    fuse_mean: float = field(
        default=0.0,
        metadata={
            "help": "multi-vector: weight in [0, 1] of the document's mean-of-windows score fused with its window "
            "score (0 = windows only)."
        },
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "strategy", Strategy.parse(self.strategy))
        if self.window is not None and self.window < 3:
            raise LongDocError("window", self.window, "too small; use at least 3 tokens (special tokens included)")
        if self.stride is not None:
            if self.stride < 1:
                raise LongDocError("stride", self.stride, "must be ≥ 1")
            if self.window is not None and self.stride >= self.window:
                raise LongDocError(
                    "stride",
                    self.stride,
                    f"not below the window ({self.window}): windows would skip tokens; use a stride below the "
                    "window (omit it for no overlap)",
                )
        if self.best_windows < 1:
            raise LongDocError("best_windows", self.best_windows, "must be ≥ 1")
        if self.best_windows > 1 and self.strategy is not Strategy.multi_vector:
            raise LongDocError(
                "best_windows",
                self.best_windows,
                f"scores multi-vector windows only; {self.strategy.value} keeps one vector per document, so use "
                "the multi-vector strategy or leave it at 1",
            )
        object.__setattr__(self, "scales", tuple(int(scale) for scale in self.scales))
        multi_only = {"scales": bool(self.scales), "fuse_mean": self.fuse_mean != 0.0}
        for name, used in multi_only.items():
            if used and self.strategy is not Strategy.multi_vector:
                raise LongDocError(
                    name,
                    ",".join(map(str, self.scales)) if name == "scales" else self.fuse_mean,
                    "applies to multi-vector windows only; use the multi-vector strategy or leave it out",
                )
        if any(scale < 3 for scale in self.scales):
            raise LongDocError("scales", ",".join(map(str, self.scales)), "each scale is a window of at least 3 tokens")
        if len(set(self.scales)) < len(self.scales):
            raise LongDocError(
                "scales",
                ",".join(map(str, self.scales)),
                "a size is given twice (its windows would be stored twice); give each scale once",
            )
        if not 0.0 <= self.fuse_mean <= 1.0:
            raise LongDocError("fuse_mean", self.fuse_mean, "must be in [0, 1], e.g. 0.3")
        if self.macro_window is not None and self.window is not None and self.macro_window < self.window:
            raise LongDocError("macro_window", self.macro_window, f"must be ≥ the window ({self.window})")

    def describe(self) -> str:
        """A short label, e.g. ``chunk-mean w128 s64``."""
        parts = [self.strategy.value]
        if self.window is not None:
            parts.append(f"w{self.window}")
        if self.stride is not None:
            parts.append(f"s{self.stride}")
        if self.sentence_cuts:
            parts.append("sent")
        parts.extend(f"+w{scale}" for scale in self.scales)
        if self.strategy is Strategy.multi_vector and self.best_windows > 1:
            parts.append(f"top{self.best_windows}")
        if self.fuse_mean:
            parts.append(f"fuse{self.fuse_mean:g}")
        return " ".join(parts)

    @property
    def scoring(self) -> WindowScoring:
        """How a multi-vector document scores from its windows (max / top-k mean, fused with the mean)."""
        return WindowScoring(best_windows=self.best_windows, fuse_mean=self.fuse_mean)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "strategy": self.strategy.value, "scales": list(self.scales)}

    def updated(self, **changes: Any) -> LongDocConfig:
        """This config with `changes`. A different strategy starts from its own plain settings (multi-vector
        scoring does not leak into chunk-mean); a window given without a stride means no overlap."""
        base = self
        if "strategy" in changes and LongDocConfig.named(changes["strategy"]).strategy is not self.strategy:
            base = LongDocConfig.named(changes.pop("strategy"))
        if changes.get("window") is not None and "stride" not in changes:
            changes["stride"] = None
        return LongDocConfig(**{**base.to_dict(), **changes})

    @classmethod
    def named(cls, name: str | Strategy) -> LongDocConfig:
        """``"default"`` → `RECOMMENDED`; a strategy name → that strategy with its plain settings."""
        if isinstance(name, str) and name.strip().lower() == DEFAULT:
            return RECOMMENDED
        return cls(strategy=name)  # type: ignore[arg-type]  # parsed (and checked) in __post_init__

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LongDocConfig:
        """The config `to_dict` wrote (saved beside a model, in an encode manifest or an index); one written
        before a rename is read under today's names (`lengthwise.core.shards.LONG_RENAMED`)."""
        data = renamed_long(data)
        unknown = set(data) - {f for f in cls.__dataclass_fields__}
        if unknown:
            raise LongDocError(
                None, None, f"unknown long-document settings {sorted(unknown)}; was the file written by lengthwise?"
            )
        return cls(**{**data, "scales": tuple(data.get("scales", ()))})


# The one default (issue 24): chosen on the dev splits of the realistic passkey/needle sets and QMSum, checked
# on their test splits and SciFact; docs/longdoc.md gives the table and the trade-off.
RECOMMENDED = LongDocConfig(strategy=Strategy.multi_vector, window=32, stride=16)


def saved_longdoc(model: object) -> LongDocConfig | None:
    """The long-document choice saved with `model` (kept on it by `lengthwise.longdoc.persist.attach_saved_longdoc`
    when `lengthwise.load_model` loaded it), or None."""
    config = getattr(model, ATTRIBUTE, None)
    return config if isinstance(config, LongDocConfig) else None
