"""Stop a diverging run at once: a non-finite loss or weight is an error, never a model that is saved.

With a learning rate far too high the weights become NaN within a step or two; the transformers `Trainer` would
go on, log the NaN losses away (``logging_nan_inf_filter``) and save a NaN model with exit status 0. `FiniteGuard`
checks every logged loss part and gradient norm, and the weights before each log, checkpoint and the final save,
and raises `TrainingDiverged` naming the step and the learning rate, before anything non-finite is written.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from transformers import TrainerCallback

from lengthwise.core.errors import TrainingDiverged

__all__ = ["FiniteGuard"]


class FiniteGuard(TrainerCallback):
    """Raise `TrainingDiverged` at the first non-finite logged value or weight (see the module docstring)."""

    def __init__(self, lr: float) -> None:
        self.lr = lr

    def _fail(self, step: int, what: str) -> None:
        raise TrainingDiverged(
            None,
            None,
            f"training diverged at step {step}: {what} (lr={self.lr:g}); lower the learning rate (lr) or warm it "
            "up (warmup_ratio); nothing from this step on was saved",
        )

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        for key, value in (logs or {}).items():
            if key in ("learning_rate", "epoch") or not isinstance(value, (int, float)):
                continue
            if key == "grad_norm" and getattr(args, "fp16", False):
                continue  # fp16 loss scaling meets inf gradients on purpose and skips those steps
            if not math.isfinite(float(value)):
                self._fail(state.global_step, f"the logged {key} is {value}")

    def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        if model is None or not (control.should_log or control.should_save or control.should_training_stop):
            return
        with torch.no_grad():
            named = list(model.named_parameters())
            if torch.stack([torch.isfinite(p).all() for _, p in named]).all():  # one device sync
                return
            name = next(name for name, p in named if not torch.isfinite(p).all())
        self._fail(state.global_step, f"weight {name} is not finite")
