"""The retrieval length-bias audit: does a retriever prefer longer documents, naturally and under controlled
perturbations (dilution, repetition, the relevant sentence at a depth)?

`config` holds the settings and the request; `perturb` builds the perturbed documents at the token level;
`stats` the paired tests; `natural` the audit of the corpus as it is (and the entry point, `audit_retrieval`);
`controlled` the perturbation experiments; `result` the typed results and their verdicts.
"""

from __future__ import annotations

from lengthwise.core._lazy import lazy_exports

_EXPORTS = {
    "RetrievalAuditConfig": "config",
    "RetrievalRequest": "config",
    "audit_retrieval": "natural",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
