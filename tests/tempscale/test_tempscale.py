"""TempScale: exactness per family (t = 1, baked vs run time, SDPA vs eager, padding), roles, schedules,
removal, saving, refusals; and the length-collapse behaviour on the real all-MiniLM-L6-v2."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from sentence_transformers import SentenceTransformer

from lengthwise.core.encoder import TextEncoder
from lengthwise.facade import load_model
from lengthwise.tempscale import (
    SETTINGS_FILE,
    LengthSchedule,
    TempScaleConfig,
    TempScaleEncoder,
    TempScaleError,
    apply_tempscale,
    bake_refusal,
    bake_tempscale,
    current_tempscale,
    read_tempscale_settings,
    remove_tempscale,
    save_tempscale,
    tempscale,
)

pytestmark = pytest.mark.usefixtures("one_thread")
FAMILIES = ["bert", "roberta", "xlm-roberta", "distilbert", "mpnet", "modernbert"]
TEXTS = [
    "a short one",
    "this one is a good deal longer than the first text, with commas, clauses and quite a few more words in it",
    "a text of middling length about cats",
    "tiny",
]


def _hf_config(family: str, vocab: int):
    import transformers as tf

    common = {"vocab_size": vocab, "initializer_range": 0.3, "pad_token_id": 0}  # peaky attention: t matters
    layers = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64}
    return {
        "bert": lambda: tf.BertConfig(**common, **layers, max_position_embeddings=128),
        "roberta": lambda: tf.RobertaConfig(**common, **layers, max_position_embeddings=130),
        "xlm-roberta": lambda: tf.XLMRobertaConfig(**common, **layers, max_position_embeddings=130),
        "distilbert": lambda: tf.DistilBertConfig(
            **common, dim=32, n_layers=2, n_heads=2, hidden_dim=64, max_position_embeddings=128
        ),
        "mpnet": lambda: tf.MPNetConfig(**common, **layers, max_position_embeddings=130),
        "modernbert": lambda: tf.ModernBertConfig(
            **common,
            **{**layers, "num_hidden_layers": 3},  # full, sliding, sliding attention
            local_attention=16,
            max_position_embeddings=128,
            bos_token_id=101,
            eos_token_id=102,
            cls_token_id=101,
            sep_token_id=102,
        ),
        "gpt2": lambda: tf.GPT2Config(vocab_size=vocab, n_embd=32, n_layer=2, n_head=2, n_positions=128),
        "t5": lambda: tf.T5Config(vocab_size=vocab, d_model=32, d_kv=16, d_ff=64, num_layers=2, num_heads=2),
    }[family]()


@pytest.fixture(scope="module")
def family_dirs(tmp_path_factory: pytest.TempPathFactory, minilm_path: str) -> dict[str, Path]:
    """Random-weight tiny Hugging Face models of every family, with all-MiniLM's tokenizer."""
    from transformers import AutoModel, AutoTokenizer, T5EncoderModel

    tokenizer = AutoTokenizer.from_pretrained(minilm_path)
    folders = {}
    for family in [*FAMILIES, "gpt2", "t5"]:
        folder = tmp_path_factory.mktemp(family)
        torch.manual_seed(0)
        config = _hf_config(family, tokenizer.vocab_size)
        (T5EncoderModel(config) if family == "t5" else AutoModel.from_config(config)).save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        folders[family] = folder
    return folders


def _st(folder: Path, attn: str | None = None) -> SentenceTransformer:
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    kwargs = {"attn_implementation": attn} if attn else {}
    transformer = Transformer(str(folder), max_seq_length=64, model_kwargs=kwargs)
    return SentenceTransformer(modules=[transformer, Pooling(32, "mean"), Normalize()], device="cpu")


@pytest.fixture(scope="module")
def families(family_dirs: dict[str, Path]) -> dict[str, SentenceTransformer]:
    return {family: _st(family_dirs[family]) for family in FAMILIES}


def _encode(model: SentenceTransformer, texts=TEXTS, **kwargs) -> np.ndarray:
    return model.encode(list(texts), convert_to_numpy=True, **kwargs)


def _one_by_one(model: SentenceTransformer, texts=TEXTS) -> np.ndarray:
    return np.stack([_encode(model, [text])[0] for text in texts])


