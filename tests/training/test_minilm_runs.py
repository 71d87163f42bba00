"""Short real runs from all-MiniLM-L6-v2, one per objective, on the shared data: the training loss falls.

Each run repeats a small seeded sample for three epochs (9 steps), so a falling loss means the objective
really pulls the model. With its own mean pooling, MiniLM already solves the dropout-only tasks (SimCSE,
HiCL, LA(SER)³ self-ref start near 1e-5, at float32's floor), so those three are run with CLS pooling, where
there is something left to learn; the document and pair objectives use the model as it is.
"""

from __future__ import annotations

import json
from pathlib import Path
from statistics import fmean

import pytest

from lengthwise.training.config import config_from_mapping
from lengthwise.training.run import run_training

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_thread")]

WIKI = "wiki1m_simcse_head/wiki1m_for_simcse.head11914.txt.gz"
SOURCES = {
    "simcse": (WIKI, "cls"),
    "hicl": (WIKI, "cls"),
    "laser-self": (WIKI, "cls"),
    "coco-dr": ("imdb/test.jsonl.gz", None),
    "laser-intra": ("imdb/test.jsonl.gz", None),
    "simde": ("imdb/test.jsonl.gz", None),  # CLS pooling: SimDE's own default
    "pairs": ("snli_senteval/dev.jsonl.gz", None),
    "copy-concat": ("snli_senteval/dev.jsonl.gz", None),
}


@pytest.mark.parametrize("method", list(SOURCES))
def test_training_loss_falls(method: str, minilm_path: str, data_dir: Path, tmp_path: Path) -> None:
    relative, pooling = SOURCES[method]
    config = config_from_mapping(
        dict(
            method=method,
            data=str(data_dir / relative),
            out=str(tmp_path / method),
            model=minilm_path,
            max_examples=24,
            epochs=3,
            batch_size=8,
            max_length=64,
            lr=1e-4,
            pooling=pooling,
            **({"segment_length": 16} if method == "hicl" else {}),
            save_steps=1000,
            logging_steps=1,
            device="cpu",
            seed=1,
        )
    )
    result = run_training(config)
    record = json.loads((result.out / "train.json").read_text())
    losses = [entry["loss"] for entry in record["log_history"] if "loss" in entry]
    assert len(losses) == 9
    assert fmean(losses[-3:]) < 0.8 * fmean(losses[:3]), losses
    assert record["model_start"]["weights_sha256_16"] != record["model_final"]["weights_sha256_16"]
