"""The state of a run directory: its checkpoints (complete or half-written) and whether the run has finished.

The transformers `Trainer` writes ``checkpoint-N/`` file by file and ``trainer_state.json`` last, so a kill while
it saves leaves a folder without (or with a cut) ``trainer_state.json``. Only a checkpoint whose state reads back,
with its weights, optimizer and scheduler beside it, counts as complete: a resume starts from the newest complete
one, and half-written ones are removed before training starts so they can neither be resumed nor block a run.
A run has finished when ``OUT/train.json`` (written last, atomically) is there.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["RunState", "complete_checkpoint_step", "inspect_run", "remove_incomplete"]

logger = logging.getLogger(__name__)

_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")
_REQUIRED = ("trainer_state.json", "optimizer.pt", "scheduler.pt", "modules.json")


def complete_checkpoint_step(folder: Path) -> int | None:
    """The global step of a complete checkpoint folder, or None when it is half-written (or not a checkpoint)."""
    if not all((folder / name).is_file() for name in _REQUIRED):
        return None
    if not any(folder.glob("*.safetensors")) and not any(folder.glob("*.bin")):
        return None
    try:
        state = json.loads((folder / "trainer_state.json").read_text(encoding="utf-8"))
        return int(state["global_step"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


@dataclass(frozen=True)
class RunState:
    """What a run directory holds: its newest complete checkpoint, half-written checkpoints, the final model and
    the finished run's record (``train.json``) if any."""

    out: Path
    last_complete: Path | None
    incomplete: tuple[Path, ...]
    has_model: bool
    record: dict[str, Any] | None

    @property
    def finished(self) -> bool:
        return self.record is not None and self.has_model

    @property
    def last_step(self) -> int | None:
        """The global step of the newest complete checkpoint."""
        return complete_checkpoint_step(self.last_complete) if self.last_complete else None

    def trainer_state(self) -> dict[str, Any]:
        """The newest complete checkpoint's ``trainer_state.json`` (empty when there is none)."""
        if self.last_complete is None:
            return {}
        return dict(json.loads((self.last_complete / "trainer_state.json").read_text(encoding="utf-8")))


def inspect_run(out: Path) -> RunState:
    """Read `out` without changing it."""
    folder = out / "checkpoints"
    complete: list[tuple[int, Path]] = []
    incomplete: list[Path] = []
    if folder.is_dir():
        for child in sorted(folder.iterdir()):
            if not child.is_dir() or not _CHECKPOINT.match(child.name):
                continue
            step = complete_checkpoint_step(child)
            if step is None:
                incomplete.append(child)
            else:
                complete.append((step, child))
    record = None
    if (out / "train.json").is_file():
        try:
            record = json.loads((out / "train.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            record = None
    return RunState(
        out=out,
        last_complete=max(complete)[1] if complete else None,
        incomplete=tuple(incomplete),
        has_model=(out / "model" / "modules.json").is_file(),
        record=record if isinstance(record, dict) else None,
    )


def remove_incomplete(state: RunState) -> list[Path]:
    """Delete the half-written checkpoints of `state` (a kill while saving); returns what was removed."""
    for folder in state.incomplete:
        logger.warning("removing the half-written checkpoint %s (no complete trainer_state.json)", folder)
        shutil.rmtree(folder, ignore_errors=True)
    return list(state.incomplete)
