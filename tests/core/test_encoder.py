from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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


def test_scores_of_read_only_memory_mapped_vectors_warn_nothing(tmp_path: Path) -> None:
    """An index's vectors are a read-only memory map: scored as they are (no copy of the whole index, as
    `LongIndex.exact_vectors` made to avoid it), without torch's "not writable" warning (once per process, so in a
    fresh one)."""
    code = f"""
import warnings, numpy as np, torch
from lengthwise.core.encoder import MultiVectors, multi_vector_scores
rng = np.random.default_rng(0)
np.save({str(tmp_path / "v.npy")!r}, rng.normal(size=(6, 4)).astype(np.float32))
mapped = np.load({str(tmp_path / "v.npy")!r}, mmap_mode="r")
warnings.simplefilter("error")
query = torch.nn.functional.normalize(torch.ones(1, 4), dim=-1)
got = multi_vector_scores(query, MultiVectors(mapped, np.array([0, 2, 6])))
want = multi_vector_scores(query, MultiVectors(np.array(mapped), np.array([0, 2, 6])))
assert torch.equal(got, want), (got, want)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
