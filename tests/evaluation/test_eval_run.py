"""`evaluate_task`: one library call from settings to the written record, typed and written as one set."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import get_type_hints

import pytest

from lengthwise.evaluation.config import ClassificationConfig, EvalConfig, SelfHits, Task
from lengthwise.evaluation.run import evaluate_task, resolve, write_record
from lengthwise.evaluation.schema import ClassificationEvalRecord, RetrievalEvalRecord, STSEvalRecord

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
    assert list(out.glob("*.png")) and not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging


def _contents(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}


@pytest.mark.parametrize("exchange", [True, False], ids=["renameat2", "two-renames"])
def test_a_fault_at_any_step_of_the_write_leaves_one_whole_set(
    tmp_path: Path, tiny_model, sts_file: Path, beir_folder: Path, monkeypatch, exchange: bool
) -> None:
    """Issue 13 item 13, for `eval`: the plots were renamed in one by one, then ``results.json``; a kill between
    two renames left the new plots beside the old record (and a plot of an earlier task stayed for good).

    A Ctrl-C is injected at the k-th file-system rename of the write, for every k; each time the folder must
    hold the whole previous set or the whole new one.
    """
    from lengthwise.core import output_set

    out = tmp_path / "out"
    retrieval = evaluate_task(_config("retrieval", beir_folder), tiny_model, model_name="tiny", encoder=TableEncoder())
    sts = evaluate_task(_config("sts", sts_file), tiny_model, model_name="tiny", encoder=TableEncoder())
    write_record(retrieval, out)
    old = _contents(out)
    write_record(sts, out)
    new = _contents(out)
    assert set(old) == {"results.json", "retrieval_query_bins.png"}
    assert set(new) == {"results.json", "sts_bins.png"}  # the old task's plots went with the old set
    beside = sorted(p.name for p in tmp_path.iterdir())
    if not exchange:
        monkeypatch.setattr(output_set, "_exchange", lambda a, b: False)
    real = {name: getattr(output_set, name) for name in ("_exchange",)} | {"replace": os.replace, "rename": os.rename}
    calls: list[str] = []

    def faulty(name: str, k: int):
        def step(*args: object) -> object:
            calls.append(name)
            if len(calls) == k:
                raise KeyboardInterrupt  # a Ctrl-C (or a kill) at this very step
            return real[name](*args)

        return step

    for k in range(1, 20):
        write_record(retrieval, out)
        calls.clear()
        with monkeypatch.context() as patch:
            patch.setattr(os, "replace", faulty("replace", k))
            patch.setattr(os, "rename", faulty("rename", k))
            patch.setattr(output_set, "_exchange", faulty("_exchange", k))
            try:
                write_record(sts, out)
            except KeyboardInterrupt:
                assert _contents(out) in (old, new), f"a mixed set after a fault at step {k} ({calls[-1]})"
                assert sorted(p.name for p in tmp_path.iterdir()) == beside, "a staging folder was left behind"
                continue
        assert _contents(out) == new
        break
    assert k > 1  # at least one step was faulted


def test_eval_refuses_a_folder_holding_other_files(tmp_path: Path, tiny_model, sts_file: Path) -> None:
    """The folder is swapped as a whole, so a user's own file in it is refused before anything is written."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine", encoding="utf-8")
    config = _config("sts", sts_file)
    with pytest.raises(ValueError, match=r"not part of an evaluation's output \(notes.txt\)"):
        evaluate_task(config, tiny_model, model_name="tiny", out=out, encoder=TableEncoder())
    assert _contents(out) == {"notes.txt": b"mine"}


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
        ({"bin_width": 0}, "bin_width=0: must be ≥ 1"),
        ({"max_test": 0}, "max_test=0: must be ≥ 1"),
        ({"task": "ranking"}, "task='ranking': use one of sts, retrieval, classification"),
        ({"self_hits": "sometimes"}, "self_hits='sometimes': use one of auto, keep, drop"),
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
