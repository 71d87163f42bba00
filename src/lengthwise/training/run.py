"""Run one training job: data → dataset rows → collator + loss → `SentenceTransformerTrainer`, resumable.

Composition only: the sentence-transformers trainer (and under it the transformers `Trainer` and accelerate) does
the loop, checkpoints, resume, mixed precision and DDP; lengthwise supplies the rows, the collator and the loss.
Layout of ``OUT``: ``config.json`` (the run's settings, checked on ``--resume``), ``checkpoints/checkpoint-*``,
``model/`` (the final sentence-transformers model, written last) and ``train.json`` (history and timing).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from rich.progress import track
from sentence_transformers import SentenceTransformer

from lengthwise.core.embed import TokenView
from lengthwise.core.models import load_model, model_fingerprint, set_max_length
from lengthwise.core.results import environment, write_json_atomic
from lengthwise.core.tokens import split_sentences
from lengthwise.training.config import DataKind, Method, TrainConfig
from lengthwise.training.data import TrainingData, read_training_data

__all__ = ["TrainResult", "prepare_rows", "train"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainResult:
    """Where the run wrote its model and record, and what it measured."""

    out: Path
    model_dir: Path
    global_step: int
    final_loss: float | None
    train_runtime_s: float
    tokens_per_second: float | None


def _require_training_extras() -> None:
    try:
        import accelerate  # noqa: F401
        import datasets  # noqa: F401
    except ImportError:
        raise ImportError("training needs datasets and accelerate: pip install 'lengthwise[train]'") from None


def prepare_rows(config: TrainConfig, data: TrainingData, *, progress: bool = False) -> list[dict[str, Any]]:
    """Dataset rows for the method: ``text``, ``sentences`` (split once, here) or ``anchor``/``positive``.

    Documents with fewer than two sentences are dropped for coco-dr, laser-intra and simde (they cannot form a
    pair); a one-line error says so if nothing is left.
    """
    kind = config.data_kind
    if kind is DataKind.PAIR:
        if data.kind != "pair":
            raise ValueError(f"--method {config.method.value} needs positive pairs; {data.source} holds single texts")
        return [{"row": i, "anchor": a, "positive": b} for i, (a, b) in enumerate(data.pairs)]
    if data.kind != "text":
        raise ValueError(
            f"--method {config.method.value} trains on single texts; {data.source} holds pairs (use pairs/copy-concat)"
        )
    if config.method in (Method.SIMCSE, Method.HICL):
        return [{"row": i, "text": text} for i, text in enumerate(data.texts)]
    texts = track(data.texts, description="splitting sentences") if progress else data.texts
    documents = [split_sentences(text) for text in texts]
    if kind is DataKind.DOCUMENT:
        documents = [sentences for sentences in documents if len(sentences) >= 2]
        if not documents:
            raise ValueError(f"--data {data.source}: no document has two sentences; {config.method.value} needs them")
    else:
        documents = [sentences for sentences in documents if sentences]
    return [{"row": i, "sentences": sentences} for i, sentences in enumerate(documents)]


def _set_pooling(model: SentenceTransformer, mode: str | None) -> None:
    if mode is None:
        return
    from sentence_transformers.sentence_transformer.modules import Pooling

    poolers = [module for module in model if isinstance(module, Pooling)]
    if not poolers:
        raise ValueError(f"pooling={mode!r}: the model has no Pooling module to switch")
    poolers[0].pooling_mode = mode


def _world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def _half_precision(precision: str, device: str) -> str | None:
    """ "fp16", "bf16" or None (fp32): mixed precision on GPU only; auto picks bf16 where the GPU has it."""
    if device != "cuda" or precision == "fp32":
        return None
    if precision == "auto":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    return precision


def _checked_out_dir(config: TrainConfig, resume: bool) -> Path | None:
    """The checkpoint to resume from (None: a fresh start); refuses to overwrite or to resume another run."""
    from transformers.trainer_utils import get_last_checkpoint

    out = Path(config.out)
    saved = out / "config.json"
    checkpoints = out / "checkpoints"
    last = get_last_checkpoint(str(checkpoints)) if checkpoints.is_dir() else None
    if not resume:
        if last is not None or (out / "model").exists():
            raise FileExistsError(f"--out {out} holds an earlier run; pass --resume to continue it or pick a new --out")
        return None
    if saved.exists():
        before = json.loads(saved.read_text(encoding="utf-8"))
        changed = sorted(key for key, value in config.to_dict().items() if before.get(key) != value)
        if changed:
            raise ValueError(f"--resume: settings differ from the run in {out} ({', '.join(changed)}); use a new --out")
    if last is None:
        logger.warning("--resume: no checkpoint in %s yet; starting from step 0", checkpoints)
    return Path(last) if last else None


def _build(config: TrainConfig, model: SentenceTransformer, view: TokenView, distributed: bool) -> tuple[Any, Any]:
    from lengthwise.training.collate import SegmentCollator, ViewCollator
    from lengthwise.training.losses import HiCLLoss, pair_loss

    if config.method is Method.HICL:
        collator: Any = SegmentCollator(view, config.segment_length)
        loss: Any = HiCLLoss(model, config.alpha, config.same_sequence, config.denominator)  # type: ignore[arg-type]
        return collator, loss
    collator = ViewCollator(config.method, view, config.seed, config.elongation, config.anchor)  # type: ignore[arg-type]
    loss = pair_loss(model, cache_batch=config.cache_batch, distributed=distributed)
    if config.mlm_weight > 0:
        from lengthwise.training.mlm import MaskedLMAuxiliary

        loss = MaskedLMAuxiliary(loss, model, config.mlm_weight)
    return collator, loss


def train(
    config: TrainConfig, *, resume: bool = False, callbacks: Sequence[Any] = (), evaluator: Any | None = None
) -> TrainResult:
    """Train `config.model` with `config.method` on `config.data`; write ``OUT/model`` and ``OUT/train.json``.

    With `resume`, continue from the newest checkpoint in ``OUT/checkpoints`` (same settings required): finished
    steps are not redone, and model, optimizer, scheduler, data order and RNG states are restored.
    `evaluator` (a sentence-transformers evaluator, e.g. built by `lengthwise.facade.train` from
    ``config.eval_data``) runs every ``eval_steps`` when given.
    """
    _require_training_extras()
    from datasets import Dataset
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments

    world = _world_size()
    if config.batch_size % world:
        raise ValueError(f"--batch-size {config.batch_size} is not divisible by the {world} processes")
    checkpoint = _checked_out_dir(config, resume)
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    data = read_training_data(config.data, max_examples=config.max_examples, seed=config.seed)
    is_main = int(os.environ.get("RANK", "0")) == 0
    rows = prepare_rows(config, data, progress=is_main)  # bad data fails here, before the model loads
    if len(rows) < 2:
        raise ValueError(f"--data {config.data}: {len(rows)} usable example(s); in-batch negatives need at least 2")
    device = config.device or ("cuda" if torch.cuda.is_available() else "cpu")
    model = load_model(config.model, device=device, trust_remote_code=config.trust_remote_code)
    set_max_length(model, config.max_length)
    _set_pooling(model, config.effective_pooling)
    start_fingerprint = model_fingerprint(model, config.model)
    view = TokenView(model)
    if is_main:
        write_json_atomic(out / "config.json", config.to_dict())
    collator, loss = _build(config, model, view, distributed=world > 1)
    half = _half_precision(config.precision, device)
    args = SentenceTransformerTrainingArguments(
        output_dir=str(out / "checkpoints"),
        max_steps=config.max_steps if config.max_steps is not None else -1,
        num_train_epochs=config.epochs,
        per_device_train_batch_size=config.batch_size // world,
        learning_rate=config.lr,
        warmup_steps=config.warmup_ratio,  # a float in [0, 1) is a ratio in transformers v5
        lr_scheduler_type="linear",
        seed=config.seed,
        data_seed=config.seed,
        save_strategy="steps",
        save_steps=config.save_steps,
        save_total_limit=config.save_total_limit,
        logging_steps=config.logging_steps,
        logging_first_step=True,
        eval_strategy="steps" if evaluator else "no",
        eval_steps=config.eval_steps or config.save_steps,
        report_to="none",
        use_cpu=device == "cpu",
        ddp_backend="gloo" if world > 1 and device == "cpu" else None,
        remove_unused_columns=False,
        fp16=half == "fp16",
        bf16=half == "bf16",
    )
    trainer = SentenceTransformerTrainer(
        model=model,
        args=args,
        train_dataset=Dataset.from_list(rows),
        loss=loss,
        data_collator=collator,
        evaluator=evaluator,
        callbacks=list(callbacks),
    )
    started = time.perf_counter()
    output = trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    wall = time.perf_counter() - started
    runtime = float(output.metrics.get("train_runtime", wall))
    tokens_per_second = collator.tokens * world / runtime if runtime > 0 and collator.tokens else None
    model_dir = out / "model"
    losses = [entry for entry in trainer.state.log_history if "loss" in entry]
    if trainer.is_world_process_zero():
        staging = out / "model.partial"
        shutil.rmtree(staging, ignore_errors=True)
        model.save(str(staging))
        shutil.rmtree(model_dir, ignore_errors=True)
        staging.rename(model_dir)
        if not config.keep_checkpoints:  # only after the final model is safely in place
            shutil.rmtree(out / "checkpoints", ignore_errors=True)
        write_json_atomic(
            out / "train.json",
            {
                "config": config.to_dict(),
                "data": {**data.describe(), "n_rows": len(rows)},
                "model_start": start_fingerprint,
                "model_final": model_fingerprint(model, str(model_dir)),
                "world_size": world,
                "device": device,
                "resumed_from": str(checkpoint) if checkpoint else None,
                "global_step": trainer.state.global_step,
                "train_metrics": output.metrics,
                "tokens_per_second": tokens_per_second,
                "log_history": trainer.state.log_history,
                "environment": environment(),
            },
        )
    return TrainResult(
        out=out,
        model_dir=model_dir,
        global_step=trainer.state.global_step,
        final_loss=float(losses[-1]["loss"]) if losses else None,
        train_runtime_s=runtime,
        tokens_per_second=tokens_per_second,
    )
