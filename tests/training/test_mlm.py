"""SimDE's MLM auxiliary (13.23): the head starts from the checkpoint's pretrained MLM head where there is one,
lives inside the model (so DDP averages its gradients and checkpoints keep it), masking is transformers'
`DataCollatorForLanguageModeling`, and the saved encoder carries no head."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import DataCollatorForLanguageModeling, TrainerCallback

from lengthwise.core.embed import TokenView
from lengthwise.training._collate import ViewCollator
from lengthwise.training.config import Method, TrainConfig, config_from_mapping
from lengthwise.training.mlm import IGNORE, MaskedLMHead, masked_lm_head
from lengthwise.training.run import run_training

pytest.importorskip("accelerate")
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def mlm_checkpoint(tmp_path_factory: pytest.TempPathFactory, minilm_path: str) -> Path:
    """A tiny BERT checkpoint saved *with* its MLM head, as bert-base-uncased is on the hub."""
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

    folder = tmp_path_factory.mktemp("bert-mlm")
    tokenizer = AutoTokenizer.from_pretrained(minilm_path)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
    )
    torch.manual_seed(1)
    model = BertForMaskedLM(config)
    with torch.no_grad():
        model.cls.predictions.bias.uniform_(-1, 1)  # recognisable, not the zeros a new head starts with
    model.save_pretrained(folder / "hf")
    tokenizer.save_pretrained(folder / "hf")
    return folder


def test_the_head_starts_from_the_pretrained_mlm_head(mlm_checkpoint: Path) -> None:
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(mlm_checkpoint / "hf"), device="cpu")  # a plain checkpoint, as from the hub
    head, start = masked_lm_head(model)
    saved = load_file(str(mlm_checkpoint / "hf" / "model.safetensors"))
    assert start == "pretrained"
    torch.testing.assert_close(head.dense.weight, saved["cls.predictions.transform.dense.weight"])
    torch.testing.assert_close(head.norm.weight, saved["cls.predictions.transform.LayerNorm.weight"])
    torch.testing.assert_close(head.bias, saved["cls.predictions.bias"])
    assert head._output[0] is model[0].auto_model.get_input_embeddings()  # tied, not copied


def test_a_model_without_an_mlm_head_says_so(tiny_model, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="lengthwise.training.mlm"):
        head, start = masked_lm_head(tiny_model)
    assert start == "new" and "no pretrained MLM head" in caplog.text
    assert torch.count_nonzero(head.bias) == 0


def test_masking_is_the_transformers_collator_per_row(tiny_model) -> None:
    view = TokenView(tiny_model)
    sentences = ["Sentence {} is here with words.", "And a second one follows it."]
    rows = [{"row": i, "sentences": [sentences[0].format(i), sentences[1]]} for i in range(64)]
    masker = DataCollatorForLanguageModeling(view.tokenizer, mlm_probability=0.15)
    batch = ViewCollator(Method.SIMDE, view, seed=0, mlm=masker)(rows)
    ids, mask, masked, targets = (
        batch[k] for k in ("anchor_input_ids", "anchor_attention_mask", "mlm_input_ids", "mlm_targets")
    )
    picked = targets != IGNORE
    specials = torch.isin(ids, torch.tensor(view.tokenizer.all_special_ids))
    assert not (picked & (specials | ~mask.bool())).any()  # never a special token or padding
    assert torch.equal(targets[picked], ids[picked]) and torch.equal(masked[~picked], ids[~picked])
    share = picked.sum() / (mask.bool() & ~specials).sum()
    assert 0.08 < float(share) < 0.25  # 15 % of the maskable tokens
    replaced = masked[picked] == view.tokenizer.mask_token_id
    assert 0.6 < float(replaced.float().mean()) < 0.95  # 80 % → [MASK]
    again = ViewCollator(Method.SIMDE, view, seed=0, mlm=masker)(rows)
    assert torch.equal(again["mlm_input_ids"], masked)  # a function of (seed, row), as every other view


class _Inspect(TrainerCallback):
    def __init__(self) -> None:
        self.seen: list[bool] = []

    def on_step_end(self, args, state, control, model=None, **kwargs):
        heads = [m for m in model.modules() if isinstance(m, MaskedLMHead)]
        self.seen.append(len(heads) == 1)


def _docs(folder: Path) -> Path:
    docs = folder / "docs.jsonl"
    docs.write_text(
        "".join(json.dumps({"text": f"Doc {i} starts here. It has a second sentence. And a third, {i}."}) + "\n"
                for i in range(32)),
        encoding="utf-8",
    )  # fmt: skip
    return docs


def _simde(model: Path, docs: Path, out: Path, **changes) -> TrainConfig:
    values = dict(
        method="simde",
        data=str(docs),
        out=str(out),
        model=str(model),
        max_steps=2,
        batch_size=8,
        max_length=32,
        lr=1e-3,
        save_steps=1,
        logging_steps=1,
        device="cpu",
    )
    return config_from_mapping({**values, **changes})


def test_simde_trains_its_head_inside_the_model_and_saves_the_encoder_alone(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    inspect = _Inspect()
    run_training(_simde(tiny_model_dir, _docs(tmp_path), tmp_path / "run"), callbacks=[inspect])
    assert inspect.seen == [True, True]  # the trainer's (DDP-wrappable) model holds the head
    record = json.loads((tmp_path / "run" / "train.json").read_text())
    assert record["config"]["mlm_weight"] == 0.1 and record["mlm_head"] == "new"
    assert all(entry["mlm"] > 0 for entry in record["log_history"] if "mlm" in entry)
    first, second = (tmp_path / "run" / "checkpoints" / f"checkpoint-{n}" for n in (1, 2))
    head_files = [next(p.rglob("*MaskedLMHead*/model.safetensors")) for p in (first, second)]
    before, after = (load_file(str(path)) for path in head_files)
    assert any(not torch.equal(before[k], after[k]) for k in before)  # the optimizer updates the head
    modules = json.loads((tmp_path / "run" / "model" / "modules.json").read_text())
    assert not any("MaskedLMHead" in entry["type"] for entry in modules)


class _Stop(Exception):
    pass


class _StopAfter(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == 3:
            raise _Stop


def test_a_resumed_simde_run_restores_its_head(tiny_model_dir: Path, tmp_path: Path) -> None:
    """The head is in every checkpoint, so stop-and-resume reaches the uninterrupted run's weights; a head
    re-initialised on resume would not (the encoder's gradients depend on it)."""
    docs = _docs(tmp_path)
    whole = run_training(_simde(tiny_model_dir, docs, tmp_path / "whole", max_steps=4, save_steps=2))
    config = _simde(tiny_model_dir, docs, tmp_path / "cut", max_steps=4, save_steps=2)
    with pytest.raises(_Stop):
        run_training(config, callbacks=[_StopAfter()])
    resumed = run_training(config, resume=True)
    expected = load_file(str(whole.model_dir / "model.safetensors"))
    got = load_file(str(resumed.model_dir / "model.safetensors"))
    for name in expected:
        torch.testing.assert_close(got[name], expected[name], rtol=0, atol=1e-6, msg=name)
