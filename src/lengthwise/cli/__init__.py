"""The command line: one module per command, each mapping flags to one library call.

Importing this package loads neither torch nor sentence-transformers, nor any command's module: the root group
(`lengthwise.cli.app.COMMANDS`) imports a command when it runs, and commands import the library inside their
functions, so `lengthwise --help` starts fast.
"""

from __future__ import annotations

from lengthwise.cli.app import app

__all__ = ["app", "main"]


def main() -> None:
    """Entry point of the `lengthwise` script."""
    app(prog_name="lengthwise")
