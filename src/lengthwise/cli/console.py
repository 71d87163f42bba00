"""The one stderr console every `lengthwise` command prints progress and errors to, and its one-line error exit."""

from __future__ import annotations

from typing import NoReturn

import typer
from rich.console import Console

__all__ = ["console", "fail"]

console = Console(stderr=True)


def fail(message: str) -> NoReturn:
    """Print ``error: message`` on one line and exit with status 2 (bad input or settings)."""
    console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code=2)
