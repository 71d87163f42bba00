"""What the three retrievers share (`lengthwise.integrations._common`): passages joined into one text, the settings'
and the sources' refusals, a service's refusals as `SettingError`s, the same text from the index and from a service;
and no framework imported by `import lengthwise`, `lengthwise --help` or `lengthwise.integrations`."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from lengthwise.core.errors import SettingError
from lengthwise.integrations._common import (
    GAP,
    IndexSource,
    RetrievalSettings,
    ServiceSource,
    _answer,
    joined,
    open_source,
)
from tests.integrations.conftest import QUERIES

FRAMEWORKS = ("langchain_core", "langchain", "llama_index", "haystack")
DOCUMENT = "0123456789abcdefghijklmnopqrstuvwxyz"


def _passage(start: int, end: int, context: int = 0) -> dict[str, Any]:
    before, after = DOCUMENT[max(0, start - context) : start], DOCUMENT[end : end + context]
    return {"window": 0, "start": start, "end": end, "score": 0.5, "text": DOCUMENT[start:end], "before": before,
            "after": after}  # fmt: skip


def test_passages_join_in_reading_order_merged_where_they_overlap_or_touch() -> None:
    assert joined([_passage(12, 20), _passage(2, 6)]) == (f"2345{GAP}cdefghij", None)
    assert joined([_passage(10, 20), _passage(15, 25), _passage(25, 28)]) == (DOCUMENT[10:28], (10, 28))
    assert joined([_passage(10, 20), _passage(12, 14)]) == (DOCUMENT[10:20], (10, 20))  # one inside another
    assert joined([_passage(4, 8, context=3), _passage(14, 16, context=3)]) == (DOCUMENT[1:19], (1, 19))
    assert joined([_passage(0, 4, context=5)]) == (DOCUMENT[0:9], (0, 9))  # clipped at the document's start


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"top_k": 0}, "top_k=0: must be ≥ 1"),
        ({"top_k": True}, "top_k=True: must be a whole number"),
        ({"top_k": 0, "top_k_name": "k"}, "k=0: must be ≥ 1"),
        ({"passages": -1}, "passages=-1: must be ≥ 0"),
        ({"context": 2.5}, "context=2.5: must be a whole number"),
        ({"mode": "semantic"}, "mode='semantic': use dense, lexical or hybrid"),
        ({"passages": 0}, "passages=0: a document's text is its passages"),
        ({"whole_document": True, "context": 9}, "context=9: widens passages"),
        ({"whole_document": "yes"}, "whole_document='yes': must be True or False"),
    ],
)
def test_settings_refusals_name_the_setting(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(SettingError, match=message.replace("(", r"\(")):
        RetrievalSettings(**settings)
    assert RetrievalSettings(top_k=3).overridden(top_k=None, mode="lexical") == RetrievalSettings(3, "lexical")


def test_one_place_to_search(index_dir: Any) -> None:
    with pytest.raises(SettingError, match="give one place to search"):
        open_source()
    with pytest.raises(SettingError, match=r"^url=None: give one place to search"):
        open_source(str(index_dir), url="http://127.0.0.1:9")
    with pytest.raises(SettingError, match="api_key='…': is sent to a lengthwise serve"):
        open_source(str(index_dir), api_key="s3cret")
    with pytest.raises(SettingError, match="milvus_name='x': names an index in Milvus"):
        open_source(str(index_dir), milvus_name="x")
    with pytest.raises(SettingError, match="index='dict': is not an index"):
        open_source({"folder": str(index_dir)})


def test_a_services_refusals_are_setting_errors_named_as_the_retriever_names_them() -> None:
    import httpx

    body = {"queries": ["q"], "k": 5000}
    settings = RetrievalSettings(top_k_name="similarity_top_k")
    too_many = httpx.Response(422, json={"detail": "k: Input should be less than or equal to 1000", "field": "k"})
    with pytest.raises(SettingError, match=r"^similarity_top_k=5000: Input should be less than or equal to 1000$"):
        _answer(too_many, body, settings)
    blank = httpx.Response(422, json={"detail": "queries[0]: a query is empty", "field": "queries[0]"})
    with pytest.raises(SettingError, match=r"^query='q': a query is empty$"):
        _answer(blank, body, settings)
    with pytest.raises(SettingError, match="api_key='…': the service refused the key"):
        _answer(httpx.Response(401, json={"detail": "no"}), body, settings)
    broken = httpx.Response(500, text="boom", request=httpx.Request("POST", "http://127.0.0.1:9/search"))
    with pytest.raises(httpx.HTTPStatusError):
        _answer(broken, body, settings)


def test_the_index_and_the_service_give_the_same_text(library: Any, server: Any) -> None:
    """A passage widened by its context, and several merged, read the same searched here and through a service."""
    local, remote = IndexSource(library), ServiceSource(server.url)
    for mode in ("dense", "lexical"):
        settings = RetrievalSettings(top_k=4, mode=mode, passages=3, context=40)
        for query in QUERIES:
            here, there = local.search(query, settings), remote.search(query, settings)
            assert [(f.id, f.text, f.span) for f in here] == [(f.id, f.text, f.span) for f in there]
            for mine, theirs in zip(here, there, strict=True):  # the service rounds scores to 6 places
                assert [{**p, "score": round(p["score"], 6)} for p in mine.passages] == list(theirs.passages)
            for found in here:
                text = library.lexical.text(library.numbers[found.id])
                if found.span is not None:
                    assert found.text == text[found.span[0] : found.span[1]]
                assert all(piece in text for piece in found.text.split(GAP))
    remote.close()


PROBE = textwrap.dedent(
    """
    import contextlib, io, json, sys
    import lengthwise, lengthwise.integrations
    from lengthwise.cli import main
    sys.argv = ["lengthwise", "--help"]
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            main()
        except SystemExit:
            pass
    print(json.dumps(sorted(sys.modules)))
    """
)


def test_no_framework_is_imported_by_lengthwise_its_help_or_the_integrations_package() -> None:
    run = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=120)
    modules = json.loads(run.stdout.strip().splitlines()[-1])
    assert [m for m in modules if m.partition(".")[0] in FRAMEWORKS] == []


@pytest.mark.parametrize(("module", "extra"), [("langchain", "langchain"), ("llamaindex", "llamaindex"),
                                               ("haystack", "haystack")])  # fmt: skip
def test_a_missing_framework_names_the_extra(module: str, extra: str) -> None:
    hidden = {"langchain": "langchain_core", "llamaindex": "llama_index", "haystack": "haystack"}[module]
    probe = (f"import sys; sys.modules[{hidden!r}] = None\n"
             f"try:\n    import lengthwise.integrations.{module}\nexcept ImportError as e:\n    print(e)")  # fmt: skip
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120)
    assert f"pip install 'lengthwise[{extra}]'" in run.stdout
