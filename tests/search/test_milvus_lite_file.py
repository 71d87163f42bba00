"""A Milvus Lite path as `_milvus_store.connect` opens it (issue 62, items 3, 4, 6 and 10): what is there is checked
before the engine starts (a user's SQLite database or text file, a folder, a missing folder are refused in one line
naming what they are, and left as they were), one process at a time holds the database (a second, lengthwise or
another program, is refused in one line while the first keeps it), the engine's own log lines stay out of the
terminal (its error is named in the message), and milvus-lite's import says nothing."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pymilvus")
pytest.importorskip("milvus_lite")

from lengthwise.core.errors import SettingError
from lengthwise.search.milvus import lite, store

CONNECT = "from lengthwise.search.milvus.store import connect"
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
HOLD = """
import sys
from pathlib import Path
if sys.argv[2] == "lengthwise":
    from lengthwise.search.milvus.store import connect
    client = connect(sys.argv[1])
else:  # another program: pymilvus itself
    import warnings
    warnings.simplefilter("ignore")
    from pymilvus import MilvusClient
    client = MilvusClient(sys.argv[1])
client.create_collection("kept", dimension=4)
print("held", flush=True)
sys.stdin.read()  # until the test closes our stdin
print(client.list_collections(), flush=True)
"""


def _sqlite(path: Path) -> bytes:
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE users (id INTEGER, name TEXT)")
        db.execute("INSERT INTO users VALUES (1, 'ann')")
    return path.read_bytes()


def _refused(uri: Path, match: str) -> str:
    with pytest.raises(SettingError, match=match) as refused:
        store.connect(str(uri))
    message = str(refused.value)
    assert "\n" not in message and "another process may have" not in message
    return message


def test_a_users_sqlite_database_or_text_file_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    """Issue 62.3: Milvus Lite 2.5.1 keeps its database in SQLite, so it added its tables to a user's SQLite file
    (and exited 0); a text file ended in "another process may have this database open"."""
    kept = {tmp_path / "app.db": _sqlite(tmp_path / "app.db"), tmp_path / "notes.db": b"my notes\n"}
    (tmp_path / "notes.db").write_bytes(kept[tmp_path / "notes.db"])
    _refused(tmp_path / "app.db", r"a SQLite database without Milvus Lite's tables \(users\).*nothing was written")
    _refused(tmp_path / "notes.db", r"not a SQLite database.*nothing was written")
    assert {path: path.read_bytes() for path in kept} == kept
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db", "notes.db"]  # no lock file left beside them


def test_a_database_milvus_lite_made_and_an_empty_file_are_opened(tmp_path: Path) -> None:
    made = tmp_path / "made.db"
    script = f"{CONNECT}\nconnect({str(made)!r}).create_collection('c', dimension=4)"
    subprocess.run([sys.executable, "-c", script], check=True, env=ENV, capture_output=True, timeout=120)
    assert store.connect(str(made)).list_collections() == ["c"]
    (tmp_path / "empty.db").touch()  # nothing in it to lose
    assert store.connect(str(tmp_path / "empty.db")).list_collections() == []


@pytest.mark.parametrize(
    ("where", "match"),
    [
        ("folder.db/", r"a folder, not a Milvus Lite database file"),
        ("missing/m.db", r"no folder .*missing; make it first"),
        ("file/m.db", r"/file is a file, not a folder; give a path in a folder"),
        ("a" * 34 + ".db", r"at most 36 letters"),
    ],
)
def test_each_path_milvus_lite_cannot_open_is_named_in_one_line(
    tmp_path: Path, where: str, match: str, capfd: pytest.CaptureFixture[str]
) -> None:
    """Issue 62.6: each of these said "another process may have this Milvus Lite database open", after the engine's
    own ``E2026… Init milvus failed`` lines."""
    (tmp_path / "folder.db").mkdir()
    (tmp_path / "file").write_text("x")
    _refused(tmp_path / where.rstrip("/"), match)
    assert not (tmp_path / "missing").exists()
    err = capfd.readouterr().err
    assert "Init milvus failed" not in err and "Start milvus-lite failed" not in err, err


def test_a_folder_no_file_can_be_made_in_is_named() -> None:
    if not Path("/proc/self").is_dir():
        pytest.skip("no /proc here")
    _refused(Path("/proc/x.db"), r"cannot make its lock file /proc/x\.db\.lengthwise\.lock")


def test_the_engines_own_error_is_named_and_its_log_lines_kept_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """A failure only the engine sees: its own error line, not its log, is what the user reads."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "milvus").write_text("#!/bin/sh\necho 'E20261205 06:58:55.020522  6837 storage.cpp:65] [SERVER][Open]"
                                 "[milvus][]Open storage failed, err: the disk is on fire' >&2\nexit 1\n")  # fmt: skip
    (fake / "milvus").chmod(0o755)
    monkeypatch.setenv("BIN_PATH", str(fake))  # milvus-lite 2.x starts the engine found there
    monkeypatch.setattr(lite.time, "sleep", lambda seconds: None)
    if store.engine_kind("m.db") != "lite":
        pytest.skip("Milvus Lite 2.x starts an engine binary; 3.x runs in this process")
    _refused(tmp_path / "m.db", r"Milvus Lite could not open it \(Open storage failed, err: the disk is on fire\)")
    err = capfd.readouterr().err
    assert "E2026" not in err and "Start milvus-lite failed" not in err, err


