"""benchmarks/serve/serve.py: an arm's name becomes the server's flags."""

from __future__ import annotations

import importlib


def test_each_arm_names_its_servers_flags() -> None:
    serve = importlib.import_module("benchmarks.serve.serve")  # run from the repository root
    assert serve._arm_flags("default") == []
    assert serve._arm_flags("tokens=/t") == ["--tokens", "/t"]
    assert serve._arm_flags("depth=30+tokens=/t") == ["--token-depth", "30", "--tokens", "/t"]
    assert serve._arm_flags("2+precision=bf16") == ["--search-threads", "2", "--precision", "bf16"]
