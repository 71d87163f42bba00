"""`lengthwise.service.serve`: open and check the index, bind the address, then serve it with uvicorn until SIGTERM or
Ctrl-C, finishing the requests in flight.

Everything that can refuse (FastAPI or uvicorn not installed, a missing or damaged index, a model that is not the one
the index was built with, an unreadable key file, a host that is no address, an address in use) is checked before the
port is bound, and raised as one `SettingError` (`MissingExtra` for a package, or the model's `ModelLoadError`).
After SIGTERM the requests in flight get `ServeConfig.shutdown_grace_s`; one still open then is answered 503.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lengthwise.core.errors import SettingError
from lengthwise.search.backend import Backend
from lengthwise.search.types import TokenChoice
from lengthwise.service.config import Limits, ServeConfig

__all__ = ["open_checked", "serve", "worker_app"]

ENV = "LENGTHWISE_SERVE"  # the index folder and settings, for the worker processes (--workers > 1)


def open_checked(
    folder: str | os.PathLike[str] | None,
    backend: Backend | None = None,
    precision: str | None = None,
    tokens: TokenChoice | None = None,
) -> Any:
    """The index at `folder` (or the one `backend` serves in Milvus), its lexical side opened and its model loaded,
    checked against the index's recorded weights and set to the queries' `precision` (None: as recorded): what the
    service needs, loaded once, or the reason it cannot be served."""
    from lengthwise.facade import load_model, open_index

    if folder is not None and not Path(folder).is_dir():
        what = "a file, not a folder" if Path(folder).exists() else "no such folder"
        raise SettingError(None, folder, f"{folder}: {what}; pass a folder written by `lengthwise index build`")
    index = open_index(backend, folder, load_model=load_model)
    index.set_query_precision(precision)
    _ = index.lexical  # a damaged lexical side refuses now, not at the first hybrid query
    if tokens is not None:
        tokens.apply(index)  # a token folder that does not fit refuses now
    index.embed_queries(["warm up"])  # loads the recorded model and checks its weights against the index
    return index


def _resolve(host: str, port: int) -> tuple[Any, ...]:
    """`socket.getaddrinfo`'s first answer for (host, port), or a `SettingError` on ``host``."""
    try:
        return socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as error:
        raise SettingError("host", host, f"not an address this machine can bind ({error.strerror})") from None


def _bind(host: str, port: int) -> socket.socket:
    """A listening socket on (host, port); port 0 picks a free one."""
    family, kind, proto, _, address = _resolve(host, port)
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(2048)
    except OSError as error:
        sock.close()
        problem = f"cannot listen on {host}:{port} ({error.strerror}); choose another port"
        raise SettingError("port", port, problem) from None
    sock.set_inheritable(True)
    return sock


def _uvicorn_config(app: Any, config: ServeConfig) -> Any:
    import uvicorn

    grace = config.shutdown_grace_s
    return uvicorn.Config(app, factory=isinstance(app, str), workers=config.workers, log_level="warning",
                          access_log=False, timeout_graceful_shutdown=grace, lifespan="on")  # fmt: skip


def serve(
    folder: str | os.PathLike[str] | None,
    config: ServeConfig | None = None,
    *,
    on_ready: Callable[[str], None] | None = None,
    backend: Backend | None = None,
) -> None:
    """Serve the index at `folder` (or in Milvus: `backend`) over HTTP (`lengthwise serve`) until SIGTERM or Ctrl-C;
    returns once the requests in flight are answered.

    Args:
        folder: A folder written by `lengthwise index build` (None with a Milvus `backend`).
        config: Address, workers, API key, batching and caps (`ServeConfig`; default: 127.0.0.1:8000).
        on_ready: Called with the base URL (``http://host:port``) once requests are answered.
        backend: Where the index is served from (`lengthwise.search.backend.Backend`; default: the folder).
    """
    from lengthwise.core._optional import require

    require("fastapi", "uvicorn", extra="serve", purpose="serving")  # one line, not a traceback, without the extra
    config = config or ServeConfig()
    config.api_key()  # an unreadable key file refuses before anything loads
    _resolve(config.host, config.port)  # and so does a host that is no address
    if backend is not None and backend.embedded and config.workers > 1:
        raise SettingError("workers", config.workers, "a Milvus Lite database is opened by one process; serve it with "
                           "--workers 1, or serve from a Milvus server (--uri http://host:19530)")  # fmt: skip
    _set_threads(config)
    index = open_checked(folder, backend, config.precision, config.token_choice)  # before FastAPI and uvicorn: a
    # refusal comes fast

    from lengthwise.service.app import create_app

    sock = _bind(config.host, config.port)
    host, port = sock.getsockname()[:2]
    url = f"http://{f'[{host}]' if ':' in host else host}:{port}"
    interrupt = signal.getsignal(signal.SIGINT)
    previous = signal.signal(signal.SIGTERM, lambda *_: None)  # uvicorn raises it again after its graceful stop
    try:
        if config.workers == 1:
            server = _server(_uvicorn_config(create_app(index, config), config), lambda: on_ready and on_ready(url))
            server.run(sockets=[sock])
            return
        from uvicorn.supervisors import Multiprocess

        os.environ[ENV] = json.dumps({"folder": None if folder is None else str(Path(folder).resolve()),
                                      "backend": dataclasses.asdict(backend or Backend()),
                                      "config": _as_json(config)})  # fmt: skip
        settings = _uvicorn_config(f"{__name__}:worker_app", config)
        if on_ready is not None:
            on_ready(url)  # the socket listens already: connections wait in its backlog for the workers
        Multiprocess(settings, sockets=[sock]).run()
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, interrupt)
        sock.close()


def _set_threads(config: ServeConfig) -> None:
    """Torch's threads in this process, as `config.threads` says (left alone when None)."""
    if config.threads is not None:
        import torch

        torch.set_num_threads(config.threads)


def _server(settings: Any, ready: Callable[[], Any]) -> Any:
    """uvicorn's Server, calling `ready` once its start-up (the model's warm-up included) is done."""
    import uvicorn

    class Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if self.started:
                ready()

    return Server(settings)


def _as_json(config: ServeConfig) -> dict[str, Any]:
    data = dataclasses.asdict(config)
    data["api_key_file"] = str(config.api_key_file) if config.api_key_file is not None else None
    data["tokens"] = str(Path(config.tokens).resolve()) if config.tokens is not None else None
    return data


def worker_app() -> Any:
    """The app of one worker process (uvicorn's factory, ``--workers`` > 1): the index and settings the parent
    checked, passed in the environment."""
    from transformers.utils import logging as hf_logging

    from lengthwise.facade import load_model, open_index
    from lengthwise.service.app import create_app

    hf_logging.disable_progress_bar()  # as the parent: no loading bars in the server's log
    made = json.loads(os.environ[ENV])
    data = made["config"]
    config = ServeConfig(**{**data, "limits": Limits(**data["limits"]),
                            "api_key_file": Path(data["api_key_file"]) if data["api_key_file"] else None,
                            "tokens": Path(data["tokens"]) if data.get("tokens") else None})  # fmt: skip
    _set_threads(config)
    index = open_index(Backend(**made["backend"]), made["folder"], load_model=load_model)
    index.set_query_precision(config.precision)
    config.token_choice.apply(index)
    return create_app(index, config)
