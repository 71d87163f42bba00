"""`lengthwise encode --runner ray`: the same `LongEncoder` as a Ray Data actor pool, the same shards (and Parquet).

The driver reads the corpus once (`check_corpus`, the same one-line errors as the local path), repairs the folder
(`EmbeddingStore.repair`) and plans the shards: the documents not yet embedded, in corpus order, ``shard_docs`` per
shard, shard j named ``w0-{base + j:05d}`` (`base`: past every shard already there). Ray's own reader
(`ray.data.read_json` / `ray.data.read_text`) brings the texts to the cluster, zipped with the plan row by row
(order kept; a digest of each text guards the pairing), a sort on the shard number gathers each shard's documents,
and `map_groups` (a `map_batches` over the sorted blocks) hands each shard whole to one actor of a fixed pool
holding the loaded model: one actor per GPU (``num_gpus=1``), else CPU actors with the torch threads split.

An actor writes its shard's ``.npy`` / ``.offsets.npy`` / ``.ids.txt``, its Parquet part (``job["parquet"]``) and,
last, its record, all atomically and under the planned name: an actor killed mid-shard leaves no record (the rerun
re-embeds those documents), and a retried shard rewrites the same files, so no document is lost or written twice.

`ray` is imported only here, inside the functions (the ``lengthwise[ray]`` extra).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from lengthwise.core.errors import SettingError
from lengthwise.longdoc.config import LongDocConfig, LongDocError
from lengthwise.longdoc.storage.store import EmbeddingStore, _counter, corpus_rows, text_digest

if TYPE_CHECKING:
    from lengthwise.core.progress import ProgressMode

__all__ = ["check_address", "encode_on_ray", "require_ray"]

PREFIX = "w0-"
# the plan's columns, named so as never to clash with a corpus column
_ID, _POS, _SHARD, _DIGEST = "__lw_id", "__lw_pos", "__lw_shard", "__lw_digest"
MISALIGNED = (
    "Ray's reader gives another text than lengthwise reads from this file (a line break other than \\n, such as "
    "\\u2028 or \\x85, inside a line of a .txt, or a JSON title or text that is not a string?); encode it with the "
    "local runner"
)


def require_ray() -> Any:
    """The `ray` module with Ray Data, or a `MissingExtra` (a `SettingError`) on ``runner`` naming the extra."""
    from lengthwise.core._optional import require

    return require("ray", "ray.data", extra="ray", field="runner", value="ray")


def check_address(address: str, timeout: float = 5.0) -> None:
    """A `SettingError` on ``address`` unless something answers at its host:port within `timeout` seconds: Ray's
    own connect retries for minutes before it says anything. ``auto`` and other addresses without a port are left
    to Ray."""
    target = address.removeprefix("ray://")
    host, _, port = target.rpartition(":")
    if not host:
        return
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise SettingError("address", address, "not host:port; give the Ray head's address, e.g. 10.0.0.5:6379")
    import socket

    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            pass
    except OSError as error:
        timed_out = isinstance(error, TimeoutError)
        problem = f"no answer in {timeout:g} s" if timed_out else error.strerror or str(error) or type(error).__name__
        raise SettingError(
            "address",
            address,
            f"no Ray cluster answers there ({problem}); start one with `ray start --head`, or leave the address "
            "out for a local one",
        ) from None


digest = text_digest  # the plan carries each text's digest; the actor checks the text it got, and records it


def _plan(data: Path, done: set[str], shard_docs: int) -> tuple[Any, int]:
    """The plan table (id, shard or -1 when already done, digest) of every document in corpus order, and the
    number of shards to write."""
    import pyarrow as pa

    ids: list[str] = []
    shards: list[int] = []
    digests: list[int] = []
    pending = 0
    for doc_id, text in corpus_rows(data):
        ids.append(doc_id)
        digests.append(digest(text))
        if doc_id in done:
            shards.append(-1)
        else:
            shards.append(pending // shard_docs)
            pending += 1
    table = pa.table({_ID: pa.array(ids, pa.string()), _POS: pa.array(np.arange(len(ids), dtype=np.int64)),
                      _SHARD: pa.array(shards, pa.int64()), _DIGEST: pa.array(digests, pa.int64())})  # fmt: skip
    return table, -(-pending // shard_docs)


def _texts(batch: Any) -> dict[str, Any]:
    """One block of corpus rows zipped with the plan → the pending documents: id, shard, digest, text (the text as
    `corpus_rows` makes it: ``title text`` for JSONL, the stripped line for .txt)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    batch = batch.filter(pc.greater_equal(batch.column(_SHARD), 0))
    texts = [str(t).lstrip("\ufeff").strip() for t in batch.column("text").to_pylist()]
    if "title" in batch.column_names:
        titles = [str(t or "").strip() for t in batch.column("title").to_pylist()]
        texts = [f"{title} {text}" if title else text for title, text in zip(titles, texts, strict=True)]
    kept = {name: batch.column(name) for name in (_ID, _POS, _SHARD, _DIGEST)}
    return pa.table({**kept, "text": pa.array(texts, pa.string())})


