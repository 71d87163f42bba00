"""Length-bias diagnostics (METHODS §1): the elongation attack, the document diagnostics and their report.

Three kinds of audit, one subpackage each: `pairs` (the elongation attack over text pairs), `documents` (the
document diagnostics) and `retrieval` (the retrieval length-bias audit). `config` holds the settings shared by the
job (light to import), `schema` the shape of `audit.json`, `run` the whole pipeline, whose output set is written as
one unit (`lengthwise.core.output_set`); `report` renders `audit.json` as plots and one HTML file.
"""

from __future__ import annotations

from lengthwise.core._lazy import lazy_exports

_EXPORTS = {
    "AuditConfig": "config",
    "AuditJob": "config",
    "AttentionLayers": "config",
    "Diagnostic": "config",
    "DocAuditConfig": "config",
    "HistogramSpec": "config",
    "AuditResult": "pairs.attack",
    "run_audit": "pairs.attack",
    "read_docs": "documents.corpus",
    "run_doc_audit": "documents.documents",
    "read_inputs": "run",
    "run_full_audit": "run",
    "js_distance": "pairs.shift",
    "similarity_shift": "pairs.shift",
    "AuditPayload": "schema",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
