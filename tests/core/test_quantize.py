"""int8 on the CPU (`lengthwise.core.quantize`): which layers are quantized, closeness to fp32, provenance, refusals."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from lengthwise.cli import app
from lengthwise.core.errors import SettingError
from lengthwise.core.models import load_plain_model, model_fingerprint
from lengthwise.core.precision import Precision
from lengthwise.core.quantize import (
    DEFAULT_KEEP_FP32,
    RowScaledLinear,
    linear_precision,
    quantize_int8,
)

TEXTS = ["a short sentence about rivers", "another one, about the tax office and its long forms"] * 4


def _dynamic_linear() -> type:
    from torch.ao.nn.quantized.dynamic import Linear

    return Linear


def test_the_kept_layers_stay_fp32_and_the_rest_become_int8(tiny_model_dir: Path) -> None:
    model = load_plain_model(tiny_model_dir, device="cpu")
    total = linear_precision(model)["fp32"]
    names = quantize_int8(model, keep_fp32=("*.attention.output.dense",))
    network = model[0].auto_model
    for name, module in network.named_modules():
        if name.endswith("attention.output.dense"):
            assert type(module) is torch.nn.Linear, name
        elif name in names:  # torch's dynamic int8 Linear, its activations scaled per row
            assert isinstance(module, RowScaledLinear) and isinstance(module.inner, _dynamic_linear()), name
    counts = linear_precision(model)
    assert counts["int8"] == len(names) > 0 and counts["int8"] + counts["fp32"] == total


def test_weights_are_packed_for_onednn_and_the_process_engine_is_restored(
    tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch.ao.quantization as tq

    if "onednn" not in torch.backends.quantized.supported_engines:
        pytest.skip("this torch build has no oneDNN quantized engine")
    seen: list[str] = []
    real = tq.quantize_dynamic

    def spy(*args: object, **kwargs: object) -> object:
        seen.append(torch.backends.quantized.engine)
        return real(*args, **kwargs)

    monkeypatch.setattr(tq, "quantize_dynamic", spy)
    before = torch.backends.quantized.engine
    model = load_plain_model(tiny_model_dir, device="cpu")
    quantize_int8(model)
    assert seen == ["onednn"] and torch.backends.quantized.engine == before
    assert model.encode(TEXTS).shape[0] == len(TEXTS)  # the packed weights run under the restored engine


def test_int8_embeddings_stay_close_to_fp32(tiny_model_dir: Path) -> None:
    fp32 = load_plain_model(tiny_model_dir, device="cpu").encode(TEXTS, normalize_embeddings=True)
    int8 = load_plain_model(tiny_model_dir, device="cpu", precision="int8").encode(TEXTS, normalize_embeddings=True)
    cosines = (fp32 * int8).sum(axis=1)
    assert cosines.min() > 0.95 and not np.allclose(fp32, int8)  # quantized, and still the same embedding


def test_an_int8_vector_does_not_depend_on_its_batch_mates(minilm_path: str) -> None:
    # before (issue 33.4b): activations were quantized per tensor over the padded batch; the sentence alone and
    # beside seven long ones had cosine 0.987 (fp32: 1.000)
    one = "A man is playing a guitar on the street."
    others = ["The committee published a long report on the economic consequences of the new trade agreement "
              f"for the farmers of region {i}, with tables."  for i in range(7)]  # fmt: skip
    model = load_plain_model(minilm_path, device="cpu", precision="int8")
    alone = model.encode([one], normalize_embeddings=True)[0]
    mixed = model.encode([*others[:3], one, *others[3:]], batch_size=8, normalize_embeddings=True)[3]
    np.testing.assert_allclose(alone, mixed, atol=1e-5)
    fp32 = load_plain_model(minilm_path, device="cpu").encode([one], normalize_embeddings=True)[0]
    assert float(alone @ fp32) > 0.99


def test_provenance_records_the_precision(tiny_model_dir: Path) -> None:
    fp32 = model_fingerprint(load_plain_model(tiny_model_dir, device="cpu"), "tiny")
    int8 = model_fingerprint(load_plain_model(tiny_model_dir, device="cpu", precision="int8"), "tiny")
    assert fp32["precision"] == "fp32" and fp32["linear_layers"]["int8"] == 0
    assert int8["precision"] == "int8" and int8["linear_layers"]["int8"] > 0
    assert int8["weights_sha256_16"]  # the int8 layers' packed weights are skipped, the rest still hashed


def test_bad_precision_and_gpu_int8_are_refused_in_one_line(tiny_model_dir: Path) -> None:
    with pytest.raises(SettingError, match="precision='fp8': use auto, fp32, bf16, fp16 or int8"):
        Precision.parse("fp8")
    with pytest.raises(SettingError, match=r"int8 runs on the CPU only.*use bf16 or fp16"):
        load_plain_model(tiny_model_dir, device="cuda", precision="int8")
    with pytest.raises(SettingError, match="leaves no Linear layer"):
        quantize_int8(load_plain_model(tiny_model_dir, device="cpu"), keep_fp32=("*",))


def test_the_default_keeps_what_the_benchmark_chose() -> None:
    assert DEFAULT_KEEP_FP32  # an empty default would quantize the layers encode/precision.py found too lossy


def test_audit_and_eval_record_int8(tiny_model_dir: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    run = runner.invoke(app, ["audit", "-m", str(tiny_model_dir), "--max-pairs", "8", "--null-permutations", "0",
                              "--precision", "int8", "-o", str(tmp_path / "a")])  # fmt: skip
    assert run.exit_code == 0, run.output
    assert json.loads((tmp_path / "a" / "audit.json").read_text())["model"]["precision"] == "int8"
    assert "precision" in (tmp_path / "a" / "report.html").read_text()
    stsb = Path(__file__).parents[1] / "data" / "stsb" / "sts-test.csv.gz"
    run = runner.invoke(app, ["eval", "-m", str(tiny_model_dir), "-t", "sts", "-d", str(stsb), "--max-test", "30",
                              "--precision", "int8", "-o", str(tmp_path / "e")])  # fmt: skip
    assert run.exit_code == 0, run.output
    assert json.loads((tmp_path / "e" / "results.json").read_text())["model"]["precision"] == "int8"


def test_training_refuses_int8_in_one_line(tmp_path: Path) -> None:
    run = CliRunner().invoke(
        app, ["train", "--method", "simcse", "-d", "x.txt", "-o", str(tmp_path), "--mixed-precision", "int8"]
    )
    assert run.exit_code == 2
    lines = [line for line in run.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "int8 is for inference on the CPU, not training" in lines[0], run.output
