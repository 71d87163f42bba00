"""Start-up: `lengthwise --help`, `--version` and every command's help load neither torch nor the other heavy
libraries, and not the parts of rich that cost most of the 0.3 s budget (benchmarks/encode/startup.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from lengthwise.cli.app import COMMANDS

# (fastapi, uvicorn, starlette, httpx: `lengthwise serve` imports them when it runs)
HEAVY = ("torch", "sentence_transformers", "transformers", "numpy", "scipy", "matplotlib", "sklearn", "datasets",
         "fastapi", "uvicorn", "starlette", "httpx")  # fmt: skip
# typer's rich help formatter (rich.markdown + markdown-it) and the progress bar: 0.1–0.25 s each to import
# and the stderr console, made on first use (lengthwise.cli.console)
SLOW_RICH = ("rich", "markdown_it", "typer.rich_utils")

PROBE = textwrap.dedent(
    """
    import contextlib, io, json, sys
    from lengthwise.cli import main
    from typer.main import get_command
    from lengthwise.cli import app

    root = get_command(app)
    runs = []
    for argv in json.loads(sys.argv[1]) or [
        [name, *([sub] if sub else []), "--help"]
        for name in root.list_commands(None)
        for sub in [None, *getattr(root.get_command(None, name), "commands", {})]
    ]:
        sys.argv = ["lengthwise", *argv]
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            try:
                main()
            except SystemExit as stop:
                code = stop.code
        runs.append({"argv": argv, "code": code, "out": out.getvalue(), "modules": sorted(sys.modules)})
    print(json.dumps(runs))
    """
)


def _run(argvs: list[list[str]]) -> list[dict]:
    """Run `lengthwise ARGV` in-process, one after another, in a fresh interpreter; each run's modules so far.
    No argv lists: the `--help` of every command and sub-command the Typer app registers."""
    run = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(argvs)], capture_output=True, text=True, check=False, timeout=300
    )
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.strip().splitlines()[-1])


def _loaded(modules: list[str], names: tuple[str, ...]) -> list[str]:
    return [name for name in names if any(m == name or m.startswith(name + ".") for m in modules)]


@pytest.mark.parametrize("argv", [["--help"], ["--version"]], ids=["help", "version"])
def test_help_and_version_import_nothing_heavy(argv: list[str]) -> None:
    (result,) = _run([argv])
    assert result["code"] == 0
    assert "lengthwise" in result["out"]
    assert _loaded(result["modules"], HEAVY) == [], "a heavy import at CLI start-up: move it inside the command"
    assert _loaded(result["modules"], SLOW_RICH) == [], "import rich inside the command function"
    commands = sorted({entry.module for entry in COMMANDS.values()})
    assert [name for name in commands if name in result["modules"]] == [], "the root group loads a command eagerly"


def test_the_root_help_lists_each_command_by_its_own_help() -> None:
    """`lengthwise --help` prints `COMMANDS`' summaries without importing the commands: each must be the
    command's own first sentence (its docstring or group help), so the listing cannot drift from the commands."""
    from lengthwise.cli.app import load_command

    for name, entry in COMMANDS.items():
        assert entry.summary == load_command(name).get_short_help_str(limit=1000), name


def test_an_unknown_command_is_refused_by_name() -> None:
    from typer.testing import CliRunner

    from lengthwise.cli import app

    result = CliRunner().invoke(app, ["nosuch"])
    assert result.exit_code == 2 and "No such command 'nosuch'" in result.output


def test_every_command_help_imports_nothing_heavy() -> None:
    runs = _run([])
    helps = [run["argv"] for run in runs]
    assert ["audit", "--help"] in helps and ["tempscale", "tune", "--help"] in helps
    for run in runs:  # modules accumulate: the first run that shows a heavy one is the culprit
        assert run["code"] == 0, run["argv"]
        assert "Usage: lengthwise" in run["out"], run["argv"]
        heavy = _loaded(run["modules"], HEAVY)
        assert heavy == [], f"`lengthwise {' '.join(run['argv'])}` imports {heavy}; import them inside the command"


def test_importtime_shows_no_torch() -> None:
    # the issue's own check: python -X importtime -c "import lengthwise.cli"
    run = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import lengthwise.cli"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    imported = {line.rsplit("|", 1)[-1].strip() for line in run.stderr.splitlines() if line.startswith("import time:")}
    assert "lengthwise.cli" in imported
    assert not {name for name in imported if name.split(".")[0] in {"torch", "sentence_transformers", "transformers"}}


def test_import_lengthwise_loads_no_torch_and_reads_its_version_statically() -> None:
    code = "import sys, lengthwise; print(lengthwise.__version__, 'torch' in sys.modules)"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    from importlib import metadata

    assert run.stdout.split() == [metadata.version("lengthwise"), "False"]  # _version.py agrees with the metadata


def test_ray_data_read_tasks_import_no_torch() -> None:
    """Each Ray Data task that reads the corpus unpickles `_raydata._texts`, importing its module (and the shard
    store) in a fresh worker: without torch, that costs about 0.1 s instead of 3–4 s of a 2-core machine's CPU."""
    heavy = "{'torch', 'sentence_transformers', 'transformers'}"
    code = (
        f"import sys, lengthwise.longdoc.storage._raydata; "
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & {heavy}))"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert run.stdout.strip() == "[]", run.stdout


def test_the_lazy_console_serves_status_progress_and_errors(capsys: pytest.CaptureFixture[str]) -> None:
    import typer
    from rich.progress import BarColumn, Progress

    from lengthwise.cli.console import _StderrConsole, escape, fail

    console = _StderrConsole()
    with console.status("loading"):
        pass
    with Progress(BarColumn(), console=console, transient=True) as progress:  # rich enters the console
        progress.update(progress.add_task("x", total=2), completed=2)
    console.print("done [x]", markup=False)
    assert escape("[train]") == "\\[train]"
    with pytest.raises(typer.Exit) as stop:
        fail("bad [thing]")
    assert stop.value.exit_code == 2
    said = capsys.readouterr().err
    assert "done [x]" in said and "error: bad [thing]" in said
