"""Training losses: InfoNCE pairs through sentence-transformers' own losses, and HiCL's hierarchical loss.

`hicl_loss` is plain tensor maths; `HiCLLoss` is the thin `nn.Module` the sentence-transformers trainer calls. Pair
objectives (SimCSE, LA(SER)³, COCO-DR, copy-and-concat, SimDE) are InfoNCE with in-batch negatives at τ = 0.05,
which is `MultipleNegativesRankingLoss(scale=20)`; its cached (GradCache) variant serves big batches.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

import torch
import torch.nn.functional as F
from sentence_transformers import SentenceTransformer
from sentence_transformers.sentence_transformer.losses import (
    CachedMultipleNegativesRankingLoss,
    MultipleNegativesRankingLoss,
)
from torch import Tensor, nn

__all__ = ["Denominator", "HiCLLoss", "SameSequence", "hicl_loss", "info_nce", "pair_loss", "sequence_vectors"]

SameSequence = Literal["neither", "positive", "negative"]
Denominator = Literal["summation", "averaging"]
SCALE = 20.0  # 1 / τ with τ = 0.05 (METHODS §3)


def info_nce(anchors: Tensor, positives: Tensor, scale: float = SCALE) -> Tensor:
    """Mean InfoNCE of row i of `anchors` (B, D) against row i of `positives` (B, D), other rows as negatives."""
    logits = F.normalize(anchors, dim=-1) @ F.normalize(positives, dim=-1).T * scale  # (B, B)
    return F.cross_entropy(logits, torch.arange(len(anchors), device=anchors.device))


def sequence_vectors(segments: Tensor, owner: Tensor, lengths: Tensor, count: int) -> Tensor:
    """HiCL's sequence vectors: the length-weighted mean of each sequence's segment vectors (hicl §3.1).

    segments (S, D); owner (S,) the sequence index of each segment in [0, count); lengths (S,) its token count.
    Returns (count, D).
    """
    weights = lengths.to(segments.dtype)  # (S,)
    totals = torch.zeros(count, dtype=segments.dtype, device=segments.device).index_add_(0, owner, weights)  # (B,)
    summed = torch.zeros(count, segments.shape[1], dtype=segments.dtype, device=segments.device)  # (B, D)
    summed = summed.index_add_(0, owner, segments * weights[:, None])
    return summed / totals[:, None]


def hicl_loss(
    first: Tensor,
    second: Tensor,
    owner: Tensor,
    lengths: Tensor,
    alpha: float,
    *,
    same_sequence: SameSequence = "neither",
    denominator: Denominator = "summation",
    scale: float = SCALE,
) -> dict[str, Tensor]:
    """HiCL (Eq. 2 and §3.2): ``α·L_local + (1 - α)·L_global``, returned as its two weighted parts.

    first, second (S, D): two dropout views of S segments; owner (S,): which sequence each segment belongs to
    (0..B-1, every sequence present); lengths (S,): tokens per segment. The local loss contrasts segment j of
    sequence i (view 1) with its own view 2; by default segments of the same sequence are neither positives nor
    negatives ("neither"); the ablations make them extra positives or ordinary negatives. "averaging" weighs
    each other-sequence negative by 1 / (segments in its sequence) instead of 1 (hicl App. A.8).
    """
    count = int(owner.max().item()) + 1
    logits = F.normalize(first, dim=-1) @ F.normalize(second, dim=-1).T * scale  # (S, S)
    same = owner[:, None] == owner[None, :]  # (S, S)
    own = torch.eye(len(owner), dtype=torch.bool, device=owner.device)  # (S, S)
    if denominator == "averaging":
        per_sequence = torch.bincount(owner, minlength=count).to(logits.dtype)  # (B,)
        log_weight = -torch.log(per_sequence[owner])[None, :].expand_as(logits)  # (S, S)
        logits = logits + torch.where(same, torch.zeros_like(logits), log_weight)
    elif denominator != "summation":
        raise ValueError(f"HiCL denominator {denominator!r} is not 'summation' or 'averaging'")
    if same_sequence == "neither":
        local = F.cross_entropy(
            logits.masked_fill(same & ~own, float("-inf")), torch.arange(len(owner), device=owner.device)
        )
    elif same_sequence == "negative":
        local = F.cross_entropy(logits, torch.arange(len(owner), device=owner.device))
    elif same_sequence == "positive":
        positive = torch.logsumexp(logits.masked_fill(~same, float("-inf")), dim=1)  # (S,)
        local = (torch.logsumexp(logits, dim=1) - positive).mean()
    else:
        raise ValueError(f"same-sequence segments {same_sequence!r}: use 'neither', 'positive' or 'negative'")
    sequences_first = sequence_vectors(first, owner, lengths, count)  # (B, D)
    sequences_second = sequence_vectors(second, owner, lengths, count)  # (B, D)
    return {
        "hicl_local": alpha * local,
        "hicl_global": (1.0 - alpha) * info_nce(sequences_first, sequences_second, scale),
    }


class HiCLLoss(nn.Module):
    """HiCL on SimCSE: every segment encoded twice (dropout), local segment loss plus global sequence loss.

    | inputs | from |
    |---|---|
    | one column of segments with ``owner`` and ``segment_length`` | `SegmentCollator` |

    Example::

        loss = HiCLLoss(model, alpha=0.05)
        # trainer = SentenceTransformerTrainer(model, args, dataset, loss=loss, data_collator=SegmentCollator(...))

    Citation: Wu et al., "HiCL: Hierarchical Contrastive Learning of Unsupervised Sentence Embeddings" (2023).
    """

    def __init__(
        self,
        model: nn.Module,
        alpha: float = 0.05,
        same_sequence: SameSequence = "neither",
        denominator: Denominator = "summation",
        scale: float = SCALE,
    ) -> None:
        super().__init__()
        if not 0.0 <= alpha <= 1.0:
            raise ValueError(f"HiCL alpha={alpha} must lie in [0, 1]")
        self.model = model
        self.alpha = alpha
        self.same_sequence: SameSequence = same_sequence
        self.denominator: Denominator = denominator
        self.scale = scale

    def forward(
        self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None = None
    ) -> dict[str, Tensor]:
        (features,) = list(sentence_features)
        owner = features["owner"]
        lengths = features["segment_length"]
        inputs = {key: value for key, value in features.items() if key not in ("owner", "segment_length")}
        first = self.model(dict(inputs))["sentence_embedding"]  # (S, D), dropout mask 1
        second = self.model(dict(inputs))["sentence_embedding"]  # (S, D), dropout mask 2
        return hicl_loss(
            first,
            second,
            owner,
            lengths,
            self.alpha,
            same_sequence=self.same_sequence,
            denominator=self.denominator,
            scale=self.scale,
        )

    @property
    def citation(self) -> str:
        return "Wu et al., HiCL: Hierarchical Contrastive Learning of Unsupervised Sentence Embeddings, 2023"


def pair_loss(model: SentenceTransformer, *, cache_batch: int | None = None, distributed: bool = False) -> nn.Module:
    """InfoNCE at τ = 0.05 on (anchor, positive) columns; GradCache in mini-batches of `cache_batch` if given.

    GradCache (Gao et al., 2021) embeds without a graph first, then replays each mini-batch with the same random
    state, so dropout noise matches between the two passes. `distributed` gathers embeddings across processes,
    so the in-batch negatives are the global batch, as with one process.
    """
    if cache_batch is not None:
        return CachedMultipleNegativesRankingLoss(
            model, scale=SCALE, mini_batch_size=cache_batch, gather_across_devices=distributed
        )
    return MultipleNegativesRankingLoss(model, scale=SCALE, gather_across_devices=distributed)
