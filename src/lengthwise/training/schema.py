"""The typed shape of ``OUT/train.json``: the provenance every lengthwise record carries, plus the run's history."""

from __future__ import annotations

from typing import Any, TypedDict

from lengthwise.core.results import Provenance

__all__ = ["TrainData", "TrainRecord"]


class TrainData(TypedDict):
    """The training data as read: source, kind (text/pair), examples, content hash, and rows after preparation."""

    source: str
    kind: str
    n_examples: int
    sha256: str
    n_rows: int


class TrainRecord(Provenance):
    """``train.json``. From `Provenance`: ``model`` (the trained model's fingerprint, = ``model_final``), ``data``,
    ``settings`` (= ``config``), ``created``, ``wall_time_s`` and ``environment``."""

    config: dict[str, Any]  # TrainConfig.to_dict()
    model_start: dict[str, Any]  # core.models.model_fingerprint of the starting model
    model_final: dict[str, Any]
    world_size: int
    device: str
    resumed_from: str | None  # the checkpoint the last session started from
    global_step: int
    train_metrics: dict[str, Any]  # the transformers Trainer's own summary (runtime, samples/s, …)
    tokens_per_second: float | None  # encoder input tokens (special tokens included) per second, all processes
    mlm_head: str | None  # SimDE's MLM head: "pretrained" (from the checkpoint), "new" (random) or None (no MLM)
    log_history: list[dict[str, Any]]
