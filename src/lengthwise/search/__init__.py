"""Search over an encoded corpus: the index, its two sides, and how they are fused.

- `index.LongIndex`: the index folder `lengthwise index build` writes (`local/`: the window store on USearch or
  FAISS, its staged build and generations); `milvus/`: the same index served from Milvus.
- `searcher.Searcher`: a window store, a lexical side and a query model → ranked hits with passages; `searchable`
  gives both backends its surface, `protocols` types the seams (`WindowStore`, `LexicalSide`, `WindowMethod`).
- `lexical/`: BM25 (bm25s) at window and document granularity; `fusion`: every fusion rule; `tuning`: a mode and
  fusion chosen on judged queries; `exact`: the exact scans an index is checked against; `backend`: where an index
  is served (``--backend``).

The room imports only the hall; the long-document method that made the windows is handed to it
(`lengthwise.LongIndex`, `lengthwise.facade.open_index`, bound by the junction). Names load on first use.
"""

from __future__ import annotations

from lengthwise.core._lazy import lazy_exports

_EXPORTS = {
    "Backend": "backend",
    "FusionSettings": "types",
    "Hit": "types",
    "LongIndex": "index",
    "MilvusIndex": "lengthwise.search.milvus.index",
    "Passage": "types",
    "SearchIndex": "protocols",
    "Searcher": "searcher",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
