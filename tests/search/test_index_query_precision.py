"""The queries' precision apart from the documents' (issue 48): `set_query_precision`, `lengthwise search
--precision` and `lengthwise serve --precision`. An index embedded in fp32 may embed its queries in bf16, fp16 or
int8 (the model checked as recorded, then cast); an index embedded otherwise only as recorded; a model given to
`open` is never changed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from lengthwise.core.errors import SettingError
from lengthwise.core.precision import cpu_half_support

from .conftest import encode_windows, haystack_rows

pytestmark = pytest.mark.usefixtures("one_thread")

QUERIES = ["the river and the old bridge", "a keyboard with a broken key"]
runner = CliRunner()


@pytest.fixture(scope="module")
def index_dir(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An fp32 index of eight haystack documents, with its text (hybrid search)."""
    from lengthwise.facade import LongIndex

    folder = tmp_path_factory.mktemp("query-precision")
    encoded = encode_windows(folder, haystack_rows(8), tiny_model_dir)
    LongIndex.build(encoded, folder / "idx", quantize="none", engine="faiss")
    return folder / "idx"


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def test_int8_queries_on_an_fp32_index_come_from_the_checked_model_quantized(index_dir: Path) -> None:
    from lengthwise.core.precision import model_precision
    from lengthwise.facade import LongIndex

    plain = LongIndex.open(index_dir)
    fp32 = np.asarray(plain.embed_queries(QUERIES))
    index = LongIndex.open(index_dir)
    index.set_query_precision("int8")
    int8 = np.asarray(index.embed_queries(QUERIES))
    assert index.model is not None and model_precision(index.model) == "int8"
    assert not np.array_equal(int8, fp32)  # the precision asked for is the one that ran
    assert _cosines(int8, fp32).min() > 0.95  # the same queries, a little rounded
    hits = index.search(QUERIES, k=3, mode="hybrid")
    assert [len(row) for row in hits] == [3, 3]
    assert plain.query_precision is None and model_precision(plain.model) == "fp32"


@pytest.mark.skipif(
    not cpu_half_support()["bf16"],
    reason="this CPU has no native bf16 (AMX or AVX512-BF16), where bf16 is refused",
)
def test_bf16_queries_on_an_fp32_index_stay_close_to_fp32(index_dir: Path) -> None:
    from lengthwise.core.precision import model_precision
    from lengthwise.facade import LongIndex

    fp32 = np.asarray(LongIndex.open(index_dir).embed_queries(QUERIES))
    index = LongIndex.open(index_dir)
    index.set_query_precision("bf16")
    bf16 = np.asarray(index.embed_queries(QUERIES))
    assert model_precision(index.model) == "bf16" and bf16.dtype == np.float32
    assert not np.array_equal(bf16, fp32) and _cosines(bf16, fp32).min() > 0.99


def test_a_model_given_to_open_is_left_as_it_was(index_dir: Path, tiny_model_dir: Path) -> None:
    from lengthwise.core.models import load_plain_model
    from lengthwise.core.precision import model_precision
    from lengthwise.facade import LongIndex

    given = load_plain_model(str(tiny_model_dir), device="cpu")
    before = np.asarray(given.encode(QUERIES))
    index = LongIndex.open(index_dir, model=given)
    index.set_query_precision("int8")
    assert index.model is not given and model_precision(index.model) == "int8"
    assert model_precision(given) == "fp32"
    np.testing.assert_array_equal(np.asarray(given.encode(QUERIES)), before)


def test_the_query_precision_can_be_changed_again_and_back(index_dir: Path, tiny_model_dir: Path) -> None:
    from lengthwise.core.models import load_plain_model
    from lengthwise.core.precision import model_precision
    from lengthwise.facade import LongIndex

    fp32 = np.asarray(LongIndex.open(index_dir).embed_queries(QUERIES))
    int8 = LongIndex.open(index_dir)
    int8.set_query_precision("int8")
    expected = np.asarray(int8.embed_queries(QUERIES))
    given = load_plain_model(str(tiny_model_dir), device="cpu")
    loaded_first = LongIndex.open(index_dir)  # the model loaded, then changed in place at the first query
    loaded_first.set_query_precision("int8")
    loaded_first.embed_queries(QUERIES)
    for index in (LongIndex.open(index_dir, model=given), LongIndex.open(index_dir), loaded_first):
        for asked in ("int8", "int8", None, "fp32", "int8", None):
            index.set_query_precision(asked)
            found = np.asarray(index.embed_queries(QUERIES))
            np.testing.assert_array_equal(found, expected if asked == "int8" else fp32)
            assert model_precision(index.model) == (asked or "fp32")
    assert model_precision(given) == "fp32"


