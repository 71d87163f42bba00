"""`lengthwise report`: re-render an audit's plots and HTML, or compare several audits."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lengthwise.cli.app import app
from lengthwise.cli.console import fail, say


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
    from lengthwise.audit.report.compare import OUTPUT_NAMES as COMPARE_NAMES
    from lengthwise.audit.report.page import OUTPUT_NAMES, load_payload
    from lengthwise.cli.options import check_out_dir
    from lengthwise.core.output_set import check_output_target

    try:
        payloads = [load_payload(path) for path in audit_dirs]  # every file checked, field by field, first
        if len(payloads) > 1:
            target, names, what = out or Path("lengthwise-compare"), COMPARE_NAMES, "a comparison"
            if label and len(label) != len(payloads):
                raise ValueError(f"{len(label)} labels for {len(payloads)} audits; give one --label per audit")
        else:
            audit_dir = audit_dirs[0]
            target, names, what = (
                out or (audit_dir if audit_dir.is_dir() else audit_dir.parent),
                OUTPUT_NAMES,
                "an audit",
            )
        check_out_dir(target)
        check_output_target(target, names, what=what)
    except ValueError as error:
        fail(str(error))
    if len(payloads) > 1:
        from lengthwise.audit.report.compare import write_comparison

        written = write_comparison(payloads, target, labels=label)
    else:
        from lengthwise.audit.report.page import write_report

        written = write_report(payloads[0], target)
    say(f"wrote {written['html']}")
