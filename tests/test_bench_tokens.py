"""The token study's benchmarks: MUVERA's fixed-dimensional encoding as benchmarks/search/token_first_stage.py
writes it (a document's empty buckets take the nearest occupied bucket's first token, a query's buckets sum and a
document's average), and a second model's rows written apart from the default model's."""

from __future__ import annotations

import importlib

import numpy as np
import pytest


@pytest.fixture(scope="module")
def stage():
    return importlib.import_module("benchmarks.search.token_first_stage")  # run from the repository root


def _unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=-1, keepdims=True)).astype(np.float32)


def test_a_one_token_document_fills_every_bucket_with_that_token(stage) -> None:
    fde = stage.Fde(dim=16, k=3, p=8, r=4, seed=1)
    token = _unit(np.random.default_rng(0).normal(size=(1, 16)))
    encoded = fde.encode(token, document=True).reshape(4, 8, 8)
    expected = np.einsum("d,rdp->rp", token[0], fde.projections)  # each repetition's projection of the token
    np.testing.assert_allclose(encoded, np.broadcast_to(expected[:, None, :], encoded.shape), rtol=1e-5, atol=1e-6)
    assert fde.dims == 4 * 8 * 8


def test_a_query_sums_its_buckets_and_a_document_averages_them(stage) -> None:
    fde = stage.Fde(dim=16, k=2, p=16, r=1, seed=2)
    same = _unit(np.random.default_rng(1).normal(size=(1, 16)))
    twice = np.concatenate([same, same])  # two copies land in one bucket
    query, document = fde.encode(twice, document=False), fde.encode(twice, document=True)
    single = fde.encode(same, document=False)
    np.testing.assert_allclose(query, 2 * single, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(document, fde.encode(same, document=True), rtol=1e-5, atol=1e-6)


def test_a_second_models_rows_go_under_models_and_keep_the_defaults(tmp_path, monkeypatch) -> None:
    import argparse
    import json

    tokens = importlib.import_module("benchmarks.search.tokens")
    results = tmp_path / "token_side.json"
    results.write_text(json.dumps({"table": {"qmsum-dev": {"hybrid": 57.0}}, "runs": [{"sets": ["qmsum"]}]}))
    monkeypatch.setattr(tokens, "RESULTS", results)
    other = argparse.Namespace(model="/models/all-mpnet-base-v2", default_codec="pca512-bin", rescore=100)
    tokens._merged(other, {"table": {"scifact-dev": {"hybrid": 90.0}}}, "runs", {"sets": ["scifact"]})
    tokens._merged(other, {"table": {"scifact-test": {"hybrid": 89.0}}}, "runs", {"sets": ["scifact"]})
    default = argparse.Namespace(model=tokens.DEFAULT_MODEL, default_codec="bin", rescore=100)
    tokens._merged(default, {"table": {"qmsum-test": {"hybrid": 65.0}}}, "runs", {"sets": ["qmsum"]})
    written = json.loads(results.read_text())
    assert written["table"] == {"qmsum-dev": {"hybrid": 57.0}, "qmsum-test": {"hybrid": 65.0}}
    assert len(written["runs"]) == 2
    mpnet = written["models"]["all-mpnet-base-v2"]
    assert mpnet["table"] == {"scifact-dev": {"hybrid": 90.0}, "scifact-test": {"hybrid": 89.0}}
    assert (mpnet["model"], mpnet["default_codec"], len(mpnet["runs"])) == (other.model, "pca512-bin", 2)


def test_a_synthetic_run_records_its_tasks_and_no_corpus(tmp_path, monkeypatch) -> None:
    import json

    tokens = importlib.import_module("benchmarks.search.tokens")
    monkeypatch.setattr(tokens, "RESULTS", tmp_path / "token_side.json")
    monkeypatch.setattr(tokens, "synthetic", lambda args: {"passkey-test": {"hybrid": 100.0}})
    tokens.main(["--synthetic", "passkey", "--per-length", "4", "--threads", "1"])
    run = json.loads((tmp_path / "token_side.json").read_text())["synthetic_runs"][0]
    assert (run["sets"], run["tasks"], run["per_length"]) == ([], ["passkey"], 4)  # not --sets' default corpus


def test_the_default_is_rechosen_over_corpora_and_models_and_left_out_one_corpus_at_a_time() -> None:
    tokens = importlib.import_module("benchmarks.search.tokens")
    arms = tokens.DEFAULT_ARMS  # hybrid, every token at 0.4, around8 at 0.3 / 0.4 / 0.5

    def row(*scores: float) -> dict[str, float]:
        return dict(zip(arms, scores, strict=True))

    results = {
        "model": tokens.DEFAULT_MODEL,
        "around": {"qmsum-dev": row(50, 51, 52, 53, 50.5), "qmsum-test": row(60, 61, 62, 63, 64),
                   "scifact-dev": row(90, 89, 90, 90.5, 91), "scifact-test": row(88, 88, 89, 90, 87)},
        "synthetic": {"needle-dev": row(80, 80, 80, 80, 80), "needle-dev:by_length": {"256": 1}},
        "models": {"other": {"around": {"qmsum-dev": row(40, 40, 40, 42, 41), "qmsum-test": row(45, 44, 44, 46, 47)}}},
    }  # fmt: skip
    chosen = tokens.choose_default(results)
    assert chosen["pairs"] == [["qmsum", "all-MiniLM-L6-v2"], ["qmsum", "other"], ["scifact", "all-MiniLM-L6-v2"]]
    assert ["needle", "all-MiniLM-L6-v2"] in chosen["missing"] and ["scifact", "other"] in chosen["missing"]
    # worst dev regrets: around8:0.4 loses 0.5 at most (scifact), around8:0.5 2.5 (qmsum): only 0.4 is admissible
    assert chosen["admissible"] == ["around8:0.4"] and chosen["chosen"] == "around8:0.4"
    # scifact held out: on the two qmsum dev rows around8:0.4 is best; scored on scifact's test split (best 90)
    held = chosen["held_out"]["scifact/all-MiniLM-L6-v2"]
    assert held == {"chosen": "around8:0.4", "test": 90, "best": "around8:0.4", "loss": 0}
    # qmsum held out: scifact's dev row alone picks around8:0.5 (91), scored on each model's qmsum test split
    assert chosen["held_out"]["qmsum/other"]["chosen"] == "around8:0.5"
    assert chosen["held_out"]["qmsum/all-MiniLM-L6-v2"]["loss"] == 0


def test_a_shallower_stage_rescores_only_the_best_n_and_its_depth_is_chosen_by_the_same_rule() -> None:
    tokens = importlib.import_module("benchmarks.search.tokens")
    rng = np.random.default_rng(3)
    hybrid, near = rng.normal(size=(4, 60)), rng.normal(size=(4, 60))
    arms = tokens._shallower(hybrid, near)
    assert set(arms) == {f"around8:{w}@{n}" for w in (0.4, 0.5) for n in tokens.STAGE_DEPTHS}
    for name, scores in arms.items():
        depth = int(name.rsplit("@", 1)[1])
        for q in range(len(hybrid)):
            top = np.argsort(-hybrid[q], kind="stable")[:depth]
            rest = np.setdiff1d(np.arange(60), top)
            np.testing.assert_array_equal(scores[q, rest], hybrid[q, rest])  # below the depth: the hybrid's own
            assert scores[q, top].min() > scores[q, rest].max()  # the rescored stay above the rest
        np.testing.assert_array_equal(scores, tokens._rescored(hybrid, near, float(name[8:11]), depth))
    arms = tokens.DEPTH_ARMS
    row = {arm: 80.0 for arm in arms}
    results = {
        "model": tokens.DEFAULT_MODEL,
        "around": {
            "qmsum-dev": {**row, "around8:0.5@30": 81.0},
            "qmsum-test": {**row, "hybrid": 82.0},
            "scifact-dev": {**row, "around8:0.5@30": 80.5, "around8:0.5": 78.5},
            "scifact-test": row,
        },
    }
    chosen = tokens.choose_default(results, arms)  # fmt: skip
    assert chosen["arms"] == list(arms) and chosen["chosen"] == "around8:0.5@30"
    assert "around8:0.5" not in chosen["admissible"]  # 2 points below the best on scifact's dev split
    assert chosen["held_out"]["qmsum/all-MiniLM-L6-v2"] == {"chosen": "around8:0.5@30", "test": 80.0,
                                                            "best": "hybrid", "loss": 2.0}  # fmt: skip


def test_two_token_sides_rescore_the_hybrid_as_one_z_fusion_of_all_three() -> None:
    from lengthwise.core.fusion import fuse_normalised

    tokens = importlib.import_module("benchmarks.search.tokens")
    rng = np.random.default_rng(5)
    hybrid, plain, colbert = (rng.normal(size=(3, 40)) for _ in range(3))
    one = tokens._rescored(hybrid, plain, 0.4, 10)
    np.testing.assert_array_equal(one, tokens._rescored(hybrid, [plain], [0.4], 10))  # one side: as before
    both = tokens._rescored(hybrid, [plain, colbert], [0.2, 0.3], 10)
    for q in range(3):
        top = np.argsort(-hybrid[q], kind="stable")[:10]
        fused = fuse_normalised([hybrid[q, top], plain[q, top], colbert[q, top]], [0.5, 0.2, 0.3], "zscore")
        assert list(np.argsort(-both[q, top], kind="stable")) == list(np.argsort(-fused, kind="stable"))
        rest = np.setdiff1d(np.arange(40), top)
        np.testing.assert_array_equal(both[q, rest], hybrid[q, rest])
    with pytest.raises(AssertionError, match="a weight for each"):
        tokens._rescored(hybrid, [plain, colbert], [0.2], 10)
