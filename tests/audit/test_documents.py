"""Document diagnostics: reading documents, the streaming passes (tiny BERT), the CLI, and MiniLM behaviour."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from lengthwise.audit.config import DocAuditConfig
from lengthwise.audit.documents import metrics as dg
from lengthwise.audit.documents.corpus import DocSet, read_docs
from lengthwise.audit.documents.documents import _DocumentRun, repeated_words_curve, run_doc_audit
from lengthwise.audit.report import _documents as report_docs
from lengthwise.cli import app
from lengthwise.core.bins import BinCounting, LengthBins
from lengthwise.core.embed import TokenView, embed_ids, embed_texts
from lengthwise.core.errors import DataFormatError, SettingError

runner = CliRunner()
SENTENCES = [
    "The committee approved the budget after a long debate.",
    "Rainfall in the northern valleys doubled this spring.",
    "A new enzyme breaks down plastic bottles in days.",
    "The striker scored twice in the final ten minutes.",
    "Ancient coins were found beneath the old market square.",
    "Battery prices fell again as factories expanded output.",
]


def _documents(count: int = 40) -> list[str]:
    """Texts of 1 to 8 sentences, so they fall into several length bins of the tiny model (N = 64)."""
    return [" ".join(SENTENCES[(i + j) % len(SENTENCES)] for j in range(1 + i % 8)) for i in range(count)]


@pytest.fixture(scope="module")
def tiny_section(tiny_model) -> dict[str, Any]:
    docs = DocSet(tuple(_documents()), "synthetic", "lines", 40)
    config = DocAuditConfig(bin_width=16, attention_per_bin=4, attention_layers="all", batch_size=8)
    return run_doc_audit(tiny_model, docs, config)


# --- reading documents ------------------------------------------------------------------------------------------


def test_read_docs_jsonl_title_and_gzip(tmp_path: Path) -> None:
    path = tmp_path / "corpus.jsonl.gz"
    rows = [{"_id": "1", "title": "Title one", "text": "Body one."}, {"_id": "2", "title": "", "text": "Body two."}]
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.write("\n".join(json.dumps(row) for row in rows) + "\n\n")
    docs = read_docs(path)
    assert docs.texts == ("Title one Body one.", "Body two.") and docs.fmt == "jsonl"
    assert docs.describe()["n_docs"] == 2 and len(docs.sha256) == 64


def test_read_docs_lines_and_sample(tmp_path: Path) -> None:
    path = tmp_path / "docs.txt"
    path.write_text("\n".join(f"document number {i}" for i in range(50)) + "\n\n", encoding="utf-8")
    docs = read_docs(path, max_docs=10, seed=3)
    assert docs.fmt == "lines" and len(docs.texts) == 10 and docs.n_in_file == 50
    assert docs.texts == read_docs(path, max_docs=10, seed=3).texts  # seeded
    assert list(docs.texts) == sorted(docs.texts, key=lambda t: int(t.split()[-1]))  # file order kept


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"text": "fine"}\n{"text": "also fine"\n', "docs.jsonl:2: not valid JSON"),
        ('{"text": "fine"}\n{"body": "no text"}\n', "docs.jsonl:2: no 'text' field"),
        ('{"text": "fine"}\n\n{"text": "   "}\n', "docs.jsonl:3: text is empty"),
    ],
)
def test_read_docs_errors_name_file_and_line(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "docs.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DataFormatError, match=message):
        read_docs(path)


def test_read_docs_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DataFormatError, match="no such file"):
        read_docs(tmp_path / "absent.jsonl")


# --- the streaming passes on the tiny model ---------------------------------------------------------------------


def test_streamed_pooled_embeddings_equal_embed_ids(tiny_model) -> None:
    view = TokenView(tiny_model)
    bins = LengthBins(16, view.max_content, BinCounting.AFTER_TRUNCATION)
    run = _DocumentRun(tiny_model, view, bins, DocAuditConfig(batch_size=4), _documents(9))
    inputs = [run._wrap(ids) for ids in run.ids]
    pooled = run._pooled(inputs, None, "original", lambda *_: None)
    expected = embed_texts(tiny_model, _documents(9))
    np.testing.assert_allclose(pooled, expected, atol=1e-6)


def test_section_shape_and_json(tiny_section: dict[str, Any]) -> None:
    json.dumps(tiny_section, allow_nan=False)  # audit.json is written with allow_nan=False
    for key in ("settings", "data", "tokens", "probe", "intra", "isotropy", "collapse", "words_curve", "attention"):
        assert key in tiny_section
    tokens = tiny_section["tokens"]
    assert sum(row["n"] for row in tokens["bins"]) == tokens["n_docs"] == 40
    assert sum(row["elongated"] for row in tokens["bins"]) == tokens["elongated_docs"] > 0
    assert tiny_section["settings"]["bin_width"] == 16 and tiny_section["settings"]["max_length"] == 64
    intra = tiny_section["intra"]
    assert intra["layers"] == [0, 1, 2] and len(intra["elongated"]["adjusted"]) == 3
    assert intra["elongated"]["n"] == intra["original_subset"]["n"] == tokens["elongated_docs"]
    attention = tiny_section["attention"]
    assert all(row["n"] <= 4 for row in attention["by_bin"]) and len(attention["by_bin"][0]["per_layer_mean"]) == 2
    assert tiny_section["isotropy"]["elongation"]["n"] == tokens["elongated_docs"]


def test_attention_pass_matches_a_direct_computation_and_restores_sdpa(tiny_model) -> None:
    transformer = tiny_model[0].auto_model
    before = transformer.config._attn_implementation
    text = _documents(1)[0]
    section = run_doc_audit(tiny_model, DocSet((text,), "one", "lines", 1), DocAuditConfig(diagnostics=("attention",)))
    assert transformer.config._attn_implementation == before  # switched to eager for the pass only
    view = TokenView(tiny_model)
    ids = torch.tensor([view.wrap(view.content([text])[0])])
    transformer.set_attn_implementation("eager")
    try:
        with torch.inference_mode():
            maps = transformer(input_ids=ids, attention_mask=torch.ones_like(ids), output_attentions=True).attentions
    finally:
        transformer.set_attn_implementation(before)
    centering = torch.eye(ids.shape[1], dtype=torch.float64) - 1.0 / ids.shape[1]
    expected = np.mean([torch.linalg.svdvals(centering @ head.double())[0].item() for head in maps[-1][0]])
    assert section["attention"]["by_bin"][0]["sigma_mean"] == pytest.approx(expected, rel=1e-6)


def test_intra_matches_one_document_at_a_time(tiny_model) -> None:
    texts = _documents(6)
    config = DocAuditConfig(diagnostics=("intra",), batch_size=3)
    batched = run_doc_audit(tiny_model, DocSet(tuple(texts), "x", "lines", 6), config)["intra"]["original"]
    view = TokenView(tiny_model)
    per_doc = []
    for text in texts:
        ids = torch.tensor([view.wrap(view.content([text])[0])])
        with torch.inference_mode():
            hidden = tiny_model[0].auto_model(
                input_ids=ids, attention_mask=torch.ones_like(ids), output_hidden_states=True
            )
        per_doc.append(dg.intra_document_similarity(hidden.hidden_states[-1], torch.ones_like(ids))[0])
    assert batched["intra"][-1] == pytest.approx(np.mean(per_doc), rel=1e-6)


def test_first_k_cuts_documents(tiny_model) -> None:
    docs = DocSet(tuple(_documents(12)), "x", "lines", 12)
    section = run_doc_audit(tiny_model, docs, DocAuditConfig(diagnostics=("isotropy", "probe"), first_k=10))
    assert section["tokens"]["content_max"] <= 8 and section["tokens"]["elongated_docs"] == 12
    assert "same token count" in section["probe"]["skipped"]  # reported, not a failed audit
    assert "Not measured" in report_docs.summary_rows(section)[0][1]


def test_words_curve_is_token_level(tiny_model) -> None:
    curve = repeated_words_curve(tiny_model, [("dog", "word")], ks=[1, 4, 1000])
    view = TokenView(tiny_model)
    assert curve["pairs"][0]["ks"] == [1, 4]  # k beyond N is dropped
    dog, word = (view.content([w])[0] for w in ("dog", "word"))
    emb = embed_ids(tiny_model, [view.wrap(dog * 4), view.wrap(word * 4)])
    assert curve["pairs"][0]["cosine"][1] == pytest.approx(float(emb[0] @ emb[1]), abs=1e-6)


def test_document_diagnostics_need_documents(tiny_model) -> None:
    with pytest.raises(SettingError, match="docs=None: document diagnostics need documents"):
        run_doc_audit(tiny_model, None, DocAuditConfig(diagnostics=("probe",)))
    with pytest.raises(ValueError, match="unknown"):
        DocAuditConfig(diagnostics=("vibes",))


# --- the CLI ----------------------------------------------------------------------------------------------------


def _one_line_error(result) -> str:
    assert result.exit_code == 2, result.output
    lines = [line.strip() for line in result.output.strip().splitlines() if line.strip()]
    assert lines[0].startswith("error:")
    return " ".join(lines)


def test_cli_switch_without_docs_is_a_one_line_error(tiny_model_dir: Path) -> None:
    result = runner.invoke(app, ["audit", "--model", str(tiny_model_dir), "--probe"])
    assert "--probe needs documents" in _one_line_error(result)
    result = runner.invoke(app, ["audit", "--model", str(tiny_model_dir), "--all"])
    assert "--all needs documents" in _one_line_error(result)


def test_cli_bad_docs_file_names_the_line(tmp_path: Path, tiny_model_dir: Path) -> None:
    bad = tmp_path / "docs.jsonl"
    bad.write_text('{"text": "ok"}\n{"title": "x"}\n', encoding="utf-8")
    result = runner.invoke(app, ["audit", "--model", str(tiny_model_dir), "--docs", str(bad), "--all"])
    assert "docs.jsonl:2: no 'text' field" in _one_line_error(result)


def test_cli_all_writes_diagnostics_into_audit_json_and_report(tmp_path: Path, tiny_model_dir: Path) -> None:
    docs = tmp_path / "docs.txt"
    docs.write_text("\n".join(_documents(24)) + "\n", encoding="utf-8")
    out = tmp_path / "audit"
    args = ["audit", "--model", str(tiny_model_dir), "--docs", str(docs), "--all", "--max-pairs", "10", "--no-curve",
            "--no-shuffle", "--attention-per-bin", "2", "--bin-width", "16", "--out", str(out)]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    payload = json.loads((out / "audit.json").read_text(encoding="utf-8"))
    assert payload["attack"]["n"] == 10 and payload["diagnostics"]["data"]["n_docs"] == 24
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "Document diagnostics" in html and "Attention filter rate" in html
    assert (out / "diag_collapse.png").exists() and (out / "diag_attention.png").exists()
    assert "Document diagnostics" in result.output  # the summary table


@pytest.mark.parametrize(
    ("flags", "pairs_k", "docs_k"),
    [
        (["--preset", "first64x8", "--max-length", "128"], 64, None),  # the attack preset cut the docs too (bug)
        (["--first-k", "12"], 12, 12),
        (["--first-k", "12", "--docs-first-k", "0"], 12, None),
        (["--docs-first-k", "10"], None, 10),
    ],
)
def test_cli_first_k_for_pairs_and_documents(
    tmp_path: Path, tiny_model_dir: Path, flags: list[str], pairs_k: int | None, docs_k: int | None
) -> None:
    docs = tmp_path / "docs.txt"
    docs.write_text("\n".join(_documents(12)) + "\n", encoding="utf-8")
    out = tmp_path / "audit"
    args = ["audit", "--model", str(tiny_model_dir), "--docs", str(docs), "--probe", "--max-pairs", "4",
            "--no-curve", "--no-shuffle", "--elongate", "2", "--out", str(out), *flags]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    payload = json.loads((out / "audit.json").read_text(encoding="utf-8"))
    assert payload["settings"]["first_k"] == pairs_k
    assert payload["diagnostics"]["settings"]["first_k"] == docs_k
    content_max = payload["diagnostics"]["tokens"]["content_max"]
    assert content_max == docs_k - 2 if docs_k else content_max > 12  # 2 special tokens ([CLS], [SEP])
    assert ("skipped" in payload["diagnostics"]["probe"]) == (docs_k is not None)  # cut documents: all one length


def test_cli_words_curve_alone_needs_no_docs(tmp_path: Path, tiny_model_dir: Path) -> None:
    out = tmp_path / "words"
    args = ["audit", "--model", str(tiny_model_dir), "--words-curve", "--max-pairs", "5", "--no-curve",
            "--no-shuffle", "--out", str(out)]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    diagnostics = json.loads((out / "audit.json").read_text(encoding="utf-8"))["diagnostics"]
    assert set(diagnostics) == {"settings", "words_curve"}


# --- behaviour on the real all-MiniLM-L6-v2 ---------------------------------------------------------------------


@pytest.mark.slow
def test_minilm_elongation_raises_pooled_anisotropy(minilm, data_dir: Path) -> None:
    """LA(SER)³ Fig. 4 on real sentences: copying each text to fill N makes MiniLM's embeddings crowd together."""
    docs = read_docs(data_dir / "wiki1m_simcse_head/wiki1m_for_simcse.head11914.txt.gz", max_docs=120, seed=0)
    section = run_doc_audit(minilm, docs, DocAuditConfig(diagnostics=("isotropy",)))
    elongation = section["isotropy"]["elongation"]
    assert elongation["n"] == 120  # every sentence fits at least two copies in N = 256
    assert elongation["elongated"]["anisotropy"] > elongation["original"]["anisotropy"] + 0.01
    assert 0.5 < elongation["self_cosine_mean"] < 1.0


@pytest.mark.slow
def test_minilm_repeated_unrelated_words_converge(minilm) -> None:
    """Length-collapse App. C.4: two words with no token in common grow more similar as they are repeated."""
    mean = repeated_words_curve(minilm)["mean"]
    assert mean["ks"][-1] == 254
    assert mean["cosine"][-1] > mean["cosine"][1] + 0.1
