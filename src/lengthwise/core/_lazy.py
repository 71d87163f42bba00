"""PEP 562 lazy re-exports: a package names its public objects without importing their modules.

`import lengthwise` and `import lengthwise.cli` must not load torch; a package's `__init__` therefore maps each
public name to the submodule that defines it and imports that submodule on first attribute access.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, exports: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """`(__getattr__, __dir__)` for `package`: `exports` maps a public name to its module, relative to the
    package (``"apply"``) or absolute (``"lengthwise.core.models"``); a name mapped to the subpackage of the
    same name gives that subpackage."""

    def __getattr__(name: str) -> Any:
        module_name = exports.get(name)
        if module_name is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        target = module_name if module_name.startswith("lengthwise.") else f"{package}.{module_name}"
        module = importlib.import_module(target)
        return module if target == f"{package}.{name}" else getattr(module, name)  # a subpackage names itself

    def __dir__() -> list[str]:
        return sorted(exports)

    return __getattr__, __dir__
