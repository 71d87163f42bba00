"""The docs hold together: every "METHODS §N" cited in the repository resolves to docs/methods.md, every benchmark
named (a file or a ``python -m`` module) exists, and the site's link rewriting (scripts/mkdocs_hooks.py) keeps links
valid. `mkdocs build --strict` runs in CI."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]
CITATION = re.compile(r"METHODS(?:\.md)? ?§ ?(\d+)")
BENCHMARK_FILE = re.compile(r"benchmarks/[A-Za-z_0-9/]+\.py")
BENCHMARK_MODULE = re.compile(r"python3? -m (benchmarks(?:\.[A-Za-z_0-9]+)+)")


def test_every_benchmark_named_in_the_code_and_docs_exists() -> None:
    """A benchmark moved or removed leaves no pointer behind (history keeps its names: CHANGELOG.md, the results
    files' commands, and a line that says the script was removed)."""
    texts = [*ROOT.glob("*.md"), *ROOT.glob("docs/*.md"), *ROOT.glob("benchmarks/**/*.md"), *ROOT.glob("src/**/*.py"),
             *ROOT.glob("benchmarks/**/*.py"), *ROOT.glob("scripts/*"), *ROOT.glob("experiments/*.py")]  # fmt: skip
    stale = []
    for path in texts:
        if not path.is_file() or path.name == "CHANGELOG.md":
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if "removed" in line:
                continue
            named = [name for name in BENCHMARK_FILE.findall(line) if not (ROOT / name).is_file()]
            named += [m for m in BENCHMARK_MODULE.findall(line) if importlib.util.find_spec(m) is None]
            stale += [f"{path.relative_to(ROOT)}:{number}: {name}" for name in named]
    assert not stale, "\n".join(stale)


def test_every_results_file_is_named_in_the_docs() -> None:
    """A results file nobody reads is a figure nobody checks: each file under docs/results/ is named by a page (the
    docs, the READMEs of the repository, benchmarks and experiments), where its command and figures are given."""
    pages = [*ROOT.glob("docs/**/*.md"), *ROOT.glob("*.md"), *ROOT.glob("benchmarks/**/*.md"),
             *ROOT.glob("experiments/**/*.md")]  # fmt: skip
    text = "\n".join(page.read_text(encoding="utf-8") for page in pages if page.name != "CHANGELOG.md")
    unnamed = sorted(path.name for path in ROOT.glob("docs/results/*.json") if path.name not in text)
    assert not unnamed, f"results files no page names: {unnamed}"


INLINE_COMMAND = re.compile(r"`((?:nice -n \d+ )?python3? -m benchmarks[^`]*)`")
PLACEHOLDERS = {"STAGE"}  # benchmarks/README.md: `python -m benchmarks.search.hybrid STAGE`, any stage


class _Parsed(Exception):
    """Raised once a benchmark's arguments are parsed: the command is checked, nothing is run."""

    def __init__(self, namespace: object) -> None:
        super().__init__()
        self.namespace = namespace


def _documented_commands() -> dict[str, str]:
    """Each ``python -m benchmarks…`` command the docs show (inline in backticks, or a line of a fenced block, its
    continuations joined) → the page showing it first."""
    pages = [*sorted(ROOT.glob("docs/*.md")), ROOT / "README.md", ROOT / "ARCHITECTURE.md",
             *sorted(ROOT.glob("benchmarks/**/*.md"))]  # fmt: skip
    found: dict[str, str] = {}
    for page in pages:
        text = page.read_text(encoding="utf-8")
        commands = [" ".join(command.split()) for command in INLINE_COMMAND.findall(text)]  # one line, as typed
        for block in re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S):
            lines = re.sub(r"\\\n\s*", " ", block).splitlines()
            commands += [line.strip() for line in lines if re.match(r"\s*(nice -n \d+ )?python3? -m benchmarks", line)]
        for command in commands:
            found.setdefault(command, str(page.relative_to(ROOT)))
    return found


def _parse_documented(monkeypatch) -> tuple[dict[str, tuple[str, object]], list[str]]:
    """Each documented benchmark command parsed by its module's own parser, nothing run: command → (page, the
    namespace parsed); and the commands whose arguments the parser refused. Patterns
    (``benchmarks.<subject>.<name>``) and `PLACEHOLDERS` are not commands."""
    return _parse_commands(_documented_commands(), monkeypatch)


