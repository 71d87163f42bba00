from __future__ import annotations

from pathlib import Path

import pytest

from lengthwise.core import models
from lengthwise.core.defaults import DEFAULT_MODEL
from lengthwise.core.errors import SettingError
from lengthwise.core.models import ModelLoadError, load_plain_model, model_fingerprint, resolve_model_path


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(models, "_hub_reachable", lambda timeout=3.0: False)
    monkeypatch.setattr(models, "_hub_cache_dir", lambda model_id: None)


def test_local_directory_resolves_to_itself(tiny_model_dir: Path) -> None:
    assert resolve_model_path(tiny_model_dir) == str(tiny_model_dir.resolve())


def test_default_model_falls_back_to_installed_package_offline(offline: None, minilm_path: str) -> None:
    assert resolve_model_path(DEFAULT_MODEL) == minilm_path
    assert resolve_model_path("all-MiniLM-L6-v2") == minilm_path


def test_default_model_uses_hub_id_when_reachable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(models, "_hub_reachable", lambda timeout=3.0: True)
    assert resolve_model_path(DEFAULT_MODEL) == DEFAULT_MODEL


def test_unknown_id_offline_says_what_to_do(offline: None) -> None:
    with pytest.raises(ModelLoadError, match="pass a local model directory"):
        resolve_model_path("someone/unknown-model")


def test_file_instead_of_directory(tmp_path: Path) -> None:
    path = tmp_path / "model.bin"
    path.write_bytes(b"x")
    with pytest.raises(ModelLoadError, match="is a file"):
        resolve_model_path(path)


def test_broken_directory_gives_one_line_error(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ModelLoadError, match=r"^model='.+': could not load it: ") as info:
        load_plain_model(tmp_path, device="cpu")
    assert "\n" not in str(info.value)


def test_max_length_is_bounded_by_positions(tiny_model_dir: Path) -> None:
    model = load_plain_model(tiny_model_dir, device="cpu", max_seq_length=128)
    assert model.max_seq_length == 128
    with pytest.raises(SettingError, match="max_length=129: exceeds the model's 128 position embeddings; use at most"):
        load_plain_model(tiny_model_dir, device="cpu", max_seq_length=129)


def test_trust_remote_code_is_off_by_default(monkeypatch: pytest.MonkeyPatch, tiny_model_dir: Path) -> None:
    seen = {}
    real = models.SentenceTransformer

    def spy(*args, **kwargs):
        seen.update(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(models, "SentenceTransformer", spy)
    load_plain_model(tiny_model_dir, device="cpu")
    assert seen["trust_remote_code"] is False


def test_fingerprint_identifies_weights(tiny_model, minilm) -> None:
    a = model_fingerprint(tiny_model, "tiny")
    assert a == model_fingerprint(tiny_model, "tiny")
    assert a["weights_sha256_16"] != model_fingerprint(minilm, "minilm")["weights_sha256_16"]
    assert a["architecture"] == "BertModel" and a["pooling"]["pooling_mode"] == "mean"


def test_fingerprint_records_a_live_tempscale(tiny_model) -> None:
    from lengthwise.tempscale import tempscale

    assert model_fingerprint(tiny_model, "tiny")["tempscale"] is None
    with tempscale(tiny_model, 0.8):
        assert model_fingerprint(tiny_model, "tiny")["tempscale"]["t"] == 0.8
    assert model_fingerprint(tiny_model, "tiny")["tempscale"] is None
