"""Length-bias diagnostics (METHODS §1): the elongation attack, the document diagnostics and their report.

`shift` and `metrics` are pure maths; `attack` and `documents` run a model over pairs or documents;
`report` renders `audit.json` as plots and one HTML file.
"""

from __future__ import annotations

from lengthwise.core.lazy import lazy_exports

_EXPORTS = {
    "AuditConfig": "attack",
    "AuditResult": "attack",
    "run_audit": "attack",
    "DocAuditConfig": "documents",
    "read_docs": "documents",
    "run_doc_audit": "documents",
    "HistogramSpec": "shift",
    "js_distance": "shift",
    "similarity_shift": "shift",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
