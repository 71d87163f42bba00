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

        spans, self._spans = self._spans, None
        assert spans is not None, "encode_documents_multi first"
        buffer = io.BytesIO()
        np.save(buffer, spans, allow_pickle=False)
        data = buffer.getvalue()
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
        shard_docs, batch_size, threads, precision: Documents per shard, windows per forward pass, torch threads,
            the model's precision (recorded: queries are read at it).
        show_progress: Progress on stderr (tqdm's bar on a terminal, plain lines in a log file).

    Returns:
        The number of documents encoded by this call.
    """
    from lengthwise.core.models import (
        is_multi_vector_folder,
        load_plain_model,
        load_token_model,
        model_fingerprint,
        resolve_model_path,
    )
    from lengthwise.core.precision import resolve_precision
    from lengthwise.core.progress import progress_interval, progress_mode
    from lengthwise.longdoc.storage.store import EmbeddingStore, corpus_digests, encode_corpus
    from lengthwise.longdoc.token_vectors import iter_token_vectors

    if codec != TOKEN_CODEC:
        parse_codec(codec)
    for name, value in (("shard_docs", shard_docs), ("batch_size", batch_size), ("threads", threads)):
        if value is not None and value < 1:
            raise SettingError(name, value, "must be ≥ 1")
    path, folder = corpus_file(Path(data)), Path(out)
    digests = corpus_digests(path)
    if not digests:
        raise SettingError("data", str(path), "holds no documents; pass a corpus.jsonl with one _id and text per line")
    precision = resolve_precision(precision, None).value
    if colbert is None:
        colbert = is_multi_vector_folder(resolve_model_path(model))
    settings = {"kind": "tokens", "model": str(model), "data": str(path.resolve()), "codec": codec,
                "window": window, "overlap": overlap, "precision": precision, "colbert": colbert}  # fmt: skip
    store = EmbeddingStore(folder, settings)  # checks the folder (settings, a stranger's files) before any compute
    if threads:
        import torch

        torch.set_num_threads(threads)
    if colbert:
        loaded = load_token_model(str(model), colbert=True, precision=precision)
    else:
        loaded = (load_model or load_plain_model)(str(model), precision=precision)
    fingerprint = model_fingerprint(loaded, model)

    def read(texts: Sequence[str]) -> Iterator[TokenVectors]:
        return iter_token_vectors(loaded, texts, window=window, overlap=overlap, batch_size=batch_size)

    encoder = TokenShardEncoder(read, codec, folder, store.start)
    written = encode_corpus(encoder, path, store, shard_docs=shard_docs, batch_size=batch_size,
                            show_progress=progress_mode(show_progress, processes=1) or False, on_note=on_note,
                            progress_interval=progress_interval())  # fmt: skip
    _record_model(folder, fingerprint)
    return written


def _record_model(folder: Path, fingerprint: dict[str, Any]) -> None:
    """The model's fingerprint beside the shards (``model.json``): a search checks its query model against it."""
    from lengthwise.core.results import write_json_atomic

    write_json_atomic(folder / "model.json", fingerprint)