def test_the_recorded_precision_or_auto_on_a_cpu_changes_nothing(
    index_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--precision auto` for queries meant bf16 on a CPU with native bf16, where each bf16 query is its own forward
    and costs more than fp32 queries in batches (docs/serving.md, "Measured"): on a CPU it now means the recorded
    precision, whatever the CPU has (told here that it has native bf16)."""
    from lengthwise.core import precision as precision_module
    from lengthwise.facade import LongIndex

    monkeypatch.setattr(precision_module, "cpu_half_support", lambda: {"bf16": True, "fp16": True, "amx": True})
    assert precision_module.resolve_precision("auto", "cpu").value == "bf16"  # what auto means for documents
    index = LongIndex.open(index_dir)
    index.set_query_precision("fp32")
    assert index.query_precision is None
    index.set_query_precision("auto")
    assert index.query_precision is None and index.queries_embedded_at == "fp32"
    index.set_query_precision(None)
    assert index.query_precision is None


def test_auto_for_queries_on_a_gpu_means_half_precision(monkeypatch: pytest.MonkeyPatch) -> None:
    from lengthwise.core import precision as precision_module
    from lengthwise.core.precision import Precision, resolve_query_precision

    monkeypatch.setattr(precision_module, "_auto", lambda kind, device: Precision.BF16)
    monkeypatch.setattr(precision_module, "device_type", lambda device: "cuda")
    assert resolve_query_precision("auto", "fp32", "cuda:0") is Precision.BF16
    assert resolve_query_precision("fp32", "bf16", "cuda:0") is Precision.FP32  # a name asked for is kept


def test_an_index_embedded_in_half_precision_refuses_another_query_precision(index_dir: Path) -> None:
    from lengthwise.facade import LongIndex

    index = LongIndex.open(index_dir)
    index.settings["encode_settings"]["precision"] = "int8"  # as an index encoded with --precision int8 records it
    with pytest.raises(SettingError, match="embedded in int8") as refused:
        index.set_query_precision("fp32")
    assert refused.value.field == "precision" and "\n" not in str(refused.value)
    index.set_query_precision("int8")  # as recorded: nothing to change
    assert index.query_precision is None


def test_an_unknown_precision_is_refused_naming_the_choices(index_dir: Path) -> None:
    from lengthwise.facade import LongIndex
    from lengthwise.service.config import ServeConfig

    with pytest.raises(SettingError, match="use auto, fp32, bf16, fp16 or int8"):
        LongIndex.open(index_dir).set_query_precision("half")
    with pytest.raises(SettingError, match="use auto, fp32, bf16, fp16 or int8"):
        ServeConfig(precision="half")


def test_search_takes_precision_and_refuses_a_wrong_one_in_one_line(index_dir: Path) -> None:
    from lengthwise.cli import app

    found = runner.invoke(app, ["search", str(index_dir), "-q", QUERIES[0], "--precision", "int8", "--json"])
    assert found.exit_code == 0, found.output
    assert '"hits"' in found.output
    refused = runner.invoke(app, ["search", str(index_dir), "-q", QUERIES[0], "--precision", "half"])
    lines = [line for line in refused.output.splitlines() if line.strip()]
    assert refused.exit_code == 2 and len(lines) == 1 and "--precision" in lines[0], refused.output


def test_the_service_opens_the_index_at_the_query_precision_and_says_so(index_dir: Path) -> None:
    from lengthwise.core.precision import model_precision
    from lengthwise.service.app import describe
    from lengthwise.service.config import ServeConfig
    from lengthwise.service.run import open_checked

    config = ServeConfig(precision="int8")
    index = open_checked(index_dir, None, config.precision)
    assert model_precision(index.model) == "int8"  # the warm-up loaded it at the precision asked for
    assert describe(index, config)["query_precision"] == "int8"
    assert describe(open_checked(index_dir), ServeConfig())["query_precision"] == "fp32"
