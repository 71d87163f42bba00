"""Writing a folder of results as one unit (`lengthwise.core.output_set`), used by `audit`, `report` and `eval`.

Moved here from the audit room with the module (issue 13 item 13); each test failed before its fix.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lengthwise.core import output_set
from lengthwise.core.output_set import InterruptGuard, check_output_target, write_output_set


@pytest.fixture
def python_sigint():
    """Python's own SIGINT handler (KeyboardInterrupt) for the test, whatever the test process inherited: a suite
    launched in the background (`nohup … &` from a script) starts with SIGINT ignored. Restored afterwards."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


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


def test_sigint_during_the_swap_is_deferred_not_lost(tmp_path: Path, monkeypatch, python_sigint) -> None:
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


def test_a_swallowed_sigint_is_raised_at_the_next_checkpoint(python_sigint) -> None:
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


def _ignoring_sigint(code: str) -> subprocess.CompletedProcess[str]:
    """Run `code` in a child Python that, like a background job, inherited SIGINT as ignored."""
    return subprocess.run(
        [sys.executable, "-c", code],
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_an_inherited_ignore_of_sigint_is_honoured(tmp_path: Path) -> None:
    # InterruptGuard used to install its handler over SIG_IGN: Ctrl-C sent to a nohup'd audit raised KeyboardInterrupt
    code = f"""
import os, signal, time
from pathlib import Path
from lengthwise.core import output_set
from lengthwise.core.output_set import InterruptGuard, write_output_set
assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
with InterruptGuard() as guard:
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.05)
    guard.check()
out = Path({str(tmp_path / "run")!r})
write_output_set(out, {{"audit.json": b"old"}}, {{"audit.json"}}, what="an audit")
real = output_set._exchange
def exchange(a, b):
    os.kill(os.getpid(), signal.SIGINT)
    return real(a, b)
output_set._exchange = exchange
write_output_set(out, {{"audit.json": b"new"}}, {{"audit.json"}}, what="an audit")
assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
print("ignored", (out / "audit.json").read_bytes().decode())
"""
    run = _ignoring_sigint(code)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["ignored", "new"]


def test_the_signal_tests_pass_when_the_suite_inherits_an_ignored_sigint() -> None:
    # README command 2 launched in the background: the suite's own signal tests must not depend on the default
    tests = Path(__file__)
    code = (
        "import sys, pytest; sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', "
        f"{str(tests)!r}, '-k', 'sigint and not inherit']))"
    )
    run = _ignoring_sigint(code)
    assert run.returncode == 0, run.stdout[-2000:]
    assert "2 passed" in run.stdout
