"""`lengthwise report` as one call: re-render an earlier audit's page from its audit.json, or compare several."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from lengthwise.core.errors import SettingError

__all__ = ["render"]


def render(
    audits: Sequence[str | os.PathLike[str]],
    out: str | os.PathLike[str] | None = None,
    labels: Sequence[str] | None = None,
) -> dict[str, Path]:
    """Write the plots and report.html of one audit (default `out`: beside its audit.json), or with several
    audits one comparison page, compare.html, with their plots overlaid (default `out`: ``lengthwise-compare``).

    Every audit.json is read and checked, field by field, and `out` is checked before anything is drawn; a problem
    is a `DataFormatError` naming the file (a `SettingError` on ``out`` for the folder). Returns the written files by
    kind (``html``, plots).

    Example::

        render(["runs/audit-a", "runs/audit-b"], labels=["before", "after"])  # = lengthwise report a b --label …
    """
    from lengthwise.audit.report.compare import OUTPUT_NAMES as COMPARE_NAMES
    from lengthwise.audit.report.page import OUTPUT_NAMES, load_payload
    from lengthwise.core.output_set import check_output_target

    if not audits:
        raise SettingError("audits", [], "no audit given; pass an audit output folder (or its audit.json)")
    payloads = [load_payload(Path(path)) for path in audits]
    if len(payloads) > 1:
        target, names, what = Path(out or "lengthwise-compare"), COMPARE_NAMES, "a comparison"
        if labels and len(labels) != len(payloads):
            problem = f"{len(labels)} labels for {len(payloads)} audits; give one label per audit"
            raise SettingError("labels", list(labels), problem)
    else:
        first = Path(audits[0])
        target, names, what = Path(out or (first if first.is_dir() else first.parent)), OUTPUT_NAMES, "an audit"
    if target.exists() and not target.is_dir():
        raise SettingError("out", str(target), "exists and is not a directory; pass a directory path")
    try:
        target.parent.resolve().mkdir(parents=True, exist_ok=True)
    except OSError as error:
        problem = f"cannot write there ({error.strerror}); pass a writable directory"
        raise SettingError("out", str(target), problem) from None
    check_output_target(target, names, what=what, field="out")

    if len(payloads) > 1:
        from lengthwise.audit.report.compare import write_comparison

        return write_comparison(payloads, target, labels=labels)
    from lengthwise.audit.report.page import write_report

    return write_report(payloads[0], target)
