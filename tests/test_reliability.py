"""The reliability cases of docs/reliability.md as pytest cases, under the ``reliability`` marker.

Each case starts the real `lengthwise` command in a fresh folder (`scripts/reliability.py`), so the whole set takes
about 30 minutes on 2 cores: it is deselected unless asked for, ``pytest -m reliability``. With
``LENGTHWISE_RELIABILITY_OUT=FILE`` the outcomes are also written to FILE, and
``python scripts/reliability.py --render FILE --write-docs`` draws the table in docs/reliability.md from them.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
sys.path.insert(0, str(SCRIPTS))  # the cases live beside the script that renders them

from reliability import load_cases, outcome_row, run_case  # noqa: E402
from reliability_cases import Context, Outcome  # noqa: E402

CASES = load_cases()


@pytest.fixture(scope="module")
def context() -> Context:
    return Context.build()


@pytest.fixture(scope="module")
def outcomes() -> Iterator[list[Outcome]]:
    done: list[Outcome] = []
    yield done
    target = os.environ.get("LENGTHWISE_RELIABILITY_OUT")
    if target and done:
        Path(target).write_text(json.dumps([outcome_row(o) for o in done], indent=1), encoding="utf-8")


@pytest.mark.reliability
@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_reliability_case(case, context: Context, outcomes: list[Outcome]) -> None:
    outcome = run_case(case, context)
    outcomes.append(outcome)
    assert outcome.verdict == "ok", f"{outcome.verdict}: {outcome.message}"
