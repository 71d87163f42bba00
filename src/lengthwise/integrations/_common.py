"""What the three retrievers share: where they search, what one retrieval asks for, and each hit as a text with its
metadata, so that a document reads the same in LangChain, LlamaIndex and Haystack.

Where: an index searched in this process (`IndexSource`: a `LongIndex` folder, an index in Milvus, or either already
opened) or a running `lengthwise serve` asked over HTTP (`ServiceSource`); `open_source` picks one. Both answer with
`Retrieved`: the document id, the fused score (a one-sided mode: that side's) and each side's exact score, the text
(the best passages, each widened by `context` characters either side, in reading order, overlapping pieces merged and
pieces apart joined by `GAP`; or the whole document), the passages' spans and what searched (`Retrieved.metadata`).
"""

from __future__ import annotations

import asyncio
import os
import threading
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Protocol

from lengthwise.core.errors import SettingError

__all__ = [
    "GAP",
    "MODES",
    "IndexSource",
    "RetrievalSettings",
    "Retrieved",
    "ServiceSource",
    "Source",
    "joined",
    "open_source",
]

MODES = ("dense", "lexical", "hybrid")
GAP = "\n\n…\n\n"  # between two passages of one document that neither overlap nor touch
TIMEOUT_S = 60.0  # an HTTP request to a `lengthwise serve`
SPAN_KEYS = ("window", "start", "end", "score")  # what metadata keeps of each passage (its text is the document's)
NO_TEXT = "the index holds no text of its documents; build it with text (lengthwise index build) to retrieve text"


@dataclass(frozen=True)
class RetrievalSettings:
    """What one retrieval asks for: a retriever's settings, with one call's own in their place (`overridden`).

    Args:
        top_k: Documents returned (LangChain calls it ``k``, LlamaIndex ``similarity_top_k``: `top_k_name`).
        mode: ``dense``, ``lexical`` or ``hybrid``; None: the index's recorded mode (hybrid when it holds text).
        passages: A document's best windows, which make its text.
        context: Characters of the document either side of each passage.
        whole_document: The document's whole text instead (its passages' spans stay in the metadata).
        top_k_name: The framework's name of `top_k`, for refusals.

    Raises:
        SettingError: A count that is not a whole number or below its least (``top_k`` 1, the others 0), an unknown
            mode, no passage without the whole document (no text), or context around a whole document.
    """

    top_k: int = 10
    mode: str | None = None
    passages: int = 1
    context: int = 0
    whole_document: bool = False
    top_k_name: str = field(default="top_k", compare=False)

    def __post_init__(self) -> None:
        for name, least in (("top_k", 1), ("passages", 0), ("context", 0)):
            value, named = getattr(self, name), self.top_k_name if name == "top_k" else name
            if isinstance(value, bool) or not isinstance(value, int):
                raise SettingError(named, value, "must be a whole number")
            if value < least:
                raise SettingError(named, value, f"must be ≥ {least}")
        if self.mode is not None and self.mode not in MODES:
            raise SettingError("mode", self.mode, "use dense, lexical or hybrid, or leave it out (the index's mode)")
        if not isinstance(self.whole_document, bool):
            raise SettingError("whole_document", self.whole_document, "must be True or False")
        if not self.passages and not self.whole_document:
            raise SettingError("passages", 0, "a document's text is its passages: ask for at least one, or for "
                               "whole_document=True")  # fmt: skip
        if self.context and self.whole_document:
            raise SettingError("context", self.context, "widens passages; a whole document has nothing around it: "
                               "leave context out with whole_document=True")  # fmt: skip

    def overridden(self, **asked: Any) -> RetrievalSettings:
        """These settings with those of one call in their place (None: not asked; checked again)."""
        return replace(self, **{name: value for name, value in asked.items() if value is not None})


@dataclass(frozen=True)
class Retrieved:
    """One document found for a query, as each framework's document type carries it (see the module docstring).

    Attributes:
        span: The text's (start, end) characters in the document when it is one piece (None: pieces apart).
        passages: The best windows' ``window``, ``start``, ``end`` (characters in the document) and ``score``,
            best first.
        index: What searched: ``backend`` (local or milvus), ``model``, ``long`` (the long-document settings),
            ``fusion`` (rule, weight, depth), and ``url`` for a service.
        mode: The mode the search ran in.
    """

    id: str
    score: float
    dense: float | None
    lexical: float | None
    text: str
    span: tuple[int, int] | None
    passages: tuple[dict[str, Any], ...]
    index: dict[str, Any]
    mode: str

    def metadata(self) -> dict[str, Any]:
        """The framework document's metadata: ``id``, ``score``, ``dense``, ``lexical`` (None where that side was
        not scored), ``passages``, ``mode``, ``index`` (JSON-ready)."""
        return {"id": self.id, "score": self.score, "dense": self.dense, "lexical": self.lexical,
                "passages": [dict(p) for p in self.passages], "mode": self.mode, "index": dict(self.index)}  # fmt: skip


