"""The comparison view and the diagnostics' report sections, from real tiny-model audits."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from lengthwise.audit.config import AuditConfig, DocAuditConfig
from lengthwise.audit.documents.corpus import DocSet
from lengthwise.audit.documents.documents import run_doc_audit
from lengthwise.audit.pairs.attack import run_audit
from lengthwise.audit.report import _doc_plots as doc_plots
from lengthwise.audit.report import _doc_plots as report_docs
from lengthwise.audit.report.compare import comparison_labels, headline_rows, write_comparison
from lengthwise.audit.report.page import write_report
from lengthwise.cli import app
from lengthwise.core.data import default_probe_pairs
from lengthwise.core.errors import SettingError
from lengthwise.core.results import write_json_atomic

runner = CliRunner()
EMBEDDED_PNG = re.compile(r"data:image/png;base64,")


@pytest.fixture(scope="module")
def payload(tiny_model) -> dict[str, Any]:
    """A complete audit.json payload of the tiny model: attack on 12 probe pairs plus every diagnostic."""
    pairs = default_probe_pairs().sample(12, seed=0)
    result = run_audit(tiny_model, pairs, AuditConfig(curve_ks=(16,), word_shuffle=False), model_name="tiny")
    texts = tuple(" ".join(f"word{j} sentence number {i}." for j in range(1 + i % 6)) for i in range(30))
    config = DocAuditConfig(bin_width=16, attention_per_bin=3, batch_size=8)
    return {
        **result.to_dict(),
        "diagnostics": run_doc_audit(tiny_model, DocSet(texts, "synthetic", "lines", 30), config),
    }


def _variant(payload: dict[str, Any], name: str, shift: float) -> dict[str, Any]:
    """The same audit under another model name with every σ_a moved by `shift` (a stand-in for a fixed model)."""
    other = copy.deepcopy(payload)
    other["model"]["name"] = name
    for row in other["diagnostics"]["attention"]["by_bin"]:
        row["sigma_mean"] += shift
    return other


def test_labels() -> None:
    payloads = [{"model": {"name": "a"}}, {"model": {"name": "a"}}, {"model": {"name": "b"}}]
    assert comparison_labels(payloads) == ["a", "a #2", "b"]
    assert comparison_labels(payloads, ["x", "y", "z"]) == ["x", "y", "z"]
    with pytest.raises(SettingError, match=r"labels=\['x'\]: 1 labels for 3 audits; give one label per audit"):
        comparison_labels(payloads, ["x"])


def test_headline_rows_side_by_side(payload: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    bare = {key: value for key, value in payload.items() if key != "diagnostics"}
    sparse = headline_rows([payload, bare])
    assert not any(row[0].startswith("σ_a") for row in sparse)  # every σ_a bin holds < 10 docs: no trend claimed
    monkeypatch.setattr(doc_plots, "MIN_BIN_DOCS", 1)
    rows = headline_rows([payload, _variant(payload, "fixed", 0.5), bare])
    assert all(len(row) == 4 for row in rows) and any(row[0].startswith("attack") for row in rows)
    sigma = next(row for row in rows if row[0].startswith("σ_a"))
    bins = payload["diagnostics"]["attention"]["by_bin"]
    assert sigma[1] == f"{bins[0]['sigma_mean']:.3f} → {bins[-1]['sigma_mean']:.3f}"
    assert sigma[2] == f"{bins[0]['sigma_mean'] + 0.5:.3f} → {bins[-1]['sigma_mean'] + 0.5:.3f}"
    assert sigma[3] == "—"  # the audit without diagnostics has no σ_a


def test_overlaid_plots_have_one_curve_set_per_model(payload: dict[str, Any]) -> None:
    series = [("base", payload["diagnostics"]), ("fixed", _variant(payload, "fixed", 0.5)["diagnostics"])]
    figure = report_docs.plot_collapse(series)
    assert figure is not None
    labels = [line.get_label() for line in figure.axes[0].get_lines()]
    assert labels == ["base", "fixed"]
    attention = report_docs.plot_attention(series)
    assert attention is not None and len(attention.axes) == 1  # per-layer panel only for a single model


def test_write_comparison(tmp_path: Path, payload: dict[str, Any]) -> None:
    other = _variant(payload, "tiny-tempscaled", -0.2)
    other["diagnostics"]["data"]["sha256"] = "0" * 64
    written = write_comparison([payload, other], tmp_path / "cmp", labels=["before", "after"])
    html = written["html"].read_text(encoding="utf-8")
    assert "before vs after" in html and "compare with care" in html  # different documents are flagged
    assert len(EMBEDDED_PNG.findall(html)) == len(written) - 1 >= 7
    assert (tmp_path / "cmp" / "cmp_attention.png").exists()
    with pytest.raises(SettingError, match="payloads=1: a comparison needs at least two audits"):
        write_comparison([payload], tmp_path / "one")


def test_report_renders_diagnostics_and_drops_stale_plots(tmp_path: Path, payload: dict[str, Any]) -> None:
    written = write_report(payload, tmp_path)
    html = written["html"].read_text(encoding="utf-8")
    for title in report_docs.TITLES.values():
        assert title in html
    assert (tmp_path / "diag_intra.png").exists()
    bare = {key: value for key, value in payload.items() if key != "diagnostics"}
    write_report(bare, tmp_path)
    assert not (tmp_path / "diag_intra.png").exists()
    assert "Document diagnostics" not in (tmp_path / "report.html").read_text(encoding="utf-8")


def test_cli_report_several_dirs_writes_a_comparison(tmp_path: Path, payload: dict[str, Any]) -> None:
    for name, data in (("a", payload), ("b", _variant(payload, "other", 0.1))):
        write_json_atomic(tmp_path / name / "audit.json", json.loads(json.dumps(data)))
    out = tmp_path / "cmp"
    result = runner.invoke(app, ["report", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "tiny vs other" in (out / "compare.html").read_text(encoding="utf-8")
    result = runner.invoke(app, ["report", str(tmp_path / "a"), str(tmp_path / "b"), "--label", "x"])
    assert result.exit_code == 2 and "--label x: 1 labels for 2 audits; give one label per audit" in result.output
    result = runner.invoke(app, ["report", str(tmp_path / "a")])  # one directory: re-render as before
    assert result.exit_code == 0 and (tmp_path / "a" / "report.html").exists()
