"""`audit.json` as paper-style plots and one self-contained HTML page; several audits side by side."""

from __future__ import annotations

from lengthwise.core._lazy import lazy_exports

_EXPORTS = {
    "summary_rows": "_documents",  # the document diagnostics as (label, value) rows, for the CLI's summary table
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
