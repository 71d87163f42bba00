"""Old import paths (lengthwise 0.1's flat modules) as aliases of their new homes, for one release.

`import lengthwise.tokens` still works: it gives a thin module whose attributes are read from
`lengthwise.core.tokens`, with a `DeprecationWarning` naming the new path. Where an old module's names went to
more than one place, `ALSO` names the other homes, searched in order after the main one. Removed in 0.3.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType

__all__ = ["ALSO", "MOVED", "install"]

MOVED = {
    "lengthwise.tokens": "lengthwise.core.tokens",
    "lengthwise.embed": "lengthwise.core.embed",
    "lengthwise.models": "lengthwise.core.models",
    "lengthwise.encoder": "lengthwise.core.encoder",
    "lengthwise.pairs": "lengthwise.core.data",
    "lengthwise.results": "lengthwise.core.results",
    "lengthwise.evaluation.bins": "lengthwise.core.bins",
    "lengthwise.shift": "lengthwise.audit.shift",
    "lengthwise.diagnostics": "lengthwise.audit.metrics",
    "lengthwise.doc_audit": "lengthwise.audit.documents",
    "lengthwise.report": "lengthwise.audit.report.page",
    "lengthwise.report_docs": "lengthwise.audit.report.documents",
    "lengthwise.compare": "lengthwise.audit.report.compare",
    "lengthwise.tempscale_config": "lengthwise.tempscale.config",
    "lengthwise.tempscale_families": "lengthwise.tempscale.families",
    "lengthwise.tempscale_patch": "lengthwise.tempscale.patch",
    "lengthwise.tempscale_tune": "lengthwise.tempscale.tune",
    "lengthwise.cli_console": "lengthwise.cli.console",
    "lengthwise.eval_cli": "lengthwise.cli.eval",
    "lengthwise.tempscale_cli": "lengthwise.cli.tempscale",
    "lengthwise.train_cli": "lengthwise.cli.train",
}

ALSO = {  # names of an old module that live elsewhere than its main new home (tests/test_compat.py lists them)
    "lengthwise.diagnostics": ("lengthwise.core.bins",),  # LengthBins
    "lengthwise.report": (  # the plotting and HTML helpers the 0.1 report modules shared
        "lengthwise.core.plotting",
        "lengthwise.audit.report.html",
        "lengthwise.audit.report.histograms",
    ),
    "lengthwise.report_docs": ("lengthwise.audit.report.doc_plots",),  # Series
    "lengthwise.eval_cli": ("lengthwise.evaluation.tasks",),  # HF_PREFIX
    "lengthwise.train_cli": ("lengthwise.training.config",),  # METHOD_HELP
}


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds a moved module's old name and loads a module that forwards every attribute to the new one."""

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None):
        if fullname not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = MOVED[spec.name]
        warnings.warn(f"{spec.name} moved to {new}; the old path goes in lengthwise 0.3", DeprecationWarning, 3)
        return ModuleType(spec.name, f"Moved to {new}.")

    def exec_module(self, module: ModuleType) -> None:
        old = module.__name__
        target = importlib.import_module(MOVED[old])
        others = [importlib.import_module(name) for name in ALSO.get(old, ())]

        def forward(name: str) -> object:
            for home in (target, *others):
                if hasattr(home, name):
                    return getattr(home, name)
            raise AttributeError(f"module {old!r} (now {MOVED[old]}) has no attribute {name!r}")

        module.__dict__["__getattr__"] = forward
        module.__dict__["__dir__"] = lambda: sorted({name for home in (target, *others) for name in dir(home)})
        module.__dict__["__all__"] = getattr(target, "__all__", [])


def install() -> None:
    """Put the alias finder on `sys.meta_path` once."""
    if not any(isinstance(finder, _Alias) for finder in sys.meta_path):
        sys.meta_path.append(_Alias())
