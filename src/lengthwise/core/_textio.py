"""Reading text files safely: every reader in lengthwise goes through here.

A file (plain or ``.gz``) is decoded as UTF-8 *line by line*, so a bad byte is reported on the line that holds
it; a truncated or corrupt gzip stream, a directory or an unreadable file is a `DataFormatError` naming the
file, never a bare ``EOFError`` or a traceback. `checked_text` is the one check every text passes before any
model work (empty, invisible-only, too long), and `delimited_rows` is the one CSV/TSV row reader.
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import json
import re
import unicodedata
import zlib
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO

from lengthwise.core.errors import DataFormatError
from lengthwise.core.tokens import MAX_TEXT_CHARS

__all__ = [
    "TextFile",
    "checked_text",
    "delimited_rows",
    "json_type",
    "jsonl_objects",
    "open_text",
    "row_id",
]

_CR_ONLY = re.compile(r"(?<=\r)(?!\n|$)")  # a lone carriage return ends a line too, as universal newlines do
_INVISIBLE = {"Cc", "Cf", "Cs", "Mn", "Me", "Zs", "Zl", "Zp"}  # control, format (zero-width), marks, separators


class TextFile:
    """A UTF-8 text file opened for reading lines (a leading BOM is dropped; ``.gz`` is gunzipped on the fly).

    Iterating gives the lines with their line ends, as a text file opened with ``newline=""`` does. Decoding
    and decompression faults raise `DataFormatError` naming the file and the line they occur on.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.line_no = 0  # lines handed out so far
        self._pending: list[str] = []
        try:
            self._raw: gzip.GzipFile | BinaryIO = (
                gzip.GzipFile(self.path, "rb") if self.path.suffix == ".gz" else open(self.path, "rb")  # noqa: SIM115
            )
        except IsADirectoryError:
            raise DataFormatError(None, None, f"{self.path}: is a directory; pass a file") from None
        except FileNotFoundError:
            raise DataFormatError(None, None, f"{self.path}: no such file") from None
        except OSError as err:
            raise DataFormatError(
                None, None, f"{self.path}: cannot open ({err.strerror or err}); check the path"
            ) from None

    def __enter__(self) -> TextFile:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        with contextlib.suppress(OSError, EOFError, zlib.error):  # closing a corrupt gzip stream may fail too
            self._raw.close()

    def __iter__(self) -> TextFile:
        return self

    def __next__(self) -> str:
        line = self.readline()
        if not line:
            raise StopIteration
        return line

    def readline(self) -> str:
        """The next line with its line end, or ``""`` at the end of the file."""
        if not self._pending:
            raw = self._read_raw()
            if not raw:
                return ""
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise DataFormatError(
                    None,
                    None,
                    f"{self.path}:{self.line_no + 1}: not UTF-8 text ({err.reason} at byte {err.start} of the line); "
                    "re-encode the file as UTF-8",
                ) from None
            if self.line_no == 0:
                text = text.removeprefix("\ufeff")
            self._pending = _CR_ONLY.split(text)[::-1]
        self.line_no += 1
        return self._pending.pop()

    def read(self) -> str:
        """The rest of the file as one string."""
        return "".join(self)

    def lines(self) -> Iterator[tuple[int, str]]:
        """(line number, line) for the rest of the file, numbered from 1."""
        for line in self:
            yield self.line_no, line

    def _read_raw(self) -> bytes:
        try:
            return self._raw.readline()
        except (EOFError, zlib.error, gzip.BadGzipFile) as err:
            raise DataFormatError(
                None,
                None,
                f"{self.path}:{self.line_no + 1}: the gzip data is truncated or corrupt ({err}); "
                "re-download or re-compress the file",
            ) from None
        except OSError as err:
            raise DataFormatError(
                None, None, f"{self.path}:{self.line_no + 1}: cannot read ({err.strerror or err})"
            ) from None


def open_text(path: str | Path) -> TextFile:
    """Open a UTF-8 text file (plain or ``.gz``) for reading lines; see `TextFile`."""
    return TextFile(path)


def _visible(text: str) -> bool:
    return any(not ch.isspace() and unicodedata.category(ch) not in _INVISIBLE for ch in text)


