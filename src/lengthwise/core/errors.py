"""The errors every room shares: `SettingError` for a setting that cannot be used, `DataFormatError` for a data
file that cannot be read.

A `SettingError` names the *field* (the config dataclass field, e.g. ``window`` or ``t_query``), the value and
the problem with its fix. It never names a command-line flag: the CLI maps field → flag in one place
(`lengthwise.cli.options.setting_message`). Rooms raise it directly or subclass it (`TempScaleError`,
`LongDocError`) where a caller wants to tell their errors apart.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

__all__ = ["DataFormatError", "SettingError"]


class SettingError(ValueError):
    """A setting is invalid: ``field=value: problem``. `field` is None for a problem with no single setting.

    Args:
        field: The config field at fault (``None`` when the problem is not one setting's).
        value: The value it was given.
        problem: What is wrong and what to use instead, e.g. ``"use a positive integer"``.

    Example:
        >>> str(SettingError("window", 2, "too small; use at least 3 tokens"))
        'window=2: too small; use at least 3 tokens'
    """

    def __init__(self, field: str | None, value: Any, problem: str) -> None:
        self.field, self.value, self.problem = field, value, problem
        shown = value.value if isinstance(value, Enum) else value  # 'self', not <Reference.SELF: 'self'>
        super().__init__(f"{field}={shown!r}: {problem}" if field else problem)


class DataFormatError(ValueError):
    """A data file could not be read; the message names the file, the line and the fix."""
