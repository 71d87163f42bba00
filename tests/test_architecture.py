"""ARCHITECTURE.md is drawn from the code and cannot drift from it: every module or package path it names exists,
every package and every module under src/lengthwise is in its tree (a deprecated alias package, listed in
scripts/check_imports.py's `DEPRECATED_ALIASES`, need not be), and every command has a row in its command table."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "lengthwise"
PAGE = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
NAME = re.compile(r"[A-Za-z_][\w.]*(?:\.py|/)")  # a module file or a package folder, as the tree writes them
# modules named inside a description, each list ending in a colon: ``; _cache.py: embedded windows``,
# ``_views.py, _rows.py: the two views``, ``data.py and hub.py: readers``; a path (``core/_lazy.py``) is a reference
MENTION = re.compile(r"(?<![\w./])((?:[A-Za-z_]\w*\.py(?:, | and ))*[A-Za-z_]\w*\.py):")


def _check_imports():
    spec = importlib.util.spec_from_file_location("check_imports", ROOT / "scripts" / "check_imports.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)  # dataclasses look their module up while the class is built
    spec.loader.exec_module(sys.modules[spec.name])
    return sys.modules[spec.name]


def tree_paths(page: str = PAGE) -> list[str]:
    """Every path the tree (the code block under ``src/lengthwise/``) names, relative to src/lengthwise: a line's
    leading names (``a.py, b.py, c/``) sit in the folder of the nearest less-indented folder line above it; modules
    named in a description (``name.py: what it holds``, on the line or a continuation of it) sit beside the module
    described, or inside the folder described."""
    block = page.split("```\nsrc/lengthwise/\n", 1)[1].split("```", 1)[0]
    folders: list[tuple[int, str]] = []  # (indent, path) of the open folders
    found = []
    described = ""  # the folder that modules named in the current description sit in
    for line in block.splitlines():
        text = line.lstrip(" ")
        indent = len(line) - len(text)
        names = []
        for token in text.split(", "):
            match = NAME.match(token)
            if match is None:
                break
            names.append(match.group(0))
            if match.end() < len(token):  # a name followed by its description ends the list
                break
        if names:
            while folders and folders[-1][0] >= indent:
                folders.pop()
            parent = folders[-1][1] if folders else ""
            found += [parent + name for name in names]
            described = parent
            if len(names) == 1 and names[0].endswith("/"):
                folders.append((indent, parent + names[0]))
                described = parent + names[0]
        # the rest of the line (all of it on a description's continuation line) is a description
        for listed in MENTION.findall(text[len(", ".join(names)) :]):
            found += [described + name for name in re.split(r", | and ", listed)]
    return found


def named_paths(page: str = PAGE) -> list[str]:
    """Every path written in backticks in the text (``cli/encode.py``, ``search/``, ``tests/conftest.py``):
    a token with a slash that ends in ``.py`` or ``/``; placeholders such as ``cli/<command>.py`` are not paths."""
    tokens = re.findall(r"`([^`\s]+)`", page)
    return [t for t in tokens if "/" in t and t.endswith((".py", "/")) and "<" not in t and "://" not in t]


def _exists(path: str) -> bool:
    return any((base / path.rstrip("/")).exists() for base in (PACKAGE, ROOT))


def test_the_tree_is_read_as_written() -> None:
    paths = tree_paths()
    assert "core/models.py" in paths and "search/index.py" in paths and "service/app.py" in paths
    assert "core/_lazy.py" in paths and "longdoc/storage/_raydata.py" in paths  # several names on one line
    assert all(not path.startswith("/") for path in paths)
    # modules named in a description: `_name.py: …`, also on a continuation line, also a list of them
    assert "longdoc/_cache.py" in paths and "longdoc/_pipeline.py" in paths and "training/recipes.py" in paths
    assert "evaluation/hub.py" in paths and "training/_collate.py" in paths and "cli/__main__.py" in paths


def test_every_path_the_page_names_exists() -> None:
    missing = sorted({path for path in [*tree_paths(), *named_paths()] if not _exists(path)})
    assert not missing, f"ARCHITECTURE.md names paths that do not exist: {missing}"


def _aliased(path: Path) -> bool:
    """A module or package folder under src/lengthwise that sits in a deprecated alias package in force (the table in
    scripts/check_imports.py): kept for one release, it is not part of the layout the tree draws."""
    check_imports = _check_imports()
    modules = {check_imports.module_name(file, PACKAGE) for file in PACKAGE.rglob("*.py")}
    in_force = check_imports.aliases_in_force(modules)
    name = check_imports.module_name(path / "__init__.py" if path.is_dir() else path, PACKAGE)
    return check_imports.alias_of(name, in_force) is not None


def test_every_package_is_in_the_tree() -> None:
    drawn = set(tree_paths())
    packages = sorted(
        f"{folder.relative_to(PACKAGE).as_posix()}/"
        for folder in PACKAGE.rglob("*")
        if folder.is_dir() and (folder / "__init__.py").is_file() and not _aliased(folder)
    )
    assert packages, "no package found under src/lengthwise"
    absent = [package for package in packages if package not in drawn]
    assert not absent, f"packages missing from the tree in ARCHITECTURE.md: {absent}"


def test_every_module_is_in_the_tree() -> None:
    drawn = set(tree_paths())
    modules = sorted(path for path in PACKAGE.rglob("*.py") if path.name != "__init__.py" and not _aliased(path))
    assert modules, "no module found under src/lengthwise"
    absent = [
        f"src/lengthwise/{path.relative_to(PACKAGE).as_posix()}: add it under "
        f"`{'/'.join(('src/lengthwise', *path.parent.relative_to(PACKAGE).parts))}/`"
        for path in modules
        if path.relative_to(PACKAGE).as_posix() not in drawn
    ]
    assert not absent, (
        "modules missing from the tree in ARCHITECTURE.md (write each in its folder: on a line of its own, "
        "`name.py   what it holds`; in a line listing several, `a.py, name.py   what they hold`; or as "
        "`name.py: what it holds` in a neighbour's description):\n" + "\n".join(absent)
    )


def test_every_command_has_a_row_in_the_command_table() -> None:
    from lengthwise.cli.app import COMMANDS

    rows = re.findall(r"^\| `lengthwise ([a-z-]+)[^`]*` \| `(cli/[a-z_]+\.py)` \|", PAGE, flags=re.MULTILINE)
    listed = {command: module for command, module in rows}
    assert set(COMMANDS) <= set(listed), f"commands without a row: {sorted(set(COMMANDS) - set(listed))}"
    for command, entry in COMMANDS.items():  # the row names the module the command is loaded from
        assert f"lengthwise.{listed[command][:-3].replace('/', '.')}" == entry[0], command


@pytest.mark.parametrize(
    ("page", "expected"),
    [
        (
            "```\nsrc/lengthwise/\n  a/   x\n    b.py   y\n      more words\n  c.py, _d.py   z\n```\n",
            ["a/", "a/b.py", "c.py", "_d.py"],
        ),
        ("```\nsrc/lengthwise/\n  a/\n    b/\n      c.py\n    d.py\n```\n", ["a/", "a/b/", "a/b/c.py", "a/d.py"]),
        (  # `name.py:` in a description: beside the module described, inside the folder described; a path or a
            # name without its colon is a reference, not a module of the tree
            "```\nsrc/lengthwise/\n  a/   the folder; _x.py: in it\n    b.py   y (uses g.py); _c.py, _d.py: helpers\n"
            "           and e.py and f.py: more, see a/_z.py: there\n  g.py   h; i.py: beside g\n```\n",
            ["a/", "a/_x.py", "a/b.py", "a/_c.py", "a/_d.py", "a/e.py", "a/f.py", "g.py", "i.py"],
        ),
    ],
)
def test_tree_paths_nest_by_indentation(page: str, expected: list[str]) -> None:
    assert tree_paths(page) == expected
