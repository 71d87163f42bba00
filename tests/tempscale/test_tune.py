"""Choosing t (grid + bounded search on any objective) and the `lengthwise tempscale` commands."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from lengthwise.cli import app
from lengthwise.tempscale import LengthSchedule, TempScaleConfig, TempScaleError, current_tempscale
from lengthwise.tempscale.tune import TuneSpec, config_for, plot_tune_curve, tune_temperature

pytestmark = pytest.mark.usefixtures("one_thread")
runner = CliRunner()


def _peaked(at: float, calls: list[float]):
    def objective(config: TempScaleConfig) -> float:
        calls.append(config.t)
        return -((config.t - at) ** 2)

    return objective


def test_grid_then_search_finds_the_optimum_and_evaluates_each_t_once() -> None:
    calls: list[float] = []
    result = tune_temperature(_peaked(0.73, calls), TuneSpec(grid=(0.5, 0.6, 0.7, 0.8, 0.9), xatol=0.002))
    assert abs(result.best_t - 0.73) < 0.01
    assert len(calls) == len(set(calls)) == len(result.curve)
    ts = [t for t, _ in result.curve]
    assert ts == sorted(ts) and 1.0 in ts  # the untouched model is always on the curve
    assert result.baseline_score == pytest.approx(-(0.27**2))
    assert set(result.sources) == {"grid", "search", "baseline"}
    searched = [t for t, src in zip(ts, result.sources, strict=True) if src == "search"]
    assert searched and all(0.6 <= t <= 0.8 for t in searched)  # between the best grid point's neighbours
    payload = result.to_dict()
    assert payload["gain"] == pytest.approx(result.best_score - result.baseline_score)
    json.dumps(payload)


def test_grid_only_search_only_and_minimising() -> None:
    calls: list[float] = []
    grid_only = tune_temperature(_peaked(0.62, calls), TuneSpec(grid=(0.6, 0.8), search=False))
    assert grid_only.best_t == 0.6 and len(calls) == 3
    bounded = tune_temperature(_peaked(0.9, []), TuneSpec(grid=(), bounds=(0.4, 1.2), xatol=1e-3))
    assert abs(bounded.best_t - 0.9) < 0.01
    lowest = tune_temperature(lambda c: (c.t - 0.55) ** 2, TuneSpec(grid=(0.5, 0.6, 0.7), maximize=False))
    assert abs(lowest.best_t - 0.55) < 0.02


def test_sides_keep_the_rest_of_the_base_config() -> None:
    base = TempScaleConfig(t=0.9, schedule=LengthSchedule((32.0, 256.0), (1.0, 0.8)))
    assert config_for(TuneSpec(side="query", base=base), 0.5) == TempScaleConfig(
        t=0.9, t_query=0.5, schedule=base.schedule
    )
    assert config_for(TuneSpec(side="document", base=base), 0.7).t_doc == 0.7
    assert config_for(TuneSpec(base=base), 0.7).t == 0.7


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"grid": (0.5, -1.0)}, "positive temperatures"),
        ({"grid": (), "search": False}, "nothing to tune"),
        ({"bounds": (1.0, 0.5)}, "0 < low < high"),
        ({"grid": (0.7,)}, "at least two"),
        ({"side": "both-ways"}, "side"),
    ],
)
def test_spec_validation(kwargs: dict, message: str) -> None:
    with pytest.raises(TempScaleError, match=message):
        TuneSpec(**kwargs)


def test_non_finite_objective_is_an_error() -> None:
    with pytest.raises(TempScaleError, match="returned nan"):
        tune_temperature(lambda c: float("nan"), TuneSpec(grid=(0.5, 1.0), search=False))


def test_plot_has_every_point() -> None:
    result = tune_temperature(_peaked(0.7, []), TuneSpec(grid=(0.5, 0.75, 1.0)))
    figure = plot_tune_curve(result, "spearman")
    axes = figure.axes[0]
    plotted = sum(len(c.get_offsets()) for c in axes.collections)
    assert plotted == len(result.curve) and axes.get_ylabel() == "spearman"
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    assert buffer.getvalue()[:4] == b"\x89PNG"


# ------------------------------------------------------------------------------------------------- the CLI


def _error(result) -> str:
    assert result.exit_code == 2, result.output
    assert result.output.strip().startswith("error:")
    return " ".join(result.output.split())


def test_help_and_families() -> None:
    for command in ([], ["bake"], ["tune"], ["save"]):
        result = runner.invoke(app, ["tempscale", *command, "--help"])
        assert result.exit_code == 0 and "Usage" in result.output
    result = runner.invoke(app, ["tempscale", "families"])
    assert result.exit_code == 0
    assert all(name in result.output for name in ("BERT", "XLM-R", "DistilBERT", "MPNet", "ModernBERT"))


def test_bake_writes_a_plain_model_and_verifies(tiny_model_dir: Path, tiny_model, tmp_path: Path) -> None:
    from sentence_transformers import SentenceTransformer

    from lengthwise.tempscale import tempscale

    out = tmp_path / "baked"
    result = runner.invoke(app, ["tempscale", "bake", "--model", str(tiny_model_dir), "--t", "0.7", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "max |baked − run-time|" in result.output
    texts = ["one short text", "and a second, longer one with more words"]
    with tempscale(tiny_model, 0.7):
        expected = tiny_model.encode(texts)
    np.testing.assert_allclose(SentenceTransformer(str(out), device="cpu").encode(texts), expected, atol=1e-5)


def test_bake_refuses_a_schedule_with_the_reason(tiny_model_dir: Path, tmp_path: Path) -> None:
    args = ["tempscale", "bake", "--model", str(tiny_model_dir), "--t", "0.7", "--out", str(tmp_path / "b")]
    message = _error(runner.invoke(app, [*args, "--schedule", "32:1.0,64:0.8"]))
    assert "cannot bake TempScale exactly" in message and "length schedule" in message
    assert "LENGTH:FACTOR" in _error(runner.invoke(app, [*args, "--schedule", "long"]))
    negative = runner.invoke(app, [*args[:4], "--t", "-1", "--out", str(tmp_path / "c")])
    assert "--t -1.0: not a positive" in _error(negative)
    assert not (tmp_path / "b").exists()


def test_save_then_load_model_reapplies(tiny_model_dir: Path, tmp_path: Path) -> None:
    from lengthwise.facade import load_model

    out = tmp_path / "saved"
    args = ["tempscale", "save", "--model", str(tiny_model_dir), "--t", "0.8", "--t-query", "0.6", "--out", str(out)]
    assert runner.invoke(app, args).exit_code == 0
    patch = current_tempscale(load_model(out, device="cpu"))
    assert patch is not None and patch.config == TempScaleConfig(t=0.8, t_query=0.6)


def test_tune_sts_writes_curve_and_plot(tiny_model_dir: Path, tmp_path: Path) -> None:
    rows = [
        ("a cat sits on the mat", "a cat is on the mat", 4.8),
        ("a man plays a guitar", "someone plays music", 3.1),
        ("the stock market fell", "a cat is on the mat", 0.2),
        ("children play in the park", "kids are playing outside", 4.2),
        ("a plane takes off", "the stock market fell", 0.1),
        ("rain is falling hard", "it is raining heavily", 4.6),
    ]
    data = tmp_path / "sts-dev.tsv"
    data.write_text("".join(f"{a}\t{b}\t{s}\n" for a, b, s in rows), encoding="utf-8")
    out = tmp_path / "tune"
    args = ["tempscale", "tune", "--task-type", "sts", "--data", str(data), "--model", str(tiny_model_dir)]
    result = runner.invoke(app, [*args, "--grid", "0.5,0.8,1.0", "--out", str(out)])
    assert result.exit_code == 0, result.output
    payload = json.loads((out / "tune.json").read_text())
    assert payload["metric"] == "spearman" and payload["data"]["n_pairs"] == 6
    assert {row["source"] for row in payload["result"]["curve"]} >= {"grid", "baseline"}
    assert payload["model"]["weights_sha256_16"] and payload["environment"]["packages"]
    assert (out / "tune.png").read_bytes()[:4] == b"\x89PNG"
    result = runner.invoke(app, [*args, "--grid", "", "--bounds", "0.5", "0.9", "--max-evals", "3", "--out", str(out)])
    assert result.exit_code == 0, result.output
    curve = json.loads((out / "tune.json").read_text())["result"]["curve"]
    assert [row["source"] for row in curve].count("search") == 3
    assert all(0.5 <= row["t"] <= 0.9 for row in curve if row["source"] == "search")
    assert "not comma-separated" in _error(runner.invoke(app, [*args, "--grid", "a,b"]))
    missing = _error(runner.invoke(app, ["tempscale", "tune", "--task-type", "retrieval", "--data", str(tmp_path)]))
    assert "corpus" in missing


def test_tune_retrieval_and_classification_paths(tiny_model_dir: Path, tmp_path: Path) -> None:
    beir = tmp_path / "beir"
    (beir / "qrels").mkdir(parents=True)
    docs = {f"d{i}": f"document number {i} about {topic}" for i, topic in enumerate(["cats", "stocks", "rain"] * 4)}
    (beir / "corpus.jsonl").write_text("".join(json.dumps({"_id": k, "text": v}) + "\n" for k, v in docs.items()))
    queries = {"q0": "cats", "q1": "stock market", "q2": "weather"}
    (beir / "queries.jsonl").write_text("".join(json.dumps({"_id": k, "text": v}) + "\n" for k, v in queries.items()))
    (beir / "qrels" / "dev.tsv").write_text("query-id\tcorpus-id\tscore\nq0\td0\t1\nq1\td1\t1\nq2\td2\t1\n")
    common = ["--model", str(tiny_model_dir), "--grid", "0.7,1.0", "--no-search"]
    result = runner.invoke(
        app,
        ["tempscale", "tune", "--task-type", "retrieval", "--data", str(beir), *common, "--out", str(tmp_path / "r")],
    )
    assert result.exit_code == 0, result.output
    payload = json.loads((tmp_path / "r" / "tune.json").read_text())
    assert payload["metric"] == "ndcg@10" and payload["data"]["n_queries"] == 3
    assert [row["t"] for row in payload["result"]["curve"]] == [0.7, 1.0]

    labelled = tmp_path / "cls"
    labelled.mkdir()
    rows = [
        {"text": f"{word} text {i}", "label": label} for i in range(10) for word, label in (("happy", 1), ("sad", 0))
    ]
    for split in ("train", "test"):
        (labelled / f"{split}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    args = ["tempscale", "tune", "--task-type", "classification", "--data", str(labelled), *common, "--side", "query"]
    result = runner.invoke(app, [*args, "--out", str(tmp_path / "c")])
    assert result.exit_code == 0, result.output
    payload = json.loads((tmp_path / "c" / "tune.json").read_text())
    assert payload["metric"] == "accuracy" and payload["result"]["side"] == "query"
    assert all(0 <= row["score"] <= 100 for row in payload["result"]["curve"])
