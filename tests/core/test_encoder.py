from __future__ import annotations

import numpy as np
import pytest

from lengthwise.core.encoder import SentenceTransformerEncoder, TextEncoder, as_encoder


def test_sentence_transformer_adapter_matches_encode(tiny_model) -> None:
    encoder = as_encoder(tiny_model)
    assert isinstance(encoder, SentenceTransformerEncoder) and isinstance(encoder, TextEncoder)
    texts = ["a short text", "another, somewhat longer text about encoders"]
    expected = tiny_model.encode(texts)
    for method in (encoder.encode, encoder.encode_queries, encoder.encode_documents):
        got = method(texts, batch_size=1)
        assert got.dtype == np.float32 and got.shape == (2, 32)
        np.testing.assert_allclose(got, expected, atol=1e-5)
    assert as_encoder(encoder) is encoder


def test_as_encoder_rejects_other_objects() -> None:
    with pytest.raises(TypeError, match="neither a SentenceTransformer nor a TextEncoder"):
        as_encoder(object())  # type: ignore[arg-type]
