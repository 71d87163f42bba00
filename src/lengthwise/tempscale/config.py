"""TempScale settings (METHODS §2): the temperatures, a length schedule, and the error every TempScale module raises.

Plain frozen dataclasses validated on construction; no model is touched here.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass
from typing import Any, Literal

import torch

__all__ = ["LengthSchedule", "Role", "TempScaleConfig", "TempScaleError"]

Role = Literal["symmetric", "query", "document"]


class TempScaleError(ValueError):
    """TempScale cannot be applied or baked as asked; the message says why and what to do."""


def _positive(name: str, value: float) -> float:
    value = float(value)
    if not math.isfinite(value) or value <= 0:
        raise TempScaleError(f"{name} = {value} is not a positive finite temperature; use e.g. 0.8")
    return value


@dataclass(frozen=True)
class LengthSchedule:
    """Temperature factor s(n) for a sequence of n tokens (attended tokens, special tokens included).

    Piecewise-linear through the knots ``(lengths[i], factors[i])``, constant before the first and after
    the last. The effective temperature is ``t_role · s(n)``, so with t = 1 the factors are temperatures.
    """

    lengths: tuple[float, ...]
    factors: tuple[float, ...]

    def __post_init__(self) -> None:
        lengths, factors = tuple(float(x) for x in self.lengths), tuple(float(x) for x in self.factors)
        if not lengths or len(lengths) != len(factors):
            raise TempScaleError("length schedule needs as many factors as lengths (at least one knot)")
        if any(b <= a for a, b in itertools.pairwise(lengths)) or lengths[0] < 1:
            raise TempScaleError(f"schedule lengths {lengths} must be ≥ 1 and strictly increasing")
        for factor in factors:
            _positive("schedule factor", factor)
        object.__setattr__(self, "lengths", lengths)
        object.__setattr__(self, "factors", factors)

    @classmethod
    def parse(cls, text: str) -> LengthSchedule:
        """``"64:1.0,512:0.7"`` (length:factor pairs) → a schedule; raises naming the expected form."""
        knots = [item.split(":") for item in text.split(",") if item.strip()]
        try:
            if not knots or any(len(knot) != 2 for knot in knots):
                raise ValueError(text)
            lengths, factors = tuple(float(k[0]) for k in knots), tuple(float(k[1]) for k in knots)
        except ValueError:
            raise TempScaleError(
                f"schedule {text!r} is not LENGTH:FACTOR pairs, e.g. --schedule 64:1.0,512:0.7"
            ) from None
        return cls(lengths, factors)

    def __call__(self, n: torch.Tensor) -> torch.Tensor:
        """Factors for token counts n: (B,) → (B,) float32, on n's device (no host sync)."""
        x = n.to(torch.float32)
        xp = torch.tensor(self.lengths, dtype=torch.float32, device=n.device)  # (K,)
        fp = torch.tensor(self.factors, dtype=torch.float32, device=n.device)  # (K,)
        if len(self.lengths) == 1:
            return fp.expand_as(x).clone()
        right = torch.searchsorted(xp, x).clamp(1, len(self.lengths) - 1)  # (B,)
        x0, x1, f0, f1 = xp[right - 1], xp[right], fp[right - 1], fp[right]
        weight = ((x - x0) / (x1 - x0)).clamp(0.0, 1.0)
        return f0 + weight * (f1 - f0)


@dataclass(frozen=True)
class TempScaleConfig:
    """Temperatures: `t` for symmetric `encode`, `t_query` / `t_doc` for the retrieval sides (default t),
    an optional length `schedule` multiplying all of them, and whether MPNet's position bias is scaled."""

    t: float = 1.0
    t_query: float | None = None
    t_doc: float | None = None
    schedule: LengthSchedule | None = None
    scale_position_bias: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "t", _positive("t", self.t))
        for name in ("t_query", "t_doc"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, _positive(name, value))
        if self.schedule is not None and not isinstance(self.schedule, LengthSchedule):
            raise TempScaleError("schedule must be a LengthSchedule (or None)")

    def temperature(self, role: Role) -> float:
        """The scalar temperature of a role, before the length schedule."""
        if role == "query" and self.t_query is not None:
            return self.t_query
        if role == "document" and self.t_doc is not None:
            return self.t_doc
        return self.t

    @property
    def is_symmetric(self) -> bool:
        """One temperature for every role (what a single set of baked weights can hold)."""
        return self.temperature("query") == self.temperature("document") == self.t

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TempScaleConfig:
        unknown = set(data) - {"t", "t_query", "t_doc", "schedule", "scale_position_bias"}
        if unknown:
            raise TempScaleError(f"unknown TempScale settings {sorted(unknown)}; was the file written by lengthwise?")
        schedule = data.get("schedule")
        fields = {**data, "schedule": LengthSchedule(**schedule) if schedule else None}
        return cls(**fields)
