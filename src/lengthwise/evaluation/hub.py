"""Evaluation data from the Hugging Face hub (online only), in MTEB's dataset layouts.

Offline, every loader fails with one `DataFormatError` that says to pass a local path instead.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from lengthwise.core.data import PairSet, TextPair
from lengthwise.core.errors import DataFormatError
from lengthwise.evaluation.data import LabelledTexts, RetrievalData, document_text

__all__ = ["load_hf_classification", "load_hf_retrieval", "load_hf_sts"]


def _load_dataset(path: str, *args: str, split: str):
    from lengthwise.core._optional import require

    datasets = require("datasets", extra="hub", purpose=f"{path}: reading from the hub")
    try:
        return datasets.load_dataset(path, *args, split=split)
    except Exception as err:  # the hub raises many types; say what failed and how to work offline
        raise DataFormatError(
            None,
            None,
            f"hf:{path}: could not load split {split!r} ({type(err).__name__}); check the name, the network, "
            "or download the files and pass a local path",
        ) from err


def load_hf_sts(path: str, split: str = "test") -> PairSet:
    """An MTEB-style STS dataset on the hub (columns ``sentence1``, ``sentence2``, ``score``)."""
    rows = _load_dataset(path, split=split)
    pairs = tuple(TextPair(r["sentence1"], r["sentence2"], float(r["score"])) for r in rows)
    return PairSet(pairs, f"hf:{path} ({split})", "hf-sts")


def load_hf_retrieval(path: str, split: str = "test") -> RetrievalData:
    """An MTEB/BEIR retrieval dataset on the hub: configs ``corpus``, ``queries`` and ``default`` (qrels)."""
    corpus = _load_dataset(path, "corpus", split="corpus")
    queries = _load_dataset(path, "queries", split="queries")
    qrels: dict[str, dict[str, int]] = defaultdict(dict)
    for row in _load_dataset(path, "default", split=split):
        qrels[str(row["query-id"])][str(row["corpus-id"])] = int(row["score"])
    texts = {str(r["_id"]): str(r["text"]).strip() for r in queries}
    query_ids = tuple(qid for qid in texts if qid in qrels)
    return RetrievalData(
        doc_ids=tuple(str(r["_id"]) for r in corpus),
        doc_texts=tuple(document_text(r.get("title"), r.get("text")) for r in corpus),
        query_ids=query_ids,
        query_texts=tuple(texts[qid] for qid in query_ids),
        qrels={qid: qrels[qid] for qid in query_ids},
        source=f"hf:{path} ({split})",
    )


def load_hf_classification(path: str, split: str) -> LabelledTexts:
    """A text classification split on the hub (columns ``text`` and ``label``)."""
    rows = _load_dataset(path, split=split)
    labels = [r["label"] for r in rows]
    names = tuple(sorted({str(label) for label in labels})) if isinstance(labels[0], str) else None
    if names is None:
        feature = getattr(getattr(rows, "features", {}), "get", lambda _: None)("label")
        names = tuple(getattr(feature, "names", None) or [str(i) for i in range(max(labels) + 1)])
        values = np.asarray(labels, dtype=np.int64)
    else:
        values = np.asarray([names.index(str(label)) for label in labels], dtype=np.int64)
    return LabelledTexts(tuple(r["text"] for r in rows), values, names, f"hf:{path} ({split})")
