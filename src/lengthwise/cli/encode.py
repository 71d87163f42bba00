"""`lengthwise encode`: embeddings of a corpus with a long-document strategy, as resumable .npy shards plus ids.

A thin adapter from flags to `lengthwise.longdoc.store.encode_corpus`; heavy imports happen inside the command.
Several processes (or devices) split the corpus by position, each writing its own shards into OUT.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lengthwise.cli.console import console
from lengthwise.cli.console import fail as _fail
from lengthwise.cli.longdoc import (
    LongOption,
    MacroOption,
    SentenceOption,
    StrideOption,
    TopKOption,
    WindowOption,
    long_config,
)
from lengthwise.cli.options import check_device, check_out_dir, setting_message
from lengthwise.core.defaults import DEFAULT_MODEL
from lengthwise.longdoc.config import LongDocConfig

__all__ = ["encode"]


def _worker(model: str, device: str | None, config: LongDocConfig, data: Path, out: Path, job: dict) -> int:
    """Encode one worker's share (documents ``k, k + n, …``); runs in a spawned process or in this one."""
    import torch
    from transformers.utils import logging as hf_logging

    from lengthwise.facade import load_model
    from lengthwise.longdoc import LongEncoder
    from lengthwise.longdoc.store import EmbeddingStore, encode_corpus

    hf_logging.disable_progress_bar()
    if job["threads"]:
        torch.set_num_threads(job["threads"])
    encoder = LongEncoder(load_model(model, device=device), config)
    store = EmbeddingStore(out, job["settings"])
    return encode_corpus(
        encoder,
        data,
        store,
        shard_docs=job["shard_docs"],
        batch_size=job["batch_size"],
        worker=(job["index"], job["count"]),
        show_progress=job["progress"],
    )


def encode(
    data: Annotated[
        Path, typer.Option("--data", "-d", help="corpus.jsonl (_id, text, title) or a .txt, one per line.")
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder (resumed when it exists).")],
    long: LongOption = "chunk-mean",
    window: WindowOption = None,
    stride: StrideOption = None,
    top_k: TopKOption = 1,
    sentence_cuts: SentenceOption = False,
    macro_window: MacroOption = None,
    model: Annotated[str, typer.Option("--model", "-m", help="Model directory or Hugging Face id.")] = DEFAULT_MODEL,
    shard_docs: Annotated[int, typer.Option("--shard-docs", help="Documents per shard file.")] = 1000,
    batch_size: Annotated[int, typer.Option("--batch-size", help="Windows per forward pass.")] = 32,
    devices: Annotated[
        str | None,
        typer.Option("--devices", help="Comma-separated devices, one process each (e.g. cuda:0,cuda:1 or cpu,cpu)."),
    ] = None,
    threads: Annotated[int | None, typer.Option("--threads", help="Torch threads per process.")] = None,
) -> None:
    """Embed every document of --data into OUT as .npy shards with their ids; a killed run resumes.

    Shards are `w{k}-{n}.npy` (vectors, or every window for multi-vector with `.offsets.npy`) and
    `w{k}-{n}.ids.txt`; `lengthwise.longdoc.store.read_embeddings(OUT)` reads them back in one array. A document
    without text stops the run with its file and line (no vector is invented for an empty document).
    """
    import multiprocessing

    from lengthwise.core.models import ModelLoadError

    targets = [d.strip() for d in devices.split(",") if d.strip()] if devices else [None]
    try:
        config = long_config(long, window, stride, top_k, sentence_cuts, macro_window)
        for device in targets:
            check_device(device)
        check_out_dir(out)
        if shard_docs < 1:
            raise ValueError(f"--shard-docs {shard_docs} must be ≥ 1")
        if not data.is_file():
            raise ValueError(f"--data {data}: no such file; pass a corpus.jsonl (or .txt, one document per line)")
        settings = {"model": model, "data": str(data.resolve()), "long": config.to_dict(), "workers": len(targets)}
        jobs = [
            {
                "index": k,
                "count": len(targets),
                "settings": settings,
                "shard_docs": shard_docs,
                "batch_size": batch_size,
                "threads": threads,
                "progress": console.is_terminal and len(targets) == 1,
            }
            for k in range(len(targets))
        ]
        if len(targets) == 1:
            written = _worker(model, targets[0], config, data, out, jobs[0])
        else:
            context = multiprocessing.get_context("spawn")
            with context.Pool(len(targets)) as pool:
                args = [(model, device, config, data, out, job) for device, job in zip(targets, jobs, strict=True)]
                written = sum(pool.starmap(_worker, args))
    except (ValueError, ModelLoadError) as err:  # LongDocError and DataFormatError are ValueErrors naming the fix
        _fail(setting_message(err))
    console.print(f"embedded {written} new documents into {out} ({config.describe()})", highlight=False)