@pytest.mark.parametrize("family", FAMILIES)
def test_t1_identity_patch_effect_and_exact_removal(families, family: str) -> None:
    model = families[family]
    hf = model[0].auto_model
    before = {k: v.clone() for k, v in model.state_dict().items()}
    scaling = [getattr(m, "scaling", None) for m in hf.modules()]
    hooks = sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())
    base = _encode(model)
    with tempscale(model, TempScaleConfig(t=1.0)):
        assert np.abs(_encode(model) - base).max() <= 1e-6
    with tempscale(model, TempScaleConfig(t=1.0, schedule=LengthSchedule((1.0, 64.0), (1.0, 1.0)))):
        assert np.abs(_encode(model) - base).max() <= 1e-6  # the per-sequence hook path at t = 1
    with tempscale(model, 0.5):
        assert np.abs(_encode(model) - base).max() > 1e-3  # the patch reaches the embeddings
    assert current_tempscale(model) is None
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert [getattr(m, "scaling", None) for m in hf.modules()] == scaling
    assert sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules()) == hooks
    assert np.array_equal(_encode(model), base)


@pytest.mark.parametrize("family", FAMILIES)
def test_first_layer_attention_is_the_tempered_softmax(families, family: str) -> None:
    """Layer 0 sees the same input patched or not, so its attention must be softmax(logits / t) exactly."""
    model = families[family]
    hf, t = model[0].auto_model, 0.6
    features = model.preprocess(TEXTS[:2])
    inputs = {k: v for k, v in features.items() if k in ("input_ids", "attention_mask")}
    previous = hf.config._attn_implementation
    hf.set_attn_implementation("eager")
    try:
        with torch.inference_mode():
            plain = hf(**inputs, output_attentions=True).attentions[0]  # (B, H, T, T)
            with tempscale(model, t):
                patched = hf(**inputs, output_attentions=True).attentions[0]
    finally:
        hf.set_attn_implementation(previous)
    expected = torch.softmax(torch.log(plain.double()) / t, dim=-1)  # masked keys: log 0 = -inf stay 0
    valid = inputs["attention_mask"].bool()[:, None, :, None]  # padded query rows are not used
    assert torch.allclose(patched.double().masked_fill(~valid, 0), expected.masked_fill(~valid, 0), atol=1e-5)


@pytest.mark.parametrize("family", FAMILIES)
def test_baked_weights_match_the_run_time_patch(families, family: str, tmp_path: Path) -> None:
    model = families[family]
    before = {k: v.clone() for k, v in model.state_dict().items()}
    bake_tempscale(model, 0.7, tmp_path / "baked")
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())  # memory copy untouched
    baked = SentenceTransformer(str(tmp_path / "baked"), device="cpu")  # plain ST: no lengthwise hooks
    assert current_tempscale(baked) is None
    with tempscale(model, 0.7):
        patched = _encode(model)
    assert np.abs(_encode(baked) - patched).max() <= 1e-5
    assert read_tempscale_settings(tmp_path / "baked") == (TempScaleConfig(t=0.7), True)
    assert current_tempscale(load_model(tmp_path / "baked", device="cpu")) is None  # never applied twice


def test_mpnet_position_bias_scaling_is_a_choice_and_bakes_either_way(families, tmp_path: Path) -> None:
    model = families["mpnet"]
    out = {}
    for scaled in (True, False):
        config = TempScaleConfig(t=0.6, scale_position_bias=scaled)
        with tempscale(model, config):
            out[scaled] = _encode(model)
        bake_tempscale(model, config, tmp_path / str(scaled))
        baked = SentenceTransformer(str(tmp_path / str(scaled)), device="cpu")
        assert np.abs(_encode(baked) - out[scaled]).max() <= 1e-5
    assert np.abs(out[True] - out[False]).max() > 1e-3  # the bias really is part of the tempered logits


@pytest.mark.parametrize("family", [f for f in FAMILIES if f != "mpnet"])  # MPNet has eager attention only
def test_sdpa_and_eager_agree_with_the_patch_on(family_dirs, family: str) -> None:
    config = TempScaleConfig(t=0.6, schedule=LengthSchedule((4.0, 30.0), (1.2, 0.7)))
    out = {}
    for attn in ("sdpa", "eager"):
        model = _st(family_dirs[family], attn)
        assert model[0].auto_model.config._attn_implementation == attn
        for name, cfg in (("scalar", TempScaleConfig(t=0.6)), ("schedule", config)):
            with tempscale(model, cfg):
                out[attn, name] = _encode(model)
    for name in ("scalar", "schedule"):
        assert np.abs(out["sdpa", name] - out["eager", name]).max() <= 1e-5


