"""`lengthwise serve`: an index behind HTTP (`lengthwise.service.serve`). Flags → one call → a ready line."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lengthwise.cli.console import fail as _fail
from lengthwise.cli.console import say
from lengthwise.cli.options import (
    BackendOption,
    NameOption,
    QueryPrecisionOption,
    TokenAroundOption,
    TokenDepthOption,
    TokensOption,
    TokenWeightOption,
    UriOption,
    field_option,
    served,
    setting_message,
)
from lengthwise.search.backend import DEFAULT_NAME
from lengthwise.service.config import ServeConfig

__all__ = ["serve"]

FLAGGED = ("host", "port", "workers", "api_key_file", "max_batch", "batch_wait_ms", "threads", "search_threads",
           "precision", "backend", "uri", "name")  # fmt: skip


def _message(error: Exception, index: Path | str | None) -> str:
    """A refusal in one line: a setting this command has a flag for as its flag; the index's own (its model, its
    files) as INDEX: problem (or URI: problem, for an index in Milvus)."""
    from lengthwise.core.errors import SettingError

    if isinstance(error, SettingError) and error.field and error.field not in FLAGGED:
        return f"{index}: {error.problem}"
    return setting_message(error)


def _warnings(config: ServeConfig) -> list[str]:
    """What the user should know about a server that started: it answers other machines with no key; its key file
    may be read by other users of this machine."""
    lines = []
    if config.public and config.api_key_file is None:
        lines.append(f"{config.host} is reachable from other machines and no --api-key-file is set")
    if config.key_file_exposed():
        lines.append(f"{config.api_key_file} may be read by other users of this machine; chmod 600 it")
    return lines


def serve(
    index: Annotated[
        Path | None, typer.Argument(help="A folder written by `lengthwise index build` (none with --backend milvus).")
    ] = None,
    host: Annotated[str, field_option(ServeConfig, "host")] = "127.0.0.1",
    port: Annotated[int, field_option(ServeConfig, "port")] = 8000,
    workers: Annotated[int, field_option(ServeConfig, "workers")] = 1,
    api_key_file: Annotated[Path | None, field_option(ServeConfig, "api_key_file")] = None,
    max_batch: Annotated[int, field_option(ServeConfig, "max_batch")] = 64,
    batch_wait_ms: Annotated[float, field_option(ServeConfig, "batch_wait_ms")] = 2.0,
    threads: Annotated[int | None, field_option(ServeConfig, "threads")] = None,
    search_threads: Annotated[int | None, field_option(ServeConfig, "search_threads")] = None,
    precision: QueryPrecisionOption = None,
    backend: BackendOption = "local",
    uri: UriOption = None,
    name: NameOption = DEFAULT_NAME,
    tokens: TokensOption = None,
    token_weight: TokenWeightOption = None,
    token_around: TokenAroundOption = None,
    token_depth: TokenDepthOption = None,
) -> None:
    """Serve INDEX (or the index in Milvus: --backend milvus --uri U) over HTTP: POST /search and /embed, GET
    /health, /info and / (a search page); the model and the index are loaded once, and concurrent queries are
    embedded in batches. Stops on SIGTERM or Ctrl-C once the requests in flight are answered."""
    from lengthwise.cli.options import quiet_loading
    from lengthwise.core.errors import LengthwiseError
    from lengthwise.service import serve as run_service

    quiet_loading()

    shown = index if backend == "local" or uri is None else f"{uri} ({name})"

    def ready(url: str) -> None:
        print(f"serving {shown} at {url} (API schema: {url}/openapi.json; stop with Ctrl-C or SIGTERM)", flush=True)
        for line in _warnings(config):  # once the address is bound: an address that cannot be bound says only that
            say(f"warning: {line}")

    try:
        config = ServeConfig(host, port, workers, api_key_file, max_batch, batch_wait_ms, threads=threads,
                             search_threads=search_threads, precision=precision, tokens=tokens,
                             token_weight=token_weight, token_around=token_around, token_depth=token_depth)  # fmt: skip
        run_service(index, config, on_ready=ready, backend=served(backend, uri, name))
    except LengthwiseError as err:  # SettingError, LongDocError, ModelLoadError
        _fail(_message(err, shown))
    except KeyboardInterrupt:
        pass
    say("stopped")
