"""Retrieval length-bias audit: its statistics, its token-level perturbations, and the whole audit through a real
(tiny) sentence-transformer, its report section and its comparison rows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats

from lengthwise.audit.report.compare import headline_rows, write_comparison
from lengthwise.audit.retrieval.config import RetrievalAuditConfig
from lengthwise.audit.retrieval.natural import audit_retrieval
from lengthwise.audit.retrieval.perturb import (
    WordIds,
    build_filler,
    cut_to_fit,
    dilute,
    insert_at_depth,
    repeat,
    word_ids,
)
from lengthwise.audit.retrieval.stats import (
    friedman,
    length_percentiles,
    paired_shift,
    partial_spearman,
    spearman,
    wilcoxon_p,
)
from lengthwise.core.embed import TokenView
from lengthwise.core.encoder import SentenceTransformerEncoder
from lengthwise.core.errors import DataFormatError, SettingError

from .test_retrieval_known import synthetic_split

# --- statistics ---------------------------------------------------------------------------------------------------


def test_spearman_matches_scipy_and_a_constant_gives_no_link() -> None:
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=50), rng.normal(size=50)
    assert spearman(x, y)["rho"] == pytest.approx(stats.spearmanr(x, y).statistic)
    assert spearman(np.ones(10), y[:10]) == {"rho": 0.0, "p_value": 1.0, "n": 10}


def test_partial_spearman_removes_the_group_and_keeps_the_within_group_link() -> None:
    rng = np.random.default_rng(1)
    groups = []
    for offset in range(20):  # across groups x and y run in opposite directions; within each group they agree
        x = rng.normal(size=30)
        groups.append((x + 10 * offset, x + rng.normal(scale=0.1, size=30) - 10 * offset))
    pooled_raw = stats.spearmanr(np.concatenate([g[0] for g in groups]), np.concatenate([g[1] for g in groups]))
    pooled, per_group = partial_spearman(groups)
    assert pooled_raw.statistic < -0.5  # the group confounds the raw correlation …
    assert pooled > 0.9 and per_group.shape == (20,) and per_group.min() > 0.9  # … the partial one does not


def test_paired_shift_finds_a_known_shift_and_none_in_equal_pairs() -> None:
    rng = np.random.default_rng(2)
    before = rng.normal(size=200)
    shifted = paired_shift(before, before + 0.5 + rng.normal(scale=0.1, size=200), resamples=500)
    assert shifted["mean_delta"] == pytest.approx(0.5, abs=0.03)
    assert shifted["ci95"][0] < 0.5 < shifted["ci95"][1] and shifted["p_value"] < 1e-10
    same = paired_shift(before, before)
    assert same["p_value"] == 1.0 and same["ci95"] == [0.0, 0.0] and same["n_changed"] == 0
    assert wilcoxon_p(np.zeros(5)) == 1.0
    with pytest.raises(SettingError, match="equal non-empty"):
        paired_shift(before, before[:3])


def test_length_percentiles_of_the_reference_itself_average_one_half() -> None:
    reference = np.random.default_rng(3).integers(10, 500, size=1000)
    assert length_percentiles(reference, reference).mean() == pytest.approx(0.5)
    assert length_percentiles(np.array([1, 2, 3, 4]), np.array([0, 5, 2])).tolist() == [0.0, 1.0, 0.375]


def test_friedman_needs_three_conditions_and_sees_none_in_identical_rows() -> None:
    assert friedman(np.ones((5, 8))) == {"statistic": 0.0, "p_value": 1.0}
    rows = np.vstack([np.arange(10), np.arange(10) + 1, np.arange(10) + 2])
    assert friedman(rows)["p_value"] < 0.001
    with pytest.raises(SettingError, match=r"measurements=\(2, 4\): the Friedman test needs \(k ≥ 3, n\)"):
        friedman(np.ones((2, 4)))


# --- perturbations ------------------------------------------------------------------------------------------------


def test_word_ids_mark_word_starts_and_filler_cuts_fall_on_them(tiny_model) -> None:
    tokenizer = TokenView(tiny_model).tokenizer
    texts = ["Unbelievably tokenizable words.", "Another sentence, with commas; and more."]
    words = word_ids(tokenizer, texts)
    pieces = tokenizer.convert_ids_to_tokens(list(words[0].ids))
    assert [start for piece, start in zip(pieces, words[0].starts, strict=True)] == [
        not piece.startswith("##") for piece in pieces
    ]
    filler = build_filler(words, [1, 0], 12)
    assert len(filler) == 12 and filler.starts[0]
    unit = tokenizer("the needle", add_special_tokens=False)["input_ids"]
    for depth in (0.0, 0.25, 0.5, 0.75, 1.0):
        sequence = insert_at_depth(unit, filler, depth)
        split = filler.split_index(depth)
        assert sequence[split : split + len(unit)] == unit
        assert split == len(filler) or filler.starts[split]
        assert tokenizer(tokenizer.decode(sequence), add_special_tokens=False)["input_ids"] == sequence


def test_filler_cycles_short_sources_and_refuses_none() -> None:
    sources = [WordIds((1, 2), (True, False)), WordIds((), ())]
    assert build_filler(sources, [0, 1], 5).ids == (1, 2, 1, 2, 1)
    with pytest.raises(DataFormatError, match="no filler"):
        build_filler(sources, [1], 3)


def test_dilute_repeat_and_cut() -> None:
    filler = build_filler([WordIds((7, 8, 9), (True, True, True))], [0], 3)
    assert dilute([1, 2], filler, 2) == [1, 2, 7, 8]
    assert repeat([1, 2], 3, 5) == [1, 2, 1, 2]  # capped: never a partial copy
    assert cut_to_fit([1, 2, 3], 2) == [1, 2]
    with pytest.raises(SettingError, match=r"k=4: more filler tokens than the filler holds \(3\)"):
        dilute([1], filler, 4)


def test_config_errors_name_the_setting() -> None:
    with pytest.raises(ValueError, match="repetition"):
        RetrievalAuditConfig(repetition=(1,))
    with pytest.raises(ValueError, match="depths"):
        RetrievalAuditConfig(depths=(0.0, 1.0))
    with pytest.raises(ValueError, match="window=4"):
        RetrievalAuditConfig(window=4)


# --- the whole audit through a real sentence-transformer --------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_section(tiny_model, one_thread) -> dict[str, Any]:
    split, _ = synthetic_split(TokenView(tiny_model).tokenizer, n_docs=60, n_queries=12)
    config = RetrievalAuditConfig(bootstrap_resamples=200, max_pairs=10, repetition=(2,))
    return dict(audit_retrieval(SentenceTransformerEncoder(tiny_model), split, TokenView(tiny_model), config))


def test_audit_through_a_sentence_transformer_fits_the_window(tiny_section, tiny_model) -> None:
    window = TokenView(tiny_model).max_content
    controlled = tiny_section["controlled"]
    assert tiny_section["window"] == window and controlled["n_pairs"] == 10 and controlled["pairs_available"] == 12
    settings = [*controlled["dilution"].values(), *controlled["repetition"]["relevant"].values()]
    settings += [s for unit in controlled["position"].values() for s in unit["depths"].values()]
    assert all(s["n"] == 10 and 0 < s["tokens_mean"] <= window for s in settings)
    assert set(controlled["dilution"]) == {"0.5x", "1x", "2x", "4x"}
    assert tiny_section["cost"]["roundtrip_exact"] == 1.0
    json.dumps(tiny_section, allow_nan=False)  # audit.json is strict JSON


def test_the_same_seed_gives_the_same_audit(tiny_model, tiny_section) -> None:
    split, _ = synthetic_split(TokenView(tiny_model).tokenizer, n_docs=60, n_queries=12)
    config = RetrievalAuditConfig(bootstrap_resamples=200, max_pairs=10, repetition=(2,))
    again = audit_retrieval(SentenceTransformerEncoder(tiny_model), split, TokenView(tiny_model), config)
    assert again["controlled"] == tiny_section["controlled"] and again["natural"] == tiny_section["natural"]


@pytest.fixture(scope="module")
def payload(tiny_model, tiny_section) -> dict[str, Any]:
    from lengthwise.audit.config import AuditConfig
    from lengthwise.audit.pairs.attack import run_audit
    from lengthwise.core.data import default_probe_pairs

    pairs = default_probe_pairs().sample(12, seed=0)
    result = run_audit(tiny_model, pairs, AuditConfig(curve_ks=(16,), word_shuffle=False), model_name="tiny")
    return {**result.to_dict(), "retrieval_bias": tiny_section}


def test_report_has_the_retrieval_section_with_plots_and_verdicts(payload, tmp_path: Path) -> None:
    from lengthwise.audit.report.page import write_report

    written = write_report(payload, tmp_path)
    assert {"retrieval_natural", "retrieval_controlled"} <= set(written)
    page = written["html"].read_text(encoding="utf-8")
    assert "<h2>Retrieval length bias</h2>" in page
    for verdict in payload["retrieval_bias"]["verdicts"]:
        assert verdict["text"].replace("'", "&#x27;") in page
    without = {key: value for key, value in payload.items() if key != "retrieval_bias"}
    write_report(without, tmp_path)
    assert not (tmp_path / "retrieval_natural.png").exists()  # a stale retrieval plot is removed


def test_comparison_shows_retrieval_rows_and_overlay(payload, tmp_path: Path) -> None:
    other = json.loads(json.dumps(payload))
    other["retrieval_bias"]["controlled"]["dilution"]["2x"]["rank"]["mean_delta"] += 5.0
    rows = {row[0]: row[1:] for row in headline_rows([payload, other])}
    first, second = rows["retrieval: mean Δrank, diluted to 2×"]
    assert float(second) == pytest.approx(float(first) + 5.0, abs=0.06)
    written = write_comparison([payload, other], tmp_path, labels=["a", "b"])
    assert "retrieval" in written and "Retrieval length bias" in written["html"].read_text(encoding="utf-8")


def test_verdict_follows_the_direction_most_pairs_moved_when_the_mean_disagrees() -> None:
    """Regression: 20 pairs moved down 1 rank and one moved up 40; Wilcoxon says "down" (p < 0.05) while the mean
    is negative, and the verdict said the documents *gain* ranks."""
    from lengthwise.audit.retrieval.result import _shift_verdict, signed_rank_balance

    before = np.full(21, 50.0)
    delta = np.array([1.0] * 20 + [-40.0])
    shift = paired_shift(before, before + delta, resamples=300)
    assert shift["p_value"] < 0.05 and shift["mean_delta"] < 0 and signed_rank_balance(delta) > 0
    setting = {
        "label": "m=2",
        "n": 21,
        "n_cut": 0,
        "tokens_before_mean": 10.0,
        "tokens_mean": 20.0,
        "rank": shift,
        "score": shift,
        "recall_before": 0.5,
        "recall_after": 0.4,
        "delta_rank": delta.astype(int).tolist(),
    }
    text = _shift_verdict("repetition_relevant", "Relevant documents", "when repeated", setting, 0.05, 10)["text"]
    assert "tend to move down" in text and "gain" not in text and "not clear" in text
