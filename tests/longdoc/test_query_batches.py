"""Queries' batches hold one padded width each (`padded_batches`): a query's vector depends on its own text alone,
not on its batch-mates, in every precision (issue 62.1), and a service's batch of mixed-length queries pads little."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from lengthwise.longdoc import LongEncoder
from lengthwise.longdoc._pipeline import LEAST_WIDTH, padded_batches, padded_widths

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
def test_bucketed_batches_cover_every_window_in_order_one_padded_width_each(seed) -> None:
    lengths = np.sort(np.random.default_rng(seed).integers(3, 60, size=97))[::-1]
    batches = padded_batches(lengths, 16, bucket=8, most=56)
    widths = padded_widths(lengths, 8, 56)
    assert [s.start for s in batches[1:]] == [s.stop for s in batches[:-1]]  # contiguous, in order
    assert batches[0].start == 0 and batches[-1].stop == len(lengths)
    for cut in batches:
        assert 1 <= cut.stop - cut.start <= 16
        assert len(set(widths[cut].tolist())) == 1  # one padded width a batch
        assert widths[cut][0] - lengths[cut].min() < 8 or widths[cut][0] in (LEAST_WIDTH, max(56, lengths.max()))
    for before, after in itertools.pairwise(batches):  # each cut was needed: full, or the width changes
        assert before.stop - before.start == 16 or widths[before.stop - 1] != widths[after.start]


def test_a_windows_padded_width_depends_on_its_own_length_alone() -> None:
    lengths = np.array([1, 7, 8, 9, 16, 17, 250, 255, 256])
    assert padded_widths(lengths, 8, 256).tolist() == [16, 16, 16, 16, 16, 24, 256, 256, 256]  # at least 16
    for length in lengths.tolist():
        assert padded_widths(np.array([length]), 8, 256)[0] == padded_widths(lengths, 8, 256)[lengths == length][0]


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
    monkeypatch.setattr(encoder_module, "_QUERY_BUCKET", None)  # one run of 32, padded to the longest
    plain = LongEncoder(tiny_model, cache_bytes=0).encode_queries(QUERIES, batch_size=32)
    assert len(seen) == 1 and len(cut) > 1
    assert sum(rows * width for rows, width in cut) < 0.8 * seen[0][0] * seen[0][1]
    assert sum(rows for rows, _ in cut) == seen[0][0]
    np.testing.assert_allclose(padded, plain, atol=1e-6)


def test_documents_keep_runs_of_the_batch_size(tiny_model, monkeypatch) -> None:
    seen = _forwards(tiny_model, monkeypatch)
    LongEncoder(tiny_model, cache_bytes=0, strategy="truncate").encode_documents(QUERIES, batch_size=32)
    assert [rows for rows, _ in seen] == [len(set(QUERIES))]  # one run of the distinct texts


def test_real_model_queries_in_batches_equal_one_by_one_to_the_bit(minilm) -> None:
    encoder = LongEncoder(minilm, cache_bytes=0)
    together = encoder.encode_queries(QUERIES[:8], batch_size=32)
    alone = np.concatenate([encoder.encode_queries([query]) for query in QUERIES[:8]])
    np.testing.assert_array_equal(together, alone)


@pytest.mark.parametrize("precision", ["fp32", "bf16", "int8"])
def test_a_query_vector_does_not_depend_on_its_batch_mates(minilm_path, precision) -> None:
    # before (issue 62.1): a batch was padded to its longest query, and the kernels change with the padded width:
    # in bf16 a query alone and in a batch of 8 differed in 39 of 64 queries (up to 1.2e-3), enough to reorder a
    # top 10; the service batches requests, so an answer depended on who else asked
    from lengthwise.core.models import load_plain_model
    from lengthwise.core.precision import cpu_half_support

    if precision == "bf16" and not cpu_half_support()["bf16"]:
        pytest.skip("bf16 is refused on a CPU without native bf16 (AMX or AVX512-BF16)")
    encoder = LongEncoder(load_plain_model(minilm_path, device="cpu", precision=precision), cache_bytes=0)
    queries = [*QUERIES, " ".join(_WORDS * 2)]  # 2 to 84 words: several padded widths
    alone = np.concatenate([encoder.encode_queries([query]) for query in queries])
    rng = np.random.default_rng(0)
    for _ in range(6):
        drawn = rng.choice(len(queries), 8, replace=False)
        np.testing.assert_array_equal(encoder.encode_queries([queries[i] for i in drawn]), alone[drawn])


def test_queries_on_a_gpu_keep_runs_of_the_batch_size(tiny_model, monkeypatch) -> None:
    """On a GPU a few more rows of padding cost less than another forward: no cut where lengths drop."""
    encoder = LongEncoder(tiny_model, cache_bytes=0)
    assert encoder._bucket("query") == 8 and encoder._bucket("document") is None
    monkeypatch.setattr(type(tiny_model), "device", property(lambda self: torch.device("cuda")))
    assert encoder._bucket("query") is None
