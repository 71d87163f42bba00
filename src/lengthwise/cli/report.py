"""`lengthwise report`: re-render an audit's plots and HTML, or compare several audits."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lengthwise.cli.console import fail, say


def report(
    audit_dirs: Annotated[
        list[Path], typer.Argument(help="An audit output directory (or its audit.json); several to compare.")
    ],
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Where to write; default: next to audit.json (compare: lengthwise-compare)."),
    ] = None,
    label: Annotated[
        list[str] | None, typer.Option("--label", help="Names of the compared audits, in order (repeatable).")
    ] = None,
) -> None:
    """Re-render the plots and report.html of an earlier audit from its audit.json; with several audits,
    write one comparison page (compare.html) with their plots overlaid."""
    from lengthwise.audit.report.render import render
    from lengthwise.cli.options import setting_message
    from lengthwise.core.errors import LengthwiseError

    try:
        written = render(audit_dirs, out, label)
    except LengthwiseError as error:  # SettingError, SchemaError
        fail(setting_message(error))
    say(f"wrote {written['html']}")
