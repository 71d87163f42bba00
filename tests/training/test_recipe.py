"""The length-robust recipe: copy-and-concat batches mixed with plain ones, recipe defaults under the user's
settings, the attack-shift check during training and the model card that says how the model was made."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from lengthwise.cli import app
from lengthwise.core.embed import TokenView
from lengthwise.core.errors import SettingError
from lengthwise.training._card import write_card_section
from lengthwise.training._collate import ViewCollator
from lengthwise.training.config import Method, config_from_mapping
from lengthwise.training.recipes import RECIPES

runner = CliRunner()


def test_recipe_settings_are_defaults_that_the_user_overrides() -> None:
    recipe = RECIPES["length-robust"].settings
    config = config_from_mapping({"recipe": "length-robust", "data": "d.jsonl", "out": "o", "lr": 1e-5})
    assert config.method is Method.COPY_CONCAT and config.recipe == "length-robust"
    assert config.settings.copy_concat_share == recipe["copy_concat_share"] < 1.0  # type: ignore[union-attr]
    assert config.max_steps == recipe["max_steps"] and config.max_length == recipe["max_length"]
    assert config.lr == 1e-5  # the user's value wins over the recipe's
    with pytest.raises(SettingError, match="recipe='fast': not known; use one of: length-robust"):
        config_from_mapping({"recipe": "fast", "data": "d", "out": "o"})
    with pytest.raises(
        SettingError, match="method='hicl': the recipe length-robust trains with method copy-concat; drop"
    ):
        config_from_mapping({"recipe": "length-robust", "method": "hicl", "data": "d", "out": "o"})


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"method": "copy-concat", "copy_concat_share": 0.0}, "copy_concat_share"),
        ({"method": "copy-concat", "copy_concat_share": 1.5}, "copy_concat_share"),
        ({"method": "pairs", "copy_concat_share": 0.5}, "copy_concat_share"),  # only copy-concat mixes
        ({"method": "pairs", "eval_attack": 100}, "eval_attack"),  # no eval_data to attack
        ({"method": "pairs", "eval_data": "dev.tsv", "eval_attack": 1}, "eval_attack"),
    ],
)
def test_mix_and_attack_check_settings_are_checked(changes: dict[str, Any], field: str) -> None:
    with pytest.raises(SettingError) as error:
        config_from_mapping({"data": "d", "out": "o", **changes})
    assert error.value.field == field


def _rows(n: int) -> list[dict[str, Any]]:
    return [{"row": i, "anchor": f"a short anchor number {i}", "positive": f"its positive {i}"} for i in range(n)]


def test_copy_concat_share_elongates_whole_batches_by_a_seeded_draw(tiny_model) -> None:
    view = TokenView(tiny_model)
    collator = ViewCollator(Method.COPY_CONCAT, view, seed=3, copy_concat_share=0.5)
    rows = _rows(400)
    batches = [rows[start : start + 4] for start in range(0, 400, 4)]
    decisions = [collator.elongates(batch) for batch in batches]
    assert 0.35 < sum(decisions) / len(decisions) < 0.65  # about the share
    assert decisions == [collator.elongates(list(reversed(batch))) for batch in batches]  # order-free, repeatable
    plain_batch = batches[decisions.index(False)]
    long_batch = batches[decisions.index(True)]
    plain = [collator.build(row, elongate=False) for row in plain_batch]
    for row, built in zip(plain_batch, plain, strict=True):
        first, second = view.content([row["anchor"], row["positive"]])
        assert (built.anchor, built.positive) == (first, second)  # the plain pair, untouched
    sizes = collator(plain_batch)["anchor_input_ids"].shape[1], collator(long_batch)["anchor_input_ids"].shape[1]
    assert sizes[0] < sizes[1]  # a plain batch is not padded to elongated length
    everything = ViewCollator(Method.COPY_CONCAT, view, seed=3)
    assert all(everything.elongates(batch) for batch in batches)  # share 1: every batch, as before


def test_card_section_is_replaced_not_repeated(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("# my model\n\nsentence-transformers card\n", encoding="utf-8")
    write_card_section(tmp_path, "recipe", "## first\nvalue 1")
    write_card_section(tmp_path, "recipe", "## second\nvalue 2")
    text = (tmp_path / "README.md").read_text(encoding="utf-8")
    assert text.startswith("# my model") and text.count("lengthwise:recipe:begin") == 1
    assert "value 2" in text and "value 1" not in text


def test_recipe_run_on_the_command_line_with_the_attack_check(tiny_model_dir: Path, tmp_path: Path, one_thread) -> None:
    pairs = tmp_path / "pairs.jsonl"
    rows = [{"anchor": f"question {i} about topic {i % 7}", "positive": f"answer {i} on {i % 7}"} for i in range(48)]
    pairs.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    dev = tmp_path / "dev.tsv"
    dev.write_text("".join(f"a cat sat {i}\ta cat sits {i}\t{i % 5}\n" for i in range(12)), encoding="utf-8")
    out = tmp_path / "run"
    result = runner.invoke(
        app,
        ["train", "--recipe", "length-robust", "-d", str(pairs), "-o", str(out), "-m", str(tiny_model_dir),
         "--max-steps", "4", "--batch-size", "4", "--max-length", "32", "--save-steps", "2", "--eval-data", str(dev),
         "--eval-attack", "100", "--device", "cpu"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    record = json.loads((out / "train.json").read_text())
    assert record["config"]["recipe"] == "length-robust" and record["config"]["copy_concat_share"] == 0.5
    checks = [entry for entry in record["log_history"] if "eval_dev_attack_mean_shift" in entry]
    assert len(checks) == 2 and all(0.0 <= entry["eval_dev_attack_frac_increased"] <= 1.0 for entry in checks)
    assert all("eval_dev_spearman" in entry for entry in checks)  # quality logged next to robustness
    card = (out / "model" / "README.md").read_text(encoding="utf-8")
    assert "lengthwise recipe: `length-robust`" in card and "`copy_concat_share` | `0.5`" in card
    assert record["data"]["sha256"][:16] in card and "dev_attack_mean_shift" in card


def test_the_length_invariant_recipe_trains_with_the_self_reference(tiny_model_dir: Path, tmp_path: Path) -> None:
    from lengthwise.training.methods import LengthInvariantSettings

    config = config_from_mapping({"recipe": "length-invariant", "data": "d.jsonl", "out": "o"})
    recipe = {
        key: value
        for key, value in RECIPES["length-invariant"].settings.items()
        if key in LengthInvariantSettings.__dataclass_fields__
    }
    assert config.method is Method.LENGTH_INVARIANT and config.settings == LengthInvariantSettings(**recipe)
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps({"anchor": f"a cat {i} sat", "positive": f"a cat {i} was sitting"}) + "\n"
                             for i in range(8)))  # fmt: skip
    args = ["train", "--recipe", "length-invariant", "-d", str(pairs), "-o", str(tmp_path / "run"), "-m",
            str(tiny_model_dir), "--max-steps", "2", "--batch-size", "4", "--max-length", "32", "--device", "cpu",
            "--set", "logging_steps=1"]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    record = json.loads((tmp_path / "run" / "train.json").read_text())
    logged = [entry for entry in record["log_history"] if "consistency" in entry]
    assert logged and all(entry["invariance"] >= 0 for entry in logged)
