"""A long-document choice saved before `top_k` became `best_windows` (issue 47: `--top-k` is documents per query on
every command) is read under today's name wherever it was saved: beside a model, in an encode manifest, in an index."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lengthwise.longdoc.config import LongDocConfig, LongDocError
from lengthwise.longdoc.persist import SETTINGS_FILE, read_longdoc_settings, write_settings
from lengthwise.longdoc.storage.store import current_settings


def test_a_config_saved_with_top_k_reads_as_best_windows(tmp_path: Path) -> None:
    config = LongDocConfig(strategy="multi-vector", window=32, stride=16, best_windows=3)
    write_settings(tmp_path, config)
    saved = json.loads((tmp_path / SETTINGS_FILE).read_text())
    assert "best_windows" in saved["config"] and "top_k" not in saved["config"]
    saved["config"]["top_k"] = saved["config"].pop("best_windows")  # as 0.1 wrote it
    (tmp_path / SETTINGS_FILE).write_text(json.dumps(saved))
    assert read_longdoc_settings(tmp_path) == config


def test_an_encode_manifest_with_top_k_resumes_as_one_written_now() -> None:
    config = LongDocConfig(strategy="multi-vector", window=24, best_windows=2)
    old = {k: v for k, v in config.to_dict().items() if k != "best_windows"} | {"top_k": 2}
    assert current_settings({"engine": "local", "long": old}) == {"runner": "local", "long": config.to_dict()}
    assert LongDocConfig.from_dict(current_settings({"long": old})["long"]).scoring.best_windows == 2


def test_an_unknown_setting_is_still_refused_in_one_line() -> None:
    with pytest.raises(LongDocError, match="unknown long-document settings") as refused:
        LongDocConfig.from_dict({"strategy": "multi-vector", "top_q": 2})
    assert "\n" not in str(refused.value)
