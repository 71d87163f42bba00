"""glibc's allocator tuned for the `lengthwise` command's own process: freed memory kept for the next batch.

Between two forward passes glibc hands the freed activation memory back to the operating system (a block above its
mmap threshold is unmapped; the heap's top is trimmed above the trim threshold), and the next batch faults it all in
again: on a CPU those minor page faults cost about a seventh of an encode (docs/benchmarks.md, "The encode pipeline
(issue 48.2)"). `tune_allocator` raises both thresholds with `mallopt`, about as `MALLOC_MMAP_THRESHOLD_=33554432
MALLOC_TRIM_THRESHOLD_=4294967296` would at start (mallopt takes a C int: the trim threshold is 2 GiB; 32 MiB is
glibc's largest mmap threshold on 64 bits). Setting the mmap threshold also turns off glibc's dynamic
threshold; that is the intent. The freed memory stays in the process (its peak is the same, but it is not returned).

Only the command line calls it (`lengthwise.cli.main`): importing the library never changes a user's process-wide
allocator. It does nothing off Linux's glibc, when the user set either glibc variable (or the same settings in
`GLIBC_TUNABLES`), or when `LENGTHWISE_MALLOC_TUNING` is `0` (also `off`, `false`, `no`). Worker processes the command
spawns read the same settings from the two variables, which it sets for them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field

__all__ = ["MMAP_THRESHOLD", "OPT_OUT", "TRIM_THRESHOLD", "AllocatorTuning", "glibc_version", "tune_allocator"]

OPT_OUT = "LENGTHWISE_MALLOC_TUNING"
MMAP_THRESHOLD = 32 * 1024 * 1024  # bytes: a block above it is mmap'd (and unmapped when freed)
TRIM_THRESHOLD = 2**31 - 1  # bytes of free heap top kept before glibc trims it: mallopt takes a C int (2 GiB)
_M_TRIM_THRESHOLD = -1  # mallopt's parameter numbers (glibc's malloc.h)
_M_MMAP_THRESHOLD = -3
_VARIABLES = {"MALLOC_MMAP_THRESHOLD_": MMAP_THRESHOLD, "MALLOC_TRIM_THRESHOLD_": TRIM_THRESHOLD}
_TUNABLES = ("glibc.malloc.mmap_threshold", "glibc.malloc.trim_threshold")
_OFF = frozenset({"0", "off", "false", "no"})


@dataclass(frozen=True)
class AllocatorTuning:
    """What `tune_allocator` did: `applied`, and why not when it did not; `settings` names what was set."""

    applied: bool
    reason: str
    settings: dict[str, int] = field(default_factory=dict)


def glibc_version() -> str | None:
    """The running C library's version when it is glibc on Linux (`"2.36"`), else None (macOS, Windows, musl)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        name = os.confstr("CS_GNU_LIBC_VERSION")
    except (ValueError, OSError):  # the name is unknown to this C library
        return None
    if not name or not name.startswith("glibc "):
        return None
    return name.split(" ", 1)[1]


def _mallopt(parameter: int, value: int) -> bool:
    """glibc's `mallopt(parameter, value)`; True when it accepted the value."""
    import ctypes  # about a millisecond, and only for the command line

    libc = ctypes.CDLL(None)  # the process's own symbols, glibc's among them
    return bool(libc.mallopt(ctypes.c_int(parameter), ctypes.c_int(value)))


def _skip_reason(environ: MutableMapping[str, str], libc: str | None) -> str | None:
    """Why the allocator is left alone, or None when it may be tuned."""
    if environ.get(OPT_OUT, "").strip().lower() in _OFF:
        return f"{OPT_OUT}={environ[OPT_OUT]}"
    given = [name for name in _VARIABLES if name in environ]
    given += [name for name in _TUNABLES if name in environ.get("GLIBC_TUNABLES", "")]
    if given:
        return f"set by the user: {', '.join(given)}"
    if libc is None:
        return "not glibc on Linux"
    return None


def tune_allocator(
    environ: MutableMapping[str, str] | None = None,
    libc: Callable[[], str | None] = glibc_version,
    mallopt: Callable[[int, int], bool] = _mallopt,
) -> AllocatorTuning:
    """Keep freed memory in this process for the next batch (module docstring); for the command line only.

    Args:
        environ: The environment read and, when tuned, given the two glibc variables for spawned workers
            (default: `os.environ`).
        libc: Returns glibc's version, or None where the C library is another (tests replace it).
        mallopt: Sets one allocator parameter (tests replace it).

    Returns:
        What was done: `applied`, the reason when it was not, and the settings in bytes when it was.
    """
    environ = os.environ if environ is None else environ
    reason = _skip_reason(environ, libc())
    if reason is not None:
        return AllocatorTuning(False, reason)
    if not (mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) and mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)):
        return AllocatorTuning(False, "mallopt refused the settings")
    for name, value in _VARIABLES.items():
        environ[name] = str(value)  # spawned workers read them at their start
    return AllocatorTuning(True, "", dict(_VARIABLES))
