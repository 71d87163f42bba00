"""ARCHITECTURE.md is drawn from the code and cannot drift from it: every module or package path it names exists,
every package under src/lengthwise is in its tree, and every command has a row in its command table."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "lengthwise"
PAGE = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
NAME = re.compile(r"[A-Za-z_][\w.]*(?:\.py|/)")  # a module file or a package folder, as the tree writes them


def tree_paths(page: str = PAGE) -> list[str]:
    """Every path the tree (the code block under ``src/lengthwise/``) names, relative to src/lengthwise: a line's
    leading names (``a.py, b.py, c/``) sit in the folder of the nearest less-indented folder line above it."""
    block = page.split("```\nsrc/lengthwise/\n", 1)[1].split("```", 1)[0]
    folders: list[tuple[int, str]] = []  # (indent, path) of the open folders
    found = []
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
        if not names:
            continue  # a description's continuation line
        while folders and folders[-1][0] >= indent:
            folders.pop()
        parent = folders[-1][1] if folders else ""
        found += [parent + name for name in names]
        if len(names) == 1 and names[0].endswith("/"):
            folders.append((indent, parent + names[0]))
    return found


def named_paths(page: str = PAGE) -> list[str]:
    """Every path written in backticks in the text (``cli/encode.py``, ``longdoc/search/``, ``tests/conftest.py``):
    a token with a slash that ends in ``.py`` or ``/``; placeholders such as ``cli/<command>.py`` are not paths."""
    tokens = re.findall(r"`([^`\s]+)`", page)
    return [t for t in tokens if "/" in t and t.endswith((".py", "/")) and "<" not in t and "://" not in t]


def _exists(path: str) -> bool:
    return any((base / path.rstrip("/")).exists() for base in (PACKAGE, ROOT))


def test_the_tree_is_read_as_written() -> None:
    paths = tree_paths()
    assert "core/models.py" in paths and "longdoc/search/index.py" in paths and "service/app.py" in paths
    assert "core/_lazy.py" in paths and "longdoc/storage/_raydata.py" in paths  # several names on one line
    assert all(not path.startswith("/") for path in paths)


def test_every_path_the_page_names_exists() -> None:
    missing = sorted({path for path in [*tree_paths(), *named_paths()] if not _exists(path)})
    assert not missing, f"ARCHITECTURE.md names paths that do not exist: {missing}"


def test_every_package_is_in_the_tree() -> None:
    drawn = set(tree_paths())
    packages = sorted(
        f"{folder.relative_to(PACKAGE).as_posix()}/"
        for folder in PACKAGE.rglob("*")
        if folder.is_dir() and (folder / "__init__.py").is_file()
    )
    assert packages, "no package found under src/lengthwise"
    absent = [package for package in packages if package not in drawn]
    assert not absent, f"packages missing from the tree in ARCHITECTURE.md: {absent}"


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
    ],
)
def test_tree_paths_nest_by_indentation(page: str, expected: list[str]) -> None:
    assert tree_paths(page) == expected
