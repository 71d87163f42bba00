"""The one stderr console every `lengthwise` command prints progress and errors to, and its one-line error exit.

Messages are plain text: anything in square brackets (``pip install 'lengthwise[train]'``, a path, a list)
is escaped before rich sees it, so markup never swallows part of a message.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn

import typer

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["console", "escape", "fail", "say"]


class _StderrConsole:
    """The stderr `rich.console.Console`, made on first use: importing rich's console costs a tenth of the
    0.3 s that `lengthwise --help` may take, and --help never prints through it."""

    def __init__(self) -> None:
        self._console: Console | None = None

    def _real(self) -> Console:
        if self._console is None:
            from rich.console import Console

            self._console = Console(stderr=True)
        return self._console

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real(), name)

    def __enter__(self) -> Console:  # rich's Live and Progress enter their console
        return self._real().__enter__()

    def __exit__(self, *exc: Any) -> None:
        self._real().__exit__(*exc)


console: Console = _StderrConsole()  # type: ignore[assignment]  # forwards every attribute to the Console


def escape(text: str) -> str:
    """`rich.markup.escape`: brackets in `text` print as they are."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)


def fail(message: str) -> NoReturn:
    """Print ``error: message`` on one line (escaped: brackets stay) and exit with status 2 (bad input or settings)."""
    console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code=2)


def say(message: str, style: str | None = None) -> None:
    """Print one plain line on stderr: no markup, no highlighting, so paths and ``[extras]`` print as they are."""
    console.print(message, style=style, markup=False, highlight=False, soft_wrap=True)
