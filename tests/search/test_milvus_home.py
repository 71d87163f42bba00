"""Two processes, each with an embedded Milvus Lite of its own, started about together: Milvus Lite 2.5.1 makes
``~/.cache/milvus`` when it starts and removes it when it stops, so under one HOME one of them refused every
collection ("Mmap manager has not been init"; seen when two test suites ran at once). `_milvus_store.connect` starts
each server with a HOME of its own."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("pymilvus")
pytest.importorskip("milvus_lite")
psutil = pytest.importorskip("psutil")

from lengthwise.search.milvus import store  # noqa: E402

MAKE_ONE = """
import sys
from lengthwise.search.milvus.store import connect
client = connect(sys.argv[1])
client.create_collection("t", dimension=8)
client.insert("t", [{"id": 1, "vector": [0.1] * 8}])
client.close()
print("made")
"""


def test_the_server_starts_with_a_home_of_its_own_and_ours_is_unchanged(tmp_path: Path) -> None:
    ours = os.environ.get("HOME")
    client = store.connect(str(tmp_path / "one.db"))
    try:
        servers = [
            p for p in psutil.Process().children(recursive=True) if str(tmp_path / "one.db") in " ".join(p.cmdline())
        ]
        assert servers, "no Milvus Lite server process found for the database"
        home = servers[0].environ()["HOME"]
        assert home != ours and Path(home).name.startswith("lengthwise-milvus-home-")
        assert os.environ.get("HOME") == ours
    finally:
        client.close()


def test_the_engine_leaves_no_log_file_in_the_temporary_folder(tmp_path: Path, monkeypatch) -> None:
    """Milvus Lite's glog wrote ``milvus.<host>.<user>.log.INFO.<time>.<pid>`` (and a ``milvus.INFO`` link) into the
    system's temporary folder at every start and left them there (2,355 of them in this machine's /tmp)."""
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setenv("TMPDIR", str(temporary))  # where glog writes when no log folder is given
    monkeypatch.delenv("GLOG_log_dir", raising=False)
    client = store.connect(str(tmp_path / "quiet.db"))
    try:
        client.create_collection("t", dimension=8)
    finally:
        client.close()
    assert not [path.name for path in temporary.iterdir() if path.name.startswith("milvus")]
    assert "GLOG_log_dir" not in os.environ


@pytest.mark.slow
def test_two_processes_started_together_each_make_their_collection(tmp_path: Path) -> None:
    env = dict(os.environ, HOME=str(tmp_path / "shared-home"))  # both under one HOME, as two jobs of one user
    (tmp_path / "shared-home").mkdir()
    for lag in (0.0, 0.5, 1.0, 1.5, 2.0):  # the second starts as the first starts, works, or stops
        first = subprocess.Popen([sys.executable, "-c", MAKE_ONE, str(tmp_path / f"a{lag}.db")], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
        time.sleep(lag)
        second = subprocess.run([sys.executable, "-c", MAKE_ONE, str(tmp_path / f"b{lag}.db")], env=env,
                                capture_output=True, text=True, timeout=120)  # fmt: skip
        out, err = first.communicate(timeout=120)
        assert "made" in out, f"first at lag {lag}: {err[-500:]}"
        assert "made" in second.stdout, f"second at lag {lag}: {second.stderr[-500:]}"
