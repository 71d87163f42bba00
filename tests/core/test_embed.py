from __future__ import annotations

import numpy as np
import pytest

from lengthwise.core.embed import TokenView, embed_ids, embed_texts
from lengthwise.core.errors import DataFormatError, SettingError
from lengthwise.core.tokens import elongate

TEXTS = [
    "A short one.",
    "A somewhat longer sentence about the weather in the mountains this week.",
    "Tea.",
    "Embedding models compress a whole text into a single vector, which loses detail for long inputs.",
]


def test_embed_texts_matches_sentence_transformers_encode(tiny_model) -> None:
    ours = embed_texts(tiny_model, TEXTS, batch_size=3)
    reference = tiny_model.encode(TEXTS, batch_size=3, convert_to_numpy=True)
    np.testing.assert_allclose(ours, reference, atol=1e-5)


def test_embed_texts_matches_encode_on_real_model(minilm) -> None:
    ours = embed_texts(minilm, TEXTS)
    reference = minilm.encode(TEXTS, convert_to_numpy=True)
    np.testing.assert_allclose(ours, reference, atol=1e-5)


def test_padded_batches_equal_one_by_one(tiny_model) -> None:
    view = TokenView(tiny_model)
    sequences = [view.wrap(ids) for ids in view.content(TEXTS)]
    batched = embed_ids(tiny_model, sequences, batch_size=4)
    single = np.stack([embed_ids(tiny_model, [s])[0] for s in sequences])
    np.testing.assert_allclose(batched, single, atol=1e-5)


def test_model_receives_exactly_the_elongated_ids(tiny_model) -> None:
    """No decode/re-tokenize step: the transformer sees [CLS] + ids*m + [SEP] verbatim."""
    view = TokenView(tiny_model)
    ids = view.content(["hello"])[0]
    sequence = view.wrap(elongate(ids, 5, view.max_content))
    seen = []
    hook = tiny_model[0].auto_model.embeddings.register_forward_pre_hook(
        lambda module, args, kwargs: seen.append(kwargs["input_ids"].tolist()), with_kwargs=True
    )
    try:
        embed_ids(tiny_model, [sequence])
    finally:
        hook.remove()
    assert seen == [[sequence]]
    assert seen[0][0][1:-1] == ids * 5


def test_embed_ids_rejects_bad_sequences(tiny_model) -> None:
    with pytest.raises(SettingError, match=r"len\(sequences\[0\]\)=82: more than the model's max length 64"):
        embed_ids(tiny_model, [[101] + [1000] * 80 + [102]])
    with pytest.raises(SettingError, match=r"sequences\[1\]=\[\]: is empty"):
        embed_ids(tiny_model, [[101, 102], []])
    with pytest.raises(SettingError, match="no sequences"):
        embed_ids(tiny_model, [])


def test_token_view_budget(tiny_model) -> None:
    view = TokenView(tiny_model)
    assert view.max_length == 64
    assert view.max_content == 62
    long_text = " ".join(["word"] * 500)
    assert len(view.content([long_text])[0]) == 62


def test_forward_batches_with_states_pool_like_embed_ids(tiny_model) -> None:
    """The per-layer path (Hugging Face model + the model's own pooling modules) gives embed_ids' vectors."""
    from lengthwise.core.embed import forward_batches

    view = TokenView(tiny_model)
    inputs = [view.wrap(ids) for ids in view.content(TEXTS)]
    plain = embed_ids(tiny_model, inputs, batch_size=2)
    seen = np.zeros(len(inputs), dtype=bool)
    for batch in forward_batches(tiny_model, inputs, batch_size=2, hidden_states=True):
        np.testing.assert_allclose(batch.pooled, plain[batch.index], atol=1e-6)
        assert len(batch.hidden) == 3 and batch.hidden[0].shape[:2] == batch.mask.shape
        assert batch.lengths == [len(inputs[i]) for i in batch.index]
        seen[batch.index] = True
    assert seen.all()


def test_content_names_the_text_in_errors(tiny_model) -> None:
    view = TokenView(tiny_model)
    with pytest.raises(DataFormatError, match=r"pairs\.tsv:3 \(text1\) is empty"):
        view.content(["fine", "  "], names=["pairs.tsv:2 (text1)", "pairs.tsv:3 (text1)"])


def test_a_module_left_training_is_put_in_eval_mode_and_an_eval_model_left_alone(tiny_model, monkeypatch) -> None:
    import torch

    from lengthwise.core.embed import eval_mode

    tiny_model.eval()
    inner = next(m for m in tiny_model.modules() if isinstance(m, torch.nn.Dropout))
    inner.train()  # one dropout left training, the model's own flag off: still switched off
    eval_mode(tiny_model)
    assert not any(module.training for module in tiny_model.modules())
    calls = []
    monkeypatch.setattr(torch.nn.Module, "train", lambda self, mode=True: calls.append(mode) or self)
    eval_mode(tiny_model)  # all in eval already: no walk over the modules
    assert calls == []
    ids = [[101, 2023, 102]]
    np.testing.assert_array_equal(embed_ids(tiny_model, ids), embed_ids(tiny_model, ids))  # dropout off


def test_embed_ids_reads_the_vectors_only_after_the_last_forward(tiny_model, monkeypatch) -> None:
    """Each batch's vectors stay on their way to the host until every batch has gone to the model (a GPU runs
    ahead); the result is the same as reading each batch at once."""
    from lengthwise.core import embed

    view = TokenView(tiny_model)
    sequences = [view.wrap(ids) for ids in view.content(TEXTS * 3)]
    at_once = np.concatenate([embed_ids(tiny_model, [s]) for s in sequences])
    events: list[str] = []
    read, forward = embed.HostCopy.numpy, type(tiny_model).forward
    monkeypatch.setattr(embed.HostCopy, "numpy", lambda self: events.append("read") or read(self))
    monkeypatch.setattr(
        type(tiny_model), "forward", lambda self, *a, **k: events.append("forward") or forward(self, *a, **k)
    )
    together = embed_ids(tiny_model, sequences, batch_size=2)
    assert events.count("forward") == 6 and events.index("read") == 6  # no read before the last forward
    np.testing.assert_allclose(together, at_once, atol=1e-6)
