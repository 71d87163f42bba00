"""scripts/check_imports.py on fabricated package trees: it passes a clean layout and names each broken rule."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "check_imports.py"


def _load():
    spec = importlib.util.spec_from_file_location("check_imports", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


check_imports = _load()

CLEAN = {
    "__init__.py": "from pkg.core import tokens\n",
    "facade.py": "def train():\n    from pkg.training import run\n    from pkg.evaluation import sts\n",
    "_version.py": "MOVED = {'pkg.tokens': 'pkg.core.tokens', 'pkg.eval_cli': 'pkg.cli.eval'}\n",
    "core/__init__.py": "",
    "core/tokens.py": "import numpy\n",
    "core/data.py": "from . import tokens\nfrom .tokens import x\n",
    "audit/__init__.py": "",
    "audit/attack.py": "from pkg.core.tokens import elongate\nfrom pkg.audit import shift\n",
    "audit/shift.py": "import scipy\n",
    "evaluation/__init__.py": "",
    "evaluation/sts.py": "from ..core import data\n",
    "training/__init__.py": "",
    "training/run.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.core.data import PairSet\n",
    "search/__init__.py": "",
    "search/index.py": "from pkg.core.data import PairSet\n",
    "cli/__init__.py": "from pkg.cli import audit\n",
    "cli/audit.py": "def run():\n    from pkg.audit.attack import run_audit\n    from pkg import facade\n",
}


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def _problems(tmp_path: Path, **changes: str) -> list[str]:
    files = dict(CLEAN)
    files.update({name.replace("__", "/").replace("_py", ".py"): text for name, text in changes.items()})
    root = _tree(tmp_path, files)
    modules, edges = check_imports.scan(root)
    return check_imports.violations(modules, edges, root.name)


def test_a_clean_layout_passes_and_its_graph_is_printed(tmp_path: Path) -> None:
    root = _tree(tmp_path, CLEAN)
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--root", str(root), "--modules"], capture_output=True, text=True, check=False
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "cli        → core (0)" not in run.stdout
    assert "audit      → core (1)" in run.stdout  # attack → core.tokens; attack → audit.shift stays inside the room
    assert "search     → core (1)" in run.stdout  # search is a room of its own, printed as one
    assert "cli        → audit (1), facade (1)" in run.stdout  # imports inside functions count
    assert "pkg.core.data → pkg.core.tokens" in run.stdout  # relative imports resolved
    assert "pkg.training.run → pkg.core.data" in run.stdout  # TYPE_CHECKING imports count
    assert "OK:" in run.stdout


def test_strings_naming_modules_are_not_imports(tmp_path: Path) -> None:
    # a table naming pkg.cli.eval in a plain string is no import; the lazy facade's export tables do the same
    assert _problems(tmp_path) == []


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        (
            {"audit__attack_py": "def f():\n    from pkg.training.run import x\n"},
            "(audit → training): a room imports only",
        ),
        ({"evaluation__sts_py": "from pkg import __version__\n"}, "(evaluation → facade): a room imports only"),
        ({"core__tokens_py": "from pkg.audit import shift\n"}, "(core → audit): the hall (core/) imports only itself"),
        ({"longdoc__windows_py": "import pkg.cli.audit\n"}, "(longdoc → cli): nothing outside cli/ imports cli/"),
        ({"_version_py": "from pkg.cli import audit\n"}, "(facade → cli): nothing outside cli/ imports cli/"),
        (  # an import hidden in a string is still an import (the old alias finder imported cli/ this way)
            {"_version_py": "import importlib\nimportlib.import_module('pkg.cli.audit')\n"},
            "(facade → cli): nothing outside cli/ imports cli/",
        ),
        ({"core__data_py": "__import__('pkg.audit.shift')\n"}, "(core → audit): the hall (core/) imports only itself"),
        ({"helpers_py": "x = 1\n"}, "pkg.helpers: in no room"),
        (  # search is a room: it imports only the hall, and no other room imports it
            {"search__index_py": "from pkg.longdoc import encoder\n", "longdoc__encoder_py": ""},
            "(search → longdoc): a room imports only",
        ),
        (
            {"longdoc__encoder_py": "def f():\n    from pkg.search.index import Index\n"},
            "(longdoc → search): a room imports only",
        ),
        (  # the junction doing a room's work: it reaches into the room's private module
            {"facade_py": "def train():\n    from pkg.training import _views\n", "training___views_py": ""},
            "(facade → training): the facade joins rooms through their public modules",
        ),
    ],
)
def test_each_broken_rule_is_named(tmp_path: Path, changes: dict[str, str], expected: str) -> None:
    problems = _problems(tmp_path, **changes)
    assert len(problems) == 1, problems
    assert expected in problems[0]


def test_a_cycle_inside_a_room_fails_and_the_command_exits_1(tmp_path: Path) -> None:
    # the old report.py ↔ report_docs.py shape: each imports the other, one of them inside a function
    files = dict(CLEAN)
    files["audit/shift.py"] = "def plot():\n    from pkg.audit import attack\n"
    root = _tree(tmp_path, files)
    modules, edges = check_imports.scan(root)
    problems = check_imports.violations(modules, edges, root.name)
    assert problems in (
        ["cycle: pkg.audit.shift imports pkg.audit.attack imports pkg.audit.shift (shift.py:2, attack.py:2)"],
        ["cycle: pkg.audit.attack imports pkg.audit.shift imports pkg.audit.attack (attack.py:2, shift.py:2)"],
    )
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--root", str(root)], capture_output=True, text=True, check=False
    )
    assert run.returncode == 1
    assert "FAILED: 1 broken rule(s)" in run.stdout


def test_annotation_only_imports_make_cycles_and_break_room_rules(tmp_path: Path) -> None:
    # the old retrieval.py ↔ retrieval_controlled.py shape: one side imports the other only for annotations
    typing_only = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.audit.attack import R\n"
    problems = _problems(tmp_path, audit__shift_py=typing_only)
    assert len(problems) == 1 and problems[0].startswith("cycle: "), problems
    problems = _problems(tmp_path, training__run_py=typing_only)
    assert len(problems) == 1 and "(training → audit)" in problems[0]


def test_every_cycle_is_reported_once(tmp_path: Path) -> None:
    # two independent cycles, one of three modules: each reported, and the scan ends
    files = dict(CLEAN)
    files["audit/shift.py"] = "from pkg.audit import attack\n"
    files["core/tokens.py"] = "from pkg.core import extra\n"
    files["core/extra.py"] = "from pkg.core import data\n"
    root = _tree(tmp_path, files)
    problems = check_imports.violations(*check_imports.scan(root), root.name)
    assert len(problems) == 2, problems
    assert all(p.startswith("cycle: ") for p in problems)
    three = next(p for p in problems if "core" in p)
    assert three.count(" imports ") == 3


def test_the_problem_line_names_the_file_and_line(tmp_path: Path) -> None:
    problems = _problems(tmp_path, audit__shift_py="import os\n\n\nfrom pkg.tempscale import x\n", tempscale__x_py="")
    assert any(p.startswith(f"{(tmp_path / 'pkg' / 'audit' / 'shift.py').as_posix()}:4: ") for p in problems), problems


def test_a_folder_that_is_no_package_is_refused(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--root", str(tmp_path)], capture_output=True, text=True, check=False
    )
    assert run.returncode == 2
    assert "no __init__.py" in run.stderr


# the search room moved out of longdoc/, the old package kept as thin modules re-exporting from the new place
ALIASES = {"pkg.longdoc.search": "pkg.search"}
MOVED = {
    "longdoc/__init__.py": "",
    "longdoc/encoder.py": "from pkg.core import tokens\n",
    "search/fusion.py": "",
    "longdoc/search/__init__.py": "from pkg.search import index\nfrom pkg.search.index import Index\n",
    "longdoc/search/hybrid.py": "from pkg.search.fusion import fuse\n",
}


def _alias_problems(tmp_path: Path, changes: dict[str, str], aliases: dict[str, str] = ALIASES) -> list[str]:
    files = {**CLEAN, **MOVED, **changes}
    root = _tree(tmp_path, files)
    modules, edges = check_imports.scan(root)
    return check_imports.violations(modules, edges, root.name, aliases)


def test_search_is_a_room_and_the_old_search_package_a_deprecated_alias() -> None:
    assert "search" in check_imports.ROOMS and "search" in check_imports.GROUP_ORDER
    assert check_imports.DEPRECATED_ALIASES == {
        "lengthwise.longdoc.search": "lengthwise.search",
        "lengthwise.longdoc.search.backends": "lengthwise.search.backend",
        "lengthwise.longdoc.search.hybrid": "lengthwise.search.fusion",
        "lengthwise.longdoc.search.lexical": "lengthwise.search.lexical.bm25",
        "lengthwise.longdoc.search.scorer": "lengthwise.search.lexical.scorer",
    }
    doc = check_imports.__doc__ or ""
    assert "`search/`" in doc and "deprecated alias" in doc and "DEPRECATED_ALIASES" in doc


def test_an_alias_imports_another_room_and_is_no_cycle_source(tmp_path: Path) -> None:
    # the alias (a longdoc module) re-exports the search room: no room rule; the same tree without the table fails
    assert _alias_problems(tmp_path / "with", {}) == []
    problems = _alias_problems(tmp_path / "without", {}, aliases={})
    assert problems and all("(longdoc → search): a room imports only" in p for p in problems), problems
    # the alias package and a module of it import each other: no cycle, as an alias is no importer in the cycle check
    mutual = {"longdoc/search/hybrid.py": "from pkg.longdoc import search\nfrom pkg.search.fusion import fuse\n"}
    assert _alias_problems(tmp_path / "mutual", mutual) == []
    mutual["longdoc/search/__init__.py"] = "from pkg.longdoc.search import hybrid\n"
    assert _alias_problems(tmp_path / "mutual2", mutual) == []


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        (  # the junction, a room's own module, the CLI: none may import the alias, each is told the new name
            {"facade.py": "\n\ndef f():\n    from pkg.longdoc.search import Index\n"},
            "pkg/facade.py:4: pkg.facade imports the deprecated alias pkg.longdoc.search; import pkg.search",
        ),
        (
            {"longdoc/encoder.py": "import pkg.longdoc.search.hybrid\n"},
            # hybrid was renamed in the move and has no entry of its own: the new package, which re-exports
            "pkg/longdoc/encoder.py:1: pkg.longdoc.encoder imports the deprecated alias pkg.longdoc.search.hybrid;"
            " import pkg.search",
        ),
        (
            {"cli/audit.py": "from pkg.longdoc.search.index import Index\n", "longdoc/search/index.py": ""},
            "pkg/cli/audit.py:1: pkg.cli.audit imports the deprecated alias pkg.longdoc.search.index;"
            " import pkg.search.index",
        ),
        (  # an alias re-exports public modules only, and never imports cli/
            {"longdoc/search/hybrid.py": "from pkg.search._build import x\n", "search/_build.py": ""},
            "pkg.longdoc.search.hybrid imports pkg.search._build (deprecated alias): a deprecated alias re-exports"
            " public modules only",
        ),
        (
            {"longdoc/search/hybrid.py": "from pkg.cli import audit\n"},
            "(deprecated alias): nothing outside cli/ imports cli/",
        ),
    ],
)
def test_an_import_of_an_alias_fails_naming_the_file_line_and_new_place(
    tmp_path: Path, changes: dict[str, str], expected: str
) -> None:
    problems = _alias_problems(tmp_path, changes)
    assert len(problems) == 1, problems
    assert expected in problems[0], problems


def test_a_renamed_module_s_own_entry_names_its_new_place(tmp_path: Path) -> None:
    aliases = {**ALIASES, "pkg.longdoc.search.hybrid": "pkg.search.fusion"}
    problems = _alias_problems(tmp_path, {"facade.py": "from pkg.longdoc.search.hybrid import fuse\n"}, aliases)
    assert problems == [
        f"{(tmp_path / 'pkg' / 'facade.py').as_posix()}:1: pkg.facade imports the deprecated alias"
        " pkg.longdoc.search.hybrid; import pkg.search.fusion"
    ]


def test_an_alias_is_in_force_only_once_its_new_place_exists(tmp_path: Path) -> None:
    # before the move: the old package is the real one, a room module like any other (its own room may import it)
    before = {
        **CLEAN,
        "longdoc/__init__.py": "",
        "longdoc/encoder.py": "from pkg.longdoc.search import index\n",
        "longdoc/search/__init__.py": "",
        "longdoc/search/index.py": "from pkg.core import tokens\n",
    }
    del before["search/__init__.py"], before["search/index.py"]
    root = _tree(tmp_path / "before", before)
    assert check_imports.aliases_in_force(check_imports.scan(root)[0], ALIASES) == {}
    assert check_imports.violations(*check_imports.scan(root), root.name, ALIASES) == []
    # after it, with the alias written: in force
    after = _tree(tmp_path / "after", {**CLEAN, **MOVED})
    assert check_imports.aliases_in_force(check_imports.scan(after)[0], ALIASES) == ALIASES
    # with the alias package deleted and its entry left behind (or not written yet): the entry is named
    root = _tree(tmp_path / "gone", CLEAN)
    problems = check_imports.violations(*check_imports.scan(root), root.name, ALIASES)
    assert len(problems) == 1 and problems[0].startswith("DEPRECATED_ALIASES: pkg.longdoc.search is no module"), (
        problems
    )


def test_the_command_takes_an_alias_table_and_fails_on_an_import_of_an_alias(tmp_path: Path) -> None:
    root = _tree(tmp_path, {**CLEAN, **MOVED, "pipelines.py": "from pkg.longdoc.search import hybrid\n"})
    command = [sys.executable, str(SCRIPT), "--root", str(root), "--alias", "pkg.longdoc.search=pkg.search"]
    run = subprocess.run(command, capture_output=True, text=True, check=False)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "pkg.longdoc.search → pkg.search: in force: 2 alias module(s)" in run.stdout
    assert "longdoc    → core (1)" in run.stdout and "longdoc    → core (1), search" not in run.stdout  # alias left out
    assert "pkg.pipelines imports the deprecated alias pkg.longdoc.search.hybrid; import pkg.search" in run.stdout
    (root / "pipelines.py").write_text("from pkg.search import fusion\n", encoding="utf-8")
    run = subprocess.run(command, capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stdout
    assert "nothing imports cli or a deprecated alias" in run.stdout
    run = subprocess.run([*command[:-1], "pkg.longdoc.search"], capture_output=True, text=True, check=False)
    assert run.returncode == 2 and "--alias takes OLD=NEW" in run.stderr