@pytest.mark.parametrize("family", FAMILIES)
def test_padded_batch_equals_one_by_one_and_schedule_is_per_sequence(families, family: str) -> None:
    model = families[family]
    schedule = LengthSchedule((4.0, 24.0), (1.0, 0.5))
    with tempscale(model, TempScaleConfig(t=0.8, schedule=schedule)):
        batched = _encode(model, batch_size=4)
        single = _one_by_one(model)
    assert np.abs(batched - single).max() <= 1e-5
    lengths = [int(n) for n in model.tokenize(TEXTS)["attention_mask"].sum(-1)]  # attended tokens per text
    for row, n in enumerate(lengths):  # the same text alone at the scalar t = 0.8 · s(n)
        with tempscale(model, 0.8 * float(schedule(torch.tensor([n]))[0])):
            assert np.abs(_encode(model, [TEXTS[row]])[0] - batched[row]).max() <= 1e-5
    with tempscale(model, 0.5):
        assert np.abs(_encode(model, batch_size=4) - _one_by_one(model)).max() <= 1e-5


def test_query_and_document_temperatures(families) -> None:
    model = families["bert"]
    config = TempScaleConfig(t=0.9, t_query=0.5, t_doc=0.7)
    encoder = TempScaleEncoder(model, config)
    assert isinstance(encoder, TextEncoder)
    expected = {}
    for t in (0.9, 0.5, 0.7):
        with tempscale(model, t):
            expected[t] = _encode(model)
    np.testing.assert_allclose(encoder.encode(TEXTS), expected[0.9], atol=1e-6)
    np.testing.assert_allclose(encoder.encode_queries(TEXTS), expected[0.5], atol=1e-6)
    np.testing.assert_allclose(encoder.encode_documents(TEXTS), expected[0.7], atol=1e-6)
    assert current_tempscale(model) is None  # the encoder leaves the model as it found it
    with tempscale(model, config) as patch:  # plain ST calls pick the role from their `task`
        np.testing.assert_allclose(model.encode_query(TEXTS), expected[0.5], atol=1e-6)
        np.testing.assert_allclose(model.encode_document(TEXTS), expected[0.7], atol=1e-6)
        assert patch is not None
        patch.role_override = "query"
        np.testing.assert_allclose(_encode(model), expected[0.5], atol=1e-6)


def test_nested_contexts_restore_the_outer_patch(families) -> None:
    model = families["modernbert"]
    apply_tempscale(model, 0.8)
    try:
        outer = _encode(model)
        with pytest.raises(TempScaleError, match="already TempScale'd"):
            apply_tempscale(model, 0.5)
        with tempscale(model, None):
            assert np.abs(_encode(model) - outer).max() > 1e-3
        np.testing.assert_array_equal(_encode(model), outer)
    finally:
        assert remove_tempscale(model) == TempScaleConfig(t=0.8)


def test_saved_settings_reload_patched(families, tmp_path: Path) -> None:
    model = families["distilbert"]
    config = TempScaleConfig(t=0.7, t_query=0.5, schedule=LengthSchedule((8.0, 32.0), (1.0, 0.8)))
    with tempscale(model, config):
        expected = _encode(model), model.encode_query(TEXTS)
        save_tempscale(model, tmp_path / "saved")
    reloaded = load_model(tmp_path / "saved", device="cpu")
    patch = current_tempscale(reloaded)
    assert patch is not None and patch.config == config
    np.testing.assert_allclose(_encode(reloaded), expected[0], atol=1e-6)
    np.testing.assert_allclose(reloaded.encode_query(TEXTS), expected[1], atol=1e-6)
    (tmp_path / "saved" / SETTINGS_FILE).write_text('{"config": {"t": 0.5, "tau": 1}, "baked": false}')
    with pytest.raises(TempScaleError, match="unknown TempScale settings"):
        load_model(tmp_path / "saved", device="cpu")


def test_bake_refuses_with_the_reason(families, tmp_path: Path) -> None:
    model = families["bert"]
    schedule = LengthSchedule((8.0,), (0.5,))
    with pytest.raises(TempScaleError, match="length schedule"):
        bake_tempscale(model, TempScaleConfig(t=0.8, schedule=schedule), tmp_path / "a")
    with pytest.raises(TempScaleError, match="one directory per side"):
        bake_tempscale(model, TempScaleConfig(t=0.8, t_query=0.6), tmp_path / "b")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    model.half()
    try:
        assert "would round" in str(bake_refusal(model, TempScaleConfig(t=0.8)))
        assert bake_refusal(model, TempScaleConfig(t=0.5)) is None  # 1/t = 2 is exact in any float format
    finally:
        model.float()


