"""Building the local window index (`lengthwise index build`; `lengthwise.search.index.LongIndex.build`):
the dense side staged from the shards `lengthwise encode` wrote, the lexical side beside it, both served as one new
generation of the index folder.

A build is written into a staging folder beside the index (`lengthwise.search.local.staging`), so an interrupted
build leaves no half-written index; run again with the same inputs, it resumes from its last engine save, and a
finished dense side is kept while the lexical build resumes after its finished shards. The finished folder becomes a
new generation, served from the moment one rename puts its ``index.json`` in place
(`lengthwise.search.local.generations`). Nothing here opens the served index: `LongIndex` does, once a build
returns.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from lengthwise.core.corpus import TEXTS
from lengthwise.core.errors import LongDocError, enum_member
from lengthwise.core.fusion import LEXICAL_GRANULARITY
from lengthwise.core.shards import read_manifest
from lengthwise.search.local.engines import ivf_lists
from lengthwise.search.local.files import (
    FORMAT,
    MEMBERS,
    OLD_LAYOUT,
    REBUILD,
    STARTS,
    TEXT_SIDE,
    Progress,
    check_out,
    check_room,
    disk_needed,
    fill_engine,
    records_digest,
    stage_vectors,
)
from lengthwise.search.local.generations import GENERATION, INDEX_FILE, new_generation, publish
from lengthwise.search.local.staging import BUILD_STATE, record_plan, shard_layout, staging_folder
from lengthwise.search.local.windows import LocalWindows
from lengthwise.search.query_model import QUERY_MODEL_KEYS
from lengthwise.search.types import EncodedManifest, EncodeSettings, Engine, Granularity, Quantize

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

    from lengthwise.core.models import ModelLoader
    from lengthwise.search.protocols import WindowCut, WindowMethod

__all__ = ["build", "build_windows", "check_build"]


def check_build(
    encoded: str | os.PathLike[str], out: str | os.PathLike[str], *, quantize: Quantize | str, engine: Engine | str
) -> EncodedManifest:
    """Check a build's inputs before anything is loaded or written: the settings, the encoded folder's manifest,
    and `out` (`LongIndex.check_build`). Returns the manifest."""
    enum_member(Quantize, "quantize", quantize), enum_member(Engine, "engine", engine)
    check_out(Path(encoded), Path(out))
    manifest: EncodedManifest = read_manifest(Path(encoded))  # type: ignore[assignment]  # JSON, as written
    return manifest


def build(
    encoded: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    quantize: Quantize | str,
    engine: Engine | str,
    text: str | os.PathLike[str] | None,
    granularity: Granularity | str = LEXICAL_GRANULARITY,
    on_progress: Progress = None,
    on_note: Callable[[str], None] | None = None,
    load_model: ModelLoader | None = None,
    method: WindowMethod,
) -> SentenceTransformer:
    """Both sides of `LongIndex.build` (see it for the arguments), served from `out` as one new generation.
    Returns the query model it loaded (the caller opens the index with it)."""
    from lengthwise.core.models import load_plain_model, model_fingerprint
    from lengthwise.search.lexical.build import check_corpus_digest

    made = check_build(encoded, out, quantize=quantize, engine=engine)["settings"]  # before the model loads
    corpus = check_corpus_digest(text, made.get("data"), made.get(TEXTS), granularity, out=out)  # no model yet
    model = (load_model or load_plain_model)(made["model"], precision=made.get("precision", "fp32"))
    fingerprint = model_fingerprint(model, made["model"])
    name = str(Path(made["model"]).resolve()) if Path(made["model"]).is_dir() else made["model"]  # any cwd
    recorded = {"name": name, **{key: fingerprint[key] for key in QUERY_MODEL_KEYS}}
    extra = {"model": recorded, "encode_settings": {**made, "model": name}}
    staging = stage_windows(encoded, out, quantize=quantize, engine=engine, extra=extra, on_progress=on_progress)
    try:
        if corpus is not None:
            staged = open_staged(staging)
            _build_text(staged, method.window_cut(model, made["long"]), corpus, made, granularity, on_progress)
            del staged  # its memory maps, closed before the rename
        swap_in(staging, Path(out), text=corpus is not None)
    except KeyboardInterrupt:
        raise  # both sides' staging stays: the same build, run again, resumes
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if corpus is None and on_note is not None:
        on_note(f"built without text ({made.get('data')} is gone): dense search only; pass the corpus as text "
                "to search it lexically")  # fmt: skip
    return model


def _build_text(
    staged: LocalWindows, cut: WindowCut, corpus: Path, made: EncodeSettings, granularity: str, on_progress: Progress
) -> None:
    from lengthwise.search.lexical.build import build_text_side

    build_text_side(staged, cut, corpus, recorded=made.get(TEXTS), granularity=granularity, on_progress=on_progress)


def build_windows(
    encoded: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    quantize: Quantize | str,
    engine: Engine | str,
    extra: Mapping[str, object] | None = None,
    on_progress: Progress = None,
) -> None:
    """The dense side only of `LongIndex.build_windows` (see it), served from `out` as a new generation."""
    staging = stage_windows(encoded, out, quantize=quantize, engine=engine, extra=extra, on_progress=on_progress)
    try:
        swap_in(staging, Path(out), text=False)
    except KeyboardInterrupt:
        raise
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def open_staged(staging: Path) -> LocalWindows:
    """The index complete in the staging folder `staging` (not served yet), opened there."""
    try:
        settings = json.loads((staging / INDEX_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise LongDocError(None, None, f"{staging}: unreadable index ({error}); {REBUILD}") from None
    return LocalWindows.open_files(staging, staging, settings)


def stage_windows(
    encoded: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    quantize: Quantize | str,
    engine: Engine | str,
    extra: Mapping[str, object] | None,
    on_progress: Progress,
) -> Path:
    """The dense side of a build of `out`, complete in its staging folder (returned): its vectors, ids, offsets
    and engine, and ``index.json``, written once the engine is complete. A staging folder of the same build
    (`staging_folder`) is resumed: from its last engine save, or not at all once its ``index.json`` is there."""
    manifest = check_build(encoded, out, quantize=quantize, engine=engine)
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
            from lengthwise.core.progress import begin_stage  # tqdm: imported by a build only

            begin_stage(on_progress, "indexing windows", "distinct windows")
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


def swap_in(staging: Path, out: Path, *, text: bool) -> None:
    """Serve the finished build in `staging` from `out` as its new generation, once it opens there; without
    `text`, whatever a stopped build of the text side left in the staging folder goes first."""
    if not text:
        for name in TEXT_SIDE:
            shutil.rmtree(staging / name, ignore_errors=True)
    (staging / BUILD_STATE).unlink()
    staged = open_staged(staging)  # the new index must open before it replaces anything
    generation = staged.settings[GENERATION]
    del staged  # its memory maps, closed before the rename
    publish(staging, out, generation, OLD_LAYOUT)


def _staged_generation(staging: Path) -> str:
    """The generation id of the build in `staging`: the one its ``index.json`` names when an interrupted run of it
    wrote one (its lexical side may record it already), else a new one."""
    try:
        staged = json.loads((staging / INDEX_FILE).read_text(encoding="utf-8"))[GENERATION]
    except (OSError, ValueError, KeyError, TypeError):
        return new_generation()
    return staged if isinstance(staged, str) else new_generation()
