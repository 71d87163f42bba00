"""SimDE's auxiliary masked-language-model loss, added to the contrastive loss (METHODS §3: weight 0.1).

The head is a sentence-transformers module (`MaskedLMHead`) appended to the model for the run: inside the model,
it is inside the DDP-wrapped module under torchrun (its gradients are averaged like the encoder's), in every
checkpoint (a resume restores it), and it is taken off before ``OUT/model`` is written, so the saved encoder is
the plain model. It starts from the checkpoint's pretrained MLM head where the checkpoint has one (BERT,
RoBERTa/XLM-R, DistilBERT, MPNet, ModernBERT layouts); otherwise it starts from random weights and says so.
Its output layer is the encoder's input embedding matrix (tied), plus a bias.

Masking is `transformers.DataCollatorForLanguageModeling`'s (15 %: 80 % mask id, 10 % random id, 10 % kept), done
by the collator on a copy of the anchor column, one generator per row (seeded by run seed and row index).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import torch
import torch.nn.functional as F
from sentence_transformers import SentenceTransformer
from sentence_transformers.base.modules.module import Module
from torch import Tensor, nn

from lengthwise.core.errors import SettingError

__all__ = ["TARGETS", "MaskedLMAuxiliary", "MaskedLMHead", "masked_lm_head", "remove_masked_lm_head"]

logger = logging.getLogger(__name__)

IGNORE = -100  # cross-entropy's ignore_index: positions not predicted
TARGETS = "mlm_targets"  # features key: (B, T) target ids, IGNORE where not masked; its presence asks for the loss
LOSS = "mlm_loss"  # features key the head writes its loss to
# Where the MLM heads of the supported layouts keep their transform, layer norm and output bias.
_DENSE = ("cls.predictions.transform.dense", "lm_head.dense", "vocab_transform", "head.dense")
_NORM = ("cls.predictions.transform.LayerNorm", "lm_head.layer_norm", "vocab_layer_norm", "head.norm")
_BIAS = ("cls.predictions.bias", "lm_head.bias", "vocab_projector.bias", "decoder.bias")


class MaskedLMHead(Module):
    """BERT's MLM head (dense → activation → LayerNorm → tied output embeddings + bias) as a model module.

    Without `TARGETS` in the features it does nothing (encoding is unchanged); with them it writes the mean
    cross-entropy over the masked positions to ``features["mlm_loss"]``, scoring only those positions.
    """

    config_keys: list[str] = ["hidden_size", "vocab_size", "activation", "layer_norm_eps"]  # noqa: RUF012 (ST API)

    def __init__(self, hidden_size: int, vocab_size: int, activation: str = "gelu", layer_norm_eps: float = 1e-12):
        super().__init__()
        from transformers.activations import ACT2FN

        self.hidden_size, self.vocab_size = hidden_size, vocab_size
        self.activation, self.layer_norm_eps = activation, layer_norm_eps
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.act = ACT2FN[activation]
        self.norm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
        self.bias = nn.Parameter(torch.zeros(vocab_size))
        self._output: tuple[nn.Embedding, ...] = ()  # a tuple: the tied matrix is the encoder's, not a copy

    def tie(self, embeddings: nn.Embedding) -> None:
        """Score against `embeddings.weight` (V, H), the encoder's input embeddings."""
        if embeddings.weight.shape != (self.vocab_size, self.hidden_size):
            shape = tuple(embeddings.weight.shape)
            raise SettingError(
                "embeddings", shape, f"the MLM head is {self.vocab_size}×{self.hidden_size}; tie it to that"
            )
        self._output = (embeddings,)

    def forward(self, features: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        targets = features.get(TARGETS)
        if targets is None:
            return features
        if not self._output:
            raise RuntimeError("MaskedLMHead.tie(embeddings) was not called")
        tokens = features["token_embeddings"]  # (B, T, H)
        picked = targets != IGNORE  # (B, T)
        hidden = self.norm(self.act(self.dense(tokens[picked])))  # (P, H)
        logits = hidden @ self._output[0].weight.T + self.bias  # (P, V)
        if picked.any():
            features[LOSS] = F.cross_entropy(logits, targets[picked])
        else:  # no position drawn in this batch: a zero that keeps every parameter in the graph
            features[LOSS] = logits.sum() * 0.0
        return features

    def save(self, output_path: str, *args: Any, safe_serialization: bool = True, **kwargs: Any) -> None:
        self.save_config(output_path)
        self.save_torch_weights(output_path, safe_serialization=safe_serialization)

    @classmethod
    def load(
        cls,
        model_name_or_path: str,
        subfolder: str = "",
        token: bool | str | None = None,
        cache_folder: str | None = None,
        revision: str | None = None,
        local_files_only: bool = False,
        init_defaults: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> MaskedLMHead:
        hub: dict[str, Any] = {
            "subfolder": subfolder,
            "token": token,
            "cache_folder": cache_folder,
            "revision": revision,
            "local_files_only": local_files_only,
        }
        config = cls.load_config(model_name_or_path, **hub)
        head = cls(**{key: config[key] for key in cls.config_keys if key in config})
        return cls.load_torch_weights(model_name_or_path, model=head, **hub)


def _activation(config: Any) -> str:
    model_type = getattr(config, "model_type", "")
    if model_type in ("roberta", "xlm-roberta", "camembert", "mpnet"):
        return "gelu"  # their lm_head applies gelu whatever hidden_act says
    for name in ("classifier_activation", "activation", "hidden_act"):  # ModernBERT, DistilBERT, BERT
        value = getattr(config, name, None)
        if isinstance(value, str):
            return value
    return "gelu"


def _pretrained_state(source: str, trust_remote_code: bool) -> dict[str, Tensor] | None:
    """The MLM head tensors (dense, norm, bias) of the checkpoint at `source`, or None when it has none."""
    from transformers import AutoModelForMaskedLM

    try:
        mlm, info = AutoModelForMaskedLM.from_pretrained(
            source, output_loading_info=True, trust_remote_code=trust_remote_code
        )
    except (OSError, ValueError, KeyError, TypeError) as err:  # no MLM class for this architecture, or no files
        logger.debug("no MLM model for %s: %s", source, err)
        return None
    state, missing = mlm.state_dict(), set(info.get("missing_keys", ()))
    found: dict[str, Tensor] = {}
    for target, prefixes in (("dense", _DENSE), ("norm", _NORM)):
        for prefix in prefixes:
            if f"{prefix}.weight" in state:
                if f"{prefix}.weight" in missing:
                    return None
                found[f"{target}.weight"] = state[f"{prefix}.weight"]
                if f"{prefix}.bias" in state and f"{prefix}.bias" not in missing:
                    found[f"{target}.bias"] = state[f"{prefix}.bias"]
                break
    bias = next((key for key in _BIAS if key in state and key not in missing), None)
    if "dense.weight" not in found or "norm.weight" not in found or bias is None:
        return None
    found["bias"] = state[bias]
    return found


def masked_lm_head(
    model: SentenceTransformer, *, seed: int = 0, trust_remote_code: bool = False
) -> tuple[MaskedLMHead, str]:
    """A head for `model`'s encoder, tied to its input embeddings: ("pretrained", from the checkpoint's own MLM
    head) or ("new", random from `seed`) — the second part of the result says which, and "new" logs a warning."""
    hf_model: Any = getattr(model[0], "auto_model", None)
    if hf_model is None:
        raise SettingError("model", type(model[0]).__name__, "the MLM loss needs a first module that is a Transformer")
    config = hf_model.config
    embeddings = hf_model.get_input_embeddings()
    vocab, hidden = embeddings.weight.shape
    eps = float(getattr(config, "layer_norm_eps", getattr(config, "norm_eps", 1e-12)))
    with torch.random.fork_rng(devices=[]):  # the same seed gives the same head, whatever ran before
        torch.manual_seed(seed)
        head = MaskedLMHead(hidden, vocab, _activation(config), eps)
    source = str(getattr(config, "_name_or_path", "") or "")
    state = _pretrained_state(source, trust_remote_code) if source else None
    if state is not None and state["bias"].shape == head.bias.shape:
        head.load_state_dict(state, strict=False)  # a head without biases (ModernBERT) keeps zeros there
        start = "pretrained"
    else:
        start = "new"
        logger.warning(
            "%s has no pretrained MLM head; SimDE's MLM head starts from random weights", source or "the model"
        )
    head.tie(embeddings)
    return head.to(embeddings.weight.device), start


def remove_masked_lm_head(model: SentenceTransformer) -> None:
    """Take every `MaskedLMHead` off `model` (before it is saved as the trained encoder)."""
    for index in reversed(range(len(model))):
        if isinstance(model[index], MaskedLMHead):
            del model[index]


class MaskedLMAuxiliary(nn.Module):
    """``contrastive + weight · MLM``: the MLM loss of the model's `MaskedLMHead` on the masked anchor column.

    | inputs | from |
    |---|---|
    | (anchor, positive) columns and a masked copy of the anchor (``mlm_*`` columns) | `ViewCollator(mlm=...)` |

    Example::

        model.append(masked_lm_head(model)[0])
        loss = MaskedLMAuxiliary(pair_loss(model), model, weight=0.1)

    Citation: "SimDE: Simple Contrastive Learning for Document Embeddings" (EMNLP submission); masking as in BERT
    (Devlin et al., 2019).
    """

    def __init__(self, contrastive: nn.Module, model: nn.Module, weight: float = 0.1) -> None:
        super().__init__()
        self.contrastive = contrastive
        self.model = model  # the trainer swaps in its DDP-wrapped model
        self.weight = weight

    def forward(
        self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None = None
    ) -> dict[str, Tensor]:
        features = list(sentence_features)
        if len(features) != 3 or TARGETS.removeprefix("mlm_") not in features[2]:
            problem = "the MLM loss needs the collator's masked column (ViewCollator(..., mlm=...))"
            raise SettingError("len(sentence_features)", len(features), problem)
        contrastive = self.contrastive([dict(f) for f in features[:2]], labels)
        masked = dict(features[2])
        targets = masked.pop(TARGETS.removeprefix("mlm_"))
        output = self.model({**masked, TARGETS: targets})  # (B, T) targets → the head's loss
        return {"contrastive": contrastive, "mlm": self.weight * output[LOSS]}
