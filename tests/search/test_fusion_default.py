"""The hybrid default of issue 49 (z-scores over the query's candidates, lexical weight 0.3, shared by BM25 over
whole documents and over windows): an index built with text holds both granularities and records the fusion,
searches with it as its exact scan ranks, and `index tune` records its own choice over it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from lengthwise.core.fusion import DEFAULT_FUSION, Fusion, Mode
from lengthwise.search.exact import exact_ranked
from lengthwise.search.types import FusionSettings

from .conftest import encode_windows, haystack_rows


@pytest.fixture(scope="module")
def encoded(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return encode_windows(tmp_path_factory.mktemp("fusion-default"), haystack_rows(), tiny_model_dir)


def test_the_default_is_zscore_at_lexical_weight_0_3_over_both_granularities() -> None:
    from lengthwise.core.fusion import LEXICAL_GRANULARITY

    assert DEFAULT_FUSION == {"fusion": "zscore", "weight": 0.3}
    assert FusionSettings() == FusionSettings(Fusion.ZSCORE, 0.3)
    assert LEXICAL_GRANULARITY == "both"


def test_both_granularities_fuse_each_bm25_side_at_half_the_lexical_weight() -> None:
    """Three sides, z-scored over the candidates: 0.7 · dense + 0.15 · document BM25 + 0.15 · window BM25; one
    lexical row fuses as before (the two-sided rule), and convex fusion is the mean of each side's."""
    from lengthwise.core.fusion import convex_fuse, normalised
    from lengthwise.search.fusion import fuse

    rng = np.random.default_rng(0)
    dense, document, window = rng.uniform(-1, 1, 30), rng.gamma(2.0, 2.0, 30), rng.gamma(2.0, 2.0, 30)
    both = fuse(dense, np.stack([document, window]), FusionSettings(Fusion.ZSCORE, 0.3))
    z = [normalised(x, "zscore") for x in (dense, document, window)]
    np.testing.assert_allclose(both, 0.7 * z[0] + 0.15 * z[1] + 0.15 * z[2], rtol=1e-12)
    one = fuse(dense, window, FusionSettings(Fusion.ZSCORE, 0.3))
    np.testing.assert_array_equal(one, fuse(dense, window[None], FusionSettings(Fusion.ZSCORE, 0.3)))
    np.testing.assert_allclose(one, 0.7 * z[0] + 0.3 * z[2], rtol=1e-12)
    convex = fuse(dense, np.stack([document, window]), FusionSettings(Fusion.CONVEX, 0.4))
    expected = (convex_fuse(dense, document, 0.4) + convex_fuse(dense, window, 0.4)) / 2
    np.testing.assert_allclose(convex, expected, rtol=1e-12)


def test_an_index_holds_both_granularities_and_a_window_build_one(encoded: Path, tmp_path: Path) -> None:
    """The default build writes BM25 over whole documents inside the window side's folder; each side scores as a
    lexical index of its own granularity built alone would; ``granularity="window"`` builds the window side only."""
    import lengthwise as lw
    from lengthwise.search.lexical.bm25 import BothGranularities, LexicalIndex
    from lengthwise.search.types import Granularity

    index = lw.LongIndex.build(encoded, tmp_path / "idx", quantize="none", engine="faiss")
    assert isinstance(index.lexical, BothGranularities) and index.lexical.granularity is Granularity.BOTH
    assert (Path(index.lexical.folder) / "document" / "lexical.json").is_file()
    window = lw.LongIndex.build(encoded, tmp_path / "window", quantize="none", engine="faiss", granularity="window")
    document = lw.LongIndex.build(encoded, tmp_path / "doc", quantize="none", engine="faiss", granularity="document")
    assert isinstance(window.lexical, LexicalIndex) and window.lexical.granularity is Granularity.WINDOW
    assert not (Path(window.lexical.folder) / "document").exists()
    query = "the river and the old bridge"
    sides = index.lexical.side_scores(query)
    assert sides.shape == (2, len(index.doc_ids))
    np.testing.assert_array_equal(sides[0], document.lexical.scores(query))
    np.testing.assert_array_equal(sides[1], window.lexical.scores(query))
    lexical = [(h.id, h.score) for h in index.search(query, k=5, mode="lexical")[0]]
    assert lexical == [(h.id, h.score) for h in window.search(query, k=5, mode="lexical")[0]]  # the window side


def test_an_index_built_with_text_records_the_default_and_searches_with_it(encoded: Path, tmp_path: Path) -> None:
    import lengthwise as lw

    index = lw.LongIndex.build(encoded, tmp_path / "idx", quantize="none", engine="faiss")
    assert index.lexical.settings["fusion"] == DEFAULT_FUSION  # in lexical.json, beside the BM25 settings
    assert json.loads((Path(index.lexical.folder) / "lexical.json").read_text())["fusion"] == DEFAULT_FUSION
    reopened = lw.LongIndex.open(tmp_path / "idx")
    assert reopened.fusion == FusionSettings(Fusion.ZSCORE, 0.3) and reopened.search_mode() is Mode.HYBRID
    queries = ["the river and the old bridge", "a keyboard with a broken key"]
    found = reopened.search(queries, k=5)
    searcher = reopened.searcher
    vectors = np.asarray(reopened.embed_queries(queries))
    for hits, vector, text in zip(found, vectors, queries, strict=True):
        exact = exact_ranked(searcher, vector, text, 5, Mode.HYBRID, reopened.fusion)
        assert [hit.id for hit in hits] == [doc for doc, _ in exact]  # 24 documents: every one a candidate
        np.testing.assert_allclose([hit.score for hit in hits], [score for _, score in exact], rtol=1e-6)


def test_tune_records_its_choice_over_the_default(encoded: Path, tmp_path: Path) -> None:
    import lengthwise as lw
    from lengthwise.pipelines import tune_hybrid

    rows = haystack_rows()
    beir = tmp_path / "beir"
    (beir / "qrels").mkdir(parents=True)
    (beir / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    queries = [{"_id": f"q{i}", "text": " ".join(r["text"].split()[3:9])} for i, r in enumerate(rows)]
    (beir / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (beir / "qrels" / "dev.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\tdoc{i}\t1\n" for i in range(len(rows)))
    )
    index = lw.LongIndex.build(encoded, tmp_path / "idx", quantize="none", engine="faiss")
    assert index.fusion == FusionSettings()
    result = tune_hybrid(index, beir, split="dev", weights=(0.3, 0.9))
    assert {"zscore-0.3", "zscore-0.9", "convex-0.3", "convex-0.9", "rrf"} <= set(result["scores"])
    reopened = lw.LongIndex.open(tmp_path / "idx")
    assert reopened.fusion.to_dict() == result["fusion"] and reopened.lexical.settings["mode"] == result["mode"]
    assert reopened.lexical.settings["tuned"]["split"] == "dev"
