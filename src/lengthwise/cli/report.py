"""`lengthwise report`: re-render an audit's plots and HTML, or compare several audits."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lengthwise.cli.app import app
from lengthwise.cli.console import console
from lengthwise.cli.console import fail as _fail


@app.command()
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
    from lengthwise.audit.report.attack import load_payload, write_report

    try:
        payloads = [load_payload(path) for path in audit_dirs]
        if len(payloads) > 1:
            from lengthwise.audit.report.compare import write_comparison

            written = write_comparison(payloads, out or Path("lengthwise-compare"), labels=label)
            console.print(f"wrote {written['html']}", highlight=False)
            return
        payload = payloads[0]
    except ValueError as err:
        _fail(str(err))
        return
    audit_dir = audit_dirs[0]
    target = out or (audit_dir if audit_dir.is_dir() else audit_dir.parent)
    written = write_report(payload, target)
    console.print(f"wrote {written['html']}", highlight=False)
