"""The command line: one module per command, each mapping flags to one library call.

Importing this package loads neither torch nor sentence-transformers, nor any command's module: the root group
(`lengthwise.cli.app.COMMANDS`) imports a command when it runs, and commands import the library inside their
functions, so `lengthwise --help` starts fast.
"""

from __future__ import annotations

import sys

from lengthwise.cli.app import app

__all__ = ["app", "main"]


def main() -> None:
    """Entry point of the `lengthwise` script. An optional dependency imported without its extra installed (past
    the commands' own checks) ends in one line naming the extra, not a traceback. glibc's allocator is tuned
    first, for this process and the workers it spawns (`lengthwise.core.allocator`; `LENGTHWISE_MALLOC_TUNING=0`
    leaves it alone)."""
    from lengthwise.core import allocator
    from lengthwise.core._optional import missing_extra

    allocator.tune_allocator()

    try:
        app(prog_name="lengthwise")
    except ModuleNotFoundError as error:
        line = missing_extra(error)
        if line is None:
            raise
        print(f"error: {line}", file=sys.stderr)
        raise SystemExit(2) from None
