from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lengthwise.audit.attack import AuditConfig, run_audit
from lengthwise.audit.shift import js_distance_null, paired_cosine
from lengthwise.core.data import PairSet, TextPair, default_probe_pairs, read_pairs
from lengthwise.core.embed import TokenView, embed_ids
from lengthwise.core.tokens import Elongation, elongate

PAIRS = PairSet(
    (
        TextPair("A man is playing a guitar.", "Someone plays an acoustic guitar on stage.", 4.0),
        TextPair("The stock market fell sharply today.", "Bread rises when yeast ferments the dough.", 0.0),
        TextPair("Cats sleep most of the day.", "Many cats nap for sixteen hours a day.", 3.5, "same_topic"),
        TextPair("Rain is expected tomorrow.", "A chess engine evaluates positions quickly.", 0.0, "random"),
    ),
    "inline",
    "test",
)


def test_audit_numbers_match_a_by_hand_computation(tiny_model) -> None:
    result = run_audit(tiny_model, PAIRS, AuditConfig(elongation=Elongation("fixed", 3), curve_ks=(8, 16)))
    view = TokenView(tiny_model)
    ids1 = view.content([p.text1 for p in PAIRS.pairs])
    ids2 = view.content([p.text2 for p in PAIRS.pairs])
    e1 = embed_ids(tiny_model, [view.wrap(elongate(i, 3, view.max_content)) for i in ids1])
    e2 = embed_ids(tiny_model, [view.wrap(elongate(i, 3, view.max_content)) for i in ids2])
    after = paired_cosine(e1, e2)
    assert result.attack["mean_after"] == pytest.approx(after.mean(), abs=1e-6)
    np.testing.assert_allclose(result.similarities["after"], after, atol=1e-5)
    assert result.attack["n"] == 4
    assert sum(result.attack["histogram"]["before"]) == 4
    assert [row["k"] for row in result.first_k_curve] == [8, 16]
    assert set(result.attack_by_kind) == {"random", "same_topic"}
    assert result.similarities["kind"] == [pair.kind for pair in PAIRS.pairs]  # per-kind shifts can be recomputed
    assert result.tokens["m_max"] == 3
    null = js_distance_null(np.asarray(result.similarities["before"]), after, permutations=200, seed=0)
    assert result.attack["js_null"] == {k: v for k, v in null.to_dict().items() if k != "observed"}
    assert result.word_shuffle is not None
    assert set(result.word_shuffle["js_null"]) == {"mean", "q95", "p_value", "permutations"}


def test_null_permutations_zero_skips_the_null(tiny_model) -> None:
    result = run_audit(tiny_model, PAIRS, AuditConfig(elongation=Elongation("fixed", 2), null_permutations=0))
    assert result.word_shuffle is not None
    assert "js_null" not in result.attack and "js_null" not in result.word_shuffle


def test_elongated_inputs_stay_within_max_length(tiny_model) -> None:
    result = run_audit(tiny_model, PAIRS, AuditConfig(elongation=Elongation("fixed", 1000), word_shuffle=False))
    assert result.tokens["elongated_mean"] <= tiny_model.max_seq_length
    assert result.word_shuffle is None
    # k = 512 and friends exceed N = 64 and are skipped rather than truncated silently.
    assert [row["k"] for row in result.first_k_curve] == [16, 32, 64]


def test_first_k_setting_truncates_before_elongating(tiny_model) -> None:
    config = AuditConfig(elongation=Elongation("fixed", 8), first_k=6, curve_ks=())
    result = run_audit(tiny_model, PAIRS, config)
    assert result.tokens["content_max"] == 4  # 6 tokens minus [CLS] and [SEP]
    assert result.tokens["m_max"] == 8


def test_audit_is_deterministic_with_random_m(tiny_model) -> None:
    config = AuditConfig(elongation=Elongation("random"), seed=7)
    a, b = run_audit(tiny_model, PAIRS, config), run_audit(tiny_model, PAIRS, config)
    assert a.attack == b.attack and a.word_shuffle == b.word_shuffle


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="first_k=2"):
        AuditConfig(first_k=2)
    with pytest.raises(ValueError, match="batch size"):
        AuditConfig(batch_size=0)
    with pytest.raises(ValueError, match="null_permutations"):
        AuditConfig(null_permutations=-1)


@pytest.mark.slow
def test_elongation_raises_similarity_for_minilm(minilm, data_dir: Path) -> None:
    """The length-attack paper's claim on a contrastive encoder: copying a text raises pair similarity."""
    pairs = read_pairs(data_dir / "stsb/original/sts-test.csv.gz").sample(120, seed=0)
    result = run_audit(minilm, pairs, AuditConfig(curve_ks=(), word_shuffle=False))
    assert result.attack["mean_after"] > result.attack["mean_before"]
    assert result.attack["frac_increased"] > 0.5
    assert result.attack["js_distance"] > 0.1


@pytest.mark.slow
def test_default_probe_set_audit_on_minilm(minilm) -> None:
    probes = default_probe_pairs()
    result = run_audit(minilm, probes, AuditConfig(elongation=Elongation("twice"), curve_ks=(), word_shuffle=False))
    scores = np.array([p.score for p in probes.pairs])
    before = np.array(result.similarities["before"])
    # Sanity of the probe set itself: paraphrases score far above unrelated pairs.
    assert before[scores == 4].mean() > before[scores == 0].mean() + 0.4
    assert result.model["weights_sha256_16"] and result.data["n_pairs"] == len(probes)