def _holder(uri: Path, who: str) -> subprocess.Popen[str]:
    env = {**ENV, "GLOG_log_dir": str(uri.parent)}  # pymilvus alone would leave its engine's log in /tmp
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(uri), who], env=env, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held", holder.communicate()
    return holder


@pytest.mark.parametrize("who", ["lengthwise", "another program"])
def test_a_second_process_is_refused_while_one_holds_the_database(
    tmp_path: Path, who: str, capfd: pytest.CaptureFixture[str]
) -> None:
    """Issue 62.4: while one process held the database, a second printed "Open … failed, the file has been opened by
    another program" and then opened it anyway (Milvus Lite removes its lock file when a start finds it held, and
    the next try started a second engine on the same file: two builds into one database both exited 0, the first
    one's collection dropped). Now the second is refused in one line, and the first keeps its database."""
    uri = tmp_path / "m.db"
    holder = _holder(uri, who)
    try:
        engine_lock = tmp_path / ".m.db.lock"  # Milvus Lite 2.x's own lock file
        had_engine_lock = engine_lock.exists()
        expected = (
            rf"open in another process \(pid {holder.pid}\)" if who == "lengthwise" else "open in another program"
        )
        _refused(uri, expected + r".*one process at a time.*Milvus server")
        assert engine_lock.exists() == had_engine_lock  # the first process's lock left in place
        assert "Open " not in capfd.readouterr().err
    finally:
        out, err = holder.communicate("", timeout=60)
    assert holder.returncode == 0 and "kept" in out, err


def test_milvus_lite_is_imported_without_its_pkg_resources_warning(tmp_path: Path) -> None:
    """Issue 62.10: milvus-lite's __init__ imports pkg_resources, which warns on every Milvus command."""
    script = f"{CONNECT}\nconnect({str(tmp_path / 'm.db')!r})"
    done = subprocess.run([sys.executable, "-W", "default", "-c", script], env=ENV, capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "pkg_resources" not in done.stderr, done.stderr


def test_a_start_that_finds_the_engine_held_is_not_tried_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where another program takes the database between the check and the start, the engine says so ("opened by
    another program") and removes that program's lock file: a second try would start a second engine on the file."""
    import pymilvus

    uri = tmp_path / "m.db"
    holder = _holder(uri, "another program")
    starts: list[str] = []
    client = pymilvus.MilvusClient

    def counted(where: str) -> object:
        starts.append(where)
        return client(where)

    monkeypatch.setattr(lite, "_engine_holds", lambda uri: False)  # the program came after the check
    monkeypatch.setattr(pymilvus, "MilvusClient", counted)
    try:
        _refused(uri, r"open in another program; .*one process at a time")
        assert len(starts) == 1
    finally:
        holder.communicate("", timeout=60)