def joined(passages: list[dict[str, Any]]) -> tuple[str, tuple[int, int] | None]:
    """The passages (``start``, ``text``, and ``before``/``after`` when asked with context) as one text in reading
    order: pieces that overlap or touch become one, pieces apart are joined by `GAP`. Returns the text and its span
    in the document when it is one piece."""
    pieces = sorted((p["start"] - len(p.get("before", "")), p.get("before", "") + p["text"] + p.get("after", ""))
                    for p in passages)  # fmt: skip
    merged: list[tuple[int, str]] = []
    for start, text in pieces:
        if merged and start <= merged[-1][0] + len(merged[-1][1]):
            first, held = merged[-1]
            merged[-1] = (first, held + text[first + len(held) - start :])  # "" when held already covers it
        else:
            merged.append((start, text))
    span = (merged[0][0], merged[0][0] + len(merged[0][1])) if len(merged) == 1 else None
    return GAP.join(text for _, text in merged), span


def retrieved(
    hit: dict[str, Any], settings: RetrievalSettings, index: dict[str, Any], mode: str, document: str | None = None
) -> Retrieved:
    """A hit as `lengthwise search --json` writes it (with ``before``/``after`` when asked with context) as
    `Retrieved`; `document`: its whole text, when asked for."""
    passages = hit.get("passages", [])
    span: tuple[int, int] | None
    if settings.whole_document:
        assert document is not None
        text, span = document, (0, len(document))
    else:
        text, span = joined(passages)
    spans = tuple({key: passage[key] for key in SPAN_KEYS} for passage in passages)
    dense, lexical = hit.get("dense"), hit.get("lexical")
    return Retrieved(str(hit["id"]), float(hit["score"]), None if dense is None else float(dense),
                     None if lexical is None else float(lexical), text, span, spans, index, mode)  # fmt: skip


class Source(Protocol):
    """Where a retriever searches: one query in, its documents out, best first."""

    def search(self, query: str, settings: RetrievalSettings) -> list[Retrieved]: ...

    async def asearch(self, query: str, settings: RetrievalSettings) -> list[Retrieved]: ...


class IndexSource:
    """An opened index searched in this process: a `LongIndex` or an index in Milvus (`open_index`), one search at a
    time (an async search runs on a worker thread), its hits and the text around them as the service gives them."""

    def __init__(self, index: Any) -> None:
        self.index, self._lock = index, threading.Lock()
        self._described: dict[str, Any] | None = None

    def describe(self) -> dict[str, Any]:
        """The index as `Retrieved.index` names it (read once)."""
        if self._described is None:
            settings = self.index.settings
            self._described = {"backend": "milvus" if hasattr(self.index, "uri") else "local",
                               "model": settings["model"]["name"], "long": settings["encode_settings"]["long"],
                               "fusion": self.index.fusion.to_dict()}  # fmt: skip
        return self._described

    def search(self, query: str, settings: RetrievalSettings) -> list[Retrieved]:
        """`LongIndex.search`'s hits for `query`, as `Retrieved`."""
        with self._lock:
            mode = self.index.search_mode(settings.mode).value
            if settings.whole_document and self.index.lexical is None:
                raise SettingError("whole_document", True, NO_TEXT)
            (hits,) = self.index.search(query, settings.top_k, mode=settings.mode, passages=settings.passages)
            return [self._retrieved(hit, settings, mode) for hit in hits]

    async def asearch(self, query: str, settings: RetrievalSettings) -> list[Retrieved]:
        """`search` on a worker thread."""
        return await asyncio.to_thread(self.search, query, settings)

    def _retrieved(self, hit: Any, settings: RetrievalSettings, mode: str) -> Retrieved:
        wanted = settings.whole_document or (settings.context and hit.passages)
        document = self.index.lexical.text(self.index.numbers[hit.id]) if wanted else None
        passages = [asdict(passage) for passage in hit.passages]
        if settings.context and document is not None:  # as the service widens a passage (`Searcher._hit`)
            for passage in passages:
                start, end = passage["start"], passage["end"]
                passage["before"] = document[max(0, start - settings.context) : start]
                passage["after"] = document[end : end + settings.context]
        found = {"id": hit.id, "score": hit.score, "dense": hit.dense, "lexical": hit.lexical, "passages": passages}
        return retrieved(found, settings, self.describe(), mode, document)


