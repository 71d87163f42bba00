"""TempScale families: which architectures TempScale reaches, and how (METHODS §2).

`FAMILIES` is data: per family the self-attention class, its query projection and whether the module keeps a
``scaling`` attribute; `detect_family` finds a model's family and attention modules or raises `TempScaleError`
naming the supported ones, so TempScale is never a silent no-op.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from sentence_transformers import SentenceTransformer
from torch import nn

from lengthwise.core.quantize import RowScaledLinear
from lengthwise.tempscale.config import TempScaleError

__all__ = ["FAMILIES", "Family", "detect_family", "query_rows"]


@dataclass(frozen=True)
class Family:
    """How one architecture's self-attention is reached: the module class and its query projection."""

    name: str
    model_types: tuple[str, ...]
    attention_class: str  # under transformers.models, e.g. "bert.modeling_bert.BertSelfAttention"
    query: str  # attribute of the attention module holding the query projection (nn.Linear)
    fused_qkv: bool = False  # query = the first third of the projection's output (ModernBERT's Wqkv)
    scaling_attribute: bool = True  # the module keeps `scaling`, passed to every attention backend
    position_bias: str | None = None  # the model's relative position bias (an nn.Embedding), if any
    positions: str = "absolute"


FAMILIES: tuple[Family, ...] = (  # attention classes under transformers.models
    Family("BERT", ("bert",), "bert.modeling_bert.BertSelfAttention", "query"),
    Family("RoBERTa", ("roberta",), "roberta.modeling_roberta.RobertaSelfAttention", "query"),
    Family("XLM-R", ("xlm-roberta",), "xlm_roberta.modeling_xlm_roberta.XLMRobertaSelfAttention", "query"),
    Family("DistilBERT", ("distilbert",), "distilbert.modeling_distilbert.DistilBertSelfAttention", "q_lin"),
    Family(
        "MPNet",
        ("mpnet",),
        "mpnet.modeling_mpnet.MPNetSelfAttention",
        "q",
        scaling_attribute=False,
        position_bias="encoder.relative_attention_bias",
        positions="relative bias (added after √d scaling)",
    ),
    Family(
        "ModernBERT",
        ("modernbert",),
        "modernbert.modeling_modernbert.ModernBertAttention",
        "Wqkv",
        fused_qkv=True,
        scaling_attribute=False,
        positions="rotary (RoPE)",
    ),
)


def _supported() -> str:
    return ", ".join(f"{f.name} ({'/'.join(f.model_types)})" for f in FAMILIES)


def _import_class(dotted: str) -> type:
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(f"transformers.models.{module}"), name)


def detect_family(model: SentenceTransformer) -> tuple[Family, nn.Module, list[nn.Module]]:
    """The model's family, its Hugging Face model and its self-attention modules, in layer order.

    Raises `TempScaleError` naming the supported families for anything else, so TempScale is never a no-op.
    """
    first = model[0] if len(model) else None
    hf_model = getattr(first, "auto_model", None)
    config = getattr(hf_model, "config", None)
    if not isinstance(hf_model, nn.Module) or config is None:
        problem = "TempScale needs a SentenceTransformer whose first module is a Transformer"
        raise TempScaleError(field="model[0]", value=type(first).__name__, problem=problem)
    model_type = getattr(config, "model_type", None)
    family = next((f for f in FAMILIES if model_type in f.model_types), None)
    if family is None:
        raise TempScaleError(
            field=None,
            value=None,
            problem=f"TempScale does not support {type(hf_model).__name__} (model type {model_type!r}); "
            f"supported: {_supported()}",
        )
    attention_class = _import_class(family.attention_class)
    attentions = [m for m in hf_model.modules() if isinstance(m, attention_class)]
    cross = [type(m).__name__ for m in hf_model.modules() if "CrossAttention" in type(m).__name__]
    layers = getattr(config, "num_hidden_layers", None)
    if cross or not attentions or (layers is not None and len(attentions) != layers):
        problem = (
            f"{type(hf_model).__name__}: found {len(attentions)} {attention_class.__name__} modules for {layers} "
            f"layers{' and cross-attention' if cross else ''}; TempScale supports plain {family.name} encoders"
        )
        raise TempScaleError(field=None, value=None, problem=problem)
    for attention in attentions:
        projection = getattr(attention, family.query, None)
        if type(projection) is not nn.Linear and not isinstance(projection, RowScaledLinear):
            raise TempScaleError(
                field=None,
                value=None,
                problem=f"{family.name} query projection is {type(projection).__name__}, not a plain Linear "
                "(a PEFT adapter?); merge adapters before TempScale",
            )
    return family, hf_model, attentions


def query_rows(family: Family, attention: nn.Module) -> tuple[nn.Linear, slice]:
    """The query projection of one attention module and the rows of its output that are queries."""
    projection = getattr(attention, family.query)
    rows = projection.out_features // 3 if family.fused_qkv else projection.out_features
    return projection, slice(0, rows)
