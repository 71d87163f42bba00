"""HTML building blocks of the reports (a leaf: imports nothing from lengthwise): escaping, tables, images, CSS
and the page frame. Everything user-supplied goes through `escape_html`.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Iterator, Mapping, Sequence
from importlib import metadata
from typing import Any

__all__ = [
    "REPORT_CSS",
    "cells",
    "escape_html",
    "html_image",
    "html_kv_table",
    "html_page",
    "html_table",
    "lengthwise_version",
]

REPORT_CSS = """
body{font:15px/1.5 -apple-system,"Segoe UI",Helvetica,Arial,sans-serif;color:#1d1d1f;max-width:960px;margin:2em auto}
h1{font-size:1.6em;margin-bottom:.2em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ddd}body{padding:0 1em}
.verdict{font-size:1.1em;background:#f4f6fa;border-left:4px solid #3b6ea8;padding:.6em 1em}.note{color:#666}
.warning{background:#fff6e5;border-left:4px solid #d08a00;padding:.5em 1em}
table{border-collapse:collapse;margin:.6em 0;font-size:.92em}th{background:#fafafa}td{word-break:break-word}
th,td{padding:.25em .8em;border-bottom:1px solid #e6e6e6;text-align:left;vertical-align:top}td.key{color:#555}
td.num{text-align:right;font-variant-numeric:tabular-nums}figure{margin:1em 0}img{max-width:100%;height:auto}
figcaption{color:#555;font-size:.9em}footer{margin-top:3em;color:#777;font-size:.85em;border-top:1px solid #ddd}
"""


def escape_html(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _fmt(value: Any) -> str:
    """A plain-text rendering of one value for a table cell (not yet escaped)."""
    if value is None or value == {} or value == []:
        return "—"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, list | tuple):
        return ", ".join(_fmt(item) for item in value)
    if isinstance(value, Mapping):
        return ", ".join(f"{key}: {_fmt(item)}" for key, item in value.items())
    return str(value)


def _flatten(mapping: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Nested dicts → (dotted key, leaf value) pairs, in order."""
    for key, value in mapping.items():
        if isinstance(value, Mapping) and value:
            yield from _flatten(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def html_kv_table(rows: Sequence[tuple[str, Any]] | Mapping[str, Any]) -> str:
    """A two-column key/value table; a mapping is flattened to dotted keys."""
    items = list(_flatten(rows)) if isinstance(rows, Mapping) else list(rows)
    if not items:
        return '<p class="note">—</p>'
    body = "".join(f'<tr><td class="key">{escape_html(k)}</td><td>{escape_html(_fmt(v))}</td></tr>' for k, v in items)
    return f"<table>{body}</table>"


def html_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A table whose first column is a label and the others right-aligned numbers."""
    head = "".join(f"<th>{escape_html(cell)}</th>" for cell in header)
    numbers = ["".join(f'<td class="num">{escape_html(cell)}</td>' for cell in row[1:]) for row in rows]
    body = "".join(f"<tr><td>{escape_html(row[0])}</td>{nums}</tr>" for row, nums in zip(rows, numbers, strict=True))
    return f"<table><tr>{head}</tr>{body}</table>"


def cells(stats: Mapping[str, Any], *fields: str) -> list[str]:
    """``stats[key]`` formatted for each ``"key:spec"`` field, e.g. ``cells(row, "mean:.3f")``."""
    return [format(stats[key], spec) for key, spec in (field.split(":", 1) for field in fields)]


def html_image(png: bytes | None, alt: str, caption: str) -> str:
    """An inline PNG (base64 data URI) with its caption; empty when there is no image."""
    if png is None:
        return ""
    image = f'<img src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}" alt="{escape_html(alt)}">'
    return f"<figure>{image}<figcaption>{escape_html(caption)}</figcaption></figure>"


def html_page(title: str, parts: Sequence[str], *, viewport: bool = True) -> str:
    """A self-contained page: `title` is escaped here; `parts` are HTML fragments already escaped."""
    head = '<meta charset="utf-8">'
    if viewport:
        head += '<meta name="viewport" content="width=device-width, initial-scale=1">'
    head += f"<title>{escape_html(title)}</title><style>{REPORT_CSS}</style>"
    body = "\n".join(part for part in parts if part)
    return f'<!DOCTYPE html>\n<html lang="en"><head>{head}</head>\n<body>\n{body}\n</body></html>\n'


def lengthwise_version() -> str:
    try:
        return metadata.version("lengthwise")
    except metadata.PackageNotFoundError:
        return "unknown"