@pytest.mark.parametrize("family", ["gpt2", "t5"])
def test_unsupported_architectures_raise_naming_the_supported(family_dirs, family: str) -> None:
    model = _st(family_dirs[family])
    with pytest.raises(TempScaleError, match=r"does not support .*supported: BERT .*ModernBERT"):
        apply_tempscale(model, 0.8)
    with pytest.raises(TempScaleError, match="does not support"):
        bake_tempscale(model, 0.8, family_dirs[family] / "baked")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"t": 0.0}, "t=0.0: not a positive"),
        ({"t_doc": float("nan")}, "t_doc=nan"),
        ({"t_query": -1}, "t_query"),
        ({"t": 1e-30}, r"t=1e-30: outside \[0.01, 100\]"),  # 13.21: accepted silently before
        ({"t": 1e4}, "outside"),
    ],
)
def test_config_validation(kwargs: dict, message: str) -> None:
    with pytest.raises(TempScaleError, match=message):
        TempScaleConfig(**kwargs)


def test_schedule_validation() -> None:
    with pytest.raises(TempScaleError, match="strictly increasing"):
        LengthSchedule((10.0, 5.0), (1.0, 1.0))
    with pytest.raises(TempScaleError, match="as many factors"):
        LengthSchedule((10.0,), (1.0, 2.0))
    with pytest.raises(TempScaleError, match=r"schedule=0\.0") as error:
        LengthSchedule((10.0,), (0.0,))
    assert error.value.field == "schedule"


def test_schedule_interpolates_and_holds_at_the_ends() -> None:
    schedule = LengthSchedule((10.0, 20.0, 40.0), (1.0, 0.8, 0.6))
    got = schedule(torch.tensor([1, 10, 15, 20, 30, 40, 500]))
    np.testing.assert_allclose(got.numpy(), [1.0, 1.0, 0.9, 0.8, 0.7, 0.6, 0.6], atol=1e-6)
    assert TempScaleConfig.from_dict(TempScaleConfig(t=0.7, schedule=schedule).to_dict()).schedule == schedule


def test_minilm_length_collapse_and_what_lower_t_does(minilm, data_dir: Path) -> None:
    """Measured on SciFact abstracts (≥ 256 tokens, cut at N = 256) vs their first 12 words:

    long texts crowd together (higher mean pairwise cosine than short ones: length collapse), and for this
    model t < 1 *raises* that mean cosine — the opposite of the paper's Fig. 1(c); we assert what holds.
    """
    import gzip
    import json

    with gzip.open(data_dir / "scifact" / "corpus.jsonl.gz", "rt", encoding="utf-8") as handle:
        docs = [f"{row['title']} {row['text']}".strip() for row in map(json.loads, handle.readlines()[:200])]
    lengths = minilm.preprocess(docs)["attention_mask"].sum(-1).tolist()
    long_texts = [d for d, n in zip(docs, lengths, strict=True) if n >= minilm.max_seq_length][:24]
    short_texts = [" ".join(d.split()[:12]) for d in long_texts]
    assert len(long_texts) == 24

    def mean_cosine(texts: list[str], t: float) -> float:
        with tempscale(minilm, t):
            emb = _encode(minilm, texts)
        return float((emb @ emb.T)[np.triu_indices(len(emb), 1)].mean())

    assert mean_cosine(long_texts, 1.0) > mean_cosine(short_texts, 1.0) + 0.02
    assert mean_cosine(long_texts, 0.6) > mean_cosine(long_texts, 1.0) + 0.02


@pytest.mark.parametrize("family", FAMILIES)
def test_a_saved_tempscale_loads_at_int8_and_matches_fp32s(families, family: str, tmp_path: Path) -> None:
    # before (issue 62.5): int8's own quantized layer (RowScaledLinear) was refused as "not a plain Linear (a PEFT
    # adapter?)", so any TempScale at int8 failed on encode, eval, audit and load_model
    model = families[family]
    with tempscale(model, TempScaleConfig(t=0.5, t_query=0.7)):
        patched, queries = _encode(model), model.encode_query(TEXTS)
        save_tempscale(model, tmp_path / "saved")
    plain = _encode(model)
    int8 = load_model(tmp_path / "saved", device="cpu", precision="int8")
    assert current_tempscale(int8) is not None
    got, got_queries = _encode(int8), int8.encode_query(TEXTS)
    near, far = (got * patched).sum(axis=1), (got * plain).sum(axis=1)  # unit vectors (Normalize)
    assert near.min() > 0.98 and near.mean() > far.mean(), (near, far)  # a short text moves little under t
    assert ((got_queries * queries).sum(axis=1) > 0.98).all()
