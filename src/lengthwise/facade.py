"""A model loaded as saved and the encoder it runs through: where the hall's `ModelLoader` is bound.

`load_model` is the plain load (`lengthwise.core.models.load_plain_model`) with the settings lengthwise saved beside
the model re-applied: a TempScale (tempscale room) and a long-document choice (longdoc room), hence here, where rooms
may meet; `build_encoder` puts TempScale and long documents around a loaded model. A room that embeds with a model by
name takes the loader as a parameter (`ModelLoader`): `encode` is the longdoc room's own with this `load_model`
bound. The search room's indexes take the loader as ``load_model=`` (the CLI, the service and `lengthwise.pipelines`
pass it) and the long-document method that made their windows (`WindowMethod`), bound here: `LongIndex`,
`MilvusIndex`, `open_index` and `build_index` are the search room's with `lengthwise.longdoc.method.LONG_DOCUMENTS`;
`opened_index` is how a job takes an index it is handed (a path, or one opened already).
`train` is training with the evaluation room's dev evaluator. The jobs that join two rooms are in
`lengthwise.pipelines`.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lengthwise.core.defaults import DEFAULT_MODEL
from lengthwise.longdoc.method import LONG_DOCUMENTS
from lengthwise.longdoc.storage.encode import encode as encode_corpus
from lengthwise.search import backend as search_backend
from lengthwise.search import index as search_index
from lengthwise.search.milvus import index as milvus_index

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

    from lengthwise.core.encoder import TextEncoder
    from lengthwise.core.models import ModelLoader
    from lengthwise.longdoc.config import LongDocConfig
    from lengthwise.search.backend import Backend
    from lengthwise.search.protocols import SearchIndex
    from lengthwise.tempscale.config import TempScaleConfig
    from lengthwise.training.config import TrainConfig
    from lengthwise.training.run import TrainResult

__all__ = [
    "EncoderSetup",
    "LongIndex",
    "MilvusIndex",
    "build_encoder",
    "build_index",
    "encode",
    "load_model",
    "open_index",
    "opened_index",
    "train",
]


def load_model(
    name_or_path: str | os.PathLike[str] = DEFAULT_MODEL,
    *,
    device: str | None = None,
    trust_remote_code: bool = False,
    max_seq_length: int | None = None,
    precision: str = "fp32",
) -> SentenceTransformer:
    """Load a model as saved: `lengthwise.core.models.load_plain_model`, then re-apply the TempScale settings saved
    in the model's folder and keep its saved long-document choice (`lengthwise longdoc tune --save`) for
    `LongEncoder(model)`.

    A folder written by `save_tempscale` reloads patched; a baked one (its weights already carry 1/t) does not.
    `precision` is ``"fp32"`` (the default), ``"bf16"`` or ``"fp16"`` (the transformer in half precision, the vectors
    fp32; `lengthwise.core.precision`), ``"int8"`` (Linear layers quantized at load, CPU only;
    `lengthwise.core.quantize`) or ``"auto"`` (the device's best: bf16 on a GPU that has it, else fp16; bf16 on a CPU
    with native bf16, AMX or AVX512-BF16; else fp32); what the device runs slowly or not at all is refused naming
    what to use. A baked or saved TempScale and a saved long-document choice work the same way at every precision
    (int8 included), and the fingerprint of the
    model (`lengthwise.core.models.model_fingerprint`, in every result) records the precision it computed with.
    This function is a `lengthwise.core.models.ModelLoader`: the rooms' entry points take it as their
    ``load_model``.
    """
    from lengthwise.core.models import load_plain_model, resolve_model_path
    from lengthwise.longdoc.persist import attach_saved_longdoc
    from lengthwise.tempscale.persist import apply_saved_tempscale

    model = load_plain_model(
        name_or_path,
        device=device,
        trust_remote_code=trust_remote_code,
        max_seq_length=max_seq_length,
        precision=precision,
    )
    folder = resolve_model_path(name_or_path)
    apply_saved_tempscale(model, folder)
    attach_saved_longdoc(model, folder)  # `LongEncoder(model)` then reads the saved long-document choice
    return model


@dataclass(frozen=True)
class EncoderSetup:
    """What `build_encoder` made: the encoder (None = the plain model) and the settings it adds to a record."""

    encoder: TextEncoder | None
    settings: dict[str, Any] = field(default_factory=dict)


def build_encoder(
    model: SentenceTransformer,
    *,
    tempscale: float | TempScaleConfig | None = None,
    long: str | LongDocConfig | None = None,
    window: int | None = None,
    stride: int | None = None,
) -> EncoderSetup:
    """The encoder a job runs `model` (loaded by `lengthwise.load_model`) through: TempScale at `tempscale` (a t or a
    `TempScaleConfig`, over one saved with the model), long documents (`long`, `window`, `stride`: as
    `lengthwise.longdoc.persist.resolved_longdoc`), both, or neither; and the settings a record carries. With both,
    the model stays patched after the call: query and document temperatures then apply per window.
    """
    from lengthwise.longdoc import LongEncoder
    from lengthwise.longdoc.persist import resolved_longdoc
    from lengthwise.tempscale import TempScaleConfig, TempScaleEncoder, apply_tempscale, remove_tempscale

    ts_config = TempScaleConfig.of(tempscale)
    settings: dict[str, Any] = {} if ts_config is None else {"tempscale": ts_config.to_dict()}
    encoder: TextEncoder | None = None if ts_config is None else TempScaleEncoder(model, ts_config)
    config = resolved_longdoc(model, long, window=window, stride=stride)
    if config is None:
        return EncoderSetup(encoder, settings)
    if ts_config is not None:
        remove_tempscale(model)
        apply_tempscale(model, ts_config)
    long_encoder = LongEncoder(model, config)
    return EncoderSetup(long_encoder, {**settings, "long": long_encoder.config.to_dict()})


@functools.wraps(encode_corpus)
def encode(*args: Any, **kwargs: Any) -> int:
    # `lengthwise encode` as one call: `lengthwise.longdoc.storage.encode.encode` (its docstring and signature),
    # each worker loading the model by `load_model` unless the caller names another loader
    if kwargs.get("load_model") is None:
        kwargs["load_model"] = load_model
    return encode_corpus(*args, **kwargs)


def train(
    config: TrainConfig, *, resume: bool = False, callbacks: Sequence[Any] = (), evaluator: Any | None = None
) -> TrainResult:
    """`lengthwise.training.run_training` with a length-binned STS dev evaluator built from ``config.eval_data``
    and, with ``config.eval_attack`` = m, the audit's attack-shift evaluator on the same pairs (``dev_attack_*``)."""
    from lengthwise.training.run import run_training

    if evaluator is None and config.eval_data:
        from lengthwise.evaluation.data import read_sts
        from lengthwise.evaluation.st_evaluators import BinnedSTSEvaluator

        pairs = read_sts(config.eval_data)
        evaluator = BinnedSTSEvaluator(pairs, name="dev")
        if config.eval_attack:
            from sentence_transformers.sentence_transformer.evaluation import SequentialEvaluator

            from lengthwise.audit.pairs.evaluator import LengthAttackEvaluator

            attack = LengthAttackEvaluator(pairs, config.eval_attack, name="dev_attack", seed=config.seed)
            evaluator = SequentialEvaluator([evaluator, attack], main_score_function=lambda scores: scores[0])
    return run_training(config, resume=resume, callbacks=callbacks, evaluator=evaluator)


