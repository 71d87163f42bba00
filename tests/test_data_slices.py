"""The readers on the small real-data slices in tests/data/: real formats in a clone with no shared data.

The expected values are computed here from the raw lines with plain Python, independently of the readers.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from typer.testing import CliRunner

from lengthwise import read_pairs


def _lines(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return handle.read().splitlines()


def test_stsb_slice_reads_as_sts_benchmark(data_slices: Path) -> None:
    path = data_slices / "stsb" / "sts-test.csv.gz"
    rows = [line.split("\t") for line in _lines(path)]
    assert {len(row) for row in rows} == {7, 9}  # some rows carry 2 extra source columns
    pairs = read_pairs(path)
    assert [(p.text1, p.text2, p.score) for p in pairs.pairs] == [(r[5], r[6], float(r[4])) for r in rows]
    sample = pairs.sample(50, seed=1)
    assert sample.pairs == pairs.sample(50, seed=1).pairs and set(sample.pairs) <= set(pairs.pairs)


def test_sts16_slice_reads_as_a_senteval_folder(data_slices: Path) -> None:
    from lengthwise.evaluation import read_sts

    folder = data_slices / "sts16"
    scored = {}
    for gold in folder.glob("STS.gs.*.txt.gz"):
        subset = gold.name.removeprefix("STS.gs.").removesuffix(".txt.gz")
        scored[subset] = sum(1 for line in _lines(gold) if line.strip())  # a blank gold line: not scored
    pairs = read_sts(folder)
    assert pairs.describe()["kinds"] == scored
    assert len(pairs) == sum(scored.values())
    assert all(p.score is not None and 0 <= p.score <= 5 for p in pairs.pairs)


def test_scifact_slice_reads_as_a_beir_folder(data_slices: Path) -> None:
    from lengthwise.evaluation import read_beir

    folder = data_slices / "scifact"
    qrels = [line.split("\t") for line in (folder / "qrels" / "test.tsv").read_text().splitlines()[1:]]
    data = read_beir(folder)
    assert len(data.doc_ids) == len(_lines(folder / "corpus.jsonl.gz"))
    assert set(data.query_ids) == {row[0] for row in qrels}
    assert sum(len(docs) for docs in data.qrels.values()) == len(qrels)
    assert {doc for docs in data.qrels.values() for doc in docs} <= set(data.doc_ids)
    kinds = read_pairs(folder).describe()["kinds"]  # the audit's same-topic vs random pairs
    assert kinds["same_topic"] > 0 and kinds["same_topic"] == kinds["random"]


def test_wiki_and_snli_slices_read_as_training_data(data_slices: Path) -> None:
    from lengthwise.training.data import read_training_data

    wiki = data_slices / "wiki1m" / "wiki1m_for_simcse.head200.txt.gz"
    texts = read_training_data(wiki)
    assert texts.kind == "text" and list(texts.texts) == [line.strip() for line in _lines(wiki) if line.strip()]

    snli = data_slices / "snli" / "dev.head200.jsonl.gz"
    entailed = [row for row in map(json.loads, _lines(snli)) if row["label"] == "entailment"]
    pairs = read_training_data(snli)
    assert pairs.kind == "pair" and len(pairs) == len(entailed)


def test_wiki_slice_reads_as_audit_documents(data_slices: Path) -> None:
    from lengthwise.audit import read_docs

    path = data_slices / "wiki1m" / "wiki1m_for_simcse.head200.txt.gz"
    docs = read_docs(path, max_docs=120, seed=0)
    assert docs.n_in_file == len(_lines(path)) and len(docs.texts) == 120
    assert set(docs.texts) <= {line.strip() for line in _lines(path)}


def test_eval_cli_on_the_sts16_slice(tmp_path: Path, tiny_model_dir: Path, data_slices: Path) -> None:
    from lengthwise.cli import app

    out = tmp_path / "sts"
    result = CliRunner().invoke(
        app,
        ["eval", "-m", str(tiny_model_dir), "-t", "sts", "-d", str(data_slices / "sts16"), "-o", str(out)],
    )
    assert result.exit_code == 0, result.output
    record = json.loads((out / "results.json").read_text())
    n_scored = sum(1 for gold in (data_slices / "sts16").glob("STS.gs.*") for line in _lines(gold) if line.strip())
    assert record["result"]["n_pairs"] == n_scored == sum(row["count"] for row in record["bins"])
    assert set(record["scores"]) == {"spearman", "pearson"}
