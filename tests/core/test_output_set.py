"""Writing a folder of results as one unit (`lengthwise.core.output_set`), used by `audit`, `report` and `eval`.

Moved here from the audit room with the module (issue 13 item 13); each test failed before its fix.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from lengthwise.core import output_set
from lengthwise.core.output_set import InterruptGuard, check_output_target, write_output_set


def test_a_failure_while_writing_keeps_the_old_set(tmp_path: Path, monkeypatch) -> None:
    out = tmp_path / "run"
    output_set.write_output_set(
        out, {"audit.json": b"old", "report.html": b"old page"}, {"audit.json", "report.html"}, what="an audit"
    )
    real_rename = os.rename

    def crash(src, dst):  # the moment the set would be swapped in
        raise OSError("disk full")

    monkeypatch.setattr(output_set, "_exchange", lambda a, b: False)
    monkeypatch.setattr(output_set.os, "rename", crash)
    with pytest.raises(OSError, match="disk full"):
        output_set.write_output_set(
            out, {"audit.json": b"new", "report.html": b"new"}, {"audit.json", "report.html"}, what="an audit"
        )
    monkeypatch.setattr(output_set.os, "rename", real_rename)
    assert (out / "audit.json").read_bytes() == b"old" and (out / "report.html").read_bytes() == b"old page"
    assert [p.name for p in tmp_path.iterdir()] == ["run"]  # the staging folder is cleaned up


def test_sigint_during_the_swap_is_deferred_not_lost(tmp_path: Path, monkeypatch) -> None:
    out = tmp_path / "run"
    real = output_set._exchange

    def exchange_with_a_ctrl_c(a: Path, b: Path) -> bool:
        os.kill(os.getpid(), signal.SIGINT)  # arrives mid-swap
        return real(a, b)

    output_set.write_output_set(out, {"audit.json": b"old"}, {"audit.json"}, what="an audit")
    monkeypatch.setattr(output_set, "_exchange", exchange_with_a_ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        output_set.write_output_set(out, {"audit.json": b"new"}, {"audit.json"}, what="an audit")
    assert (out / "audit.json").read_bytes() == b"new"  # the swap finished before the interrupt was raised


def test_a_swallowed_sigint_is_raised_at_the_next_checkpoint() -> None:
    with InterruptGuard() as guard:
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.01)
        except KeyboardInterrupt:
            pass  # what a finaliser does ("Exception ignored in …")
        with pytest.raises(KeyboardInterrupt):
            guard.check()


def test_hidden_files_and_folders_count_as_the_users(tmp_path: Path) -> None:
    """A `.git` or `.env` inside --out is the user's: the folder is refused, nothing is moved or deleted."""
    for name, make in ((".git", Path.mkdir), (".env", lambda p: p.write_text("SECRET=1", encoding="utf-8"))):
        out = tmp_path / f"out{name}"
        out.mkdir()
        make(out / name)
        with pytest.raises(ValueError, match=rf"holds files that are not part of an audit's output \({name}\)"):
            write_output_set(out, {"audit.json": b"{}"}, {"audit.json"}, what="an audit")
        assert (out / name).exists()


def test_the_current_directory_is_never_swapped(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="current directory"):
        check_output_target(Path("."), {"audit.json"}, what="an audit")
    with pytest.raises(ValueError, match="current directory"):
        check_output_target(tmp_path.parent, {"audit.json"}, what="an audit")


def test_a_failure_between_the_two_fallback_renames_puts_the_old_set_back(tmp_path: Path, monkeypatch) -> None:
    """Without renameat2 the set is swapped by two renames; when the second fails, `out` was left missing (its
    old set hidden in a staging folder). Now the first rename is undone."""
    names = {"audit.json", "report.html"}
    out = tmp_path / "run"
    write_output_set(out, {"audit.json": b"old", "report.html": b"old page"}, names, what="an audit")
    real_rename = os.rename
    failed: list[Path] = []

    def second_fails(src: str | Path, dst: str | Path) -> None:
        if Path(dst) == out and not failed:  # the new set moving in, after the old one moved aside
            failed.append(Path(src))
            raise OSError("disk full")
        real_rename(src, dst)

    monkeypatch.setattr(output_set, "_exchange", lambda a, b: False)
    monkeypatch.setattr(output_set.os, "rename", second_fails)
    with pytest.raises(OSError, match="disk full"):
        write_output_set(out, {"audit.json": b"new", "report.html": b"new"}, names, what="an audit")
    assert failed and failed[0].name.startswith(".lengthwise-run-new-")  # the fault hit the second rename
    assert (out / "audit.json").read_bytes() == b"old" and (out / "report.html").read_bytes() == b"old page"
    assert [p.name for p in tmp_path.iterdir()] == ["run"]


def test_the_message_names_what_wrote_the_folder(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(ValueError, match=r"not part of an evaluation's output \(notes.txt\).*that an evaluation wrote"):
        check_output_target(tmp_path, {"results.json"}, what="an evaluation")
