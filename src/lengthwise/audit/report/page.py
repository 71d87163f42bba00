"""The audit report page: read ``audit.json`` (checked against its schema), draw every plot, assemble
``report.html`` from the sections, and write the whole output set at once.

Sections come from the section modules in `SECTIONS` (attack, document diagnostics, retrieval length bias), each
with ``PNG_NAMES``, ``figures(payload)`` and ``html_sections(payload, images)``; this is the only module that
joins them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lengthwise.audit.report import _attack as attack
from lengthwise.audit.report import _documents as documents
from lengthwise.audit.report import _retrieval as retrieval
from lengthwise.audit.report.html import escape_html, html_kv_table, html_page, lengthwise_version
from lengthwise.audit.schema import AuditPayload, check_payload
from lengthwise.core._plotting import png_bytes
from lengthwise.core.errors import DataFormatError
from lengthwise.core.output_set import write_output_set

__all__ = [
    "OUTPUT_NAMES",
    "SECTIONS",
    "load_payload",
    "render_html",
    "report_files",
    "write_report",
]

SECTIONS = (attack, documents, retrieval)  # in page order; add a module here to add a section
PNG_NAMES: dict[str, str] = {key: name for section in SECTIONS for key, name in section.PNG_NAMES.items()}
OUTPUT_NAMES = frozenset({"audit.json", "report.html", *PNG_NAMES.values()})  # what an audit folder may hold
_FIX = "pass an audit output directory or its audit.json, as written by `lengthwise audit`"


def load_payload(path: str | Path) -> AuditPayload:
    """Read an audit from its output directory or its ``audit.json``; a `DataFormatError` naming the file (and the
    first missing or mistyped field) when it is not a complete audit."""
    path = Path(path)
    file = path / "audit.json" if path.is_dir() else path
    if not file.is_file():
        raise DataFormatError(None, None, f"no audit at {file}: {_FIX}")
    try:
        payload = json.loads(file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise DataFormatError(None, None, f"{file} is not valid JSON ({error}): {_FIX}") from None
    except OSError as error:
        raise DataFormatError(None, None, f"{file}: cannot read ({error.strerror})") from None
    return check_payload(payload, str(file))


def render_html(payload: AuditPayload, images: Mapping[str, bytes]) -> str:
    """The self-contained report page; `images` maps keys of `PNG_NAMES` to PNG bytes (missing: no image)."""
    model, meta = payload.get("model") or {}, payload.get("meta") or {}
    name = str(model.get("name") or "unknown model")
    if model.get("precision", "fp32") != "fp32":  # a half or quantized model's numbers are not fp32's
        name += f" · {model['precision']}"
    parts = [f"<h1>lengthwise audit — {escape_html(name)}</h1>"]
    for section in SECTIONS:
        parts += section.html_sections(payload, images)
    parts += ["<h2>Tokens</h2>", html_kv_table(attack.token_rows(payload))]
    environment = meta.get("environment") or {}
    tables = {"Settings": payload.get("settings"), "Model": model, "Data": payload.get("data")}
    for title, table in {**tables, "Environment": environment}.items():
        parts.append(f"<h2>{title}</h2>{html_kv_table(table or {})}")
    made_with = (environment.get("packages") or {}).get("lengthwise") or "unknown"
    made = f"Audit made with lengthwise {made_with} on {meta.get('created', 'an unknown date')}"
    made += f" in {meta.get('seconds', '?')} s; report rendered by lengthwise {lengthwise_version()}."
    parts.append(f"<footer>{escape_html(made)}</footer>")
    return html_page(f"lengthwise audit — {name}", parts)


def report_files(payload: AuditPayload, *, with_json: bool = True) -> dict[str, tuple[str, bytes]]:
    """The output set of one audit: {what: (file name, bytes)} for every plot the audit has data for (keys of
    `PNG_NAMES`), ``html`` (report.html) and ``json`` (audit.json, unless `with_json` is False)."""
    figures: dict[str, Any] = {}
    for section in SECTIONS:
        figures |= section.figures(payload)
    images = {key: png_bytes(figure) for key, figure in figures.items() if figure is not None}
    files = {key: (PNG_NAMES[key], png) for key, png in images.items()}
    files["html"] = ("report.html", render_html(payload, images).encode("utf-8"))
    if with_json:
        text = json.dumps(payload, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
        files["json"] = ("audit.json", text.encode("utf-8"))
    return files


def write_report(payload: AuditPayload, out_dir: str | Path) -> dict[str, Path]:
    """Write ``audit.json``, the PNG plots and ``report.html`` into `out_dir` as one set (a plot an earlier
    report left there and this audit has no data for is gone); return {what: path written}, keys as in
    `report_files`."""
    check_payload(payload, "payload")
    files = report_files(payload)
    out = write_output_set(Path(out_dir), dict(files.values()), OUTPUT_NAMES, what="an audit")
    return {key: out / name for key, (name, _) in files.items()}
