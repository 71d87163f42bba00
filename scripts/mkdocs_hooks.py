"""mkdocs hooks: put the repository's top-level pages into the site and keep every link valid.

- README.md, ARCHITECTURE.md and CHANGELOG.md live at the repository root, where GitHub and PyPI show
  them. The site takes them as index.md, architecture.md and changelog.md, with their links rewritten
  from the root to docs/ (``docs/audit.md`` → ``audit.md``).
- A page may link to a file outside docs/ (``../benchmarks/README.md``). The link works on GitHub, but
  the site has no such page. The link becomes its text followed by the path in code, so
  ``mkdocs build --strict`` can still fail on every link that is really broken.
"""

from __future__ import annotations

import logging
import posixpath
import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

log = logging.getLogger("mkdocs.hooks.lengthwise")
ROOT_PAGES = {"README.md": "index.md", "ARCHITECTURE.md": "architecture.md", "CHANGELOG.md": "changelog.md"}
LINK = re.compile(r"(?P<bang>!?)\[(?P<text>[^\]\n]*)\]\((?P<target>[^)\s#]+)(?P<anchor>#[^)\s]*)?\)")


def _root(config: Any) -> Path:
    return Path(config["docs_dir"]).resolve().parent


def on_files(files: Files, config: Any) -> Files:
    """Add the root pages as generated files (not copied into docs/, so there is one source for each)."""
    root = _root(config)
    for source, target in ROOT_PAGES.items():
        if (root / source).is_file() and files.get_file_from_path(target) is None:
            files.append(File.generated(config, target, abs_src_path=str(root / source)))
    for uri, content in api_pages(root).items():
        files.append(File.generated(config, uri, content=content))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """Rewrite links of root pages to docs/ paths; turn links that leave docs/ into plain text and a path."""
    root = _root(config)
    docs = Path(config["docs_dir"]).resolve()
    from_root = (
        page.file.src_uri in ROOT_PAGES.values()
        and page.file.abs_src_path is not None
        and (Path(page.file.abs_src_path).resolve().parent == root)
    )
    base = root if from_root else (docs / page.file.src_uri).parent

    def rewrite(match: re.Match[str]) -> str:
        target = match["target"]
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("/"):
            return match[0]  # a URL or an absolute path: leave it to mkdocs' own checks
        resolved = Path(posixpath.normpath((base / target).as_posix()))
        anchor = match["anchor"] or ""
        if resolved.is_relative_to(docs):
            if from_root:
                return f"{match['bang']}[{match['text']}]({resolved.relative_to(docs).as_posix()}{anchor})"
            return match[0]
        if match["bang"]:
            return match[0]  # an image outside docs/: mkdocs reports it
        if resolved.is_relative_to(root) and resolved.exists():
            path = resolved.relative_to(root).as_posix()
            for source, generated in ROOT_PAGES.items():
                if path == source:  # a root page the site also has
                    link = posixpath.relpath(generated, posixpath.dirname(page.file.src_uri) or ".")
                    return f"[{match['text']}]({link}{anchor})"
            return match["text"] if f"`{path}`" in match["text"] else f"{match['text']} (`{path}`)"
        return match[0]  # broken: mkdocs reports it

    return LINK.sub(rewrite, markdown)


# --- API reference, generated from the package tree so that it never drifts from the code ------------------

PACKAGE = "lengthwise"
API_GROUPS = {  # page → (title, what the page covers, packages whose public modules it renders)
    "core": ("The hall: `lengthwise.core`", "Tokens, embedding, models, the encoder protocol, bins, data, results."),
    "audit": ("Audit: `lengthwise.audit`", "The elongation attack, the shift statistics and the diagnostics."),
    "tempscale": ("TempScale: `lengthwise.tempscale`", "Attention temperature: settings, patching, baking, tuning."),
    "longdoc": ("Long documents: `lengthwise.longdoc`", "Texts longer than the model's window."),
    "evaluation": ("Evaluation: `lengthwise.evaluation`", "STS, retrieval and classification, overall and by length."),
    "training": ("Training: `lengthwise.training`", "Length-aware objectives on the sentence-transformers trainer."),
    "integrations": (
        "Integrations: `lengthwise.integrations`",
        "The index as a LangChain, LlamaIndex or Haystack retriever.",
    ),
}


