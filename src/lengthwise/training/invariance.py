"""Length-invariant fine-tuning (METHODS §3, "length-invariant"): tie each elongated text to the place the
*starting* model gave the original, so that copying a text m times moves it nowhere — not only on average.

The study-1 recipes centre the length attack's mean shift but leave the distribution compressed: unrelated pairs,
each padded with copies of itself, still gain similarity. Self-distillation pins every elongated text where it
belongs: the student's embedding of f(S, m) is pulled to a frozen teacher's embedding of S, the teacher being the
model training started from. An optional pairwise term asks cos(e(f(a)), e(f(b))) to equal the teacher's
cos(e(a), e(b)) for every a and b of the batch, matched or not, which is exactly the attack's per-pair shift.
With ``invariance_reference="self"`` the originals' embeddings come from the student itself, gradient stopped,
instead of a frozen copy: the attack compares a model with itself, so that is the reference it is judged by.
Both terms are added to the plain pair loss (InfoNCE on the unelongated pairs), which keeps quality, with weights.

The maths are plain functions on tensors; `LengthInvariantLoss` adapts them to the sentence-transformers trainer.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable

import torch
from torch import Tensor, nn

from lengthwise.core.errors import SettingError

__all__ = ["LengthInvariantLoss", "consistency_loss", "distillation_loss", "frozen_teacher"]

EMBEDDING = "sentence_embedding"
COLUMNS = ("long_anchor", "long_positive")  # the collator's elongated copies of the anchor and positive columns


def distillation_loss(student: Tensor, teacher: Tensor) -> Tensor:
    """Mean ``1 − cos(student_i, teacher_i)`` over the rows: (B, D), (B, D) → scalar. No gradient to `teacher`."""
    return (1.0 - nn.functional.cosine_similarity(student, teacher.detach(), dim=-1)).mean()


def consistency_loss(long_a: Tensor, long_b: Tensor, short_a: Tensor, short_b: Tensor) -> Tensor:
    """Mean squared gap between the elongated and the reference cosines over every (a_i, b_j) of the batch,
    (B, D) each → scalar: the attack's per-pair similarity shift, squared, for the B matched pairs and the
    B² − B unrelated ones (the low-similarity pairs the attack lifts most). No gradient to the reference side."""
    normal = nn.functional.normalize
    after = normal(long_a, dim=-1) @ normal(long_b, dim=-1).T  # (B, B)
    before = normal(short_a.detach(), dim=-1) @ normal(short_b.detach(), dim=-1).T  # (B, B)
    return ((after - before) ** 2).mean()


def frozen_teacher(model: nn.Module) -> nn.Module:
    """A frozen copy of `model` (eval mode, no gradients) to distil from; made before training moves the weights."""
    teacher = copy.deepcopy(model)
    teacher.eval()
    for parameter in teacher.parameters():
        parameter.requires_grad_(False)
    return teacher


class LengthInvariantLoss(nn.Module):
    """``contrastive + weight · distillation + consistency_weight · consistency + retention_weight · retention``.

    Retention pulls each *plain* text's embedding to the frozen teacher's, so that the contrastive term cannot move
    the space the elongated texts are distilled to (with a teacher reference, the attack's shift is otherwise the
    gap between the teacher's and the student's own plain cosines).

    | inputs | from |
    |---|---|
    | anchor, positive, ``long_anchor``, ``long_positive`` columns (the pair and each side elongated) | `ViewCollator` |

    The teacher lives inside the loss (not in the trained model), so the saved model is the student alone, DDP
    wraps only the student, and a resumed run rebuilds the same teacher from the starting model.

    Example::

        loss = LengthInvariantLoss(pair_loss(model), model, frozen_teacher(model), weight=1.0)
    """

    def __init__(
        self,
        contrastive: nn.Module,
        model: nn.Module,
        teacher: nn.Module | None,
        weight: float = 1.0,
        consistency_weight: float = 0.0,
        teacher_for: tuple[bool, bool] | None = None,
        retention_weight: float = 0.0,
    ) -> None:
        super().__init__()
        self.contrastive = contrastive
        self.model = model  # the trainer swaps in its DDP-wrapped model
        self.teacher = teacher
        self.weight = weight
        self.consistency_weight = consistency_weight
        self.retention_weight = retention_weight
        # which reference each term uses, (distillation, consistency): the teacher's where one is given, by default
        self.teacher_for = teacher_for if teacher_for is not None else (teacher is not None, teacher is not None)
        if teacher is None and (any(self.teacher_for) or retention_weight > 0):
            raise SettingError("teacher", None, "a term that uses the teacher's reference needs a teacher")

    def forward(
        self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None = None
    ) -> dict[str, Tensor]:
        features = [dict(f) for f in sentence_features]
        if len(features) != 4:
            problem = "the length-invariant loss needs four columns: anchor, positive and their elongations"
            raise SettingError("len(sentence_features)", len(features), problem)
        anchor, positive, long_anchor, long_positive = features
        contrastive = self.contrastive([anchor, positive], labels)
        student_a = self.model(long_anchor)[EMBEDDING]  # (B, D)
        student_p = self.model(long_positive)[EMBEDDING]  # (B, D)
        cache: dict[bool, tuple[Tensor, Tensor]] = {}  # the references, computed once per kind: teacher or self

        def reference(teacher: bool) -> tuple[Tensor, Tensor]:  # (B, D) each
            if teacher not in cache:
                cache[teacher] = (self._reference(anchor, teacher), self._reference(positive, teacher))
            return cache[teacher]

        parts = {"contrastive": contrastive}
        if self.weight > 0:
            ref_a, ref_p = reference(self.teacher_for[0])
            distilled = (distillation_loss(student_a, ref_a) + distillation_loss(student_p, ref_p)) / 2
            parts["invariance"] = self.weight * distilled
        if self.consistency_weight > 0:
            ref_a, ref_p = reference(self.teacher_for[1])
            parts["consistency"] = self.consistency_weight * consistency_loss(student_a, student_p, ref_a, ref_p)
        if self.retention_weight > 0:  # the plain texts held where the teacher has them (gradient to the student)
            ref_a, ref_p = reference(True)
            plain_a, plain_p = self.model(dict(anchor))[EMBEDDING], self.model(dict(positive))[EMBEDDING]
            held = (distillation_loss(plain_a, ref_a) + distillation_loss(plain_p, ref_p)) / 2
            parts["retention"] = self.retention_weight * held
        return parts

    @torch.no_grad()
    def _reference(self, features: dict[str, Tensor], teacher: bool) -> Tensor:
        """The originals' embeddings: the frozen teacher's, or the student's own in eval mode."""
        if teacher:
            assert self.teacher is not None  # checked in __init__
            return self.teacher(dict(features))[EMBEDDING]
        training = self.model.training
        self.model.eval()
        try:
            return self.model(dict(features))[EMBEDDING].detach()
        finally:
            self.model.train(training)