class ShardWriter:
    """The Ray Data actor: loads the model once, then embeds and writes each shard it is handed (see module)."""

    def __init__(self, job: dict[str, Any]) -> None:
        from transformers.utils import logging as hf_logging

        from lengthwise.longdoc.encoder import LongEncoder

        hf_logging.disable_progress_bar()
        self.store = EmbeddingStore(job["out"], job["settings"])
        self.job = job
        if job.get("tokens") is not None:  # `encode-tokens --runner ray`: job["encoder"] makes the token encoder
            tokens = {**job["tokens"], "threads": job["threads"]}
            self.encoder: Any = job["encoder"](job["loader"], job["device"], tokens, Path(job["out"]), self.store.start)
            return
        if job["threads"]:
            import torch

            torch.set_num_threads(job["threads"])
        model = job["loader"](job["model"], device=job["device"], precision=job["precision"])
        self.encoder = LongEncoder(model, job["config"])

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        from lengthwise.longdoc.storage._parquet import shard_part

        order = np.argsort(batch[_POS], kind="stable")  # corpus order within the shard, whatever the sort did
        ids = [str(batch[_ID][i]) for i in order]
        texts = [str(batch["text"][i]) for i in order]
        for i, text in zip(order, texts, strict=True):
            if digest(text) != int(batch[_DIGEST][i]):
                raise LongDocError(None, None, f"{self.job['data']}: document {batch[_ID][i]!r}: {MISALIGNED}")
        shard = int(batch[_SHARD][0])
        embeddings = self._embed(texts, f"{PREFIX}{self.job['base'] + shard:05d}")
        if self.job.get("tokens") is not None:
            part = self.encoder.shard_extra()  # the tokens' spans
        else:
            part = shard_part(self.encoder, ids, texts, embeddings) if self.job["parquet"] else None
        self.store.write(PREFIX, ids, embeddings, number=self.job["base"] + shard, extra=part,
                         digests=[int(batch[_DIGEST][i]) for i in order])  # fmt: skip
        return {"shard": np.asarray([shard]), "docs": np.asarray([len(ids)])}

    def _embed(self, texts: list[str], name: str) -> Any:
        """The shard's vectors; off a terminal, its progress as lines on this actor's stderr (Ray shows them on the
        driver's, after the actor's name)."""
        from lengthwise.core.progress import progress_bar

        size, lines = self.job["batch_size"], self.job.get("progress") == "lines"
        with progress_bar(f"encode shard {name}", len(texts), "lines" if lines else None,
                          interval=self.job.get("interval")) as bar:  # fmt: skip
            embedded = _counter(bar, self.encoder)
            if self.encoder.is_multi_vector:
                return self.encoder.encode_documents_multi(texts, batch_size=size, on_document=embedded)
            return self.encoder.encode_documents(texts, batch_size=size, on_document=embedded)


@contextmanager
def _data_context(show_progress: bool) -> Iterator[None]:
    """Ray Data settings for one run, restored afterwards: order kept (the zip pairs rows by position), the
    task-based sort shuffle (no aggregator actors competing with the encoder actors for CPUs), progress bars."""
    import logging
    import warnings

    import ray.data
    from ray.data.context import ShuffleStrategy

    context = ray.data.DataContext.get_current()
    saved = (context.execution_options.preserve_order, context.shuffle_strategy, context.enable_progress_bars)
    context.execution_options.preserve_order = True
    context.shuffle_strategy = ShuffleStrategy.SORT_SHUFFLE_PULL_BASED
    context.enable_progress_bars = show_progress
    logger = logging.getLogger("ray.data")
    level = logger.level
    logger.setLevel(logging.INFO if show_progress else logging.CRITICAL)  # errors come back raised, in one line
    try:
        with warnings.catch_warnings():  # `Dataset.zip` is deprecated from Ray 2.50; the digests check the pairing
            warnings.filterwarnings("ignore", message=r"(?s).*Dataset\.zip. is deprecated")
            yield
    finally:
        context.execution_options.preserve_order, context.shuffle_strategy, context.enable_progress_bars = saved
        logger.setLevel(level)


def _connect(ray: Any, address: str | None, *, logs: bool = False) -> bool:
    """Join the Ray cluster at `address` (None: the running one, else a new local one); True when this call
    started Ray (and so shuts it down). `logs`: the actors' stderr is shown on this process's (their progress
    lines)."""
    if ray.is_initialized():
        return False
    try:
        ray.init(address=address, include_dashboard=False, log_to_driver=logs, logging_level="ERROR")
    except (ConnectionError, RuntimeError, ValueError) as err:
        problem = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise SettingError(
            "address",
            address,
            f"no Ray cluster there ({problem}); start one with `ray start --head`, or leave "
            "the address out for a local one",
        ) from None
    return True


