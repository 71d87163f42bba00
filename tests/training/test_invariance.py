"""Length-invariant fine-tuning (`lengthwise.training.invariance`, `--method length-invariant`): the maths on
tensors, the frozen teacher inside the loss, and a run on the tiny BERT that resumes and saves the student alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from typer.testing import CliRunner

from lengthwise.cli import app
from lengthwise.core.errors import SettingError
from lengthwise.training.config import config_from_mapping
from lengthwise.training.invariance import consistency_loss, distillation_loss, frozen_teacher
from lengthwise.training.methods import LengthInvariantSettings, Reference

runner = CliRunner()


def test_distillation_is_zero_at_the_teacher_and_moves_only_the_student() -> None:
    teacher = torch.randn(4, 8)
    assert distillation_loss(teacher.clone(), teacher).item() == pytest.approx(0.0, abs=1e-6)
    student = torch.randn(4, 8, requires_grad=True)
    target = teacher.clone().requires_grad_(True)
    distillation_loss(student, target).backward()
    assert student.grad is not None and student.grad.abs().sum() > 0
    assert target.grad is None  # no gradient to the reference side


def test_consistency_is_the_squared_attack_shift_over_every_pair_of_the_batch() -> None:
    a, b = torch.randn(5, 8), torch.randn(5, 8)
    assert consistency_loss(a, b, a, b).item() == pytest.approx(0.0, abs=1e-6)
    long_a = torch.randn(5, 8, requires_grad=True)
    short_a = a.clone().requires_grad_(True)
    gap = consistency_loss(long_a, b, short_a, b)
    cos = torch.nn.functional.cosine_similarity
    shift = torch.stack([torch.stack([cos(long_a[i], b[j], dim=0) - cos(a[i], b[j], dim=0) for j in range(5)])
                         for i in range(5)])  # fmt: skip
    assert gap.item() == pytest.approx((shift**2).mean().item(), rel=1e-5)  # matched and unrelated pairs alike
    matched = (torch.diagonal(shift) ** 2).mean().item()
    assert gap.item() != pytest.approx(matched, rel=1e-3)  # the unrelated pairs count, not only the matched ones
    gap.backward()
    assert long_a.grad is not None and short_a.grad is None


def test_self_reference_is_the_students_own_original_without_gradient(tiny_model) -> None:
    from lengthwise.training.invariance import LengthInvariantLoss

    class Zero(torch.nn.Module):
        def forward(self, features, labels=None):
            return torch.zeros(())

    loss = LengthInvariantLoss(Zero(), tiny_model, None, weight=1.0, consistency_weight=1.0)
    texts = ["a cat sat on the mat", "the stock market fell"]
    features = [tiny_model.preprocess(texts) for _ in range(4)]  # elongated = original: nothing to pull
    tiny_model.eval()  # no dropout on the student's side, so its pass equals the reference pass
    parts = loss(features)
    assert parts["invariance"].item() == pytest.approx(0.0, abs=1e-5)
    assert parts["consistency"].item() == pytest.approx(0.0, abs=1e-6)
    tiny_model.train()
    loss(features)
    assert tiny_model.training  # the eval-mode reference pass gives the mode back
    longer = [features[0], features[1], tiny_model.preprocess([t + " " + t for t in texts]), features[1]]
    parts = loss(longer)
    assert parts["invariance"].item() > 0
    parts["invariance"].backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in tiny_model.parameters())


def test_each_term_takes_its_own_reference(tiny_model) -> None:
    """Distillation to the frozen teacher, consistency against the student's own originals (the mixed arm)."""
    from lengthwise.training.invariance import LengthInvariantLoss

    class Zero(torch.nn.Module):
        def forward(self, features, labels=None):
            return torch.zeros(())

    teacher = frozen_teacher(tiny_model)
    with torch.no_grad():
        for parameter in tiny_model.parameters():
            parameter.mul_(1.5)  # the student has moved away from the teacher
    tiny_model.eval()
    texts = ["a cat sat on the mat", "the stock market fell", "rain is expected by noon"]
    features = [tiny_model.preprocess(texts) for _ in range(4)]  # elongated = original
    mixed = LengthInvariantLoss(Zero(), tiny_model, teacher, 1.0, 1.0, teacher_for=(True, False))(features)
    assert mixed["invariance"].item() > 1e-4  # pulled to the teacher, which differs from the student
    assert mixed["consistency"].item() == pytest.approx(0.0, abs=1e-6)  # against itself: no gap
    swapped = LengthInvariantLoss(Zero(), tiny_model, teacher, 1.0, 1.0, teacher_for=(False, True))(features)
    assert swapped["invariance"].item() == pytest.approx(0.0, abs=1e-5)
    assert swapped["consistency"].item() > 0
    with pytest.raises(SettingError, match=r"teacher=None: a term that uses the teacher.s reference needs a teacher"):
        LengthInvariantLoss(Zero(), tiny_model, None, teacher_for=(True, False))
    config = config_from_mapping(
        {"method": "length-invariant", "data": "x", "out": "y", "consistency_reference": "self"}
    )
    assert config.settings.references == (Reference.TEACHER, Reference.SELF)  # type: ignore[union-attr]
    with pytest.raises(SettingError, match="consistency_reference='self': applies to length-invariant only"):
        config_from_mapping({"method": "pairs", "data": "x", "out": "y", "consistency_reference": "self"})


