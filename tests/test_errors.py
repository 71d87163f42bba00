"""The one error family (`lengthwise.core.errors`, issue 34.3): every error class derives from `LengthwiseError` and
is built as ``(field, value, problem)``; the library raises no bare `ValueError`; the CLI prints a field as its flag.
"""

from __future__ import annotations

import ast
import pickle
import re
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from lengthwise.audit.pairs.attack import NothingElongatedError
from lengthwise.audit.schema import SchemaError
from lengthwise.cli.options import setting_message
from lengthwise.core._optional import MissingExtra
from lengthwise.core.errors import (
    DataFormatError,
    LengthwiseError,
    ModelLoadError,
    SettingError,
    TrainingDiverged,
    enum_member,
)
from lengthwise.longdoc.config import LongDocError
from lengthwise.tempscale.config import TempScaleError

SRC = Path(__file__).resolve().parents[1] / "src" / "lengthwise"
RAISE_VALUE_ERROR = re.compile(r"\braise\s+ValueError\s*\(")

# Each class in the family, and whether it still takes another constructor than ``(field, value, problem)`` (a
# transitional form kept for callers not yet converted; none is left: every class is built the one way).
FAMILY: dict[type[LengthwiseError], bool] = {
    SettingError: False,
    DataFormatError: False,
    ModelLoadError: False,
    TrainingDiverged: False,
    NothingElongatedError: False,
    SchemaError: False,
    TempScaleError: False,
    LongDocError: False,
    MissingExtra: False,
}


