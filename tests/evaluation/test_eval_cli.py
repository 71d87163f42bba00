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
    assert result.exit_code == 0 and "--task" in result.output


def test_sts_end_to_end(tmp_path: Path, tiny_model_dir: Path, data_dir: Path) -> None:
    out = tmp_path / "sts"
    source = data_dir / "sts12-16" / "senteval_tokenized" / "STS16-en-test"
    result = _run("--model", str(tiny_model_dir), "--task", "sts", "--data", str(source), "--out", str(out))
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
    out = tmp_path / "cls"
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
    assert bad.exit_code == 2 and "few_shot_sampler must be one of seeded, mteb" in " ".join(bad.output.split())
