"""Queries' batches end where lengths drop (`padded_batches`, issue 48.3): a service's batch of mixed-length queries
pads little, and each query's vector stays what it was to within float rounding."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from lengthwise.longdoc import LongEncoder
from lengthwise.longdoc._pipeline import padded_batches

pytestmark = pytest.mark.usefixtures("one_thread")

_TEXT = (
    "why did the marketing expert think the trendy look would sell and what did the industrial designer answer about "
    "the cost of the curved case the rubber buttons the speech recognition and the budget for the next quarter that "
    "the project manager closed the meeting with before the professor spoke of the data sets collected this summer"
)
_WORDS = _TEXT.split(" ")
QUERIES = [" ".join(_WORDS[(3 * n) % 20 : (3 * n) % 20 + 2 + (7 * n) % 31]) for n in range(24)]  # 2 to 32 words


def test_plain_batches_are_runs_of_the_batch_size() -> None:
    lengths = np.arange(50, 0, -1)
    assert padded_batches(lengths, 16) == [slice(0, 16), slice(16, 32), slice(32, 48), slice(48, 50)]
    assert padded_batches(lengths[:0], 16) == []


@pytest.mark.parametrize("seed", range(5))
def test_padded_batches_cover_every_window_in_order_within_the_size_and_the_padding(seed) -> None:
    lengths = np.sort(np.random.default_rng(seed).integers(3, 60, size=97))[::-1]
    batches = padded_batches(lengths, 16, 1.25, least=4)
    assert [s.start for s in batches[1:]] == [s.stop for s in batches[:-1]]  # contiguous, in order
    assert batches[0].start == 0 and batches[-1].stop == len(lengths)
    for cut in batches:
        part = lengths[cut]
        assert 1 <= len(part) <= 16
        assert len(part) <= 4 or part[0] * len(part) <= 1.25 * part.sum()  # few rows, or little padding
    for before, after in itertools.pairwise(batches):  # each cut was needed: the next window did not fit
        grown = lengths[before.start : after.start + 1]
        assert len(grown) > 16 or (len(grown) > 4 and grown[0] * len(grown) > 1.25 * grown.sum())


def _forwards(model, monkeypatch) -> list[tuple[int, int]]:
    """(rows, padded width) of every forward the model runs from here on."""
    seen: list[tuple[int, int]] = []
    forward = type(model).forward

    def counted(self, features, *args, **kwargs):
        seen.append(tuple(features["input_ids"].shape))
        return forward(self, features, *args, **kwargs)

    monkeypatch.setattr(type(model), "forward", counted)
    return seen


def test_a_batch_of_mixed_queries_pads_less_and_keeps_its_vectors(tiny_model, monkeypatch) -> None:
    from lengthwise.longdoc import encoder as encoder_module

    seen = _forwards(tiny_model, monkeypatch)
    padded = LongEncoder(tiny_model, cache_bytes=0).encode_queries(QUERIES, batch_size=32)
    cut = list(seen)
    seen.clear()
    monkeypatch.setattr(encoder_module, "_QUERY_PADDING", None)  # one run of 32, padded to the longest
    plain = LongEncoder(tiny_model, cache_bytes=0).encode_queries(QUERIES, batch_size=32)
    assert len(seen) == 1 and len(cut) > 1
    assert sum(rows * width for rows, width in cut) < 0.8 * seen[0][0] * seen[0][1]
    assert sum(rows for rows, _ in cut) == seen[0][0]
    np.testing.assert_allclose(padded, plain, atol=1e-6)


def test_documents_keep_runs_of_the_batch_size(tiny_model, monkeypatch) -> None:
    seen = _forwards(tiny_model, monkeypatch)
    LongEncoder(tiny_model, cache_bytes=0, strategy="truncate").encode_documents(QUERIES, batch_size=32)
    assert [rows for rows, _ in seen] == [len(set(QUERIES))]  # one run of the distinct texts


def test_real_model_queries_in_padded_batches_equal_one_by_one(minilm) -> None:
    encoder = LongEncoder(minilm, cache_bytes=0)
    together = encoder.encode_queries(QUERIES[:8], batch_size=32)
    alone = np.concatenate([encoder.encode_queries([query]) for query in QUERIES[:8]])
    np.testing.assert_allclose(together, alone, atol=1e-6)


def test_queries_on_a_gpu_keep_runs_of_the_batch_size(tiny_model, monkeypatch) -> None:
    """On a GPU a few more rows of padding cost less than another forward: no cut where lengths drop."""
    encoder = LongEncoder(tiny_model, cache_bytes=0)
    assert encoder._padding("query") == 1.25 and encoder._padding("document") is None
    monkeypatch.setattr(type(tiny_model), "device", property(lambda self: torch.device("cuda")))
    assert encoder._padding("query") is None