def _public_modules(package_dir: Path, dotted: str) -> list[str]:
    """Every module under `package_dir` whose dotted path has no part starting with an underscore."""
    found = []
    for path in sorted(package_dir.rglob("*.py")):
        parts = path.relative_to(package_dir).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if any(part.startswith("_") for part in parts):
            continue
        found.append(".".join([dotted, *parts]))
    return found


def _exports_table(init: Path) -> str:
    """The facade's public names (its `_EXPORTS` table, read without importing it) as a markdown table."""
    import ast

    tree = ast.parse(init.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "_EXPORTS" for t in node.targets):
            exports = ast.literal_eval(node.value)
            rows = "\n".join(f"| `{name}` | `{module}` |" for name, module in sorted(exports.items()))
            return "| name | defined in |\n| --- | --- |\n" + rows + "\n"
    return ""


def api_pages(root: Path) -> dict[str, str]:
    """src_uri → markdown of each API reference page."""
    src = root / "src" / PACKAGE
    index = [
        "# API reference",
        "",
        "Rendered from the docstrings. `import lengthwise` loads no torch: each name below is imported from",
        "its module on first use (PEP 562). The rooms import only the hall, see [Architecture](../architecture.md).",
        "",
        _exports_table(src / "__init__.py"),
        "| page | covers |",
        "| --- | --- |",
    ]
    pages = {}
    for group, (title, summary) in API_GROUPS.items():
        modules = _public_modules(src / group, f"{PACKAGE}.{group}") if (src / group).is_dir() else []
        if not modules:
            continue
        body = [f"# {title}", "", summary, ""]
        for module in modules:
            body += [f"::: {module}", "    options:", "      show_submodules: false", ""]
        pages[f"api/{group}.md"] = "\n".join(body)
        index.append(f"| [{title}]({group}.md) | {summary} |")
    pages["api/index.md"] = "\n".join(index) + "\n"
    return pages


# guides other work in progress adds; listed in the nav now, shown once the page exists
OPTIONAL_PAGES = {"longdoc.md", "reliability.md"}


def _drop_missing_optional(items: list[Any], docs: Path) -> list[Any]:
    kept = []
    for item in items:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        if isinstance(value, list):
            kept.append({next(iter(item)): _drop_missing_optional(value, docs)})
        elif isinstance(value, str) and value in OPTIONAL_PAGES and not (docs / value).is_file():
            log.info("nav: %s is not written yet; left out of the site", value)
        else:
            kept.append(item)
    return kept


def on_config(config: Any) -> Any:
    """Fill the nav's "API reference" section with the generated pages; leave out optional guides not yet written."""
    pages = api_pages(_root(config))
    for item in config["nav"] or []:
        if isinstance(item, dict) and "API reference" in item:
            item["API reference"] = [{"Overview": "api/index.md"}] + [
                {API_GROUPS[uri.split("/")[1][:-3]][0].split(":")[0]: uri} for uri in pages if uri != "api/index.md"
            ]
    config["nav"] = _drop_missing_optional(config["nav"] or [], Path(config["docs_dir"]))
    return config


# --- "METHODS §N" in any page (docstrings included) links to that section of methods.md ---------------------

CITATION = re.compile(r"(?<![>\w/#])METHODS §(\d+)")


def on_page_content(html: str, page: Any, config: Any, files: Files) -> str:
    """Link each "METHODS §N" that is not already inside a link to docs/methods.md#sN."""
    methods = files.get_file_from_path("methods.md")
    if methods is None:
        return html
    target = "" if page.file.src_uri == "methods.md" else methods.url_relative_to(page.file)
    return CITATION.sub(lambda m: f'<a href="{target}#s{m[1]}">METHODS §{m[1]}</a>', html)
