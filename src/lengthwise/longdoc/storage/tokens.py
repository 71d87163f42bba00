"""`lengthwise encode-tokens`: every content token's vector of each document, coded small, in checked shards.

The shards are the window encode's (`lengthwise.longdoc.storage.store`: resumable, each shard's files checked by
its record, a changed text re-embedded): a shard's ``.npy`` holds its tokens' codes (T, bytes) instead of windows,
its ``.offsets.npy`` which tokens each document owns, and its ``.spans.npy`` each token's character span (T, 2)
int32. The codec (`lengthwise.core.token_codec`) is fitted on the first shard's tokens and saved as ``codec.npz``
before that shard, so a resumed run codes the rest as the first was coded.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from lengthwise.core.corpus import corpus_file
from lengthwise.core.defaults import DEFAULT_MODEL
from lengthwise.core.errors import SettingError
from lengthwise.core.token_codec import CODEC_FILE, TokenCodec, parse_codec, read_codec

if TYPE_CHECKING:
    from lengthwise.core.encoder import MultiVectors
    from lengthwise.core.models import ModelLoader
    from lengthwise.longdoc.token_vectors import TokenVectors

__all__ = ["TOKEN_CODEC", "TokenShardEncoder", "auto_codec", "encode_tokens"]

TOKEN_CODEC = "auto"  # the default: `auto_codec` (docs/longdoc.md, "Token vectors")
TOKEN_BYTES = 64  # what a token's codes may take by default


def auto_codec(dimension: int) -> str:
    """The default codec for an encoder of `dimension`: one bit a dimension (the sign), over as many dimensions as
    64 bytes hold (``bin`` up to 512 dimensions, else a projection to 512 first). On QMSum with all-MiniLM-L6-v2 the
    sign lost 0.95 nDCG@10 against float16 on the test split and gained 0.6 on dev (docs/longdoc.md)."""
    return "bin" if dimension <= 8 * TOKEN_BYTES else f"pca{8 * TOKEN_BYTES}-bin"


class TokenShardEncoder:
    """Documents → coded token vectors, shard by shard, for `encode_corpus` (its multi-vector encoder protocol).

    Args:
        read: texts → each text's `TokenVectors` (unit rows, in order).
        spec: The codec spec (`lengthwise.core.token_codec`).
        folder: The token folder: its saved codec is used, else one is fitted on the first shard and saved there.
        start: Called before the codec is saved (makes the folder and writes its manifest).
    """

    is_multi_vector = True

    def __init__(
        self,
        read: Callable[[Sequence[str]], Iterator[TokenVectors]],
        spec: str,
        folder: Path,
        start: Callable[[], None],
    ) -> None:
        self.read, self.spec, self.folder, self.start = read, spec, folder, start
        self.codec = read_codec(folder)
        if self.codec is not None and spec != TOKEN_CODEC and self.codec.spec != spec:
            raise SettingError(
                "codec", spec, f"{folder} holds tokens coded {self.codec.spec}; use that or a new folder"
            )
        self.stats = {"tokens": 0}  # the progress line's count
        self._spans: np.ndarray | None = None

    def encode_documents_multi(
        self, texts: Sequence[str], *, batch_size: int = 32, on_document: Callable[[], None] | None = None
    ) -> MultiVectors:
        """The texts' token codes (T, bytes) and which rows each owns; their spans wait for `shard_extra`."""
        from lengthwise.core.encoder import MultiVectors

        found = []
        for vectors in self.read(texts):
            found.append(vectors)
            self.stats["tokens"] += len(vectors.vectors)
            if on_document is not None:
                on_document()
        rows = np.concatenate([v.vectors for v in found])  # (T, D) float32
        if self.codec is None:
            spec = auto_codec(rows.shape[1]) if self.spec == TOKEN_CODEC else self.spec
            self.codec = TokenCodec.fit(spec, rows)
            self.start()
            buffer = io.BytesIO()
            np.savez(buffer, **self.codec.to_arrays())  # type: ignore[arg-type]
            from lengthwise.core.results import write_bytes_atomic

            write_bytes_atomic(self.folder / CODEC_FILE, buffer.getvalue())
        self._spans = np.concatenate([v.offsets for v in found]).astype(np.int32)
        offsets = np.cumsum([0, *(len(v.vectors) for v in found)]).astype(np.int64)
        return MultiVectors(self.codec.encode(rows), offsets)

    def shard_extra(self) -> Callable[[str], dict[str, bytes]]:
        """The last encoded shard's span file, for its record (bound now: the next shard may be encoding when it is
        written)."""
        from lengthwise.core.shards import SPANS
        from lengthwise.longdoc.storage.store import _npy_bytes

        spans, self._spans = self._spans, None
        assert spans is not None, "encode_documents_multi first"
        data = _npy_bytes(spans)
        return lambda stem: {f"{stem}{SPANS}": data}


