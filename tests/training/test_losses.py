"""HiCL's loss and InfoNCE as plain tensor maths, checked against hand computations."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from lengthwise.core.errors import SettingError
from lengthwise.training.losses import hicl_loss, info_nce, sequence_vectors


def _views(seed: int = 0, segments: int = 6, dim: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    first = torch.randn(segments, dim, generator=generator)
    return first, first + 0.3 * torch.randn(segments, dim, generator=generator)


OWNER = torch.tensor([0, 0, 0, 1, 2, 2])
LENGTHS = torch.tensor([32, 32, 5, 20, 32, 1])


def _manual_local(first, second, owner, scale=1.0, averaging=False, same_as_negative=False) -> float:
    """Eq. 2 term by term: exp(sim/τ) over the positive plus the negatives the option allows."""
    a, b = F.normalize(first, dim=-1), F.normalize(second, dim=-1)
    counts = torch.bincount(owner)
    total = 0.0
    for i in range(len(owner)):
        positive = math.exp(float(a[i] @ b[i]) * scale)
        negatives = 0.0
        for k in range(len(owner)):
            if k == i or (owner[k] == owner[i] and not same_as_negative):
                continue
            weight = 1.0 / float(counts[owner[k]]) if averaging and owner[k] != owner[i] else 1.0
            negatives += weight * math.exp(float(a[i] @ b[k]) * scale)
        total += -math.log(positive / (positive + negatives))
    return total / len(owner)


def test_local_loss_is_eq2_with_same_sequence_segments_out_of_the_denominator() -> None:
    first, second = _views()
    parts = hicl_loss(first, second, OWNER, LENGTHS, alpha=1.0, scale=1.0)
    assert parts["hicl_local"].item() == pytest.approx(_manual_local(first, second, OWNER), rel=1e-5)
    assert parts["hicl_global"].item() == 0.0  # alpha = 1
    negative = hicl_loss(first, second, OWNER, LENGTHS, 1.0, same_sequence="negative", scale=1.0)["hicl_local"]
    assert negative.item() == pytest.approx(_manual_local(first, second, OWNER, same_as_negative=True), rel=1e-5)
    assert negative.item() > parts["hicl_local"].item()  # more terms in the denominator


def test_averaging_weighs_negatives_by_their_sequence_size() -> None:
    first, second = _views(1)
    got = hicl_loss(first, second, OWNER, LENGTHS, 1.0, denominator="averaging", scale=1.0)["hicl_local"]
    assert got.item() == pytest.approx(_manual_local(first, second, OWNER, averaging=True), rel=1e-5)
    summed = hicl_loss(first, second, OWNER, LENGTHS, 1.0, scale=1.0)["hicl_local"]
    assert got.item() < summed.item()  # down-weighted negatives: a smaller denominator


def test_same_sequence_positive_counts_siblings_in_the_numerator() -> None:
    first, second = _views(2)
    parts = hicl_loss(first, second, OWNER, LENGTHS, 1.0, same_sequence="positive", scale=1.0)["hicl_local"]
    a, b = F.normalize(first, dim=-1), F.normalize(second, dim=-1)
    logits = a @ b.T
    expected = 0.0
    for i in range(len(OWNER)):
        same = OWNER[i] == OWNER
        expected += float(torch.logsumexp(logits[i], 0) - torch.logsumexp(logits[i][same], 0))
    assert parts.item() == pytest.approx(expected / len(OWNER), rel=1e-5)


def test_sequence_vectors_are_length_weighted_means() -> None:
    first, _ = _views(3)
    vectors = sequence_vectors(first, OWNER, LENGTHS, 3)
    expected0 = (first[0] * 32 + first[1] * 32 + first[2] * 5) / 69
    assert torch.allclose(vectors[0], expected0, atol=1e-6)
    assert torch.allclose(vectors[1], first[3], atol=1e-6)


def test_global_part_is_info_nce_of_sequence_vectors_weighted_by_one_minus_alpha() -> None:
    first, second = _views(4)
    parts = hicl_loss(first, second, OWNER, LENGTHS, alpha=0.15)
    expected = info_nce(sequence_vectors(first, OWNER, LENGTHS, 3), sequence_vectors(second, OWNER, LENGTHS, 3))
    assert parts["hicl_global"].item() == pytest.approx(0.85 * expected.item(), rel=1e-6)
    local = hicl_loss(first, second, OWNER, LENGTHS, alpha=1.0)["hicl_local"]
    assert parts["hicl_local"].item() == pytest.approx(0.15 * local.item(), rel=1e-6)


def test_info_nce_matches_cross_entropy_at_tau_005() -> None:
    anchors, positives = _views(5, segments=4)
    logits = F.normalize(anchors, dim=-1) @ F.normalize(positives, dim=-1).T / 0.05
    expected = sum(-float(torch.log_softmax(logits[i], 0)[i]) for i in range(4)) / 4
    assert info_nce(anchors, positives).item() == pytest.approx(expected, rel=1e-5)


def test_bad_options_are_rejected() -> None:
    first, second = _views()
    with pytest.raises(SettingError, match="denominator='mean': not a HiCL option"):
        hicl_loss(first, second, OWNER, LENGTHS, 0.1, denominator="mean")  # type: ignore[arg-type]
    with pytest.raises(SettingError, match="same_sequence='both': not a HiCL option"):
        hicl_loss(first, second, OWNER, LENGTHS, 0.1, same_sequence="both")  # type: ignore[arg-type]
