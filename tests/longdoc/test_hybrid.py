"""Multi-scale windows and hybrid window scoring (issue 24): the maths against a by-hand computation, the windows
against separate encoders, the settings' refusals, and the index's rescoring with a fused score."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lengthwise.core.encoder import MultiVectors, multi_vector_scores
from lengthwise.core.scoring import WindowScoring
from lengthwise.longdoc import LongDocConfig, LongDocError, LongEncoder

pytestmark = pytest.mark.usefixtures("one_thread")


def _long_text(words: int) -> str:
    vocabulary = ["river", "stone", "bread", "winter", "school", "bridge", "market", "forest", "valley", "honey"]
    return " ".join(vocabulary[(i * 3) % len(vocabulary)] for i in range(words)) + "."


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def test_fused_scores_are_the_weighted_window_and_mean_scores_computed_by_hand() -> None:
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(7, 5)).astype(np.float32)
    offsets = np.array([0, 3, 4, 7])
    queries = torch.nn.functional.normalize(torch.as_tensor(rng.normal(size=(2, 5)), dtype=torch.float32), dim=-1)
    docs = MultiVectors(vectors, offsets)
    got = multi_vector_scores(queries, docs, WindowScoring(best_windows=2, fuse_mean=0.25)).numpy()
    units, q = _unit(vectors), queries.numpy()
    for i in range(2):
        for d in range(3):
            sims = np.sort(units[offsets[d] : offsets[d + 1]] @ q[i])[::-1]
            window = sims[: min(2, len(sims))].mean()
            mean = _unit(units[offsets[d] : offsets[d + 1]].mean(0)) @ q[i]
            assert got[i, d] == pytest.approx(0.75 * window + 0.25 * mean, abs=1e-5)
    # an int is a top-k, and fuse_mean 0 leaves the window score as it was
    np.testing.assert_allclose(multi_vector_scores(queries, docs, 2).numpy(), multi_vector_scores(
        queries, docs, WindowScoring(best_windows=2)).numpy())  # fmt: skip


def test_full_fusion_is_the_chunk_mean_document_score(tiny_model) -> None:
    texts = [_long_text(120), _long_text(60), "A short one."]
    multi = LongEncoder(tiny_model, strategy="multi-vector", window=24, fuse_mean=1.0)
    windows = multi.encode_documents_multi(texts)
    pooled = LongEncoder(tiny_model, strategy="chunk-mean", window=24).encode_documents(texts)
    query = torch.as_tensor(multi.encode_queries(["bread on the bridge"]))
    expected = query.numpy() @ _unit(pooled).T
    np.testing.assert_allclose(multi_vector_scores(query, windows, multi.window_scoring).numpy(), expected, atol=1e-5)


def test_multi_scale_keeps_the_windows_of_each_size(tiny_model) -> None:
    texts = [_long_text(150), "A cat sat on the mat."]
    both = LongEncoder(tiny_model, strategy="multi-vector", window=16, stride=8, scales=(48,))
    small = LongEncoder(tiny_model, strategy="multi-vector", window=16, stride=8).encode_documents_multi(texts)
    large = LongEncoder(tiny_model, strategy="multi-vector", window=48).encode_documents_multi(texts)
    got = both.encode_documents_multi(texts)
    first = got.vectors[got.offsets[0] : got.offsets[1]]
    expected = np.concatenate([small.vectors[: small.offsets[1]], large.vectors[: large.offsets[1]]])
    assert first.shape == expected.shape and len(first) > small.offsets[1] > 2
    np.testing.assert_allclose(first, expected, atol=1e-5)
    # a text inside one window of every size is one window, not one per size
    assert got.offsets[2] - got.offsets[1] == 1


@pytest.mark.parametrize(
    ("settings", "field"),
    [
        ({"strategy": "chunk-mean", "scales": (256,)}, "scales"),
        ({"strategy": "truncate", "fuse_mean": 0.3}, "fuse_mean"),
        ({"strategy": "multi-vector", "fuse_mean": 1.5}, "fuse_mean"),
        ({"strategy": "multi-vector", "scales": (2,)}, "scales"),
    ],
)
def test_settings_that_cannot_apply_are_refused_naming_the_field(settings: dict, field: str) -> None:
    with pytest.raises(LongDocError, match=field):
        LongDocConfig(**settings)


def test_a_scale_beyond_the_position_table_is_refused(tiny_model) -> None:
    with pytest.raises(LongDocError, match="scales"):
        LongEncoder(tiny_model, strategy="multi-vector", window=16, scales=(10_000,))


def test_settings_round_trip_and_describe_themselves() -> None:
    config = LongDocConfig(strategy="multi-vector", window=64, stride=32, scales=[256], best_windows=2, fuse_mean=0.2)
    assert LongDocConfig.from_dict(config.to_dict()) == config
    assert config.describe() == "multi-vector w64 s32 +w256 top2 fuse0.2"
    assert config.scoring == WindowScoring(best_windows=2, fuse_mean=0.2)


def test_default_names_the_recommended_setting_and_updates_follow_plain_rules() -> None:
    from lengthwise.longdoc import RECOMMENDED

    assert LongDocConfig.named("default") is RECOMMENDED and LongDocConfig.named(" Default ") is RECOMMENDED
    assert LongDocConfig.named("chunk-mean") == LongDocConfig(strategy="chunk-mean")
    hybrid = LongDocConfig(strategy="multi-vector", window=64, stride=32, best_windows=2, fuse_mean=0.2, scales=(256,))
    # another strategy starts from its own plain settings: no multi-vector scoring leaks into it
    assert hybrid.updated(strategy="chunk-mean") == LongDocConfig(strategy="chunk-mean")
    # the same strategy keeps its scoring; a new window without a stride has no overlap
    wider = hybrid.updated(strategy="multi-vector", window=128)
    assert (wider.window, wider.stride, wider.best_windows, wider.fuse_mean, wider.scales) == (
        128,
        None,
        2,
        0.2,
        (256,),
    )
    assert hybrid.updated(window=128, stride=100).stride == 100


def test_keyword_settings_on_the_default_encoder_do_not_inherit_its_stride(tiny_model) -> None:
    # before: LongEncoder(model, strategy="chunk-mean", window=32) raised "stride=32: not below the window (32)"
    # because the keyword settings were laid over the recommended multi-vector w64 s32
    encoder = LongEncoder(tiny_model, strategy="chunk-mean", window=32)
    assert encoder.config == LongDocConfig(strategy="chunk-mean", window=32)
    assert LongEncoder(tiny_model, window=32).config.stride is None


def test_tune_candidates_cross_multi_vector_with_scales_and_fusion_only() -> None:
    from lengthwise.longdoc.tune import candidates

    configs = candidates(
        ["chunk-mean", "multi-vector"],
        [64],
        [0.0, 0.5],
        best_windows=(1, 2),
        scales=((), (256,), (64,)),
        fuse_means=(0, 0.2),
    )
    chunk = [c for c in configs if c.strategy.value == "chunk-mean"]
    multi = [c for c in configs if c.strategy.value == "multi-vector"]
    assert len(chunk) == 2 and all(c.scoring == WindowScoring() and not c.scales for c in chunk)
    # 2 overlaps x 2 k x 2 scale sets (a scale equal to the window is the plain set) x 2 weights
    assert len(multi) == 16 and len(set(multi)) == 16
    assert {c.scales for c in multi} == {(), (256,)}


def test_the_cli_reads_default_and_scoring_flags_into_one_config() -> None:
    from lengthwise.cli.longdoc import long_config
    from lengthwise.longdoc import RECOMMENDED

    assert long_config("default") == RECOMMENDED
    assert long_config("multi-vector", 64, None, 2, scales="128,256", fuse_mean=0.3) == LongDocConfig(
        strategy="multi-vector", window=64, best_windows=2, scales=(128, 256), fuse_mean=0.3
    )
    with pytest.raises(ValueError, match="--scales"):
        long_config("multi-vector", scales="big")
