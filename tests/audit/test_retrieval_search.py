"""The retrieval length-bias audit through the lexical (BM25) and hybrid searches (issue 35.5).

Known answers: BM25 never sees word order, so moving a unit inside filler changes nothing; with b < 1 a document
repeated m times scores strictly higher for every query term it holds (tf grows m-fold, the length norm less);
dilution with unrelated text lowers it. The hybrid rule is the index's own, and a perturbed text's fused rank is
checked against a brute-force re-fusion of the corpus with the text in its original's place.
"""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
import torch

from lengthwise.audit.retrieval.config import RetrievalAuditConfig
from lengthwise.audit.retrieval.natural import audit_retrieval
from lengthwise.audit.retrieval.sides import SearchSides
from lengthwise.core.embed import TokenView
from lengthwise.core.errors import SettingError

from .test_retrieval_known import CONFIG, LengthTermEncoder, synthetic_split

pytest.importorskip("bm25s")
pytest.importorskip("Stemmer")

from lengthwise.search.fusion import Fusion, FusionSettings, fuse
from lengthwise.search.lexical.scorer import BM25Scorer

SEARCH_CONFIG = replace(CONFIG, searches=("dense", "lexical", "hybrid"), lexical_weight=0.3)


@pytest.fixture(scope="module")
def view(tiny_model) -> TokenView:
    return TokenView(tiny_model)


@pytest.fixture(scope="module")
def split_keys(view):
    return synthetic_split(view.tokenizer, n_docs=160, n_queries=50)


@pytest.fixture(scope="module")
def scorer(split_keys) -> BM25Scorer:
    return BM25Scorer(split_keys[0].doc_texts)


@pytest.fixture(scope="module")
def audited(view, split_keys, scorer):
    split, keys = split_keys
    encoder = LengthTermEncoder(view.tokenizer, keys, 0.0)
    plain = audit_retrieval(encoder, split, view, replace(SEARCH_CONFIG, searches=("dense",)))
    both = audit_retrieval(encoder, split, view, SEARCH_CONFIG, lexical=scorer)
    return plain, both


def test_bm25_scores_a_text_outside_the_corpus_as_bm25s_scores_it_inside() -> None:
    docs = ["The cat sat on the mat with another cat.", "Dogs run in the park every morning.", "A cat and a dog.",
            "and the of", "Quantum physics of cats in boxes, and cat behaviour"]  # fmt: skip
    scorer = BM25Scorer(docs)
    for query in ("cat", "dog park", "cats boxes quantum", "the", "unheard-of words"):
        inside = scorer.corpus_scores(query)
        assert scorer.text_scores(query, docs) == pytest.approx(inside, abs=1e-5)
    assert scorer.corpus_scores("cat")[0] > 0
    repeated = scorer.text_scores("cat", [docs[0], docs[0] + " " + docs[0]])
    assert repeated[1] > repeated[0]  # b < 1: repetition raises BM25


def test_the_hybrid_matrix_is_the_index_fusion(view, split_keys, scorer) -> None:
    split, keys = split_keys
    encoder = LengthTermEncoder(view.tokenizer, keys, 0.0)
    queries = torch.as_tensor(encoder.encode_queries(split.query_texts))
    corpus = torch.as_tensor(encoder.encode_documents(split.doc_texts))
    sides = SearchSides.build(queries, corpus, scorer, split.query_texts, [-1] * len(split.query_texts), 0.3)
    fused = sides.matrix("hybrid")
    for q in range(0, len(split.query_texts), 7):
        # the audit fuses convexly (its own rule, METHODS): the index's convex fusion at the same weight
        expected = fuse(sides.dense[q], sides.lexical[q], FusionSettings(Fusion.CONVEX, weight=0.3))
        assert fused[q] == pytest.approx(expected, abs=1e-12)


def _brute_rank(sides: SearchSides, search: str, q: int, dense: float, lexical: float, skip: int) -> tuple[float, int]:
    """Put the text in row `skip`'s place, fuse the whole row the slow way, rank it."""
    d_row, l_row = sides.dense[q].copy(), sides.lexical[q].copy()
    d_row[skip], l_row[skip] = dense, lexical
    if search == "lexical":
        row = l_row
    else:
        top_d, top_l = max(d_row), max(l_row)
        row = np.array([(1 - sides.weight) * (d + 1) / (top_d + 1) + sides.weight * (x / top_l if top_l > 0 else 0)
                        for d, x in zip(d_row, l_row, strict=True)])  # fmt: skip
    return float(row[skip]), 1 + sum(row[j] > row[skip] for j in range(len(row)) if j != skip)