def encode_tokens(
    data: str | os.PathLike[str],
    out: str | os.PathLike[str],
    model: str | os.PathLike[str] = DEFAULT_MODEL,
    *,
    load_model: ModelLoader | None = None,
    colbert: bool | None = None,
    codec: str = TOKEN_CODEC,
    window: int | None = None,
    overlap: int = 64,
    shard_docs: int = 32,
    batch_size: int = 32,
    threads: int | None = None,
    precision: str = "fp32",
    devices: Sequence[str | None] = (None,),
    runner: str = "local",
    address: str | None = None,
    workers: int | None = None,
    show_progress: bool = False,
    on_note: Callable[[str], None] | None = None,
) -> int:
    """Encode a corpus's token vectors into `out` as resumable, checked shards (see the module docstring).

    Args:
        data: ``corpus.jsonl`` (``_id``, ``text``, ``title``), a BEIR folder holding one, or a ``.txt`` file.
        out: The token folder; one made with the same settings is resumed (a damaged shard re-embedded).
        model: A sentence-transformers model (its last hidden states: training-free), or a ColBERT model
            (`colbert`): its projected, normalised token vectors, with its document prefix.
        load_model: How a plain model is loaded (None: the hall's plain load).
        colbert: Load `model` as sentence-transformers' `MultiVectorEncoder` (None: when its folder was saved as
            one; True for a hub id or a PyLate/Stanford checkpoint).
        codec: How each token is kept (`lengthwise.core.token_codec`); ``auto``: `auto_codec`, at most 64 bytes.
        window, overlap: Tokens per pass (None: the model's max length) and tokens consecutive passes share.
        shard_docs, batch_size, threads, precision: Documents per shard, windows per forward pass, torch threads
            (per process), the model's precision (recorded: queries are read at it).
        devices: One process per entry (None: the best device), each taking documents k, k + n, … by position,
            as `lengthwise encode --devices`; in a new folder this process first codes the first `shard_docs`
            documents as its first shard, fitting the codec on them as one process does, then every process codes
            the rest with it.
        runner, address, workers: ``"local"`` (this process, or one per entry of `devices`) or ``"ray"``: Ray
            Data actors (`address`: a cluster's; `workers`: actors) code the shards, as `lengthwise encode --runner
            ray` embeds windows (the first shard written here first, as for `devices`; the same ``.npy`` shards).
        show_progress: Progress on stderr (tqdm's bar on a terminal, plain lines in a log file).

    Returns:
        The number of documents encoded by this call.
    """
    from lengthwise.core.models import is_multi_vector_folder, resolve_model_path
    from lengthwise.core.precision import resolve_precision
    from lengthwise.longdoc.storage.encode import _check_runner
    from lengthwise.longdoc.storage.store import EmbeddingStore, corpus_digests

    if codec != TOKEN_CODEC:
        parse_codec(codec)
    for name, value in (("shard_docs", shard_docs), ("batch_size", batch_size), ("threads", threads)):
        if value is not None and value < 1:
            raise SettingError(name, value, "must be ≥ 1")
    if not devices:
        raise SettingError("devices", list(devices), "name at least one device, e.g. cpu or cuda:0,cuda:1")
    _check_runner(runner, devices, workers, address)
    path, folder = corpus_file(Path(data)), Path(out)
    digests = corpus_digests(path)
    if not digests:
        raise SettingError("data", str(path), "holds no documents; pass a corpus.jsonl with one _id and text per line")
    precision = resolve_precision(precision, *devices).value
    if colbert is None:
        colbert = is_multi_vector_folder(resolve_model_path(model))
    settings = {"kind": "tokens", "model": str(model), "data": str(path.resolve()), "codec": codec,
                "window": window, "overlap": overlap, "precision": precision, "colbert": colbert}  # fmt: skip
    store = EmbeddingStore(folder, settings)  # checks the folder (settings, a stranger's files) before any compute
    job = {"model": str(model), "colbert": colbert, "codec": codec, "window": window, "overlap": overlap,
           "shard_docs": shard_docs, "batch_size": batch_size, "threads": threads, "precision": precision,
           "settings": settings, "count": len(devices), "show_progress": show_progress}  # fmt: skip
    if runner == "ray":
        fingerprint, first = _first_shard(load_model, None, path, folder, job)
        written = first + _on_ray(load_model, path, store, job, address, workers, digests, on_note)
    elif len(devices) == 1:
        written, fingerprint = _token_worker(load_model, devices[0], path, folder, {**job, "index": 0}, on_note)
    else:
        fingerprint, first = _first_shard(load_model, devices[0], path, folder, job)
        for line in store.repair(digests)[1]:
            if on_note is not None:
                on_note(line)
        import multiprocessing

        with multiprocessing.get_context("spawn").Pool(len(devices)) as pool:
            args = [(load_model, device, path, folder, {**job, "index": k}) for k, device in enumerate(devices)]
            written = first + sum(found for found, _ in pool.starmap(_token_worker, args))
            pool.close()  # the workers exit on their own (see `lengthwise.longdoc.storage.encode`)
            pool.join()
    _record_model(folder, fingerprint)
    return written