def _parse_commands(commands: dict[str, str], monkeypatch) -> tuple[dict[str, tuple[str, object]], list[str]]:
    """`commands` (command → where it is written) parsed as `_parse_documented` parses the docs' commands."""
    import argparse
    import contextlib
    import io
    import shlex

    parse = argparse.ArgumentParser.parse_args

    def parse_then_stop(self, args=None, namespace=None):
        raise _Parsed(parse(self, args, namespace))

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_then_stop)
    monkeypatch.syspath_prepend(str(ROOT))
    parsed, failed = {}, []
    for command, page in sorted(commands.items()):
        line = re.split(r"\s+(?:#|>|&&|2>|\|)\s", re.sub(r"^nice -n \d+ ", "", command))[0]
        argv = shlex.split(line)[2:]
        if "<" in argv[0] or PLACEHOLDERS & set(argv):
            continue
        module = importlib.import_module(argv[0])
        main = getattr(module, "main", None) or importlib.import_module(f"{argv[0]}.__main__").main
        errors = io.StringIO()
        monkeypatch.setattr(sys, "argv", argv)
        try:
            with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
                main(argv[1:]) if "argv" in main.__code__.co_varnames else main()
        except _Parsed as done:
            parsed[command] = (page, done.namespace)
        except SystemExit as stop:
            if stop.code not in (0, None):
                failed.append(f"{page}: {command} — {errors.getvalue().strip().splitlines()[-1:]}")
    return parsed, failed


def test_every_documented_benchmark_command_parses(monkeypatch) -> None:
    """The docs' benchmark commands still run as written: each module is there and takes the arguments shown (the
    parser is stopped once it has read them; nothing is run)."""
    parsed, failed = _parse_documented(monkeypatch)
    assert len(parsed) > 50 and not failed, "\n".join(failed)


# where and how fast it ran, not what it measured
SETTINGS_APART = {"out", "threads", "model", "data", "cache", "img", "batch_size", "device", "haystack", "qmsum",
                  "scifact", "index", "compare", "reference"}  # fmt: skip


def _same_settings(recorded: dict[str, object], parsed: dict[str, object]) -> bool:
    """Whether a parsed command gives the recorded settings: each both know, apart from `SETTINGS_APART`, equal as
    JSON or as the string the results file wrote."""
    import json

    keys = (set(recorded) & set(parsed)) - SETTINGS_APART
    return all(recorded[key] in (json.loads(json.dumps(parsed[key], default=str)), str(parsed[key])) for key in keys)


def test_a_results_file_that_records_its_settings_has_a_documented_command_giving_them(monkeypatch) -> None:
    """A results file whose ``settings`` are its benchmark's arguments (``out`` among them) is written again by a
    documented command only if one parses to the same settings: every recorded one the parser knows, apart from
    `SETTINGS_APART` (paths, threads, batch sizes), equal. Catches a documented command that drops the flags the
    recorded run was given, or a default changed since."""
    import json

    parsed, _ = _parse_documented(monkeypatch)
    mismatched = []
    for path in sorted(ROOT.glob("docs/results/*.json")):
        settings = json.loads(path.read_text(encoding="utf-8")).get("settings")
        if not isinstance(settings, dict) or Path(str(settings.get("out", ""))).name != path.name:
            continue
        writers = [(command, vars(namespace)) for command, (_, namespace) in parsed.items()
                   if Path(str(vars(namespace).get("out", ""))).name == path.name]  # fmt: skip

        if not any(_same_settings(settings, found) for _, found in writers):
            mismatched.append(f"{path.name}: {[command for command, _ in writers] or 'no documented command'}")
    assert not mismatched, "\n".join(mismatched)


