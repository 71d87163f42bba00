"""The elongation attack as a sentence-transformers evaluator: watch robustness and quality move together in training.

`LengthAttackEvaluator` runs the audit's attack (`run_audit`, METHODS §1: each text of each pair copied m times at
the token level, capped by the window) on a fixed set of pairs at every evaluation and logs, under its name:

- ``mean_shift`` — mean of cos(f(a, m), f(b, m)) − cos(a, b); 0 for a length-robust model, > 0 under the attack;
- ``frac_increased`` — share of pairs whose similarity rose;
- ``js_distance`` — Jensen–Shannon distance of the two similarity distributions (and ``js_null_p_value`` when a
  permutation null is asked for);
- ``spearman`` — when the pairs carry gold scores (STS), Spearman ×100 of the plain cosines: the quality side.

The primary metric is ``spearman`` when gold scores exist, else ``neg_mean_shift`` (greater is better, as the
trainer's best-model logic expects).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import spearmanr
from sentence_transformers.base.evaluation.evaluator import BaseEvaluator

from lengthwise.audit.config import AuditConfig
from lengthwise.audit.pairs.attack import run_audit
from lengthwise.core.data import PairSet
from lengthwise.core.errors import SettingError
from lengthwise.core.results import write_json_atomic
from lengthwise.core.tokens import Elongation

__all__ = ["LengthAttackEvaluator"]


class LengthAttackEvaluator(BaseEvaluator):
    """Attack-shift metrics (and Spearman on gold scores) of the model being trained, on `pairs` at m copies."""

    def __init__(
        self,
        pairs: PairSet,
        copies: int = 100,
        name: str = "attack",
        *,
        batch_size: int = 32,
        null_permutations: int = 0,
        seed: int = 0,
    ) -> None:
        super().__init__()
        if copies < 2:
            raise SettingError("copies", copies, "the attack needs m ≥ 2 copies")
        self.pairs, self.name = pairs, name
        self.config = AuditConfig(
            elongation=Elongation.parse(str(copies)),
            curve_ks=(),
            word_shuffle=False,
            batch_size=batch_size,
            seed=seed,
            null_permutations=null_permutations,
        )
        gold = np.asarray([pair.score for pair in pairs.pairs], dtype=np.float64)
        self.gold = None if np.isnan(gold).any() else gold
        self.primary_metric = "spearman" if self.gold is not None else "neg_mean_shift"

    def __call__(
        self, model: Any, output_path: str | None = None, epoch: int = -1, steps: int = -1
    ) -> dict[str, float]:
        was_training = model.training
        try:
            result = run_audit(model, self.pairs, self.config)
        finally:
            model.train(was_training)
        attack = result.attack
        metrics = {
            "mean_shift": float(attack["mean_shift"]),
            "neg_mean_shift": -float(attack["mean_shift"]),
            "frac_increased": float(attack["frac_increased"]),
            "js_distance": float(attack["js_distance"]),
        }
        null = attack.get("js_null")
        if null:
            metrics["js_null_p_value"] = float(null["p_value"])
        if self.gold is not None:
            before = np.asarray(result.similarities["before"], dtype=np.float64)
            metrics["spearman"] = 100.0 * float(spearmanr(before, self.gold)[0])
        if output_path is not None:
            suffix = "" if epoch == -1 else f"_epoch{epoch}_steps{steps}"
            write_json_atomic(Path(output_path) / f"attack_{self.name}{suffix}.json", result.to_dict())
        metrics = self.prefix_name_to_metrics(metrics, self.name)
        self.store_metrics_in_model_card_data(model, metrics, epoch, steps)
        return metrics
