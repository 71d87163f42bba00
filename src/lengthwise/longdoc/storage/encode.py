"""`lengthwise encode`: a corpus embedded by the long-document encoder into a folder of checked, resumable shards.

The local runner runs one process per device (each taking documents k, k + n, …); the Ray runner runs the same
encoder as a Ray Data actor pool (`lengthwise.longdoc.storage._raydata`). Both write the same shards
(`lengthwise.longdoc.storage.store`) and, asked for, the same Parquet window rows (`._parquet`). The model is loaded
in each worker by the `ModelLoader` the caller passes (`lengthwise.encode` passes `lengthwise.load_model`, which
re-applies a TempScale saved with the model); this room never picks it itself.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from lengthwise.core.corpus import corpus_file
from lengthwise.core.defaults import DEFAULT_MODEL
from lengthwise.core.errors import SettingError

if TYPE_CHECKING:
    from lengthwise.core.models import ModelLoader
    from lengthwise.longdoc.config import LongDocConfig

__all__ = ["encode"]


def _encode_worker(
    load_model: ModelLoader, model: str, device: str | None, config: LongDocConfig, data: Path, out: Path, job: dict
) -> int:
    """Encode one worker's share (documents ``k, k + n, …``), in a spawned process or in this one."""
    from transformers.utils import logging as hf_logging

    from lengthwise.longdoc.encoder import LongEncoder
    from lengthwise.longdoc.storage.store import EmbeddingStore, encode_corpus

    hf_logging.disable_progress_bar()
    if job["threads"]:
        import torch

        torch.set_num_threads(job["threads"])
    encoder = LongEncoder(load_model(model, device=device, precision=job["precision"]), config)
    store = EmbeddingStore(out, job["settings"])
    return encode_corpus(encoder, data, store, shard_docs=job["shard_docs"], batch_size=job["batch_size"],
                         worker=(job["index"], job["count"]), show_progress=job["progress"] or False,
                         repair=False, parquet=job["parquet"], progress_interval=job["interval"])  # fmt: skip