def _pool(ray: Any, workers: int | None, threads: int | None, shards: int) -> dict[str, Any]:
    """The actor pool: one actor per GPU (``num_gpus=1``), else `workers` CPU actors (default: one per 4 CPUs)
    with the CPUs split into torch threads. The actors reserve at most all CPUs but one, so that Ray Data's read
    and sort tasks (one CPU each) always find one: a pool holding every CPU would wait for them forever. Never
    more actors than shards."""
    resources = ray.cluster_resources()
    gpus, cpus = int(resources.get("GPU", 0)), max(1, int(resources.get("CPU", 1)))
    if workers is not None and workers < 1:
        raise SettingError("workers", workers, "must be ≥ 1")
    if gpus:
        size = min(workers or gpus, gpus, shards)
        return {"size": size, "num_gpus": 1, "num_cpus": min(1, (cpus - 1) / size), "device": "cuda",
                "threads": threads}  # fmt: skip
    size = min(workers or max(1, cpus // 4), shards)
    per_actor = threads or max(1, cpus // size)
    reserved = min(per_actor, (cpus - 1) / size)
    return {"size": size, "num_gpus": 0, "num_cpus": reserved, "device": "cpu", "threads": per_actor}


def _count(written: Any, plan: Any, progress: ProgressMode | None, interval: float | None) -> int:
    """The documents the actors embedded, summed as their shards come back; with ``"lines"``, a line for the
    whole corpus at most every `interval` seconds (the documents embedded before this run at the start)."""
    from lengthwise.core.progress import progress_bar

    total = plan.num_rows
    before = total - int(np.count_nonzero(plan.column(_SHARD).to_numpy() >= 0))
    mode: ProgressMode | None = "lines" if progress == "lines" else None  # a terminal: Ray Data draws its bars
    embedded = 0
    with progress_bar("encode", total, mode, initial=before, interval=interval) as bar:
        for row in written.iter_rows():
            embedded += int(row["docs"])
            bar.update(int(row["docs"]))  # a disabled bar counts nothing
    return embedded


def _cause(err: BaseException) -> BaseException | None:
    """A lengthwise error (`SettingError`, e.g. a `LongDocError`) inside a Ray error, if any."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [err]
    while todo:
        current = todo.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, SettingError) and not type(current).__module__.startswith("ray"):
            return current  # the error itself, not Ray's wrapper class that also derives from it
        todo += [current.__cause__, current.__context__, getattr(current, "cause", None)]
    return None


def _read(ray: Any, data: Path) -> Any:
    """The corpus as a Ray dataset, with Ray's own reader: JSON lines (plain or .gz), or text, one per line."""
    if data.name.endswith((".jsonl", ".jsonl.gz")):
        return ray.data.read_json(str(data.resolve()))
    return ray.data.read_text(str(data.resolve()), drop_empty_lines=False)


def encode_on_ray(
    loader: Callable[..., Any],
    data: Path,
    store: EmbeddingStore,
    config: LongDocConfig | None,
    job: dict[str, Any],
    *,
    address: str | None = None,
    workers: int | None = None,
    progress: ProgressMode | None = None,
    on_note: Callable[[str], None] | None = None,
    corpus: dict[str, int] | None = None,
) -> int:
    """Embed the documents of `data` not yet in `store` on a Ray cluster (see the module docstring).

    `loader(model, device=, precision=)` loads the model in each actor; `job` holds ``model``, ``precision``,
    ``threads``, ``shard_docs``, ``batch_size`` and ``parquet`` (write the window rows); with ``tokens`` (a token
    encode's job, `lengthwise.longdoc.storage.tokens`; `config` None) each actor codes every token with the codec
    the folder holds. The corpus has been
    checked (`corpus_digests`: `corpus`, id → text digest; a shard holding a document whose text changed is
    embedded again). `progress`: Ray Data's own bars (``"bar"``), or each actor's lines for its shard
    (``"lines"``, `lengthwise.core.progress.ProgressLines`, every ``job["interval"]`` seconds). Returns the number
    of documents embedded now.
    """
    ray = require_ray()
    done, removed = store.repair(corpus)
    for line in removed:
        if on_note is not None:
            on_note(line)
    plan, shards = _plan(data, done, job["shard_docs"])
    if shards == 0:
        return 0
    started = _connect(ray, address, logs=progress == "lines")
    try:
        pool = _pool(ray, workers, job["threads"], shards)
        actor_job = {**job, "loader": loader, "config": config, "out": str(store.folder.resolve()),
                     "settings": store.settings, "data": str(data), "base": store.next_index(PREFIX),
                     "device": pool["device"], "threads": pool["threads"], "progress": progress}  # fmt: skip
        with _data_context(progress == "bar"):
            rows = _read(ray, data).zip(ray.data.from_arrow(plan)).map_batches(_texts, batch_format="pyarrow")
            written = rows.groupby(_SHARD).map_groups(
                ShardWriter,
                compute=ray.data.ActorPoolStrategy(size=pool["size"]),
                fn_constructor_args=(actor_job,),
                batch_format="numpy",
                num_gpus=pool["num_gpus"] or None,
                num_cpus=pool["num_cpus"],
            )
            return _count(written, plan, progress, job["interval"])
    except Exception as err:
        cause = _cause(err)
        if cause is not None:
            raise cause from None
        if "zip" in str(err).lower() and "row" in str(err).lower():  # the reader found another number of rows
            raise LongDocError(None, None, f"{data}: {MISALIGNED}") from None
        raise
    finally:
        if started:
            ray.shutdown()
