from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lengthwise.audit.config import AuditConfig
from lengthwise.audit.pairs.attack import run_audit
from lengthwise.cli import app
from lengthwise.core.data import read_pairs

runner = CliRunner()


@pytest.mark.parametrize("command", [[], ["audit"], ["report"]])
def test_help_on_every_command(command: list[str]) -> None:
    result = runner.invoke(app, [*command, "--help"])
    assert result.exit_code == 0
    assert "Usage" in result.output


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.startswith("lengthwise ")


def _one_line_error(result) -> str:
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.strip().splitlines() if line.strip()]
    assert len(" ".join(lines)) > 0 and lines[0].startswith("error:")
    return " ".join(line.strip() for line in lines)


def test_malformed_pairs_file_error_names_file_and_line(tmp_path: Path, tiny_model_dir: Path) -> None:
    bad = tmp_path / "pairs.tsv"
    bad.write_text("a\tb\nc\td\njust one column\n", encoding="utf-8")
    result = runner.invoke(
        app, ["audit", "--model", str(tiny_model_dir), "--pairs", str(bad), "--out", str(tmp_path / "o")]
    )
    message = _one_line_error(result)
    assert "pairs.tsv:3" in message
    assert not (tmp_path / "o").exists()


def test_empty_text_error(tmp_path: Path, tiny_model_dir: Path) -> None:
    bad = tmp_path / "pairs.jsonl"
    bad.write_text('{"text1": "fine", "text2": "also fine"}\n{"text1": "  ", "text2": "x"}\n', encoding="utf-8")
    result = runner.invoke(app, ["audit", "--model", str(tiny_model_dir), "--pairs", str(bad)])
    assert "pairs.jsonl:2: text1 is empty" in _one_line_error(result)


def test_missing_model_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["audit", "--model", str(tmp_path / "no-such-model"), "--max-pairs", "3"])
    _one_line_error(result)


def test_bad_elongate_value(tiny_model_dir: Path) -> None:
    result = runner.invoke(app, ["audit", "--model", str(tiny_model_dir), "--elongate", "many"])
    assert "--elongate 'many'" in _one_line_error(result)


def test_audit_writes_outputs_and_report_rerenders(tmp_path: Path, tiny_model_dir: Path) -> None:
    out = tmp_path / "audit"
    args = ["audit", "--model", str(tiny_model_dir), "--max-pairs", "20", "--elongate", "5", "--out", str(out)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    payload = json.loads((out / "audit.json").read_text(encoding="utf-8"))
    assert payload["data"]["n_pairs"] == 20 and payload["settings"]["elongation"] == "5"
    assert (out / "report.html").stat().st_size > 10_000
    assert (out / "attack_hist.png").exists()
    (out / "report.html").unlink()
    result = runner.invoke(app, ["report", str(out)])
    assert result.exit_code == 0, result.output
    assert (out / "report.html").exists()


@pytest.mark.slow
def test_cli_and_api_agree_on_stsb(tmp_path: Path, minilm_path: str, data_dir: Path) -> None:
    """The issue's acceptance command, on a 60-pair sample: CLI audit.json == Python API numbers."""
    stsb = data_dir / "stsb/original/sts-test.csv.gz"
    out = tmp_path / "stsb"
    args = ["audit", "--model", minilm_path, "--pairs", str(stsb), "--elongate", "100", "--max-pairs", "60",
            "--no-curve", "--no-shuffle", "--out", str(out)]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    attack = json.loads((out / "audit.json").read_text(encoding="utf-8"))["attack"]
    assert attack["histogram"]["bins"] == 100 and attack["histogram"]["range"] == [-1.0, 1.0]

    from lengthwise.core.models import load_plain_model

    api = run_audit(
        load_plain_model(minilm_path),
        read_pairs(stsb).sample(60, seed=0),
        AuditConfig(curve_ks=(), word_shuffle=False),
    )
    for key in ("mean_before", "mean_after", "frac_increased", "js_distance"):
        assert attack[key] == pytest.approx(api.attack[key], abs=1e-9)
