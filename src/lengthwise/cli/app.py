"""The `lengthwise` Typer application: the root command, its version flag and the entry point.

Each command lives in a module of its own under `lengthwise.cli` and is named in `COMMANDS`; the root group
imports a command's module only when that command runs (or shows its help), as click's "lazily loading
subcommands" pattern does, so `lengthwise --help` imports no command module at all. A module with several
subcommands (`lengthwise tempscale tune`, …) makes its own group with `command_group`.
"""

from __future__ import annotations

import importlib
import sys
from difflib import get_close_matches
from typing import Annotated, Any, NamedTuple

import typer
import typer.main
from typer._click import Command as ClickCommand
from typer._click import Context, HelpFormatter
from typer._click.exceptions import UsageError
from typer._click.utils import make_default_short_help
from typer.core import TyperGroup

from lengthwise import __version__


class CommandEntry(NamedTuple):
    """Where a root command lives (`module.attribute`: a Typer group or a command function) and the one line
    `lengthwise --help` shows for it (tests/test_startup.py checks it against the command's own help)."""

    module: str
    attribute: str
    summary: str


COMMANDS: dict[str, CommandEntry] = {  # in the order `lengthwise --help` lists them
    "audit": CommandEntry(
        "lengthwise.cli.audit",
        "audit",
        "Audit a model with the elongation attack: similarity before/after copying texts m times (METHODS §1).",
    ),
    "report": CommandEntry(
        "lengthwise.cli.report",
        "report",
        "Re-render the plots and report.html of an earlier audit from its audit.json; with several audits, write one"
        " comparison page (compare.html) with their plots overlaid.",
    ),
    "encode": CommandEntry(
        "lengthwise.cli.encode",
        "encode",
        "Embed every document of --data into OUT as .npy shards with their ids; a killed run resumes.",
    ),
    "encode-tokens": CommandEntry(
        "lengthwise.cli.encode",
        "encode_tokens",
        "Encode every token of each document of --data into OUT (late interaction: `search --tokens OUT`); a killed"
        " run resumes.",
    ),
    "search": CommandEntry(
        "lengthwise.cli.index",
        "search",
        "Search INDEX (or the index served in Milvus: --backend milvus --uri U): queries embedded with the settings "
        "recorded in the index, documents best first.",
    ),
    "serve": CommandEntry(
        "lengthwise.cli.serve",
        "serve",
        "Serve INDEX (or the index in Milvus: --backend milvus --uri U) over HTTP: POST /search and /embed, GET "
        "/health, /info and / (a search page); the model and the index are loaded once, and concurrent queries are "
        "embedded in batches.",
    ),
    "tempscale": CommandEntry(
        "lengthwise.cli.tempscale",
        "app",
        "TempScale: divide attention logits by a temperature t (METHODS §2) — tune, bake or save it.",
    ),
    "eval": CommandEntry(
        "lengthwise.cli.eval",
        "app",
        "Evaluate a model overall and per token-length bin; writes OUT/results.json and PNG plots.",
    ),
    "train": CommandEntry(
        "lengthwise.cli.train",
        "app",
        "Train an embedding model with a length-aware objective; writes OUT/model and OUT/train.json.",
    ),
    "longdoc": CommandEntry(
        "lengthwise.cli.longdoc",
        "app",
        "Long documents (METHODS §5): synthetic passkey/needle tasks, LongEmbed-style scores, tune and save.",
    ),
    "index": CommandEntry(
        "lengthwise.cli.index",
        "app",
        "Index the window vectors of `lengthwise encode` for document search (FAISS or USearch).",
    ),
}


# Flags renamed so that a flag means one thing on every command (issue 34): command → {old spelling: new one}. The
# old spelling keeps working until 0.4, with one line on stderr; the root group rewrites it before the command parses.
RENAMED: dict[str, dict[str, str]] = {
    # `--windows`: a candidate count, not `longdoc tune --windows` (window sizes); `--k`: documents per query is
    # `--top-k` on every command (as `top_k` in sentence-transformers and mteb), `eval`'s too (issue 47)
    "search": {"--windows": "--candidates", "--k": "--top-k"},
    # `--engine`: local or ray, not `index build --engine` (the ANN backend); `--top-k`: the mean of a multi-vector
    # document's k best windows is `--best-windows`, as `--top-k` is documents per query (issue 47)
    "encode": {"--engine": "--runner", "--top-k": "--best-windows"},
    "longdoc": {"--top-k": "--best-windows"},  # `longdoc synth --task` (passkey or needle) keeps its name
    "eval": {"--task": "--task-type"},  # sts, retrieval, classification: task types, in mteb's word (issue 47)
    "tempscale": {"--task": "--task-type"},  # `tempscale tune`: the task type it tunes on, as `eval` (issue 47)
    "train": {"--precision": "--mixed-precision"},  # training's mixed precision, not inference's
}


def renamed_args(command: str, args: list[str]) -> list[str]:
    """`args` of `command` with each renamed flag (``--old`` or ``--old=value``) in its new spelling, saying so."""
    renames, out = RENAMED.get(command, {}), list[str]()
    for number, arg in enumerate(args):
        if arg == "--":  # what follows is positional
            return out + args[number:]
        flag, equals, value = arg.partition("=")
        if flag in renames:
            new = renames[flag]
            print(f"warning: `lengthwise {command} {flag}` is now {new}; {flag} stops working in 0.4", file=sys.stderr)
            arg = new + equals + value
        out.append(arg)
    return out


def load_command(name: str) -> ClickCommand:
    """The click command of root command `name`, importing its module now."""
    entry = COMMANDS[name]
    found: Any = getattr(importlib.import_module(entry.module), entry.attribute)
    if not isinstance(found, typer.Typer):  # a plain command function: a one-command Typer is that command
        single = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
        single.command(name)(found)
        found = single
    found.rich_markup_mode = None  # click's plain help, as the root's (a sub-app added to it would inherit it)
    return typer.main.get_command(found)


class LazyGroup(TyperGroup):
    """The root group: lists `COMMANDS` without importing them and loads a command when it is called."""

    def list_commands(self, ctx: Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: Context, cmd_name: str) -> ClickCommand | None:
        return load_command(cmd_name) if cmd_name in COMMANDS else None

    def resolve_command(self, ctx: Context, args: list[str]) -> tuple[str | None, ClickCommand | None, list[str]]:
        try:
            name, command, rest = super().resolve_command(ctx, args)
        except UsageError as error:  # click suggests from `self.commands`, which stays empty here
            close = get_close_matches(args[0], list(COMMANDS)) if args else []
            if close:
                error.message = f"{error.message.rstrip('.')}. Did you mean {', '.join(map(repr, close))}?"
            raise
        return name, command, renamed_args(name, rest) if name else rest

    def format_commands(self, ctx: Context, formatter: HelpFormatter) -> None:
        limit = formatter.width - 6 - max(map(len, COMMANDS))  # as click's own listing
        rows = [(name, make_default_short_help(entry.summary, limit)) for name, entry in COMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


app = typer.Typer(
    name="lengthwise",
    cls=LazyGroup,
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
