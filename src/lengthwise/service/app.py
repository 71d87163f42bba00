"""The FastAPI application: `POST /search`, `POST /embed`, `POST /v1/embeddings` (OpenAI's schema), `GET /health`,
`GET /info`, `GET /` (the search page) and `GET /openapi.json` (the schema; no `/docs`, whose Swagger UI loads from a
CDN), over one opened `LongIndex`, fed by the dynamic batcher: its model used by the model thread, its index by the
search thread.

Errors are JSON with a one-line ``detail`` and the ``field`` at fault: 422 for a request the schema refuses, a body
that cannot be parsed (``body``) or a query the index cannot answer (a `SettingError`), 413 for a body over the cap,
401 for a missing or wrong API key. Under ``/v1/`` they also carry OpenAI's ``error`` object (message, type, param),
which OpenAI's clients read.
"""

# no `from __future__ import annotations`: FastAPI reads the route's body model (a class made inside create_app)
# from the live annotation
import asyncio
import base64
import contextlib
import hmac
import json
from collections.abc import AsyncIterator, Hashable
from contextlib import asynccontextmanager
from importlib import resources
from pathlib import PurePosixPath, PureWindowsPath
from typing import Any

import numpy as np
from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from lengthwise._version import __version__
from lengthwise.core.errors import SettingError
from lengthwise.service.batching import Batcher
from lengthwise.service.config import Limits, ServeConfig
from lengthwise.service.schema import request_models

__all__ = ["BodyLimit", "Searcher", "ShutdownGuard", "create_app", "describe"]

SEARCH_FIELDS = ("top_k", "mode", "passages", "context", "document", "candidates", "probes", "depth")


