"""The optional dependencies (pyproject.toml's extras) and the one refusal when one is missing.

Every command that needs an extra imports it through `require` before any work, so a missing package is one line
naming the extra to install (``needs fastapi and uvicorn, not installed: pip install 'lengthwise[serve]'``), not a
traceback ending in ``No module named 'fastapi'``. `missing_extra` reads an import that escaped that check (a
module imported deeper down) the same way; the command line prints it instead of the traceback.

Example:
    >>> faiss = require("faiss", extra="index", field="engine", value="faiss")  # doctest: +SKIP
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

from lengthwise.core.errors import SettingError

__all__ = ["EXTRAS", "MissingExtra", "install_hint", "missing_extra", "require"]

# the top-level module imported → (the package that installs it, the extra of lengthwise that brings it)
EXTRAS: dict[str, tuple[str, str]] = {
    "fastapi": ("fastapi", "serve"),
    "uvicorn": ("uvicorn", "serve"),
    "httpx": ("httpx", "serve"),
    "faiss": ("faiss-cpu", "index"),
    "usearch": ("usearch", "index"),
    "bm25s": ("bm25s", "index"),
    "Stemmer": ("PyStemmer", "index"),
    "ray": ("ray[data]", "ray"),
    "pyarrow": ("pyarrow", "parquet"),
    "datasets": ("datasets", "train"),  # also `hub`: `require` names the extra its caller needs
    "accelerate": ("accelerate", "train"),
    "yaml": ("pyyaml", "train"),
    "mteb": ("mteb", "mteb"),
    "pymilvus": ("pymilvus", "milvus"),
    "milvus_lite": ("milvus-lite", "milvus"),
    "langchain_core": ("langchain-core", "langchain"),
    "llama_index": ("llama-index-core", "llamaindex"),
    "haystack": ("haystack-ai", "haystack"),
}


class MissingExtra(SettingError, ModuleNotFoundError):
    """An optional dependency is not installed; the message names the extra that installs it.

    A `SettingError` (the setting that asked for it is `field`, when there is one) and a `ModuleNotFoundError`
    (``name``: the module), so code written against either catches it.
    """


def install_hint(extra: str) -> str:
    """``pip install 'lengthwise[EXTRA]'`` (quoted: the brackets are a shell pattern)."""
    return f"pip install 'lengthwise[{extra}]'"


def _packages(modules: list[str]) -> str:
    names = list(dict.fromkeys(EXTRAS.get(module.partition(".")[0], (module, ""))[0] for module in modules))
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def require(
    *modules: str, extra: str, field: str | None = None, value: Any = None, purpose: str | None = None
) -> ModuleType:
    """Import `modules` (dotted names allowed) and return the first, or raise `MissingExtra` naming every one
    missing and the extra that installs them.

    Args:
        modules: The modules the feature imports, the one returned first.
        extra: The extra of lengthwise that installs them (``serve``, ``index``, ``ray``…).
        field: The setting that asked for the feature (``engine``, ``runner``…), so the CLI names its flag; None
            when the whole command needs it (then `purpose` names the command's work).
        value: That setting's value.
        purpose: What needs them, e.g. ``"serving"``; the message begins with it when there is no `field`.

    Returns:
        The first module of `modules`.

    Raises:
        MissingExtra: A module could not be imported.
    """
    found: dict[str, ModuleType] = {}
    missing: list[str] = []
    for module in modules:
        try:
            __import__(module)  # through builtins.__import__, as a plain `import` statement (and its hooks) goes
            found[module] = sys.modules[module]
        except ImportError:
            missing.append(module)
    if missing:
        problem = f"needs {_packages(missing)}, not installed: {install_hint(extra)}"
        error = MissingExtra(field, value, f"{purpose} {problem}" if purpose and not field else problem)
        error.name = missing[0]
        raise error
    return found[modules[0]]


def missing_extra(error: BaseException) -> str | None:
    """One line for an import of an optional dependency that failed outside `require`, or None when `error` is
    not one: ``faiss-cpu is not installed: pip install 'lengthwise[index]'``."""
    if isinstance(error, MissingExtra):
        return None  # already one line, printed by the command
    name = getattr(error, "name", None) if isinstance(error, ModuleNotFoundError) else None
    if not name or name.partition(".")[0] not in EXTRAS:
        return None
    package, extra = EXTRAS[name.partition(".")[0]]
    return f"{package} is not installed: {install_hint(extra)}"
