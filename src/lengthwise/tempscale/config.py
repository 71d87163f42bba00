"""TempScale settings (METHODS §2): the temperatures, a length schedule, and the error every TempScale module raises.

Plain frozen dataclasses validated on construction; no model is touched here, and importing this module loads
no torch (the command line reads its flags' help from these fields).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

from lengthwise.core.errors import SettingError

__all__ = ["T_RANGE", "LengthSchedule", "Role", "TempScaleConfig", "TempScaleError"]

T_RANGE = (0.01, 100.0)  # beyond it attention is argmax or uniform, and baked weights lose their precision


class Role(str, Enum):
    """Which temperature a call uses: symmetric `encode` (t), queries (t_query) or documents (t_doc)."""

    SYMMETRIC = "symmetric"
    QUERY = "query"
    DOCUMENT = "document"


class TempScaleError(SettingError):
    """TempScale cannot be applied or baked as asked; the message says why and what to do.

    Built as every error of the family, ``(field, value, problem)``: `field` names the setting at fault (``t``,
    ``t_query``, ``grid``…) when there is one; the message then reads ``field=value: problem``, and the command
    line names the flag that sets the field.
    """


def _positive(name: str, value: float) -> float:
    """`value` as a temperature (factor): finite and inside `T_RANGE`, else a `TempScaleError` naming `name`."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise TempScaleError(field=name, value=value, problem="not a number; use e.g. 0.8") from None
    if not math.isfinite(value) or value <= 0:
        raise TempScaleError(field=name, value=value, problem="not a positive finite temperature; use e.g. 0.8")
    low, high = T_RANGE
    if not low <= value <= high:
        raise TempScaleError(
            field=name,
            value=value,
            problem=f"outside [{low:g}, {high:g}]: attention at such a temperature is argmax or uniform; "
            "useful values lie near 0.5-1.5",
        )
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
            raise TempScaleError(
                field="schedule", value="", problem="needs as many factors as lengths (at least one knot)"
            )
        if any(b <= a for a, b in itertools.pairwise(lengths)) or lengths[0] < 1:
            raise TempScaleError(field="schedule", value=lengths, problem="lengths must be ≥ 1 and strictly increasing")
        for factor in factors:
            _positive("schedule", factor)
        object.__setattr__(self, "lengths", lengths)
        object.__setattr__(self, "factors", factors)

    @classmethod
    def parse(cls, text: str) -> LengthSchedule:
        """``"64:1.0,512:0.7"`` (length:factor pairs) → a schedule; raises naming the expected form."""
        knots = [item.split(":") for item in text.split(",") if item.strip()]
        problem = "not LENGTH:FACTOR pairs, e.g. 64:1.0,512:0.7"
        if not knots or any(len(knot) != 2 for knot in knots):
            raise TempScaleError(field="schedule", value=text, problem=problem)
        try:
            lengths, factors = tuple(float(k[0]) for k in knots), tuple(float(k[1]) for k in knots)
        except ValueError:
            raise TempScaleError(field="schedule", value=text, problem=problem) from None
        return cls(lengths, factors)

    def __call__(self, n: torch.Tensor) -> torch.Tensor:
        """Factors for token counts n: (B,) → (B,) float32, on n's device (no host sync)."""
        import torch

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

    t: float = field(default=1.0, metadata={"help": "Attention temperature (t < 1 sharpens; 1 changes nothing)."})
    t_query: float | None = field(default=None, metadata={"help": "Temperature for queries (default: t)."})
    t_doc: float | None = field(default=None, metadata={"help": "Temperature for documents (default: t)."})
    schedule: LengthSchedule | None = field(
        default=None,
        metadata={"help": "Length factors LENGTH:FACTOR,… multiplying t (piecewise linear), e.g. 64:1.0,512:0.7."},
    )
    scale_position_bias: bool = field(
        default=True, metadata={"help": "MPNet: divide the relative position bias by t too (the paper's form)."}
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "t", _positive("t", self.t))
        for name in ("t_query", "t_doc"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, _positive(name, value))
        if self.schedule is not None and not isinstance(self.schedule, LengthSchedule):
            raise TempScaleError(field="schedule", value=self.schedule, problem="must be a LengthSchedule (or None)")

    def temperature(self, role: Role | str) -> float:
        """The scalar temperature of a role, before the length schedule."""
        role = Role(role)
        if role is Role.QUERY and self.t_query is not None:
            return self.t_query
        if role is Role.DOCUMENT and self.t_doc is not None:
            return self.t_doc
        return self.t

    @property
    def is_symmetric(self) -> bool:
        """One temperature for every role (what a single set of baked weights can hold)."""
        return self.temperature(Role.QUERY) == self.temperature(Role.DOCUMENT) == self.t

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def of(cls, value: float | TempScaleConfig | None, field: str = "tempscale") -> TempScaleConfig | None:
        """`value` as a configuration: a float is a symmetric t, a configuration or None is kept. A bad t is a
        `SettingError` on `field`, the caller's setting that held it."""
        if value is None or isinstance(value, TempScaleConfig):
            return value
        try:
            return cls(t=value)
        except TempScaleError as error:
            raise SettingError(field, value, error.problem) from None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TempScaleConfig:
        unknown = set(data) - {"t", "t_query", "t_doc", "schedule", "scale_position_bias"}
        if unknown:
            raise TempScaleError(
                field=None,
                value=None,
                problem=f"unknown TempScale settings {sorted(unknown)}; was the file written by lengthwise?",
            )
        schedule = data.get("schedule")
        fields = {**data, "schedule": LengthSchedule(**schedule) if schedule else None}
        return cls(**fields)
