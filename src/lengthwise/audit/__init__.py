"""Length-bias diagnostics (METHODS §1): the elongation attack, the document diagnostics and their report.

`config` holds the settings (light to import), `schema` the shape of `audit.json`; `shift`, `metrics` and `probe`
are pure maths; `attack` and `documents` run a model over pairs or documents; `run` is the whole pipeline, whose
output set is written as one unit (`lengthwise.core.output_set`); `report` renders `audit.json` as plots and one
HTML file.
"""

from __future__ import annotations

from lengthwise.core.lazy import lazy_exports

_EXPORTS = {
    "AuditConfig": "config",
    "AuditJob": "config",
    "AttentionLayers": "config",
    "Diagnostic": "config",
    "DocAuditConfig": "config",
    "HistogramSpec": "config",
    "SettingError": "config",
    "AuditResult": "attack",
    "run_audit": "attack",
    "read_docs": "corpus",
    "run_doc_audit": "documents",
    "read_inputs": "run",
    "run_full_audit": "run",
    "js_distance": "shift",
    "similarity_shift": "shift",
    "AuditPayload": "schema",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