@pytest.mark.parametrize("search", ["lexical", "hybrid"])
def test_a_perturbed_texts_rank_is_the_brute_force_rank(view, split_keys, scorer, search) -> None:
    split, keys = split_keys
    encoder = LengthTermEncoder(view.tokenizer, keys, 0.0)
    queries = torch.as_tensor(encoder.encode_queries(split.query_texts))
    corpus = torch.as_tensor(encoder.encode_documents(split.doc_texts))
    sides = SearchSides.build(queries, corpus, scorer, split.query_texts, [-1] * len(split.query_texts), 0.3)
    rng = np.random.default_rng(0)
    query = rng.integers(0, len(split.query_texts), 40)
    skip = rng.integers(0, len(split.doc_texts), 40)
    dense = rng.uniform(-0.2, 1.0, 40)
    lexical = rng.uniform(0.0, 2.0, 40) * sides.lexical.max()  # some beat every document: new maxima
    scores, ranks = sides.key_scores(search, query, dense, lexical, skip)
    for k in range(40):
        expected = _brute_rank(sides, search, int(query[k]), dense[k], lexical[k], int(skip[k]))
        assert scores[k] == pytest.approx(expected[0], abs=1e-12)
        assert ranks[k] == expected[1]


def test_asking_for_other_searches_leaves_the_dense_audit_as_it_was(audited) -> None:
    plain, both = audited
    assert "by_search" not in plain and set(both["by_search"]) == {"lexical", "hybrid"}
    for part in ("natural", "controlled", "verdicts", "window", "top_k", "data"):
        assert json.dumps(both[part], sort_keys=True) == json.dumps(plain[part], sort_keys=True), part


def test_bm25_is_blind_to_position_rewards_repetition_and_penalises_dilution(audited) -> None:
    lexical = audited[1]["by_search"]["lexical"]
    for unit in lexical["controlled"]["position"].values():
        assert unit["friedman"]["p_value"] == 1.0
        assert len({setting["recall_after"] for setting in unit["depths"].values()}) == 1
    repeated = lexical["controlled"]["repetition"]["relevant"]["m=2"]
    assert repeated["score"]["mean_delta"] > 0 and repeated["score"]["p_value"] < 0.001
    assert repeated["rank"]["mean_delta"] <= 0
    diluted = lexical["controlled"]["dilution"]["2x"]
    assert diluted["score"]["mean_delta"] < 0 and diluted["rank"]["mean_delta"] > 0
    assert lexical["settings"]["lexical"]["engine"] == "bm25s"
    assert audited[1]["by_search"]["hybrid"]["settings"]["lexical_weight"] == 0.3


def test_a_lexical_search_without_a_scorer_or_an_unknown_search_is_refused(view, split_keys) -> None:
    split, keys = split_keys
    encoder = LengthTermEncoder(view.tokenizer, keys, 0.0)
    with pytest.raises(SettingError, match="searches"):
        audit_retrieval(encoder, split, view, SEARCH_CONFIG)
    assert not encoder.encoded  # refused before any embedding
    with pytest.raises(SettingError, match="dense, lexical, hybrid"):
        RetrievalAuditConfig(searches=("bm25",))


def test_the_report_and_markdown_carry_the_by_search_table(audited) -> None:
    from lengthwise.audit.report._retrieval import html_sections, markdown_tables, search_table

    section = audited[1]
    header, rows = search_table(section)
    assert [row[0] for row in rows] == ["dense", "lexical", "hybrid"] and len(header) == len(rows[0])
    assert search_table(audited[0]) is None
    html = "".join(html_sections({"retrieval_bias": section}, {}))
    assert "By search" in html and "lexical:" in html and "hybrid:" in html
    assert "| search | ρ(length, rank)" in markdown_tables(section)


def test_the_cli_refuses_an_unknown_search_in_one_line_before_loading(tmp_path) -> None:
    from typer.testing import CliRunner

    from lengthwise.cli import app

    result = CliRunner().invoke(
        app, ["audit", "--model", str(tmp_path / "no-model"), "--retrieval", str(tmp_path),
              "--retrieval-search", "lexical,bm25", "--out", str(tmp_path / "o")],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.strip().splitlines() if line.strip()]
    assert lines[0].startswith("error:") and "bm25" in result.output and "dense, lexical, hybrid" in result.output
    assert not (tmp_path / "o").exists()


def test_the_cli_refuses_a_search_without_retrieval_data(tmp_path) -> None:
    from typer.testing import CliRunner

    from lengthwise.cli import app

    result = CliRunner().invoke(app, ["audit", "--retrieval-search", "hybrid", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2, result.output
    assert "--retrieval DIR" in result.output and not (tmp_path / "o").exists()