class Searcher:
    """The batcher's handler, in two stages: a batch of query texts embedded (on the model's thread), then searched
    with those vectors (on a search thread, its queries spread over `search_threads`) with one key's settings, or
    returned as vectors (``/embed``).

    The hits are turned into `lengthwise search --json`'s dicts on the search thread too, and a passage asked with
    context gets the document's text either side of it (``before``, ``after``).
    """

    def __init__(self, index: Any, search_threads: int = 1) -> None:
        self.index, self.search_threads = index, search_threads

    def prepare(self, key: Hashable, texts: list[str]) -> Any:
        """The query vectors; for a search, (vectors, token vectors) as `embed_for_search` reads them (None for a
        lexical search: no model needed; the tokens where the token stage rescores a hybrid search)."""
        assert isinstance(key, tuple)
        if key[0] == "search":
            return self.index.embed_for_search(texts, key[1 + SEARCH_FIELDS.index("mode")])
        return self.index.embed_queries(texts)

    def finish(self, key: Hashable, texts: list[str], prepared: Any) -> list[Any]:
        """The hits of each query (its vector as a list, for ``/embed``; its vector and its tokens, for
        ``/v1/embeddings``)."""
        assert isinstance(key, tuple)
        if key[0] == "embed":
            return [[float(x) for x in row] for row in prepared]
        if key[0] == "v1":
            counts = self.index.model.tokenizer(texts, add_special_tokens=False)["input_ids"]
            return [(row, len(ids)) for row, ids in zip(prepared, counts, strict=True)]
        settings = dict(zip(SEARCH_FIELDS, key[1:], strict=True))
        context, document = settings.pop("context"), settings.pop("document")
        if document and self.index.lexical is None:
            raise SettingError("document", True, "the index holds no text of its documents; leave document out")
        vectors, tokens = prepared
        results = self.index.search(texts, settings.pop("top_k"), vectors=vectors, tokens=tokens,
                                    search_threads=self.search_threads, **settings)  # fmt: skip
        return [[self._hit(hit, context, document) for hit in hits] for hits in results]

    def _hit(self, hit: Any, context: int, document: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = hit.to_dict()
        if document:
            out["text"] = self.index.lexical.text(self.index.numbers[hit.id])
        if context and (out.get("passages") or out.get("matched")) and self.index.lexical is not None:
            text = self.index.lexical.text(self.index.numbers[hit.id])
            for passage in [*out.get("passages", []), *([out["matched"]] if out.get("matched") else [])]:
                start, end = passage["start"], passage["end"]
                passage["before"], passage["after"] = text[max(0, start - context) : start], text[end : end + context]
        return out


def _field(loc: tuple[Any, ...] | list[Any]) -> str:
    """``("body", "queries", 0, "text")`` → ``queries[0].text``; the body itself (malformed JSON) → ``body``."""
    parts = list(loc[1:]) if loc and loc[0] == "body" else list(loc)
    name = ""
    for part in parts:
        if isinstance(part, int):
            name += f"[{part}]"
        elif isinstance(part, str) and part.isidentifier():
            name += f".{part}" if name else part
    return name or "body"


def error(
    status: int,
    field: str,
    detail: str,
    headers: dict[str, str] | None = None,
    request: Request | None = None,
    **extra: Any,
) -> JSONResponse:
    """The one error shape: ``{"detail": one line, "field": the field at fault}``; under ``/v1/`` also OpenAI's
    ``{"error": {"message", "type", "param", "code"}}``."""
    if request is not None and request.url.path.startswith("/v1/"):
        kind = {401: "authentication_error", 413: "invalid_request_error"}.get(status, "invalid_request_error")
        extra["error"] = {"message": detail, "type": kind, "param": field, "code": None}
    return JSONResponse({"detail": detail, "field": field, **extra}, status_code=status, headers=headers)


def _invalid(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = [_described(e) for e in exc.errors()]
    first = errors[0] if errors else {"field": "body", "msg": "invalid request"}
    return error(422, str(first["field"]), f"{first['field']}: {first['msg']}", request=request, errors=errors)


def _described(found: dict[str, Any]) -> dict[str, Any]:
    """One of pydantic's errors as ``{field, type, msg}``; malformed JSON is the body's, at a character."""
    if found.get("type") == "json_invalid":
        loc = found.get("loc", ())
        where = f" at character {loc[-1]}" if loc and isinstance(loc[-1], int) else ""
        reason = (found.get("ctx") or {}).get("error", "")
        return {"field": "body", "type": "json_invalid", "msg": f"the body is not valid JSON{where} ({reason})"}
    return {"field": _field(found.get("loc", ())), "type": found.get("type"), "msg": found.get("msg")}


BODY_UNREADABLE = "There was an error parsing the body"  # FastAPI's 400 for a body its JSON parser raised on


def _unparsed(cause: BaseException | None) -> str:
    """Why FastAPI could not parse a body that its JSON decoder did not refuse as malformed."""
    if isinstance(cause, UnicodeDecodeError):
        return f"the body is not UTF-8 (byte {cause.start:,}); send JSON encoded as UTF-8"
    if isinstance(cause, RecursionError):
        return "the body nests arrays or objects too deeply to parse; send the request's flat JSON"
    if isinstance(cause, ValueError) and "digits" in str(cause):
        return "the body holds a number with too many digits to parse; send numbers as the fields' caps allow"
    return "the body cannot be parsed as JSON; send a JSON object encoded as UTF-8"


def _http(request: Request, exc: Exception) -> JSONResponse:
    """FastAPI's HTTP errors (401, 404, 405) in the one error shape."""
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 400 and exc.detail == BODY_UNREADABLE:  # invalid UTF-8, deep nesting, a huge number
        return error(422, "body", f"body: {_unparsed(exc.__cause__)}", request=request)
    field = {401: "authorization", 405: "method"}.get(exc.status_code, "path")
    detail = exc.detail if exc.status_code == 401 else f"{field}: {exc.detail}"
    return error(exc.status_code, field, detail, headers=dict(exc.headers or {}) or None, request=request)


def _refused(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, SettingError)
    field = "queries" if exc.field in (None, "query") else exc.field  # the library's one query is one of `queries`
    return error(422, field, f"{field}: {exc.problem}", request=request)


class BodyLimit:
    """ASGI middleware: a request body over `limit` bytes is answered 413 (by its Content-Length before it is read,
    or as it streams in); the body is drained up to `drain` bytes so the client can read the answer."""

    def __init__(self, app: Any, limit: int, drain: int = 64 * 1024 * 1024) -> None:
        self.app, self.limit, self.drain = app, limit, drain

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.limit:
            await self._too_large(scope, receive, send, int(declared))
            return
        body, more = bytearray(), True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > self.limit:
                await self._too_large(scope, receive, send, None if more else len(body))
                return
        replay = [{"type": "http.request", "body": bytes(body), "more_body": False}]

        async def replayed() -> dict[str, Any]:
            return replay.pop() if replay else await receive()

        await self.app(scope, replayed, send)

    async def _too_large(self, scope: dict[str, Any], receive: Any, send: Any, size: int | None) -> None:
        read = 0
        while read < self.drain and (size is None or read < size):
            message = await receive()
            read += len(message.get("body", b""))
            if message["type"] != "http.request" or not message.get("more_body", False):
                break
        response = error(413, "body", f"body: larger than {self.limit:,} bytes; send fewer or shorter queries")
        await response(scope, receive, send)


class ShutdownGuard:
    """ASGI middleware: a request still waiting when the server's shutdown grace ends (a client that stopped sending
    its body, a search that outlasts the grace) is cancelled by uvicorn; it is answered 503 when nothing was sent
    yet, and the cancellation ends there instead of as a traceback and a 500 (uvicorn logs one line)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watched(message: dict[str, Any]) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watched)
        except asyncio.CancelledError:
            if not started:
                detail = "server: shutting down; the request was not answered within the grace, send it again"
                with contextlib.suppress(Exception):  # the client may be gone too: nothing more to say then
                    await error(503, "server", detail, headers={"Connection": "close"})(scope, receive, send)


def create_app(index: Any, config: ServeConfig | None = None) -> FastAPI:
    """The service over an opened `lengthwise.LongIndex` (model loaded on the model thread at start-up)."""
    config = config or ServeConfig()
    limits: Limits = config.limits
    threads = config.search_threads_used
    batcher = Batcher(Searcher(index, threads), max_batch=config.max_batch, wait_s=config.batch_wait_ms / 1000,
                      search_threads=threads)  # fmt: skip
    SearchRequest, EmbedRequest, EmbeddingsRequest = request_models(limits)
    key = config.api_key()

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await batcher.start()
        await batcher.run(lambda: index.embed_queries(["warm up"]))  # the model loaded before the first request
        yield
        await batcher.stop()

    # no /docs or /redoc: FastAPI's pages load Swagger UI and ReDoc from a CDN, blank offline; /openapi.json stays
    app = FastAPI(title="lengthwise", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None,
                  description="Long-document search over a `lengthwise index build` folder.")  # fmt: skip
    app.add_exception_handler(RequestValidationError, _invalid)
    app.add_exception_handler(SettingError, _refused)
    app.add_exception_handler(StarletteHTTPException, _http)
    app.add_middleware(BodyLimit, limit=limits.max_body_bytes)
    app.add_middleware(ShutdownGuard)  # the outermost of the two: it also sees a body that never arrives
    guarded = [Depends(_bearer(key))] if key else []

    @app.post("/search", dependencies=guarded)
    async def search(request: SearchRequest) -> dict[str, Any]:  # type: ignore[valid-type]
        """The `top_k` best documents per query, best first: the same JSON as `lengthwise search --json`."""
        asked = request.queries  # type: ignore[attr-defined]
        settings = tuple(getattr(request, name) for name in SEARCH_FIELDS)
        texts = [query.text for query in asked]
        try:
            found = await batcher.submit(("search", *settings), texts)
        except SettingError as refused:  # one query the index cannot answer: named by its place in the request
            raise _of_query(refused, texts) from None
        return {"results": [({"query_id": q.id} if q.id is not None else {}) | {"hits": hits}
                            for q, hits in zip(asked, found, strict=True)]}  # fmt: skip

    @app.post("/embed", dependencies=guarded)
    async def embed(request: EmbedRequest) -> dict[str, Any]:  # type: ignore[valid-type]
        """The query vectors, embedded as the index's documents were (the recorded model and settings)."""
        vectors = await batcher.submit(("embed",), [query.text for query in request.queries])  # type: ignore[attr-defined]
        return {"model": index.settings["model"]["name"], "dim": len(vectors[0]), "vectors": vectors}

    @app.post("/v1/embeddings", dependencies=guarded)
    async def embeddings(request: EmbeddingsRequest) -> dict[str, Any]:  # type: ignore[valid-type]
        """OpenAI's embeddings API: each text embedded as the index's queries are (the recorded model, precision
        and long-document settings: a text longer than the model's window is read whole, one vector for it — the
        mean of its windows for a multi-vector index, as `LongEncoder.encode_queries` pools it)."""
        found = await batcher.submit(("v1",), request.input)  # type: ignore[attr-defined]
        return openai_embeddings(found, request, index.settings["model"]["name"])

    @app.get("/health")
    async def health() -> dict[str, Any]:
        """Ready to answer: the model and the index are loaded."""
        return {"status": "ok"}

    @app.get("/info", dependencies=guarded)
    async def info() -> dict[str, Any]:
        """The model's fingerprint, the index's settings and counts, the caps and the version."""
        busy = {thread: round(seconds, 3) for thread, seconds in batcher.busy_s.items()}
        return describe(index, config) | {"batches": {"run": batcher.batches, "queries": batcher.texts, "busy_s": busy}}

    html = resources.files("lengthwise.service").joinpath("page.html").read_text(encoding="utf-8")

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def page() -> HTMLResponse:
        return HTMLResponse(html)

    return app


def openai_embeddings(found: list[tuple[Any, int]], request: Any, model: str) -> dict[str, Any]:
    """The answer of ``/v1/embeddings`` in OpenAI's shape, from each text's (vector, tokens); a ``dimensions`` other
    than the vectors' own is refused (they are not cut)."""
    width = len(found[0][0])
    if request.dimensions is not None and request.dimensions != width:
        problem = f"this index's model gives {width}-dimensional vectors, which are not cut; leave dimensions out"
        raise SettingError("dimensions", request.dimensions, f"{problem} or give {width}")

    def encoded(vector: Any) -> Any:
        if request.encoding_format == "base64":
            return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")
        return [float(x) for x in vector]

    data = [{"object": "embedding", "index": n, "embedding": encoded(vector)} for n, (vector, _) in enumerate(found)]
    tokens = sum(count for _, count in found)
    return {"object": "list", "data": data, "model": model, "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}


def _of_query(refused: SettingError, texts: list[str]) -> SettingError:
    """The library's refusal of one query (``query``: its text) as the request's ``queries[i]``: the batch the
    library was handed mixed requests, so only the request knows where the query stood."""
    if refused.field == "query" and isinstance(refused.value, str) and refused.value in texts:
        return SettingError(f"queries[{texts.index(refused.value)}]", refused.value, refused.problem)
    return refused


def _names_only(value: Any) -> Any:
    """`value` with every absolute path replaced by its last part: `/info` tells anyone who can reach it which
    model and corpus an index was built from, not where they lie on the server's disk."""
    if isinstance(value, dict):
        return {key: _names_only(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_names_only(item) for item in value]
    if isinstance(value, str):
        for kind in (PurePosixPath, PureWindowsPath):
            if kind(value).is_absolute():
                return kind(value).name or value
    return value


def describe(index: Any, config: ServeConfig) -> dict[str, Any]:
    """What `GET /info` shows: the version, the model, the backend (local or milvus), the index's and the lexical
    side's settings, the caps; paths on the server's disk as their names only (``/srv/models/minilm`` → ``minilm``)."""
    settings = _names_only(index.settings)
    lexical = index.lexical
    return {
        "lengthwise": __version__,
        "model": settings.get("model"),
        "backend": "milvus" if hasattr(index, "uri") else "local",  # a MilvusIndex has its URI, a LongIndex a folder
        "index": settings,
        "lexical": _names_only(lexical.settings) if lexical is not None else None,
        "mode": (lexical.settings.get("mode") or "hybrid") if lexical is not None else "dense",
        "fusion": index.fusion.to_dict(),
        "tokens": _tokens(index),
        "query_precision": index.queries_embedded_at,  # what the queries are embedded at
        "limits": json.loads(json.dumps(config.limits.__dict__)),
        "batching": {
            "max_batch": config.max_batch,
            "wait_ms": config.batch_wait_ms,
            "search_threads": config.search_threads_used,
        },
        "threads": _torch_threads(),
    }


def _tokens(index: Any) -> dict[str, Any] | None:
    """The token side a hybrid search is rescored by: its folder's name, codec, bytes a token, weight, depth and the
    best windows whose tokens are read (None: every token)."""
    stage = getattr(index.searcher, "tokens", None)
    if stage is None:
        return None
    side = stage.side
    return {"folder": side.folder.name, "model": _names_only(side.settings["model"]),
            "codec": side.codec.spec, "bytes_per_token": side.bytes_per_token, "tokens": len(side.codes),
            "weight": stage.weight, "depth": stage.depth, "around": stage.around}  # fmt: skip


def _torch_threads() -> int:
    import torch

    return torch.get_num_threads()


def _bearer(key: str) -> Any:
    """A dependency that refuses a request without ``Authorization: Bearer KEY`` (compared in constant time)."""
    from fastapi import HTTPException

    expected = key.encode("utf-8")

    async def check(request: Request) -> None:
        sent = request.headers.get("authorization", "")
        scheme, _, token = sent.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode("utf-8"), expected):
            raise HTTPException(401, "authorization: send the API key as `Authorization: Bearer KEY`",
                                headers={"WWW-Authenticate": "Bearer"})  # fmt: skip

    return check