def value_error_sites(root: Path) -> list[str]:
    """``path:line`` of every ``raise ValueError(`` under `root`, paths relative to `root`."""
    sites = []
    for path in sorted(root.rglob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if RAISE_VALUE_ERROR.search(line):
                sites.append(f"{path.relative_to(root).as_posix()}:{number}")
    return sites


def test_the_scan_finds_a_bare_value_error(tmp_path: Path) -> None:
    (tmp_path / "room").mkdir()
    (tmp_path / "room" / "bad.py").write_text("def f():\n    raise  ValueError ('x')\n", encoding="utf-8")
    (tmp_path / "good.py").write_text("def f():\n    raise SettingError('f', 1, 'x')  # not ValueError(\n")
    assert value_error_sites(tmp_path) == ["room/bad.py:2"]


def test_the_library_raises_no_bare_value_error() -> None:
    """No file is exempt: the command line and every room raise (or print) through the family."""
    assert (SRC / "core" / "errors.py").is_file()  # the scan looks at the package, not at an empty folder
    sites = value_error_sites(SRC)
    assert not sites, f"raise a lengthwise.core.errors class instead of ValueError at: {', '.join(sites)}"


def _exception_classes(root: Path) -> set[str]:
    """Names of the classes under `root` that derive (by name, transitively) from an exception class."""
    bases: dict[str, set[str]] = {}
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                names = {base.id if isinstance(base, ast.Name) else getattr(base, "attr", "") for base in node.bases}
                bases.setdefault(node.name, set()).update(names)
    found = {"Exception", "BaseException", "ValueError", "RuntimeError", "TypeError", "KeyError", "OSError"}
    while True:
        more = {name for name, parents in bases.items() if parents & found} - found
        if not more:
            return found - {"Exception", "BaseException", "ValueError", "RuntimeError", "TypeError", "KeyError",
                            "OSError"}  # fmt: skip
        found |= more


def test_every_error_class_of_the_library_is_in_the_family() -> None:
    assert _exception_classes(SRC) == {"LengthwiseError", *(kind.__name__ for kind in FAMILY)}
    for kind in FAMILY:
        assert issubclass(kind, LengthwiseError), kind


@pytest.mark.parametrize("kind", list(FAMILY), ids=lambda kind: kind.__name__)
def test_one_constructor_shape(kind: type[LengthwiseError]) -> None:
    error = kind(field="window", value=2, problem="too small; use at least 3 tokens")  # keywords work too
    assert (error.field, error.value, error.problem) == ("window", 2, "too small; use at least 3 tokens")
    assert str(error) == error.message == "window=2: too small; use at least 3 tokens"
    if not FAMILY[kind]:
        assert str(kind("window", 2, "too small")) == "window=2: too small"
        assert str(kind(None, None, "data.jsonl:3: not JSON")) == "data.jsonl:3: not JSON"
    copy = pickle.loads(pickle.dumps(error))  # Ray and worker processes send errors pickled
    assert type(copy) is kind and (copy.field, copy.value, copy.problem, str(copy)) == (
        "window",
        2,
        "too small; use at least 3 tokens",
        str(error),
    )


def test_backwards_compatible_bases() -> None:
    for kind in (SettingError, DataFormatError, TrainingDiverged, TempScaleError, LongDocError, SchemaError):
        assert issubclass(kind, ValueError), kind
    assert issubclass(ModelLoadError, RuntimeError)
    assert not issubclass(LengthwiseError, ValueError)


@pytest.mark.parametrize("kind", list(FAMILY), ids=lambda kind: kind.__name__)
def test_no_class_takes_a_message_alone(kind: type[LengthwiseError]) -> None:
    """The transitional forms are gone: ``ModelLoadError("...")`` and ``LongDocError("...", field=...)`` fail."""
    with pytest.raises(TypeError):
        kind("could not load model 'x'")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        kind("too small", field="window", value=2)  # type: ignore[call-arg]


def test_long_doc_error_lives_in_the_family_module_and_is_read_where_it_was() -> None:
    import lengthwise.core.errors as errors
    import lengthwise.longdoc as longdoc

    assert errors.LongDocError is LongDocError is longdoc.LongDocError
    assert "LongDocError" in errors.__all__ and issubclass(LongDocError, SettingError)


def test_a_message_shows_an_enum_by_its_value_and_a_path_as_text() -> None:
    from lengthwise.core.tokens import ElongationMode

    assert str(SettingError("mode", ElongationMode.RANDOM, "x")) == "mode='random': x"
    assert str(SettingError("out", Path("runs/a"), "x")) == "out='runs/a': x"


def _command(error: LengthwiseError) -> typer.Typer:
    app = typer.Typer()

    @app.command()
    def run(
        max_docs: int = typer.Option(0, "--max-docs"),
        label: list[str] = typer.Option([], "--label"),
        trust: bool = typer.Option(False, "--trust-remote-code"),
    ) -> None:
        typer.echo(setting_message(error))

    @app.command()
    def other() -> None:  # a second command, so `run` is a subcommand as in the real CLI
        pass

    return app


@pytest.mark.parametrize(
    ("error", "printed"),
    [
        (SettingError("max_docs", 0, "use at least 1"), "--max-docs 0: use at least 1"),
        (SettingError("labels", ["a", "b"], "one label per audit"), "--label a, b: one label per audit"),  # FLAGS
        (SettingError("out", Path("runs/a"), "exists"), "out='runs/a': exists"),  # no --out here: no flag
        (SettingError("tokenizer", "Bert", "unsupported"), "tokenizer='Bert': unsupported"),  # an argument
        (DataFormatError(None, None, "d.jsonl:3: not JSON"), "d.jsonl:3: not JSON"),
        (DataFormatError("max_docs", 0, "x"), "--max-docs 0: x"),  # any family member with a field
        (
            ModelLoadError("trust_remote_code", False, "runs its own code"),
            "without --trust-remote-code: runs its own code",
        ),
        (SettingError("trust_remote_code", True, "x"), "with --trust-remote-code: x"),  # a switch: given or not
    ],
)
def test_the_cli_prints_the_flag_of_a_field_the_command_has(error: LengthwiseError, printed: str) -> None:
    result = CliRunner().invoke(_command(error), ["run"])
    assert result.exit_code == 0 and result.output.strip() == printed


def test_outside_a_command_every_field_is_shown_as_a_flag() -> None:
    assert setting_message(SettingError("max_docs", 0, "use at least 1")) == "--max-docs 0: use at least 1"
    assert setting_message(ValueError("plain")) == "plain"


def test_the_cli_names_the_flag_for_a_library_setting_error(tmp_path: Path, tiny_model_dir: Path) -> None:
    """`core.output_set` raises `SettingError("out", ...)`; `lengthwise audit` prints it as ``--out``."""
    from lengthwise.cli import app

    target = tmp_path / "file"
    target.write_text("not a folder", encoding="utf-8")
    result = CliRunner().invoke(app, ["audit", "--model", str(tiny_model_dir), "--out", str(target)])
    assert result.exit_code != 0
    assert f"--out {target}: exists and is not a directory" in result.output


def test_one_enum_reader_for_every_setting_that_names_a_choice() -> None:
    """`enum_member` replaced four copies (index engines, fusion, evaluation, training): a member passes, a value is
    read in any case, anything else is a `SettingError` naming the field and every choice (one message for all)."""
    from lengthwise.search.fusion import FusionSettings
    from lengthwise.search.local.engines import Quantize

    assert enum_member(Quantize, "quantize", Quantize.INT8) is Quantize.INT8
    assert enum_member(Quantize, "quantize", " UBinary ") is Quantize.UBINARY
    with pytest.raises(SettingError, match=r"^quantize='int4': use one of none, int8, ubinary$"):
        enum_member(Quantize, "quantize", "int4")
    with pytest.raises(SettingError, match=r"^fusion='max': use one of convex, rrf, zscore, minmax, dbsf, adaptive$"):
        FusionSettings("max")
