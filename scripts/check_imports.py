#!/usr/bin/env python3
"""Print the import graph between the hall, the rooms, the facade and the CLI, and fail on a broken rule.

lengthwise is laid out as one hall (`core/`) with rooms off it (`audit/`, `tempscale/`, `longdoc/`, `search/`,
`evaluation/`, `training/`). The rules (ARCHITECTURE.md):

- the hall imports only itself;
- a room imports only the hall and itself, never another room, the facade or the CLI;
- the facade (`__init__.py`, `facade.py`, `pipelines.py`, `service/`, `integrations/`) may join rooms, through their
  public modules only (a room's private `_name` module is that room's own work), and never imports the CLI;
- nothing outside `cli/` imports `cli/`;
- no cycle between modules;
- a deprecated alias (`DEPRECATED_ALIASES`: an old package kept for one release as thin modules that re-export from
  its new place) may import any public module, takes no part in the cycle check as an importer, and nothing else in
  the package imports it: lengthwise's own code imports the new place.

Every ``import`` statement counts, including those inside functions (a deferred import is still a
dependency), and so does a call that imports by a literal string (``importlib.import_module("pkg.cli.eval")``,
``__import__(…)``): hiding an import in a string does not get round a rule. Imports under ``if TYPE_CHECKING:``
count for the rules and for cycles too: two modules whose annotations name each other are one concept split in
two. Names in plain strings (the lazy facade's export tables) do not count.

    python scripts/check_imports.py                 # group graph; exit 1 on a broken rule
    python scripts/check_imports.py --modules       # also every module-to-module edge
    python scripts/check_imports.py --root PATH     # check another package tree (the tests do)
    python scripts/check_imports.py --root PATH --alias pkg.old=pkg.new   # with its own alias table (the tests do)
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from graphlib import CycleError, TopologicalSorter
from itertools import pairwise
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "src" / "lengthwise"
HALL = "core"
ROOMS = ("audit", "tempscale", "longdoc", "search", "evaluation", "training")
CLI = "cli"
FACADE = "facade"
# top-level modules/packages that belong to the facade or the hall without living under core/
# (`facade.py`: a model loaded as saved, the loader bound into the longdoc room's `encode` and the search room's
# `LongIndex`;
# `pipelines.py`: the jobs that join two rooms; `service/`: a `LongIndex` behind HTTP, with the loader bound;
# `integrations/`: a `LongIndex` or a service as a RAG framework's retriever)
FACADE_MODULES = ("__init__", "facade", "pipelines", "_version", "service", "integrations")
HALL_EXTRAS = ("probes", "testing")  # data files read through importlib.resources; test models for users
GROUP_ORDER = (HALL, *ROOMS, FACADE, CLI)
# Deprecated aliases, old name → new place: a package moved in the layout and kept under its old name for one release,
# as thin modules that re-export from the new place (a room re-exporting another room: against the rules above, so
# listed here, and only here). An alias, the package and every module under it, may import any public module of the
# package, takes no part in the cycle check as an importer, and no other module of the package may import it (the
# problem names the file and line, and the new name to import). An entry is in force once both names are modules of
# the tree: while a move is under way the old package is still the real one and is checked as such. An entry whose
# old name is no module fails the check: write the alias, or delete the entry when the alias package is deleted.
# A module renamed in the move may have an entry of its own (old module → new module); the most specific entry names
# the new place in the problem line, else the new package does.
# tests/test_architecture.py reads this table too: an alias package need not be drawn in ARCHITECTURE.md's tree.
DEPRECATED_ALIASES: dict[str, str] = {
    "lengthwise.longdoc.search": "lengthwise.search",  # issue 63: search became a room of its own
    "lengthwise.longdoc.search.backends": "lengthwise.search.backend",
    "lengthwise.longdoc.search.hybrid": "lengthwise.search.fusion",
    "lengthwise.longdoc.search.lexical": "lengthwise.search.lexical.bm25",
    "lengthwise.longdoc.search.scorer": "lengthwise.search.lexical.scorer",
}


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


def _within(module: str, name: str) -> bool:
    """`module` is `name` or a module under it."""
    return module == name or module.startswith(name + ".")


def aliases_in_force(modules: set[str], aliases: Mapping[str, str] | None = None) -> dict[str, str]:
    """The entries of the alias table (`DEPRECATED_ALIASES` unless given) in force in a tree: old name and new place
    both among its `modules`."""
    table = DEPRECATED_ALIASES if aliases is None else aliases
    return {old: new for old, new in table.items() if old in modules and new in modules}


def alias_of(module: str, aliases: Mapping[str, str]) -> str | None:
    """The alias entry (its old name) that `module` is or sits under, the most specific one, else None."""
    return max((old for old in aliases if _within(module, old)), key=len, default=None)


def _new_name(module: str, aliases: Mapping[str, str], modules: set[str]) -> str:
    """Where a module under an alias lives now: its entry's new place, with the rest of the name kept where that is a
    module (``pkg.old.sub`` → ``pkg.new.sub``), else the nearest module above it (a module renamed in the move and
    not listed in the table on its own: the new package, which re-exports)."""
    old = alias_of(module, aliases)
    assert old is not None
    new = aliases[old] + module[len(old) :]
    while new not in modules and "." in new:
        new = new.rsplit(".", 1)[0]
    return new


def _is_private(module: str) -> bool:
    """A module with an internal (``_name``) part below the package: ``pkg.training._views``."""
    return any(part.startswith("_") for part in module.split(".")[1:])


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


def _alias_rule(edge: Import, aliases: Mapping[str, str], modules: set[str]) -> str | None:
    """The rule an import broke that involves a deprecated alias ("" when it involves one and breaks none), or None
    when neither side is an alias (the layout's rules apply)."""
    if alias_of(edge.source, aliases) is not None:  # an alias re-exports from anywhere public, but never from cli/
        if edge.target.split(".")[1:2] == [CLI]:
            return f"nothing outside {CLI}/ imports {CLI}/"
        if _is_private(edge.target):
            return "a deprecated alias re-exports public modules only; a private one (_name) is no public name"
        return ""
    if alias_of(edge.target, aliases) is not None:
        return f"imports the deprecated alias {edge.target}; import {_new_name(edge.target, aliases, modules)}"
    return None


def violations(
    modules: set[str], edges: list[Import], package: str, aliases: Mapping[str, str] | None = None
) -> list[str]:
    """One line per broken rule: a stale alias entry, a module outside the layout, a forbidden import, a cycle.
    `aliases`: the deprecated alias table, old name → new place (default `DEPRECATED_ALIASES`)."""
    table = DEPRECATED_ALIASES if aliases is None else aliases
    in_force = aliases_in_force(modules, table)
    problems = [
        f"DEPRECATED_ALIASES: {old} is no module: write its alias modules (re-exporting {table[old]}), or delete"
        " its entry in scripts/check_imports.py with them"
        for old in table
        if old.split(".")[0] == package and old not in modules
    ]
    problems += [
        f"{module}: in no room; move it under {HALL}/ or a room, or list it in scripts/check_imports.py"
        for module in sorted(modules)
        if group_of(module, package) is None and alias_of(module, in_force) is None
    ]
    for edge in edges:
        where = f"{edge.path.as_posix()}:{edge.line}"
        alias_rule = _alias_rule(edge, in_force, modules)
        if alias_rule is not None:
            if alias_rule.startswith("imports the deprecated alias"):
                problems.append(f"{where}: {edge.source} {alias_rule}")
            elif alias_rule:
                problems.append(f"{where}: {edge.source} imports {edge.target} (deprecated alias): {alias_rule}")
            continue
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
            problems.append(f"{where}: {edge.source} imports {edge.target} ({src} → {dst}): {why}")
    graph: dict[str, set[str]] = defaultdict(set)
    first_line: dict[tuple[str, str], str] = {}
    for edge in edges:  # annotation-only imports included: a TYPE_CHECKING cycle is still a cycle
        if alias_of(edge.source, in_force) is not None:  # an alias re-exports; what imports it is an error above
            continue
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


def group_graph(edges: list[Import], package: str, aliases: Mapping[str, str] | None = None) -> dict[str, Counter[str]]:
    """For each group, how many imports it makes into each other group; a deprecated alias's own imports (`aliases`,
    those in force) are left out: it is no part of the layout."""
    graph: dict[str, Counter[str]] = {group: Counter() for group in GROUP_ORDER}
    for edge in edges:
        if aliases and alias_of(edge.source, aliases) is not None:
            continue
        src, dst = group_of(edge.source, package), group_of(edge.target, package)
        if src and dst and src != dst:
            graph[src][dst] += 1
    return graph


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the package folder (default: src/lengthwise)")
    parser.add_argument("--modules", action="store_true", help="also print every module-to-module edge")
    parser.add_argument(
        "--alias",
        action="append",
        metavar="OLD=NEW",
        help="a deprecated alias, old name = new place (repeatable; replaces DEPRECATED_ALIASES, for another tree)",
    )
    args = parser.parse_args(argv)
    root: Path = args.root.resolve()
    if not (root / "__init__.py").is_file():
        print(f"error: {root} is not a package folder (no __init__.py); pass --root src/lengthwise", file=sys.stderr)
        return 2
    if any(entry.count("=") != 1 for entry in args.alias or []):
        print("error: --alias takes OLD=NEW, two dotted module names", file=sys.stderr)
        return 2
    table = DEPRECATED_ALIASES if args.alias is None else dict(entry.split("=") for entry in args.alias)
    package = root.name
    modules, edges = scan(root)
    in_force = aliases_in_force(modules, table)

    print(f"import graph of {package}: {len(modules)} modules, {len(edges)} imports between them")
    print("(count of import statements, those inside functions and under TYPE_CHECKING included)\n")
    for src, targets in group_graph(edges, package, in_force).items():
        row = ", ".join(f"{dst} ({n})" for dst, n in sorted(targets.items(), key=lambda kv: GROUP_ORDER.index(kv[0])))
        print(f"  {src:<11}→ {row or '(nothing else)'}")
    if args.modules:
        print()
        for edge in sorted({(e.source, e.target) for e in edges}):
            print(f"  {edge[0]} → {edge[1]}")

    _print_aliases(modules, package, table)
    problems = violations(modules, edges, package, table)
    print()
    if problems:
        print(f"FAILED: {len(problems)} broken rule(s) (see ARCHITECTURE.md):")
        for problem in problems:
            print(f"  {problem}")
        return 1
    print(
        "OK: no cycle; the hall imports only itself; rooms import only the hall; nothing imports cli"
        " or a deprecated alias"
    )
    return 0


def _print_aliases(modules: set[str], package: str, table: Mapping[str, str]) -> None:
    """One line per deprecated alias of this package: in force (and how many modules it holds), or not yet."""
    entries = {old: new for old, new in table.items() if old.split(".")[0] == package}
    if not entries:
        return
    print("\ndeprecated aliases (kept for one release; their own imports are left out of the graph above):")
    for old, new in entries.items():
        if old not in modules:
            state = "no module: the alias is not written yet, or its entry outlived it"
        elif new not in modules:
            state = f"not in force yet: {new} does not exist, so {old} is checked as an ordinary package"
        else:
            count = sum(1 for module in modules if _within(module, old))
            state = f"in force: {count} alias module(s); nothing else may import them"
        print(f"  {old} → {new}: {state}")


if __name__ == "__main__":
    sys.exit(main())