def checked_text(path: str | Path, line: int, text: object, which: str) -> str:
    """`text` stripped, or a `DataFormatError` naming file and line when it is missing, not a string (a JSON number,
    list…), empty, holds no visible character (only whitespace, zero-width or control characters) or is over the
    size limit."""
    if text is None:
        raise DataFormatError(None, None, f"{path}:{line}: {which} is missing or null; remove the row or fill it in")
    if not isinstance(text, str):
        raise DataFormatError(
            None, None, f"{path}:{line}: {which} is {json_type(text)}, not a string; give the text as a JSON string"
        )
    if not text.strip():
        raise DataFormatError(
            None, None, f"{path}:{line}: {which} is empty or whitespace-only; remove the row or fill it in"
        )
    if len(text) > MAX_TEXT_CHARS:
        raise DataFormatError(
            None,
            None,
            f"{path}:{line}: {which} has {len(text):,} characters (limit {MAX_TEXT_CHARS:,}); split or cut it",
        )
    if not _visible(text):
        raise DataFormatError(
            None,
            None,
            f"{path}:{line}: {which} has no visible character (only zero-width, control or space characters); "
            "remove the row or fill it in",
        )
    return text.strip()


def json_type(value: object) -> str:
    """What a value read from JSON is, as a message names it: ``null``, ``a boolean``, ``a number``, ``a list``…"""
    if value is None:
        return "null"
    kinds = ((bool, "a boolean"), ((int, float), "a number"), (str, "a string"), (list, "a list"), (dict, "an object"))
    return next((name for kind, name in kinds if isinstance(value, kind)), type(value).__name__)


def row_id(path: str | Path, line: int, row: dict[str, Any], default: int | None, what: str = "document") -> str:
    """A JSONL row's id: its ``_id``, else its ``id``, else `default` (the line number, where a reader allows it).

    A string, or an integer read as its digits; anything else (``null``, a boolean, a float, a list…) is a
    `DataFormatError` naming file, line and key: ``"_id": null`` would otherwise be the id ``"None"``.
    """
    key = "_id" if "_id" in row else "id" if "id" in row else None
    value = default if key is None else row[key]
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        kind = "a float" if isinstance(value, float) else json_type(value)
        raise DataFormatError(
            None, None, f"{path}:{line}: {key or '_id'} is {kind}; give every {what} its own id (a string)"
        )
    return str(value)


def jsonl_objects(path: str | Path, what: str = "a JSON object") -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line of a JSONL file; bad lines raise naming file and line."""
    with open_text(path) as handle:
        for line_no, line in handle.lines():
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise DataFormatError(
                    None, None, f"{path}:{line_no}: not valid JSON ({err.msg}); one JSON object per line"
                ) from None
            except RecursionError:
                raise DataFormatError(
                    None, None, f"{path}:{line_no}: JSON nested too deeply; one flat object per line"
                ) from None
            if not isinstance(row, dict):
                raise DataFormatError(None, None, f"{path}:{line_no}: expected {what}")
            yield line_no, row


def _csv_rows(path: Path, delimiter: str) -> Iterator[tuple[int, list[str]]]:
    """Rows with standard quoting, numbered by the line where each row starts.

    The reader is strict: a quote that does not close where a field ends (an unbalanced quote, which would
    silently swallow the following rows into one field) is an error naming the row's first line.
    """
    csv.field_size_limit(max(csv.field_size_limit(), 4 * MAX_TEXT_CHARS))  # let the length check name the row
    with open_text(path) as handle:
        reader = csv.reader(handle, delimiter=delimiter, strict=True)
        start = 1
        while True:
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as err:
                raise DataFormatError(
                    None, None, f"{path}:{start}: malformed CSV ({err}); check for an unbalanced quote in this row"
                ) from None
            yield start, row
            start = reader.line_num + 1


def _tab_rows(path: Path) -> Iterator[tuple[int, list[str]]]:
    """Tab-separated rows with no quoting (STS files contain bare quotes), numbered by file line."""
    with open_text(path) as handle:
        for line_no, line in handle.lines():
            yield line_no, line.rstrip("\r\n").split("\t")


def delimited_rows(path: str | Path) -> Iterator[tuple[int, list[str]]]:
    """(line number, cells) of a CSV or TSV file (plain or ``.gz``): the one row reader of audit and eval.

    A ``.csv`` whose first line has no tab is comma-separated with standard (strict) quoting; anything else is
    tab-separated with no quoting, as the STS files are. Blank rows are yielded as they are.
    """
    path = Path(path)
    name = path.name.removesuffix(".gz")
    if name.endswith(".csv"):
        with open_text(path) as handle:
            first = handle.readline()
        if "\t" not in first:
            return _csv_rows(path, ",")
    return _tab_rows(path)
