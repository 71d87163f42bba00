"""The token side: the codec, the token encode (checked shards, resumable, byte-identical) and MaxSim over it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from lengthwise.core.errors import SettingError
from lengthwise.core.token_codec import TokenCodec, parse_codec, read_codec
from lengthwise.longdoc.storage.tokens import encode_tokens
from lengthwise.longdoc.token_vectors import encode_token_vectors
from lengthwise.search.fusion import top_set
from lengthwise.search.rows import best_rows
from lengthwise.search.tokens import TOKEN_DEPTH, TOKEN_WEIGHT, TokenSide, TokenStage, flat_rows, maxsim_exact
from lengthwise.search.types import TokenChoice

PROSE = (Path(__file__).resolve().parents[1] / "longdoc" / "prose.txt").read_text()


def _unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


@pytest.mark.parametrize(("spec", "dims", "bits", "size"), [
    ("fp32", None, 32, 4 * 48), ("fp16", None, 16, 2 * 48), ("int8", None, 8, 48), ("int4", None, 4, 24),
    ("pca16-int8", 16, 8, 16), ("pca16-int4", 16, 4, 8), ("PCA32-fp16", 32, 16, 64), ("bin", None, 1, 6),
    ("pca16-bin", 16, 1, 2),
])  # fmt: skip
def test_codec_specs_size_and_round_trip(spec: str, dims: int | None, bits: int, size: int) -> None:
    rows = _unit(np.random.default_rng(0).standard_normal((500, 48)))
    assert parse_codec(spec) == (dims, bits)
    codec = TokenCodec.fit(spec, rows)
    assert codec.bytes_per_token == size
    codes = codec.encode(rows)
    assert codes.nbytes == len(rows) * size
    decoded = codec.decode(codes)
    exact = codec.project(rows)
    if bits == 1:
        np.testing.assert_array_equal(decoded, np.where(exact > 0, 1.0, -1.0))  # each dimension's sign
    elif codec.scale is None:
        assert np.abs(decoded - exact).max() <= 1e-3  # float16's rounding
    else:  # within half a code step, except the few beyond the clip (the 99.99th percentile), which saturate
        inside = np.abs(exact) <= codec.scale * (127 if bits == 8 else 7)
        assert np.all(np.abs(decoded - exact)[inside] <= np.broadcast_to(codec.scale / 2 + 1e-6, exact.shape)[inside])
        assert inside.mean() >= 0.99  # at 500 rows the percentile sits below the largest of each dimension
    again = TokenCodec.from_arrays(codec.to_arrays())
    np.testing.assert_array_equal(again.encode(rows), codes)


@pytest.mark.parametrize("spec", ["fp32", "fp16", "int8", "int4", "bin", "pca16-bin", "pca16-int8"])
def test_codec_products_are_the_queries_dot_products_with_the_decoded_tokens(spec: str) -> None:
    """`TokenCodec.products` (one bit: 2 · q·bits − Σq, never writing ±1; int8: the scale folded into the query) is
    each query row's dot product with each decoded token, to float rounding."""
    rng = np.random.default_rng(3)
    rows = _unit(rng.standard_normal((300, 48)))
    codec = TokenCodec.fit(spec, rows)
    codes, queries = codec.encode(rows), codec.project(_unit(rng.standard_normal((7, 48))))
    found = codec.products(queries, codes)
    assert found.shape == (7, 300) and found.dtype == np.float32
    wanted = queries.astype(np.float64) @ codec.decode(codes).astype(np.float64).T
    np.testing.assert_allclose(found, wanted, rtol=1e-5, atol=1e-5)


