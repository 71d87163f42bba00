"""`lengthwise.core.progress`: a bar on a terminal, plain lines elsewhere, at most one per interval (issue 62.11)."""

from __future__ import annotations

import io
import sys

import pytest
from tqdm.std import tqdm

from lengthwise.core.errors import SettingError
from lengthwise.core.progress import (
    INTERVAL,
    INTERVAL_VARIABLE,
    ProgressLines,
    ProgressStages,
    begin_stage,
    progress_bar,
    progress_interval,
    progress_mode,
)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_interval_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(INTERVAL_VARIABLE, raising=False)
    assert progress_interval() == INTERVAL == 30.0
    monkeypatch.setenv(INTERVAL_VARIABLE, "2.5")
    assert progress_interval() == 2.5
    for bad in ("-1", "soon", "nan"):
        monkeypatch.setenv(INTERVAL_VARIABLE, bad)
        with pytest.raises(SettingError, match=f"{INTERVAL_VARIABLE}=.*seconds ≥ 0"):
            progress_interval()


def test_a_bar_on_a_terminal_lines_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert progress_mode(True) == "lines" and progress_mode(False) is None
    monkeypatch.setattr(sys, "stderr", _Terminal())
    assert progress_mode(True) == "bar"
    assert progress_mode(True, processes=2) == "lines"  # several processes' bars would overwrite each other
    bar = progress_bar("encode", 3, "bar")
    assert isinstance(bar, tqdm) and not isinstance(bar, ProgressLines)
    bar.close()
    assert isinstance(progress_bar("encode", 3, "lines", interval=60), ProgressLines)
    quiet = progress_bar("encode", 3, None)
    assert quiet.disable


def test_lines_wait_for_the_interval(capsys: pytest.CaptureFixture[str]) -> None:
    with ProgressLines("encode", 100, interval=3600) as lines:
        for _ in range(100):
            lines.update(1)
    log = capsys.readouterr().err.splitlines()
    assert len(log) == 2  # one when it starts, none within the hour, one at the end
    assert log[0].startswith("encode: 0/100 documents (0%)") and log[1].startswith("encode done: 100/100 documents")


def test_resumed_work_does_not_count_in_the_rate(capsys: pytest.CaptureFixture[str]) -> None:
    with ProgressLines("encode", 10, initial=8, interval=0) as lines:
        assert lines.format_dict["initial"] == 8
        lines.update(2)
    assert capsys.readouterr().err.splitlines()[0].startswith("encode: 8/10 documents (80%)")


def test_stages_are_named_by_the_job(capsys: pytest.CaptureFixture[str]) -> None:
    stages = ProgressStages("indexing windows", "windows", interval=0)
    for done in (5, 10):
        stages(done, 10)
    begin_stage(stages, "indexing the text by window", "documents")
    stages(4, 4)
    stages(2, 4)  # the count goes back: a stage the job did not name keeps the name before it
    stages.close(stopped=True)
    begin_stage(print, "ignored", "by a plain callback")  # nothing to tell
    log = [line.split(",")[0] for line in capsys.readouterr().err.splitlines()]
    assert log == [
        "indexing windows: 0/10 windows (0%)", "indexing windows: 5/10 windows (50%)",
        "indexing windows: 10/10 windows (100%)", "indexing windows done: 10/10 windows (100%)",
        "indexing the text by window: 0/4 documents (0%)", "indexing the text by window: 4/4 documents (100%)",
        "indexing the text by window done: 4/4 documents (100%)",
        "indexing the text by window: 0/4 documents (0%)", "indexing the text by window: 2/4 documents (50%)",
        "indexing the text by window stopped: 2/4 documents (50%)",
    ]  # a line when each stage starts, one a step (interval 0), and its last  # fmt: skip
