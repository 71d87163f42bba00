"""Shared by the long-document tests: the haystack corpus encoded by the tiny BERT as an index's documents."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

HAYSTACK = Path(__file__).with_name("haystack.txt")


def haystack_rows(count: int = 24) -> list[dict[str, str]]:
    """`count` documents of 2–6 haystack lines each (``doc0`` …)."""
    lines = [line for line in HAYSTACK.read_text().splitlines() if line.strip()]
    return [{"_id": f"doc{i}", "text": " ".join(lines[(i * 5 + j) % len(lines)] for j in range(2 + i % 5))}
            for i in range(count)]  # fmt: skip


def encode_windows(folder: Path, rows: list[dict[str, str]], model_dir: Path) -> Path:
    """`rows` written to ``folder/corpus.jsonl`` and encoded multi-vector in 24-token windows (stride 12) by the
    model at `model_dir` (`lengthwise encode`, through the CLI) into ``folder/emb``, returned."""
    from lengthwise.cli import app

    (folder / "corpus.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    args = ["encode", "-d", folder / "corpus.jsonl", "-o", folder / "emb", "-m", model_dir, "--long",
            "multi-vector", "--window", "24", "--stride", "12"]  # fmt: skip
    run = CliRunner().invoke(app, [str(a) for a in args])
    assert run.exit_code == 0, run.output
    return folder / "emb"
