"""TrainConfig and each method's own settings: method names and aliases, validation, config files and ``--set``
coercion."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lengthwise.core.errors import DataFormatError, SettingError
from lengthwise.training.config import (
    DataKind,
    Method,
    Pooling,
    TrainConfig,
    config_from_mapping,
    parse_method,
    read_config_file,
)
from lengthwise.training.methods import (
    SETTINGS,
    Denominator,
    HiCLSettings,
    NoSettings,
    SameSequence,
    SimDESettings,
    settings_fields,
)


def test_aliases_name_the_compositions() -> None:
    assert parse_method("simcse+hicl") is Method.HICL
    assert parse_method("coco-dr+laser-intra") is Method.LASER_INTRA
    assert parse_method("SimCSE+LASER-self") is Method.LASER_SELF
    with pytest.raises(SettingError, match="not known; use one of: simcse") as error:
        parse_method("bert")
    assert error.value.field == "method"


def test_method_defaults() -> None:
    config = TrainConfig(method="simde", data="d", out="o")  # type: ignore[arg-type]
    assert config.method is Method.SIMDE and config.data_kind is DataKind.DOCUMENT
    assert config.effective_pooling is Pooling.CLS  # METHODS §3: SimDE pools CLS
    assert TrainConfig(method=Method.SIMCSE, data="d", out="o").effective_pooling is None  # the model's own
    assert (config.lr, config.batch_size, config.max_length, config.epochs) == (3e-5, 64, 256, 1.0)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"batch_size": 1}, "at least 2"),
        ({"alpha": 1.5}, "alpha"),
        ({"elongate": "many"}, "elongate"),
        ({"method": "hicl", "cache_batch": 8}, "not available for hicl"),
        ({"mlm_weight": 0.1}, "simde only"),
        ({"pooling": "last"}, "pooling"),
    ],
)
def test_invalid_settings_fail_with_one_line(change: dict, message: str) -> None:
    values = {"method": "simcse", "data": "d", "out": "o", **change}
    with pytest.raises(ValueError, match=message):
        config_from_mapping(values)


def test_strings_from_files_and_set_are_coerced(tmp_path: Path) -> None:
    config = config_from_mapping(
        {"method": "hicl", "data": "d", "out": "o", "alpha": "0.15", "max_steps": "100", "cache_batch": "none"}
    )
    assert config.settings == HiCLSettings(alpha=0.15) and config.max_steps == 100 and config.cache_batch is None
    with pytest.raises(
        SettingError, match=r"unknown training setting\(s\) alpah \(alpah: did you mean alpha\?\); valid: method, data"
    ):
        config_from_mapping({"method": "simcse", "data": "d", "out": "o", "alpah": 1})
    with pytest.raises(SettingError, match="training needs data; set it"):
        config_from_mapping({"method": "simcse", "out": "o"})
    with pytest.raises(SettingError, match="expected int"):
        config_from_mapping({"method": "simcse", "data": "d", "out": "o", "max_steps": "ten"})


def test_yaml_and_json_config_files(tmp_path: Path) -> None:
    (tmp_path / "run.yaml").write_text("method: hicl\nsegment-length: 16\nalpha: 0.01\n", encoding="utf-8")
    assert read_config_file(tmp_path / "run.yaml") == {"method": "hicl", "segment_length": 16, "alpha": 0.01}
    (tmp_path / "run.json").write_text(json.dumps({"method": "simde"}), encoding="utf-8")
    assert read_config_file(tmp_path / "run.json") == {"method": "simde"}
    (tmp_path / "list.yaml").write_text("- a\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"config='.*list\.yaml': expected a mapping"):
        read_config_file(tmp_path / "list.yaml")


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"lr": float("inf")}, "lr"),  # was accepted, then failed writing config.json ("Out of range float values")
        ({"lr": float("nan")}, "lr"),
        ({"epochs": float("inf")}, "epochs"),
        ({"method": "hicl", "alpha": float("nan")}, "alpha"),
        ({"warmup_ratio": 1.0}, "warmup_ratio"),  # a ratio ≥ 1 was not checked
        ({"warmup_ratio": -0.1}, "warmup_ratio"),
        ({"method": "hicl", "same_sequence": "both"}, "same_sequence"),
        ({"method": "hicl", "segment_length": 0}, "segment_length"),
        ({"method": "copy-concat", "copy_concat_share": 0.0}, "copy_concat_share"),
        ({"method": "length-invariant", "invariance_reference": "nobody"}, "invariance_reference"),
        ({"mixed_precision": "fp8"}, "mixed_precision"),
        ({"save_total_limit": 0}, "save_total_limit"),
    ],
)
def test_non_finite_and_out_of_range_values_name_their_field(change: dict, field: str) -> None:
    with pytest.raises(SettingError) as error:
        config_from_mapping({"method": "simcse", "data": "d", "out": "o", **change})
    assert error.value.field == field and "\n" not in str(error.value)


def test_a_method_owns_its_settings_and_refuses_another_methods() -> None:
    assert set(SETTINGS) == {method.value for method in Method}  # every method has its settings class
    owners = [kind for kind, _ in settings_fields().values()]
    assert len(owners) == len(settings_fields())  # each setting belongs to one class
    assert TrainConfig(method="pairs", data="d", out="o").settings == NoSettings()  # type: ignore[arg-type]
    assert TrainConfig(method="hicl", data="d", out="o").settings == HiCLSettings()  # type: ignore[arg-type]
    with pytest.raises(SettingError, match=r"alpha=0\.15: applies to hicl only") as error:
        config_from_mapping({"method": "pairs", "data": "d", "out": "o", "alpha": 0.15})
    assert error.value.field == "alpha"
    with pytest.raises(SettingError, match="settings='SimDESettings': hicl takes HiCLSettings") as error:
        TrainConfig(method="hicl", data="d", out="o", settings=SimDESettings())  # type: ignore[arg-type]
    assert error.value.field == "settings"
    config = config_from_mapping({"method": "hicl", "data": "d", "out": "o", "segment_length": "16"})
    assert config.to_dict()["segment_length"] == 16 and "mlm_weight" not in config.to_dict()  # flat, its own only
    assert config_from_mapping(config.to_dict()) == config  # a recorded config.json reads back to the same run


def test_fixed_value_settings_are_enums_and_serialise_as_their_values() -> None:
    config = config_from_mapping(
        {"method": "hicl", "data": "d", "out": "o", "same_sequence": "Positive", "denominator": "averaging"}
    )
    assert config.settings == HiCLSettings(same_sequence=SameSequence.POSITIVE, denominator=Denominator.AVERAGING)
    payload = config.to_dict()
    assert payload["same_sequence"] == "positive" and payload["pooling"] is None and payload["method"] == "hicl"
    assert json.loads(json.dumps(payload)) == payload


def test_simde_mlm_weight_defaults_to_the_papers_and_can_be_turned_off() -> None:
    assert TrainConfig(method="simde", data="d", out="o").mlm_loss_weight == 0.1  # type: ignore[arg-type]
    off = TrainConfig(method="simde", data="d", out="o", settings=SimDESettings(mlm_weight=0.0))  # type: ignore[arg-type]
    assert off.mlm_loss_weight == 0.0
    assert TrainConfig(method="simcse", data="d", out="o").mlm_loss_weight == 0.0  # type: ignore[arg-type]
    with pytest.raises(SettingError, match="simde only"):
        config_from_mapping({"method": "simcse", "data": "d", "out": "o", "mlm_weight": 0.1})


def test_every_field_documents_itself_for_the_cli() -> None:
    import dataclasses

    assert all(item.metadata.get("help") for item in dataclasses.fields(TrainConfig))
    assert all(item.metadata.get("help") for _, item in settings_fields().values())


def test_the_renamed_precision_setting_is_read_under_its_new_name_with_a_warning(tmp_path: Path) -> None:
    """`precision` became `mixed_precision` (one word per concept, issue 34): a config file or a run saved before the
    rename still reads, with a FutureWarning, and the new name wins when both are given."""
    from lengthwise.training.config import MixedPrecision, renamed_settings

    base = {"method": "simcse", "data": "x.jsonl", "out": str(tmp_path / "run")}
    with pytest.warns(FutureWarning, match="'precision' is now 'mixed_precision'"):
        config = config_from_mapping({**base, "precision": "fp32"})
    assert config.mixed_precision is MixedPrecision.FP32 and "precision" not in config.to_dict()
    with pytest.warns(FutureWarning):
        assert renamed_settings({"precision": "fp16", "mixed_precision": "bf16"}) == {"mixed_precision": "bf16"}


def test_a_run_saved_before_the_precision_rename_still_resumes(tmp_path: Path) -> None:
    from lengthwise.training.run import _check_same_settings

    config = config_from_mapping({"method": "simcse", "data": "x.jsonl", "out": str(tmp_path)})
    saved = config.to_dict()
    saved["precision"] = saved.pop("mixed_precision")  # as a run written before the rename recorded it
    (tmp_path / "config.json").write_text(json.dumps(saved), encoding="utf-8")
    with pytest.warns(FutureWarning):
        _check_same_settings(config, tmp_path)  # no SettingError: the same settings under the old name
    saved["precision"] = "fp16"
    (tmp_path / "config.json").write_text(json.dumps(saved), encoding="utf-8")
    with pytest.warns(FutureWarning), pytest.raises(SettingError, match="mixed_precision"):
        _check_same_settings(config, tmp_path)
