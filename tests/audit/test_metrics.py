"""Known answers for the pure diagnostics (no model): σ_a, the length probe, JSD, isotropy, intra similarity."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest
import torch

from lengthwise.audit.documents import metrics as dg
from lengthwise.audit.pairs.shift import js_distance
from lengthwise.core.errors import DataFormatError, SettingError


def _brute_mean_cosine(x: np.ndarray, groups: np.ndarray | None = None) -> float:
    units = x / np.linalg.norm(x, axis=1, keepdims=True)
    groups = np.arange(len(x)) if groups is None else groups
    values = [units[i] @ units[j] for i, j in combinations(range(len(x)), 2) if groups[i] != groups[j]]
    return float(np.mean(values))


# --- σ_a: the attention low-pass filter rate --------------------------------------------------------------


@pytest.mark.parametrize("n", [2, 7, 64])
def test_filter_rate_of_uniform_attention_is_zero(n: int) -> None:
    assert dg.attention_filter_rate(torch.full((n, n), 1.0 / n)) == pytest.approx(0.0, abs=1e-7)


@pytest.mark.parametrize("n", [2, 7, 64])
def test_filter_rate_of_identity_is_one(n: int) -> None:
    assert dg.attention_filter_rate(torch.eye(n)) == pytest.approx(1.0, abs=1e-9)


def test_filter_rate_is_the_largest_singular_value_averaged_over_heads() -> None:
    torch.manual_seed(0)
    attention = torch.softmax(torch.randn(3, 10, 10) * 2, dim=-1)  # (H, n, n)
    centering = torch.eye(10, dtype=torch.float64) - 1.0 / 10
    expected = np.mean([torch.linalg.svdvals(centering @ a.double())[0].item() for a in attention])
    assert dg.attention_filter_rate(attention) == pytest.approx(expected, rel=1e-9)
    # a matrix that every query spends on one key (an "attention sink") keeps no high frequency either
    sink = torch.zeros(10, 10)
    sink[:, 0] = 1.0
    assert dg.attention_filter_rate(sink) == pytest.approx(0.0, abs=1e-7)


def test_batch_filter_rates_ignore_padding() -> None:
    torch.manual_seed(1)
    short = torch.softmax(torch.randn(2, 5, 5), dim=-1)  # (H, 5, 5)
    padded = torch.zeros(2, 2, 8, 8)  # (B, H, T, T)
    padded[0, :, :5, :5] = short
    padded[0, :, 5:, :] = 0.3  # garbage in padded rows must not matter
    padded[1] = torch.eye(8)
    rates = dg.batch_filter_rates(padded, [5, 8])
    assert rates == pytest.approx([dg.attention_filter_rate(short), 1.0])
    with pytest.raises(SettingError, match=r"attention=\(2, 3\): expected an \(n, n\)"):
        dg.attention_filter_rate(torch.ones(2, 3))


# --- the length probe ----------------------------------------------------------------------------------------


def test_probe_on_embeddings_that_contain_the_length_linearly_gives_r2_near_one() -> None:
    rng = np.random.default_rng(0)
    lengths = rng.integers(5, 250, 300)
    direction = rng.normal(size=16)
    embeddings = rng.normal(size=(300, 16)) + np.outer(lengths, direction)  # length written in linearly
    score = dg.length_probe_r2(embeddings, lengths)
    assert score.mean > 99.99 and len(score.folds) == 5


def test_probe_on_noise_gives_no_length() -> None:
    rng = np.random.default_rng(1)
    score = dg.length_probe_r2(rng.normal(size=(300, 8)), rng.integers(5, 250, 300), regressor="ridge")
    assert score.mean < 5.0


def test_probe_errors() -> None:
    with pytest.raises(SettingError, match="folds=5: the length probe needs at least 2 folds and 10 texts, got 6"):
        dg.length_probe_r2(np.zeros((6, 3)), np.arange(6))
    with pytest.raises(DataFormatError, match="different lengths"):
        dg.length_probe_r2(np.random.default_rng(0).normal(size=(20, 3)), np.full(20, 7))


# --- JSD -----------------------------------------------------------------------------------------------------


def test_jsd_of_identical_distributions_is_zero() -> None:
    sample = np.random.default_rng(2).uniform(-1, 1, 500)
    assert js_distance(sample, sample.copy()) == pytest.approx(0.0, abs=1e-12)


# --- anisotropy, alignment, uniformity -----------------------------------------------------------------------


def test_cosine_moments_match_brute_force_and_add_over_batches() -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(size=(30, 5)) + 0.5
    groups = rng.integers(0, 6, 30)
    assert dg.anisotropy(x) == pytest.approx(_brute_mean_cosine(x), rel=1e-9)
    assert dg.anisotropy(x, groups) == pytest.approx(_brute_mean_cosine(x, groups), rel=1e-9)
    units = x / np.linalg.norm(x, axis=1, keepdims=True)
    first, second = (dg.CosineMoments.from_groups(units[s], np.ones(15)) for s in (slice(0, 15), slice(15, 30)))
    assert (first + second).mean_cosine() == pytest.approx(dg.anisotropy(x), rel=1e-9)
    with pytest.raises(SettingError, match="two groups"):
        dg.anisotropy(x, np.zeros(30))


def test_anisotropy_extremes() -> None:
    assert dg.anisotropy(np.tile([[1.0, 2.0, 3.0]], (5, 1))) == pytest.approx(1.0)
    assert dg.anisotropy(np.eye(4)) == pytest.approx(0.0)


def test_alignment_and_uniformity_known_values() -> None:
    rng = np.random.default_rng(4)
    x = rng.normal(size=(40, 6))
    assert dg.alignment(x, 3 * x) == pytest.approx(0.0, abs=1e-12)  # scale does not matter: unit-normed
    assert dg.alignment(x, -x) == pytest.approx(4.0)
    assert dg.uniformity(np.tile([[0.0, 1.0]], (6, 1))) == pytest.approx(0.0, abs=1e-12)
    units = x / np.linalg.norm(x, axis=1, keepdims=True)
    brute = np.log(np.mean([np.exp(-2 * np.sum((units[i] - units[j]) ** 2)) for i, j in combinations(range(40), 2)]))
    assert dg.uniformity(x, chunk=7) == pytest.approx(brute, rel=1e-9)


def test_elongation_isotropy_of_unchanged_texts() -> None:
    x = np.random.default_rng(5).normal(size=(12, 4))
    result = dg.elongation_isotropy(x, x)
    assert result["alignment"] == pytest.approx(0.0, abs=1e-12) and result["self_cosine_mean"] == pytest.approx(1.0)
    assert result["original"] == result["elongated"]


def test_length_collapse_per_bin() -> None:
    rng = np.random.default_rng(6)
    x = rng.normal(size=(9, 3))
    bins = np.array([0, 0, 0, 1, 1, 1, 1, 2, 3])
    rows = dg.length_collapse(x, bins)
    assert [row["bin"] for row in rows] == [0, 1, 2, 3] and [row["n"] for row in rows] == [3, 4, 1, 1]
    assert rows[1]["mean_cosine"] == pytest.approx(_brute_mean_cosine(x[3:7]))
    centroid = x.mean(axis=0)
    assert rows[0]["mean_distance_to_centroid"] == pytest.approx(np.linalg.norm(x[:3] - centroid, axis=1).mean())
    assert rows[2]["mean_cosine"] is None


# --- intra-document similarity --------------------------------------------------------------------------------


def test_intra_similarity_ignores_padding() -> None:
    torch.manual_seed(2)
    states = torch.randn(2, 6, 4)  # (B, T, D)
    mask = torch.tensor([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]])
    padded = dg.intra_document_similarity(states, mask)
    alone = dg.intra_document_similarity(states[:1, :4], torch.ones(1, 4))
    assert padded[0] == pytest.approx(alone[0])
    tokens = states[0, :4].double()
    pooled = tokens.mean(dim=0)
    expected = torch.nn.functional.cosine_similarity(tokens, pooled[None], dim=-1).mean().item()
    assert padded[0] == pytest.approx(expected)


def test_adjusted_intra_similarity_of_identical_tokens_is_one_minus_anisotropy() -> None:
    rng = np.random.default_rng(7)
    doc_vectors = rng.normal(size=(5, 8)) + 0.3  # each document: one vector repeated at every token
    lengths = [3, 6, 2, 5, 4]
    states = torch.zeros(5, 6, 8, dtype=torch.float64)
    mask = torch.zeros(5, 6, dtype=torch.long)
    for doc, n in enumerate(lengths):
        states[doc, :n] = torch.as_tensor(doc_vectors[doc])
        states[doc, n:] = 9.0  # padding garbage
        mask[doc, :n] = 1
    stats = dg.LayerTokenStats(5)
    stats.add(np.arange(5), [states], mask, np.ones(5, dtype=bool))
    summary = stats.summary()
    tokens = np.concatenate([np.tile(doc_vectors[d], (n, 1)) for d, n in enumerate(lengths)])
    owner = np.repeat(np.arange(5), lengths)
    anisotropy = _brute_mean_cosine(tokens, owner)  # random token pairs from different documents
    assert summary["intra"] == pytest.approx([1.0])
    assert summary["anisotropy"] == pytest.approx([anisotropy])
    assert summary["adjusted"] == pytest.approx([1.0 - anisotropy])
    assert dg.adjusted_intra_similarity(np.ones(5), anisotropy) == pytest.approx(1.0 - anisotropy)


def test_layer_token_stats_accumulate_over_batches() -> None:
    torch.manual_seed(3)
    states = torch.randn(6, 5, 4)
    mask = torch.ones(6, 5, dtype=torch.long)
    whole, parts = dg.LayerTokenStats(6), dg.LayerTokenStats(6)
    whole.add(np.arange(6), [states], mask, np.ones(6, dtype=bool))
    parts.add(np.array([0, 1, 2]), [states[:3]], mask[:3], np.ones(3, dtype=bool))
    parts.add(np.array([3, 4, 5]), [states[3:]], mask[3:], np.array([True, True, True]))
    got, expected = parts.summary(), whole.summary()
    assert got.keys() == expected.keys()
    for key, value in expected.items():  # approx() takes no dict of lists (pytest ≥ 9.2)
        assert got[key] == pytest.approx(value), key