def _on_ray(
    load_model: ModelLoader | None,
    path: Path,
    store: Any,
    job: dict[str, Any],
    address: str | None,
    workers: int | None,
    digests: dict[str, int],
    on_note: Callable[[str], None] | None,
) -> int:
    """The token shards coded by Ray Data actors (`lengthwise.longdoc.storage._raydata.encode_on_ray`)."""
    from lengthwise.core.models import load_plain_model
    from lengthwise.core.progress import progress_interval, progress_mode
    from lengthwise.longdoc.storage._raydata import encode_on_ray

    ray_job = {"model": job["model"], "precision": job["precision"], "threads": job["threads"],
               "shard_docs": job["shard_docs"], "batch_size": job["batch_size"], "parquet": False,
               "interval": progress_interval(), "tokens": job, "encoder": _actor_encoder}  # fmt: skip
    return encode_on_ray(load_model or load_plain_model, path, store, None, ray_job, address=address,
                         workers=workers, progress=progress_mode(job["show_progress"], processes=1) or None,
                         on_note=on_note, corpus=digests)  # fmt: skip


def _actor_encoder(
    load_model: ModelLoader | None, device: str | None, job: dict[str, Any], folder: Path, start: Callable[[], None]
) -> TokenShardEncoder:
    """A Ray actor's token encoder (`lengthwise.longdoc.storage._raydata.ShardWriter`): the model on `device`,
    coding with the codec `folder` holds."""
    return _shard_encoder(_token_model(load_model, device, job), folder, job, start)


