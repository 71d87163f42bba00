"""Writing results: atomic JSON files, and the provenance that says how a result was made."""

from __future__ import annotations

import json
import os
import platform
import sys
import tempfile
import time
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any, TypedDict

__all__ = [
    "Provenance",
    "environment",
    "is_atomic_temp",
    "json_bytes",
    "provenance",
    "write_bytes_atomic",
    "write_json_atomic",
]

_PACKAGES = ("lengthwise", "torch", "transformers", "sentence-transformers", "numpy", "scipy", "tokenizers")


def write_bytes_atomic(path: str | Path, data: bytes) -> Path:
    """Write `data` to `path` through a temporary file and a rename, so readers never see a partial file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; results are meant to be read by others
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def is_atomic_temp(name: str, target: str | None = None) -> bool:
    """Whether a file `name` is the temporary file `write_bytes_atomic` writes before its rename (of `target`, or of
    any file): one being written now by another process, or one an interrupted write left behind."""
    prefix = "." if target is None else f".{target}."
    return name.startswith(prefix) and name.endswith(".tmp")


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def json_bytes(payload: Any) -> bytes:
    """`payload` as the indented UTF-8 JSON every result file holds (NaN and infinity refused: not JSON)."""
    return (json.dumps(payload, indent=2, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")


def write_json_atomic(path: str | Path, payload: Any) -> Path:
    """Write `payload` as indented UTF-8 JSON, atomically."""
    return write_bytes_atomic(path, json_bytes(payload))


def environment() -> dict[str, Any]:
    """Library versions, Python and platform: enough to say how a result was made."""
    versions: dict[str, str | None] = {}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return {"python": sys.version.split()[0], "platform": platform.platform(), "packages": versions}


class Provenance(TypedDict):
    """What made a result: the model's fingerprint, the data's description, the settings, when, how long, and
    the library versions. Every record (`audit.json`, `results.json`, `tune.json`, `train.json`) carries it."""

    model: dict[str, Any]
    data: dict[str, Any]
    settings: dict[str, Any]
    created: str
    wall_time_s: float
    environment: dict[str, Any]


def provenance(model: dict[str, Any], data: dict[str, Any], settings: dict[str, Any], *, started: float) -> Provenance:
    """The one place a result's provenance is built. `model` is `core.models.model_fingerprint(...)`, `data` the
    data's own description (with its hash), `started` a `time.perf_counter()` reading taken before the work."""
    return Provenance(
        model=model,
        data=data,
        settings=settings,
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        wall_time_s=round(time.perf_counter() - started, 3),
        environment=environment(),
    )
