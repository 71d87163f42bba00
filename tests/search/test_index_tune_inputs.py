"""What `lengthwise index tune` is tuned on (issue 62.2, 62.9): qrels that judge nothing relevant, a (query,
document) pair judged twice with two scores, negative scores, and the lexical weights tried. Each bad input is refused
in one line before any arm is searched, and nothing is recorded in the index."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lengthwise.cli import app
from lengthwise.core.errors import DataFormatError, SettingError

from .conftest import encode_windows, haystack_rows

runner = CliRunner()


@pytest.fixture(scope="module")
def index(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """A hybrid index of 8 haystack documents encoded by the tiny BERT, opened as the CLI opens it."""
    from lengthwise.facade import LongIndex, load_model

    folder = tmp_path_factory.mktemp("tune-inputs")
    encoded = encode_windows(folder, haystack_rows(8), tiny_model_dir)
    LongIndex.build(encoded, folder / "idx", quantize="none", engine="faiss", load_model=load_model)
    return LongIndex.open(folder / "idx", load_model=load_model)


def _beir(folder: Path, qrels: str) -> Path:
    """The index's corpus as a BEIR folder with the ``dev`` qrels `qrels` (rows after the header)."""
    rows = haystack_rows(8)
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    queries = [{"_id": f"q{i}", "text": " ".join(r["text"].split()[3:9])} for i, r in enumerate(rows)]
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (folder / "qrels" / "dev.tsv").write_text("query-id\tcorpus-id\tscore\n" + qrels)
    return folder


def _untuned(index) -> bool:  # type: ignore[no-untyped-def]
    from lengthwise.facade import LongIndex

    return "mode" not in LongIndex.open(index.folder).lexical.settings


@pytest.mark.parametrize("score", ["0", "-1"])
def test_qrels_that_judge_nothing_relevant_are_refused(index, tmp_path: Path, score: str) -> None:  # type: ignore[no-untyped-def]
    """Every score 0 (or below): every arm scored 0.00 and "dense" was recorded as chosen, switching the index's
    default search from hybrid to dense in silence."""
    from lengthwise.pipelines import tune_hybrid

    beir = _beir(tmp_path / "beir", "".join(f"q{i}\tdoc{i}\t{score}\n" for i in range(8)))
    with pytest.raises(DataFormatError, match="judges no document relevant; nothing to tune on") as refused:
        tune_hybrid(index, beir, split="dev", weights=(0.5,))
    assert "\n" not in str(refused.value) and "dev.tsv" in str(refused.value)
    run = runner.invoke(app, ["index", "tune", str(index.folder), "--data", str(beir), "--split", "dev"])
    assert run.exit_code == 2 and "judges no document relevant" in run.output
    assert "nDCG@10" not in run.output and "chosen" not in run.output
    assert _untuned(index)


def test_a_pair_judged_twice_with_two_scores_is_refused_naming_both_lines(tmp_path: Path) -> None:
    """It was taken silently (the last score won); the same score twice is harmless and read once."""
    from lengthwise.core.data import read_qrels

    same = tmp_path / "same.tsv"
    same.write_text("query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td2\t1\nq1\td1\t2\n")
    assert read_qrels(same) == {"q1": {"d1": 2, "d2": 1}}
    other = tmp_path / "other.tsv"
    other.write_text("query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td2\t1\nq1\td1\t0\n")
    expected = r"other\.tsv:4: query 'q1' and document 'd1' judged 0 here and 2 at line 2; keep one line per pair"
    with pytest.raises(DataFormatError, match=expected):
        read_qrels(other)
    trec = tmp_path / "trec.txt"
    trec.write_text("q1\t0\td1\t1\nq1\t0\td1\t3\n")
    with pytest.raises(DataFormatError, match=r"trec\.txt:2: .* judged 3 here and 1 at line 1"):
        read_qrels(trec)


def test_negative_scores_are_read_as_not_relevant(index, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A negative score (TREC's -1 or -2 for junk) counts as not relevant, as pytrec_eval counts it: a query
    scores as if its negative lines were 0."""
    from lengthwise.pipelines import tune_hybrid

    negative = _beir(tmp_path / "neg", "".join(f"q{i}\tdoc{i}\t1\nq{i}\tdoc{(i + 1) % 8}\t-2\n" for i in range(8)))
    zero = _beir(tmp_path / "zero", "".join(f"q{i}\tdoc{i}\t1\nq{i}\tdoc{(i + 1) % 8}\t0\n" for i in range(8)))
    assert (tune_hybrid(index, negative, split="dev", weights=(0.5,), save=False)["scores"]
            == tune_hybrid(index, zero, split="dev", weights=(0.5,), save=False)["scores"])  # fmt: skip


@pytest.mark.parametrize(
    ("weights", "expected"),
    [("1.5", "--weights 1.5: 1.5 is not a lexical weight; give weights in [0, 1]"),
     ("0.3,nan", "--weights 0.3, nan: nan is not a lexical weight; give weights in [0, 1]"),
     ("", "--weights '': no lexical weight to try; give one or more in [0, 1], e.g. 0.3,0.5"),
     (" , ", "--weights ' , ': no lexical weight to try; give one or more in [0, 1], e.g. 0.3,0.5")],
)  # fmt: skip
def test_weights_are_refused_naming_the_flag(index, tmp_path: Path, weights: str, expected: str) -> None:  # type: ignore[no-untyped-def]
    """`--weights 1.5` was refused as ``weight=1.5`` (a field the command has no flag for), and `--weights ''`
    tuned dense, lexical and RRF only and recorded the choice."""
    beir = _beir(tmp_path / "beir", "".join(f"q{i}\tdoc{i}\t1\n" for i in range(8)))
    run = runner.invoke(app, ["index", "tune", str(index.folder), "--data", str(beir), "--weights", weights])
    assert run.exit_code == 2, run.output
    assert expected in " ".join(run.output.split()) and "nDCG@10" not in run.output
    assert _untuned(index)


def test_the_library_refuses_no_weights_and_weights_outside_0_1(index, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from lengthwise.pipelines import tune_hybrid

    beir = _beir(tmp_path / "beir", "".join(f"q{i}\tdoc{i}\t1\n" for i in range(8)))
    with pytest.raises(SettingError, match=r"^weights=\[\]: no lexical weight to try"):
        tune_hybrid(index, beir, split="dev", weights=())
    with pytest.raises(SettingError, match=r"^weights=\[0\.5, -0\.1\]: -0\.1 is not a lexical weight"):
        tune_hybrid(index, beir, split="dev", weights=(0.5, -0.1))
    assert _untuned(index)


def test_the_dev_objective_of_the_other_tuners_refuses_them_too(tmp_path: Path) -> None:
    """`tempscale tune` and `longdoc tune` on retrieval score every candidate on the same qrels: all 0 before."""
    from lengthwise.evaluation.config import Task
    from lengthwise.evaluation.objectives import dev_objective

    beir = _beir(tmp_path / "beir", "".join(f"q{i}\tdoc{i}\t0\n" for i in range(8)))
    with pytest.raises(DataFormatError, match=r"qrels/dev\.tsv: judges no document relevant; nothing to tune on"):
        dev_objective(Task.retrieval, beir, "dev")
