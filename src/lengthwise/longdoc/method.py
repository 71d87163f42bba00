"""The long-document method as an index sees it: from the ``long`` settings an encode recorded, how a document scores
from its windows, the query encoder around a loaded model, and how a document's text is cut into its window rows.

`LONG_DOCUMENTS` is what the junction hands the search room (`lengthwise.search.protocols.WindowMethod`, satisfied
by its methods): the search room never imports this room.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from lengthwise.longdoc.config import LongDocConfig, Strategy

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

    from lengthwise.core.scoring import WindowScoring
    from lengthwise.longdoc.encoder import LongEncoder

__all__ = ["LONG_DOCUMENTS", "DocumentCut", "LongDocuments", "char_spans"]


def char_spans(tokenizer: Any, spans_of: Callable[[list[int]], list[tuple[int, int]]], text: str) -> np.ndarray:
    """The character span of each window of `text`: the windows `spans_of` cuts from the text's content token ids
    (no special tokens, as `LongEncoder` reads it), mapped through the fast tokenizer's offsets."""
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
    offsets = encoded["offset_mapping"]
    spans = spans_of(list(encoded["input_ids"]))
    return np.asarray([(offsets[s][0], offsets[e - 1][1]) for s, e in spans], dtype=np.int64).reshape(-1, 2)


class DocumentCut:
    """How `encoder` cuts a document's text into its window rows: one span per window for a multi-vector strategy,
    one over the whole read text for a single-vector one; `key` names the cut (the long-document settings, the text
    tokens a window holds, the tokenizer)."""

    def __init__(self, encoder: LongEncoder) -> None:
        self.encoder = encoder
        self.single = encoder.config.strategy is not Strategy.multi_vector
        backend = getattr(encoder.tokenizer, "backend_tokenizer", None)
        described = backend.to_str() if backend is not None else repr(sorted(encoder.tokenizer.get_vocab().items()))
        tokenizer = hashlib.sha256(described.encode()).hexdigest()
        self.key = json.dumps({"long": encoder.config.to_dict(), "budget": encoder.content_budget("document"),
                               "tokenizer": tokenizer}, sort_keys=True)  # fmt: skip

    def __call__(self, text: str) -> np.ndarray:
        encoder = self.encoder
        spans = char_spans(encoder.tokenizer, lambda ids: encoder.spans(ids, "document"), text)
        if self.single and len(spans):
            spans = np.asarray([[spans[:, 0].min(), spans[:, 1].max()]], dtype=np.int64)
        return spans


class LongDocuments:
    """The long-document method read from an encode's ``long`` settings (`LongDocConfig.from_dict`)."""

    def scoring(self, long: Mapping[str, Any]) -> WindowScoring:
        return LongDocConfig.from_dict(dict(long)).scoring

    def query_encoder(self, model: SentenceTransformer, long: Mapping[str, Any]) -> LongEncoder:
        from lengthwise.longdoc.encoder import LongEncoder

        return LongEncoder(model, LongDocConfig.from_dict(dict(long)))

    def window_cut(self, model: SentenceTransformer, long: Mapping[str, Any]) -> DocumentCut:
        return DocumentCut(self.query_encoder(model, long))

    def query_tokens(
        self, model: SentenceTransformer, texts: Sequence[str], tokens: Mapping[str, Any]
    ) -> list[np.ndarray]:
        from sentence_transformers import MultiVectorEncoder

        from lengthwise.longdoc.token_vectors import encode_token_vectors

        if isinstance(model, MultiVectorEncoder):  # a ColBERT: its query prefix, expansion and masks
            found = model.encode_query(list(texts), convert_to_numpy=True)
            return [np.asarray(vectors, dtype=np.float32) for vectors in found]
        read = encode_token_vectors(model, texts, role="query", window=tokens.get("window"),
                                    overlap=tokens.get("overlap", 64))  # fmt: skip
        return [found.vectors for found in read]


LONG_DOCUMENTS = LongDocuments()
