"""Data collators: turn dataset rows into the padded token columns the sentence-transformers trainer feeds a loss.

They replace the trainer's default text collator (which would tokenize strings) because every objective here
works on token ids: elongation copies ids, HiCL slices ids, SimDE and COCO-DR join sentence ids. Each row's
random choices come from its own generator seeded by (seed, row index), so a batch is the same whether it is
built in one process or another, before or after a resume.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import torch

from lengthwise.core.embed import TokenView, batch_features
from lengthwise.core.errors import SettingError
from lengthwise.core.tokens import Elongation, content_ids, segments
from lengthwise.training._views import (
    View,
    coco_dr_view,
    copy_concat_view,
    laser_intra_view,
    laser_self_view,
    length_invariant_view,
    simcse_view,
    simde_view,
)
from lengthwise.training.config import Method
from lengthwise.training.methods import AnchorChoice

__all__ = ["SegmentCollator", "ViewCollator", "row_rng"]

_CPU = torch.device("cpu")


def row_rng(seed: int, row: int) -> random.Random:
    """The generator for one example: a function of the run seed and the row index only."""
    return random.Random(f"lengthwise/{seed}/{row}")


@dataclass
class ViewCollator:
    """Builds each row's (anchor, positive) views for a pair objective: ``anchor_*`` and ``positive_*`` columns.

    Rows hold ``row`` (index) and ``text``, ``sentences`` or ``anchor``/``positive``, as `prepare_dataset` writes.
    """

    method: Method
    view: TokenView
    seed: int
    elongation: Elongation = field(default_factory=lambda: Elongation("random"))
    anchor: AnchorChoice = AnchorChoice.FIRST
    mlm: Any | None = None  # a transformers DataCollatorForLanguageModeling: adds a masked copy of the anchors
    copy_concat_share: float = 1.0  # copy-concat: share of batches elongated; the rest stay plain pairs
    valid_label_columns: list[str] = field(default_factory=list)  # read by the trainer's batch sampler
    tokens: int = 0  # encoder input tokens built so far, special tokens included

    def _rng(self, row: dict[str, Any]) -> random.Random:
        """The row's generator for the elongation of its invariance views (apart from `build`'s own draws)."""
        return row_rng(self.seed + 1_000_003, int(row["row"]))

    def _content(self, texts: list[str]) -> list[list[int]]:
        return content_ids(self.view.tokenizer, texts, self.view.max_content)

    def elongates(self, rows: list[dict[str, Any]]) -> bool:
        """Whether copy-concat elongates this batch: a draw seeded by the run seed and the batch's first row
        index, so the same batch gets the same answer in any process and after a resume. Whole batches are
        elongated or plain, so a plain batch is not padded to an elongated row's length."""
        if self.method is not Method.COPY_CONCAT or self.copy_concat_share >= 1.0:
            return True
        first = min(int(row["row"]) for row in rows)
        return random.Random(f"lengthwise/{self.seed}/batch/{first}").random() < self.copy_concat_share

    def build(self, row: dict[str, Any], elongate: bool = True) -> View:
        """The two content-id views of one row (`elongate` False: copy-concat's plain pair)."""
        rng = row_rng(self.seed, int(row["row"]))
        budget = self.view.max_content
        method = self.method
        if method is Method.SIMCSE:
            return simcse_view(self._content([row["text"]])[0], budget)
        if method in (Method.PAIRS, Method.COPY_CONCAT, Method.LENGTH_INVARIANT):
            first, second = self._content([row["anchor"], row["positive"]])
            if method is not Method.COPY_CONCAT or not elongate:
                return View(first, second)
            return copy_concat_view(first, second, self.elongation, budget, rng)
        sentences = self._content(list(row["sentences"]))
        if method is Method.LASER_SELF:
            return laser_self_view(sentences, self.elongation, budget, rng, self.anchor)
        if method is Method.LASER_INTRA:
            return laser_intra_view(sentences, self.elongation, budget, rng, self.anchor)
        if method is Method.COCO_DR:
            return coco_dr_view(sentences, budget, rng, self.anchor)
        if method is Method.SIMDE:
            return simde_view(sentences, budget, rng)
        raise SettingError("method", method, "not a pair objective; use SegmentCollator for hicl")

    def __call__(self, rows: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        elongate = self.elongates(rows)
        views = [self.build(row, elongate) for row in rows]
        columns = [("anchor", [v.anchor for v in views]), ("positive", [v.positive for v in views])]
        if self.method is Method.LENGTH_INVARIANT:  # each side elongated, m drawn from the row's own generator
            budget = self.view.max_content
            pairs = zip(views, rows, strict=True)
            longs = [length_invariant_view(v, self.elongation, budget, self._rng(row)) for v, row in pairs]
            columns += [("long_anchor", [v.anchor for v in longs]), ("long_positive", [v.positive for v in longs])]
        batch: dict[str, torch.Tensor] = {}
        for column, sequences in columns:
            wrapped = [self.view.wrap(ids) for ids in sequences]
            self.tokens += sum(map(len, wrapped))
            for key, value in batch_features(self.view.tokenizer, wrapped, _CPU).items():
                batch[f"{column}_{key}"] = value
        if self.mlm is not None:
            batch.update(self._masked(self.mlm, batch, rows))
        return batch

    def _masked(
        self, masker: Any, batch: dict[str, torch.Tensor], rows: list[dict[str, Any]]
    ) -> dict[str, torch.Tensor]:
        """``mlm_*`` columns: the anchors masked by the MLM collator, one generator per row; ``mlm_targets`` holds
        the original ids where masked and -100 elsewhere."""
        ids, mask = batch["anchor_input_ids"], batch["anchor_attention_mask"]  # (B, T)
        specials = torch.tensor(sorted(set(self.view.tokenizer.all_special_ids)), dtype=ids.dtype)
        keep = ~mask.bool() | torch.isin(ids, specials)  # (B, T): padding and special tokens are never masked
        masked, targets = [], []
        for index, row in enumerate(rows):
            masker.generator = torch.Generator().manual_seed(row_rng(self.seed, int(row["row"])).getrandbits(63))
            one, target = masker.torch_mask_tokens(ids[index : index + 1].clone(), keep[index : index + 1])
            masked.append(one)
            targets.append(target)
        extra = {key: value for key, value in batch.items() if key.startswith("anchor_") and key != "anchor_input_ids"}
        return {
            "mlm_input_ids": torch.cat(masked),
            **{"mlm_" + key.removeprefix("anchor_"): value for key, value in extra.items()},
            "mlm_targets": torch.cat(targets),
        }


@dataclass
class SegmentCollator:
    """HiCL: each text's first N - specials tokens sliced into segments of `segment_length`, each wrapped in
    special tokens; one ``segments_*`` column plus ``segments_owner`` (row in batch) and ``segments_segment_length``.
    """

    view: TokenView
    segment_length: int = 32
    valid_label_columns: list[str] = field(default_factory=list)
    tokens: int = 0  # encoder input tokens, both dropout passes, special tokens included

    def __call__(self, rows: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        sequences = content_ids(self.view.tokenizer, [row["text"] for row in rows], self.view.max_content)
        pieces: list[list[int]] = []
        owner: list[int] = []
        lengths: list[int] = []
        for index, ids in enumerate(sequences):
            for piece in segments(ids, self.segment_length):
                pieces.append(self.view.wrap(piece))
                owner.append(index)
                lengths.append(len(piece))
        self.tokens += 2 * sum(map(len, pieces))
        batch = {f"segments_{key}": value for key, value in batch_features(self.view.tokenizer, pieces, _CPU).items()}
        batch["segments_owner"] = torch.tensor(owner, dtype=torch.long)  # (S,)
        batch["segments_segment_length"] = torch.tensor(lengths, dtype=torch.long)  # (S,)
        return batch
