"""Core reads a live TempScale patch only through the `ModelPatch` protocol (`describe()`), issue 22."""

from __future__ import annotations

import pytest

from lengthwise.core.models import ModelPatch, live_patch, model_fingerprint

pytestmark = pytest.mark.usefixtures("one_thread")


def test_the_fingerprint_and_the_window_cache_key_read_the_patch_through_describe(tiny_model) -> None:
    from lengthwise.longdoc import LongEncoder
    from lengthwise.tempscale import TempScaleConfig, apply_tempscale, remove_tempscale

    assert live_patch(tiny_model) is None and model_fingerprint(tiny_model, "tiny")["tempscale"] is None
    encoder = LongEncoder(tiny_model, strategy="chunk-mean", window=16)
    plain = encoder._head("document", tokens=False)
    apply_tempscale(tiny_model, TempScaleConfig(t=0.8))
    try:
        patch = live_patch(tiny_model)
        assert isinstance(patch, ModelPatch)
        assert (
            model_fingerprint(tiny_model, "tiny")["tempscale"] == patch.describe() == TempScaleConfig(t=0.8).to_dict()
        )
        assert encoder._head("document", tokens=False) != plain  # never a stale vector
    finally:
        remove_tempscale(tiny_model)
    assert encoder._head("document", tokens=False) == plain


def test_an_object_without_describe_is_not_read_as_a_patch() -> None:
    class Model:
        lengthwise_tempscale = object()  # a foreign attribute of the same name

    assert live_patch(Model()) is None
