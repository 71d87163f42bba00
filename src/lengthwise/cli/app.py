"""The `lengthwise` Typer application: the root command, its version flag and the entry point.

Each command lives in a module of its own under `lengthwise.cli`, which registers it on this `app`; a module
with several subcommands (`lengthwise tempscale tune`, …) makes its own group with `command_group`.
"""

from __future__ import annotations

from typing import Annotated

import typer

from lengthwise import __version__

app = typer.Typer(
    name="lengthwise",
    help="Make text-embedding models robust to text length: audit, fix (TempScale), train and evaluate.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # click's plain help and error text: typer's rich formatter imports rich.markdown and markdown-it
    # (about 0.25 s, more than the whole start-up budget of `lengthwise --help`)
    rich_markup_mode=None,
)


def command_group(description: str) -> typer.Typer:
    """A group of subcommands, as the root app makes them: --help when called bare, no shell completion,
    plain tracebacks."""
    return typer.Typer(help=description, no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)


def _version(value: bool) -> None:
    if value:
        print(f"lengthwise {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """lengthwise: audit, fix, train and evaluate embedding models for length robustness."""