def test_one_bit_products_in_integers_match_the_float_path_and_fall_back_to_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One-bit codes: the integer product (three signed bytes of each fixed-point query row, ``torch._int_mm``) is
    the float64 dot product to 2e-6; where torch has no integer product the float path
    answers, the same to rounding."""
    import torch

    rng = np.random.default_rng(6)
    rows = _unit(rng.standard_normal((400, 64)))
    codec = TokenCodec.fit("bin", rows)
    codes, queries = codec.encode(rows), codec.project(_unit(rng.standard_normal((9, 64))))
    queries[3] = 0.0  # a row of zeros is scaled by one, not divided by zero
    wanted = queries.astype(np.float64) @ codec.decode(codes).astype(np.float64).T
    integer = codec.products(queries, codes)
    assert np.abs(integer - wanted).max() <= 2e-6  # float32 output: values near 2 round by 1.2e-7
    assert not integer[3].any()

    def refused(*args: object) -> None:
        raise RuntimeError("no integer matrix product here")

    monkeypatch.setattr(torch, "_int_mm", refused)
    fallback = codec.products(queries, codes)
    assert fallback.dtype == np.float32
    np.testing.assert_allclose(fallback, wanted, rtol=1e-5, atol=1e-5)


def test_flat_rows_reads_each_row_once_for_each_place() -> None:
    """Overlapping ranges of one place give each row once; the same rows for two places are read for each."""
    rng = np.random.default_rng(4)
    for _ in range(500):
        count = int(rng.integers(0, 9))
        starts = rng.integers(0, 40, count)
        ranges = np.stack([starts, starts + rng.integers(0, 12, count)], axis=1).astype(np.int64)
        places = rng.integers(0, 3, count).astype(np.int64)
        rows, owners = flat_rows(ranges.reshape(-1, 2), places)
        wanted = [(r, p) for p in range(3)
                  for r in sorted({r for (a, b), q in zip(ranges.tolist(), places.tolist(), strict=True) if q == p
                                   for r in range(a, b)})]  # fmt: skip
        assert list(zip(rows.tolist(), owners.tolist(), strict=True)) == wanted


def test_best_rows_is_each_documents_stable_sort_with_ties_to_the_earlier_window() -> None:
    """`best_rows` (one partition for every document) and `top_set` keep the windows a stable sort of each document
    keeps, ties included (duplicated text gives equal cosines), documents of fewer windows whole."""
    rng = np.random.default_rng(5)
    for trial in range(500):
        sizes = rng.integers(0, 12, int(rng.integers(1, 6)))
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        values = rng.integers(0, 3, int(offsets[-1])) if trial % 2 else rng.standard_normal(int(offsets[-1]))
        values = values.astype(np.float32)
        docs = rng.permutation(len(sizes))[: int(rng.integers(1, len(sizes) + 1))].astype(np.int64)
        count = int(rng.integers(1, 10))
        rows, places = best_rows(values, offsets, docs, count)
        wanted = [(int(offsets[d]) + int(w), p) for p, d in enumerate(docs.tolist())
                  for w in np.sort(np.argsort(-values[offsets[d] : offsets[d + 1]], kind="stable")[:count])
                  ]  # fmt: skip
        assert list(zip(rows.tolist(), places.tolist(), strict=True)) == wanted
        for d in docs.tolist():
            own = values[offsets[d] : offsets[d + 1]]
            assert top_set(own, count).tolist() == np.sort(np.argsort(-own, kind="stable")[:count]).tolist()


def test_best_rows_on_wide_documents_with_crowded_edges() -> None:
    """Documents of up to 2,000 windows (``torch.topk`` picks its set differently on wide rows) whose cosines take
    a few values only (copied text): each document's set is still its stable sort's, earlier windows at the edge."""
    rng = np.random.default_rng(6)
    for trial in range(40):
        sizes = rng.integers(1, 2000, int(rng.integers(1, 8)))
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        levels = rng.standard_normal(int(rng.integers(1, 6)))  # one to five distinct cosines
        values = levels[rng.integers(0, len(levels), int(offsets[-1]))].astype(np.float32 if trial % 2 else np.float64)
        docs = rng.permutation(len(sizes)).astype(np.int64)
        count = int(rng.choice([1, 8, 16, 100, 2500]))
        rows, places = best_rows(values, offsets, docs, count)
        wanted = [(int(offsets[d]) + int(w), p) for p, d in enumerate(docs.tolist())
                  for w in np.sort(np.argsort(-values[offsets[d] : offsets[d + 1]], kind="stable")[:count])
                  ]  # fmt: skip
        assert list(zip(rows.tolist(), places.tolist(), strict=True)) == wanted


def test_codec_projection_keeps_dot_products_of_low_rank_tokens() -> None:
    rng = np.random.default_rng(1)
    rows = _unit(rng.standard_normal((2000, 8)) @ rng.standard_normal((8, 64)))  # rank 8 in 64 dimensions
    codec = TokenCodec.fit("pca8-fp32", rows)
    np.testing.assert_allclose(codec.project(rows[:50]) @ codec.project(rows[50:100]).T,
                               rows[:50] @ rows[50:100].T, atol=1e-4)  # fmt: skip


@pytest.mark.parametrize("spec", ["pca", "int2", "pca0-int8", "pca7-int4", "fp8", "pca12-bin"])
def test_bad_codec_names_the_setting(spec: str) -> None:
    with pytest.raises(SettingError, match="codec"):
        parse_codec(spec)


def _corpus(folder: Path, texts: list[str]) -> Path:
    path = folder / "corpus.jsonl"
    path.write_text("".join(json.dumps({"_id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(texts)))
    return path


TEXTS = [PROSE[:1500], "The committee met on Tuesday to discuss the budget.", PROSE[1500:2500],
         "Marketing wants a remote control shaped like a banana.", PROSE[2500:2800]]  # fmt: skip


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.name != "manifest.json"}


def test_token_encode_is_byte_identical_across_runs_and_resumes(tiny_model_dir: Path, tmp_path: Path) -> None:
    corpus = _corpus(tmp_path, TEXTS)
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    assert encode_tokens(corpus, whole, tiny_model_dir, codec="pca16-int8", window=32, overlap=8, shard_docs=2) == 5
    # a run killed after its first shard: the second shard's record never written, the third never started
    encode_tokens(corpus, parts, tiny_model_dir, codec="pca16-int8", window=32, overlap=8, shard_docs=2)
    (parts / "w0-00001.shard.json").unlink()
    for path in parts.glob("w0-00002*"):
        path.unlink()
    assert encode_tokens(corpus, parts, tiny_model_dir, codec="pca16-int8", window=32, overlap=8, shard_docs=2) == 3
    assert _files(whole) == _files(parts)
    again = tmp_path / "again"
    encode_tokens(corpus, again, tiny_model_dir, codec="pca16-int8", window=32, overlap=8, shard_docs=2)
    assert _files(again) == _files(whole)


def test_token_encode_on_two_processes_codes_every_document_as_one_process(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    """`encode_tokens(devices=["cpu", "cpu"])` (`encode-tokens --devices cpu,cpu`): the codec is fitted once, on the
    first shard's documents as one process fits it, and each process codes its share (documents k, k + 2, …) with
    it: every document's codes and spans are those of the one-process run; the model is recorded; a second call
    resumes with nothing to do."""
    corpus = _corpus(tmp_path, TEXTS)
    one, two = tmp_path / "one", tmp_path / "two"
    common = {"codec": "pca16-int8", "window": 32, "overlap": 8, "shard_docs": 2, "threads": 1}
    assert encode_tokens(corpus, one, tiny_model_dir, **common) == 5
    assert encode_tokens(corpus, two, tiny_model_dir, devices=["cpu", "cpu"], **common) == 5
    assert {p.name for p in two.glob("w1-*.npy")}  # the second process wrote shards of its own
    assert (two / "codec.npz").read_bytes() == (one / "codec.npz").read_bytes()
    assert (two / "model.json").read_text() == (one / "model.json").read_text()
    first, second = TokenSide.open(one), TokenSide.open(two)
    assert sorted(second.doc_ids) == sorted(first.doc_ids)
    for doc_id in first.doc_ids:
        a, b = first.numbers[doc_id], second.numbers[doc_id]
        np.testing.assert_array_equal(second.codes[second.offsets[b] : second.offsets[b + 1]],
                                      first.codes[first.offsets[a] : first.offsets[a + 1]])  # fmt: skip
        np.testing.assert_array_equal(second.spans(b), first.spans(a))
    assert encode_tokens(corpus, two, tiny_model_dir, devices=["cpu", "cpu"], **common) == 0


def test_token_encode_refuses_other_settings_and_re_embeds_a_damaged_shard(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    corpus, out = _corpus(tmp_path, TEXTS), tmp_path / "tokens"
    encode_tokens(corpus, out, tiny_model_dir, codec="int8", window=32, overlap=8, shard_docs=2)
    before = _files(out)
    with pytest.raises(SettingError, match="codec"):
        encode_tokens(corpus, out, tiny_model_dir, codec="pca16-int8", window=32, overlap=8, shard_docs=2)
    assert _files(out) == before  # nothing written by the refused run
    spans = sorted(out.glob("*.spans.npy"))[1]
    spans.write_bytes(spans.read_bytes()[:-4])
    notes: list[str] = []
    assert encode_tokens(corpus, out, tiny_model_dir, codec="int8", window=32, overlap=8, shard_docs=2,
                         on_note=notes.append) == 2  # fmt: skip
    assert notes and "embedded again" in notes[0]
    side = TokenSide.open(out)
    assert side.doc_ids == ["d0", "d1", "d4", "d2", "d3"]  # the re-embedded shard comes last
    assert read_codec(out) is not None and read_codec(out).spec == "int8"  # type: ignore[union-attr]


def test_token_side_maxsim_is_sentence_transformers_maxsim_on_the_decoded_tokens(
    tiny_model, tiny_model_dir: Path, tmp_path: Path
) -> None:
    corpus, out = _corpus(tmp_path, TEXTS), tmp_path / "tokens"
    encode_tokens(corpus, out, tiny_model_dir, codec="pca16-int8", window=32, overlap=8, shard_docs=2)
    side = TokenSide.open(out)
    assert side.bytes_per_token == 16 and side.codes.dtype == np.int8
    query = encode_token_vectors(tiny_model, ["who met to discuss the budget?"], role="query", overlap=8)[0].vectors
    projected = side.codec.project(query)
    reference = maxsim_exact(projected, [side.vectors(d) for d in range(5)])
    np.testing.assert_allclose(side.scores(query), reference, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(side.scores(query, [3, 1]), reference[[3, 1]], rtol=1e-5, atol=1e-5)
    truth = encode_token_vectors(tiny_model, TEXTS, window=32, overlap=8)
    assert sum(len(t.vectors) for t in truth) == len(side.codes)
    np.testing.assert_array_equal(side.spans(0), truth[0].offsets)  # d0's spans, read back from its shard
    start, end, _ = side.passage(query, 1, tokens=4)
    assert TEXTS[1][start:end] in TEXTS[1] and end - start > 0


@pytest.mark.parametrize("spec", ["pca16-int4", "bin", "pca24-bin", "fp32"])
def test_token_side_other_codecs_score_as_the_reference(
    spec: str, tiny_model, tiny_model_dir: Path, tmp_path: Path
) -> None:
    corpus, out = _corpus(tmp_path, TEXTS), tmp_path / "tokens"
    encode_tokens(corpus, out, tiny_model_dir, codec=spec, window=32, overlap=8, shard_docs=3)
    side = TokenSide.open(out)
    query = encode_token_vectors(tiny_model, ["a banana remote control"], role="query", overlap=8)[0].vectors
    reference = maxsim_exact(side.codec.project(query), [side.vectors(d) for d in range(5)])
    np.testing.assert_allclose(side.scores(query), reference, rtol=1e-5, atol=1e-5)


def test_token_side_scores_only_the_tokens_inside_given_spans(tiny_model, tiny_model_dir: Path, tmp_path: Path) -> None:
    """`rows_within` keeps the tokens that start inside the character spans (overlapping spans merged), and
    `scores_many` over those rows is `maxsim` over exactly those tokens; the whole text's span is every token."""
    corpus, out = _corpus(tmp_path, TEXTS), tmp_path / "tokens"
    encode_tokens(corpus, out, tiny_model_dir, codec="bin", window=32, overlap=8, shard_docs=2)
    side = TokenSide.open(out)
    query = encode_token_vectors(tiny_model, ["the budget and the remote"], role="query", overlap=8)[0].vectors
    spans = side.spans(0)
    assert side.rows_within(0, [(0, len(TEXTS[0]))]) == [(0, len(spans))]
    cut = [(100, 300), (250, 400), (900, 1000)]  # the first two overlap: one range
    rows = side.rows_within(0, cut)
    inside = np.flatnonzero([any(a <= s < b for a, b in cut) for s in spans[:, 0]])
    assert [r for a, b in rows for r in range(a, b)] == inside.tolist() and len(rows) == 2
    third = side.rows_within(2, [(10, 200)])
    assert third[0][0] >= side.offsets[2] and third[-1][1] <= side.offsets[3]
    found = side.scores_many([query], [0, 2], [rows, third])[0]
    wanted = [side.codec.decode(side.codes[np.concatenate([np.arange(a, b) for a, b in r])]) for r in (rows, third)]
    np.testing.assert_allclose(found, maxsim_exact(side.codec.project(query), wanted), rtol=1e-5, atol=1e-5)
    whole = [[(int(side.offsets[d]), int(side.offsets[d + 1]))] for d in (0, 2)]
    np.testing.assert_allclose(side.scores_many([query], [0, 2], whole)[0], side.scores(query, [0, 2]), rtol=1e-6)


