"""Half precision at inference (`lengthwise.core.precision`, issue 48): the vocabulary, what each device allows and
`auto` picks, bf16/fp16 vectors against fp32, TempScale under half, provenance, and the flag on every command."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from sentence_transformers import SentenceTransformer
from typer.testing import CliRunner

from lengthwise.cli import app
from lengthwise.core import precision as precision_module
from lengthwise.core.errors import SettingError
from lengthwise.core.models import load_plain_model, model_fingerprint
from lengthwise.core.precision import Precision, cast_half, model_precision, resolve_precision

TEXTS = ["a short sentence about rivers", "another one, about the tax office and its long forms and its queues",
         "the committee met on tuesday", "rain"] * 2  # fmt: skip
STSB = Path(__file__).parents[1] / "data" / "stsb" / "sts-test.csv.gz"
PROSE = Path(__file__).parents[1] / "longdoc" / "prose.txt"
NATIVE = {"bf16": True, "fp16": True, "amx": True}
NONE = {"bf16": False, "fp16": False, "amx": False}
Support = Callable[[dict[str, bool]], None]


@pytest.fixture
def cpu_support(monkeypatch: pytest.MonkeyPatch) -> Support:
    """Set what this CPU runs natively, whatever the host has: ``cpu_support(NONE)``."""

    def set_support(support: dict[str, bool]) -> None:
        monkeypatch.setattr(precision_module, "cpu_half_support", lambda: dict(support))

    set_support(NATIVE)  # the mechanics tests run bf16/fp16 on any host (slowly where emulated: a tiny model)
    return set_support


@pytest.mark.parametrize(
    ("given", "expected"),
    [("auto", Precision.AUTO), ("FP32", Precision.FP32), ("bf16", Precision.BF16), (" fp16", Precision.FP16),
     ("Int8", Precision.INT8), (Precision.BF16, Precision.BF16)],
)  # fmt: skip
def test_parse_knows_the_half_precisions_and_auto(given: str, expected: Precision) -> None:
    assert Precision.parse(given) is expected


def test_an_unknown_precision_names_every_choice() -> None:
    with pytest.raises(SettingError, match=r"precision='fp8': use auto, fp32, bf16, fp16 or int8$"):
        Precision.parse("fp8")


@pytest.mark.parametrize("wanted", ["fp16", "bf16"])
def test_half_on_a_cpu_without_native_support_is_refused_naming_what_to_use(wanted: str, cpu_support: Support) -> None:
    cpu_support(NONE)
    with pytest.raises(SettingError) as caught:
        resolve_precision(wanted, "cpu")
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"precision={wanted!r}: ") and "use fp32" in message


def test_fp16_on_a_cpu_with_native_bf16_only_points_at_bf16(cpu_support: Support) -> None:
    cpu_support({"bf16": True, "fp16": False, "amx": True})
    with pytest.raises(SettingError, match=r"use bf16, which this CPU has$"):
        resolve_precision("fp16", "cpu")
    assert resolve_precision("bf16", "cpu") is Precision.BF16


def test_the_cli_refuses_fp16_on_such_a_cpu_in_one_line(
    tiny_model_dir: Path, tmp_path: Path, cpu_support: Support
) -> None:
    cpu_support(NONE)
    args = ["eval", "-m", str(tiny_model_dir), "-t", "sts", "-d", str(STSB), "--max-test", "30", "--device", "cpu"]
    run = CliRunner().invoke(app, [*args, "--precision", "fp16", "-o", str(tmp_path / "e")])
    lines = [line for line in run.output.splitlines() if line.strip()]
    assert run.exit_code == 2 and len(lines) == 1, run.output
    assert lines[0].startswith("error: --precision 'fp16': this CPU has no native fp16") and "use fp32" in lines[0]


def test_auto_is_the_device_s_best(cpu_support: Support, monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_precision("auto", "cpu") is Precision.BF16  # a CPU with AMX
    # before (issue 62.12): AVX512-BF16 without AMX meant fp32, though bf16 runs 2-3x faster there
    cpu_support({"bf16": True, "fp16": False, "amx": False})
    assert resolve_precision("auto", "cpu") is Precision.BF16
    cpu_support(NONE)  # an AVX2 CPU: bf16 emulated, several times slower
    assert resolve_precision("auto", "cpu") is Precision.FP32
    assert resolve_precision("auto", "mps") is Precision.FP32
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert resolve_precision("auto", "cuda:0") is Precision.BF16
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)  # a pre-Ampere GPU
    assert resolve_precision("auto", "cuda") is Precision.FP16
    with pytest.raises(SettingError, match=r"means fp16 on cuda:0 but fp32 on cpu; name one precision"):
        resolve_precision("auto", "cuda:0", "cpu")


def test_the_int8_refusal_on_a_gpu_names_precisions_that_exist(
    tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # before (issue 48): "on a GPU use fp16 or bf16", which no command accepted
    from lengthwise.core.quantize import quantize_int8

    with pytest.raises(SettingError) as at_load:
        load_plain_model(tiny_model_dir, device="cuda", precision="int8")
    model = load_plain_model(tiny_model_dir, device="cpu")
    monkeypatch.setattr(SentenceTransformer, "device", property(lambda self: torch.device("cuda", 0)))
    with pytest.raises(SettingError) as at_quantize:
        quantize_int8(model)
    for error in (at_load.value, at_quantize.value):
        named = re.findall(r"\b(?:fp|bf)\d+\b", str(error).split("use", 1)[1])
        assert named and all(Precision.parse(name).value == name for name in named), str(error)


def test_bf16_and_fp16_vectors_are_fp32_unit_vectors_close_to_fp32(tiny_model_dir: Path, cpu_support: Support) -> None:
    fp32 = load_plain_model(tiny_model_dir, device="cpu").encode(TEXTS)
    for name in ("bf16", "fp16"):
        half = load_plain_model(tiny_model_dir, device="cpu", precision=name).encode(TEXTS)
        assert half.dtype == np.float32
        np.testing.assert_allclose(np.linalg.norm(half, axis=1), 1.0, atol=1e-6)  # normalised in fp32, as before
        cosines = (fp32 * half).sum(axis=1)
        assert cosines.min() > 0.995 and not np.array_equal(fp32, half), name


def test_the_per_layer_path_gives_the_same_half_vectors(tiny_model_dir: Path, cpu_support: Support) -> None:
    from lengthwise.core.embed import TokenView, embed_ids, forward_batches

    model = load_plain_model(tiny_model_dir, device="cpu", precision="bf16")
    view = TokenView(model)
    ids = [view.wrap(row) for row in view.content(TEXTS)]
    plain = embed_ids(model, ids)
    batches = list(forward_batches(model, ids, hidden_states=True, attentions=True))
    states = np.empty_like(plain)
    for batch in batches:
        states[batch.index] = batch.pooled
    np.testing.assert_array_equal(plain, states)
    assert {t.dtype for b in batches for t in (*b.hidden, *b.attentions)} == {torch.float32}  # numpy-ready


def test_fp32_loads_exactly_as_sentence_transformers_does(tiny_model_dir: Path) -> None:
    # the default precision changes nothing: no cast, no hook, the vectors of a plain SentenceTransformer
    ours = load_plain_model(tiny_model_dir, device="cpu")
    assert not ours[0].auto_model._forward_hooks and model_precision(ours) == "fp32"
    plain = SentenceTransformer(str(tiny_model_dir), device="cpu")
    np.testing.assert_array_equal(ours.encode(TEXTS), plain.encode(TEXTS))


@pytest.mark.parametrize("schedule", [False, True])
def test_tempscale_under_half_is_the_same_patched_before_or_after_the_cast(
    minilm_path: str, schedule: bool, cpu_support: Support
) -> None:
    # the real model: a random tiny BERT's attention is near uniform, and sharpening it changes little
    from lengthwise.tempscale import LengthSchedule, TempScaleConfig, apply_tempscale

    config = TempScaleConfig(t=0.6, schedule=LengthSchedule((4.0, 30.0), (1.2, 0.7)) if schedule else None)
    cast_then_patch = load_plain_model(minilm_path, device="cpu", precision="bf16")
    unpatched = cast_then_patch.encode(TEXTS)
    apply_tempscale(cast_then_patch, config)
    patch_then_cast = load_plain_model(minilm_path, device="cpu")
    apply_tempscale(patch_then_cast, config)
    fp32_patched = patch_then_cast.encode(TEXTS)
    cast_half(patch_then_cast, "bf16")
    first, second = cast_then_patch.encode(TEXTS), patch_then_cast.encode(TEXTS)
    np.testing.assert_array_equal(first, second)
    assert (first * unpatched).sum(axis=1).min() < 0.99  # the patch acts in half precision
    assert (first * fp32_patched).sum(axis=1).min() > 0.999  # and acts as it does in fp32


def test_load_model_records_the_precision(tiny_model_dir: Path, cpu_support: Support) -> None:
    from lengthwise.facade import load_model

    for name in ("bf16", "fp16"):
        model = load_model(tiny_model_dir, device="cpu", precision=name)
        record = model_fingerprint(model, "tiny")
        assert record["precision"] == name
        assert record["linear_layers"][name] > 0 and record["linear_layers"]["fp32"] == 0
    fp32 = model_fingerprint(load_model(tiny_model_dir, device="cpu"), "tiny")
    assert fp32["precision"] == "fp32" and set(fp32["linear_layers"]) == {"int8", "fp32"}  # as before issue 48
    assert model_fingerprint(load_model(tiny_model_dir, device="cpu", precision="auto"), "t")["precision"] == "bf16"


def test_a_bf16_corpus_is_searched_with_a_bf16_query_model(
    tiny_model_dir: Path, tmp_path: Path, cpu_support: Support
) -> None:
    import lengthwise as lw

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        "".join(json.dumps({"_id": f"d{i}", "text": f"{text} {i}"}) + "\n" for i, text in enumerate(TEXTS))
    )
    lw.encode(corpus, tmp_path / "emb", tiny_model_dir, devices=["cpu"], precision="auto")  # AMX (the fixture): bf16
    assert json.loads((tmp_path / "emb" / "manifest.json").read_text())["settings"]["precision"] == "bf16"
    lw.LongIndex.build(tmp_path / "emb", tmp_path / "index")
    index = lw.LongIndex.open(tmp_path / "index")
    hits = index.search(["rivers"], 3)
    assert len(hits[0]) == 3 and index.model is not None and model_precision(index.model) == "bf16"


@pytest.fixture(scope="module")
def passkey(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("synth") / "passkey"
    args = ["longdoc", "synth", "--task", "passkey", "--haystack", PROSE, "--out", folder, "--model", tiny_model_dir]
    run = CliRunner().invoke(app, [str(a) for a in [*args, "--lengths", "48", "--per-length", "2"]])
    assert run.exit_code == 0, run.output
    return folder


COMMANDS = {
    "audit": ["audit", "--max-pairs", "8"],
    "eval": ["eval", "-t", "sts", "-d", STSB, "--max-test", "30"],
    "encode": ["encode", "-d", "{passkey}/corpus.jsonl"],
    "longdoc eval": ["longdoc", "eval", "-d", "{passkey}"],
    "longdoc tune": ["longdoc", "tune", "-d", "{passkey}", "--windows", "16"],
    "tempscale tune": ["tempscale", "tune", "-t", "sts", "-d", STSB, "--max-items", "40", "--grid", "0.7,1.0"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_embedding_command_hands_its_precision_to_the_library(
    command: str, tiny_model_dir: Path, passkey: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # search and serve take none: they embed queries at the precision the corpus was encoded with (the test above)
    seen: list[str] = []

    def spy(precision: str, *devices: object) -> Precision:
        seen.append(Precision.parse(precision).value)
        raise SettingError("precision", seen[-1], "seen by the library")

    monkeypatch.setattr(precision_module, "resolve_precision", spy)
    args = [str(a).format(passkey=passkey) for a in COMMANDS[command]]
    run = CliRunner().invoke(app, [*args, "-m", str(tiny_model_dir), "-o", str(tmp_path / "o"), "--precision", "BF16"])
    assert run.exit_code == 2 and seen and set(seen) == {"bf16"}, run.output
    assert "--precision 'bf16': seen by the library" in run.output