class LongIndex(search_index.LongIndex):
    """`lengthwise.search.index.LongIndex` (its docstring says all) over windows the long-document room made: text
    queries are embedded, documents scored and texts cut into passages by `LONG_DOCUMENTS`."""

    method = LONG_DOCUMENTS


class MilvusIndex(milvus_index.MilvusIndex):
    """`lengthwise.search.milvus.index.MilvusIndex` over windows the long-document room made (as `LongIndex`)."""

    method = LONG_DOCUMENTS


def open_index(
    backend: Backend | None = None,
    folder: str | os.PathLike[str] | None = None,
    *,
    model: SentenceTransformer | str | os.PathLike[str] | None = None,
    load_model: ModelLoader | None = None,
) -> SearchIndex:
    """`lengthwise.search.backend.open_index` (its docstring says all) with the long-document method bound."""
    return search_backend.open_index(backend, folder, model=model, load_model=load_model, method=LONG_DOCUMENTS)


def opened_index(index: str | os.PathLike[str] | SearchIndex | None, backend: Backend | None = None) -> SearchIndex:
    """`index` itself when it is open already (whichever loader opened it), else the index at that path, or the one
    `backend` serves in Milvus (`index` None), opened by `open_index` with its query model loaded as saved
    (`load_model`): how a job that is handed "an index" takes it."""
    if index is None or isinstance(index, (str, os.PathLike)):
        return open_index(backend, index, load_model=load_model)
    return index


@functools.wraps(search_backend.build_index)
def build_index(*args: Any, **kwargs: Any) -> SearchIndex:
    # `lengthwise index build` as one call: `lengthwise.search.backend.build_index` (its docstring and signature)
    # with the long-document method bound
    return search_backend.build_index(*args, method=LONG_DOCUMENTS, **kwargs)