def test_window_tokens_are_each_windows_rows_within_read_once_a_document(
    indexed_with_tokens, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`TokenStage.window_tokens`: a window's token rows are `ranges_within` its span; a document's windows are
    looked up once (the spans read once a document), then kept."""
    index, tokens = indexed_with_tokens
    side = TokenSide.open(tokens)
    stage = TokenStage.bound(side, index.doc_ids, lambda texts: [])
    offsets = np.asarray(index.store.offsets)
    read: list[int] = []

    def spans(doc: int) -> np.ndarray:
        read.append(doc)
        return index.lexical.passages(np.arange(offsets[doc], offsets[doc + 1]))

    rows = np.asarray([int(offsets[2]) + 1, int(offsets[0]), int(offsets[2])], dtype=np.int64)
    found = stage.window_tokens(rows, offsets, spans)
    again = stage.window_tokens(rows[::-1].copy(), offsets, spans)
    assert sorted(read) == [0, 2]  # each document once, the second call from what was kept
    np.testing.assert_array_equal(again, found[::-1])
    for row, (start, end) in zip(rows.tolist(), found.tolist(), strict=True):
        doc = int(np.searchsorted(offsets, row, side="right")) - 1
        span = index.lexical.passage(row)
        assert (start, end) == tuple(side.ranges_within(side.numbers[index.doc_ids[doc]], [span])[0])
        assert start < end  # every window holds tokens


def test_token_side_refuses_a_window_folder(tiny_model_dir: Path, tmp_path: Path) -> None:
    import lengthwise as lw

    corpus = _corpus(tmp_path, TEXTS)
    lw.encode(corpus, tmp_path / "windows", str(tiny_model_dir))
    with pytest.raises(SettingError, match="token folder"):
        TokenSide.open(tmp_path / "windows")


@pytest.fixture(scope="module")
def indexed_with_tokens(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    """The haystack indexed (hybrid, exact engine) and its tokens encoded (one bit a dimension)."""
    import lengthwise as lw
    from tests.search.conftest import encode_windows, haystack_rows

    folder = tmp_path_factory.mktemp("tokens-index")
    encoded = encode_windows(folder, haystack_rows(), tiny_model_dir)
    index = lw.LongIndex.build(encoded, folder / "idx", quantize="none", engine="faiss")
    encode_tokens(folder / "corpus.jsonl", folder / "tokens", tiny_model_dir, window=32, overlap=8, shard_docs=5)
    return index, folder / "tokens"


QUERIES = ["the committee and the budget", "a remote control for the television", "who signed the contract"]


def test_hybrid_with_all_weight_on_tokens_is_the_exact_token_maxsim_scan(indexed_with_tokens, tiny_model) -> None:
    index, tokens = indexed_with_tokens
    index.use_tokens(tokens, weight=1.0, depth=len(index.doc_ids), around=0)  # every token
    try:
        found = index.search(QUERIES, k=5, mode="hybrid")
    finally:
        index.use_tokens(None)
    side = TokenSide.open(tokens)
    assert side.codec.spec == "bin" and side.bytes_per_token == 4  # the tiny BERT's 32 dimensions, one bit each
    for query, hits in zip(QUERIES, found, strict=True):
        vectors = encode_token_vectors(tiny_model, [query], role="query", window=32, overlap=8)[0].vectors
        exact = maxsim_exact(side.codec.project(vectors), [side.vectors(d) for d in range(len(side.doc_ids))])
        order = np.argsort(-exact, kind="stable")[:5]
        assert [hit.id for hit in hits] == [side.doc_ids[d] for d in order]
        np.testing.assert_allclose([hit.tokens for hit in hits], exact[order], rtol=1e-5)


def test_the_stage_holds_on_duplicated_text(tiny_model_dir: Path, tiny_model, tmp_path: Path) -> None:
    """A corpus with a document copied under another id and one that says its text twice: the copies score the same
    tokens; every token and around the best window (ties: the earlier window) score as the exact scans."""
    import torch

    import lengthwise as lw
    from tests.search.conftest import encode_windows, haystack_rows

    rows = haystack_rows(6)
    rows += [
        {"_id": "copy0", "text": rows[0]["text"]},
        {"_id": "twice1", "text": f"{rows[1]['text']} {rows[1]['text']}"},
    ]
    encoded = encode_windows(tmp_path, rows, tiny_model_dir)
    index = lw.LongIndex.build(encoded, tmp_path / "idx", quantize="none", engine="faiss")
    encode_tokens(tmp_path / "corpus.jsonl", tmp_path / "tokens", tiny_model_dir, window=32, overlap=8, shard_docs=3)
    side, every = TokenSide.open(tmp_path / "tokens"), len(rows)
    found = {}
    for around in (0, 1):
        index.use_tokens(tmp_path / "tokens", weight=1.0, depth=every, around=around)
        found[around] = index.search(QUERIES, k=every, mode="hybrid")
    index.use_tokens(None)
    offsets = index.store.offsets
    for query, whole, near in zip(QUERIES, found[0], found[1], strict=True):
        vectors = side.codec.project(encode_token_vectors(tiny_model, [query], role="query", overlap=8)[0].vectors)
        exact = maxsim_exact(vectors, [side.vectors(d) for d in range(every)])
        scores = {hit.id: hit.tokens for hit in whole}
        assert scores["copy0"] == scores[rows[0]["_id"]]  # the same tokens: the same score, bit for bit
        np.testing.assert_allclose([scores[i] for i in side.doc_ids], exact, rtol=1e-5)
        unit = torch.nn.functional.normalize(torch.as_tensor(np.asarray(index.embed_queries([query]))[0]), dim=-1)
        for hit in near:
            doc = index.doc_ids.index(hit.id)
            cosines = np.asarray(index.vectors[offsets[doc] : offsets[doc + 1]]) @ unit.numpy()
            start, end = index.lexical.passage(int(offsets[doc]) + int(np.argmax(cosines)))  # the earliest best
            row = side.numbers[hit.id]
            inside = [t for t, (a, _) in enumerate(side.spans(row)) if start <= a < end]
            assert hit.tokens == pytest.approx(maxsim_exact(vectors, [side.vectors(row)[inside]])[0], rel=1e-5)


def test_a_rescored_hit_with_passages_says_where_its_tokens_matched(indexed_with_tokens, tiny_model) -> None:
    """With the token stage and passages asked, a hit's `matched` is `TokenSide.passage` of its document (the span
    of `TOKEN_PASSAGE` tokens where the query's best-matched tokens gather), its text and the window it starts in;
    without passages, or without the stage, there is none."""
    from lengthwise.search.tokens import TOKEN_PASSAGE

    index, tokens = indexed_with_tokens
    side = TokenSide.open(tokens)
    plain = index.search(QUERIES, k=3, mode="hybrid", passages=1)
    index.use_tokens(tokens, weight=0.5, around=2)
    try:
        found = index.search(QUERIES, k=3, mode="hybrid", passages=1)
        bare = index.search(QUERIES, k=3, mode="hybrid")
    finally:
        index.use_tokens(None)
    assert all(hit.matched is None for hits in [*plain, *bare] for hit in hits)
    offsets = index.store.offsets
    for query, hits in zip(QUERIES, found, strict=True):
        vectors = encode_token_vectors(tiny_model, [query], role="query", overlap=8)[0].vectors
        for hit in hits:
            assert hit.matched is not None and hit.to_dict()["matched"]["text"] == hit.matched.text
            start, end, score = side.passage(vectors, side.numbers[hit.id], tokens=TOKEN_PASSAGE)
            doc = index.doc_ids.index(hit.id)
            text = index.lexical.text(doc)
            assert (hit.matched.start, hit.matched.end, hit.matched.text) == (start, end, text[start:end])
            assert hit.matched.score == pytest.approx(score)
            first, _ = index.lexical.passage(int(offsets[doc]) + hit.matched.window)
            assert first <= start and (
                hit.matched.window + 1 == offsets[doc + 1] - offsets[doc]
                or index.lexical.passage(int(offsets[doc]) + hit.matched.window + 1)[0] > start
            )


def test_a_search_keeping_more_than_the_depth_ranks_the_rest_below_in_the_hybrids_order(indexed_with_tokens) -> None:
    """k above `--token-depth`: the first `depth` hits are the ones a search of `depth` gives (the stage's ranking
    does not depend on k, so an evaluation keeping 100 scores what a server returning 10 does); the hybrid's next
    documents follow in its order, below every rescored one, their token score not read (None)."""
    index, tokens = indexed_with_tokens
    depth, k = 3, 7
    plain = index.search(QUERIES, k=k, mode="hybrid")
    index.use_tokens(tokens, weight=0.5, depth=depth)
    try:
        short = index.search(QUERIES, k=depth, mode="hybrid")
        long = index.search(QUERIES, k=k, mode="hybrid")
    finally:
        index.use_tokens(None)
    for hybrid, first, hits in zip(plain, short, long, strict=True):
        assert len(hits) == k
        assert [(h.id, h.score, h.tokens) for h in hits[:depth]] == [(h.id, h.score, h.tokens) for h in first]
        assert {h.id for h in first} == {h.id for h in hybrid[:depth]}  # the hybrid's best `depth`, reordered
        assert [h.id for h in hits[depth:]] == [h.id for h in hybrid[depth:]]
        assert all(h.tokens is not None for h in first) and all(h.tokens is None for h in hits[depth:])
        scores = [h.score for h in hits]
        assert scores == sorted(scores, reverse=True)
        assert [(h.dense, h.lexical) for h in hits[depth:]] == [(h.dense, h.lexical) for h in hybrid[depth:]]


def test_hybrid_with_no_weight_on_tokens_keeps_the_hybrid_ranking(indexed_with_tokens) -> None:
    index, tokens = indexed_with_tokens
    plain = index.search(QUERIES, k=5, mode="hybrid")
    index.use_tokens(tokens, weight=0.0)
    try:
        rescored = index.search(QUERIES, k=5, mode="hybrid")
        dense = index.search(QUERIES, k=5, mode="dense")
    finally:
        index.use_tokens(None)
    assert [[h.id for h in hits] for hits in rescored] == [[h.id for h in hits] for hits in plain]
    assert all(h.tokens is not None for hits in rescored for h in hits)
    assert all(h.tokens is None for hits in dense for h in hits)  # the stage rescores hybrid searches only
    assert [h.dense for h in rescored[0]] == [h.dense for h in plain[0]]


def test_the_stage_around_the_best_windows_reads_only_their_tokens(indexed_with_tokens, tiny_model) -> None:
    """`around=n`: a document's token score is MaxSim over the tokens inside its n best windows by the dense cosine
    (checked by hand for n = 1); with every window, the same hits and scores as every token."""
    import torch

    index, tokens = indexed_with_tokens
    side, every = TokenSide.open(tokens), len(index.doc_ids)
    index.use_tokens(tokens, weight=1.0, depth=every, around=0)
    try:
        whole = index.search(QUERIES, k=5, mode="hybrid")
        index.use_tokens(tokens, weight=1.0, depth=every, around=10_000)
        wide = index.search(QUERIES, k=5, mode="hybrid")
        index.use_tokens(tokens, weight=1.0, depth=every, around=1)
        assert index.token_stage is not None and index.token_stage["around"] == 1
        one = index.search(QUERIES, k=5, mode="hybrid")
    finally:
        index.use_tokens(None)
    assert [[(h.id, h.tokens) for h in hits] for hits in wide] == [[(h.id, h.tokens) for h in hits] for hits in whole]
    offsets = index.store.offsets
    for query, hits in zip(QUERIES, one, strict=True):
        unit = torch.nn.functional.normalize(torch.as_tensor(np.asarray(index.embed_queries([query]))[0]), dim=-1)
        vectors = encode_token_vectors(tiny_model, [query], role="query", window=32, overlap=8)[0].vectors
        for hit in hits:
            doc = index.doc_ids.index(hit.id)
            windows = np.asarray(index.vectors[offsets[doc] : offsets[doc + 1]]) @ unit.numpy()
            start, end = index.lexical.passage(int(offsets[doc]) + int(np.argmax(windows)))
            row = side.numbers[hit.id]
            inside = [t for t, (a, _) in enumerate(side.spans(row)) if start <= a < end]
            exact = maxsim_exact(side.codec.project(vectors), [side.vectors(row)[inside]])[0]
            assert hit.tokens == pytest.approx(exact, rel=1e-5)
    with pytest.raises(SettingError, match=r"token_around=2.*give the token folder"):
        index.use_tokens(None, around=2)


def test_use_tokens_refuses_a_folder_whose_model_changed_or_of_another_corpus(
    indexed_with_tokens, tiny_model_dir: Path, tmp_path: Path, minilm_path: str
) -> None:
    index, tokens = indexed_with_tokens
    corpus = _corpus(tmp_path, TEXTS)
    encode_tokens(corpus, tmp_path / "minilm", minilm_path, shard_docs=5)
    record = json.loads((tmp_path / "minilm" / "model.json").read_text())
    (tmp_path / "minilm" / "model.json").write_text(json.dumps({**record, "weights_sha256_16": "0" * 16}))
    with pytest.raises(SettingError, match="which loads with"):
        index.use_tokens(tmp_path / "minilm")
    encode_tokens(corpus, tmp_path / "other", tiny_model_dir, window=32, overlap=8)
    with pytest.raises(SettingError, match="holds no tokens for 24 of the index's documents"):
        index.use_tokens(tmp_path / "other")
    with pytest.raises(SettingError, match=r"token_weight=1\.5"):
        index.use_tokens(tokens, weight=1.5)
    assert index.searcher.tokens is None  # nothing half-set by a refusal


def test_cli_encode_tokens_then_search_with_them(indexed_with_tokens, tiny_model_dir: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from lengthwise.cli import app

    index, tokens = indexed_with_tokens
    corpus = tokens.parent / "corpus.jsonl"
    out = tmp_path / "tokens"
    args = ["encode-tokens", "-d", str(corpus), "-o", str(out), "-m", str(tiny_model_dir), "--window", "32",
            "--overlap", "8", "--shard-docs", "5"]  # fmt: skip
    run = CliRunner().invoke(app, args)
    assert run.exit_code == 0, run.output
    assert "encoded the tokens of 24 new documents" in run.output
    assert re.search(r"encode done: 24/24 documents .*[\d,]+ tokens", run.output), (
        run.output
    )  # the progress counts tokens
    assert {p.name: p.read_bytes() for p in out.glob("w0-*")} == {p.name: p.read_bytes() for p in tokens.glob("w0-*")}
    run = CliRunner().invoke(app, ["search", str(index.folder), "-q", QUERIES[0], "--json", "--tokens", str(out),
                                   "--token-weight", "0.5", "--top-k", "3"])  # fmt: skip
    assert run.exit_code == 0, run.output
    hits = json.loads(run.output.strip().splitlines()[-1])["hits"]
    assert len(hits) == 3 and all("tokens" in hit for hit in hits)
    index.use_tokens(out, weight=0.5, around=1)
    try:
        library = index.search(QUERIES[0], k=3, mode="hybrid")[0]
    finally:
        index.use_tokens(None)
    run = CliRunner().invoke(app, ["search", str(index.folder), "-q", QUERIES[0], "--json", "--tokens", str(out),
                                   "--token-weight", "0.5", "--token-around", "1", "--top-k", "3"])  # fmt: skip
    assert run.exit_code == 0, run.output
    near = json.loads(run.output.strip().splitlines()[-1])["hits"]
    assert [(h["id"], h["tokens"]) for h in near] == [(h.id, pytest.approx(h.tokens, abs=1e-6)) for h in library]
    bad = CliRunner().invoke(app, ["search", str(index.folder), "-q", "x", "--tokens", str(tmp_path)])
    assert bad.exit_code != 0 and "--tokens" in bad.output and "encode" in bad.output
    alone = CliRunner().invoke(app, ["search", str(index.folder), "-q", "x", "--token-weight", "0.5"])
    assert alone.exit_code != 0 and "--token-weight" in alone.output and "--tokens" in alone.output
    index.use_tokens(out, depth=3)
    try:
        library = index.search(QUERIES[0], k=2, mode="hybrid")[0]
    finally:
        index.use_tokens(None)
    hybrid = index.search(QUERIES[0], k=3, mode="hybrid")[0]
    run = CliRunner().invoke(app, ["search", str(index.folder), "-q", QUERIES[0], "--json", "--tokens", str(out),
                                   "--token-depth", "3", "--top-k", "2"])  # fmt: skip
    assert run.exit_code == 0, run.output
    shallow = json.loads(run.output.strip().splitlines()[-1])["hits"]
    assert [(h["id"], h["tokens"]) for h in shallow] == [(h.id, pytest.approx(h.tokens, abs=1e-6)) for h in library]
    assert {h["id"] for h in shallow} <= {h.id for h in hybrid}  # from the hybrid's best 3 only


def _beir_of(corpus: Path, folder: Path) -> Path:
    """The indexed corpus as a BEIR folder: query i (words 2 to 8 of document 2i) asks for document 2i."""
    rows = [json.loads(line) for line in corpus.read_text().splitlines()]
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text(corpus.read_text())
    queries = [{"_id": f"q{i}", "text": " ".join(r["text"].split()[2:8])} for i, r in enumerate(rows[::2])]
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"q{i}\t{r['_id']}\t1\n" for i, r in enumerate(rows[::2])))  # fmt: skip
    return folder


def test_eval_through_the_index_with_tokens_matches_its_exact_reference(
    indexed_with_tokens, tiny_model, tmp_path: Path
) -> None:
    """`eval --index --tokens`: the exact reference is the exact hybrid scan's best documents rescored by the same
    token stage (all the weight on tokens, every document rescored: the exact token MaxSim scan), and the record says
    which tokens, weight and depth ranked it; the stage refused outside a hybrid search through an index."""
    from typer.testing import CliRunner

    from lengthwise.cli import app
    from lengthwise.core.fusion import Mode
    from lengthwise.evaluation.config import EvalConfig
    from lengthwise.pipelines import evaluate, evaluate_through_index
    from lengthwise.search.exact import ranked_with_exact

    index, tokens = indexed_with_tokens
    index.use_tokens(tokens, weight=1.0, depth=len(index.doc_ids), around=0)  # every token
    try:
        exact = ranked_with_exact(index.searcher, QUERIES, 5, Mode.HYBRID)["exact"]
    finally:
        index.use_tokens(None)
    side = TokenSide.open(tokens)
    for query, row in zip(QUERIES, exact, strict=True):
        vectors = encode_token_vectors(tiny_model, [query], role="query", window=32, overlap=8)[0].vectors
        scan = maxsim_exact(side.codec.project(vectors), [side.vectors(d) for d in range(len(side.doc_ids))])
        assert [doc for doc, _ in row] == [side.doc_ids[d] for d in np.argsort(-scan, kind="stable")[:5]]

    beir = _beir_of(tokens.parent / "corpus.jsonl", tmp_path / "beir")
    config = EvalConfig(task="retrieval", data=beir, split="test")
    record = evaluate_through_index(config, index.folder, mode="hybrid", tokens=TokenChoice(tokens, weight=0.5))
    assert record["index"]["tokens"] == {
        "folder": str(tokens),
        "codec": "bin",
        "model": side.settings["model"],
        "weight": 0.5,
        "depth": TOKEN_DEPTH,
        "around": 8,
    }  # fmt: skip  (the default: 8)
    assert record["scores"] == record["exact_scores"] and record["index"]["overlap"] == 1.0
    plain = evaluate_through_index(config, index.folder, mode="hybrid")
    assert "tokens" not in plain["index"]
    run = CliRunner().invoke(app, ["eval", "-t", "retrieval", "-d", str(beir), "--split", "test", "--index",
                                   str(index.folder), "--tokens", str(tokens), "--token-weight", "0.5", "-o",
                                   str(tmp_path / "ev")])  # fmt: skip
    assert run.exit_code == 0, run.output
    saved = json.loads((tmp_path / "ev" / "results.json").read_text())
    assert saved["scores"] == record["scores"] and saved["index"]["tokens"]["weight"] == 0.5
    with pytest.raises(SettingError, match="rescores a hybrid search, not a dense one"):
        evaluate_through_index(config, index.folder, mode="dense", tokens=tokens)
    with pytest.raises(SettingError, match=r"tokens=.*ranks through an index"):
        evaluate(config, tokens=tokens)


@pytest.fixture(scope="module")
def tiny_colbert_dir(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from lengthwise.testing import tiny_colbert

    folder = tmp_path_factory.mktemp("tiny-colbert")
    tiny_colbert(tiny_model_dir.parent / "hf", folder / "model")
    return folder / "model"


def test_a_colbert_models_tokens_are_its_own_document_vectors(tiny_colbert_dir: Path, tmp_path: Path) -> None:
    from lengthwise.core.models import load_token_model

    model = load_token_model(tiny_colbert_dir)
    short = "The committee met on Tuesday to discuss the budget."
    corpus = _corpus(tmp_path, [short, PROSE[:1500]])
    encode_tokens(corpus, tmp_path / "tokens", tiny_colbert_dir, codec="fp32", window=64, overlap=8)
    side = TokenSide.open(tmp_path / "tokens")
    assert side.settings["colbert"] is True and side.codec.dims == 16  # the projection's width, found on its own
    own = model.encode_document([short])[0].numpy()  # [CLS], the document prefix's pieces, the text, [SEP]
    prefix = len(model.tokenizer("[unused1] ", add_special_tokens=False)["input_ids"])
    np.testing.assert_allclose(side.vectors(0), own[1 + prefix : -1], atol=1e-5)


def test_a_colbert_skiplist_leaves_tokens_out_as_encode_document(tiny_colbert_dir: Path, tmp_path: Path) -> None:
    """A ColBERT whose `MultiVectorMask` skips punctuation in documents (PyLate's and Stanford's checkpoints load
    so): the token folder holds the document vectors `encode_document` gives, the skipped tokens left out (before,
    every content token was kept: the punctuation matched queries the model never scores against)."""
    import string

    from sentence_transformers.multi_vector_encoder.modules import MultiVectorMask

    from lengthwise.core.models import load_token_model

    model = load_token_model(tiny_colbert_dir)
    mask = next(module for module in model if isinstance(module, MultiVectorMask))
    mask.skiplist_words = list(string.punctuation)
    mask.resolve_with_tokenizer(model.tokenizer)
    model.save(str(tmp_path / "skipping"))
    model = load_token_model(tmp_path / "skipping")
    short = "The committee met on Tuesday, then again; to discuss the budget."
    corpus = _corpus(tmp_path, [short, PROSE[:600]])
    encode_tokens(corpus, tmp_path / "tokens", tmp_path / "skipping", codec="fp32", window=64, overlap=8)
    side = TokenSide.open(tmp_path / "tokens")
    tokenizer = model.tokenizer
    prefix = tokenizer("[unused1] ", add_special_tokens=False)["input_ids"]
    text = tokenizer(short, add_special_tokens=False)["input_ids"]
    full = np.asarray([tokenizer.cls_token_id, *prefix, *text, tokenizer.sep_token_id])
    skipped = [tokenizer.convert_tokens_to_ids(p) for p in string.punctuation]
    kept = np.flatnonzero(~np.isin(full, skipped))  # the positions `encode_document` keeps
    own = model.encode_document([short])[0].numpy()
    assert len(own) == len(kept) and len(kept) < len(full)  # its mask left tokens out
    content = [n for n, at in enumerate(kept.tolist()) if 1 + len(prefix) <= at < len(full) - 1]
    np.testing.assert_allclose(side.vectors(0), own[content], atol=1e-5)
    starts = side.spans(0)[:, 0]
    assert not any(short[start] in string.punctuation for start in starts.tolist())


def test_hybrid_rescored_by_a_colbert_model_is_its_exact_maxsim_scan(indexed_with_tokens, tiny_colbert_dir: Path,
                                                                     tmp_path: Path) -> None:  # fmt: skip
    from lengthwise.core.models import load_token_model

    index, tokens = indexed_with_tokens
    encode_tokens(tokens.parent / "corpus.jsonl", tmp_path / "colbert", tiny_colbert_dir, codec="fp32", window=48,
                  overlap=8)  # fmt: skip
    index.use_tokens(tmp_path / "colbert", weight=1.0, depth=len(index.doc_ids), around=0)  # every token
    try:
        found = index.search(QUERIES, k=4, mode="hybrid")
    finally:
        index.use_tokens(None)
    model, side = load_token_model(tiny_colbert_dir), TokenSide.open(tmp_path / "colbert")
    queries = model.encode_query(QUERIES, convert_to_numpy=True)  # its query prefix and masks
    for query, hits in zip(queries, found, strict=True):
        exact = maxsim_exact(query, [side.vectors(d) for d in range(len(side.doc_ids))])
        order = np.argsort(-exact, kind="stable")[:4]
        assert [hit.id for hit in hits] == [side.doc_ids[d] for d in order]
        np.testing.assert_allclose([hit.tokens for hit in hits], exact[order], rtol=1e-5)
        # sentence-transformers' own MaxSim scores the same query against the same token vectors alike
        own = model.similarity([query], [side.vectors(d) for d in order]).numpy()[0]
        np.testing.assert_allclose(own, exact[order], rtol=1e-5)


def test_scores_of_several_queries_at_once_are_each_querys_own(tiny_model, tiny_model_dir: Path, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    import lengthwise.search.tokens as tokens_module

    corpus, out = _corpus(tmp_path, TEXTS), tmp_path / "tokens"
    encode_tokens(corpus, out, tiny_model_dir, window=32, overlap=8, shard_docs=2)
    side = TokenSide.open(out)
    queries = [t.vectors for t in encode_token_vectors(tiny_model, QUERIES, role="query", overlap=8)]
    monkeypatch.setattr(tokens_module, "TOKEN_BLOCK", 7)  # several blocks, documents cut into pieces
    together = side.scores_many(queries, [4, 0, 2])
    for query, row in zip(queries, together, strict=True):
        np.testing.assert_array_equal(row, side.scores(query, [4, 0, 2]))
        reference = maxsim_exact(side.codec.project(query), [side.vectors(d) for d in (4, 0, 2)])
        np.testing.assert_allclose(row, reference, rtol=1e-5)


def test_a_query_is_read_once_for_its_dense_vector_and_its_tokens(indexed_with_tokens) -> None:
    """With the token stage on the index's own model, a text query's dense vector and token vectors come from one
    forward pass (`lengthwise.core.forwards`), and the hits are those of the two read apart."""
    from lengthwise.core.forwards import shared_forwards

    index, tokens = indexed_with_tokens
    index.use_tokens(tokens, weight=0.5)
    try:
        apart = index.search(QUERIES[:1], k=5, mode="hybrid", vectors=index.embed_queries(QUERIES[:1]))
        model, calls = index.searcher.queries.loaded(), []
        hook = model.register_forward_hook(lambda *_: calls.append(1))
        try:
            together = index.search(QUERIES[:1], k=5, mode="hybrid")
            assert len(calls) == 1  # two reads of the query: one forward (two before)
            index.embed_queries(QUERIES)
            dense = len(calls) - 1
            index.searcher.tokens.encode(QUERIES)
            assert dense >= 1 and len(calls) == 1 + 2 * dense  # outside the block every call runs the model
            with shared_forwards():
                index.embed_queries(QUERIES)
                index.searcher.tokens.encode(QUERIES)  # the same batches: read from the dense passes
                assert len(calls) == 1 + 3 * dense
                index.searcher.tokens.encode(QUERIES[:2])  # other inputs: a pass of their own
                assert len(calls) > 1 + 3 * dense
        finally:
            hook.remove()
        with shared_forwards():
            shared = index.embed_queries(QUERIES), index.searcher.tokens.encode(QUERIES)
    finally:
        index.use_tokens(None)
    assert [h.to_dict() for h in together[0]] == [h.to_dict() for h in apart[0]]
    np.testing.assert_array_equal(shared[0], index.embed_queries(QUERIES))
    for one, alone in zip(shared[1], [index.searcher.queries.tokens([q], {"window": 32, "overlap": 8})[0]
                                      for q in QUERIES], strict=True):  # fmt: skip
        np.testing.assert_array_equal(one, alone)


def test_the_best_windows_kept_from_the_whole_scan_are_those_read_again(
    indexed_with_tokens, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A few documents: the whole scan keeps each query's window cosines and the stage reads a document's best
    windows there; read again from the vectors (no whole scan), or with the batch in parts of one query, the hits
    are the same."""
    import lengthwise.search.searcher as searcher_module
    from lengthwise.search.local.windows import LocalWindows

    index, tokens = indexed_with_tokens
    vectors = index.embed_queries(QUERIES)
    index.use_tokens(tokens, weight=1.0, depth=len(index.doc_ids), around=2)
    try:
        kept = index.search(QUERIES, k=5, mode="hybrid", vectors=vectors)
        monkeypatch.setattr(searcher_module, "KEPT_COSINES", int(index.store.offsets[-1]))  # one query a part
        parts = index.search(QUERIES, k=5, mode="hybrid", vectors=vectors)
        monkeypatch.setattr(LocalWindows, "whole_scans", lambda self, units, *args, **kwargs: [None] * len(units))
        again = index.search(QUERIES, k=5, mode="hybrid", vectors=vectors)
    finally:
        index.use_tokens(None)
    assert [[h.to_dict() for h in hits] for hits in parts] == [[h.to_dict() for h in hits] for hits in kept]
    assert [[h.id for h in hits] for hits in again] == [[h.id for h in hits] for hits in kept]
    for hits, others in zip(again, kept, strict=True):
        np.testing.assert_allclose([h.tokens for h in hits], [h.tokens for h in others], rtol=1e-6)


def test_the_best_windows_read_in_one_call_are_each_documents_own(indexed_with_tokens) -> None:
    """Where no whole scan kept the cosines (an index of more documents than the stage rescores), a rescored
    document's best windows come from one read of every chosen document's windows (`Searcher.best_rows_read`): the
    set each document's own vectors give by a stable sort of their cosines, for documents in any order, counts
    above a document's windows included; places ascending, each document's rows ascending."""
    index, _ = indexed_with_tokens
    searcher, offsets = index.searcher, index.store.offsets
    query = torch.nn.functional.normalize(torch.as_tensor(index.embed_queries(QUERIES[:1])[0]), dim=-1)
    rng = np.random.default_rng(3)
    for count in (1, 2, 3, 50):
        chosen = rng.permutation(len(index.doc_ids))[: int(rng.integers(1, len(index.doc_ids) + 1))].astype(np.int64)
        rows, places = searcher.best_rows_read(chosen, query, count)
        wanted = []
        for place, doc in enumerate(chosen.tolist()):
            first, last = int(offsets[doc]), int(offsets[doc + 1])
            own = (torch.as_tensor(index.store.window_vectors(first, last)) @ query).numpy()
            wanted += [(first + int(w), place) for w in np.sort(np.argsort(-own, kind="stable")[:count])]
        assert list(zip(rows.tolist(), places.tolist(), strict=True)) == wanted


def test_a_token_choice_applies_what_was_asked_and_nothing_else(indexed_with_tokens) -> None:
    index, tokens = indexed_with_tokens
    assert TokenChoice.of(tokens) == TokenChoice(tokens) and TokenChoice.of(None) == TokenChoice()
    assert not TokenChoice().asked and TokenChoice().given() == {}
    assert TokenChoice(tokens, around=0).given() == {"tokens": tokens, "token_around": 0}
    TokenChoice(tokens, weight=0.3, around=2).apply(index)
    try:
        assert index.token_stage is not None and (index.token_stage["weight"], index.token_stage["around"]) == (0.3, 2)
        TokenChoice().apply(index)  # nothing asked: the stage stays
        assert index.token_stage is not None and index.token_stage["weight"] == 0.3
    finally:
        index.use_tokens(None)
    with pytest.raises(SettingError, match=r"token_weight=0\.3.*give the token folder"):
        TokenChoice(weight=0.3).apply(index)
    assert TokenChoice(tokens, depth=3).given() == {"tokens": tokens, "token_depth": 3}
    TokenChoice(tokens, depth=3).apply(index)
    try:
        assert index.token_stage is not None and index.token_stage["depth"] == 3
    finally:
        index.use_tokens(None)
    with pytest.raises(SettingError, match=r"token_depth=3.*give the token folder"):
        TokenChoice(depth=3).apply(index)


def test_a_long_query_beside_short_ones_costs_the_token_pass_its_own_forward_only(indexed_with_tokens) -> None:
    """A query longer than the index's window is cut into windows for its dense vector and read whole for its
    tokens. Its windows were batched with the short queries of their width, so the token pass, which reads those
    short queries alone, could not reuse that forward and ran those rows again. Now, inside `shared_forwards`, the
    dense pass batches whole texts apart from the windows of longer ones: the token pass adds only the long query's
    row to what the model reads, and every vector is the same bits as outside."""
    from lengthwise.core.fusion import Mode

    index, tokens = indexed_with_tokens
    words = "the committee agreed on the budget for the new remote control and the television after a long debate"
    queries = [*QUERIES, words, words + " about the contract and who signed it"]
    tokenizer = index.searcher.queries.loaded().tokenizer
    sizes = [len(tokenizer(q, add_special_tokens=False)["input_ids"]) for q in queries]
    assert 14 < sizes[3] <= 22 < sizes[4] <= 30, sizes  # a short query as wide as the long one's 24-token windows
    index.use_tokens(tokens, weight=0.5, around=2)
    try:
        model, calls = index.searcher.queries.loaded(), []
        alone = np.asarray(index.embed_queries(queries))
        alone_tokens = index.searcher.tokens.encode(queries)
        hook = model.register_forward_hook(lambda _, args, __: calls.append(len(args[0]["input_ids"])))  # rows
        try:
            index.embed_queries(queries)
            dense = sum(calls)
            index.searcher.tokens.encode(queries[-1:])
            long_only = sum(calls) - dense
            vectors, token_vectors = index.searcher.embed_for_search(queries, Mode.HYBRID)
            both = sum(calls) - dense - long_only
        finally:
            hook.remove()
    finally:
        index.use_tokens(None)
    assert long_only == 1 and both == dense + long_only  # the rows through the model
    np.testing.assert_array_equal(vectors, alone)
    for found, expected in zip(token_vectors, alone_tokens, strict=True):
        np.testing.assert_array_equal(found, expected)


def test_the_service_reads_a_batch_once_for_its_vectors_and_tokens(indexed_with_tokens) -> None:
    """The service embeds a batch on the model's thread before searching it: with the token stage its token vectors
    come from that pass too (`embed_for_search`), and the hits are the library's."""
    from lengthwise.service.app import SEARCH_FIELDS
    from lengthwise.service.app import Searcher as ServiceSearcher

    index, tokens = indexed_with_tokens
    index.use_tokens(tokens, weight=0.5, around=2)
    try:
        expected = index.search(QUERIES, k=5, mode="hybrid")
        model, calls = index.searcher.queries.loaded(), []
        index.embed_queries(QUERIES)
        hook = model.register_forward_hook(lambda *_: calls.append(1))
        try:
            index.embed_queries(QUERIES)
            dense = len(calls)
            service = ServiceSearcher(index)
            key = ("search", *{"top_k": 5, "mode": "hybrid", "passages": 0, "context": 0, "document": False,
                               "candidates": None, "probes": None, "depth": None}.values())  # fmt: skip
            assert len(key) == 1 + len(SEARCH_FIELDS)
            prepared = service.prepare(key, QUERIES)
            assert len(calls) == 2 * dense  # the tokens read in the same pass (before: a pass of their own)
            vectors, token_vectors = prepared
            assert len(vectors) == len(token_vectors) == len(QUERIES)
            found = service.finish(key, QUERIES, prepared)
            assert len(calls) == 2 * dense  # no pass while searching
        finally:
            hook.remove()
        lexical = service.prepare(("search", 5, "lexical", 0, 0, False, None, None, None), QUERIES)
    finally:
        index.use_tokens(None)
    assert [[hit["id"] for hit in hits] for hits in found] == [[h.id for h in hits] for hits in expected]
    assert [[hit["tokens"] for hit in hits] for hits in found] == [[round(h.tokens, 6) for h in hits]
                                                                    for hits in expected]  # fmt: skip
    assert lexical == (None, None)


def test_index_tune_with_tokens_tries_the_stage_and_records_its_weight(indexed_with_tokens, tmp_path: Path) -> None:
    """`index tune --tokens`: the best fusion rescored at each token weight, each arm's score that of a search at
    that weight; a winning weight recorded (what `use_tokens` then takes), dropped by a tuning without tokens."""
    import shutil

    import lengthwise as lw
    from lengthwise.core.fusion import TUNED_WEIGHTS, Mode
    from lengthwise.evaluation.objectives import qrels_objective
    from lengthwise.pipelines import tune_hybrid
    from lengthwise.search.tuning import TUNED_TOKEN_WEIGHTS, _arms

    index, tokens = indexed_with_tokens
    folder = tmp_path / "idx"
    shutil.copytree(index.folder, folder)  # a tuning is recorded in the index: a copy of the module's
    beir = _beir_of(tokens.parent / "corpus.jsonl", tmp_path / "beir")
    with pytest.raises(SettingError, match=r"token_weight=0\.5.*leave it out"):
        tune_hybrid(folder, beir, split="test", tokens=TokenChoice(tokens, weight=0.5))
    result = tune_hybrid(folder, beir, split="test", tokens=tokens)
    rescored = {arm: score for arm, score in result["scores"].items() if "+tokens-" in arm}
    assert len(rescored) == len(TUNED_TOKEN_WEIGHTS) and "tokens" in result
    opened = lw.LongIndex.open(folder)
    texts, ndcg = qrels_objective(beir, "test", opened.doc_ids)
    for arm, score in rescored.items():  # each arm is a search through the index at that weight
        fusion, weight = arm.split("+tokens-")
        opened.use_tokens(tokens, weight=float(weight))
        found = opened.searcher.rank(
            opened.embed_queries(texts), texts, 10, Mode.HYBRID, _arms(TUNED_WEIGHTS)[fusion][1]
        )
        assert ndcg([[(h.id, h.score) for h in hits] for hits in found]) == pytest.approx(score, abs=1e-12)
    plain = max(score for arm, score in result["scores"].items() if "+tokens-" not in arm)
    assert (result["tokens"] is not None) == (max(rescored.values()) > plain)

    rigged = iter([0.1] * len(_arms(TUNED_WEIGHTS)) + [0.2, 0.9, 0.5, 0.9, 0.1])  # rated in order: plain, tokens
    opened.use_tokens(tokens)
    chosen = opened.tune_fusion(texts, lambda _: next(rigged), record={"data": "rigged"})
    assert chosen["tokens"] == {"weight": 0.3} and chosen["mode"] == "hybrid"  # a tie: the lower weight
    reopened = lw.LongIndex.open(folder)
    reopened.use_tokens(tokens)
    assert reopened.token_stage is not None and reopened.token_stage["weight"] == 0.3
    again = tune_hybrid(folder, beir, split="test")  # without tokens: the recorded weight goes
    assert "tokens" not in again and all("+tokens-" not in arm for arm in again["scores"])
    reopened = lw.LongIndex.open(folder)
    assert reopened.lexical.settings.get("tokens") is None
    reopened.use_tokens(tokens)
    assert reopened.token_stage is not None and reopened.token_stage["weight"] == TOKEN_WEIGHT  # the default again


def test_cli_index_tune_with_tokens(indexed_with_tokens, tmp_path: Path) -> None:
    import shutil

    from typer.testing import CliRunner

    from lengthwise.cli import app

    index, tokens = indexed_with_tokens
    folder = tmp_path / "idx"
    shutil.copytree(index.folder, folder)
    beir = _beir_of(tokens.parent / "corpus.jsonl", tmp_path / "beir")
    run = CliRunner().invoke(app, ["index", "tune", str(folder), "-d", str(beir), "--split", "test", "--tokens",
                                   str(tokens), "--token-around", "2"])  # fmt: skip
    assert run.exit_code == 0, run.output
    assert "+tokens-0.4" in run.output and "chosen:" in run.output