def test_a_results_file_that_records_its_command_has_a_documented_command_like_it(monkeypatch) -> None:
    """A results file that records the ``python -m benchmarks…`` command that wrote it (`command_line`) is written
    again by a documented command of the same benchmark that parses to the same arguments, apart from
    `SETTINGS_APART`; and the recorded command still parses. Catches the docs showing a command without the flags a
    recorded run was given, and a benchmark whose options moved since its file was written."""
    import json
    import shlex

    recorded: dict[str, str] = {}
    for path in sorted(ROOT.glob("docs/results/*.json")):
        command = json.loads(path.read_text(encoding="utf-8")).get("command")
        if isinstance(command, str) and re.match(r"python3? -m benchmarks\.", command):
            recorded[command] = path.name
    runs, failed = _parse_commands(recorded, monkeypatch)
    documented, _ = _parse_documented(monkeypatch)
    assert len(runs) >= 5, f"too few results files record their command: {sorted(recorded.values())}"
    mismatched = list(failed)
    for command, (name, namespace) in sorted(runs.items()):
        module, given = shlex.split(command)[2], json.loads(json.dumps(vars(namespace), default=str))
        like = [shown for shown, (_, found) in documented.items()
                if module in shown.split() and _same_settings(given, vars(found))]  # fmt: skip
        if not like:
            mismatched.append(f"{name}: recorded `{command}`, documented like it: none")
    assert not mismatched, "\n".join(mismatched)


def test_every_methods_citation_resolves_to_a_section_of_docs_methods() -> None:
    methods = (ROOT / "docs" / "methods.md").read_text(encoding="utf-8")
    sections = {int(a) for a, b in re.findall(r'<a id="s(\d+)"></a>\n## §(\d+) ', methods) if a == b}
    cited: dict[int, list[str]] = {}
    for folder in ("src", "docs", "tests", "experiments", "benchmarks", "scripts"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in {".py", ".md"} and path.is_file():
                text = path.read_text(encoding="utf-8", errors="replace")
                for number in CITATION.findall(text):
                    cited.setdefault(int(number), []).append(str(path.relative_to(ROOT)))
    for extra in ("README.md", "ARCHITECTURE.md"):
        for number in CITATION.findall((ROOT / extra).read_text(encoding="utf-8")):
            cited.setdefault(int(number), []).append(extra)
    assert cited, "no METHODS citation found: the pattern no longer matches the code"
    missing = {n: paths[:3] for n, paths in cited.items() if n not in sections}
    assert not missing, f"METHODS sections cited but not in docs/methods.md: {missing}"


def _hooks():
    spec = importlib.util.spec_from_file_location("mkdocs_hooks", ROOT / "scripts" / "mkdocs_hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def hooks():
    pytest.importorskip("mkdocs", reason="needs mkdocs: pip install -e '.[docs]'")
    return _hooks()


def _page(src_uri: str, abs_src_path: Path) -> SimpleNamespace:
    return SimpleNamespace(file=SimpleNamespace(src_uri=src_uri, abs_src_path=str(abs_src_path)))


def test_links_leaving_docs_become_paths_and_root_pages_point_into_docs(hooks) -> None:
    config = {"docs_dir": str(ROOT / "docs")}
    guide = _page("benchmarks.md", ROOT / "docs" / "benchmarks.md")
    text = "See [the runner](../benchmarks/README.md), [audit](audit.md#memory) and [x](https://example.org/a.md)."
    assert hooks.on_page_markdown(text, guide, config, None) == (
        "See the runner (`benchmarks/README.md`), [audit](audit.md#memory) and [x](https://example.org/a.md)."
    )
    readme = _page("index.md", ROOT / "README.md")
    text = "[docs/audit.md](docs/audit.md), [arch](ARCHITECTURE.md), ![plot](docs/img/x.png)"
    assert hooks.on_page_markdown(text, readme, config, None) == (
        "[docs/audit.md](audit.md), [arch](architecture.md), ![plot](img/x.png)"
    )


def test_api_pages_cover_every_public_module_of_each_room_and_no_internal_one(hooks) -> None:
    pages = hooks.api_pages(ROOT)
    core = pages["api/core.md"]
    assert "::: lengthwise.core.tokens" in core and "::: lengthwise.core._lazy" not in core  # internal: not API
    assert "_compat" not in "".join(pages.values())
    assert "| `load_model` | `lengthwise.facade` |" in pages["api/index.md"]


def test_methods_citations_become_links_once(hooks) -> None:
    methods = SimpleNamespace(url_relative_to=lambda other: "../../methods/")
    files = SimpleNamespace(get_file_from_path=lambda path: methods if path == "methods.md" else None)
    page = SimpleNamespace(file=SimpleNamespace(src_uri="api/core.md"))
    html = '<p>(METHODS §2) and <a href="x">METHODS §1</a></p>'
    assert hooks.on_page_content(html, page, {}, files) == (
        '<p>(<a href="../../methods/#s2">METHODS §2</a>) and <a href="x">METHODS §1</a></p>'
    )
