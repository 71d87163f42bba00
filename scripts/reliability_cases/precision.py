"""Issue 62, precision used as a careless user would: a query searched alone and the same query among others in one
call must get the same hits to the bit (a service batches its requests), in bf16 where the CPU has it; a model saved
with TempScale encodes at int8."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from reliability_cases import Case, Context
from reliability_cases.index_surface import _corpus, _run

_TEXT = "the river and the old bridge where apples and honey were sold at the autumn market before the mill closed"
_WORDS = f"{_TEXT} and the miller spoke of the flood that took the road".split(" ")
_QUERIES = [" ".join(_WORDS[n : n + 2 + (5 * n) % 19]) for n in range(8)]  # 2 to 20 words: several widths


def _precision() -> str:
    """bf16 where this CPU runs it natively (the case of the issue), else fp32 (the same guarantee)."""
    from lengthwise.core.precision import cpu_half_support

    return "bf16" if cpu_half_support()["bf16"] else "fp32"


def _alone(tmp: Path, context: Context) -> None:
    rows = [(f"d{i}", " ".join(_WORDS[(3 * i) % 20 :] + _WORDS[: (7 * i) % 20])) for i in range(12)]
    _corpus(tmp, rows)
    _run(tmp, ["encode", "-d", "c.jsonl", "-o", "e", "-m", "{tiny}", "--long", "multi-vector", "--window", "16",
               "--precision", _precision()], context)  # fmt: skip
    _run(tmp, ["index", "build", "e", "--out", "i"], context)
    (tmp / "q.jsonl").write_text("".join(json.dumps({"_id": f"q{n}", "text": q}) + "\n" for n, q in
                                         enumerate(_QUERIES)), encoding="utf-8")  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    answers = []
    for query in _QUERIES:
        argv = ["search", "i", "--query", query, "--json", "--passages", "1"]
        done = subprocess.run([sys.executable, "-m", "lengthwise.cli", *argv], cwd=tmp, env=env, capture_output=True,
                              text=True, check=True)  # fmt: skip
        answers.append(json.loads(done.stdout.strip().splitlines()[-1])["hits"])
    (tmp / "alone.json").write_text(json.dumps(answers), encoding="utf-8")


def _same_as_alone(tmp: Path, output: str) -> str | None:
    together = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    alone = json.loads((tmp / "alone.json").read_text(encoding="utf-8"))
    if len(together) != len(alone):
        return f"{len(together)} answers for {len(alone)} queries"
    moved = [row["query_id"] for row, hits in zip(together, alone, strict=True) if row["hits"] != hits]
    return f"{moved} got other hits than alone" if moved else None


def _tempscaled(tmp: Path, context: Context) -> None:
    _corpus(tmp, [(f"d{i}", " ".join(_WORDS[i:])) for i in range(4)])
    _run(tmp, ["tempscale", "save", "-m", "{tiny}", "--t", "0.7", "-o", "ts", "--device", "cpu"], context)


def _int8_recorded(tmp: Path, output: str) -> str | None:
    settings = json.loads((tmp / "e" / "manifest.json").read_text(encoding="utf-8"))["settings"]
    return None if settings.get("precision") == "int8" else f"the folder records {settings.get('precision')!r}"


CASES = [
    Case(
        "search-a-query-among-others-answers-as-alone",
        "62.1",
        ["search", "i", "--queries", "q.jsonl", "--json", "--passages", "1"],
        0,
        None,
        _alone,
        _same_as_alone,
    ),
    Case(
        "encode-int8-with-a-saved-tempscale",
        "62.5",
        ["encode", "-d", "c.jsonl", "-o", "e", "-m", "ts", "--precision", "int8", "--long", "truncate"],
        0,
        "embedded 4 new documents",
        _tempscaled,
        _int8_recorded,
    ),
]
