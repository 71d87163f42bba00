from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from lengthwise.core.results import environment, write_json_atomic


def test_write_json_atomic_replaces_whole_file(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "r.json"
    write_json_atomic(path, {"a": 1})
    write_json_atomic(path, {"b": [1, 2]})
    assert json.loads(path.read_text(encoding="utf-8")) == {"b": [1, 2]}
    assert [p.name for p in path.parent.iterdir()] == ["r.json"]  # no temporary file left behind


def test_failed_write_keeps_the_previous_file(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    write_json_atomic(path, {"ok": True})
    with pytest.raises(ValueError):
        write_json_atomic(path, {"bad": float("nan")})
    assert json.loads(path.read_text(encoding="utf-8")) == {"ok": True}
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_written_files_are_readable_by_others(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        path = write_json_atomic(tmp_path / "r.json", {})
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_environment_lists_versions() -> None:
    env = environment()
    assert env["packages"]["torch"] and env["packages"]["sentence-transformers"]
