"""Documents for the document diagnostics: JSONL with a ``text`` field, or plain text with one per line.

Every document is checked before any model work (`lengthwise.core._textio.checked_text`); a bad line raises
`DataFormatError` naming the file and the line.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lengthwise.core._textio import checked_text, open_text
from lengthwise.core.errors import DataFormatError, SettingError

__all__ = ["DocSet", "read_docs"]

_HINT = "expected JSONL with a 'text' field (optional 'title') or plain text with one document per line"


@dataclass(frozen=True)
class DocSet:
    """Documents plus where they came from; `sha256` hashes the texts, so a sample has its own fingerprint.

    `origins` (``file:line`` per document, optional) name documents in errors; they take no part in equality.
    """

    texts: tuple[str, ...]
    source: str
    fmt: str
    n_in_file: int
    origins: tuple[str, ...] = field(default=(), compare=False)
    sha256: str = field(init=False)

    def __post_init__(self) -> None:
        if not self.texts:
            raise DataFormatError(None, None, f"{self.source}: no documents found; {_HINT}")
        if self.origins and len(self.origins) != len(self.texts):
            raise SettingError("origins", len(self.origins), f"origins for {len(self.texts)} documents; give one each")
        digest = hashlib.sha256()
        for text in self.texts:
            digest.update(text.encode() + b"\n")
        object.__setattr__(self, "sha256", digest.hexdigest())

    def names(self) -> list[str]:
        """A name for each document in error messages: ``file:line`` when known, else ``document #i``."""
        return list(self.origins) if self.origins else [f"document #{i}" for i in range(len(self.texts))]

    def describe(self) -> dict[str, Any]:
        fields = ("source", "fmt", "n_in_file", "sha256")
        return {"n_docs": len(self.texts), **{name: getattr(self, name) for name in fields}}


def read_docs(path: str | Path, *, max_docs: int | None = None, seed: int = 0) -> DocSet:
    """Documents from JSONL (``text``; a non-empty ``title`` is prepended as ``title + " " + text``) or plain
    text, one document per line (blank lines skipped); ``.gz`` is fine. `max_docs` keeps a seeded sample in
    file order. A bad line raises `DataFormatError` naming the file and line.
    """
    path = Path(path)
    if max_docs is not None and max_docs < 1:
        raise SettingError("max_docs", max_docs, "use at least 1")
    if not path.is_file():
        what = "is a directory" if path.is_dir() else "no such file"
        raise DataFormatError(None, None, f"{path}: {what}; {_HINT}")
    texts: list[str] = []
    origins: list[str] = []
    fmt = ""
    with open_text(path) as handle:
        for line_no, line in handle.lines():
            if not (stripped := line.strip()):
                continue
            fmt = fmt or ("jsonl" if stripped.startswith("{") else "lines")
            text = _jsonl_text(path, line_no, stripped) if fmt == "jsonl" else stripped
            texts.append(checked_text(path, line_no, text, "text"))
            origins.append(f"{path}:{line_no}")
    total, source = len(texts), str(path)
    if max_docs is not None and max_docs < total:
        keep = sorted(random.Random(seed).sample(range(total), max_docs))
        texts, origins = [texts[i] for i in keep], [origins[i] for i in keep]
        source = f"{path} (sample of {max_docs}, seed {seed})"
    return DocSet(tuple(texts), source, fmt or "lines", total, tuple(origins))


def _jsonl_text(path: Path, line_no: int, line: str) -> object:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as error:
        raise DataFormatError(None, None, f"{path}:{line_no}: not valid JSON ({error.msg}); {_HINT}") from None
    except RecursionError:
        raise DataFormatError(None, None, f"{path}:{line_no}: JSON nested too deeply; {_HINT}") from None
    if not isinstance(row, dict) or "text" not in row:
        raise DataFormatError(None, None, f"{path}:{line_no}: no 'text' field; {_HINT}")
    title, text = row.get("title"), row["text"]
    return f"{title.strip()} {text}" if isinstance(title, str) and title.strip() and isinstance(text, str) else text
