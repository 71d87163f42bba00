"""`lengthwise eval` end to end on the tiny model: every task writes results.json with scores, bins and plots."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lengthwise.cli import app

runner = CliRunner()


def _run(*args: str) -> object:
    return runner.invoke(app, ["eval", *args])


def test_help() -> None:
    result = _run("--help")
    assert result.exit_code == 0 and "--task-type" in result.output


def test_sts_end_to_end(tmp_path: Path, tiny_model_dir: Path, data_dir: Path) -> None:
    out = tmp_path / "sts"
    source = data_dir / "sts12-16" / "senteval_tokenized" / "STS16-en-test"
    result = _run("--model", str(tiny_model_dir), "--task-type", "sts", "--data", str(source), "--out", str(out))
    assert result.exit_code == 0, result.output
    payload = json.loads((out / "results.json").read_text())
    assert payload["task"] == "sts" and set(payload["scores"]) == {"spearman", "pearson"}
    assert sum(row["count"] for row in payload["bins"]) == payload["result"]["n_pairs"] == 1186
    assert set(payload["result"]["subsets"]) == {
        "answer-answer",
        "headlines",
        "plagiarism",
        "postediting",
        "question-question",
    }
    assert payload["model"]["weights_sha256_16"] and payload["data"]["sha256"] and payload["environment"]["packages"]
    assert (out / "sts_bins.png").stat().st_size > 0


def test_retrieval_end_to_end(tmp_path: Path, tiny_model_dir: Path, beir_folder: Path) -> None:
    out = tmp_path / "ret"
    result = _run(
        "-m", str(tiny_model_dir), "-t", "retrieval", "-d", str(beir_folder), "-o", str(out), "--top-k", "100"
    )
    assert result.exit_code == 0, result.output
    payload = json.loads((out / "results.json").read_text())
    assert set(payload["scores"]) == {"ndcg@10", "mrr@10", "recall@100", "map@100"}
    assert sum(row["count"] for row in payload["bins"]["queries"]) == 2
    assert sum(row["count"] for row in payload["bins"]["documents"]) == 2
    assert (out / "retrieval_query_bins.png").exists() and (out / "retrieval_document_bins.png").exists()


def test_classification_end_to_end(tmp_path: Path, tiny_model_dir: Path, labelled_folder: Path) -> None:
    out = tmp_path / "cls-out"  # not the data folder (labelled_folder is tmp_path / "cls"): --out is replaced whole
    result = _run(
        "-m", str(tiny_model_dir), "-t", "classification", "-d", str(labelled_folder), "-o", str(out),
        "--classifier", "logreg", "--classifier", "mlp", "--few-shot", "2", "--repeats", "2", "--max-train", "8",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    payload = json.loads((out / "results.json").read_text())
    assert set(payload["scores"]) == {"accuracy", "macro_f1"}
    assert [run["setting"] for run in payload["result"]["runs"]] == ["full", "2-shot", "full", "2-shot"]
    assert payload["data"]["train"]["n_texts"] == 8 and payload["data"]["test"]["n_texts"] == 6
    assert (out / "classification_accuracy_bins.png").exists()


def test_tempscale_option_changes_the_encoder_and_t_1_changes_nothing(
    tmp_path: Path, tiny_model_dir: Path, data_dir: Path
) -> None:
    source = str(data_dir / "sts12-16" / "senteval_tokenized" / "STS16-en-test")
    payloads = {}
    for name, extra in (("plain", ()), ("t1", ("--tempscale", "1")), ("t03", ("--tempscale", "0.3"))):
        result = _run("-m", str(tiny_model_dir), "-t", "sts", "-d", source, "-o", str(tmp_path / name), *extra)
        assert result.exit_code == 0, result.output
        payloads[name] = json.loads((tmp_path / name / "results.json").read_text())
    assert "tempscale" not in payloads["plain"]["settings"]
    assert payloads["t03"]["settings"]["tempscale"]["t"] == 0.3
    assert payloads["t1"]["scores"] == payloads["plain"]["scores"]
    assert abs(payloads["t03"]["scores"]["spearman"] - payloads["plain"]["scores"]["spearman"]) > 1e-3
    bad = _run("-m", str(tiny_model_dir), "-t", "sts", "-d", source, "-o", str(tmp_path / "bad"), "--tempscale", "0")
    assert bad.exit_code == 2 and "positive finite temperature" in bad.output


@pytest.mark.parametrize(
    ("task", "content", "pattern"),
    [
        ("sts", "a\tb\t1\njust one column\n", "pairs.tsv:2: cannot read a pair"),
        ("classification", '{"text": "a", "label": 0}\n{"text": 3, "label": 0}\n', "test.jsonl:2: field text"),
    ],
)
def test_malformed_file_is_one_line_naming_file_and_line(
    tmp_path: Path, tiny_model_dir: Path, task: str, content: str, pattern: str
) -> None:
    name = "pairs.tsv" if task == "sts" else "test.jsonl"
    bad = tmp_path / name
    bad.write_text(content, encoding="utf-8")
    extra = ["--train", str(bad)] if task == "classification" else []
    result = _run("-m", str(tiny_model_dir), "-t", task, "-d", str(bad), "-o", str(tmp_path / "o"), *extra)
    assert result.exit_code == 2
    assert result.output.strip().startswith("error:") and pattern in " ".join(result.output.split())


def test_missing_data_path(tmp_path: Path, tiny_model_dir: Path) -> None:
    result = _run("-m", str(tiny_model_dir), "-t", "retrieval", "-d", str(tmp_path / "nope"), "-o", str(tmp_path))
    assert result.exit_code == 2 and "no such file or directory" in result.output


def test_few_shot_sampler_option(tmp_path: Path, tiny_model_dir: Path, labelled_folder: Path) -> None:
    base = ["-m", str(tiny_model_dir), "-t", "classification", "-d", str(labelled_folder), "--no-full"]
    result = _run(
        *base, "-o", str(tmp_path / "mteb"), "--few-shot", "2", "--repeats", "2", "--few-shot-sampler", "mteb"
    )
    assert result.exit_code == 0, result.output
    payload = json.loads((tmp_path / "mteb" / "results.json").read_text())
    assert payload["settings"]["classification"]["few_shot_sampler"] == "mteb"
    bad = _run(*base, "-o", str(tmp_path / "bad"), "--few-shot-sampler", "random")
    said = " ".join(bad.output.split())
    assert bad.exit_code == 2 and "'random' is not one of" in said and "'seeded', 'mteb'" in said


# --- checks before any computing: none of these may load the model (a missing model would say so first) ---

NO_MODEL = "/nonexistent/model-that-would-fail-to-load"


def _said(result: object) -> str:
    return " ".join(result.output.split())  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("device", "message"),
    [("quantum", "--device 'quantum': not a torch device"), ("cuda:7", "--device 'cuda:7': not available")],
)
def test_bad_device_is_one_line_before_the_model_loads(tmp_path: Path, beir_folder: Path, device: str, message: str):
    # issue 13.19: a bad --device gave a traceback
    result = _run(
        "-m", NO_MODEL, "-t", "retrieval", "-d", str(beir_folder), "-o", str(tmp_path / "o"), "--device", device
    )
    assert result.exit_code == 2 and result.output.startswith("error:") and message in _said(result)


def test_unwritable_out_is_refused_before_any_computing(tmp_path: Path, beir_folder: Path) -> None:
    # issue 13.12: an unwritable --out failed with a traceback after all the compute, losing the results
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder", encoding="utf-8")
    for out in (blocker, blocker / "below"):
        result = _run("-m", NO_MODEL, "-t", "retrieval", "-d", str(beir_folder), "-o", str(out))
        assert result.exit_code == 2 and result.output.startswith("error:") and "--out" in _said(result), out
    assert blocker.read_text(encoding="utf-8") == "not a folder"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--bin-width", "0"), "--bin-width 0: must be ≥ 1"),
        (("--top-k", "5"), "--top-k 5: must be ≥ every cut-off"),
        (("--batch-size", "0"), "--batch-size 0: must be ≥ 1"),
        (("--max-train", "0"), "--max-train 0: must be ≥ 1"),
    ],
)
def test_bad_settings_name_the_flag(tmp_path: Path, beir_folder: Path, flags: tuple[str, ...], message: str) -> None:
    result = _run("-m", NO_MODEL, "-t", "retrieval", "-d", str(beir_folder), "-o", str(tmp_path / "o"), *flags)
    assert result.exit_code == 2 and message in _said(result)
    assert not (tmp_path / "o").exists()  # nothing created for a run that never starts


def test_unbalanced_quote_in_an_sts_csv_is_caught(tmp_path: Path) -> None:
    # issue 13.5: one pair reader (lengthwise.core.data.read_pairs) for audit and eval; eval must keep catching it
    rows = ["sentence1,sentence2,score", *(f"a{i} b,c{i} d,{i % 5}" for i in range(1, 6)), '"open quote,two,3', "e,f,1"]
    source = tmp_path / "pairs.csv"
    source.write_text("\n".join(rows) + "\n", encoding="utf-8")
    result = _run("-m", NO_MODEL, "-t", "sts", "-d", str(source), "-o", str(tmp_path / "o"))
    assert result.exit_code == 2 and "pairs.csv:7" in _said(result) and "unbalanced quote" in _said(result)


def test_help_and_defaults_come_from_the_config_fields() -> None:
    from lengthwise.cli.options import field_help
    from lengthwise.evaluation.config import ClassificationConfig, EvalConfig, RetrievalConfig

    said = " ".join(_run("--help").output.replace("│", " ").split())
    for config, name in ((EvalConfig, "self_hits"), (RetrievalConfig, "top_k"), (ClassificationConfig, "repeats")):
        assert " ".join(field_help(config, name).split()[:4]) in said, name


def _arguana_like(folder: Path) -> Path:
    (folder / "qrels").mkdir(parents=True)
    docs = [("a1", "cats purr when content"), ("a2", "cats purr to heal"), ("a3", "stock markets fell")]
    (folder / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": i, "title": "", "text": t}) + "\n" for i, t in docs), encoding="utf-8"
    )
    (folder / "queries.jsonl").write_text(json.dumps({"_id": "a1", "text": docs[0][1]}) + "\n", encoding="utf-8")
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\na1\ta2\t1\n", encoding="utf-8")
    return folder


@pytest.mark.parametrize(
    ("name", "flag", "dropped"),
    [("arguana", "auto", True), ("my-set", "auto", False), ("my-set", "drop", True), ("arguana", "keep", False)],
)
def test_self_hits_follow_the_task(tmp_path: Path, tiny_model_dir: Path, name: str, flag: str, dropped: bool) -> None:
    # issue 13.24: self-hits were always dropped; now MTEB's rule (per task) unless --self-hits says otherwise
    data = _arguana_like(tmp_path / name)
    out = tmp_path / "out"
    result = _run("-m", str(tiny_model_dir), "-t", "retrieval", "-d", str(data), "-o", str(out), "--self-hits", flag)
    assert result.exit_code == 0, result.output
    settings = json.loads((out / "results.json").read_text())["settings"]
    assert settings["self_hits"] == flag and settings["retrieval"]["drop_self_hits"] is dropped


def test_few_shot_k_above_a_class_size_names_the_flag(tmp_path: Path, tiny_model_dir: Path, labelled_folder: Path):
    out = str(tmp_path / "o")
    result = _run(
        "-m", str(tiny_model_dir), "-t", "classification", "-d", str(labelled_folder), "-o", out, "--few-shot", "50"
    )
    assert result.exit_code == 2 and "--few-shot 50: class 0 has" in _said(result)
