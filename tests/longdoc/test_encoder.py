"""`LongEncoder`: every strategy against the model's own encode where they must agree, errors, streaming, cache."""

from __future__ import annotations

import numpy as np
import pytest

from lengthwise.core.encoder import MultiVectorEncoder, TextEncoder
from lengthwise.longdoc import LongDocConfig, LongDocError, LongEncoder, Strategy

pytestmark = pytest.mark.usefixtures("one_thread")

SHORT = ["A cat sat on the mat.", "Dogs bark at night when the moon is full."]
ALL = [s.value for s in Strategy]


def _long_text(words: int) -> str:
    vocabulary = ["river", "stone", "bread", "winter", "school", "bridge", "market", "forest", "valley", "honey"]
    return " ".join(vocabulary[(i * 7) % len(vocabulary)] for i in range(words)) + "."


@pytest.mark.parametrize("strategy", ALL)
def test_a_text_inside_one_window_gets_the_models_own_vector(tiny_model, strategy: str) -> None:
    # late chunking pooled only the content tokens before; a one-chunk text now equals model.encode exactly
    encoder = LongEncoder(tiny_model, strategy=strategy)
    expected = tiny_model.encode(SHORT, convert_to_numpy=True)
    np.testing.assert_allclose(encoder.encode_documents(SHORT), expected, atol=1e-5)
    np.testing.assert_allclose(encoder.encode(SHORT), expected, atol=1e-5)


def test_truncate_is_what_encode_does_on_long_texts(tiny_model) -> None:
    texts = [_long_text(300), _long_text(90)]
    expected = tiny_model.encode(texts, convert_to_numpy=True)
    np.testing.assert_allclose(LongEncoder(tiny_model, strategy="truncate").encode(texts), expected, atol=1e-5)


def test_chunk_mean_is_the_normalised_mean_of_the_window_vectors(tiny_model) -> None:
    text = _long_text(200)
    encoder = LongEncoder(tiny_model, strategy="chunk-mean", window=32)
    ids = tiny_model.tokenizer(text, add_special_tokens=False)["input_ids"]
    spans = encoder.spans(ids)
    assert len(spans) > 2
    wrapped = [encoder.specials.wrap(ids[s:e]) for s, e in spans]
    from lengthwise.core.embed import embed_ids

    tiny_model.max_seq_length, saved = 32, tiny_model.max_seq_length
    try:
        windows = embed_ids(tiny_model, wrapped)
    finally:
        tiny_model.max_seq_length = saved
    mean = windows.mean(axis=0)
    np.testing.assert_allclose(encoder.encode([text])[0], mean / np.linalg.norm(mean), atol=1e-5)
    weights = np.asarray([e - s for s, e in spans], dtype=np.float32)
    weighted = (windows * weights[:, None]).sum(0)
    got = LongEncoder(tiny_model, strategy="chunk-weighted", window=32).encode([text])[0]
    np.testing.assert_allclose(got, weighted / np.linalg.norm(weighted), atol=1e-5)


def test_multi_vector_keeps_every_window(tiny_model) -> None:
    encoder = LongEncoder(tiny_model, strategy="multi-vector", window=32, stride=20)
    texts = [_long_text(150), SHORT[0]]
    multi = encoder.encode_documents_multi(texts)
    ids = [tiny_model.tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    assert np.diff(multi.offsets).tolist() == [len(encoder.spans(i)) for i in ids]
    assert isinstance(encoder, MultiVectorEncoder) and encoder.is_multi_vector
    assert isinstance(LongEncoder(tiny_model), TextEncoder)


def test_late_chunking_beyond_the_position_table_uses_macro_windows(tiny_model) -> None:
    text = _long_text(400)  # ~400 tokens; the tiny model's position table holds 128
    encoder = LongEncoder(tiny_model, strategy="late-chunking", window=32)
    vector = encoder.encode([text])
    assert vector.shape == (1, tiny_model.get_embedding_dimension())
    assert np.isfinite(vector).all()
    assert encoder.stats["forwarded_windows"] >= 4  # several overlapping macro-windows of ≤ 128 tokens


def test_streaming_blocks_give_the_same_vectors(tiny_model) -> None:
    texts = [_long_text(n) for n in (40, 260, 120, 75, 300)]
    whole = LongEncoder(tiny_model, strategy="chunk-weighted", window=48).encode(texts)
    small_blocks = LongEncoder(tiny_model, strategy="chunk-weighted", window=48, block_chars=200)
    parts = list(small_blocks.iter_windows(iter(texts), None))  # a generator, read block by block
    assert len(parts) == len(texts)
    np.testing.assert_allclose(small_blocks.encode(texts), whole, atol=1e-5)


def test_identical_windows_are_embedded_once(tiny_model) -> None:
    text = " ".join(["word"] * 620)  # windows of the same ids repeat
    encoder = LongEncoder(tiny_model, strategy="chunk-mean")
    encoder.encode([text, text])
    assert encoder.stats["windows"] > encoder.stats["forwarded_windows"]


@pytest.mark.parametrize(
    ("settings", "flag"),
    [
        ({"window": 4096}, "window=4096: above the model's limit of 128"),
        ({"window": 32, "stride": 31}, "stride=31: larger than the 30 text tokens"),
        ({"macro_window": 1000}, "macro_window=1000: above"),
    ],
)
def test_bad_settings_name_the_flag(tiny_model, settings: dict, flag: str) -> None:
    with pytest.raises(LongDocError, match=flag):
        LongEncoder(tiny_model, strategy="chunk-mean", **settings).encode([_long_text(100)])


@pytest.mark.parametrize(
    ("settings", "flag"),
    [
        ({"window": 64, "stride": 64}, r"stride=64: not below the window \(64\)"),
        ({"strategy": "chunky"}, "strategy='chunky': not a strategy"),
        ({"window": 2}, "window=2: too small"),
        ({"best_windows": 0}, "best_windows=0: must be"),
    ],
)
def test_config_errors_name_the_flag(settings: dict, flag: str) -> None:
    with pytest.raises(LongDocError, match=flag):
        LongDocConfig(**settings)


def test_an_empty_document_is_an_error_naming_it(tiny_model) -> None:
    with pytest.raises(LongDocError, match="document #1 is empty"):
        LongEncoder(tiny_model).encode(["fine text", "   "])


def test_config_round_trips_through_a_dict() -> None:
    config = LongDocConfig(strategy=Strategy.multi_vector, window=128, stride=96, best_windows=2)
    assert LongDocConfig.from_dict(config.to_dict()) == config
    assert config.describe() == "multi-vector w128 s96 top2"


def test_the_cache_counts_keys_and_overhead_not_only_arrays() -> None:
    # keys were the full id bytes and uncounted: a long corpus of unique windows grew the cache past its cap
    from lengthwise.longdoc._cache import WindowCache, window_key

    cache = WindowCache(max_bytes=10_000)
    for i in range(1000):
        cache.put(window_key(range(i, i + 256)), np.zeros(2, dtype=np.float32))
    assert len(cache) <= 10_000 // 200
    assert len(window_key(range(256))) == 16
    assert window_key([1, 2], b"query") != window_key([1, 2], b"document")


@pytest.mark.parametrize("strategy", ["chunk-mean", "late-chunking"])
def test_cached_outputs_own_their_memory(tiny_model, strategy: str) -> None:
    # cached rows were views of the whole batch array, so the cache held far more memory than it counted
    encoder = LongEncoder(tiny_model, strategy=strategy, window=32)
    encoder.encode([_long_text(200), _long_text(120)])
    assert len(encoder.cache) > 0
    assert all(value.base is None for value in encoder.cache._items.values())
