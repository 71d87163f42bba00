"""The one stderr console every `lengthwise` command prints progress and errors to, and its one-line error exit.

Messages are plain text: anything in square brackets (``pip install 'lengthwise[train]'``, a path, a list)
is escaped before rich sees it, so markup never swallows part of a message.
"""

from __future__ import annotations

from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape

__all__ = ["console", "escape", "fail", "say"]

console = Console(stderr=True)


def fail(message: str) -> NoReturn:
    """Print ``error: message`` on one line (escaped: brackets stay) and exit with status 2 (bad input or settings)."""
    console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code=2)


def say(message: str, style: str | None = None) -> None:
    """Print one plain line on stderr: no markup, no highlighting, so paths and ``[extras]`` print as they are."""
    console.print(message, style=style, markup=False, highlight=False, soft_wrap=True)
