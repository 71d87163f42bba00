"""`lengthwise tempscale` against careless and hostile input: baking in place or twice, absurd temperatures, an
unwritable --out, a bad --device and a model that needs its own code — each a one-line error, nothing lost."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from lengthwise.cli import app
from lengthwise.tempscale import SETTINGS_FILE, TempScaleConfig, TempScaleError, bake_tempscale, read_tempscale_settings

pytestmark = pytest.mark.usefixtures("one_thread")
runner = CliRunner()
TEXTS = ["one short text", "and a second, longer one with more words in it"]


def _error(result) -> str:
    assert result.exit_code == 2, result.output
    assert result.output.strip().startswith("error:") and result.output.count("error:") == 1
    return " ".join(result.output.split())


def _bake(model: Path, out: Path, t: str, *extra: str):
    return runner.invoke(app, ["tempscale", "bake", "--model", str(model), "--t", t, "--out", str(out), *extra])


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_bake_refuses_to_write_over_its_source(tiny_model_dir: Path, tmp_path: Path) -> None:
    """13.9: `bake --out X -m X` overwrote the source weights."""
    source = tmp_path / "model"
    shutil.copytree(tiny_model_dir, source)
    before = _files(source)
    assert "is the model being baked" in _error(_bake(source, source, "0.8"))
    assert "is the model being baked" in _error(_bake(source, tmp_path / "." / "model", "0.8"))
    assert _files(source) == before
    from lengthwise.core.models import load_plain_model

    with pytest.raises(TempScaleError, match="in place"):
        bake_tempscale(load_plain_model(source, device="cpu"), 0.8, source)  # the library refuses too


def test_a_second_bake_is_refused_unless_asked_and_then_records_the_product(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    """13.9: a second bake divided by t again while the saved settings still said t."""
    from sentence_transformers import SentenceTransformer

    once, twice, direct = tmp_path / "once", tmp_path / "twice", tmp_path / "direct"
    assert _bake(tiny_model_dir, once, "0.8").exit_code == 0
    message = _error(_bake(once, twice, "0.5"))
    assert "already carries t = 0.8" in message and "--rebake" in message
    assert not twice.exists()
    result = _bake(once, twice, "0.5", "--rebake")
    assert result.exit_code == 0, result.output
    assert "t = 0.4 (= 0.8 × 0.5)" in " ".join(result.output.split())
    config, baked = read_tempscale_settings(twice)  # type: ignore[misc]
    assert baked and config.t == pytest.approx(0.4)
    assert json.loads((twice / SETTINGS_FILE).read_text())["baked_steps"] == [0.8, 0.5]
    assert _bake(tiny_model_dir, direct, "0.4").exit_code == 0
    stacked = SentenceTransformer(str(twice), device="cpu").encode(TEXTS)
    np.testing.assert_allclose(stacked, SentenceTransformer(str(direct), device="cpu").encode(TEXTS), atol=1e-5)


def test_absurd_temperatures_are_refused_with_their_flag(tiny_model_dir: Path, tmp_path: Path) -> None:
    """13.21: `bake --t 1e-30` was accepted without a word."""
    assert "--t 1e-30: outside [0.01, 100]" in _error(_bake(tiny_model_dir, tmp_path / "b", "1e-30"))
    message = _error(_bake(tiny_model_dir, tmp_path / "b", "0.8", "--t-query", "inf"))
    assert message.startswith("error: --t-query inf")
    assert not (tmp_path / "b").exists()
    note = _bake(tiny_model_dir, tmp_path / "c", "0.1", "--no-verify")
    assert note.exit_code == 0 and "far from the usual" in note.output
    with pytest.raises(TempScaleError) as error:
        TempScaleConfig(t=1e-30)
    assert error.value.field == "t"


def test_tune_checks_out_before_computing(tiny_model_dir: Path, tmp_path: Path) -> None:
    """13.12: an unwritable --out failed with a traceback after all the compute, losing the results."""
    data = tmp_path / "sts.tsv"
    data.write_text("".join(f"a cat {i}\ta cat sits {i}\t{i % 5}\n" for i in range(8)), encoding="utf-8")
    blocker = tmp_path / "file"
    blocker.write_text("a file, not a folder", encoding="utf-8")
    args = ["tempscale", "tune", "--task-type", "sts", "--data", str(data), "--model", str(tiny_model_dir)]
    result = runner.invoke(app, [*args, "--grid", "0.5,1.0", "--out", str(blocker)])
    message = _error(result)
    assert "--out" in message and "not a directory" in message
    assert "spearman =" not in result.output  # refused before a single evaluation
    assert _error(runner.invoke(app, [*args, "--grid", "0.5,1.0", "--grid", "1e-9,1.0"])).startswith(
        "error: --grid/--bounds 1e-09"
    )


@pytest.mark.parametrize("command", ["bake", "save", "tune"])
def test_a_bad_device_is_one_line(command: str, tiny_model_dir: Path, tmp_path: Path) -> None:
    """13.19: `--device quantum` (or cuda on a CPU machine) gave a traceback."""
    args = {
        "bake": ["--t", "0.8", "--out", str(tmp_path / "o")],
        "save": ["--t", "0.8", "--out", str(tmp_path / "o")],
        "tune": ["--task-type", "sts", "--data", str(tmp_path), "--out", str(tmp_path / "o")],
    }[command]
    for device in ("quantum", "cuda:9"):
        argv = ["tempscale", command, "--model", str(tiny_model_dir), *args, "--device", device]
        message = _error(runner.invoke(app, argv))
        assert f"--device '{device}'" in message
    assert not (tmp_path / "o").exists()


@pytest.fixture(scope="module")
def remote_code_model(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> Path:
    """A model folder whose config asks for its own code (auto_map), as many hub repositories do."""
    folder = tmp_path_factory.mktemp("remote")
    shutil.copytree(tiny_model_dir, folder, dirs_exist_ok=True)
    config = json.loads((folder / "config.json").read_text())
    config.update(model_type="lwcustom", auto_map={"AutoConfig": "conf.LwConfig", "AutoModel": "model.LwModel"})
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "conf.py").write_text(
        "from transformers import BertConfig\n\n\nclass LwConfig(BertConfig):\n    model_type = 'lwcustom'\n"
    )
    (folder / "model.py").write_text(
        "from transformers import BertModel\n\nfrom .conf import LwConfig\n\n\n"
        "class LwModel(BertModel):\n    config_class = LwConfig\n"
    )
    return folder


@pytest.mark.parametrize("command", ["bake", "save", "tune"])
def test_remote_code_hint_is_whole_and_every_command_has_the_flag(
    command: str, remote_code_model: Path, tmp_path: Path
) -> None:
    """13.20: the hint was cut to its first line (losing the fix), and the tempscale commands lacked the flag."""
    data = tmp_path / "sts.tsv"
    data.write_text("".join(f"a cat {i}\ta cat sits {i}\t{i % 5}\n" for i in range(8)), encoding="utf-8")
    args = {
        "bake": ["--t", "0.8", "--out", str(tmp_path / "o")],
        "save": ["--t", "0.8", "--out", str(tmp_path / "o")],
        "tune": ["--task-type", "sts", "--data", str(data), "--out", str(tmp_path / "o")],
    }[command]
    message = _error(runner.invoke(app, ["tempscale", command, "--model", str(remote_code_model), *args]))
    assert "without --trust-remote-code: model" in message and "allow it if you trust that code" in message
    assert "--trust-remote-code" in runner.invoke(app, ["tempscale", command, "--help"]).output
