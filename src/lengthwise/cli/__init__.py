"""The command line: one module per command, each mapping flags to one library call.

Importing this package loads neither torch nor sentence-transformers; commands import the library inside
their functions, so `lengthwise --help` starts fast.
"""

from __future__ import annotations

from lengthwise.cli import audit, encode, index, longdoc, report, serve, tempscale, train  # noqa: F401  (register on `app`)
from lengthwise.cli import eval as eval_command
from lengthwise.cli.app import app

app.add_typer(tempscale.app, name="tempscale")
app.add_typer(eval_command.app, name="eval")
app.add_typer(train.app, name="train")
app.add_typer(longdoc.app, name="longdoc")
app.command("encode")(encode.encode)
app.add_typer(index.app, name="index")
app.command("search")(index.search)
app.command("serve")(serve.serve)

__all__ = ["app", "main"]


def main() -> None:
    """Entry point of the `lengthwise` script."""
    app(prog_name="lengthwise")
