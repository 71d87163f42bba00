"""`lengthwise audit --retrieval DIR` end to end on the tiny model, `lengthwise report` of it (one and two audits),
and the one-line errors of its flags."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lengthwise.cli import app

from .test_retrieval_known import synthetic_split

runner = CliRunner()


def _write_beir(folder: Path, tokenizer) -> Path:
    split, _ = synthetic_split(tokenizer, n_docs=40, n_queries=8)
    (folder / "qrels").mkdir(parents=True)
    with (folder / "corpus.jsonl").open("w", encoding="utf-8") as handle:
        for doc_id, text in zip(split.doc_ids, split.doc_texts, strict=True):
            handle.write(json.dumps({"_id": doc_id, "title": "", "text": text}) + "\n")
    with (folder / "queries.jsonl").open("w", encoding="utf-8") as handle:
        for query_id, text in zip(split.query_ids, split.query_texts, strict=True):
            handle.write(json.dumps({"_id": query_id, "text": text}) + "\n")
    rows = [f"{q}\t{d}\t{grade}" for q, docs in split.qrels.items() for d, grade in docs.items()]
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "\n".join(rows) + "\n")
    return folder


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory, tiny_model) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("retrieval-cli")
    pairs = root / "pairs.jsonl"
    texts = [("A cat sat on the mat.", "A cat was on the mat."), ("Rain fell all day.", "It rained for hours.")] * 3
    pairs.write_text("".join(json.dumps({"text1": a, "text2": b}) + "\n" for a, b in texts), encoding="utf-8")
    return {"pairs": pairs, "beir": _write_beir(root / "beir", tiny_model.tokenizer), "root": root}


def _audit(inputs: dict[str, Path], tiny_model_dir: Path, out: Path, *extra: str):
    args = ["audit", "-m", str(tiny_model_dir), "--pairs", str(inputs["pairs"]), "--elongate", "2", "--no-curve"]
    args += ["--no-shuffle", "--null-permutations", "0", "--out", str(out), *extra]
    return runner.invoke(app, args)


@pytest.fixture(scope="module")
def audited(inputs, tiny_model_dir, one_thread) -> tuple[Path, Path]:
    plain, scaled = inputs["root"] / "plain", inputs["root"] / "scaled"
    for out, extra in ((plain, ()), (scaled, ("--tempscale", "0.8"))):
        result = _audit(
            inputs, tiny_model_dir, out, "--retrieval", str(inputs["beir"]), "--retrieval-pairs", "5", *extra
        )
        assert result.exit_code == 0, result.output
    return plain, scaled


def test_audit_writes_the_retrieval_section_and_prints_its_verdicts(audited) -> None:
    plain, scaled = audited
    payload = json.loads((plain / "audit.json").read_text(encoding="utf-8"))
    section = payload["retrieval_bias"]
    assert section["controlled"]["n_pairs"] == 5 and section["data"]["n_queries"] == 8
    assert section["settings"]["encoder"] == "SentenceTransformerEncoder"
    assert (plain / "retrieval_natural.png").is_file() and (plain / "retrieval_controlled.png").is_file()
    assert "Retrieval length bias" in (plain / "report.html").read_text(encoding="utf-8")
    scaled_payload = json.loads((scaled / "audit.json").read_text(encoding="utf-8"))
    assert scaled_payload["retrieval_bias"]["settings"]["encoder"] == "TempScale t=0.8"
    assert "TempScale t=0.8" in scaled_payload["model"]["name"]
    assert scaled_payload["attack"]["mean_after"] != payload["attack"]["mean_after"]  # the attack ran under it too


def test_report_re_renders_and_compares_with_retrieval_rows(audited, tmp_path: Path) -> None:
    plain, scaled = audited
    assert runner.invoke(app, ["report", str(plain)]).exit_code == 0
    result = runner.invoke(app, ["report", str(plain), str(scaled), "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    page = (tmp_path / "compare.html").read_text(encoding="utf-8")
    assert "retrieval: mean Δrank, diluted to 2×" in page and (tmp_path / "cmp_retrieval.png").is_file()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--retrieval", "{root}/missing"), "missing"),
        (("--tempscale", "-1"), "--tempscale -1"),
        (("--retrieval", "{beir}", "--retrieval-pairs", "0"), "--retrieval-pairs"),
        (("--retrieval", "{beir}", "--retrieval-split", "dev"), "qrels/dev.tsv"),
    ],
)
def test_bad_retrieval_flags_fail_in_one_line_before_the_model_loads(
    inputs, tmp_path: Path, extra: tuple[str, ...], message: str
) -> None:
    args = [part.format(root=inputs["root"], beir=inputs["beir"]) for part in extra]
    result = _audit(inputs, Path("no-such-model-is-loaded"), tmp_path / "out", *args)
    assert result.exit_code == 2 and message in result.output, result.output
    assert "Traceback" not in result.output and not (tmp_path / "out" / "audit.json").exists()
