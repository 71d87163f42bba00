"""A Python user gets what the CLI gets with one call: the CLI and the one library call write the same record
(timestamps and wall time aside) for eval (TempScale and long documents together), tempscale tune, bake and save,
longdoc save, audit, report, encode and train."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import lengthwise as lw
from lengthwise.cli import app
from lengthwise.core.errors import SettingError
from lengthwise.evaluation.config import EvalConfig

STSB = Path(__file__).parent / "data" / "stsb" / "sts-test.csv.gz"
VARYING = ("created", "wall_time_s")


def _record(folder: Path, name: str = "results.json") -> dict:
    record = json.loads((folder / name).read_text())
    for key in VARYING:
        assert key in record, f"results.json lost {key}"
        record.pop(key)
    return record


def test_eval_cli_and_python_write_the_same_record(tiny_model_dir: Path, tmp_path: Path) -> None:
    flags = ["--tempscale", "0.8", "--long", "chunk-mean", "--window", "16", "--stride", "8"]
    cli_out, py_out = tmp_path / "cli", tmp_path / "py"
    run = CliRunner().invoke(
        app,
        [
            "eval",
            "-m",
            str(tiny_model_dir),
            "-t",
            "sts",
            "-d",
            str(STSB),
            "--max-test",
            "60",
            "-o",
            str(cli_out),
            *flags,
        ],
    )
    assert run.exit_code == 0, run.output
    config = EvalConfig(task="sts", data=str(STSB), max_test=60)
    lw.evaluate(config, tiny_model_dir, out=py_out, tempscale=0.8, long="chunk-mean", window=16, stride=8)
    cli, py = _record(cli_out), _record(py_out)
    assert cli["settings"]["tempscale"]["t"] == 0.8 and cli["settings"]["long"]["window"] == 16
    assert cli == py
    assert sorted(p.name for p in cli_out.iterdir()) == sorted(p.name for p in py_out.iterdir())


def test_build_encoder_refuses_a_window_without_a_strategy(tiny_model) -> None:
    with pytest.raises(SettingError, match="strategy=None: a window or stride needs"):
        lw.build_encoder(tiny_model, window=64)
    assert lw.build_encoder(tiny_model).encoder is None  # nothing asked, nothing saved: the plain model


def test_long_default_names_the_recommended_setting_and_a_window_overrides_it(tiny_model) -> None:
    from lengthwise.longdoc import RECOMMENDED

    assert lw.build_encoder(tiny_model, long="default").settings["long"] == RECOMMENDED.to_dict()
    wider = lw.build_encoder(tiny_model, long="default", window=128).settings["long"]
    assert wider == {**RECOMMENDED.to_dict(), "window": 128, "stride": None}  # a window alone: no overlap


def test_tempscale_tune_cli_and_python_write_the_same_record(tiny_model_dir: Path, tmp_path: Path) -> None:
    from lengthwise.pipelines import tune_tempscale
    from lengthwise.tempscale.tune import TuneSpec

    cli_out, py_out = tmp_path / "cli", tmp_path / "py"
    args = ["tempscale", "tune", "-m", str(tiny_model_dir), "-t", "sts", "-d", str(STSB), "--max-items", "40"]
    run = CliRunner().invoke(app, [*args, "--grid", "0.7,1.0", "--no-search", "-o", str(cli_out)])
    assert run.exit_code == 0, run.output
    tune_tempscale("sts", STSB, tiny_model_dir, spec=TuneSpec(grid=(0.7, 1.0), search=False), out=py_out, max_items=40)
    cli, py = _record(cli_out, "tune.json"), _record(py_out, "tune.json")
    assert [point["t"] for point in cli["result"]["curve"]] == [0.7, 1.0]
    assert cli == py
    assert sorted(p.name for p in py_out.iterdir()) == ["tune.json", "tune.png"]


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_tempscale_bake_and_save_cli_and_python_write_the_same_model(tiny_model_dir: Path, tmp_path: Path) -> None:
    from lengthwise.tempscale import bake, save_tempscaled

    model = ["--model", str(tiny_model_dir), "--t", "0.7"]
    run = CliRunner().invoke(app, ["tempscale", "bake", *model, "--out", str(tmp_path / "cli-bake")])
    assert run.exit_code == 0, run.output
    result = bake(tiny_model_dir, 0.7, tmp_path / "py-bake")
    assert result.t == 0.7 and result.max_difference is not None and result.max_difference <= 1e-5
    assert f"{result.max_difference:.2e}" in run.output
    cli, py = _files(tmp_path / "cli-bake"), _files(tmp_path / "py-bake")
    assert cli.keys() == py.keys() and "model.safetensors" in cli
    assert cli == py  # the same weights and the same TempScale record, byte for byte
    run = CliRunner().invoke(app, ["tempscale", "save", *model, "--out", str(tmp_path / "cli-save")])
    assert run.exit_code == 0, run.output
    assert save_tempscaled(tiny_model_dir, 0.7, tmp_path / "py-save") is None
    assert _files(tmp_path / "cli-save") == _files(tmp_path / "py-save")


def test_longdoc_save_cli_and_python_write_the_same_model(tiny_model_dir: Path, tmp_path: Path) -> None:
    from lengthwise.longdoc import LongDocConfig
    from lengthwise.longdoc.persist import save_long_documents

    args = ["longdoc", "save", "--model", str(tiny_model_dir), "--long", "multi-vector", "--window", "16"]
    run = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "cli")])
    assert run.exit_code == 0, run.output
    config = LongDocConfig.named("multi-vector").updated(window=16)
    save_long_documents(tiny_model_dir, config, tmp_path / "py")
    assert _files(tmp_path / "cli") == _files(tmp_path / "py")
    assert lw.LongEncoder(lw.load_model(tmp_path / "py")).config == config  # the saved choice comes back


def test_audit_cli_and_python_write_the_same_record(tiny_model_dir: Path, tmp_path: Path) -> None:
    from lengthwise.audit.config import AuditConfig, AuditJob, HistogramSpec

    cli_out, py_out = tmp_path / "cli", tmp_path / "py"
    flags = ["--max-pairs", "12", "--null-permutations", "20", "--bins", "50", "--tempscale", "0.9"]
    run = CliRunner().invoke(app, ["audit", "-m", str(tiny_model_dir), *flags, "-o", str(cli_out)])
    assert run.exit_code == 0, run.output
    job = AuditJob(out=py_out, max_pairs=12, attack=AuditConfig(null_permutations=20, histogram=HistogramSpec(bins=50)))
    lw.audit_model(job, tiny_model_dir, tempscale=0.9)
    cli, py = (json.loads((folder / "audit.json").read_text()) for folder in (cli_out, py_out))
    for record in (cli, py):
        assert set(record["meta"]) >= {"created", "seconds"}
        record["meta"].pop("created"), record["meta"].pop("seconds")
    assert "TempScale t=0.9" in cli["model"]["name"]
    assert cli == py
    assert sorted(p.name for p in cli_out.iterdir()) == sorted(p.name for p in py_out.iterdir())
    from lengthwise.audit.report.render import render  # lengthwise report: one audit, then two compared

    run = CliRunner().invoke(app, ["report", str(cli_out), "--out", str(tmp_path / "cli-report")])
    assert run.exit_code == 0, run.output
    written = render([cli_out], tmp_path / "py-report")
    assert _files(tmp_path / "cli-report").keys() == _files(tmp_path / "py-report").keys()
    assert written["html"].read_bytes() == (tmp_path / "cli-report" / "report.html").read_bytes()
    run = CliRunner().invoke(app, ["report", str(cli_out), str(py_out), "--out", str(tmp_path / "cli-compare")])
    assert run.exit_code == 0, run.output
    written = render([cli_out, py_out], tmp_path / "py-compare")
    assert written["html"].read_bytes() == (tmp_path / "cli-compare" / "compare.html").read_bytes()


def test_encode_cli_and_python_write_the_same_vectors(tiny_model_dir: Path, tmp_path: Path) -> None:
    from lengthwise.longdoc.storage.store import read_embeddings

    rows = [{"_id": f"d{i}", "text": " ".join(f"word{i * 5 + j}" for j in range(40))} for i in range(6)]
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(row) + "\n" for row in rows))
    flags = ["--long", "multi-vector", "--window", "16", "--stride", "8", "--shard-docs", "4"]
    run = CliRunner().invoke(app, ["encode", "-d", str(corpus), "-o", str(tmp_path / "cli"), "-m", str(tiny_model_dir),
                                   *flags])  # fmt: skip
    assert run.exit_code == 0, run.output
    config = lw.LongDocConfig(strategy="multi-vector", window=16, stride=8)
    assert lw.encode(corpus, tmp_path / "py", tiny_model_dir, long=config, shard_docs=4) == 6
    (cli_ids, cli), (py_ids, py) = read_embeddings(tmp_path / "cli"), read_embeddings(tmp_path / "py")
    assert cli_ids == py_ids == [row["_id"] for row in rows]
    assert np.array_equal(cli.offsets, py.offsets) and np.allclose(cli.vectors, py.vectors, atol=1e-6)
    manifest = [json.loads((tmp_path / name / "manifest.json").read_text()) for name in ("cli", "py")]
    assert manifest[0] == manifest[1]  # the same recorded settings, so an index built on either reads the same


def test_train_cli_and_python_train_the_same_model(tiny_model_dir: Path, tmp_path: Path) -> None:
    from lengthwise.training.config import config_from_mapping

    pairs = tmp_path / "pairs.jsonl"
    rows = [{"anchor": f"the cat number {i} sat", "positive": f"a cat numbered {i} was sitting"} for i in range(16)]
    pairs.write_text("".join(json.dumps(row) + "\n" for row in rows))
    settings = {"method": "pairs", "data": str(pairs), "batch_size": 4, "max_steps": 2, "seed": 3, "max_length": 32}
    args = ["train", "-m", str(tiny_model_dir), "-o", str(tmp_path / "cli"), "--method", "pairs", "-d", str(pairs),
            "--batch-size", "4", "--max-steps", "2", "--seed", "3", "--max-length", "32",
            "--device", "cpu"]  # fmt: skip
    run = CliRunner().invoke(app, args)
    assert run.exit_code == 0, run.output
    config = config_from_mapping({**settings, "model": str(tiny_model_dir), "out": str(tmp_path / "py"),
                                  "device": "cpu"})  # fmt: skip
    result = lw.train(config)
    texts = ["a cat sat on the mat", "the stock market fell sharply"]
    py = lw.load_model(result.model_dir, device="cpu").encode(texts)
    cli = lw.load_model(tmp_path / "cli" / result.model_dir.relative_to(tmp_path / "py"), device="cpu").encode(texts)
    assert np.allclose(cli, py, atol=1e-6)
    start = lw.load_model(tiny_model_dir, device="cpu").encode(texts)
    assert not np.allclose(start, py, atol=1e-4)  # two steps moved the weights: the comparison can fail


def test_longdoc_synth_and_eval_cli_and_python_agree(tiny_model_dir: Path, tmp_path: Path) -> None:
    from lengthwise.longdoc.tasks.run import score_long_task, synthesize

    haystack = Path(__file__).parent / "longdoc" / "prose.txt"
    args = ["longdoc", "synth", "-t", "needle", "--haystack", str(haystack), "-m", str(tiny_model_dir),
            "--lengths", "48,96", "--per-length", "3", "-o", str(tmp_path / "cli-task")]  # fmt: skip
    assert CliRunner().invoke(app, args).exit_code == 0
    synthesize("needle", haystack, tmp_path / "py-task", tiny_model_dir, lengths=(48, 96), per_length=3)
    for name in ("corpus.jsonl", "queries.jsonl", "longdoc.json"):
        assert (tmp_path / "cli-task" / name).read_bytes() == (tmp_path / "py-task" / name).read_bytes()
    flags = ["--long", "multi-vector", "--window", "16", "--stride", "8", "--best-windows", "2"]
    run = CliRunner().invoke(app, ["longdoc", "eval", "-d", str(tmp_path / "cli-task"), "-m", str(tiny_model_dir),
                                   *flags, "-o", str(tmp_path / "cli")])  # fmt: skip
    assert run.exit_code == 0, run.output
    config = lw.LongDocConfig(strategy="multi-vector", window=16, stride=8, best_windows=2)
    score_long_task(tmp_path / "cli-task", tiny_model_dir, long=config, out=tmp_path / "py")
    cli, py = (json.loads((tmp_path / name / "results.json").read_text()) for name in ("cli", "py"))
    for record in (cli, py):
        record["provenance"].pop("created"), record["provenance"].pop("wall_time_s"), record["result"].pop("timings_s")
    assert cli["result"]["by_length"] and cli == py


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc, a folder nobody can create in")
def test_an_unwritable_out_is_refused_before_the_model_loads(tmp_path: Path) -> None:
    # found by the reliability cases: after the move to one library call, `audit -o /proc/x` loaded the model first
    from lengthwise.audit.config import AuditJob

    with pytest.raises(SettingError, match=r"^out='/proc/lengthwise-x': cannot write there"):
        lw.audit_model(AuditJob(out=Path("/proc/lengthwise-x")), "/nonexistent/model")


def test_a_haystack_folder_reads_its_text_files_in_name_order(tiny_model_dir: Path, tmp_path: Path) -> None:
    import gzip

    from lengthwise.longdoc.tasks.run import synthesize

    lines = (Path(__file__).parent / "longdoc" / "prose.txt").read_text().splitlines(keepends=True)
    folder = tmp_path / "essays"
    folder.mkdir()
    (folder / "a.txt").write_text("".join(lines[: len(lines) // 2]))
    (folder / "b.txt.gz").write_bytes(gzip.compress("".join(lines[len(lines) // 2 :]).encode()))
    (folder / "notes.md").write_text("# not prose: ignored\n")
    (tmp_path / "whole.txt").write_text("".join(lines))
    for haystack, out in ((folder, "from-folder"), (tmp_path / "whole.txt", "from-file")):
        synthesize("needle", haystack, tmp_path / out, tiny_model_dir, lengths=(48,), per_length=3)
    assert (tmp_path / "from-folder" / "corpus.jsonl").read_bytes() == (
        tmp_path / "from-file" / "corpus.jsonl"
    ).read_bytes()
    with pytest.raises(SettingError, match=r"no \.txt or \.txt\.gz file"):
        synthesize("needle", tmp_path / "from-file", tmp_path / "x", tiny_model_dir)