def _token_model(load_model: ModelLoader | None, device: str | None, job: dict[str, Any]) -> Any:
    """The model a token job reads with, on `device` (a ColBERT through `load_token_model`)."""
    from lengthwise.core.models import load_plain_model, load_token_model

    if job["threads"]:
        import torch

        torch.set_num_threads(job["threads"])
    if job["colbert"]:
        return load_token_model(job["model"], colbert=True, device=device, precision=job["precision"])
    return (load_model or load_plain_model)(job["model"], device=device, precision=job["precision"])


def _shard_encoder(loaded: Any, folder: Path, job: dict[str, Any], start: Callable[[], None]) -> TokenShardEncoder:
    from lengthwise.longdoc.token_vectors import iter_token_vectors

    def read(texts: Sequence[str]) -> Iterator[TokenVectors]:
        return iter_token_vectors(loaded, texts, window=job["window"], overlap=job["overlap"],
                                  batch_size=job["batch_size"])  # fmt: skip

    return TokenShardEncoder(read, job["codec"], folder, start)


def _first_shard(
    load_model: ModelLoader | None, device: str | None, path: Path, folder: Path, job: dict[str, Any]
) -> tuple[dict[str, Any], int]:
    """Before several processes start: in a new folder, the first `shard_docs` documents coded and written as its
    first shard, the codec fitted on their tokens and saved (as one process does it; the processes then skip those
    documents); and the model's fingerprint. (fingerprint, documents written); the model is let go before they
    start."""
    from itertools import islice

    from lengthwise.core.corpus import corpus_rows, text_digest
    from lengthwise.core.models import model_fingerprint
    from lengthwise.longdoc.storage.store import EmbeddingStore

    loaded = _token_model(load_model, device, job)
    fingerprint, written = model_fingerprint(loaded, job["model"]), 0
    if read_codec(folder) is None:
        store = EmbeddingStore(folder, job["settings"])
        ids, texts = zip(*islice(corpus_rows(path), job["shard_docs"]), strict=True)
        encoder = _shard_encoder(loaded, folder, job, store.start)
        codes = encoder.encode_documents_multi(list(texts))  # fits and saves the codec first
        store.write("w0-", list(ids), codes, extra=encoder.shard_extra(), digests=[text_digest(t) for t in texts])
        written = len(ids)
    del loaded
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()  # the workers' device memory
    return fingerprint, written


def _token_worker(
    load_model: ModelLoader | None,
    device: str | None,
    path: Path,
    folder: Path,
    job: dict[str, Any],
    on_note: Callable[[str], None] | None = None,
) -> tuple[int, dict[str, Any]]:
    """Encode one process's share of the documents (``k, k + n, …``; all of them for one process): (documents
    encoded, the model's fingerprint)."""
    from transformers.utils import logging as hf_logging

    from lengthwise.core.models import model_fingerprint
    from lengthwise.core.progress import progress_interval, progress_mode
    from lengthwise.longdoc.storage.store import EmbeddingStore, encode_corpus

    if job["count"] > 1:
        hf_logging.disable_progress_bar()
    loaded = _token_model(load_model, device, job)
    store = EmbeddingStore(folder, job["settings"])
    encoder = _shard_encoder(loaded, folder, job, store.start)
    shown = progress_mode(job["show_progress"], processes=job["count"]) or False
    written = encode_corpus(encoder, path, store, shard_docs=job["shard_docs"], batch_size=job["batch_size"],
                            worker=(job["index"], job["count"]), show_progress=shown, repair=job["count"] == 1,
                            on_note=on_note, progress_interval=progress_interval())  # fmt: skip
    return written, model_fingerprint(loaded, job["model"])


def _record_model(folder: Path, fingerprint: dict[str, Any]) -> None:
    """The model's fingerprint beside the shards (``model.json``): a search checks its query model against it."""
    from lengthwise.core.results import write_json_atomic

    write_json_atomic(folder / "model.json", fingerprint)
