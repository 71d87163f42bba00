"""The run-time TempScale patch (METHODS §2): hooks and ``scaling`` changes on one model, removable exactly.

A scalar t on BERT, RoBERTa, XLM-R and DistilBERT changes the modules' ``scaling`` attribute (passed to every
attention backend, so SDPA / flash attention stay on); MPNet, ModernBERT and length schedules divide the query
projection's output in a forward hook, per sequence, with the lengths read from the attention mask. MPNet's
relative position bias is divided by t too when ``scale_position_bias`` is set. Use it through
`lengthwise.tempscale.apply_tempscale` / `tempscale`, which keep one patch per model.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from sentence_transformers import SentenceTransformer
from torch import nn

from lengthwise.tempscale.config import Role, TempScaleConfig, TempScaleError
from lengthwise.tempscale.families import detect_family

__all__ = ["TempScalePatch"]


def _scaling(attention: nn.Module) -> float:
    return float(vars(attention)["scaling"])  # a plain float attribute, read by every attention backend


def _set_scaling(attention: nn.Module, value: float) -> None:
    vars(attention)["scaling"] = value


class TempScalePatch:
    """A TempScale applied to one model: the hooks and attribute changes, and how to undo them exactly.

    A pre-hook on the `SentenceTransformer` reads each call's role from sentence-transformers' own ``task``
    argument (``encode_query`` → query, ``encode_document`` → document, else symmetric; `role_override`
    wins) and the sequence lengths from ``features["attention_mask"]``; a post-hook puts back the symmetric t.
    """

    def __init__(self, model: SentenceTransformer, config: TempScaleConfig) -> None:
        self.family, _, self.attentions = detect_family(model)
        self.model, self.config = model, config
        self.role_override: Role | None = None
        self.query_hooks = config.schedule is not None or not self.family.scaling_attribute
        self._current: float | torch.Tensor | None = None  # this call's temperature: scalar or (B,)
        self._original_scaling = [_scaling(m) for m in self.attentions] if self.family.scaling_attribute else []
        self._handles = [
            model.register_forward_pre_hook(self._before, with_kwargs=True),
            model.register_forward_hook(self._after, always_call=True),
        ]
        if self.query_hooks:
            self._handles += [
                getattr(m, self.family.query).register_forward_hook(self._scale_query) for m in self.attentions
            ]
        if self.family.position_bias is not None and config.scale_position_bias:
            self._handles += [m.register_forward_pre_hook(self._scale_bias, with_kwargs=True) for m in self.attentions]
        self._set(Role.SYMMETRIC, None)

    def _set(self, role: Role, lengths: torch.Tensor | None) -> None:
        t = self.config.temperature(role)
        if self.config.schedule is None:
            self._current = t
        else:  # without lengths (a direct call of the inner model) the query hook refuses to guess
            self._current = None if lengths is None else t * self.config.schedule(lengths)  # (B,)
        if not self.query_hooks:
            for attention, original in zip(self.attentions, self._original_scaling, strict=True):
                _set_scaling(attention, original / t)

    def _before(self, module: nn.Module, args: tuple, kwargs: dict[str, Any]) -> None:
        task = kwargs.get("task")
        role = Role(task) if task in (Role.QUERY.value, Role.DOCUMENT.value) else Role.SYMMETRIC
        features = args[0] if args else kwargs.get("input", {})
        mask = features.get("attention_mask") if isinstance(features, Mapping) else None  # a BatchEncoding
        lengths = mask.sum(dim=-1) if isinstance(mask, torch.Tensor) and mask.dim() == 2 else None  # (B,)
        self._set(self.role_override or role, lengths)

    def _after(self, module: nn.Module, args: tuple, output: Any) -> None:
        self._set(Role.SYMMETRIC, None)

    def _temperature_view(self, like: torch.Tensor, fused: bool) -> torch.Tensor | float:
        """This call's temperature, broadcastable to `like` (B, T, C) or (B, H, T, T); fused: only C[:C/3]."""
        t = self._current
        if t is None:
            raise TempScaleError(
                None, None, "a length schedule needs the attention mask: call the SentenceTransformer itself"
            )
        if isinstance(t, torch.Tensor):
            if t.shape[0] != like.shape[0]:
                raise TempScaleError(None, None, f"TempScale: a batch of {like.shape[0]} rows but {t.shape[0]} lengths")
            t = t.to(like.dtype).view(-1, *([1] * (like.dim() - 1)))  # (B, 1, ..)
        if not fused:
            return t
        width = like.shape[-1] // 3
        ones = torch.ones(like.shape[-1], dtype=like.dtype, device=like.device)  # (3D,)
        if isinstance(t, torch.Tensor):
            return torch.cat([t.expand(*t.shape[:-1], width), ones[width:].expand(*t.shape[:-1], 2 * width)], -1)
        return torch.cat([ones[:width] * t, ones[width:]])

    def _scale_query(self, module: nn.Module, args: tuple, output: torch.Tensor) -> torch.Tensor:
        return output / self._temperature_view(output, self.family.fused_qkv)  # (B, T, D) or (B, T, 3D)

    def _scale_bias(self, module: nn.Module, args: tuple, kwargs: dict[str, Any]) -> tuple[tuple, dict[str, Any]]:
        bias = kwargs.get("position_bias", args[2] if len(args) > 2 else None)  # (B, H, T, T)
        if bias is None:
            return args, kwargs
        scaled = bias / self._temperature_view(bias, False)
        if "position_bias" in kwargs:
            return args, {**kwargs, "position_bias": scaled}
        return (*args[:2], scaled, *args[3:]), kwargs

    def describe(self) -> dict[str, Any]:
        """The settings this patch applies, as JSON (`lengthwise.core.models.ModelPatch`)."""
        return self.config.to_dict()

    def remove(self) -> None:
        """Remove every hook and restore the original `scaling` values (bit for bit)."""
        for handle in self._handles:
            handle.remove()
        self._handles = []
        if self._original_scaling:
            for attention, original in zip(self.attentions, self._original_scaling, strict=True):
                _set_scaling(attention, original)
