"""Training losses: InfoNCE pairs through sentence-transformers' own losses, and HiCL's hierarchical loss.

`hicl_loss` is plain tensor maths; `HiCLLoss` is the thin `nn.Module` the sentence-transformers trainer calls. Pair
objectives (SimCSE, LA(SER)³, COCO-DR, copy-and-concat, SimDE) are InfoNCE with in-batch negatives at τ = 0.05,
which is `MultipleNegativesRankingLoss(scale=20)`; its cached (GradCache) variant serves big batches.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum
from typing import TypeVar

import torch
import torch.nn.functional as F
from sentence_transformers import SentenceTransformer
from sentence_transformers.sentence_transformer.losses import (
    CachedMultipleNegativesRankingLoss,
    MultipleNegativesRankingLoss,
)
from torch import Tensor, nn

from lengthwise.core.errors import SettingError
from lengthwise.training.methods import Denominator, SameSequence

__all__ = ["HiCLLoss", "hicl_loss", "info_nce", "pair_loss", "sequence_vectors"]

E = TypeVar("E", bound=Enum)
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


def _option(kind: type[E], value: object, field: str) -> E:
    """`value` as a member of the Enum `kind`, or a one-line `SettingError` on `field` listing the valid values."""
    try:
        return kind(value)
    except ValueError:
        valid = ", ".join(repr(member.value) for member in kind)
        raise SettingError(field, value, f"not a HiCL option; use {valid}") from None


def hicl_loss(
    first: Tensor,
    second: Tensor,
    owner: Tensor,
    lengths: Tensor,
    alpha: float,
    *,
    same_sequence: SameSequence | str = SameSequence.NEITHER,
    denominator: Denominator | str = Denominator.SUMMATION,
    scale: float = SCALE,
    rows: slice | None = None,
) -> dict[str, Tensor]:
    """HiCL (Eq. 2 and §3.2): ``α·L_local + (1 - α)·L_global``, returned as its two weighted parts.

    second (S, D): the second dropout view of all S segments; owner (S,): which sequence each belongs to (0..B-1,
    every sequence present, a sequence's segments adjacent); lengths (S,): tokens per segment. first (R, D): the
    first view of the segments `rows` (default: all of them, R = S). The local loss contrasts segment j of
    sequence i (view 1) with its own view 2; by default segments of the same sequence are neither positives nor
    negatives ("neither"); the ablations make them extra positives or ordinary negatives. "averaging" weighs
    each other-sequence negative by 1 / (segments in its sequence) instead of 1 (hicl App. A.8).

    With `rows` a part of the batch (one process's share under DDP, the rest gathered from the others) each part
    is that share's *sum* over the global count, so the parts of all shares add up to the whole batch's means.
    """
    same_sequence = _option(SameSequence, same_sequence, "same_sequence")
    denominator = _option(Denominator, denominator, "denominator")
    rows = rows if rows is not None else slice(0, len(owner))
    count = int(owner.max().item()) + 1  # B, sequences in the whole batch
    mine = owner[rows]  # (R,)
    targets = torch.arange(rows.start or 0, rows.stop, device=owner.device)  # (R,) own view 2 of each row
    logits = F.normalize(first, dim=-1) @ F.normalize(second, dim=-1).T * scale  # (R, S)
    same = mine[:, None] == owner[None, :]  # (R, S)
    own = F.one_hot(targets, len(owner)).bool()  # (R, S)
    if denominator is Denominator.AVERAGING:
        per_sequence = torch.bincount(owner, minlength=count).to(logits.dtype)  # (B,)
        log_weight = -torch.log(per_sequence[owner])[None, :].expand_as(logits)  # (R, S)
        logits = logits + torch.where(same, torch.zeros_like(logits), log_weight)
    if same_sequence is SameSequence.NEITHER:
        local = F.cross_entropy(logits.masked_fill(same & ~own, float("-inf")), targets, reduction="sum")
    elif same_sequence is SameSequence.NEGATIVE:
        local = F.cross_entropy(logits, targets, reduction="sum")
    else:
        positive = torch.logsumexp(logits.masked_fill(~same, float("-inf")), dim=1)  # (R,)
        local = (torch.logsumexp(logits, dim=1) - positive).sum()
    low, high = int(mine.min().item()), int(mine.max().item()) + 1  # this share's sequences
    sequences_first = sequence_vectors(first, mine - low, lengths[rows], high - low)  # (B_r, D)
    sequences_second = sequence_vectors(second, owner, lengths, count)  # (B, D)
    sequence_logits = F.normalize(sequences_first, dim=-1) @ F.normalize(sequences_second, dim=-1).T * scale
    wanted = torch.arange(low, high, device=owner.device)  # (B_r,)
    global_ = F.cross_entropy(sequence_logits, wanted, reduction="sum")
    return {
        "hicl_local": alpha * local / len(owner),
        "hicl_global": (1.0 - alpha) * global_ / count,
    }


def _gather_segments(second: Tensor, owner: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor, Tensor, slice, int]:
    """Every process's second views, owners (made global) and lengths, with gradients for the embeddings.

    Processes hold different numbers of segments, so each pads to the largest count before the all-gather and
    the padding is dropped after. Returns (second (S, D), owner (S,), lengths (S,), this process's rows, world).
    """
    from sentence_transformers.util import all_gather, all_gather_with_grad, get_rank, get_world_size

    world, rank = get_world_size(), get_rank()
    if world == 1:
        return second, owner, lengths, slice(0, len(owner)), 1
    sizes = all_gather(torch.tensor([len(owner), int(owner.max().item()) + 1], device=owner.device)[None])  # (W, 2)
    counts, sequences = sizes[:, 0].tolist(), sizes[:, 1].tolist()
    most = max(counts)
    pad = most - len(owner)
    gathered = all_gather_with_grad(F.pad(second, (0, 0, 0, pad)))  # (W · most, D)
    owners = all_gather(F.pad(owner, (0, pad)))  # (W · most,)
    spans = all_gather(F.pad(lengths, (0, pad)))
    keep = torch.cat([torch.arange(n, device=owner.device) + r * most for r, n in enumerate(counts)])  # (S,)
    offsets = torch.repeat_interleave(
        torch.tensor([sum(sequences[:r]) for r in range(world)], device=owner.device), most
    )  # (W · most,) first global sequence index of each process
    start = sum(counts[:rank])
    return (
        gathered.index_select(0, keep),
        (owners + offsets).index_select(0, keep),
        spans.index_select(0, keep),
        slice(start, start + len(owner)),
        world,
    )


class HiCLLoss(nn.Module):
    """HiCL on SimCSE: every segment encoded twice (dropout), local segment loss plus global sequence loss.

    | inputs | from |
    |---|---|
    | one column of segments with ``owner`` and ``segment_length`` | `SegmentCollator` |

    With `gather_across_devices` (under torchrun), the negatives are the segments and sequences of *every*
    process, as with one process and the whole batch; each process returns its share times the number of
    processes, so DDP's gradient average equals the one-process gradient.

    Example::

        loss = HiCLLoss(model, alpha=0.05)
        # trainer = SentenceTransformerTrainer(model, args, dataset, loss=loss, data_collator=SegmentCollator(...))

    Citation: Wu et al., "HiCL: Hierarchical Contrastive Learning of Unsupervised Sentence Embeddings" (2023).
    """

    def __init__(
        self,
        model: nn.Module,
        alpha: float = 0.05,
        same_sequence: SameSequence | str = SameSequence.NEITHER,
        denominator: Denominator | str = Denominator.SUMMATION,
        scale: float = SCALE,
        gather_across_devices: bool = False,
    ) -> None:
        super().__init__()
        if not 0.0 <= alpha <= 1.0:
            raise SettingError("alpha", alpha, "HiCL's alpha must lie in [0, 1]")
        self.model = model
        self.alpha = alpha
        self.same_sequence = _option(SameSequence, same_sequence, "same_sequence")
        self.denominator = _option(Denominator, denominator, "denominator")
        self.scale = scale
        self.gather_across_devices = gather_across_devices

    def forward(
        self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None = None
    ) -> dict[str, Tensor]:
        (features,) = list(sentence_features)
        owner = features["owner"]
        lengths = features["segment_length"]
        inputs = {key: value for key, value in features.items() if key not in ("owner", "segment_length")}
        first = self.model(dict(inputs))["sentence_embedding"]  # (S, D), dropout mask 1
        second = self.model(dict(inputs))["sentence_embedding"]  # (S, D), dropout mask 2
        rows, world = slice(0, len(owner)), 1
        if self.gather_across_devices:
            second, owner, lengths, rows, world = _gather_segments(second, owner, lengths)
        parts = hicl_loss(
            first,
            second,
            owner,
            lengths,
            self.alpha,
            same_sequence=self.same_sequence,
            denominator=self.denominator,
            scale=self.scale,
            rows=rows,
        )
        return {name: value * world for name, value in parts.items()}

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
