"""The length probe as reported (issue 13 item 4) and the truncation table (issue 12 item 6)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from lengthwise.audit.config import DocAuditConfig
from lengthwise.audit.documents.corpus import DocSet
from lengthwise.audit.documents.documents import run_doc_audit
from lengthwise.audit.documents.probe import probe_section, truncation_section
from lengthwise.audit.report import _documents as report_docs


def _mostly_cut(n: int = 400, dim: int = 384, window: int = 254, cut_share: float = 0.95) -> tuple[Any, ...]:
    """The issue's shape: n documents, `cut_share` of them cut at the window; embeddings hold length weakly."""
    rng = np.random.default_rng(0)
    cut = rng.random(n) < cut_share
    lengths = np.where(cut, window, rng.integers(40, window, n))
    embeddings = rng.normal(size=(n, dim)) + 0.01 * lengths[:, None] * rng.normal(size=(1, dim))
    return embeddings, lengths, cut


def test_probe_headlines_ridge_and_warns_when_most_documents_are_cut() -> None:
    embeddings, lengths, cut = _mostly_cut()
    section = probe_section(embeddings, lengths, cut, DocAuditConfig())
    assert section["headline"] == "ridge"
    assert section["truncated_share"] == pytest.approx(cut.mean())
    assert section["r2x100_mean"] < section["ridge_r2x100_mean"]  # OLS overfits 320 texts in 384 dimensions
    warnings = " ".join(section["warnings"])
    assert "of the documents are cut at the window" in warnings
    assert "320 training texts per fold for 384 embedding dimensions" in warnings


def test_probe_warns_on_little_length_variance_and_is_quiet_when_fine() -> None:
    rng = np.random.default_rng(1)
    lengths = rng.integers(100, 104, 300)  # std ≈ 1 % of the mean
    embeddings = rng.normal(size=(300, 8))
    section = probe_section(embeddings, lengths, np.zeros(300, dtype=bool), DocAuditConfig())
    assert any("vary little" in w for w in section["warnings"])
    spread = rng.integers(10, 200, 300)
    fine = probe_section(np.c_[spread, rng.normal(size=(300, 7))], spread, np.zeros(300, dtype=bool), DocAuditConfig())
    assert fine["warnings"] == [] and fine["ridge_r2x100_mean"] > 99


def test_report_reads_the_ridge_headline_and_the_share_cut() -> None:
    embeddings, lengths, cut = _mostly_cut()
    section = {"probe": probe_section(embeddings, lengths, cut, DocAuditConfig())}
    (title, text), *_ = report_docs.summary_rows(section)
    assert title == "Length probe" and text.startswith("R² × 100 = ")
    assert "with ridge" in text.split(";")[0] and "cut at the window" in text


def test_truncation_table_counts_documents_and_tokens_beyond_the_window() -> None:
    section = truncation_section(np.array([10, 100, 101, 150, 300, 1000]), window=100)
    assert (section["cut"], section["tokens"], section["tokens_beyond_window"]) == (4, 1661, 1151)
    assert section["cut_share"] == pytest.approx(4 / 6)
    rows = {row["bin"]: row for row in section["by_bin"]}
    assert list(rows) == ["1–100", "101–200", "201–400", "401–800", ">800"]
    assert rows["1–100"]["cut"] == 0 and rows["1–100"]["count"] == 2  # exactly the window is not cut
    assert rows["101–200"]["tokens_beyond_window"] == 1 + 50
    assert rows["401–800"] == {"bin": "401–800", "count": 0}
    assert rows[">800"]["tokens_beyond_share"] == pytest.approx(0.9)


def test_document_audit_reports_truncation(tiny_model) -> None:
    texts = tuple(" ".join(["word"] * n) for n in (5, 30, 62, 63, 100, 300))
    section = run_doc_audit(tiny_model, DocSet(texts, "x", "lines", 6), DocAuditConfig(diagnostics=("collapse",)))
    assert section["tokens"]["truncated_texts"] == 3  # 62 = N − 2 fits; 63, 100 and 300 are cut
    assert section["truncation"]["cut"] == 3 and section["truncation"]["window"] == 62
    assert section["truncation"]["tokens_beyond_window"] == 1 + 38 + 238
