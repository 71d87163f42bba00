"""`LongIndex`: the one index over a corpus `lengthwise encode` wrote: an approximate-nearest-neighbour index of its
window vectors, searched by document, with the documents' text beside it for lexical and hybrid search.

The length-specific part is ours; the engines are not. Candidate windows come from FAISS (IVF over 8-bit scalar
quantized vectors, or IVF over packed sign bits for ``ubinary``) or USearch (HNSW over i8 or b1 vectors), one adapter
each in `lengthwise.longdoc.search._engines`. They are rescored *exactly*, from the fp32 vectors kept memory-mapped in
the index folder (never loaded whole), in two steps: the candidate windows themselves rank their documents, then the
best documents are scored on every window with `lengthwise.core.encoder.multi_vector_scores` (max, or the mean of the
best `top_k` windows) — so a document returned has the same score as in an exact scan, and only those few documents are
read whole. This follows the rescoring scheme of sentence-transformers' ``semantic_search_faiss`` /
``semantic_search_usearch`` (oversample candidates on quantized vectors, rescore them), at document level.

The engine holds each *distinct* window vector once (content-addressed by its exact bytes): a corpus whose documents
share runs of identical text (templates, disclaimers, the filler of a passkey test) has many windows with one
vector, and an HNSW graph over thousands of exact duplicates falls into islands that a search never leaves (issue
33.0: Acc@1 50.4 through the index against 84.4 exact). A candidate vector stands for every window that holds it,
so every document holding it becomes a candidate (up to `EXPANDED_AT_MOST` windows per query).

Folder layout: ``index.json`` (settings, counts, engine, and the generation served) and one folder per generation,
``generation-{id}/``, holding ``vectors.npy`` (W, D) fp32, ``offsets.npy`` (n + 1,) window offsets per document,
``ids.txt`` (document ids, one JSON string per line), ``members.npy`` (W,) and ``member_starts.npy`` (U + 1,) (the
windows of each distinct vector, the engine's key), ``engine.faiss`` or ``engine.usearch`` and the lexical side,
``lexical/`` (`lengthwise.longdoc.search.lexical`). A build is written into a staging folder, so an interrupted build
leaves no half-written index; run again with the same inputs, it resumes from its last engine save
(`lengthwise.longdoc.search._staging`). The lexical side is built in the same staging folder after the dense side (a
rerun keeps a finished dense side and resumes the lexical build after its finished shards). The finished folder
becomes a new generation, served from the moment one rename puts its ``index.json`` in place; an open index reads
only from the generation it opened, which no build removes while it is open
(`lengthwise.longdoc.search._generations`). `LongIndex.search` queries either side or both fused
(`lengthwise.longdoc.search.hybrid`).

Text queries are embedded as the documents were: the model and long-document settings recorded in the index, the
model loaded by the `ModelLoader` given to `open` / `build` (`lengthwise.LongIndex` loads it as saved, by
`lengthwise.load_model`, so a TempScale saved with the model applies to queries as it did to the documents).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from lengthwise.core.encoder import MultiVectors, multi_vector_scores
from lengthwise.core.errors import SettingError, enum_member
from lengthwise.core.fusion import LEXICAL_GRANULARITY, TUNED_WEIGHTS
from lengthwise.core.parallel import each, search_pool
from lengthwise.core.scoring import WindowScoring
from lengthwise.longdoc.config import LongDocError
from lengthwise.longdoc.search._engines import CANDIDATES, ENGINES, Engine, Quantize, ivf_lists
from lengthwise.longdoc.search._generations import GENERATION, INDEX_FILE, Hold, hold, new_generation, publish, rebuilt
from lengthwise.longdoc.search._index_files import (
    FORMAT,
    MEMBERS,
    OLD_LAYOUT,
    REBUILD,
    STARTS,
    TEXT_SIDE,
    Progress,
    check_out,
    check_room,
    consistent_files,
    disk_needed,
    fill_engine,
    read_ids,
    read_members,
    read_settings,
    records_digest,
    stage_vectors,
)
from lengthwise.longdoc.search._staging import BUILD_STATE, record_plan, shard_layout, staging_folder
from lengthwise.longdoc.storage.store import TEXTS, read_manifest

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

    from lengthwise.core.models import ModelLoader
    from lengthwise.longdoc.search.hybrid import FusionSettings, Hit, Mode
    from lengthwise.longdoc.search.lexical import LexicalIndex

__all__ = ["Engine", "LongIndex", "Quantize"]

EXPANDED_AT_MOST = 1_000_000  # windows a query's candidate vectors may stand for (see `LongIndex._expanded`)
# what of the query model's fingerprint an index records and checks: the weights (their hash covers the precision's
# cast) and a TempScale set by hooks, which leaves the weights alone but changes every vector
QUERY_MODEL_KEYS = ("weights_sha256_16", "tempscale")
RESCORED, RESCORED_AT_LEAST = 10, 100  # documents scored on all their windows: per document asked for, at least


@dataclass(eq=False, repr=False)
class LongIndex:
    """Document search over the window vectors `lengthwise encode` wrote, on a real ANN engine, with the documents'
    text beside them (see the module docstring). Build with `build`, open with `open`, search with `search`.

    Example:
        >>> LongIndex.build("out/encoded", "out/index", quantize="int8")   # = lengthwise index build …
        >>> hits = LongIndex.open("out/index").search(["who wrote the report?"], k=10)
    """

    folder: Path
    settings: dict[str, Any]
    doc_ids: list[str]
    offsets: np.ndarray  # (n + 1,) window offsets of each document in `vectors`
    vectors: np.ndarray  # (W, D) fp32, memory-mapped
    engine: Any  # its keys are distinct-vector numbers
    members: np.ndarray | None = None  # (W,) window rows grouped by distinct vector (None: one per window)
    starts: np.ndarray | None = None  # (U + 1,) where each distinct vector's rows start in `members`
    model: SentenceTransformer | None = None  # the query model (loaded on the first text query when None)
    load_model: ModelLoader | None = field(default=None)  # how it is loaded (None: the hall's plain load)
    files: Path | None = None  # the folder of the generation opened (None: `folder` itself, a build's staging)
    hold: Hold | None = None  # the reader's hold on that generation: no build removes it while the index is open

    def __post_init__(self) -> None:
        if self.members is None or self.starts is None:
            self.members = np.arange(len(self.vectors), dtype=np.int64)
            self.starts = np.arange(len(self.vectors) + 1, dtype=np.int64)
        if self.model is not None:
            self._check_model(self.model)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.folder)!r})"

    @classmethod
    def check_build(
        cls,
        encoded: str | os.PathLike[str],
        out: str | os.PathLike[str],
        *,
        quantize: Quantize | str = Quantize.INT8,
        engine: Engine | str = Engine.USEARCH,
    ) -> dict[str, Any]:
        """Check a build's inputs before anything is loaded or written (`build` and `build_windows` call it before
        the model loads): the settings, the encoded folder's manifest, and `out`. Returns the manifest.

        Raises:
            SettingError: An unknown `quantize` or `engine`; an `out` that is not a folder path, cannot be written, is
                a symbolic link, holds files the index did not write, holds `encoded`, or holds the working directory.
            LongDocError: `encoded` has no readable ``manifest.json``.
        """
        enum_member(Quantize, "quantize", quantize), enum_member(Engine, "engine", engine)
        check_out(Path(encoded), Path(out))
        return read_manifest(Path(encoded))

    @classmethod
    def build(
        cls,
        encoded: str | os.PathLike[str],
        out: str | os.PathLike[str],
        *,
        quantize: Quantize | str = Quantize.INT8,
        engine: Engine | str = Engine.USEARCH,
        text: str | os.PathLike[str] | None = None,
        granularity: str = LEXICAL_GRANULARITY,
        on_progress: Progress = None,
        on_note: Callable[[str], None] | None = None,
        load_model: ModelLoader | None = None,
    ) -> LongIndex:
        """`lengthwise index build`: index `encoded` into `out`, recording the query model's fingerprint, and the
        documents' text beside it for lexical and hybrid search (`lengthwise.longdoc.search.lexical`).

        Both sides are built in one staging folder beside `out` (the lexical side's own staging inside it) and
        become one new generation of `out` together, so an earlier index at `out` is served whole until the new one
        is, and an index opened before keeps answering from its own generation. Interrupted
        (Ctrl-C), the staging stays: the same build run again keeps a finished dense side (or resumes it from its
        last engine save) and resumes the lexical side after its finished shards.

        Args:
            encoded: A folder written by `lengthwise encode`.
            out: The index folder.
            quantize, engine: The dense side's candidate vectors and ANN engine (`build_windows`).
            text: The corpus the folder was encoded from (default: the path `encode` recorded); checked against
                the encoded ids and text digests before anything is built. Without it, and with the recorded file
                gone, the index is dense only (`on_note` says so).
            granularity: What BM25 ranks: ``window`` (the default: the dense windows, a document scoring its best)
                or ``document`` (whole documents).
            on_progress: Called with (windows added, windows) as the engine is filled, then with (documents
                tokenized, documents) as the text is indexed.
            on_note: Told, in one line, when the index is built without text.
            load_model: How the recorded model is loaded (`open`).
        """
        from lengthwise.core.models import model_fingerprint
        from lengthwise.longdoc.search.lexical import check_corpus_digest

        made = cls.check_build(encoded, out, quantize=quantize, engine=engine)["settings"]  # before the model loads
        corpus = check_corpus_digest(text, made.get("data"), made.get(TEXTS), granularity, out=out)  # no model yet
        model = _loader(load_model)(made["model"], precision=made.get("precision", "fp32"))
        fingerprint = model_fingerprint(model, made["model"])
        name = str(Path(made["model"]).resolve()) if Path(made["model"]).is_dir() else made["model"]  # any cwd
        recorded = {"name": name, **{key: fingerprint[key] for key in QUERY_MODEL_KEYS}}
        extra = {"model": recorded,
                 "encode_settings": {**made, "model": name}}  # fmt: skip
        staging = cls._stage_windows(encoded, out, quantize=quantize, engine=engine, extra=extra,
                                     on_progress=on_progress)  # fmt: skip
        try:
            if corpus is not None:
                staged = cls._open_staged(staging)
                staged.model = model
                staged._build_text(corpus, made, granularity, on_progress)
                del staged  # its memory maps, closed before the rename
            cls._swap_in(staging, Path(out), text=corpus is not None)
        except KeyboardInterrupt:
            raise  # both sides' staging stays: the same build, run again, resumes
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        if corpus is None and on_note is not None:
            on_note(f"built without text ({made.get('data')} is gone): dense search only; pass the corpus as text "
                    "to search it lexically")  # fmt: skip
        index = cls.open(out)
        index.model, index.load_model = model, load_model
        return index

    def _build_text(self, corpus: Path, made: dict[str, Any], granularity: str, on_progress: Progress) -> None:
        from lengthwise.longdoc.config import LongDocConfig
        from lengthwise.longdoc.encoder import LongEncoder
        from lengthwise.longdoc.search.lexical import build_text_side

        assert self.model is not None
        encoder = LongEncoder(self.model, LongDocConfig.from_dict(made["long"]))
        build_text_side(self, encoder, corpus, recorded=made.get(TEXTS), granularity=granularity,
                        on_progress=on_progress)  # fmt: skip

    @classmethod
    def build_windows(
        cls,
        encoded: str | os.PathLike[str],
        out: str | os.PathLike[str],
        *,
        quantize: Quantize | str = Quantize.INT8,
        engine: Engine | str = Engine.USEARCH,
        extra: dict[str, Any] | None = None,
        on_progress: Progress = None,
    ) -> LongIndex:
        """Index the window vectors of the folder `lengthwise encode` wrote (`encoded`) into `out` (new, or an earlier
        index: replaced): the dense side only, no model loaded, no text indexed (`build` does both around this).

        Args:
            encoded: The shard folder; every shard is checked (size and sha256) before anything is indexed.
            out: The index folder; built in a staging folder beside it, opened there, and only then swapped into
                place (an earlier index stays until the new one opens). Checked first (`check_build`).
            quantize: ``int8`` (default), ``ubinary`` or ``none`` for the candidate stage.
            engine: ``usearch`` (HNSW; default: it found ≥ 0.99 of the exact top-100 documents on SciFact at its
                default search expansion) or ``faiss`` (IVF; needs about a quarter of its lists probed for that).
            extra: More settings to record in ``index.json`` (the query model's fingerprint, …).
            on_progress: Called with (distinct vectors added, distinct vectors) as the engine is filled.
        """
        staging = cls._stage_windows(encoded, out, quantize=quantize, engine=engine, extra=extra,
                                     on_progress=on_progress)  # fmt: skip
        try:
            cls._swap_in(staging, Path(out), text=False)
        except KeyboardInterrupt:
            raise
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return cls.open(out)

    @classmethod
    def _open_staged(cls, staging: Path) -> LongIndex:
        """The index complete in the staging folder `staging` (not served yet), opened there."""
        try:
            settings = json.loads((staging / INDEX_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise LongDocError(None, None, f"{staging}: unreadable index ({error}); {REBUILD}") from None
        return cls._open_files(staging, staging, settings, None)

    @classmethod
    def _stage_windows(
        cls,
        encoded: str | os.PathLike[str],
        out: str | os.PathLike[str],
        *,
        quantize: Quantize | str,
        engine: Engine | str,
        extra: dict[str, Any] | None,
        on_progress: Progress,
    ) -> Path:
        """The dense side of a build of `out`, complete in its staging folder (returned): its vectors, ids, offsets
        and engine, and ``index.json``, written once the engine is complete. A staging folder of the same build
        (`staging_folder`) is resumed: from its last engine save, or not at all once its ``index.json`` is there."""
        manifest = cls.check_build(encoded, out, quantize=quantize, engine=engine)
        quantize, engine = Quantize(quantize), Engine(engine)
        encoded, out = Path(encoded), Path(out)
        ids, counts, dim, files = shard_layout(encoded)  # checks every shard; a damaged one names its file
        windows = int(counts.sum())
        out.parent.mkdir(parents=True, exist_ok=True)
        plan = {"quantize": quantize.value, "engine": engine.value, "windows": windows, "dim": dim,
                "encoded": str(encoded.resolve()), "ids_sha256": hashlib.sha256(json.dumps(ids).encode()).hexdigest(),
                "shards_sha256": records_digest(files)}  # fmt: skip
        staging, resumed = staging_folder(out, plan)
        check_room(out, disk_needed(windows, dim, quantize, resumed), windows)
        try:
            if resumed:
                vectors = np.load(staging / "vectors.npy", mmap_mode="r", allow_pickle=False)
            else:
                vectors = stage_vectors(staging, files, counts, ids, dim)
                record_plan(staging, plan)
            members, starts = np.load(staging / MEMBERS, mmap_mode="r"), np.load(staging / STARTS)
            if not (staging / INDEX_FILE).is_file():  # the engine is not complete yet
                engine_file = staging / f"engine.{engine.value}"
                fill_engine(engine_file, engine, quantize, vectors, members[starts[:-1]], on_progress)
            del vectors, members  # the memory maps, closed before the rename
            nlist = ivf_lists(len(starts) - 1) if engine is Engine.FAISS else None
            settings = {"format": FORMAT, GENERATION: _staged_generation(staging), **plan, "documents": len(ids),
                        "distinct": len(starts) - 1, "nlist": nlist, "encode_settings": manifest["settings"],
                        **(extra or {})}  # fmt: skip
            part = staging / f"{INDEX_FILE}.part"
            part.write_text(json.dumps(settings, indent=1), encoding="utf-8")
            os.replace(part, staging / INDEX_FILE)  # the engine is complete: a rerun of this build keeps it
        except KeyboardInterrupt:
            raise  # the staging folder stays: the same build, run again, resumes from it
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return staging

    @classmethod
    def _swap_in(cls, staging: Path, out: Path, *, text: bool) -> None:
        """Serve the finished build in `staging` from `out` as its new generation, once it opens there; without
        `text`, whatever a stopped build of the text side left in the staging folder goes first."""
        if not text:
            for name in TEXT_SIDE:
                shutil.rmtree(staging / name, ignore_errors=True)
        (staging / BUILD_STATE).unlink()
        staged = cls._open_staged(staging)  # the new index must open before it replaces anything
        generation = staged.settings[GENERATION]
        del staged  # its memory maps, closed before the rename
        publish(staging, out, generation, OLD_LAYOUT)

    @classmethod
    def open(
        cls,
        folder: str | os.PathLike[str],
        *,
        model: SentenceTransformer | str | os.PathLike[str] | None = None,
        load_model: ModelLoader | None = None,
    ) -> LongIndex:
        """Open an index folder; the fp32 vectors are memory-mapped, the engine's file loaded (USearch: mapped).

        The index answers from the generation ``index.json`` names as it opens, its lexical side included (opened on
        first use), whatever builds of the same folder run after: no build removes a generation while an index
        holds it open. To serve a newer build, open the folder again.

        Args:
            folder: A folder written by `build` (``lengthwise index build``).
            model: The query model (default: loaded from the recorded name on the first text query): a loaded model,
                or a folder / package / hub id to load in its place (e.g. when the recorded path moved). It must be
                the one the index was built with, checked by its weight hash (`SettingError` otherwise).
            load_model: How the query model is loaded by name (`lengthwise.core.models.ModelLoader`; default
                the plain load; `lengthwise.load_model` re-applies what was saved beside the model).
        """
        folder = Path(folder)
        settings, files, held = hold(folder, read_settings)
        index = cls._open_files(folder, files, settings, load_model)
        index.hold = held
        if isinstance(model, (str, os.PathLike)):
            model = index._load({**settings["encode_settings"], "model": str(model)})
        if model is not None:
            index._check_model(model)
            index.model = model
        return index

    @property
    def replaced(self) -> bool:
        """Whether a later build of the folder serves another generation now than the one this index answers from
        (a long-lived process, such as a service, opens the folder again to serve it)."""
        try:
            return read_settings(Path(self.folder))[GENERATION] != self.settings.get(GENERATION)
        except LongDocError:
            return True

    @classmethod
    def _open_files(
        cls, folder: Path, files: Path, settings: dict[str, Any], load_model: ModelLoader | None
    ) -> LongIndex:
        """The index `folder` with `settings` (its ``index.json``), its files read from `files` (its generation)."""
        try:
            engine = Engine(settings["engine"])
            doc_ids = read_ids(files / "ids.txt")
            offsets = np.load(files / "offsets.npy", allow_pickle=False)
            vectors = np.load(files / "vectors.npy", mmap_mode="r", allow_pickle=False)
            members, starts = read_members(files)
            ann = ENGINES[engine].load(files / f"engine.{engine.value}", Quantize(settings["quantize"]))
        except (OSError, ValueError, KeyError, TypeError, RuntimeError) as error:
            raise LongDocError(None, None, f"{folder}: unreadable index ({error}); {REBUILD}") from None
        if not consistent_files(settings, doc_ids, offsets, vectors, members, starts, ann.count()):
            raise LongDocError(None, None, f"{folder}: the index files disagree in size or order; {REBUILD}")
        return cls(folder, settings, doc_ids, offsets, vectors, ann, members, starts, load_model=load_model,
                   files=files)  # fmt: skip

    def default_probes(self) -> int:
        """FAISS: a quarter of the IVF lists (at least 32); USearch: a search expansion of 64."""
        nlist = self.settings.get("nlist") or 0
        return max(32, nlist // 4) if self.settings["engine"] == Engine.FAISS.value else 64

    def default_candidates(self) -> int:
        """Candidate windows per query: 1,000, or 4,000 over sign bits (``ubinary``), whose candidates held 0.95
        (USearch) and 0.94 (FAISS) of the exact top-100 SciFact documents at 1,000, and 0.998 and 0.980 at 4,000."""
        return CANDIDATES[Quantize(self.settings["quantize"])]

    def _candidate_vectors(self, queries: np.ndarray, candidates: int, probes: int) -> list[np.ndarray]:
        """Per query, the keys of its `candidates` nearest distinct vectors in the engine, nearest first. `probes`
        beyond what the index has (FAISS: its lists; USearch: its vectors) are the same as all of them."""
        assert self.starts is not None and self.members is not None
        distinct = len(self.starts) - 1
        if candidates >= distinct:  # every distinct vector a candidate: ranked exactly, no approximate search to miss
            heads = np.asarray(self.vectors[self.members[self.starts[:-1]]], dtype=np.float32)
            return [np.argsort(-(heads @ query), kind="stable") for query in np.asarray(queries, dtype=np.float32)]
        probes = min(probes, self.settings.get("nlist") or distinct) if self.engine.count() else 1
        self.engine.set_probes(max(1, probes))
        found = self.engine.search(np.asarray(queries, dtype=np.float32), max(1, min(candidates, distinct)))
        return [row[row >= 0] for row in found]

    def _expanded(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(rows, key of each row): every window holding one of the distinct vectors `keys` (nearest first), in
        key order. A query stands for at most `EXPANDED_AT_MOST` windows: vectors are taken nearest first while
        they fit (the first always whole), so a document reached only through a farther vector shared by a very
        large number of windows is left out, as with fewer candidate windows."""
        assert self.members is not None and self.starts is not None
        firsts, counts = self.starts[keys], self.starts[keys + 1] - self.starts[keys]
        kept = max(1, int(np.searchsorted(np.cumsum(counts), EXPANDED_AT_MOST, side="right")))
        firsts, counts, keys = firsts[:kept], counts[:kept], keys[:kept]
        ends = np.cumsum(counts)
        positions = np.arange(int(ends[-1]) if len(ends) else 0) - np.repeat(ends - counts - firsts, counts)
        return np.asarray(self.members[positions], dtype=np.int64), np.repeat(keys, counts)

    def candidate_windows(self, queries: np.ndarray, candidates: int, probes: int) -> list[np.ndarray]:
        """Per query, the windows holding one of its `candidates` nearest distinct vectors in the engine
        (approximate), as sorted window numbers (a vector many windows share brings all of them)."""
        return [np.sort(self._expanded(keys)[0]) for keys in self._candidate_vectors(queries, candidates, probes)]

    def candidate_documents(self, queries: np.ndarray, candidates: int, probes: int) -> list[np.ndarray]:
        """Per query, the distinct documents of its candidate windows (`candidate_windows`)."""
        owners = (self._owner(row) for row in self.candidate_windows(queries, candidates, probes))
        return [np.unique(owner) for owner in owners]

    def _owner(self, windows: np.ndarray) -> np.ndarray:
        """The document of each window number."""
        return np.searchsorted(self.offsets, windows, side="right") - 1

    def document_scores(self, query: torch.Tensor, docs: np.ndarray, scoring: WindowScoring | int) -> np.ndarray:
        """Exact fp32 scores of the documents numbered `docs` for one unit `query`, over every window of each."""
        if not len(docs):
            return np.zeros(0, dtype=np.float32)
        if len(docs) == len(self.doc_ids) and np.array_equal(docs, np.arange(len(docs))):  # every document
            return self._scan(query[None], scoring)[0].numpy()
        firsts, counts = self.offsets[docs], self.offsets[docs + 1] - self.offsets[docs]
        offsets = np.concatenate([[0], np.cumsum(counts)])
        rows = np.arange(offsets[-1]) + np.repeat(firsts - offsets[:-1], counts)  # each document's windows in turn
        subset = MultiVectors(np.asarray(self.vectors[rows]), offsets)
        return multi_vector_scores(query[None], subset, scoring, unit=True)[0].numpy()

    def _scan(self, units: torch.Tensor, scoring: WindowScoring | int) -> torch.Tensor:
        """(Q, n) exact scores of every document for unit queries, read from the memory map as it is (no copy)."""
        return multi_vector_scores(units, MultiVectors(self.vectors, self.offsets), scoring, unit=True)

    def _provisional(self, query: torch.Tensor, keys: np.ndarray, scoring: WindowScoring | int) -> Any:
        """(documents, scores): each document holding a candidate vector, scored on its candidate vectors (each
        distinct vector once per document; each read once, however many windows share it)."""
        assert self.members is not None and self.starts is not None
        rows, row_keys = self._expanded(keys)
        distinct = len(self.starts) - 1
        pairs = np.unique(self._owner(rows) * distinct + row_keys)  # (document, vector), by document
        docs, first = np.unique(pairs // distinct, return_index=True)
        read = np.sort(np.unique(row_keys))
        vectors = np.asarray(self.vectors[self.members[self.starts[read]]])
        subset = MultiVectors(vectors[np.searchsorted(read, pairs % distinct)], np.append(first, len(pairs)))
        return docs, multi_vector_scores(query[None], subset, scoring, unit=True)[0].numpy()

    def _rescored(self, query: torch.Tensor, keys: np.ndarray, k: int, scoring: WindowScoring | int) -> list[Any]:
        """The `k` best documents for one query from its candidate vectors `keys` (nearest first): every document
        holding one scored on its candidate vectors (`_provisional`), then the best `RESCORED` · k (at least 100)
        scored on all their windows (exact fp32)."""
        docs, provisional = self._provisional(query, keys, scoring)
        docs = np.sort(docs[np.argsort(-provisional, kind="stable")[: max(RESCORED * k, RESCORED_AT_LEAST)]])
        scores = self.document_scores(query, docs, scoring)
        best = np.argsort(-scores, kind="stable")[:k]
        return [(self.doc_ids[docs[j]], float(scores[j])) for j in best]

    def search_vectors(
        self,
        queries: np.ndarray,
        k: int = 10,
        *,
        scoring: WindowScoring | int = 1,
        candidates: int | None = None,
        probes: int | None = None,
        search_threads: int | None = None,
    ) -> list[list[tuple[str, float]]]:
        """The `k` best documents per (normalised) query row: candidates from the engine, rescored exactly.

        Args:
            queries: (Q, D) query vectors.
            k: Documents per query.
            scoring: How a document scores from its windows (`WindowScoring`; an int is a top-k: 1 = max).
            candidates: Candidate distinct window vectors the engine returns per query, each standing for every
                window that holds it (more: higher recall, slower; default `default_candidates`: 1,000, or 4,000
                over sign bits).
            probes: FAISS IVF lists visited (default: a quarter of the lists, which found ≥ 0.98 of the exact top-100
                documents on SciFact) or USearch's search expansion (default 64); more than the index has are the
                same as all of them.
            search_threads: Threads the queries' rescoring is spread over (default: one per core less one, 1–32;
                `lengthwise.core.parallel`); the engine searches them all in one call. The hits do not depend on it.
        """
        probes = probes if probes is not None else self.default_probes()
        candidates = candidates if candidates is not None else self.default_candidates()
        units = torch.nn.functional.normalize(torch.as_tensor(np.asarray(queries), dtype=torch.float32), dim=-1)
        found = self._candidate_vectors(units.numpy(), candidates, probes)

        def rescored(query: tuple[torch.Tensor, np.ndarray]) -> list[tuple[str, float]]:
            return self._rescored(query[0], query[1], k, scoring) if len(query[1]) else []

        return each(search_pool(search_threads, len(found)), rescored, zip(units, found, strict=True))

    def proposals(
        self,
        queries: np.ndarray,
        count: int,
        *,
        scoring: WindowScoring | int = 1,
        candidates: int | None = None,
        probes: int | None = None,
        search_threads: int | None = None,
    ) -> list[np.ndarray]:
        """Per (normalised) query row, the document numbers of its `count` best candidates, ranked on their candidate
        windows only (the first of `search_vectors`' two steps; a hybrid search scores the proposals of both sides
        on all their windows itself); the queries spread over `search_threads` as in `search_vectors`."""
        probes = probes if probes is not None else self.default_probes()
        candidates = candidates if candidates is not None else self.default_candidates()
        units = torch.nn.functional.normalize(torch.as_tensor(np.asarray(queries), dtype=torch.float32), dim=-1)
        found = self._candidate_vectors(units.numpy(), candidates, probes)

        def proposed(query: tuple[torch.Tensor, np.ndarray]) -> np.ndarray:
            if not len(query[1]):
                return np.zeros(0, dtype=np.int64)
            docs, provisional = self._provisional(query[0], query[1], scoring)
            return np.asarray(docs[np.argsort(-provisional, kind="stable")[:count]], dtype=np.int64)

        return each(search_pool(search_threads, len(found)), proposed, zip(units, found, strict=True))

    def exact_vectors(
        self, queries: np.ndarray, k: int = 10, *, scoring: WindowScoring | int = 1
    ) -> list[list[tuple[str, float]]]:
        """The same ranking by an exact scan over every window (for checks and benchmarks, not for serving)."""
        units = torch.nn.functional.normalize(torch.as_tensor(np.asarray(queries), dtype=torch.float32), dim=-1)
        scores = self._scan(units, scoring)
        results = []
        for row in scores.numpy():
            best = np.argsort(-row, kind="stable")[:k]
            results.append([(self.doc_ids[j], float(row[j])) for j in best])
        return results

    # --- text queries: the recorded model, the lexical side, both fused -------------------------------------------

    def _load(self, made: dict[str, Any]) -> SentenceTransformer:
        """The model `made` names, loaded at its recorded precision by this index's loader."""
        loader = _loader(self.load_model)
        return loader(made["model"], precision=made.get("precision", "fp32"))

    def _check_model(self, model: SentenceTransformer) -> None:
        check_query_model(self.settings["model"], model)

    def embed_queries(self, queries: Sequence[str], batch_size: int = 32) -> Any:
        """The queries as the index's documents were made: the recorded model and long-document settings."""
        from lengthwise.longdoc.config import LongDocConfig
        from lengthwise.longdoc.encoder import LongEncoder

        made = self.settings["encode_settings"]
        if self.model is None:
            model = self._load(made)
            self._check_model(model)
            self.model = model
        encoder = LongEncoder(self.model, LongDocConfig.from_dict(made["long"]))
        return encoder.encode_queries(list(queries), batch_size=batch_size)

    @property
    def numbers(self) -> dict[str, int]:
        """Each document id's number (its place in `doc_ids` and `offsets`), built on first use."""
        if "_numbers" not in self.__dict__:
            self.__dict__["_numbers"] = {doc_id: n for n, doc_id in enumerate(self.doc_ids)}
        return self.__dict__["_numbers"]

    @property
    def lexical(self) -> LexicalIndex | None:
        """The index's lexical side (`lengthwise.longdoc.search.lexical.LexicalIndex`), or None when built without
        text."""
        from lengthwise.longdoc.search.lexical import LEXICAL, SETTINGS_FILE, LexicalIndex

        if "_lexical" not in self.__dict__:
            files = Path(self.files or self.folder)  # the generation opened, whatever index.json names now
            if not files.is_dir():
                raise rebuilt(Path(self.folder), self.settings.get(GENERATION, "?"))
            folder, generation = files / LEXICAL, self.settings.get(GENERATION)
            found = (folder / SETTINGS_FILE).is_file()
            self.__dict__["_lexical"] = LexicalIndex.open(folder, generation=generation) if found else None
        return self.__dict__["_lexical"]

    @property
    def scoring(self) -> WindowScoring:
        """How a document scores from its windows, as it was encoded (max or top-k mean, fused with the mean)."""
        from lengthwise.longdoc.config import LongDocConfig

        return LongDocConfig.from_dict(self.settings["encode_settings"]["long"]).scoring

    @property
    def fusion(self) -> FusionSettings:
        """The hybrid fusion settings recorded in the index (`FusionSettings`; the defaults before any tuning)."""
        from lengthwise.longdoc.search.hybrid import FusionSettings

        return FusionSettings.recorded(self.lexical)

    def search_mode(self, mode: str | None = None) -> Mode:
        """The search `mode` asked for (``dense``, ``lexical`` or ``hybrid``), checked against what the index holds;
        None: the mode recorded by `tune_fusion`, else hybrid when the index holds text, else dense."""
        from lengthwise.longdoc.search.hybrid import pick_mode

        without_text = f"{self.folder} was built without its documents' text"
        return pick_mode(mode, self.lexical, f"{without_text}; build it again with the corpus, or search dense")

    def search(
        self,
        queries: str | Sequence[str],
        k: int = 10,
        *,
        mode: str | None = None,
        passages: int = 0,
        candidates: int | None = None,
        probes: int | None = None,
        depth: int | None = None,
        vectors: np.ndarray | None = None,
        search_threads: int | None = None,
    ) -> list[list[Hit]]:
        """The `k` best documents for each query, best first, as `Hit`s (id, score, each side's exact score, and the
        `passages` best windows of each with their character spans and text).

        Args:
            queries: One query or several.
            k: Documents per query.
            mode: ``dense`` (the window vectors), ``lexical`` (BM25) or ``hybrid`` (both, fused by the settings
                recorded in the index); default: the index's recorded mode (hybrid when it holds text).
            passages: Best windows returned with each hit (0: none).
            candidates, probes: The dense side's candidate windows and probes (`search_vectors`).
            depth: Documents each side proposes to a hybrid search (at least 10·k; default: the index's recorded
                fusion, 100). Deeper finds more of the exact fused top k where many documents tie on one side
                (near-duplicates), at some cost per query (docs/longdoc.md, the 10M-window run).
            vectors: The queries' vectors when already embedded (`embed_queries`; e.g. by a service that embeds
                the next batch while this one is searched); embedded here when None.
            search_threads: Threads the queries are searched on, each query on one (default: one per core less one,
                1–32; `lengthwise.core.parallel`). The candidate windows of all queries come from one engine call;
                the hits are the same whatever the number of threads.
        """
        from lengthwise.longdoc.search.hybrid import HybridSearch, Mode

        texts = [queries] if isinstance(queries, str) else list(queries)
        numbers = (("k", k), ("candidates", candidates), ("probes", probes), ("depth", depth),
                   ("search_threads", search_threads))  # fmt: skip
        for name, value in numbers:
            if value is not None and value < 1:
                raise SettingError(name, value, "must be ≥ 1")
        if passages < 0:
            raise SettingError("passages", passages, "must be ≥ 0")
        if not texts or any(not text.strip() for text in texts):
            raise SettingError("query", queries, "a query is empty; give the text to search for")
        chosen = self.search_mode(mode)
        if chosen is Mode.LEXICAL:
            for text in texts:
                if not self.lexical.query_tokens(text):  # type: ignore[union-attr]  # checked by search_mode
                    raise SettingError("query", text, "holds no word the documents hold (stop words only, or "
                                       "unknown words): nothing to search lexically; use dense or hybrid")  # fmt: skip
        if chosen is Mode.LEXICAL:
            vectors = None
        elif vectors is None:
            vectors = self.embed_queries(texts)
        elif len(vectors) != len(texts):
            raise SettingError("vectors", len(vectors), f"give one vector per query ({len(texts)})")
        fusion = self.fusion if depth is None else replace(self.fusion, depth=depth)
        searcher = HybridSearch(self, self.lexical, self.scoring, fusion)
        return searcher.search(vectors, texts, k, chosen, passages=passages, candidates=candidates, probes=probes,
                               search_threads=search_threads)  # fmt: skip

    # --- checks and comparisons for evaluation and tuning -------------------------------------------------------

    def check_corpus(self, data: str | os.PathLike[str]) -> None:
        """A `SettingError` on ``index`` unless this index holds exactly the documents of the corpus at `data` (a
        corpus file or a BEIR folder): the same ids, and the same texts by the digest `lengthwise encode` recorded
        (the same ids with other texts would score as if they were it). The one check of a corpus scored through
        an index (`lengthwise eval --index`, `lengthwise index tune`)."""
        from lengthwise.longdoc.storage.encode import corpus_file
        from lengthwise.longdoc.storage.store import TEXTS, corpus_digests, texts_sha256

        recorded = self.settings["encode_settings"].get(TEXTS)
        if recorded is None:
            raise SettingError("index", str(self.folder), "records no digest of the texts it holds (built by an older "
                               f"lengthwise, or from an unfinished encode), so it cannot be checked against {data}; "
                               "encode the corpus and build the index again")  # fmt: skip
        digests = corpus_digests(corpus_file(Path(data)))
        missing, extra = len(set(self.doc_ids) - digests.keys()), len(digests.keys() - set(self.doc_ids))
        if missing or extra:
            raise SettingError("index", str(self.folder), f"holds {len(self.doc_ids)} documents and {data} "
                               f"{len(digests)}: {missing} indexed are not in {data}, {extra} of {data} are not "
                               "indexed; build the index from this corpus")  # fmt: skip
        if texts_sha256(digests) != recorded:
            raise SettingError("index", str(self.folder), f"holds the ids of {data} with other texts (it was built "
                               "from another version of the corpus); build the index from this corpus")  # fmt: skip

    def ranked_with_exact(self, texts: list[str], k: int, mode: Mode) -> dict[str, list[list[tuple[str, float]]]]:
        """(id, score) rankings of the `k` best documents per query: ``index`` through the index in `mode` (as
        `search` with generous candidates), ``exact`` by the same mode's exact scan of every document."""
        from lengthwise.longdoc.search.hybrid import HybridSearch, Mode

        vectors = None if mode is Mode.LEXICAL else np.asarray(self.embed_queries(texts), dtype=np.float32)
        candidates = max(self.default_candidates(), 10 * k)
        if mode is Mode.DENSE:
            assert vectors is not None
            return {"index": self.search_vectors(vectors, k, scoring=self.scoring, candidates=candidates),
                    "exact": self.exact_vectors(vectors, k, scoring=self.scoring)}  # fmt: skip
        searcher = HybridSearch(self, self.lexical, self.scoring, self.fusion)
        found = searcher.search(vectors, texts, k, mode, candidates=candidates)
        exact = [searcher.exact_ranked(None if vectors is None else vectors[n], text, k, mode)
                 for n, text in enumerate(texts)]  # fmt: skip
        return {"index": [[(hit.id, hit.score) for hit in row] for row in found], "exact": exact}

    def tune_fusion(
        self,
        texts: list[str],
        score: Callable[[list[list[tuple[str, float]]]], float],
        *,
        weights: Sequence[float] = TUNED_WEIGHTS,
        on_eval: Callable[[str, float], None] | None = None,
        record: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Choose the search mode and fusion that `score` rates best on the queries `texts`, and record it in the
        index when `record` is given (with `record` as the note of what it was tuned on).

        The arms are dense, lexical, RRF, and convex and z-score fusion (the default's rule) at each of `weights`,
        each searched for the 10 best documents per query. A fusion becomes the mode only if its score is above both
        sides'; ties go to the earlier arm (convex before z-score, the lower weight first). `score` rates one arm's
        rankings, (id, score) best first per query (e.g. nDCG@10 against a dev split's qrels,
        `lengthwise.evaluation.objectives.qrels_objective`).

        Returns:
            ``{"scores": {arm: score}, "mode", "fusion"}``.
        """
        from lengthwise.longdoc.search.hybrid import Fusion, FusionSettings, HybridSearch, Mode

        if self.lexical is None:
            raise SettingError("index", str(self.folder), "holds no text to tune a fusion on; build it again with "
                               "the corpus")  # fmt: skip
        vectors = self.embed_queries(texts)
        arms: dict[str, tuple[Mode, FusionSettings]] = {"dense": (Mode.DENSE, FusionSettings()),
                                                        "lexical": (Mode.LEXICAL, FusionSettings()),
                                                        "rrf": (Mode.HYBRID, FusionSettings(Fusion.RRF))}  # fmt: skip
        arms.update({f"convex-{w:g}": (Mode.HYBRID, FusionSettings(Fusion.CONVEX, float(w))) for w in weights})
        arms.update({f"zscore-{w:g}": (Mode.HYBRID, FusionSettings(Fusion.ZSCORE, float(w))) for w in weights})
        scores = {}
        for name, (mode, fusion) in arms.items():
            found = HybridSearch(self, self.lexical, self.scoring, fusion).search(vectors, texts, 10, mode)
            scores[name] = score([[(hit.id, hit.score) for hit in hits] for hits in found])
            if on_eval is not None:
                on_eval(name, scores[name])
        best = max(arms, key=lambda name: (scores[name], -list(arms).index(name)))
        if arms[best][0] is Mode.HYBRID and scores[best] <= max(scores["dense"], scores["lexical"]):
            best = "dense" if scores["dense"] >= scores["lexical"] else "lexical"
        mode, fusion = arms[best]
        if record is not None:
            self.lexical.record(mode=mode.value, fusion=fusion.to_dict(), tuned=record)
        return {"scores": scores, "mode": mode.value, "fusion": fusion.to_dict()}


def check_query_model(recorded: dict[str, Any], model: SentenceTransformer) -> None:
    """Refuse a query model that would embed queries otherwise than an index's documents (`SettingError` naming the
    model): other weights than `recorded` (an index's ``model`` settings; the hash covers the precision's cast), or
    another TempScale than the build recorded (one set by hooks leaves the weights alone). An index built before the
    TempScale was recorded is checked by its weights only."""
    from lengthwise.core.models import model_fingerprint

    fingerprint = model_fingerprint(model, recorded["name"])
    found = fingerprint["weights_sha256_16"]
    if found != recorded["weights_sha256_16"]:
        raise SettingError(
            "model", recorded["name"], f"the index was built with weights {recorded['weights_sha256_16']}, "
            f"this model has {found}; query with the model the corpus was encoded with, or build the index again"
        )  # fmt: skip
    if "tempscale" in recorded and fingerprint["tempscale"] != recorded["tempscale"]:
        raise SettingError(
            "model", recorded["name"], f"the index was built with TempScale {_tempscale(recorded['tempscale'])}, "
            f"this model has {_tempscale(fingerprint['tempscale'])}; load it as saved (open the index with "
            "load_model=lengthwise.load_model), or build the index again"
        )  # fmt: skip


def _tempscale(patch: object) -> str:
    """A recorded TempScale (`lengthwise.core.models.ModelPatch.describe`) in a message: its settings, or none."""
    return "none" if patch is None else json.dumps(patch, sort_keys=True)


def _loader(load_model: ModelLoader | None) -> ModelLoader:
    """`load_model`, or the hall's plain loader when None."""
    from lengthwise.core.models import load_plain_model

    return load_model or load_plain_model


def _staged_generation(staging: Path) -> str:
    """The generation id of the build in `staging`: the one its ``index.json`` names when an interrupted run of it
    wrote one (its lexical side may record it already), else a new one."""
    try:
        staged = json.loads((staging / INDEX_FILE).read_text(encoding="utf-8"))[GENERATION]
    except (OSError, ValueError, KeyError, TypeError):
        return new_generation()
    return staged if isinstance(staged, str) else new_generation()
