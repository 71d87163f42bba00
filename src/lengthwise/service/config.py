"""The service's settings: where it listens, how it batches, and the caps on every request (safe by default).

Plain dataclasses, checked on construction with `SettingError`s that name the field; importing this module loads
neither FastAPI nor torch.
"""

from __future__ import annotations

import ipaddress
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from lengthwise.core.errors import SettingError
from lengthwise.core.parallel import SEARCH_THREADS_AT_MOST, default_search_threads
from lengthwise.search.types import TokenChoice

__all__ = ["KEY_FILE_MAX_BYTES", "Limits", "ServeConfig"]

KEY_FILE_MAX_BYTES = 4096  # an API key file holds one key: a few dozen bytes; anything larger is the wrong file


@dataclass(frozen=True)
class Limits:
    """What one request may ask for; anything beyond is refused with a 4xx JSON error naming the field.

    Args:
        max_body_bytes: The request body, in bytes (413 beyond).
        max_query_chars: One query's text, in characters.
        max_queries: Queries in one request.
        max_k: Documents per query.
        max_passages: Passages per hit.
        max_context: Characters of the document shown either side of a passage.
        max_candidates: The dense side's candidate windows and probes per query.
        max_inputs: Texts in one ``/v1/embeddings`` request (OpenAI's own cap is 2,048).
        max_input_chars: One ``/v1/embeddings`` text, in characters: a long document is read whole.
    """

    max_body_bytes: int = 1_000_000
    max_query_chars: int = 2_000
    max_queries: int = 64
    max_k: int = 1_000
    max_passages: int = 20
    max_context: int = 2_000
    max_candidates: int = 100_000
    max_inputs: int = 2_048
    max_input_chars: int = 1_000_000

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise SettingError(name, value, "must be a whole number ≥ 1")


