"""The search room's seams: it imports no other room, so the long-document method that made an index's windows is
handed to it (`WindowMethod`), and the old `lengthwise.longdoc.search` names still import for one release."""

from __future__ import annotations

import importlib
import sys
import warnings
from pathlib import Path

import pytest

from lengthwise.core.errors import SettingError

from .conftest import encode_windows, haystack_rows


@pytest.fixture(scope="module")
def built(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    import lengthwise as lw

    folder = encode_windows(tmp_path_factory.mktemp("room"), haystack_rows(12), tiny_model_dir)
    lw.LongIndex.build(folder, folder.parent / "idx", quantize="none", engine="faiss")
    return folder.parent / "idx"


def test_the_rooms_index_needs_the_method_and_the_junction_binds_it(built: Path) -> None:
    import lengthwise as lw
    from lengthwise.longdoc.method import LONG_DOCUMENTS
    from lengthwise.search.index import LongIndex

    with pytest.raises(SettingError, match="long-document method"):
        LongIndex.open(built)
    given = LongIndex.open(built, method=LONG_DOCUMENTS)
    bound = lw.LongIndex.open(built)
    assert isinstance(bound, LongIndex) and bound.queries.method is LONG_DOCUMENTS
    query = "the river and the old bridge"
    assert [h.to_dict() for h in given.search(query, k=5)[0]] == [h.to_dict() for h in bound.search(query, k=5)[0]]


def test_open_index_returns_the_typed_index_for_the_local_backend(built: Path) -> None:
    from lengthwise.facade import open_index
    from lengthwise.longdoc.method import LONG_DOCUMENTS
    from lengthwise.search.backend import Backend
    from lengthwise.search.index import LongIndex

    opened = open_index(Backend(), built)
    assert isinstance(opened, LongIndex) and opened.queries.method is LONG_DOCUMENTS
    assert opened.search_mode().value == "hybrid"


def test_the_old_search_package_warns_and_re_exports_the_new_names() -> None:
    for name in [m for m in sys.modules if m.startswith("lengthwise.longdoc.search")]:
        del sys.modules[name]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old_index = importlib.import_module("lengthwise.longdoc.search.index")
        old_hybrid = importlib.import_module("lengthwise.longdoc.search.hybrid")
        old_lexical = importlib.import_module("lengthwise.longdoc.search.lexical")
        old_backends = importlib.import_module("lengthwise.longdoc.search.backends")
        old_scorer = importlib.import_module("lengthwise.longdoc.search.scorer")
    assert any(w.category is DeprecationWarning and "lengthwise.search" in str(w.message) for w in caught)
    import lengthwise as lw
    from lengthwise.core.fusion import Mode
    from lengthwise.facade import open_index
    from lengthwise.search.lexical.bm25 import BothGranularities
    from lengthwise.search.lexical.scorer import BM25Scorer
    from lengthwise.search.types import FusionSettings

    assert old_index.LongIndex is lw.LongIndex and old_backends.open_index is open_index
    assert old_hybrid.Mode is Mode and old_hybrid.FusionSettings is FusionSettings
    assert old_lexical.BothGranularities is BothGranularities and old_scorer.BM25Scorer is BM25Scorer


def test_the_jobs_take_an_index_however_it_was_opened(built: Path) -> None:
    """`tune_hybrid` and `evaluate_through_index` take an opened index as it is: one from `open_index` (the room's
    class, with the method passed) too, not only `lengthwise.LongIndex` (before: read as a path, a raw error)."""
    import lengthwise as lw
    from lengthwise.facade import open_index, opened_index
    from lengthwise.search.backend import Backend

    for index in (open_index(Backend(), built), lw.LongIndex.open(built)):
        assert opened_index(index) is index
    assert opened_index(str(built)).doc_ids == lw.LongIndex.open(built).doc_ids
