"""`lengthwise serve`'s inputs checked before anything is served (issue 47): the API key file, the index folder, the
host, and the `[serve]` extra. None of these needs a running server; the key file's checks need no FastAPI at all.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from lengthwise.core.errors import SettingError
from lengthwise.service.config import KEY_FILE_MAX_BYTES, ServeConfig

KEY = "s3cret-key-for-tests-0123456789"
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}


def _key(path: Path | str, timeout: float = 10.0) -> Any:
    """`ServeConfig(api_key_file=path).api_key()` in a thread: its result, its error, or "hung" after `timeout`."""
    outcome: dict[str, Any] = {}

    def read() -> None:
        try:
            outcome["key"] = ServeConfig(api_key_file=Path(path)).api_key()
        except BaseException as error:  # MemoryError from /dev/zero on the old code, under a memory limit
            outcome["error"] = error

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    thread.join(timeout)
    return "hung" if thread.is_alive() else outcome.get("error", outcome.get("key"))


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_a_device_as_key_file_is_refused_unread() -> None:
    """/dev/zero was read without end (a hang, or MemoryError under a memory limit)."""
    error = _key("/dev/zero")
    assert isinstance(error, SettingError) and error.field == "api_key_file", error
    assert "not a regular file" in error.problem


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_as_key_file_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    """A FIFO with no writer blocked the open forever."""
    os.mkfifo(tmp_path / "key")
    error = _key(tmp_path / "key")
    if error == "hung":  # let the old code's blocked open return, so that the test run can end
        with open(tmp_path / "key", "w"):
            pass
    assert isinstance(error, SettingError) and "not a regular file" in error.problem, error


def test_a_large_file_as_key_file_is_refused_by_its_size_unread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file given by mistake (a model, a corpus) was read whole; now its size refuses it before any read."""
    big = tmp_path / "corpus.jsonl"
    big.write_bytes(KEY.encode() + b"\n" * (KEY_FILE_MAX_BYTES * 4))
    reads: list[int] = []
    real_read = os.read
    monkeypatch.setattr(os, "read", lambda fd, n: reads.append(n) or real_read(fd, n))
    error = _key(big)
    assert isinstance(error, SettingError) and f"{big.stat().st_size:,} bytes" in error.problem, error
    assert reads == []


def test_a_folder_as_key_file_is_refused(tmp_path: Path) -> None:
    error = _key(tmp_path)
    assert isinstance(error, SettingError) and error.field == "api_key_file", error


def test_a_small_key_file_is_read_and_its_readers_are_reported(tmp_path: Path) -> None:
    path = tmp_path / "key"
    path.write_text(f"  {KEY}\n", encoding="utf-8")
    path.chmod(0o600)
    config = ServeConfig(api_key_file=path)
    assert config.api_key() == KEY and not config.key_file_exposed()
    path.chmod(0o644)
    assert config.key_file_exposed() == (os.name == "posix")
    assert not ServeConfig().key_file_exposed()


def _serve(*args: str, block: str | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`lengthwise serve ARGS` in a subprocess, with module `block` made unimportable."""
    blocked = f"sys.modules[{block!r}] = None; " if block else ""
    code = f"import sys; {blocked}sys.argv[0:1] = ['lengthwise', 'serve']; from lengthwise.cli import main; main()"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=ENV, timeout=300,
                          cwd=cwd)  # fmt: skip


def _one_error(run: subprocess.CompletedProcess[str]) -> str:
    lines = (run.stdout + run.stderr).strip().splitlines()
    assert run.returncode == 2 and len(lines) == 1 and lines[0].startswith("error:"), run.stdout + run.stderr
    return lines[0]


@pytest.mark.parametrize("module", ["fastapi", "uvicorn"])
def test_serve_without_the_extra_says_which_to_install(tmp_path: Path, module: str) -> None:
    """A 41-line traceback ending in `No module named 'fastapi'` before; now one line, before the index is read."""
    line = _one_error(_serve(str(tmp_path / "missing"), block=module))
    assert module in line and "pip install 'lengthwise[serve]'" in line


def test_serve_of_a_file_says_it_is_not_a_folder(tmp_path: Path) -> None:
    """An existing file was called "no such folder"."""
    (tmp_path / "index.json").write_text("{}")
    line = _one_error(_serve(str(tmp_path / "index.json")))
    assert "not a folder" in line and "no such" not in line


def test_a_host_that_is_no_address_is_refused_without_a_warning_first(tmp_path: Path) -> None:
    """The "reachable from other machines" warning came before the host's own error."""
    line = _one_error(_serve(str(tmp_path / "missing"), "--host", "no-such-host.invalid"))
    assert line.startswith("error: --host") and "warning" not in line
