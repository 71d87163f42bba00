"""Token vectors through overlapping windows and their MaxSim score (`lengthwise.longdoc.token_vectors`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from sentence_transformers.util import maxsim

from lengthwise.longdoc.config import LongDocError
from lengthwise.longdoc.token_vectors import encode_token_vectors, token_maxsim

PROSE = Path(__file__).with_name("prose.txt").read_text()
HAYSTACK = Path(__file__).with_name("haystack.txt").read_text()


def _states(model, text: str) -> np.ndarray:
    """The model's own token_embeddings of `text` alone (special tokens included): (T, D)."""
    return model.encode(text, output_value="token_embeddings", convert_to_numpy=False).float().numpy()


def test_short_text_is_the_models_own_token_states(tiny_model) -> None:
    text = "The committee met on Tuesday to discuss the budget."
    [result] = encode_token_vectors(tiny_model, [text], overlap=16, normalize=False)
    states = _states(tiny_model, text)
    np.testing.assert_allclose(result.vectors, states[1:-1], rtol=0, atol=1e-6)  # [CLS] and [SEP] out
    assert result.vectors.dtype == np.float32
    pieces = [text[start:end] for start, end in result.offsets.tolist()]
    assert pieces[:3] == ["the", "committee", "met"] or pieces[:3] == ["The", "committee", "met"]


def test_long_text_keeps_each_token_once_from_its_most_central_window(tiny_model) -> None:
    window, overlap = 24, 8  # 22 content tokens a window, stride 14
    [result] = encode_token_vectors(tiny_model, [PROSE], window=window, overlap=overlap, normalize=False)
    ids = tiny_model.tokenizer(PROSE, add_special_tokens=False)["input_ids"]
    assert result.vectors.shape == (len(ids), 32)
    assert result.offsets.shape == (len(ids), 2)
    budget, stride = window - 2, window - 2 - overlap

    def state_in(start: int, position: int) -> np.ndarray:
        wrapped = [tiny_model.tokenizer.cls_token_id, *ids[start : start + budget], tiny_model.tokenizer.sep_token_id]
        features = {"input_ids": torch.tensor([wrapped]), "attention_mask": torch.ones(1, len(wrapped), dtype=int)}
        with torch.inference_mode():
            out = tiny_model(features)["token_embeddings"][0].numpy()
        return out[1 + position - start]

    # token 0: only window 0; token 20 (in windows 0 and 1: 1 from the end of window 0, 6 from the start of window 1)
    # comes from window 1; token 15 (6 from window 0's end, 1 from window 1's start) from window 0.
    for position, start in [(0, 0), (20, stride), (15, 0), (stride + budget // 2, stride)]:
        np.testing.assert_allclose(result.vectors[position], state_in(start, position), rtol=0, atol=1e-5)
    # the last window ends at the text's end: its final token is read there
    last = len(ids) - budget
    np.testing.assert_allclose(result.vectors[-1], state_in(last, len(ids) - 1), rtol=0, atol=1e-5)
    # offsets point at the token's characters
    for position in (0, 100, len(ids) - 1):
        start, end = result.offsets[position]
        piece = tiny_model.tokenizer.convert_ids_to_tokens(ids[position]).removeprefix("##")
        assert PROSE[start:end].lower() == piece


def test_token_vectors_are_byte_identical_across_runs(tiny_model) -> None:
    texts = [PROSE, "A short query.", HAYSTACK[:2000]]
    first = encode_token_vectors(tiny_model, texts, window=32, overlap=8, batch_size=3)
    second = encode_token_vectors(tiny_model, texts, window=32, overlap=8, batch_size=3)
    for a, b in zip(first, second, strict=True):
        assert a.vectors.tobytes() == b.vectors.tobytes()
        assert a.offsets.tobytes() == b.offsets.tobytes()
        np.testing.assert_allclose(np.linalg.norm(a.vectors, axis=1), 1.0, rtol=1e-5)


def test_a_querys_vectors_do_not_depend_on_its_batch(tiny_model) -> None:
    query = "who met on tuesday"
    [alone] = encode_token_vectors(tiny_model, [query], role="query", overlap=8)
    beside = encode_token_vectors(tiny_model, [PROSE[:150], query, "budget"], role="query", overlap=8)[1]
    assert alone.vectors.tobytes() == beside.vectors.tobytes()


def test_maxsim_is_sentence_transformers_maxsim(tiny_model) -> None:
    docs = encode_token_vectors(tiny_model, [PROSE, HAYSTACK[:1500], "tiny"], window=32, overlap=8)
    queries = encode_token_vectors(tiny_model, ["who met on tuesday", "budget"], role="query", overlap=0)
    q, d = [x.vectors for x in queries], [x.vectors for x in docs]
    scores = token_maxsim(q, d)
    assert scores.shape == (2, 3)
    expected = maxsim([torch.from_numpy(x) for x in q], [torch.from_numpy(x) for x in d]).numpy()
    assert scores.tobytes() == expected.tobytes()
    plain = np.array([[(a @ b.T).max(axis=1).sum() for b in d] for a in q])  # the definition, by hand
    np.testing.assert_allclose(scores, plain, rtol=1e-5)


def test_bad_settings_name_their_field(tiny_model) -> None:
    with pytest.raises(LongDocError, match="overlap"):
        encode_token_vectors(tiny_model, ["text"], window=24, overlap=22)
    with pytest.raises(LongDocError, match="#1"):
        encode_token_vectors(tiny_model, ["text", "  "], overlap=8)


def test_minilm_finds_an_answer_deep_inside_a_long_text(minilm) -> None:
    answer = "The lighthouse keeper painted the tower bright orange in 1911 after a ship ran aground."
    lines = [line for line in HAYSTACK.splitlines() if line.strip()]
    filler = [lines[(7 * i) % len(lines)] for i in range(4 * len(lines))]  # ~1,000 tokens of village prose
    relevant = " ".join([*filler[: len(filler) // 2], answer, *filler[len(filler) // 2 :]])
    distractor = PROSE + " " + " ".join(filler)  # also mentions a lighthouse, and is longer
    docs = encode_token_vectors(minilm, [relevant, distractor])
    deep = len(minilm.tokenizer(relevant[: relevant.index(answer)], add_special_tokens=False)["input_ids"])
    assert deep > 254 and len(docs[0].vectors) > 3 * 254  # the answer lies past the first window
    [query] = encode_token_vectors(minilm, ["What colour did the keeper paint the lighthouse tower?"], role="query")
    scores = token_maxsim([query.vectors], [d.vectors for d in docs])[0]
    assert scores[0] > scores[1]
    first_windows = token_maxsim([query.vectors], [d.vectors[:254] for d in docs])[0]  # the text's start alone
    assert first_windows[0] < first_windows[1]  # so the deep tokens are what ranks it first
