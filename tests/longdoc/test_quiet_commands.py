"""Noise a command printed beside what it did (issue 62.10): `index build` drew transformers' "Loading weights" bar
while it loaded the query model, and `encode --devices cpu,cpu` ended with multiprocessing's "leaked semaphore
objects" warning. The commands run as the user runs them, in a subprocess, with stderr kept apart."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import haystack_rows

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}


def _lengthwise(folder: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "lengthwise.cli", *map(str, args)], cwd=folder, env=ENV,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return done


@pytest.fixture(scope="module")
def encoded(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """8 documents encoded by two worker processes (`--devices cpu,cpu`), and what that encode wrote to stderr."""
    folder = tmp_path_factory.mktemp("quiet")
    (folder / "c.jsonl").write_text("".join(json.dumps(row) + "\n" for row in haystack_rows(8)))
    done = _lengthwise(folder, "encode", "-d", "c.jsonl", "-o", "e", "-m", tiny_model_dir, "--long", "multi-vector",
                       "--window", "24", "--devices", "cpu,cpu", "--threads", "1")  # fmt: skip
    return folder, done.stderr


_SLOW_EXIT = """
import sys
sys.path.insert(0, sys.argv[1])
from tests.longdoc._slow_exit import load_slowly_exiting
from lengthwise.longdoc.storage.encode import encode

if __name__ == "__main__":
    encode(sys.argv[2], sys.argv[3], sys.argv[4], load_model=load_slowly_exiting, long="multi-vector",
           devices=("cpu", "cpu"), threads=1)
"""


def test_encode_on_two_processes_leaks_no_semaphore(encoded: tuple[Path, str], tiny_model_dir: Path) -> None:
    """`with Pool(...)` terminated the workers (SIGTERM) as soon as the last result came back, racing their normal
    exit: a worker killed before its finalizers ran left its semaphore (tqdm's lock) registered, and the resource
    tracker warned at shutdown (some runs). Workers whose exit takes a second (`_slow_exit`) lose that race every
    time unless the pool is closed and joined."""
    folder, stderr = encoded
    assert "leaked semaphore" not in stderr, stderr
    script = folder / "slow_exit.py"
    script.write_text(_SLOW_EXIT)
    root = Path(__file__).resolve().parents[2]
    argv = [sys.executable, str(script), str(root), str(folder / "c.jsonl"), str(folder / "slow"), str(tiny_model_dir)]
    done = subprocess.run(argv, cwd=folder, env=ENV, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "leaked semaphore" not in done.stderr and "resource_tracker" not in done.stderr, done.stderr


def test_index_build_draws_no_weight_loading_bar(encoded: tuple[Path, str]) -> None:
    folder, _ = encoded
    done = _lengthwise(folder, "index", "build", "e", "--out", "i")
    assert "Loading weights" not in done.stderr, done.stderr
    assert "indexed" in done.stdout + done.stderr
