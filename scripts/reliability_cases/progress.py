"""Progress off a terminal (issue 62.11): `encode` and `index build` run into a log (here: captured output, as with
``nohup … > log``) write plain progress lines, one at most every LENGTHWISE_PROGRESS_INTERVAL seconds (0 here: one a
step) and a last one, and no carriage-return bar."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from reliability_cases import Case, Context

EVERY_STEP = {"LENGTHWISE_PROGRESS_INTERVAL": "0"}


def _corpus(tmp: Path, context: Context) -> None:
    text = "document {} about the river and the old bridge "
    rows = [{"_id": f"d{i}", "text": text.format(i) * (1 + i % 4)} for i in range(8)]
    (tmp / "c.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


def _encoded(tmp: Path, context: Context) -> None:
    _corpus(tmp, context)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    argv = ["encode", "-d", f"{tmp}/c.jsonl", "-o", f"{tmp}/e", "-m", str(context.tiny_model), "--long",
            "multi-vector", "--window", "16"]  # fmt: skip
    done = subprocess.run([sys.executable, "-m", "lengthwise.cli", *argv], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"setup `lengthwise {' '.join(argv)}` failed: {done.stdout}{done.stderr}")


def _lines(*patterns: str) -> Callable[[Path, str], str | None]:
    """A check: every pattern matches a whole line of the output, and no line is redrawn in place."""

    def check(tmp: Path, output: str) -> str | None:
        if "\r" in output:
            return "a carriage return in the log: a bar redrawn in place, not lines"
        missing = [p for p in patterns if not re.search(p, output, flags=re.MULTILINE)]
        return f"no line like {missing[0]!r}" if missing else None

    return check


CASES: list[Case] = [
    Case("encode-progress-in-a-log", "62.11",
         ["encode", "-d", "{tmp}/c.jsonl", "-o", "{tmp}/e", "-m", "{tiny}", "--long", "multi-vector", "--window", "16",
          "--shard-docs", "3"], 0, "encode done: 8/8 documents (100%)", _corpus,
         _lines(r"^encode: [1-7]/8 documents \(\d+%\), [\d,]+ windows, \S+ elapsed, \S+ left, [\d.]+ documents/s$"),
         env=EVERY_STEP),
    Case("index-build-progress-in-a-log", "62.11", ["index", "build", "{tmp}/e", "--out", "{tmp}/i"], 0,
         "indexing the text by document done: 8/8 documents (100%)", _encoded,
         _lines(r"^indexing windows done: (\d+)/\1 distinct windows \(100%\)",
                r"^indexing the text by window: \d/8 documents \(\d+%\), .* documents/s$"), env=EVERY_STEP),
]  # fmt: skip
