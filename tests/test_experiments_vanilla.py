"""experiments/vanilla.py (issue 37): MLM pretraining from scratch runs, records its curves, resumes, and saves a
model sentence-transformers loads.

Tiny: the ``tiny`` preset (2 layers × 32 wide, blocks of 32 tokens, batch 4, 6 steps, checkpoints every 3) on a few
sentences written to a temporary file, one torch thread.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "experiments" / "vanilla.py"

SENTENCES = [
    "The quick brown fox jumps over the lazy dog near the river bank.",
    "A man is playing a guitar on the corner of a busy street in the evening.",
    "Truth is the daughter of time, and not of authority, said the old philosopher.",
    "The committee met on Tuesday to discuss the budget for the coming year.",
    "Rain fell all night, and in the morning the fields were covered in mist.",
    "She read the letter twice before folding it back into its envelope.",
    "Engineers tested the bridge with heavy trucks before it opened to traffic.",
    "The film was long, but the last half hour made up for the slow start.",
]


@pytest.fixture(autouse=True)
def _thread_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The script sets OMP/MKL_NUM_THREADS for its child processes; give them back after each test."""
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.setenv(name, "1")


@pytest.fixture(scope="module")
def vanilla():
    spec = importlib.util.spec_from_file_location("experiments_vanilla", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Documents separated by blank lines (the reader for text files given by path)."""
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    docs = [" ".join(SENTENCES[i : i + 3]) for i in range(len(SENTENCES))] * 80
    path.write_text("\n\n".join(docs) + "\n", encoding="utf-8")
    return path


def _pretrain(vanilla, out: Path, corpus: Path) -> dict:
    code = vanilla.main(["pretrain", "--preset", "tiny", "--out", str(out), "--sources", str(corpus)])
    assert code == 0
    return json.loads((out / "summary.json").read_text(encoding="utf-8"))


def test_pretrain_records_curves_and_saves_a_sentence_transformer(vanilla, corpus, tmp_path, one_thread):
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModelForMaskedLM

    summary = _pretrain(vanilla, tmp_path / "run", corpus)
    assert summary["status"] == "done" and summary["global_step"] == 6
    data = summary["data"]
    assert data["tokens"] > 0 and data["train_blocks"] > 0 and data["held_out_blocks"] > 0
    assert [row["sha256"] for row in data["files"]] == [vanilla.sha256(corpus)]
    assert [row["step"] for row in summary["curves"]["held_out_mlm_loss"]] == [0, 3, 6, 6]  # start, evals, final
    assert len(summary["curves"]["train_mlm_loss"]) == 6
    model_dir = tmp_path / "run" / "model"
    assert (model_dir / "model.safetensors").is_file() and (model_dir / "tokenizer.json").is_file()
    st = SentenceTransformer(str(model_dir), device="cpu", local_files_only=True)
    assert st.encode(["a short sentence"]).shape == (1, 32)
    assert [type(m).__name__ for m in st] == ["Transformer", "Pooling"]
    AutoModelForMaskedLM.from_pretrained(str(model_dir))  # the MLM head is kept
    assert vanilla.main(["check", str(model_dir)]) == 0


def test_a_killed_run_resumes_to_the_same_model(vanilla, corpus, tmp_path, one_thread):
    """Cut a finished run back to its step-3 checkpoint (what a kill after step 3 leaves); the rerun resumes there
    and ends with the weights and curve of the uninterrupted run."""
    from safetensors.torch import load_file

    whole = _pretrain(vanilla, tmp_path / "whole", corpus)
    cut = tmp_path / "cut"
    shutil.copytree(tmp_path / "whole", cut)
    shutil.rmtree(cut / "model")
    shutil.rmtree(cut / "checkpoints" / "checkpoint-6")
    (cut / "summary.json").unlink()
    resumed = _pretrain(vanilla, cut, corpus)
    assert resumed["global_step"] == 6
    assert resumed["curves"]["train_mlm_loss"] == whole["curves"]["train_mlm_loss"]
    a, b = load_file(tmp_path / "whole" / "model" / "model.safetensors"), load_file(cut / "model" / "model.safetensors")
    assert a.keys() == b.keys()
    for key in a:
        assert (a[key] - b[key]).abs().max().item() < 1e-6, key


def test_resume_with_other_settings_is_refused(vanilla, corpus, tmp_path, one_thread):
    out = tmp_path / "run"
    args = ["pretrain", "--preset", "tiny", "--out", str(out), "--sources", str(corpus)]
    assert vanilla.main([*args, "--max-steps", "3"]) == 0
    shutil.rmtree(out / "model")
    with pytest.raises(SystemExit, match="other settings"):
        vanilla.main([*args, "--max-steps", "4", "--lr", "0.01"])


@pytest.fixture(scope="module")
def arms():
    spec = importlib.util.spec_from_file_location("experiments_vanilla_arms", SCRIPT.with_name("vanilla_arms.py"))
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def test_arms_share_one_sample_and_a_pair_arm_trains(arms, tiny_model_dir, tmp_path, one_thread):
    """vanilla_arms.py (part 2): one seeded sample for every arm (the pair arms get its self-pairs); an arm trains
    from the given start with the shared settings."""
    documents = tmp_path / "docs.jsonl"
    docs = [" ".join(SENTENCES[i : i + 3]) for i in range(len(SENTENCES) - 2)] * 4
    documents.write_text("".join(json.dumps({"text": doc}) + "\n" for doc in docs), encoding="utf-8")
    out = tmp_path / "arms"
    common = ["--out", str(out), "--model", str(tiny_model_dir), "--documents", str(documents), "--texts", "16"]
    assert arms.main(["data", *common]) == 0
    data = json.loads((out / "data.json").read_text(encoding="utf-8"))
    texts = [json.loads(line)["text"] for line in Path(data["texts"]).read_text(encoding="utf-8").splitlines()]
    pairs = [json.loads(line) for line in Path(data["pairs"]).read_text(encoding="utf-8").splitlines()]
    assert len(texts) == 16 and [p["anchor"] for p in pairs] == texts == [p["positive"] for p in pairs]
    steps = ["--steps", "2", "--batch-size", "4", "--max-length", "48", "--save-steps", "1"]
    assert arms.main(["train", "copy-concat", "--seed", "2", *common, *steps]) == 0
    record = json.loads((out / "copy-concat" / "seed2" / "train_record.json").read_text(encoding="utf-8"))
    assert record["steps"] == 2 and record["settings"]["pooling"] == "mean" and record["settings"]["seed"] == 2
    assert len(arms.plan(argparse.Namespace(out=out, model="m"))) == 2 + 3 * 7 * 2  # data, start, train+eval each
