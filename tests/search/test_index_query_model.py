"""The query model of an index opened without `lengthwise.load_model` (issue 47): a model with a saved TempScale
loads plain by default, and its hooks leave the weights (and so their hash) alone, so the index also checks the
TempScale it recorded at build and refuses, in one line naming the loader, a model that would embed queries
otherwise than the documents."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lengthwise.core.errors import SettingError

from .conftest import encode_windows, haystack_rows

QUERIES = ["the river and the old bridge", "a keyboard with a broken key"]


@pytest.fixture(scope="module")
def tempscaled_index(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An index of documents encoded by the tiny BERT saved with a TempScale (t = 0.7), built with the model loaded
    as saved (as `lengthwise index build` does)."""
    from lengthwise.facade import LongIndex, load_model
    from lengthwise.tempscale import save_tempscaled

    folder = tmp_path_factory.mktemp("tempscaled")
    assert save_tempscaled(tiny_model_dir, 0.7, folder / "model") is None
    encoded = encode_windows(folder, haystack_rows(8), folder / "model")
    LongIndex.build(encoded, folder / "idx", quantize="none", engine="faiss", load_model=load_model)
    return folder / "idx"


def test_an_index_records_the_tempscale_it_was_built_with(tempscaled_index: Path) -> None:
    from lengthwise.facade import LongIndex

    recorded = LongIndex.open(tempscaled_index, load_model=None).settings["model"]
    assert recorded["tempscale"] is not None and "0.7" in str(recorded["tempscale"])


def test_a_plain_loaded_query_model_is_refused_naming_the_loader(tempscaled_index: Path) -> None:
    from lengthwise.facade import LongIndex

    index = LongIndex.open(tempscaled_index)  # no loader: the recorded model loads plain, without its TempScale
    with pytest.raises(SettingError, match=r"load_model=lengthwise\.load_model") as refused:
        index.embed_queries(QUERIES)
    assert "\n" not in str(refused.value) and "TempScale" in str(refused.value)


def test_a_plain_model_passed_in_is_refused_too(tempscaled_index: Path) -> None:
    from lengthwise.core.models import load_plain_model
    from lengthwise.facade import LongIndex

    folder = LongIndex.open(tempscaled_index, load_model=None).settings["encode_settings"]["model"]
    with pytest.raises(SettingError, match="TempScale"):
        LongIndex.open(tempscaled_index, model=load_plain_model(folder))


def test_the_model_loaded_as_saved_embeds_queries_as_the_build_did(tempscaled_index: Path) -> None:
    import lengthwise as lw
    from lengthwise.facade import LongIndex

    opened = LongIndex.open(tempscaled_index, load_model=lw.load_model)
    found = opened.embed_queries(QUERIES)
    folder = opened.settings["encode_settings"]["model"]
    rebuilt = LongIndex.open(tempscaled_index, model=lw.load_model(folder)).embed_queries(QUERIES)
    np.testing.assert_allclose(np.asarray(found), np.asarray(rebuilt), atol=1e-6)
    assert opened.search(QUERIES, k=3, mode="dense")[0]  # it answers


# --- issue 62.7, 62.8: the refusal names the model given, the precision, and advice the caller can follow ----------


def test_search_with_another_model_names_that_model_and_gives_cli_advice(
    tempscaled_index: Path, tiny_model_dir: Path
) -> None:
    """`search IDX -m PLAIN` (the base model, without the TempScale saved beside the indexed one) named the recorded
    model instead of PLAIN and told a command-line user to "open the index with load_model=lengthwise.load_model"."""
    from typer.testing import CliRunner

    from lengthwise.cli import app

    run = CliRunner().invoke(app, ["search", str(tempscaled_index), "-q", "river", "-m", str(tiny_model_dir)])
    said = " ".join(run.output.split())
    assert run.exit_code == 2 and "Traceback" not in run.output
    assert f"--model {tiny_model_dir}" in said or f"--model '{tiny_model_dir}'" in said, said
    assert "load_model" not in said and "this model has TempScale none" in said
    assert str(tempscaled_index.parent / "model") in said and "leave the model out" in said


def test_a_model_passed_in_is_named_in_the_refusal(tempscaled_index: Path, tiny_model_dir: Path) -> None:
    from lengthwise.core.models import load_plain_model
    from lengthwise.facade import LongIndex

    with pytest.raises(SettingError, match=rf"^model='{tiny_model_dir}': this model has TempScale none"):
        LongIndex.open(tempscaled_index, model=str(tiny_model_dir))
    with pytest.raises(SettingError, match=rf"^model='{tiny_model_dir}': this model has TempScale none"):
        LongIndex.open(tempscaled_index, model=load_plain_model(tiny_model_dir))


@pytest.fixture(scope="module")
def plain_index(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An index of documents encoded in fp32 by the tiny BERT (no TempScale)."""
    from lengthwise.facade import LongIndex

    folder = tmp_path_factory.mktemp("plain")
    LongIndex.build(encode_windows(folder, haystack_rows(6), tiny_model_dir), folder / "idx", quantize="none",
                    engine="faiss")  # fmt: skip
    return folder / "idx"


def test_the_same_model_at_another_precision_is_refused_as_such(plain_index: Path, tiny_model_dir: Path) -> None:
    """It read "built with weights 80bc…, this model has 231e…": the precision, and how to query at the index's."""
    import lengthwise as lw
    from lengthwise.facade import LongIndex

    with pytest.raises(SettingError) as refused:
        LongIndex.open(plain_index, model=lw.load_model(tiny_model_dir, precision="int8"))
    said = str(refused.value)
    assert "\n" not in said and said.startswith(f"model='{tiny_model_dir}': ")
    assert "this model computes in int8 and the index's documents were embedded in fp32" in said
    assert "load it at fp32, or leave the model out" in said and "set_query_precision" in said
    opened = LongIndex.open(plain_index, model=lw.load_model(tiny_model_dir))  # as the message says
    opened.set_query_precision("int8")
    assert opened.search(QUERIES, k=2, mode="dense")[0]


def test_auto_refused_on_a_half_or_int8_index_says_what_auto_means_here(
    plain_index: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--precision auto` on an int8 index was refused without saying what auto resolves to on the device: the
    refusal names it. On a CPU auto means the recorded precision (nothing refused); on a GPU (told here) bf16."""
    from lengthwise.core import precision as precision_module
    from lengthwise.core.precision import Precision
    from lengthwise.facade import LongIndex

    opened = LongIndex.open(plain_index)
    opened.settings["encode_settings"]["precision"] = "int8"
    opened.set_query_precision("auto")  # on a CPU: as recorded
    assert opened.query_precision is None and opened.queries_embedded_at == "int8"
    monkeypatch.setattr(precision_module, "device_type", lambda device: "cuda")
    monkeypatch.setattr(precision_module, "_auto", lambda kind, device: Precision.BF16)
    monkeypatch.setattr(precision_module, "_check_on", lambda wanted, kind, device: None)
    with pytest.raises(SettingError) as refused:
        opened.set_query_precision("auto")
    assert str(refused.value) == (
        "precision='auto': auto means bf16 on this device (cuda); the index's documents were embedded in int8 "
        "and its queries can be only so; leave it out or give int8"
    )
