"""Where rooms meet: the few operations that join two rooms, for the public API and the command line.

Rooms never import each other; loading a model together with the settings saved beside it (TempScale), or
training with a dev evaluator, is done here.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from lengthwise.core.defaults import DEFAULT_MODEL

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

    from lengthwise.training.config import TrainConfig
    from lengthwise.training.run import TrainResult

__all__ = ["load_model", "train"]


def load_model(
    name_or_path: str | os.PathLike[str] = DEFAULT_MODEL,
    *,
    device: str | None = None,
    trust_remote_code: bool = False,
    max_seq_length: int | None = None,
    precision: str = "fp32",
) -> SentenceTransformer:
    """`lengthwise.core.models.load_plain_model`, then re-apply the TempScale settings saved in the model's folder and
    keep its saved long-document choice (`lengthwise longdoc tune --save`) for `LongEncoder(model)`.

    A folder written by `save_tempscale` reloads patched; a baked one (its weights already carry 1/t) does not.
    `precision="int8"` quantizes the Linear layers at load on the CPU (`lengthwise.core.quantize`); a baked or
    saved TempScale and a saved long-document choice work the same way on the int8 model.
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


def train(
    config: TrainConfig, *, resume: bool = False, callbacks: Sequence[Any] = (), evaluator: Any | None = None
) -> TrainResult:
    """`lengthwise.training.run_training` with a length-binned STS dev evaluator built from ``config.eval_data`` and,
    with ``config.eval_attack`` = m, the audit's attack-shift evaluator on the same pairs (``dev_attack_*``)."""
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