@dataclass(frozen=True)
class ServeConfig:
    """How `lengthwise.service.serve` runs.

    Args:
        host: The address to bind; 127.0.0.1 (this machine only) unless told otherwise.
        port: The TCP port (0: any free port, printed when ready).
        workers: Server processes, each with its own model and index.
        api_key_file: A file holding the key every search, embed and info request must send as
            ``Authorization: Bearer KEY`` (none: no key asked).
        max_batch: Queries embedded and searched together at most.
        batch_wait_ms: How long the first query of a batch waits for others from concurrent requests.
        limits: The caps on one request.
        threads: Torch threads per worker (the query encoder and the exact rescoring); None: torch's default (one
            per core). With several workers on few cores, give 1: each worker's threads otherwise fight the others'.
        search_threads: Threads each worker searches the index on (batches searched at once, and each batch's
            queries spread over them); None: each worker's share of the available cores less one for its model
            thread (`search_threads_used`; one on two cores).
        precision: What the queries are embedded at (``auto``, ``fp32``, ``bf16``, ``fp16``, ``int8``); None: the
            precision the index's documents were embedded at (`QueryModel.set_query_precision`).
        tokens, token_weight, token_around, token_depth: A token folder whose tokens rescore each hybrid search's best
            documents, their share, the best windows whose tokens are read and how many documents are rescored
            (`Searchable.use_tokens`); None: no token side.
        shutdown_grace_s: After SIGTERM or Ctrl-C, how long the requests in flight are waited for; a client still
            sending or reading after that has its connection closed (one line in the log).
    """

    host: str = field(default="127.0.0.1", metadata={"help": "The address to bind (127.0.0.1: this machine only)."})
    port: int = field(default=8000, metadata={"help": "The TCP port (0: any free port)."})
    workers: int = field(default=1, metadata={"help": "Server processes, each loading the model and the index."})
    api_key_file: Path | None = field(
        default=None, metadata={"help": "A file holding the API key clients send as `Authorization: Bearer KEY`."}
    )
    max_batch: int = field(default=64, metadata={"help": "Queries embedded and searched together at most."})
    batch_wait_ms: float = field(
        default=2.0, metadata={"help": "Milliseconds a query waits for others to share its batch."}
    )
    limits: Limits = field(default_factory=Limits)
    threads: int | None = field(
        default=None, metadata={"help": "Torch threads per worker (default: one per core; with several workers, 1)."}
    )
    search_threads: int | None = field(
        default=None, metadata={"help": "Threads each worker searches on (default: its share of the cores, less one)."}
    )
    precision: str | None = field(
        default=None,
        metadata={"help": "The queries' precision: auto, fp32, bf16, fp16 or int8 (default: the index's)."},
    )
    tokens: Path | None = field(
        default=None,
        metadata={"help": "A folder of `lengthwise encode-tokens`: hybrid searches rescored by their tokens."},
    )
    token_weight: float | None = field(
        default=None, metadata={"help": "With tokens: the token side's share of the rescored score (default 0.5)."}
    )
    token_around: int | None = field(
        default=None, metadata={"help": "With tokens: read the tokens of a document's N best windows (8; 0: all)."}
    )
    token_depth: int | None = field(
        default=None, metadata={"help": "With tokens: the hybrid's best documents rescored by their tokens (30)."}
    )
    shutdown_grace_s: int = field(
        default=30, metadata={"help": "Seconds the requests in flight are waited for after SIGTERM or Ctrl-C."}
    )

    def __post_init__(self) -> None:
        if self.threads is not None and self.threads < 1:
            raise SettingError("threads", self.threads, "must be ≥ 1 (or left out for torch's default)")
        if self.search_threads is not None and not 1 <= self.search_threads <= SEARCH_THREADS_AT_MOST:
            raise SettingError("search_threads", self.search_threads, f"use 1–{SEARCH_THREADS_AT_MOST} (or leave it "
                               "out: each worker's share of the cores, less one)")  # fmt: skip
        if not 0 <= self.port <= 65535:
            raise SettingError("port", self.port, "use a TCP port in 0–65535 (0: any free port)")
        for name in ("workers", "max_batch"):
            if getattr(self, name) < 1:
                raise SettingError(name, getattr(self, name), "must be ≥ 1")
        if not 1 <= self.shutdown_grace_s <= 3600:
            raise SettingError("shutdown_grace_s", self.shutdown_grace_s, "use 1–3600 whole seconds")
        if not 0 <= self.batch_wait_ms <= 1000:
            raise SettingError("batch_wait_ms", self.batch_wait_ms, "use 0–1000 milliseconds")
        if self.precision is not None:
            from lengthwise.core.precision import Precision

            Precision.parse(self.precision)  # a misspelt name refuses before anything loads
        if not self.host or any(c.isspace() for c in self.host):
            raise SettingError("host", self.host, "give an address such as 127.0.0.1 or 0.0.0.0")

    @property
    def token_choice(self) -> TokenChoice:
        """The token stage asked for (`tokens`, `token_weight`, `token_around`, `token_depth`)."""
        return TokenChoice(self.tokens, self.token_weight, self.token_around, self.token_depth)

    @property
    def search_threads_used(self) -> int:
        """Each worker's search threads: `search_threads`, or its share of the available cores less one."""
        return self.search_threads or default_search_threads(self.workers)

    @property
    def public(self) -> bool:
        """Whether the host is reachable from other machines (anything but a loopback address)."""
        if self.host == "localhost":
            return False
        try:
            return not ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return True

    def api_key(self) -> str | None:
        """The key read from `api_key_file` (surrounding whitespace dropped), or None when no file is set.

        The file must be a regular file of at most `KEY_FILE_MAX_BYTES`: a device (``/dev/zero``), a FIFO or a
        folder is refused without reading from it, and a large file (the wrong one, given by mistake) unread.
        """
        if self.api_key_file is None:
            return None
        path = Path(self.api_key_file)
        try:
            key = _read_key_file(path).decode("utf-8").strip()
        except UnicodeDecodeError:
            raise SettingError("api_key_file", str(path), "is not UTF-8 text; put the key in it as text") from None
        if len(key) < 16 or any(c.isspace() for c in key):
            raise SettingError("api_key_file", str(path), "must hold one key of at least 16 characters, no spaces")
        return key

    def key_file_exposed(self) -> bool:
        """Whether `api_key_file` may be read by users other than its owner (group or others may read it)."""
        if self.api_key_file is None:
            return False
        try:
            mode = os.stat(self.api_key_file).st_mode
        except OSError:
            return False
        return os.name == "posix" and bool(mode & (stat.S_IRGRP | stat.S_IROTH))


def _read_key_file(path: Path) -> bytes:
    """The bytes of a key file: opened without blocking (a FIFO with no writer would wait forever), checked to be a
    regular file of at most `KEY_FILE_MAX_BYTES` before anything is read, then read up to that size."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        descriptor = os.open(path, flags)
    except OSError as error:
        raise SettingError("api_key_file", str(path), f"cannot be read ({error.strerror})") from None
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            problem = "is not a regular file (a folder, a device or a pipe); put the key in a file of its own"
            raise SettingError("api_key_file", str(path), problem)
        data = b"" if info.st_size > KEY_FILE_MAX_BYTES else os.read(descriptor, KEY_FILE_MAX_BYTES + 1)
        if max(info.st_size, len(data)) > KEY_FILE_MAX_BYTES:  # read: a file that grew, or /proc's (sized 0)
            size = f"{info.st_size:,} bytes" if info.st_size > KEY_FILE_MAX_BYTES else "more bytes than that"
            problem = (
                f"a key file holds one key ({KEY_FILE_MAX_BYTES:,} bytes at most), this one {size}; is it the key?"
            )
            raise SettingError("api_key_file", str(path), problem)
        return data
    except OSError as error:
        raise SettingError("api_key_file", str(path), f"cannot be read ({error.strerror})") from None
    finally:
        os.close(descriptor)