class ServiceSource:
    """A running `lengthwise serve` at `url`, asked over HTTP with httpx: ``POST /search`` per query (with
    ``document`` for whole documents), ``GET /info`` once for what `Retrieved.index` names.

    Args:
        url: The service's address (``http://127.0.0.1:8000``).
        api_key: The key it was started with (its `api_key_file`), sent as ``Authorization: Bearer KEY``.
        timeout: Seconds a request may take.
    """

    def __init__(self, url: str, api_key: str | None = None, timeout: float = TIMEOUT_S) -> None:
        import httpx

        self.url, self.timeout = url.rstrip("/"), timeout
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(base_url=self.url, headers=self.headers, timeout=timeout)
        self._info: dict[str, Any] | None = None

    def search(self, query: str, settings: RetrievalSettings) -> list[Retrieved]:
        """The service's hits for `query`, as `Retrieved`."""
        body = _body(query, settings)
        if self._info is None:
            self._info = _answer(self._client.get("/info"), {}, settings)
        answer = _answer(self._client.post("/search", json=body), body, settings)
        return self._retrieved(answer["results"][0]["hits"], settings)

    async def asearch(self, query: str, settings: RetrievalSettings) -> list[Retrieved]:
        """`search` with httpx's async client (one per call: a client belongs to the event loop that made it)."""
        import httpx

        body = _body(query, settings)
        async with httpx.AsyncClient(base_url=self.url, headers=self.headers, timeout=self.timeout) as client:
            if self._info is None:
                self._info = _answer(await client.get("/info"), {}, settings)
            answer = _answer(await client.post("/search", json=body), body, settings)
        return self._retrieved(answer["results"][0]["hits"], settings)

    def close(self) -> None:
        """Close the sync client's connections."""
        self._client.close()

    def _retrieved(self, hits: list[dict[str, Any]], settings: RetrievalSettings) -> list[Retrieved]:
        info = self._info
        assert info is not None
        long = info["index"]["encode_settings"]["long"]
        index = {"backend": info["backend"], "model": info["model"]["name"], "long": long, "fusion": info["fusion"],
                 "url": self.url}  # fmt: skip
        mode = settings.mode or info["mode"]
        return [retrieved(hit, settings, index, mode, hit.get("text")) for hit in hits]


def _body(query: str, settings: RetrievalSettings) -> dict[str, Any]:
    """``POST /search``'s body for one query (``k``: accepted by every version of the service; ``document`` only when
    asked, so a service before it answers passages as before)."""
    body: dict[str, Any] = {"queries": [query], "k": settings.top_k, "passages": settings.passages,
                            "context": settings.context}  # fmt: skip
    if settings.whole_document:
        body["document"] = True
    if settings.mode is not None:
        body["mode"] = settings.mode
    return body


def _answer(response: Any, body: dict[str, Any], settings: RetrievalSettings) -> dict[str, Any]:
    """The JSON of a 2xx answer. A 422 (the field at fault) and a 401 (the key) are `SettingError`s named as the
    retriever names its settings; any other error is httpx's `HTTPStatusError`."""
    if response.status_code == 422:
        refused = response.json()
        field, detail = str(refused.get("field")), str(refused.get("detail"))
        problem = detail.removeprefix(f"{field}: ")
        if field.startswith("queries"):  # the one query sent
            raise SettingError("query", body["queries"][0], problem)
        value = body.get(field)
        raise SettingError(settings.top_k_name if field in ("k", "top_k") else field, value, problem)
    if response.status_code == 401:
        raise SettingError("api_key", "…", "the service refused the key (or none was given); give the key it was "
                           "started with")  # fmt: skip
    response.raise_for_status()
    answer: dict[str, Any] = response.json()
    return answer


def open_source(
    index: Any = None,
    *,
    url: str | None = None,
    milvus_uri: str | None = None,
    milvus_name: str | None = None,
    api_key: str | None = None,
    timeout: float = TIMEOUT_S,
) -> Source:
    """Where a retriever searches: exactly one of `index` (an index folder, or an index already opened), `milvus_uri`
    (an index loaded into Milvus, served as `milvus_name`) or `url` (a running `lengthwise serve`, with its
    `api_key`). A folder or Milvus index is opened with `lengthwise.load_model` (its query model as saved).

    Raises:
        SettingError: None or several of the three; `api_key` without `url`, `milvus_name` without `milvus_uri`;
            `index` neither a path nor an index; what `open_index` refuses.
    """
    given = [name for name, value in (("index", index), ("url", url), ("milvus_uri", milvus_uri)) if value is not None]
    if len(given) != 1:
        raise SettingError(given[-1] if given else "index", None, "give one place to search: index= (an index "
                           "folder, or an opened index), milvus_uri= (with milvus_name=) or url= (a running "
                           "lengthwise serve)")  # fmt: skip
    if api_key is not None and url is None:
        raise SettingError("api_key", "…", "is sent to a lengthwise serve; give it with url=, or leave it out")
    if milvus_name is not None and milvus_uri is None:
        raise SettingError("milvus_name", milvus_name, "names an index in Milvus; give it with milvus_uri=")
    if url is not None:
        return ServiceSource(url, api_key, timeout)
    from lengthwise.facade import load_model, open_index
    from lengthwise.search.backend import DEFAULT_NAME, Backend

    if milvus_uri is not None:
        served = Backend("milvus", milvus_uri, milvus_name or DEFAULT_NAME)
        return IndexSource(open_index(served, load_model=load_model))
    if isinstance(index, (str, os.PathLike)):
        return IndexSource(open_index(Backend(), index, load_model=load_model))
    if not callable(getattr(index, "search", None)) or not hasattr(index, "search_mode"):
        raise SettingError("index", type(index).__name__, "is not an index: give an index folder, or an index opened "
                           "with lengthwise.LongIndex.open or open_index")  # fmt: skip
    return IndexSource(index)
