"""Run one training job: data → dataset rows → collator + loss → `SentenceTransformerTrainer`, resumable.

Composition only: the sentence-transformers trainer (and under it the transformers `Trainer` and accelerate) does
the loop, checkpoints, resume, mixed precision and DDP; lengthwise supplies the rows, the collator and the loss.
Layout of ``OUT``: ``config.json`` (the run's settings, checked on ``resume``), ``checkpoints/checkpoint-*``,
``model/`` (the final sentence-transformers model, written last but one) and ``train.json`` (history and timing,
written last: its presence means the run has finished).

Everything that can be checked is checked before ``OUT`` is created or written: the settings, the device, that
``OUT`` can be written, the whole training data against the model's tokenizer. A non-finite loss or weight stops
the run (`TrainingDiverged`) before anything non-finite is saved.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from sentence_transformers import SentenceTransformer

from lengthwise.core._devices import check_device
from lengthwise.core.embed import TokenView
from lengthwise.core.errors import DataFormatError, SettingError
from lengthwise.core.models import load_plain_model, model_fingerprint, set_max_length
from lengthwise.core.results import provenance, write_json_atomic
from lengthwise.training._checkpoints import RunState, complete_checkpoint_step, inspect_run, remove_incomplete
from lengthwise.training._guard import FiniteGuard
from lengthwise.training._rows import check_kind, prepare_rows
from lengthwise.training.config import MixedPrecision, Pooling, TrainConfig, renamed_settings
from lengthwise.training.data import read_training_data
from lengthwise.training.methods import (
    AnchorChoice,
    AnchorSettings,
    CopyConcatSettings,
    HiCLSettings,
    LengthInvariantSettings,
    Reference,
)
from lengthwise.training.schema import TrainRecord

__all__ = ["INSTALL_HINT", "TrainResult", "run_training"]

logger = logging.getLogger(__name__)
INSTALL_HINT = "pip install 'lengthwise[train]'"  # brackets included: the CLI prints messages as plain text


@dataclass(frozen=True)
class TrainResult:
    """Where the run wrote its model and record, and what it measured. `already_finished`: ``resume`` found a
    finished run and changed nothing."""

    out: Path
    model_dir: Path
    global_step: int
    final_loss: float | None
    train_runtime_s: float
    tokens_per_second: float | None
    already_finished: bool = False


def _require_training_extras() -> None:
    """A `MissingExtra` (an `ImportError` and a `SettingError`) naming the extra when datasets or accelerate is
    missing."""
    from lengthwise.core._optional import require

    require("datasets", "accelerate", extra="train", purpose="training")


def _set_pooling(model: SentenceTransformer, mode: Pooling | None) -> None:
    if mode is None:
        return
    from sentence_transformers.sentence_transformer.modules import Pooling as PoolingModule

    poolers = [module for module in model if isinstance(module, PoolingModule)]
    if not poolers:
        raise SettingError("pooling", mode.value, "the model has no Pooling module to switch")
    poolers[0].pooling_mode = mode.value


def _world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def _device(config: TrainConfig) -> str:
    """The device to train on; an unknown or absent one is a `SettingError` on ``device``."""
    if config.device is None:
        return "cuda" if torch.cuda.is_available() else "cpu"
    check_device(config.device)
    return config.device


def _check_writable(out: Path) -> None:
    """Refuse an `out` that cannot become a writable directory; leaves nothing behind (folders it had to make to
    find out are removed again), so a run refused later for its data does not leave an empty `out`."""
    if out.exists() and not out.is_dir():
        raise SettingError("out", str(out), "exists and is not a directory; pass a directory path")
    missing = []
    root = out
    while not root.exists() and root != root.parent:
        missing.append(root)
        root = root.parent
    if not root.is_dir():
        raise SettingError("out", str(out), f"{root} is not a directory; pass a directory you can write to")
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as err:
        raise SettingError("out", str(out), f"cannot write there ({err.strerror or err}); pass another") from None
    finally:
        for folder in missing:  # deepest first
            with contextlib.suppress(OSError):
                folder.rmdir()


def _half_precision(precision: MixedPrecision, device: str) -> str | None:
    """ "fp16", "bf16" or None (fp32): mixed precision on GPU only; auto picks bf16 where the GPU has it."""
    if not device.startswith("cuda") or precision is MixedPrecision.FP32:
        return None
    if precision is MixedPrecision.AUTO:
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    return precision.value


def _check_same_settings(config: TrainConfig, out: Path) -> None:
    saved = out / "config.json"
    if not saved.exists():
        return
    before = renamed_settings(json.loads(saved.read_text(encoding="utf-8")))  # a run saved before a rename
    changed = sorted(key for key, value in config.to_dict().items() if before.get(key) != value)
    if changed:
        problem = f"settings differ from the run there ({', '.join(changed)}); resume it with its own, or use a new out"
        raise SettingError("out", str(out), problem)


RUN_NAMES = frozenset({"config.json", "checkpoints", "model", "model.partial", "train.json"})  # what a run writes


def _start_from(config: TrainConfig, resume: bool, state: RunState) -> Path | None:
    """The checkpoint to resume from (None: a fresh start); refuses to overwrite or to resume another run, and to
    start one among files it did not write (its checkpoints would land beside the user's own)."""
    out = state.out
    if not resume:
        if state.last_complete is not None or state.has_model or state.record is not None:
            raise SettingError("out", str(out), "holds an earlier run; resume it, or pick a new out")
        names = sorted(p.name for p in out.iterdir()) if out.is_dir() else []
        foreign = [name for name in names if name not in RUN_NAMES and not name.startswith(".")]
        if foreign:
            raise SettingError("out", str(out), f"holds files that are not a training run's ({', '.join(foreign[:3])})"
                               "; pass a new or empty directory")  # fmt: skip
        return None
    _check_same_settings(config, out)
    if state.last_complete is None:
        logger.warning("resume: no complete checkpoint in %s yet; starting from step 0", out / "checkpoints")
    return state.last_complete


def _finished(state: RunState) -> TrainResult:
    record = state.record or {}
    losses = [entry["loss"] for entry in record.get("log_history", []) if "loss" in entry]
    return TrainResult(
        out=state.out,
        model_dir=state.out / "model",
        global_step=int(record.get("global_step", 0)),
        final_loss=float(losses[-1]) if losses else None,
        train_runtime_s=0.0,
        tokens_per_second=None,
        already_finished=True,
    )


def _build(
    config: TrainConfig, model: SentenceTransformer, view: TokenView, distributed: bool
) -> tuple[Any, Any, str | None]:
    """(collator, loss, MLM head start) for the method; SimDE's MLM head is appended to `model` for the run."""
    from lengthwise.training._collate import SegmentCollator, ViewCollator
    from lengthwise.training.losses import HiCLLoss, pair_loss

    settings = config.settings
    if isinstance(settings, HiCLSettings):
        collator: Any = SegmentCollator(view, settings.segment_length)
        loss: Any = HiCLLoss(
            model, settings.alpha, settings.same_sequence, settings.denominator, gather_across_devices=distributed
        )
        return collator, loss, None
    masker, start = None, None
    loss = pair_loss(model, cache_batch=config.cache_batch, distributed=distributed)
    if config.mlm_loss_weight > 0:
        from transformers import DataCollatorForLanguageModeling

        from lengthwise.training.mlm import MaskedLMAuxiliary, masked_lm_head

        if view.tokenizer.mask_token is None:
            problem = "the tokenizer has no mask token; set mlm_weight=0"
            raise SettingError("mlm_weight", config.mlm_loss_weight, problem)
        masker = DataCollatorForLanguageModeling(view.tokenizer, mlm_probability=0.15)
        head, start = masked_lm_head(model, seed=config.seed, trust_remote_code=config.trust_remote_code)
        model.append(head)
        loss = MaskedLMAuxiliary(loss, model, config.mlm_loss_weight)
    if isinstance(settings, LengthInvariantSettings):
        from lengthwise.training.invariance import LengthInvariantLoss, frozen_teacher

        # the teacher holds the starting weights: it is copied before any checkpoint is loaded
        distil_from, consistent_with = settings.references
        teacher_for = (distil_from is Reference.TEACHER, consistent_with is Reference.TEACHER)
        loss = LengthInvariantLoss(
            loss,
            model,
            frozen_teacher(model) if any(teacher_for) or settings.retention_weight > 0 else None,
            settings.invariance_weight,
            settings.consistency_weight,
            teacher_for=teacher_for,
            retention_weight=settings.retention_weight,
        )
    collator = ViewCollator(
        config.method,
        view,
        config.seed,
        config.elongation,
        settings.anchor if isinstance(settings, AnchorSettings) else AnchorChoice.FIRST,
        mlm=masker,
        copy_concat_share=settings.copy_concat_share if isinstance(settings, CopyConcatSettings) else 1.0,
    )
    return collator, loss, start


def _arguments(config: TrainConfig, out: Path, device: str, world: int, evaluate: bool) -> Any:
    from sentence_transformers import SentenceTransformerTrainingArguments

    half = _half_precision(config.mixed_precision, device)
    return SentenceTransformerTrainingArguments(
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
        logging_nan_inf_filter=False,  # a NaN loss is logged as NaN (and stops the run), never averaged away
        eval_strategy="steps" if evaluate else "no",
        eval_steps=config.eval_steps or config.save_steps,
        report_to="none",
        use_cpu=device == "cpu",
        ddp_backend="gloo" if world > 1 and device == "cpu" else None,
        remove_unused_columns=False,
        fp16=half == "fp16",
        bf16=half == "bf16",
    )


def _run_trainer(trainer: Any, checkpoint: Path | None, state: Any) -> tuple[dict[str, Any], list[dict[str, Any]], int]:
    """Train (from `checkpoint` when resuming): (metrics, log history, global step)."""
    saved_state = state.trainer_state() if checkpoint else {}
    if checkpoint and int(saved_state.get("max_steps", 0)) > 0 and _step(checkpoint) >= saved_state["max_steps"]:
        # the last checkpoint is the final step (the run was stopped while writing OUT/model or train.json):
        # training again would add a step past max_steps, so only the outputs are written
        trainer._load_from_checkpoint(str(checkpoint))
        return {}, list(saved_state.get("log_history", [])), _step(checkpoint)
    output = trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    return dict(output.metrics), trainer.state.log_history, trainer.state.global_step


def run_training(
    config: TrainConfig, *, resume: bool = False, callbacks: Sequence[Any] = (), evaluator: Any | None = None
) -> TrainResult:
    """Train `config.model` with `config.method` on `config.data`; write ``OUT/model`` and ``OUT/train.json``.

    With `resume`, continue from the newest complete checkpoint in ``OUT/checkpoints`` (same settings required):
    finished steps are not redone, and model, optimizer, scheduler, data order and RNG states are restored; a
    finished run is left as it is (`TrainResult.already_finished`). `evaluator` (a sentence-transformers
    evaluator, e.g. built by `lengthwise.train` from ``config.eval_data``) runs every ``eval_steps``; a
    config with ``eval_data`` or ``eval_attack`` and no evaluator is refused (`SettingError`), never ignored.
    """
    if evaluator is None and (config.eval_data or config.eval_attack):
        raise SettingError(
            "eval_data",
            config.eval_data,
            "this call runs no evaluator of its own; pass evaluator=… or call lengthwise.train, which builds the "
            "dev evaluator from eval_data (and eval_attack)",
        )
    _require_training_extras()
    from datasets import Dataset
    from sentence_transformers import SentenceTransformerTrainer

    started = time.perf_counter()
    world = _world_size()
    if config.batch_size % world:
        raise SettingError("batch_size", config.batch_size, f"not divisible by the {world} processes")
    device = _device(config)
    out = Path(config.out)
    is_main = int(os.environ.get("RANK", "0")) == 0
    if is_main:  # one process probes (and tidies up after itself), so no two race on the same folders
        _check_writable(out)
    state = inspect_run(out)
    checkpoint = _start_from(config, resume, state)
    if resume and state.finished:
        return _finished(state)
    data = read_training_data(config.data, max_examples=config.max_examples, seed=config.seed)
    check_kind(config, data)
    model = load_plain_model(config.model, device=device, trust_remote_code=config.trust_remote_code)
    set_max_length(model, config.max_length)
    _set_pooling(model, config.effective_pooling)
    view = TokenView(model)
    rows = prepare_rows(config, data, view.tokenizer, view.max_content, progress=is_main)  # all of it, now
    if len(rows) < 2:
        problem = f"{len(rows)} usable example(s); in-batch negatives need at least 2"
        raise DataFormatError("data", config.data, problem)
    start_fingerprint = model_fingerprint(model, config.model)
    if is_main:  # everything is checked: only now is OUT created and written
        out.mkdir(parents=True, exist_ok=True)
        remove_incomplete(state)
        write_json_atomic(out / "config.json", config.to_dict())
    collator, loss, mlm_start = _build(config, model, view, distributed=world > 1)
    trainer = SentenceTransformerTrainer(
        model=model,
        args=_arguments(config, out, device, world, evaluator is not None),
        train_dataset=Dataset.from_list(rows),
        loss=loss,
        data_collator=collator,
        evaluator=evaluator,
        callbacks=[FiniteGuard(config.lr), *callbacks],
    )
    metrics, history, global_step = _run_trainer(trainer, checkpoint, state)
    runtime = float(metrics.get("train_runtime", time.perf_counter() - started))
    tokens_per_second = collator.tokens * world / runtime if runtime > 0 and collator.tokens else None
    model_dir = out / "model"
    losses = [entry for entry in history if "loss" in entry]
    if mlm_start is not None:
        from lengthwise.training.mlm import remove_masked_lm_head

        remove_masked_lm_head(model)  # the trained encoder alone is the result
    if trainer.is_world_process_zero():
        _write_outputs(model, out, keep_checkpoints=config.keep_checkpoints)
        final = model_fingerprint(model, str(model_dir))
        settings = config.to_dict()
        record = TrainRecord(
            **provenance(final, {**data.describe(), "n_rows": len(rows)}, settings, started=started),
            config=settings, model_start=start_fingerprint, model_final=final, world_size=world, device=device,
            resumed_from=str(checkpoint) if checkpoint else None, global_step=global_step, train_metrics=metrics,
            tokens_per_second=tokens_per_second, mlm_head=mlm_start, log_history=history,
        )  # fmt: skip
        write_json_atomic(out / "train.json", record)
        if config.recipe:
            _write_recipe_card(config, record, model_dir)
    return TrainResult(
        out=out,
        model_dir=model_dir,
        global_step=global_step,
        final_loss=float(losses[-1]["loss"]) if losses else None,
        train_runtime_s=runtime,
        tokens_per_second=tokens_per_second,
    )


def _write_recipe_card(config: TrainConfig, record: TrainRecord, model_dir: Path) -> None:
    """The recipe, its settings, the data and the last dev checks, as a section of ``OUT/model/README.md``."""
    from lengthwise.training._card import recipe_section, write_card_section
    from lengthwise.training.recipes import RECIPES

    recipe = RECIPES.get(config.recipe or "")
    if recipe is None:
        return
    evaluations = [entry for entry in record["log_history"] if any(key.startswith("eval_") for key in entry)]
    last = evaluations[-1] if evaluations else {}
    skip = ("runtime", "per_second")
    metrics = {
        key.removeprefix("eval_"): float(value)
        for key, value in last.items()
        if key.startswith("eval_") and isinstance(value, (int, float)) and not any(word in key for word in skip)
    }
    section = recipe_section(recipe, config.to_dict(), record["data"], record["global_step"], metrics)
    write_card_section(model_dir, "recipe", section)


def _step(checkpoint: Path) -> int:
    return complete_checkpoint_step(checkpoint) or 0


def _write_outputs(model: SentenceTransformer, out: Path, *, keep_checkpoints: bool) -> None:
    """``OUT/model`` through a staging folder and a rename; checkpoints dropped after, if asked."""
    model_dir, staging = out / "model", out / "model.partial"
    shutil.rmtree(staging, ignore_errors=True)
    model.save(str(staging))
    shutil.rmtree(model_dir, ignore_errors=True)
    staging.rename(model_dir)
    if not keep_checkpoints:  # only after the final model is safely in place
        shutil.rmtree(out / "checkpoints", ignore_errors=True)
