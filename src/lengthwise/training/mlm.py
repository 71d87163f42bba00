"""SimDE's optional auxiliary masked-language-model loss, added to a contrastive loss (METHODS §3: weight 0.1).

The encoders lengthwise trains are sentence-transformers models without an MLM head, so the head is new: a
BERT-style transform (dense, GELU, LayerNorm) whose output is scored against the tied input embeddings. It lives
in the loss module, so the trainer optimises it with the model and it is not saved with the encoder.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
import torch.nn.functional as F
from sentence_transformers import SentenceTransformer
from torch import Tensor, nn

__all__ = ["MaskedLMAuxiliary", "mask_tokens"]

IGNORE = -100  # cross-entropy's ignore_index: positions not predicted


def mask_tokens(
    input_ids: Tensor,
    maskable: Tensor,
    mask_id: int,
    vocab_size: int,
    generator: torch.Generator | None = None,
    rate: float = 0.15,
) -> tuple[Tensor, Tensor]:
    """BERT masking: pick `rate` of the maskable positions; 80% → mask id, 10% → random id, 10% kept.

    input_ids, maskable (B, T). Returns (masked ids (B, T), labels (B, T) with `IGNORE` where not picked).
    """
    device = input_ids.device
    picked = (torch.rand(input_ids.shape, generator=generator, device=device) < rate) & maskable  # (B, T)
    labels = torch.where(picked, input_ids, torch.full_like(input_ids, IGNORE))
    roll = torch.rand(input_ids.shape, generator=generator, device=device)  # (B, T)
    masked = torch.where(picked & (roll < 0.8), torch.full_like(input_ids, mask_id), input_ids)
    random_ids = torch.randint(vocab_size, input_ids.shape, generator=generator, device=device)
    masked = torch.where(picked & (roll >= 0.8) & (roll < 0.9), random_ids, masked)
    return masked, labels


class MaskedLMAuxiliary(nn.Module):
    """``contrastive + weight · MLM`` where the MLM loss is on a masked copy of the anchor column.

    | inputs | from |
    |---|---|
    | (anchor, positive) columns | `ViewCollator` |

    Example::

        loss = MaskedLMAuxiliary(pair_loss(model), model, weight=0.1)

    Citation: "SimDE: Simple Contrastive Learning for Document Embeddings" (EMNLP submission); masking as in BERT
    (Devlin et al., 2019).
    """

    def __init__(self, contrastive: nn.Module, model: SentenceTransformer, weight: float = 0.1) -> None:
        super().__init__()
        self.contrastive = contrastive
        self.model: nn.Module = model  # the trainer may swap in its DDP-wrapped model
        self.weight = weight
        tokenizer = model.tokenizer
        if tokenizer.mask_token_id is None:
            raise ValueError("the MLM auxiliary loss needs a tokenizer with a mask token")
        self.mask_id = int(tokenizer.mask_token_id)
        self.special_ids = sorted(set(tokenizer.all_special_ids))
        embeddings = model[0].auto_model.get_input_embeddings()  # type: ignore[union-attr,operator]
        self._embeddings = (embeddings,)  # a tuple: tied weights, not a second registered copy
        hidden = embeddings.weight.shape[1]
        self.transform = nn.Sequential(nn.Linear(hidden, hidden), nn.GELU(), nn.LayerNorm(hidden))
        self.bias = nn.Parameter(torch.zeros(embeddings.weight.shape[0]))

    def forward(
        self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None = None
    ) -> dict[str, Tensor]:
        features = list(sentence_features)
        contrastive = self.contrastive([dict(f) for f in features], labels)
        anchor = features[0]
        input_ids = anchor["input_ids"]  # (B, T)
        specials = torch.tensor(self.special_ids, device=input_ids.device)
        maskable = anchor["attention_mask"].bool() & ~torch.isin(input_ids, specials)  # (B, T)
        weight = self._embeddings[0].weight  # (V, H), tied to the encoder's input embeddings
        masked, targets = mask_tokens(input_ids, maskable, self.mask_id, weight.shape[0])
        inputs = {key: value for key, value in anchor.items() if key in ("attention_mask", "token_type_ids")}
        tokens = self.model({**inputs, "input_ids": masked})["token_embeddings"]  # (B, T, H)
        logits = self.transform(tokens) @ weight.T + self.bias  # (B, T, V)
        mlm = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE)
        if not torch.isfinite(mlm):  # no position picked in this batch
            mlm = logits.sum() * 0.0
        return {"contrastive": contrastive, "mlm": self.weight * mlm}