def encode(
    data: str | os.PathLike[str],
    out: str | os.PathLike[str],
    model: str | os.PathLike[str] = DEFAULT_MODEL,
    *,
    load_model: ModelLoader | None = None,
    long: str | LongDocConfig = "default",
    devices: Sequence[str | None] = (None,),
    shard_docs: int = 1000,
    batch_size: int = 32,
    threads: int | None = None,
    precision: str = "fp32",
    runner: str = "local",
    address: str | None = None,
    workers: int | None = None,
    format: str | None = None,
    show_progress: bool = False,
    on_note: Callable[[str], None] | None = None,
) -> int:
    """`lengthwise encode` as one call: embed a corpus into `out` as resumable, checked shards.

    Args:
        data: ``corpus.jsonl`` (``_id``, ``text``, ``title``), a BEIR folder holding one, or a ``.txt`` file, one
            document per line. Read once
            before any compute: a row without text or a repeated id stops the run, naming the file and the line.
        out: The shard folder; an existing one made with the same settings is resumed, and a damaged or unfinished
            shard in it is removed and its documents embedded again (`on_note` is told).
        model: A model folder, an installed model package's name or a Hugging Face id.
        load_model: How each worker loads `model` (`lengthwise.core.models.ModelLoader`; it must pickle). None: the
            plain load (`load_plain_model`), which leaves a TempScale saved with the model unapplied;
            `lengthwise.encode` passes `lengthwise.load_model`, which re-applies it.
        long: The long-document strategy (name or `LongDocConfig`).
        devices: One process per entry (None = the best device), each taking documents k, k + n, … by position.
        shard_docs, batch_size, threads: Documents per shard, windows per forward pass, torch threads per process.
        precision: auto, fp32, bf16, fp16 or int8 (`lengthwise.core.precision.Precision`); what it means on
            `devices` is recorded in the folder's settings (auto as bf16, say), and a search embeds its queries so.
        runner: ``"local"`` (this process, or one per entry of `devices`) or ``"ray"``: the same encoder as a Ray
            Data actor pool (`lengthwise.longdoc.storage._raydata`; the ``lengthwise[ray]`` extra), one actor per
            GPU, else `workers` CPU actors. A folder keeps the runner that made it.
        address: The Ray cluster to join (``ray.init(address)``); None: the one this process runs, else a new
            local one.
        workers: CPU actors for the Ray runner (default: one per 4 CPUs of the cluster; ignored with GPUs).
        format: ``"npy"`` (the shards) or ``"parquet"`` (the shards and one Parquet row per window under
            ``out/parquet``: doc_id, window, start, end, vector; `lengthwise.longdoc.storage._parquet`). None: npy
            locally, parquet on Ray. The shards are always written: resuming and `LongIndex.build` read them. A
            folder keeps its format.
        show_progress: Show the progress on stderr: tqdm's bar on a terminal (one process); elsewhere (a log
            file, ``nohup``; and from each of several processes) a line at most every 30 s
            (``LENGTHWISE_PROGRESS_INTERVAL`` seconds when set) with the documents done, the windows embedded, the
            rate and the time left, and a last line (`lengthwise.core.progress`). On Ray, each actor writes the
            lines of the shard it embeds, which Ray shows on the driver's stderr.

    Returns:
        The number of documents embedded by this call.
    """
    from lengthwise.core.models import load_plain_model
    from lengthwise.core.precision import resolve_precision
    from lengthwise.core.progress import progress_interval, progress_mode
    from lengthwise.longdoc.config import LongDocConfig, LongDocError
    from lengthwise.longdoc.storage.store import EmbeddingStore, corpus_digests

    config = long if isinstance(long, LongDocConfig) else LongDocConfig.named(long)
    _check_runner(runner, devices, workers, address)
    parquet = _check_format(format, runner)
    precision = resolve_precision(precision, *devices).value  # auto made concrete; the folder records one spelling
    for name, value in (("shard_docs", shard_docs), ("batch_size", batch_size), ("threads", threads)):
        if value is not None and value < 1:
            raise SettingError(name, value, "must be ≥ 1")
    if not devices:
        raise SettingError("devices", list(devices), "name at least one device, e.g. cpu or cuda:0,cuda:1")
    load_model = load_model or load_plain_model
    progress, interval = progress_mode(show_progress, processes=len(devices)), progress_interval()
    data, out = corpus_file(Path(data)), Path(out)
    digests = corpus_digests(data)  # every text and id before any compute
    if not digests:
        raise LongDocError(
            None, None, f"{data}: holds no documents; pass a corpus.jsonl with one _id and text per line"
        )
    settings = {"model": str(model), "data": str(data.resolve()), "long": config.to_dict(), "workers": len(devices),
                "precision": precision}  # fmt: skip
    if parquet != (runner == "ray"):  # recorded only when not the runner's default, so older folders still resume
        settings["format"] = "parquet" if parquet else "npy"
    if runner == "ray":  # the actor count does not change the vectors; the runner decides the files (Parquet)
        from lengthwise.longdoc.storage._raydata import encode_on_ray

        settings = {**{k: v for k, v in settings.items() if k != "workers"}, "runner": "ray"}
        job = {"model": str(model), "precision": precision, "threads": threads, "shard_docs": shard_docs,
               "batch_size": batch_size, "parquet": parquet, "interval": interval}  # fmt: skip
        store = EmbeddingStore(out, settings)
        written = encode_on_ray(load_model, data, store, config, job, address=address, workers=workers,
                                progress=progress, on_note=on_note, corpus=digests)  # fmt: skip
        store.finish()
        return written
    store = EmbeddingStore(out, settings)  # checks the folder; the manifest is written with the first shard
    for line in store.repair(digests)[1]:
        if on_note is not None:
            on_note(line)
    jobs = [
        {"index": k, "count": len(devices), "settings": settings, "shard_docs": shard_docs, "batch_size": batch_size,
         "threads": threads, "progress": progress, "interval": interval, "precision": precision,
         "parquet": parquet}
        for k in range(len(devices))
    ]  # fmt: skip
    if len(devices) == 1:
        written = _encode_worker(load_model, str(model), devices[0], config, data, out, jobs[0])
    else:
        import multiprocessing

        with multiprocessing.get_context("spawn").Pool(len(devices)) as pool:
            args = [(load_model, str(model), device, config, data, out, job)
                    for device, job in zip(devices, jobs, strict=True)]  # fmt: skip
            written = sum(pool.starmap(_encode_worker, args))
            pool.close()  # the workers exit on their own, their finalizers run: `with` alone terminates them, and a
            pool.join()  # worker killed before its finalizers leaves its semaphores (tqdm's lock) to the tracker
    store.finish()  # the digest of the texts embedded: an index built from the folder carries it
    return written


def _check_format(format: str | None, runner: str) -> bool:
    """`encode`'s ``format``, checked before any compute: True when the Parquet window rows are written (pyarrow
    must then be installed)."""
    from lengthwise.longdoc.storage._parquet import FORMATS, require_pyarrow

    if format is not None and format not in FORMATS:
        raise SettingError("format", format, "use npy (the shards) or parquet (the shards and their window rows)")
    parquet = format == "parquet" if format is not None else runner == "ray"
    if parquet:
        require_pyarrow()
    return parquet


def _check_runner(runner: str, devices: Sequence[str | None], workers: int | None, address: str | None = None) -> None:
    """`encode`'s runner settings, checked before anything is read: Ray must be installed for ``"ray"``, and a
    cluster `address` must answer."""
    if runner not in ("local", "ray"):
        raise SettingError("runner", runner, "use local (this machine) or ray (a Ray cluster)")
    if runner == "local":
        if workers is not None:
            raise SettingError("workers", workers, "is for the ray runner; the local runner takes devices")
        if address is not None:
            raise SettingError("address", address, "is for the ray runner; the local runner runs on this machine")
        return
    if tuple(devices) != (None,):
        raise SettingError("devices", list(devices), "is for the local runner; Ray places one actor per GPU")
    if workers is not None and workers < 1:
        raise SettingError("workers", workers, "must be ≥ 1")
    from lengthwise.longdoc.storage._raydata import check_address, require_ray

    require_ray()
    if address is not None:
        check_address(address)
