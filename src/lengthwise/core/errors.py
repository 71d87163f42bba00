"""The one error family: every error lengthwise raises on what a user gave it derives from `LengthwiseError`.

One constructor for all, ``(field, value, problem)``: the config field or function argument at fault, the value
it was given, and what is wrong with the fix. The message reads ``field=value: problem``, or the problem alone
when `field` is None (a data file's row, a training step: the problem then names the file and line or the step).
A library message never names a command-line flag: the CLI turns the field into its flag when it prints
(`lengthwise.cli.options.setting_message`, one table in `lengthwise.cli.options.FLAGS`).

The subclasses users catch:

- `SettingError`: a setting or argument that cannot be used. `LongDocError` (here, re-exported by
  `lengthwise.longdoc.config`) and `TempScaleError` (`lengthwise.tempscale.config`) are the long-document and
  TempScale rooms' own kinds of it.
- `DataFormatError`: a data file or data set that cannot be read or used; the message names the file, the line
  and the fix.
- `ModelLoadError`: a model that cannot be found or loaded.
- `TrainingDiverged`: the loss or the weights of a training run became NaN or infinite.

Compatibility, chosen because it is cheap: `SettingError`, `DataFormatError` and `TrainingDiverged` are also
`ValueError`s and `ModelLoadError` is also a `RuntimeError`, as they were before the family existed, so an
``except ValueError`` written against an earlier release still catches them. `LengthwiseError` itself is not a
`ValueError`: catch it to catch the whole family.
"""

from __future__ import annotations

import os
from enum import Enum
from typing import Any, TypeVar

__all__ = [
    "DataFormatError",
    "LengthwiseError",
    "LongDocError",
    "ModelLoadError",
    "SettingError",
    "TrainingDiverged",
    "enum_member",
    "shown_value",
]


E = TypeVar("E", bound=Enum)


def enum_member(kind: type[E], name: str, value: Any) -> E:
    """`value` as a member of the enum `kind` (a member, or its value in any case), or a `SettingError` naming the
    setting `name` and the values it takes.

    Example:
        >>> enum_member(Enum("Side", {"LEFT": "left", "RIGHT": "right"}), "side", " Left ").value
        'left'
    """
    if isinstance(value, kind):
        return value
    try:
        return kind(str(value).strip().lower())
    except ValueError:
        allowed = ", ".join(str(member.value) for member in kind)
        raise SettingError(name, value, f"use one of {allowed}") from None


def shown_value(value: Any) -> Any:
    """`value` as a message shows it: an enum member by its value (``'self'``, not ``<Reference.SELF: 'self'>``),
    a path as its text."""
    if isinstance(value, Enum):
        return value.value
    return os.fspath(value) if isinstance(value, os.PathLike) else value


def _rebuild(cls: type[LengthwiseError], field: str | None, value: Any, problem: str) -> LengthwiseError:
    error = cls.__new__(cls)
    LengthwiseError.__init__(error, field, value, problem)
    return error


class LengthwiseError(Exception):
    """An input lengthwise cannot use: ``field=value: problem``, or `problem` alone when `field` is None.

    Args:
        field: The config field or function argument at fault (``window``, ``t_query``, ``max_docs``), or None
            when the problem is not one setting's (then `problem` names its subject: a file and line, a step).
        value: The value it was given (None when `field` is None).
        problem: What is wrong and what to use instead, e.g. ``"too small; use at least 3 tokens"``.

    Attributes:
        field, value, problem: as given.
        message: The whole message, ``str(error)``.

    Example:
        >>> str(SettingError("window", 2, "too small; use at least 3 tokens"))
        'window=2: too small; use at least 3 tokens'
        >>> str(DataFormatError(None, None, "pairs.tsv:3: expected two tab-separated texts"))
        'pairs.tsv:3: expected two tab-separated texts'
    """

    def __init__(self, field: str | None, value: Any, problem: str) -> None:
        self.field, self.value, self.problem = field, value, problem
        self.message = f"{field}={shown_value(value)!r}: {problem}" if field else problem
        super().__init__(self.message)

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled (Ray, worker processes) by its three parts, whatever a subclass's constructor looks like.
        return _rebuild, (type(self), self.field, self.value, self.problem), self.__dict__


class SettingError(LengthwiseError, ValueError):
    """A setting or argument cannot be used; `field` names it, and the CLI names the flag that sets it.

    Example:
        >>> str(SettingError("max_docs", 0, "use at least 1"))
        'max_docs=0: use at least 1'
    """


class DataFormatError(LengthwiseError, ValueError):
    """A data file or data set cannot be read or used; the message names the file, the line and the fix.

    `field` is usually None (the problem starts with ``file:line``); it names the argument when the fault is
    where the data was asked for rather than in it (``data='x.csv': no such file``).
    """


class LongDocError(SettingError):
    """A long-document setting or input cannot be used (`lengthwise.longdoc`): `field` names the setting at fault
    (``window``, ``stride``, ``strategy``…); without one the problem names the input (a file, a document) and the fix.

    Example:
        >>> str(LongDocError("stride", 0, "must be ≥ 1"))
        'stride=0: must be ≥ 1'
    """


class ModelLoadError(LengthwiseError, RuntimeError):
    """A model could not be found or loaded; the message says what to do instead.

    `field` is the argument that named the model (``model``), or the setting that kept it from loading
    (``trust_remote_code``).
    """


class TrainingDiverged(LengthwiseError, ValueError):
    """The loss or the weights became NaN or infinite; the message names the step and the learning rate."""