def test_retention_holds_the_plain_texts_at_the_teacher(tiny_model) -> None:
    from lengthwise.training.invariance import LengthInvariantLoss

    class Zero(torch.nn.Module):
        def forward(self, features, labels=None):
            return torch.zeros(())

    teacher = frozen_teacher(tiny_model)
    tiny_model.eval()
    texts = ["a cat sat on the mat", "the stock market fell"]
    features = [tiny_model.preprocess(texts) for _ in range(4)]
    loss = LengthInvariantLoss(Zero(), tiny_model, teacher, weight=0.0, retention_weight=2.0)
    assert loss(features)["retention"].item() == pytest.approx(0.0, abs=1e-5)  # the student is the teacher
    with torch.no_grad():
        for parameter in tiny_model.parameters():
            parameter.mul_(1.5)
    held = loss(features)["retention"]
    assert held.item() > 1e-4
    held.backward()  # the gradient reaches the student's plain pass, never the teacher
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in tiny_model.parameters())
    assert all(p.grad is None for p in teacher.parameters())
    with pytest.raises(SettingError, match=r"teacher=None: a term that uses the teacher.s reference needs a teacher"):
        LengthInvariantLoss(Zero(), tiny_model, None, teacher_for=(False, False), retention_weight=1.0)


def test_the_teacher_is_a_frozen_copy(tiny_model) -> None:
    teacher = frozen_teacher(tiny_model)
    assert not teacher.training and all(not p.requires_grad for p in teacher.parameters())
    with torch.no_grad():
        next(tiny_model.parameters()).add_(1.0)  # training moves the student, never the teacher
    assert not torch.equal(next(tiny_model.parameters()), next(teacher.parameters()))


def test_consistency_weight_belongs_to_length_invariant() -> None:
    with pytest.raises(SettingError, match=r"consistency_weight=0\.5: applies to length-invariant only"):
        config_from_mapping({"method": "pairs", "data": "x", "out": "y", "consistency_weight": 0.5})
    with pytest.raises(SettingError, match=r"invariance_weight=-1\.0: must be ≥ 0"):
        LengthInvariantSettings(invariance_weight=-1.0)


def test_a_run_logs_its_parts_resumes_and_saves_the_student_alone(tiny_model_dir: Path, tmp_path: Path) -> None:
    pairs = tmp_path / "pairs.jsonl"
    rows = [{"anchor": f"a short sentence number {i}", "positive": f"the sentence with number {i}"} for i in range(24)]
    pairs.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    out = tmp_path / "run"
    args = ["train", "--method", "length-invariant", "-d", str(pairs), "-o", str(out), "-m", str(tiny_model_dir),
            "--batch-size", "4", "--max-length", "32", "--save-steps", "2", "--device", "cpu",
            "--set", "consistency_weight=0.5", "--set", "logging_steps=1"]  # fmt: skip
    first = runner.invoke(app, [*args, "--max-steps", "2"])
    assert first.exit_code == 0, first.output
    again = runner.invoke(app, [*args, "--max-steps", "2", "--resume"])
    assert again.exit_code == 0 and "nothing to do" in again.output, again.output
    record = json.loads((out / "train.json").read_text())
    logged = [entry for entry in record["log_history"] if "invariance" in entry]
    assert logged and all(entry["invariance"] >= 0 and "consistency" in entry for entry in logged), record[
        "log_history"
    ]
    saved = load_file(str(next((out / "model").rglob("model.safetensors"))))
    start = load_file(str(next(tiny_model_dir.rglob("model.safetensors"))))
    assert set(saved) == set(start)  # the teacher is not part of the saved model
    assert any(not torch.equal(saved[key], start[key]) for key in start)  # and the student moved
