"""Whole jobs as one call each: where the rooms meet for what the command line does.

Every `lengthwise` command parses its flags, makes one call here (or to a room's own one-call entry point)
and prints. A Python user makes the same call and gets the same record:

    >>> import lengthwise as lw
    >>> from lengthwise.evaluation.config import EvalConfig
    >>> record = lw.evaluate(EvalConfig(task="sts", data="sts-test.csv.gz"), tempscale=0.8, long="chunk-mean",
    ...                      out="out/eval")  # = lengthwise eval --task sts -d sts-test.csv.gz --tempscale 0.8 \\
    ...                                       #   --long chunk-mean -o out/eval

Rooms never import each other; this module (like `facade.py`) may.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lengthwise.core.defaults import DEFAULT_MODEL
from lengthwise.core.errors import SettingError

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

    from lengthwise.core.encoder import TextEncoder
    from lengthwise.evaluation.config import EvalConfig
    from lengthwise.evaluation.schema import EvalRecord
    from lengthwise.longdoc.config import LongDocConfig
    from lengthwise.tempscale.config import TempScaleConfig

__all__ = ["EncoderSetup", "build_encoder", "evaluate"]


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
    """The encoder a job runs `model` through: TempScale, long documents, both, or neither.

    Args:
        model: A loaded model (`lengthwise.load_model`, which keeps a saved long-document choice).
        tempscale: An attention temperature t, or a full `TempScaleConfig` (replaces one saved with the model).
        long: A long-document strategy name or `LongDocConfig`; None keeps the choice saved with the model, if
            any, else the model's own truncation.
        window: Tokens per window (special tokens included), over the strategy's.
        stride: Step between window starts, over the strategy's.

    Returns:
        The encoder and the settings (``tempscale``, ``long``) that a result record should carry.

    With both TempScale and long documents, the model stays patched with the temperature after the call: the
    long encoder passes each call's role to the model, so query and document temperatures apply per window.
    """
    from lengthwise.longdoc import LongDocConfig, LongEncoder
    from lengthwise.longdoc.persist import saved_longdoc
    from lengthwise.tempscale import TempScaleConfig, TempScaleEncoder, apply_tempscale, remove_tempscale

    ts_config = TempScaleConfig(t=tempscale) if isinstance(tempscale, int | float) else tempscale
    settings: dict[str, Any] = {}
    encoder: TextEncoder | None = None
    if ts_config is not None:
        encoder = TempScaleEncoder(model, ts_config)
        settings["tempscale"] = ts_config.to_dict()
    saved = saved_longdoc(model)
    if long is None and saved is None:
        if window is not None or stride is not None:
            raise SettingError("strategy", None, "a window or stride needs a long-document strategy, e.g. chunk-mean")
        return EncoderSetup(encoder, settings)
    base = long if isinstance(long, LongDocConfig) else saved if long is None else LongDocConfig(strategy=long)
    changes = {key: value for key, value in {"window": window, "stride": stride}.items() if value is not None}
    config = LongDocConfig(**{**(base or LongDocConfig()).to_dict(), **changes})
    if ts_config is not None:
        remove_tempscale(model)
        apply_tempscale(model, ts_config)
    long_encoder = LongEncoder(model, config)
    settings["long"] = long_encoder.config.to_dict()
    return EncoderSetup(long_encoder, settings)


def evaluate(
    config: EvalConfig,
    model: str | os.PathLike[str] = DEFAULT_MODEL,
    *,
    out: str | os.PathLike[str] | None = None,
    device: str | None = None,
    max_length: int | None = None,
    trust_remote_code: bool = False,
    tempscale: float | TempScaleConfig | None = None,
    long: str | LongDocConfig | None = None,
    window: int | None = None,
    stride: int | None = None,
    show_progress: bool = False,
) -> EvalRecord:
    """`lengthwise eval` as one call: read the data, load the model, build its encoder, score, write `out`.

    Args:
        config: The task, its data and settings (`EvalConfig`).
        model: A model folder, an installed model package's name or a Hugging Face id.
        out: Where ``results.json`` and its plots are written as one set (new, empty, or an earlier eval's);
            checked before any compute. None writes nothing.
        device, max_length, trust_remote_code: As for `lengthwise.load_model`.
        tempscale, long, window, stride: As for `build_encoder`.
        show_progress: Show progress bars while encoding.

    Returns:
        The record that ``results.json`` holds (overall and per-length-bin scores, settings, provenance).
    """
    from lengthwise.evaluation.run import check_output, evaluate_task, load_data, resolve, write_record
    from lengthwise.facade import load_model

    started = time.perf_counter()
    out = None if out is None else Path(out)
    if out is not None:
        check_output(out)  # a folder holding other files is refused now, not after the compute
    config = resolve(config)
    data = load_data(config)
    loaded = load_model(model, device=device, trust_remote_code=trust_remote_code, max_seq_length=max_length)
    setup = build_encoder(loaded, tempscale=tempscale, long=long, window=window, stride=stride)
    record = evaluate_task(
        config,
        loaded,
        model_name=str(model),
        data=data,
        encoder=setup.encoder,
        extra_settings=setup.settings,
        show_progress=show_progress,
        started=started,
    )
    if out is not None:
        write_record(record, out)
    return record
