"""Apply, remove or scope a live TempScale patch, and encode under one (METHODS §2)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
from sentence_transformers import SentenceTransformer

from lengthwise.core.encoder import SentenceTransformerEncoder
from lengthwise.core.models import PATCH_ATTRIBUTE
from lengthwise.tempscale.config import TempScaleConfig, TempScaleError
from lengthwise.tempscale.patch import TempScalePatch

__all__ = ["TempScaleEncoder", "apply_tempscale", "current_tempscale", "remove_tempscale", "tempscale"]

_ATTRIBUTE = PATCH_ATTRIBUTE


def current_tempscale(model: SentenceTransformer) -> TempScalePatch | None:
    """The patch live on `model`, or None."""
    patch = getattr(model, _ATTRIBUTE, None)
    return patch if isinstance(patch, TempScalePatch) else None


def apply_tempscale(model: SentenceTransformer, config: TempScaleConfig | float) -> TempScalePatch:
    """Patch `model` in place (see the module docstring); raise if it is already patched or unsupported."""
    config = config if isinstance(config, TempScaleConfig) else TempScaleConfig(t=config)
    if current_tempscale(model) is not None:
        raise TempScaleError(
            field=None,
            value=None,
            problem="the model is already TempScale'd; remove_tempscale(model) first, or use tempscale(...)",
        )
    patch = TempScalePatch(model, config)
    object.__setattr__(model, _ATTRIBUTE, patch)
    return patch


def remove_tempscale(model: SentenceTransformer) -> TempScaleConfig | None:
    """Undo the live patch, if any, and return its settings."""
    patch = current_tempscale(model)
    if patch is None:
        return None
    patch.remove()
    object.__delattr__(model, _ATTRIBUTE)
    return patch.config


@contextmanager
def tempscale(model: SentenceTransformer, config: TempScaleConfig | float | None) -> Iterator[TempScalePatch | None]:
    """Run with `config` (None: no TempScale), then put back whatever patch the model had before."""
    previous = remove_tempscale(model)
    try:
        yield apply_tempscale(model, config) if config is not None else None
    finally:
        remove_tempscale(model)
        if previous is not None:
            apply_tempscale(model, previous)


@dataclass
class TempScaleEncoder:
    """A `TextEncoder` (lengthwise.core.encoder) running `model` under `config`: t for `encode`, t_query for
    queries, t_doc for documents, each times the length schedule; the model is left as it was after each call."""

    model: SentenceTransformer
    config: TempScaleConfig

    def _run(self, method: str, texts: Sequence[str], batch_size: int, show_progress: bool) -> np.ndarray:
        with tempscale(self.model, self.config):
            encode = getattr(SentenceTransformerEncoder(self.model), method)
            return encode(texts, batch_size=batch_size, show_progress=show_progress)

    def encode(self, texts: Sequence[str], *, batch_size: int = 32, show_progress: bool = False) -> np.ndarray:
        return self._run("encode", texts, batch_size, show_progress)

    def encode_queries(self, texts: Sequence[str], *, batch_size: int = 32, show_progress: bool = False) -> np.ndarray:
        return self._run("encode_queries", texts, batch_size, show_progress)

    def encode_documents(
        self, texts: Sequence[str], *, batch_size: int = 32, show_progress: bool = False
    ) -> np.ndarray:
        return self._run("encode_documents", texts, batch_size, show_progress)
