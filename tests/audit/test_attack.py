from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from lengthwise.audit.config import AuditConfig
from lengthwise.audit.pairs.attack import run_audit
from lengthwise.audit.pairs.shift import js_distance_null
from lengthwise.core.data import PairSet, TextPair, default_probe_pairs, read_pairs
from lengthwise.core.embed import TokenView, embed_ids
from lengthwise.core.scoring import paired_cosine
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
    with pytest.raises(ValueError, match="batch_size=0"):
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


# --- issue 13 regressions ------------------------------------------------------------------------------------------


def _exact_tokens(view: TokenView, n: int) -> str:
    """A text of exactly n content tokens for MiniLM's WordPiece ("alpha" is one token)."""
    text = " ".join(["alpha"] * n)
    assert len(view.content([text])[0]) == min(n, view.max_content)
    return text


def test_a_text_of_exactly_n_minus_2_tokens_is_not_counted_as_cut(tiny_model) -> None:
    """13.10: `truncated_texts` counts texts longer than the window, not those that just fit."""
    view = TokenView(tiny_model)
    fits, cut = _exact_tokens(view, view.max_content), " ".join(["alpha"] * (view.max_content + 5))
    pairs = PairSet((TextPair(fits, "short one"), TextPair(cut, "another short one")), "inline", "test")
    result = run_audit(tiny_model, pairs, AuditConfig(curve_ks=(), word_shuffle=False, null_permutations=0))
    assert result.tokens["truncated_texts"] == 1


def test_word_shuffle_shuffles_only_the_kept_tokens(tiny_model, monkeypatch) -> None:
    """13.3: on a text longer than the window both sides of the probe hold the same tokens, in another order."""
    import lengthwise.audit.pairs.attack as attack

    view = TokenView(tiny_model)
    words = [f"w{i}" for i in range(200)]  # far more than the 62-token budget
    long_text = " ".join(words)
    seen: list[str] = []
    real = attack.shuffle_words

    def spy(text: str, rng: random.Random) -> str:
        out = real(text, rng)
        seen.append(out)
        return out

    monkeypatch.setattr(attack, "shuffle_words", spy)
    pairs = PairSet((TextPair(long_text, "a reply"), TextPair("short text here", "a reply")), "inline", "test")
    run_audit(tiny_model, pairs, AuditConfig(elongation=Elongation("fixed", 2), curve_ks=(), null_permutations=0))
    original_ids = view.content([long_text])[0]
    shuffled_ids = view.content([seen[0]])[0]
    assert sorted(shuffled_ids) == sorted(original_ids)  # the same tokens …
    assert shuffled_ids != original_ids  # … in another order


def test_max_length_that_leaves_no_room_to_elongate_is_an_error(tiny_model_dir) -> None:
    """13.6: at N = 3 every text fills the window alone; the attack would be a silent no-op (JSD 0)."""
    from lengthwise.audit.pairs.attack import NothingElongatedError
    from lengthwise.core.models import load_plain_model

    model = load_plain_model(tiny_model_dir, device="cpu", max_seq_length=3)
    with pytest.raises(NothingElongatedError, match="max_length=3: elongation changes no text: at N = 3"):
        run_audit(model, PAIRS, AuditConfig(curve_ks=(), word_shuffle=False))


def test_m_of_one_is_an_error_and_many_stuck_texts_warn(tiny_model) -> None:
    from lengthwise.audit.pairs.attack import NothingElongatedError

    with pytest.raises(NothingElongatedError, match="elongation='1': gave m = 1 to every text"):
        run_audit(tiny_model, PAIRS, AuditConfig(elongation=Elongation("fixed", 1), curve_ks=()))
    view = TokenView(tiny_model)
    long_text = _exact_tokens(view, view.max_content // 2 + 3)  # cannot hold two copies
    pairs = PairSet((TextPair(long_text, "short"), TextPair("short", "also short")), "inline", "test")
    result = run_audit(tiny_model, pairs, AuditConfig(curve_ks=(), word_shuffle=False, null_permutations=0))
    assert result.tokens["texts_elongated"] == 3
    assert any("1 of 4 texts (25%)" in warning for warning in result.warnings)


def test_js_null_is_scipys_permutation_test() -> None:
    """The JSD null comes from scipy.stats.permutation_test (paired, one-sided); exact for few pairs."""
    from scipy.stats import permutation_test

    from lengthwise.audit.pairs.shift import js_distance

    rng = np.random.default_rng(3)
    before = rng.uniform(-1, 1, 40)
    after = before + rng.normal(0.2, 0.05, 40)
    null = js_distance_null(before, after, permutations=99, seed=5)
    reference = permutation_test(
        (before, after),
        lambda x, y, axis=-1: np.array(
            [js_distance(a, b) for a, b in zip(np.atleast_2d(x), np.atleast_2d(y), strict=True)]
        ),
        permutation_type="samples",
        vectorized=True,
        n_resamples=99,
        alternative="greater",
        rng=np.random.default_rng(5),
    )
    assert null.p_value == pytest.approx(reference.pvalue) and null.permutations == 99
    assert null.mean == pytest.approx(np.mean(reference.null_distribution))
    exact = js_distance_null(before[:4], after[:4], permutations=200)
    assert exact.permutations == 16  # 2**4 swap patterns, all enumerated
    one = js_distance_null(before[:1], after[:1])  # one pair (a BEIR folder with two documents): no error
    assert (one.permutations, one.p_value, one.mean) == (2, 1.0, one.observed)
