#!/usr/bin/env python3
"""Print the import graph between the hall, the rooms, the facade and the CLI, and fail on a broken rule.

lengthwise is laid out as one hall (`core/`) with rooms off it (`audit/`, `tempscale/`, `longdoc/`,
`evaluation/`, `training/`). The rules (ARCHITECTURE.md):

- the hall imports only itself;
- a room imports only the hall and itself, never another room, the facade or the CLI;
- the facade (`__init__.py`, `facade.py`, `pipelines.py`, `service/`, `integrations/`) may join rooms, through their
  public modules only (a room's private `_name` module is that room's own work), and never imports the CLI;
- nothing outside `cli/` imports `cli/`;
- no cycle between modules.

Every ``import`` statement counts, including those inside functions (a deferred import is still a
dependency), and so does a call that imports by a literal string (``importlib.import_module("pkg.cli.eval")``,
``__import__(…)``): hiding an import in a string does not get round a rule. Imports under ``if TYPE_CHECKING:``
count for the rules and for cycles too: two modules whose annotations name each other are one concept split in
two. Names in plain strings (the lazy facade's export tables) do not count.

    python scripts/check_imports.py                 # group graph; exit 1 on a broken rule
    python scripts/check_imports.py --modules       # also every module-to-module edge
    python scripts/check_imports.py --root PATH     # check another package tree (the tests do)
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass
from graphlib import CycleError, TopologicalSorter
from itertools import pairwise
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "src" / "lengthwise"
HALL = "core"
ROOMS = ("audit", "tempscale", "longdoc", "evaluation", "training")
CLI = "cli"
FACADE = "facade"
# top-level modules/packages that belong to the facade or the hall without living under core/
# (`facade.py`: a model loaded as saved, the loader bound into the longdoc room's `encode` and `LongIndex`;
# `pipelines.py`: the jobs that join two rooms; `service/`: a `LongIndex` behind HTTP, with the loader bound;
# `integrations/`: a `LongIndex` or a service as a RAG framework's retriever)
FACADE_MODULES = ("__init__", "facade", "pipelines", "_version", "service", "integrations")
HALL_EXTRAS = ("probes", "testing")  # data files read through importlib.resources; test models for users
GROUP_ORDER = (HALL, *ROOMS, FACADE, CLI)


@dataclass(frozen=True)
class Import:
    """One import statement: the importing module, the module it names, where it is written, and whether it
    sits under ``if TYPE_CHECKING:`` (annotations only)."""

    source: str
    target: str
    path: Path
    line: int
    typing_only: bool = False


def module_name(path: Path, root: Path) -> str:
    """`root/audit/report/_attack.py` → ``lengthwise.audit.report._attack``; a package's `__init__` is the package."""
    parts = [root.name, *path.relative_to(root).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def group_of(module: str, package: str) -> str | None:
    """The hall, room, facade or cli a module belongs to; None for a module outside the layout."""
    parts = module.split(".")
    if parts[0] != package:
        return None
    if len(parts) == 1 or parts[1] in FACADE_MODULES:
        return FACADE
    top = parts[1]
    if top == HALL or top in HALL_EXTRAS:
        return HALL
    if top in ROOMS or top == CLI:
        return top
    return None


def _resolve(node: ast.ImportFrom, source: str, is_package: bool) -> str:
    """The absolute module an ``from … import`` names, resolving relative levels against the importer."""
    if node.level == 0:
        return node.module or ""
    base = source.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _is_type_checking(test: ast.expr) -> bool:
    """``TYPE_CHECKING`` or ``typing.TYPE_CHECKING``."""
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _string_import(node: ast.AST) -> str | None:
    """The module a call such as ``importlib.import_module("a.b")`` or ``__import__("a.b")`` names, else None."""
    if not isinstance(node, ast.Call) or not node.args:
        return None
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    first = node.args[0]
    if name in ("import_module", "__import__") and isinstance(first, ast.Constant) and isinstance(first.value, str):
        return first.value
    return None


def _import_nodes(tree: ast.AST) -> list[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import node anywhere in the tree, with whether it sits under ``if TYPE_CHECKING:``; a call importing
    by a literal string comes back as the ``import`` statement it stands for."""
    found: list[tuple[ast.Import | ast.ImportFrom, bool]] = []
    stack: list[tuple[ast.AST, bool]] = [(tree, False)]
    while stack:
        node, typing_only = stack.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append((node, typing_only))
        elif (named := _string_import(node)) is not None:
            found.append((ast.Import(names=[ast.alias(name=named)], lineno=node.lineno), typing_only))
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend((child, True) for child in node.body)
            stack.extend((child, typing_only) for child in node.orelse)
            continue
        stack.extend((child, typing_only) for child in ast.iter_child_nodes(node))
    return found


def imports_of(path: Path, root: Path, modules: set[str]) -> list[Import]:
    """Every import of the package's own modules written anywhere in one file (functions included)."""
    source = module_name(path, root)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[Import] = []
    for node, typing_only in _import_nodes(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            base = _resolve(node, source, path.name == "__init__.py")
            # `from pkg import sub` names the submodule when there is one, else an attribute of pkg
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        for target in dict.fromkeys(targets):
            while target and target not in modules and "." in target:  # `import a.b.c` of an attribute: its module
                target = target.rsplit(".", 1)[0]
            if target in modules and target != source:
                found.append(Import(source, target, path, node.lineno, typing_only))
    return sorted(found, key=lambda edge: edge.line)


def scan(root: Path) -> tuple[set[str], list[Import]]:
    """All modules under `root` and every import between them."""
    files = sorted(root.rglob("*.py"))
    modules = {module_name(path, root) for path in files}
    edges = [edge for path in files for edge in imports_of(path, root, modules)]
    return modules, edges


def violations(modules: set[str], edges: list[Import], package: str) -> list[str]:
    """One line per broken rule: a module outside the layout, a forbidden import, a cycle."""
    problems = [
        f"{module}: in no room; move it under {HALL}/ or a room, or list it in scripts/check_imports.py"
        for module in sorted(modules)
        if group_of(module, package) is None
    ]
    for edge in edges:
        src, dst = group_of(edge.source, package), group_of(edge.target, package)
        if src is None or dst is None or src == dst:
            continue
        why = None
        if dst == CLI:
            why = f"nothing outside {CLI}/ imports {CLI}/"
        elif src == HALL:
            why = f"the hall ({HALL}/) imports only itself"
        elif src in ROOMS and dst != HALL:
            why = f"a room imports only {HALL}/ and itself; join rooms in facade.py or pipelines.py"
        elif src == FACADE and dst in ROOMS and any(part.startswith("_") for part in edge.target.split(".")[2:]):
            why = "the facade joins rooms through their public modules; a private one (_name) is the room's own work"
        if why:
            where = f"{edge.path.as_posix()}:{edge.line}"
            problems.append(f"{where}: {edge.source} imports {edge.target} ({src} → {dst}): {why}")
    graph: dict[str, set[str]] = defaultdict(set)
    first_line: dict[tuple[str, str], str] = {}
    for edge in edges:  # annotation-only imports included: a TYPE_CHECKING cycle is still a cycle
        graph[edge.source].add(edge.target)
        first_line.setdefault((edge.source, edge.target), f"{edge.path.name}:{edge.line}")
    while True:
        try:
            TopologicalSorter(graph).prepare()
            break
        except CycleError as error:
            # graphlib reads `graph` as node → predecessors, so its cycle runs against the import arrows
            cycle = list(reversed(error.args[1]))
            lines = ", ".join(first_line[(a, b)] for a, b in pairwise(cycle))
            problems.append("cycle: " + " imports ".join(cycle) + f" ({lines})")
            graph[cycle[0]].discard(cycle[1])  # break it and look for the next one
    return problems


def group_graph(edges: list[Import], package: str) -> dict[str, Counter[str]]:
    """For each group, how many imports it makes into each other group."""
    graph: dict[str, Counter[str]] = {group: Counter() for group in GROUP_ORDER}
    for edge in edges:
        src, dst = group_of(edge.source, package), group_of(edge.target, package)
        if src and dst and src != dst:
            graph[src][dst] += 1
    return graph


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the package folder (default: src/lengthwise)")
    parser.add_argument("--modules", action="store_true", help="also print every module-to-module edge")
    args = parser.parse_args(argv)
    root: Path = args.root.resolve()
    if not (root / "__init__.py").is_file():
        print(f"error: {root} is not a package folder (no __init__.py); pass --root src/lengthwise", file=sys.stderr)
        return 2
    package = root.name
    modules, edges = scan(root)

    print(f"import graph of {package}: {len(modules)} modules, {len(edges)} imports between them")
    print("(count of import statements, those inside functions and under TYPE_CHECKING included)\n")
    for src, targets in group_graph(edges, package).items():
        row = ", ".join(f"{dst} ({n})" for dst, n in sorted(targets.items(), key=lambda kv: GROUP_ORDER.index(kv[0])))
        print(f"  {src:<11}→ {row or '(nothing else)'}")
    if args.modules:
        print()
        for edge in sorted({(e.source, e.target) for e in edges}):
            print(f"  {edge[0]} → {edge[1]}")

    problems = violations(modules, edges, package)
    print()
    if problems:
        print(f"FAILED: {len(problems)} broken rule(s) (see ARCHITECTURE.md):")
        for problem in problems:
            print(f"  {problem}")
        return 1
    print("OK: no cycle; the hall imports only itself; rooms import only the hall; nothing imports cli")
    return 0


if __name__ == "__main__":
    sys.exit(main())
