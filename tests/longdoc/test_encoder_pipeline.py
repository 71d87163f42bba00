"""The encode pipeline's output is byte-identical in fp32 to today's `LongEncoder` (issue 48.2).

The reference is the encoder as it was before the pipeline (commit d983bb0), frozen in `_legacy_encoder.py`; both
encode the same small corpus with the tiny random BERT in the same run, under every strategy, with the window
cache on and off, for the query, document and symmetric roles, and with a prompt.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from lengthwise.longdoc import LongEncoder, Strategy

from ._legacy_encoder import LegacyLongEncoder

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(autouse=True)
def todays_query_batches(monkeypatch) -> None:
    """Queries in the batches of the encoder before the pipeline (runs of `batch_size`): the byte-for-byte
    comparisons here need the same batches. Queries batched by padded width are tested in
    test_query_batches.py."""
    from lengthwise.longdoc import encoder as encoder_module

    monkeypatch.setattr(encoder_module, "_QUERY_BUCKET", None)


HERE = Path(__file__).parent


def _corpus() -> list[str]:
    """Prose and haystack documents of 1 to 13 lines, short ones, and repeats (the cache's hits)."""
    prose = [line for line in (HERE / "prose.txt").read_text().splitlines() if line.strip()]
    hay = [line for line in (HERE / "haystack.txt").read_text().splitlines() if line.strip()]
    docs = [" ".join(prose[: 1 + i % len(prose)]) for i in range(0, 13, 3)]
    docs += [" ".join(hay[(i * 3) % len(hay) : (i * 3) % len(hay) + 1 + i % 6]) for i in range(8)]
    docs += ["A cat sat on the mat.", "Short.", docs[1], " ".join(["word"] * 300)]
    return docs


CASES = [
    pytest.param({"strategy": "chunk-mean"}, id="chunk-mean"),
    pytest.param({"strategy": "chunk-weighted", "window": 48, "stride": 30}, id="chunk-weighted-overlap"),
    pytest.param({"strategy": "truncate"}, id="truncate"),
    pytest.param({"strategy": "multi-vector", "window": 32, "stride": 16}, id="multi-vector-w32-s16"),
    pytest.param({"strategy": "multi-vector", "window": 24, "sentence_cuts": True}, id="multi-vector-cuts"),
    pytest.param({"strategy": "multi-vector", "window": 24, "scales": (48,)}, id="multi-scale"),
    pytest.param({"strategy": "late-chunking", "window": 32}, id="late-chunking"),
    pytest.param({"strategy": "late-chunking", "window": 24, "macro_window": 64}, id="late-chunking-macro"),
]


def _outputs(encoder, role: str | None, docs: list[str], batch_size: int) -> list[tuple[np.ndarray, np.ndarray]]:
    return [(part.vectors, part.weights) for part in encoder.iter_windows(docs, role, batch_size=batch_size)]


def _assert_identical(new, old) -> None:
    assert len(new) == len(old)
    for (vectors, weights), (old_vectors, old_weights) in zip(new, old, strict=True):
        assert vectors.dtype == old_vectors.dtype and vectors.shape == old_vectors.shape
        assert vectors.tobytes() == old_vectors.tobytes()  # byte for byte, not allclose
        assert weights.tobytes() == old_weights.tobytes()


@pytest.mark.parametrize("settings", CASES)
@pytest.mark.parametrize("cache_bytes", [0, 2**20], ids=["cache-off", "cache-on"])
@pytest.mark.parametrize("role", ["document", "query", None])
def test_the_pipeline_equals_todays_encoder_byte_for_byte(tiny_model, settings, cache_bytes, role) -> None:
    docs = _corpus()
    new = LongEncoder(tiny_model, cache_bytes=cache_bytes, **settings)
    old = LegacyLongEncoder(tiny_model, cache_bytes=cache_bytes, **settings)
    for batch_size in (32, 5):
        _assert_identical(_outputs(new, role, docs, batch_size), _outputs(old, role, docs, batch_size))
    for name in ("windows", "forwarded_windows", "forwarded_tokens", "documents"):
        assert new.stats[name] == old.stats[name], name


@pytest.mark.parametrize("strategy", ["chunk-weighted", "multi-vector", "late-chunking"])
def test_the_pipeline_equals_todays_encoder_with_a_prompt_and_small_blocks(tiny_model_dir, strategy) -> None:
    from lengthwise.core.models import load_plain_model

    model = load_plain_model(tiny_model_dir, device="cpu")
    model.prompts = {"query": "query: ", "document": "passage: "}
    docs = _corpus()
    new = LongEncoder(model, strategy=strategy, window=32, cache_bytes=2**20, block_chars=700)
    old = LegacyLongEncoder(model, strategy=strategy, window=32, cache_bytes=2**20, block_chars=700)
    for role in ("query", "document"):
        _assert_identical(_outputs(new, role, docs, 8), _outputs(old, role, docs, 8))
    np.testing.assert_array_equal(new.encode_documents_multi(docs).vectors, old.encode_documents_multi(docs).vectors)
    assert np.array_equal(new.encode_queries(docs), old.encode_queries(docs))


@pytest.mark.parametrize("cache_bytes", [0, 2**20], ids=["cache-off", "cache-on"])
def test_a_block_read_in_many_pieces_equals_todays_encoder(tiny_model, monkeypatch, cache_bytes) -> None:
    """A window seen in an earlier piece of the same block (a repeated document) keeps its row."""
    from lengthwise.longdoc import encoder as encoder_module

    monkeypatch.setattr(encoder_module, "_PIECE_CHARS", 150)  # a piece or two per document
    docs = _corpus()
    docs += docs[:4]  # repeats in later pieces of the block
    for settings in ({"strategy": "multi-vector", "window": 32, "stride": 16}, {"strategy": "late-chunking"}):
        new = LongEncoder(tiny_model, cache_bytes=cache_bytes, **settings)
        old = LegacyLongEncoder(tiny_model, cache_bytes=cache_bytes, **settings)
        _assert_identical(_outputs(new, "document", docs, 4), _outputs(old, "document", docs, 4))
        assert new.stats["forwarded_windows"] == old.stats["forwarded_windows"]


def test_a_blocks_vectors_are_read_from_the_forward_only_when_the_block_ends(tiny_model, monkeypatch) -> None:
    """The forward's vectors stay on their way to the host (`HostCopy`) until the block ends, so a GPU is not
    waited for between batches; what the encoder yields is still byte-identical to today's."""
    from lengthwise.core import embed

    reads: list[int] = []  # batches read, at each read
    forwards = {"count": 0}
    read = embed.HostCopy.numpy

    def counted_read(self) -> np.ndarray:
        reads.append(forwards["count"])
        return read(self)

    monkeypatch.setattr(embed.HostCopy, "numpy", counted_read)
    new = LongEncoder(tiny_model, cache_bytes=0, strategy="multi-vector", window=32, stride=16)
    run = new._forward_windows

    def counted_run(*args, **kwargs):
        forwards["count"] += 1
        return run(*args, **kwargs)

    monkeypatch.setattr(new, "_forward_windows", counted_run)
    docs = _corpus()
    got = _outputs(new, "document", docs, 4)
    old = LegacyLongEncoder(tiny_model, cache_bytes=0, strategy="multi-vector", window=32, stride=16)
    _assert_identical(got, _outputs(old, "document", docs, 4))
    assert forwards["count"] > 2 and len(reads) == forwards["count"]
    assert set(reads) == {forwards["count"]}  # every batch read after the last forward of the (one) block


def test_a_host_copy_on_the_cpu_is_the_tensor_itself() -> None:
    from lengthwise.core.embed import HostCopy

    tensor = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    array = HostCopy(tensor).numpy()
    assert np.shares_memory(array, tensor.numpy()) and array.tolist() == tensor.tolist()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (the copy into pinned memory)")
def test_a_host_copy_from_a_gpu_lands_in_pinned_memory_equal_to_the_tensor() -> None:
    from lengthwise.core.embed import HostCopy

    tensor = torch.randn(64, 384, device="cuda", dtype=torch.bfloat16).float()
    copy = HostCopy(tensor)
    assert copy.tensor.is_pinned()
    assert np.array_equal(copy.numpy(), tensor.cpu().numpy())


def _padded(rows: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """The ids and attention mask of `rows` padded on the right by hand (the pad id of BERT's tokenizer is 0)."""
    width = max(map(len, rows))
    ids = torch.zeros((len(rows), width), dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for index, row in enumerate(rows):
        ids[index, : len(row)] = torch.tensor(row)
        mask[index, : len(row)] = 1
    return ids, mask


def test_window_batches_of_full_and_mixed_rows_equal_the_padded_lists(tiny_model) -> None:

    from lengthwise.core.embed import WindowBatches

    ids = np.random.default_rng(1).integers(1000, 2000, size=300)
    starts = np.asarray([0, 40, 7, 200])
    for prefix, suffix, lengths in (([101], [102], [30] * 4), ((), (), [5] * 4), ([101, 9], [102], [30, 2, 30, 1])):
        rows = [[*prefix, *ids[s : s + n].tolist(), *suffix] for s, n in zip(starts, lengths, strict=True)]
        want_ids, want_mask = _padded(rows)
        batches = WindowBatches(tiny_model.tokenizer, prefix=prefix, suffix=suffix)
        for _ in range(2):  # the second batch reuses the shapes of the first
            got = batches(ids, starts, np.asarray(lengths))
            assert torch.equal(got["input_ids"], want_ids) and torch.equal(got["attention_mask"], want_mask)
            assert torch.equal(got["token_type_ids"], torch.zeros_like(want_ids))


def test_pooled_and_multi_entry_points_equal_todays(tiny_model) -> None:
    docs = _corpus()
    for strategy in Strategy:
        new, old = LongEncoder(tiny_model, strategy=strategy), LegacyLongEncoder(tiny_model, strategy=strategy)
        assert new.encode(docs).tobytes() == old.encode(docs).tobytes(), strategy
        assert new.encode_documents(docs).tobytes() == old.encode_documents(docs).tobytes(), strategy
    new, old = LongEncoder(tiny_model, strategy="multi-vector"), LegacyLongEncoder(tiny_model, strategy="multi-vector")
    got, want = new.encode_documents_multi(docs), old.encode_documents_multi(docs)
    assert got.vectors.tobytes() == want.vectors.tobytes()
    assert np.array_equal(got.offsets, want.offsets)


def test_window_spans_cut_as_the_token_windows_do() -> None:
    from lengthwise.core.tokens import windows
    from lengthwise.longdoc._pipeline import window_spans

    for n in range(1, 90):
        for size in (1, 2, 5, 16, 30):
            for stride in sorted({1, max(1, size // 2), size}):
                starts, ends = window_spans(n, size, stride)
                assert list(zip(starts.tolist(), ends.tolist(), strict=True)) == windows(n, size, stride), (n, size)


def test_the_reader_thread_hands_on_items_then_its_error_in_order() -> None:
    import threading

    from lengthwise.longdoc._pipeline import prefetch

    def items():
        yield from range(5)
        raise ValueError("document #5 is empty")

    got = []
    with pytest.raises(ValueError, match="document #5"):
        for item in prefetch(items()):
            got.append(item)
    assert got == [0, 1, 2, 3, 4]
    endless = prefetch(iter(range(10**9)), depth=2)
    assert next(endless) == 0
    endless.close()  # a consumer stopping early stops the thread
    assert not [t for t in threading.enumerate() if t.name == "lengthwise-prefetch"]


def test_window_features_gather_the_rows_batch_features_builds(tiny_model) -> None:

    from lengthwise.core.embed import batch_features, window_features

    rng = np.random.default_rng(0)
    ids = rng.integers(1000, 2000, size=200)
    starts, lengths = np.asarray([0, 50, 7, 120]), np.asarray([30, 3, 17, 1])
    prefix, suffix = [101, 7], [102]
    rows = [[*prefix, *ids[s : s + n].tolist(), *suffix] for s, n in zip(starts, lengths, strict=True)]
    got = window_features(tiny_model.tokenizer, ids, starts, lengths, prefix=prefix, suffix=suffix)
    want_ids, want_mask = _padded(rows)
    assert torch.equal(got["input_ids"], want_ids) and torch.equal(got["attention_mask"], want_mask)
    assert got["input_ids"].dtype == torch.long and torch.equal(got["token_type_ids"], torch.zeros_like(want_ids))
    same = batch_features(tiny_model.tokenizer, rows, torch.device("cpu"))
    assert all(torch.equal(same[name], got[name]) for name in got)


def test_encode_writes_each_shard_in_a_writer_thread_and_raises_its_error(tiny_model, tmp_path, monkeypatch) -> None:
    import json
    import threading

    from lengthwise.longdoc.storage.store import EmbeddingStore, encode_corpus

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": f"d{i}", "text": text}) + "\n" for i, text in enumerate(_corpus())))
    settings = {"model": "tiny", "long": {"strategy": "multi-vector"}}
    encoder = LongEncoder(tiny_model, strategy="multi-vector", window=32, stride=16)
    threads: list[str] = []
    write = EmbeddingStore.write

    def watched(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        threads.append(threading.current_thread().name)
        return write(self, *args, **kwargs)

    monkeypatch.setattr(EmbeddingStore, "write", watched)
    store = EmbeddingStore(tmp_path / "emb", settings)
    assert encode_corpus(encoder, corpus, store, shard_docs=4) == len(_corpus())
    assert len(threads) == -(-len(_corpus()) // 4) and all(name.startswith("lengthwise-shards") for name in threads)
    assert sorted(store.done_ids()) == sorted(f"d{i}" for i in range(len(_corpus())))

    def failing(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        raise OSError("disk full")

    monkeypatch.setattr(EmbeddingStore, "write", failing)
    with pytest.raises(OSError, match="disk full"):
        encode_corpus(encoder, corpus, EmbeddingStore(tmp_path / "emb2", settings), shard_docs=4)


def _watched_encode(tiny_model: Any, tmp_path: Path, monkeypatch: Any, strategy: str, texts: list[str],
                    shard_docs: int) -> tuple[list[int], list[int], Any]:  # fmt: skip
    """`encode_corpus` of `texts` with a progress bar: the bar's count as each document comes out of the encoder,
    and at the start of each batch the model runs; the bar."""
    import json

    import tqdm.auto

    from lengthwise.longdoc.storage.store import EmbeddingStore, encode_corpus

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": f"d{i}", "text": text}) + "\n" for i, text in enumerate(texts)))
    encoder = LongEncoder(tiny_model, strategy=strategy, window=32, stride=16)
    bars: list[Any] = []
    real_bar = tqdm.auto.tqdm

    def recorded(*args: Any, **kwargs: Any) -> Any:
        bars.append(real_bar(*args, **kwargs))
        return bars[-1]

    out: list[int] = []  # the bar's count as each document's windows come out of the encoder
    forwards: list[int] = []  # … and as each batch of windows starts through the model
    real_iter, real_forward = LongEncoder.iter_windows, LongEncoder._forward_windows

    def watched(self: LongEncoder, *args: Any, **kwargs: Any) -> Any:
        for part in real_iter(self, *args, **kwargs):
            out.append(bars[0].n)  # the encode bar (the encoder makes its own, disabled, after it)
            yield part

    def forwarding(self: LongEncoder, *args: Any, **kwargs: Any) -> Any:
        forwards.append(bars[0].n)
        return real_forward(self, *args, **kwargs)

    monkeypatch.setattr(tqdm.auto, "tqdm", recorded)
    monkeypatch.setattr(LongEncoder, "iter_windows", watched)
    monkeypatch.setattr(LongEncoder, "_forward_windows", forwarding)
    store = EmbeddingStore(tmp_path / "emb", {"model": "tiny", "long": {"strategy": strategy}})
    assert encode_corpus(encoder, corpus, store, shard_docs=shard_docs, show_progress=True) == len(texts)
    assert encoder.on_forward is None  # the bar's hook is let go with the bar
    return out, forwards, bars[0]


@pytest.mark.parametrize("strategy", ["multi-vector", "chunk-mean"])
def test_the_encode_bar_counts_documents_embedded_not_read(tiny_model, tmp_path, monkeypatch, strategy) -> None:
    """The bar advanced by a whole shard before the shard was embedded: 100 % while the last shard still ran (15
    minutes of all-mpnet-base-v2 on one thread); now it never counts a document before its block's windows start
    through the model, and by no more than the block's share done."""
    texts = _corpus()
    out, forwards, bar = _watched_encode(tiny_model, tmp_path, monkeypatch, strategy, texts, shard_docs=4)
    for n, count in enumerate(out):  # shards of 4 documents, one block each: at most the shards begun are counted
        assert n <= count <= 4 * (n // 4 + 1)
    assert forwards[0] == 0  # nothing counted before the first batch
    assert forwards == sorted(forwards) and bar.n == len(texts)


def test_the_encode_bar_moves_inside_a_block_of_long_documents(tiny_model, tmp_path, monkeypatch) -> None:
    """A block of long documents (minutes on a CPU with a real model) gives its documents out only at its end: the
    bar moves with its batches meanwhile, by the documents whose share of the block's windows is done, and reaches
    the documents' count only when they are out (issue 62: a QMSum encode printed 1/70 after 4 minutes, 5 hours
    left, then nothing)."""
    hay = [line for line in (HERE / "haystack.txt").read_text().splitlines() if line.strip()]
    prose = [line for line in (HERE / "prose.txt").read_text().splitlines() if line.strip()]
    texts = [" ".join(prose[i % 13 :] + hay + prose[: i % 13]) for i in range(6)]  # one block, ~1,300 tokens each
    out, forwards, bar = _watched_encode(tiny_model, tmp_path, monkeypatch, "multi-vector", texts, shard_docs=6)
    assert 0 < max(forwards) < len(texts)  # counted while the block ran, never all of it before its end
    assert forwards == sorted(forwards) and out[0] >= max(forwards) and bar.n == len(texts)
