"""The attack-shift evaluator: the audit's numbers, the model left in the mode it was in, Spearman on gold."""

from __future__ import annotations

import numpy as np
from scipy.stats import spearmanr

from lengthwise.audit.config import AuditConfig
from lengthwise.audit.pairs.attack import run_audit
from lengthwise.audit.pairs.evaluator import LengthAttackEvaluator
from lengthwise.core.data import PairSet, TextPair
from lengthwise.core.tokens import Elongation


def _pairs(scored: bool) -> PairSet:
    rows = [
        TextPair(f"a dog runs in park {i}", f"the dog is running {i % 3}", float(i % 5) if scored else None)
        for i in range(10)
    ]
    return PairSet(tuple(rows), source="pairs", fmt="test")


def test_metrics_are_the_audits_and_the_training_mode_is_kept(tiny_model, tmp_path) -> None:
    pairs = _pairs(scored=True)
    evaluator = LengthAttackEvaluator(pairs, 5, name="dev")
    tiny_model.train()
    metrics = evaluator(tiny_model, output_path=str(tmp_path), epoch=1, steps=7)
    assert tiny_model.training  # the trainer's model is back in training mode
    config = AuditConfig(elongation=Elongation.parse("5"), curve_ks=(), word_shuffle=False)
    reference = run_audit(tiny_model, pairs, config)
    assert np.isclose(metrics["dev_mean_shift"], reference.attack["mean_shift"], atol=1e-6)
    assert np.isclose(metrics["dev_frac_increased"], reference.attack["frac_increased"])
    before = np.asarray(reference.similarities["before"])
    gold = np.asarray([pair.score for pair in pairs.pairs])
    assert np.isclose(metrics["dev_spearman"], 100 * spearmanr(before, gold)[0], atol=1e-3)
    assert evaluator.primary_metric == "dev_spearman"
    assert (tmp_path / "attack_dev_epoch1_steps7.json").exists()


def test_pairs_without_gold_score_rank_by_the_shift(tiny_model) -> None:
    evaluator = LengthAttackEvaluator(_pairs(scored=False), 3, null_permutations=20)
    metrics = evaluator(tiny_model)
    assert "attack_spearman" not in metrics and evaluator.primary_metric == "attack_neg_mean_shift"
    assert metrics["attack_neg_mean_shift"] == -metrics["attack_mean_shift"]
    assert 0.0 < metrics["attack_js_null_p_value"] <= 1.0
