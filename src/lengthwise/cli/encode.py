"""`lengthwise encode`: embeddings of a corpus with a long-document strategy, as resumable, checked .npy shards.

Flags → one call, `lengthwise.longdoc.storage.encode.encode` with `lengthwise.load_model` (= `lengthwise.encode`)
→ a printed line; heavy imports happen
inside the command. Several processes (or devices) split the corpus by position, each writing its own shards;
`--runner ray` runs the same encoder as a Ray Data actor pool instead (`lengthwise.longdoc.storage._raydata`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lengthwise.cli.console import fail as _fail
from lengthwise.cli.console import say
from lengthwise.cli.longdoc import long_options
from lengthwise.cli.options import (
    AddressOption,
    DevicesOption,
    ModelOption,
    PrecisionOption,
    WorkersOption,
    check_device,
    check_out_dir,
    setting_message,
)
from lengthwise.core.defaults import DEFAULT_MODEL
from lengthwise.longdoc.config import LongDocConfig

__all__ = ["encode", "encode_tokens"]


@long_options
def encode(
    data: Annotated[
        Path,
        typer.Option("--data", "-d", help="corpus.jsonl (_id, text, title), a BEIR folder, or a .txt, one per line."),
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder (resumed when it exists).")],
    long: LongDocConfig,
    model: ModelOption = DEFAULT_MODEL,
    shard_docs: Annotated[int, typer.Option("--shard-docs", help="Documents per shard file.")] = 1000,
    batch_size: Annotated[int, typer.Option("--batch-size", help="Windows per forward pass.")] = 32,
    devices: DevicesOption = None,
    threads: Annotated[int | None, typer.Option("--threads", help="Torch threads per process.")] = None,
    precision: PrecisionOption = "fp32",
    runner: Annotated[
        str,
        typer.Option("--runner", help="local (this machine) or ray: Ray Data actors, one per GPU; adds Parquet rows."),
    ] = "local",
    address: AddressOption = None,
    workers: WorkersOption = None,
    format: Annotated[
        str | None,
        typer.Option(
            "--format",
            help="npy (the shards) or parquet (the shards plus one row per window under OUT/parquet); "
            "default: npy locally, parquet with --runner ray.",
        ),
    ] = None,
) -> None:
    """Embed every document of --data into OUT as .npy shards with their ids; a killed run resumes.

    Shards are `w{k}-{n}.npy` (vectors, or every window for multi-vector with `.offsets.npy`) and
    `w{k}-{n}.ids.txt`; `lengthwise.longdoc.storage.store.read_embeddings(OUT)` reads them back in one array. A document
    without text stops the run with its file and line (no vector is invented for an empty document).
    `--format parquet` also writes one Parquet row per window (doc_id, window, start, end, vector) under
    OUT/parquet, readable by pyarrow, DuckDB and polars. `--runner ray` runs the same encoder on a Ray cluster
    (`pip install 'lengthwise[ray]'`), with Parquet by default. Progress: a bar on a terminal; in a log (nohup, a
    pipe) a line every 30 s (LENGTHWISE_PROGRESS_INTERVAL) with documents, windows, rate and time left.
    """
    from lengthwise.core.errors import LengthwiseError
    from lengthwise.facade import load_model
    from lengthwise.longdoc.storage.encode import encode as encode_corpus

    def note(line: str) -> None:
        say(f"repair: {line}")

    try:
        targets = _devices(devices)
        check_out_dir(out)
        written = encode_corpus(data, out, model, load_model=load_model, long=long, devices=targets,
                                shard_docs=shard_docs,
                                batch_size=batch_size, threads=threads, precision=precision, runner=runner,
                                address=address, workers=workers, format=format,
                                show_progress=True,  # a bar on a terminal, else a line every 30 s
                                on_note=note)  # fmt: skip
    except LengthwiseError as err:  # SettingError, LongDocError, DataFormatError, ModelLoadError
        _fail(setting_message(err))
    say(f"embedded {written} new documents into {out} ({long.describe()})")  # a path is printed as it is


def encode_tokens(
    data: Annotated[
        Path,
        typer.Option("--data", "-d", help="corpus.jsonl (_id, text, title), a BEIR folder, or a .txt, one per line."),
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder (resumed when it exists).")],
    model: ModelOption = DEFAULT_MODEL,
    codec: Annotated[
        str,
        typer.Option(
            "--codec",
            help="How a token is kept: auto (one bit a dimension, ≤ 64 bytes), fp16, int8, "
            "int4, bin, or after a projection: pca256-bin, pca128-int8.",
        ),
    ] = "auto",
    window: Annotated[int | None, typer.Option("--window", help="Tokens per pass (default: the model's max).")] = None,
    overlap: Annotated[int, typer.Option("--overlap", help="Tokens consecutive passes share.", min=0)] = 64,
    shard_docs: Annotated[int, typer.Option("--shard-docs", help="Documents per shard file.")] = 32,
    batch_size: Annotated[int, typer.Option("--batch-size", help="Windows per forward pass.")] = 32,
    threads: Annotated[int | None, typer.Option("--threads", help="Torch threads per process.")] = None,
    precision: PrecisionOption = "fp32",
    devices: DevicesOption = None,
    runner: Annotated[
        str, typer.Option("--runner", help="local (this machine) or ray: Ray Data actors, one per GPU.")
    ] = "local",
    address: AddressOption = None,
    workers: WorkersOption = None,
    colbert: Annotated[
        bool | None,
        typer.Option(
            "--colbert/--plain",
            help="Read with the model as a ColBERT (sentence-transformers' "
            "MultiVectorEncoder: PyLate and Stanford checkpoints) or as a plain encoder's last hidden "
            "states; default: a ColBERT when its folder was saved as one.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Encode every token of each document of --data into OUT (late interaction: `search --tokens OUT`); a killed
    run resumes.

    Each content token's vector (the model's last hidden states, read in overlapping passes, each token kept once
    from the pass where it sits farthest from a cut) is coded small (--codec) into checked shards with its
    character span. Progress: a bar on a terminal; in a log a line every 30 s with documents, tokens and time left.
    """
    from lengthwise.core.errors import LengthwiseError
    from lengthwise.facade import load_model
    from lengthwise.longdoc.storage.tokens import encode_tokens as encode_corpus_tokens

    try:
        targets = _devices(devices)
        check_out_dir(out)
        written = encode_corpus_tokens(data, out, model, load_model=load_model, colbert=colbert, codec=codec,
                                       window=window, overlap=overlap, shard_docs=shard_docs, batch_size=batch_size,
                                       threads=threads, precision=precision, devices=targets, runner=runner,
                                       address=address, workers=workers, show_progress=True,
                                       on_note=lambda line: say(f"repair: {line}"))  # fmt: skip
    except LengthwiseError as err:
        _fail(setting_message(err))
    say(f"encoded the tokens of {written} new documents into {out} (codec {codec})")


def _devices(devices: str | None) -> list[str | None]:
    """``--devices`` as a list (None: the best device, one process), each device checked (a `SettingError` on
    ``devices``)."""
    from lengthwise.core.errors import SettingError

    targets: list[str | None] = [d.strip() for d in devices.split(",") if d.strip()] if devices is not None else [None]
    for device in targets:
        try:
            check_device(device)
        except SettingError as err:  # the flag here is --devices
            raise SettingError("devices", devices, err.problem) from None
    return targets
