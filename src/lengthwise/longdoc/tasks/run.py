"""The room's one-call jobs over a LongEmbed-style synthetic task: write one (`synthesize`, = ``lengthwise longdoc
synth``) and score a model on one (`score_long_task`, = ``lengthwise longdoc eval``).

The generator is `lengthwise.longdoc.tasks.synthetic`; the scoring, `lengthwise.longdoc.tasks.scoring`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lengthwise.core.defaults import DEFAULT_MODEL
from lengthwise.core.errors import SettingError

if TYPE_CHECKING:
    from lengthwise.core.models import ModelLoader
    from lengthwise.longdoc.config import LongDocConfig
    from lengthwise.longdoc.tasks.scoring import SyntheticResult
    from lengthwise.longdoc.tasks.synthetic import SyntheticSet

__all__ = ["haystack_files", "score_long_task", "synthesize"]


def haystack_files(haystack: Path) -> list[Path]:
    """The haystack's text files: the file itself, or a folder's ``*.txt`` and ``*.txt.gz`` in name order."""
    if haystack.is_dir():
        files = sorted(p for p in haystack.iterdir() if p.is_file() and p.name.endswith((".txt", ".txt.gz")))
        if not files:
            raise SettingError("haystack", str(haystack), "the folder holds no .txt or .txt.gz file; pass prose")
        return files
    if not haystack.is_file():
        raise SettingError("haystack", str(haystack), "no such file or folder; pass prose, one paragraph per line")
    return [haystack]


def synthesize(
    task: str,
    haystack: str | os.PathLike[str],
    out: str | os.PathLike[str],
    model: str | os.PathLike[str] = DEFAULT_MODEL,
    *,
    style: str = "realistic",
    lengths: Sequence[int] = (256, 512, 1024, 2048, 4096, 8192, 16384, 32768),
    per_length: int = 50,
    seed: int = 0,
) -> SyntheticSet:
    """`lengthwise longdoc synth` as one call: write a seeded passkey or needle task as a BEIR folder.

    Args:
        task: ``passkey`` or ``needle``.
        haystack: A text file (plain or .gz) of natural prose, one paragraph (or sentence) per line, or a folder of
            such ``*.txt`` / ``*.txt.gz`` files (read in name order), e.g. the repository's ``data/essays``.
        style: ``realistic`` (each document its own prose, needles about names the haystack mentions, paraphrased
            queries) or ``simple`` (LongEmbed's layout); see `lengthwise.longdoc.tasks.synthetic`.
        out: The folder to write (new, empty, or one this wrote earlier).
        model: The model whose tokenizer measures the lengths (only the tokenizer is loaded).
        lengths, per_length, seed: Document lengths in tokens, documents per length, the seed.
    """
    from transformers import AutoTokenizer

    from lengthwise.core._textio import open_text
    from lengthwise.core.models import resolve_model_path
    from lengthwise.longdoc.config import LongDocError
    from lengthwise.longdoc.tasks.synthetic import check_target, make_synthetic, write_synthetic

    haystack = Path(haystack)
    files = haystack_files(haystack)
    sentences: list[str] = []
    for file in files:
        with open_text(file) as handle:
            sentences.extend(line for _, line in handle.lines())
    if not any(sentence.strip() for sentence in sentences):
        raise SettingError("haystack", str(haystack), "holds no text; pass prose, one paragraph per line")
    check_target(Path(out))  # before any work: a folder of the user's own files is refused first
    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path(model))
    try:
        data = make_synthetic(
            task,  # type: ignore[arg-type]  # checked inside: a bad task or style is a LongDocError naming it
            sentences,
            tokenizer,
            style=style,  # type: ignore[arg-type]
            lengths=lengths,
            per_length=per_length,
            seed=seed,
        )
    except LongDocError as err:
        if err.field != "haystack":
            raise
        raise LongDocError("haystack", str(haystack), err.problem) from None  # name the file, not its size
    write_synthetic(data, Path(out))
    return data


def score_long_task(
    data: str | os.PathLike[str],
    model: str | os.PathLike[str] = DEFAULT_MODEL,
    *,
    load_model: ModelLoader | None = None,
    long: str | LongDocConfig = "default",
    out: str | os.PathLike[str] | None = None,
    batch_size: int = 32,
    device: str | None = None,
    precision: str = "fp32",
    show_progress: bool = False,
) -> tuple[SyntheticResult, dict[str, Any]]:
    """`lengthwise longdoc eval` as one call: score a synthetic task LongEmbed-style (Acc@1 per length group).

    Args:
        data: A folder written by `synthesize` (``lengthwise longdoc synth``).
        model: A model folder, an installed model package's name or a Hugging Face id.
        load_model: How `model` is loaded (`lengthwise.core.models.ModelLoader`). None: the plain load
            (`load_plain_model`), which leaves a TempScale saved with the model unapplied; ``lengthwise longdoc
            eval`` passes `lengthwise.load_model`, which re-applies it.
        long: The long-document strategy (a name, ``"default"``, or a `LongDocConfig`).
        out: Where ``results.json`` is written (checked before the model loads); None writes nothing.
        batch_size, device, precision, show_progress: Windows per forward pass, the torch device, auto/fp32/
            bf16/fp16/int8 (`lengthwise.core.precision`), a progress bar.

    Returns:
        The `SyntheticResult` and the record written to ``out/results.json``.
    """
    from lengthwise.core.models import load_plain_model, model_fingerprint
    from lengthwise.core.output_set import prepare_out
    from lengthwise.core.results import provenance, write_json_atomic
    from lengthwise.longdoc.config import LongDocConfig
    from lengthwise.longdoc.encoder import LongEncoder
    from lengthwise.longdoc.tasks.scoring import evaluate_synthetic
    from lengthwise.longdoc.tasks.synthetic import read_synthetic

    started = time.perf_counter()
    config = long if isinstance(long, LongDocConfig) else LongDocConfig.named(long)
    if batch_size < 1:
        raise SettingError("batch_size", batch_size, "must be ≥ 1")
    if out is not None:
        prepare_out(out)  # before the model loads
    dataset = read_synthetic(Path(data))
    loaded = (load_model or load_plain_model)(model, device=device, precision=precision)
    result = evaluate_synthetic(LongEncoder(loaded, config), dataset, batch_size=batch_size,
                                show_progress=show_progress)  # fmt: skip
    made = provenance(model_fingerprint(loaded, model), dataset.meta, {"long": config.to_dict()}, started=started)
    record = {"result": result.to_dict(), "provenance": made}
    if out is not None:
        write_json_atomic(Path(out) / "results.json", record)
    return result, record
