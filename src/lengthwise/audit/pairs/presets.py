"""Paper settings one flag away (METHODS §1): ``--preset stsb`` and ``--preset first64x8``."""

from __future__ import annotations

from enum import Enum

__all__ = ["Preset", "apply_preset"]


class Preset(str, Enum):
    """A named audit setting from the papers."""

    STSB = "stsb"  # m = 100, capped by N (laser3 / length-attack on STS-B)
    FIRST64X8 = "first64x8"  # first 64 tokens vs 8 copies at N = 512 (length-attack on ArguAna)


def apply_preset(
    preset: Preset | None, elongate: str, first_k: int | None, max_length: int | None
) -> tuple[str, int | None, int | None]:
    """(elongate, first_k, max_length) with `preset` applied. ``first64x8`` keeps an explicit `first_k` or
    `max_length` and sets m = 8; ``stsb`` sets m = 100. It cuts the pairs only, never the documents."""
    if preset is Preset.FIRST64X8:
        return "8", first_k or 64, max_length or 512
    if preset is Preset.STSB:
        return "100", first_k, max_length
    return elongate, first_k, max_length
