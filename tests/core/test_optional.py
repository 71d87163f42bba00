"""One refusal for a missing optional dependency (`lengthwise.core._optional`), issue 47.8: every command that needs
an extra says in one line which one to install. Each module is made unimportable by ``sys.modules[name] = None``
(Python then raises `ModuleNotFoundError` on its import), as it is without the extra.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lengthwise.core._optional import EXTRAS, MissingExtra, missing_extra, require
from lengthwise.core.errors import LengthwiseError, SettingError


def test_a_missing_module_is_one_line_naming_its_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "faiss", None)
    with pytest.raises(MissingExtra) as caught:
        require("faiss", extra="index", field="engine", value="faiss")
    error = caught.value
    assert isinstance(error, SettingError) and isinstance(error, ModuleNotFoundError) and error.name == "faiss"
    assert str(error) == "engine='faiss': needs faiss-cpu, not installed: pip install 'lengthwise[index]'"


def test_every_missing_module_is_named_once(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ray", "ray.data"):
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(
        MissingExtra, match=r"^serving needs ray\[data\], not installed: pip install 'lengthwise\[ray\]'"
    ):
        require("json", "ray", "ray.data", extra="ray", purpose="serving")
    assert require("json", extra="serve").dumps([]) == "[]"  # installed: the first module back


def _serve() -> None:
    from lengthwise.service import serve

    serve("/nonexistent-index")


def _lexical() -> None:
    from lengthwise.search.lexical.bm25 import require_bm25s

    require_bm25s()


def _engine(name: str) -> Callable[[], None]:
    def engine() -> None:
        from lengthwise.search.local.engines import Engine, _require

        _require(Engine(name))

    return engine


def _ray() -> None:
    from lengthwise.longdoc.storage._raydata import require_ray

    require_ray()


def _parquet() -> None:
    from lengthwise.longdoc.storage._parquet import require_pyarrow

    require_pyarrow()


def _train() -> None:
    from lengthwise.training.run import _require_training_extras

    _require_training_extras()


def _train_yaml(tmp: Path) -> None:
    from lengthwise.training.config import read_config_file

    (tmp / "c.yaml").write_text("lr: 1\n")
    read_config_file(tmp / "c.yaml")


def _hub() -> None:
    from lengthwise.evaluation.hub import _load_dataset

    _load_dataset("org/name", split="test")


def _mteb() -> None:
    from lengthwise.evaluation.mteb_adapter import MtebEncoder

    model = MtebEncoder.__new__(MtebEncoder)  # no model needed: the metadata's import comes first
    _ = model.mteb_model_meta


# what needs an extra → (the module holding the check, the module made missing, the extra the message must name)
NEEDS: dict[str, tuple[Callable[..., None], str, str, str]] = {
    "serve": (_serve, "lengthwise.service.run", "fastapi", "serve"),
    "serve (uvicorn)": (_serve, "lengthwise.service.run", "uvicorn", "serve"),
    "lexical search": (_lexical, "lengthwise.search.lexical.bm25", "bm25s", "index"),
    "PyStemmer": (_lexical, "lengthwise.search.lexical.bm25", "Stemmer", "index"),
    "faiss engine": (_engine("faiss"), "lengthwise.search.local.engines", "faiss", "index"),
    "usearch engine": (_engine("usearch"), "lengthwise.search.local.engines", "usearch", "index"),
    "encode --runner ray": (_ray, "lengthwise.longdoc.storage._raydata", "ray", "ray"),
    "encode --format parquet": (_parquet, "lengthwise.longdoc.storage._parquet", "pyarrow", "parquet"),
    "train": (_train, "lengthwise.training.run", "accelerate", "train"),
    "train --config YAML": (_train_yaml, "lengthwise.training.config", "yaml", "train"),
    "hf: data": (_hub, "lengthwise.evaluation.hub", "datasets", "hub"),
    "mteb adapter": (_mteb, "lengthwise.evaluation.mteb_adapter", "mteb", "mteb"),
}


@pytest.mark.parametrize("name", list(NEEDS))
def test_each_feature_needing_an_extra_names_it(name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    call, owner, module, extra = NEEDS[name]
    importlib.import_module(owner)  # imported with the extra there, as its own imports (sentence-transformers) need
    for loaded in [m for m in sys.modules if m == module or m.startswith(module + ".")]:
        monkeypatch.delitem(sys.modules, loaded)
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(LengthwiseError) as caught:
        call(tmp_path) if call is _train_yaml else call()
    assert isinstance(caught.value, MissingExtra), caught.value
    assert f"pip install 'lengthwise[{extra}]'" in str(caught.value) and "\n" not in str(caught.value)


def test_an_import_past_the_checks_ends_the_command_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`lengthwise.cli.main`: a command that imports an optional module deeper down prints the extra, exit 2."""
    import lengthwise.cli as cli
    from lengthwise.core import allocator

    def command(**_: Any) -> None:
        import usearch_not_here  # noqa: F401  (stands for an optional module imported deep in a command)

    monkeypatch.setitem(EXTRAS, "usearch_not_here", ("usearch", "index"))
    monkeypatch.setattr(cli, "app", command)
    monkeypatch.setattr(allocator, "tune_allocator", lambda: None)  # pytest's own process and environment kept
    with pytest.raises(SystemExit) as stopped:
        cli.main()
    assert stopped.value.code == 2
    assert capsys.readouterr().err == "error: usearch is not installed: pip install 'lengthwise[index]'\n"
    assert missing_extra(ModuleNotFoundError("No module named 'nope'", name="nope")) is None  # not an extra's
