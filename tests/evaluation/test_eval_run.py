"""`evaluate_task`: one library call from settings to the written record, typed and written as one set."""

from __future__ import annotations

import json
from pathlib import Path
from typing import get_type_hints

import pytest

from lengthwise.evaluation import run as run_module
from lengthwise.evaluation.config import ClassificationConfig, EvalConfig, SelfHits
from lengthwise.evaluation.run import evaluate_task, resolve, write_record
from lengthwise.evaluation.schema import ClassificationEvalRecord, RetrievalEvalRecord, STSEvalRecord
from lengthwise.evaluation.tasks import Task

from .conftest import TableEncoder

RECORD_TYPES = {"sts": STSEvalRecord, "retrieval": RetrievalEvalRecord, "classification": ClassificationEvalRecord}


@pytest.fixture()
def sts_file(tmp_path: Path) -> Path:
    path = tmp_path / "pairs.tsv"
    rows = [f"sentence {i} about cats\tanother sentence {i} on dogs and cats\t{i % 5}" for i in range(12)]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def _config(task: str, data: Path) -> EvalConfig:
    classification = ClassificationConfig(few_shot=(2,), repeats=2)
    return EvalConfig(task=Task(task), data=str(data), bin_width=5, max_train=None, classification=classification)


@pytest.mark.parametrize("task", ["sts", "retrieval", "classification"])
def test_record_has_the_typed_keys_and_is_written(
    tmp_path: Path, tiny_model, sts_file: Path, beir_folder: Path, labelled_folder: Path, task: str
) -> None:
    data = {"sts": sts_file, "retrieval": beir_folder, "classification": labelled_folder}[task]
    out = tmp_path / "out"
    record = evaluate_task(_config(task, data), tiny_model, model_name="tiny", out=out, encoder=TableEncoder())
    expected = set(get_type_hints(RECORD_TYPES[task]))
    assert set(record) == expected and record["task"] == task
    written = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert written == json.loads(json.dumps(record))
    assert list(written)[:5] == ["task", "scores", "bins", "bin_spec", "result"]  # the headline first
    assert written["created"] and written["wall_time_s"] >= 0 and "sha256" in json.dumps(written["data"])
    assert list(out.glob("*.png")) and not list(out.glob(".lengthwise-eval-*"))  # plots in, staging gone


def test_an_interrupted_write_keeps_the_previous_record(tmp_path: Path, tiny_model, sts_file: Path, monkeypatch):
    out = tmp_path / "out"
    first = evaluate_task(_config("sts", sts_file), tiny_model, model_name="tiny", out=out, encoder=TableEncoder())
    before = {path.name: path.read_bytes() for path in out.iterdir()}

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(run_module, "write_json_atomic", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_record(first, out)  # the plots are drawn, then the JSON write is interrupted
    assert {path.name: path.read_bytes() for path in out.iterdir()} == before


def test_self_hit_rule_is_resolved_from_the_data_name(tmp_path: Path) -> None:
    def resolved(data: str, mode: SelfHits) -> bool:
        config = EvalConfig(task=Task.retrieval, data=data, self_hits=mode)
        return resolve(config).retrieval.drop_self_hits

    assert resolved("/data/arguana", SelfHits.auto) and resolved("hf:mteb/quora", SelfHits.auto)
    assert not resolved("/data/scifact", SelfHits.auto) and not resolved("/data/arguana", SelfHits.keep)
    assert resolved("/data/scifact", SelfHits.drop)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"bin_width": 0}, "bin_width 0 must be ≥ 1"),
        ({"max_test": 0}, "max_test 0 must be ≥ 1"),
        ({"task": "ranking"}, "task must be one of sts, retrieval, classification; got 'ranking'"),
        ({"self_hits": "sometimes"}, "self_hits must be one of auto, keep, drop"),
    ],
)
def test_config_errors_name_the_field(fields: dict[str, object], message: str) -> None:
    settings: dict[str, object] = {"task": "sts", "data": "x"} | fields
    with pytest.raises(ValueError, match=message):
        EvalConfig(**settings)  # type: ignore[arg-type]


def test_task_dispatch(sts_file: Path, labelled_folder: Path) -> None:
    from lengthwise.evaluation.tasks import ClassificationSplits, evaluate_loaded, load_task_data

    assert [task.metric for task in Task] == ["spearman", "ndcg@10", "accuracy"]
    pairs = load_task_data(Task.sts, sts_file)
    splits = load_task_data(Task.classification, labelled_folder, max_train=4, seed=0)
    assert isinstance(splits, ClassificationSplits) and len(splits.train) == 4 and len(splits.test) == 6
    assert evaluate_loaded(Task.sts, TableEncoder(), pairs).scores["spearman"] is not None
    with pytest.raises(TypeError, match="task classification needs ClassificationSplits"):
        evaluate_loaded(Task.classification, TableEncoder(), pairs)
