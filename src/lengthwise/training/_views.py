"""The two sides ("views") each training objective builds from one example, at the token level (METHODS §3).

Pure functions on content ids (``tok(S)``, no special tokens) and a seeded `random.Random`; the collator adds the
special tokens once and pads. Elongation and segment slicing come from `lengthwise.core.tokens`, the module the audit
uses too, so "f(S, m)" means exactly the same thing in training and in the attack.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from lengthwise.core.errors import SettingError
from lengthwise.core.tokens import Elongation, elongate, elongation_factor
from lengthwise.training.methods import AnchorChoice

__all__ = [
    "View",
    "coco_dr_view",
    "copy_concat_view",
    "laser_intra_view",
    "laser_self_view",
    "length_invariant_view",
    "simcse_view",
    "simde_view",
]

Ids = list[int]


@dataclass(frozen=True)
class View:
    """An (anchor, positive) pair of content-id sequences; in-batch negatives come from the other rows."""

    anchor: Ids
    positive: Ids


def _pick_anchor(sentences: Sequence[Ids], choice: AnchorChoice | str, rng: random.Random) -> int:
    try:
        choice = AnchorChoice(choice)
    except ValueError:
        raise SettingError("anchor", choice, "use 'first' or 'random'") from None
    return 0 if choice is AnchorChoice.FIRST else rng.randrange(len(sentences))


def _rest(sentences: Sequence[Ids], skip: int, max_content: int) -> Ids:
    rest = [token for index, ids in enumerate(sentences) if index != skip for token in ids]
    return rest[:max_content]


def _elongated(ids: Ids, elongation: Elongation, max_content: int, rng: random.Random) -> Ids:
    ids = ids[:max_content]
    return elongate(ids, elongation_factor(len(ids), max_content, elongation, rng), max_content)


def simcse_view(ids: Ids, max_content: int) -> View:
    """SimCSE-unsup: the text twice; dropout in the two forward passes is the only noise (Gao et al., 2021)."""
    ids = ids[:max_content]
    return View(ids, list(ids))


def laser_self_view(
    sentences: Sequence[Ids],
    elongation: Elongation,
    max_content: int,
    rng: random.Random,
    anchor: AnchorChoice | str = AnchorChoice.FIRST,
) -> View:
    """LA(SER)³ self-reference: anchor = one sentence, positive = `f(anchor, m)` (laser3 §4; SimCSE + elongation)."""
    chosen = sentences[_pick_anchor(sentences, anchor, rng)][:max_content]
    return View(chosen, _elongated(chosen, elongation, max_content, rng))


def coco_dr_view(
    sentences: Sequence[Ids], max_content: int, rng: random.Random, anchor: AnchorChoice | str = AnchorChoice.FIRST
) -> View:
    """COCO-DR PT-unsup as METHODS §3 pins it: anchor = one sentence, positive = the rest of the document."""
    if len(sentences) < 2:
        raise SettingError("len(sentences)", len(sentences), "coco-dr needs a document of at least two sentences")
    index = _pick_anchor(sentences, anchor, rng)
    return View(sentences[index][:max_content], _rest(sentences, index, max_content))


def laser_intra_view(
    sentences: Sequence[Ids],
    elongation: Elongation,
    max_content: int,
    rng: random.Random,
    anchor: AnchorChoice | str = AnchorChoice.FIRST,
) -> View:
    """LA(SER)³ intra-reference: anchor side `f(anchor, m)`, positive the rest of the document (COCO-DR + f)."""
    base = coco_dr_view(sentences, max_content, rng, anchor)
    return View(_elongated(base.anchor, elongation, max_content, rng), base.positive)


def copy_concat_view(first: Ids, second: Ids, elongation: Elongation, max_content: int, rng: random.Random) -> View:
    """Length-adversarial copy-and-concat: each side of a positive pair elongated with its own m (length-attack §3)."""
    return View(_elongated(first, elongation, max_content, rng), _elongated(second, elongation, max_content, rng))


def simde_view(sentences: Sequence[Ids], max_content: int, rng: random.Random) -> View:
    """SimDE: each sentence goes to side A or B with p = 0.5, both sides non-empty, original order kept.

    Draws are repeated until both sides are non-empty, i.e. the assignment is uniform over the valid splits.
    """
    if len(sentences) < 2:
        raise SettingError("len(sentences)", len(sentences), "simde needs a document of at least two sentences")
    while True:
        sides = [rng.random() < 0.5 for _ in sentences]
        if any(sides) and not all(sides):
            break
    first = [token for ids, side in zip(sentences, sides, strict=True) if side for token in ids]
    second = [token for ids, side in zip(sentences, sides, strict=True) if not side for token in ids]
    return View(first[:max_content], second[:max_content])


def length_invariant_view(pair: View, elongation: Elongation, max_content: int, rng: random.Random) -> View:
    """Both sides of a plain pair elongated, f(a, m_a) and f(b, m_b), each m drawn for its own length: the
    inputs the length-invariant loss ties back to the starting model's a and b (METHODS §3)."""
    return View(
        _elongated(pair.anchor, elongation, max_content, rng), _elongated(pair.positive, elongation, max_content, rng)
    )
