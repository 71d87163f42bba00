"""Stages ``scale`` and ``scale-depth`` of the hybrid benchmark, and the ``scale-model`` command. ``scale``: dense
against hybrid at ``--windows`` windows (noisy copies of the real windows ``quality`` encoded, 20 per document, with
essay text): the lexical side's build time, peak memory and bytes per document, p50/p99 alone and with 8 clients,
and the recall of the fused top 10 against the exact fused scan (``--fusion``, ``--granularity``). ``scale-depth``:
what the proposal depth buys back of the exact top 10. ``scale-model``: record the copied windows' model in a scale
index built before it was recorded, in place."""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._measure import disk_bytes
from benchmarks.search.hybrid._common import (
    _against_exact,
    _exact_fused_batched,
    _five_words,
    _lexical_folder,
    _load,
    _scale_texts,
    _section,
    _timed,
    _write,
)

PER_DOC = 20  # windows per document, as search/index.py's scale corpus
COPIED_FROM = ("qmsum", "scifact")  # the encoded folders of the quality stage whose windows the scale corpus copies
NOISE = 0.02  # σ of the Gaussian noise added to each copied window (then renormalised)
SCALE_MODEL_UNKNOWN = "copies of real windows"  # what scale indexes built before the model was recorded hold


def _scale_source(work: Path) -> np.ndarray:
    """Real window vectors to copy from: the qmsum and SciFact windows this benchmark's `quality` stage encoded."""
    from lengthwise.core.encoder import MultiVectors
    from lengthwise.longdoc.storage.store import read_embeddings

    parts = []
    for name in COPIED_FROM:
        folder = work / name / "encoded"
        if not (folder / "manifest.json").is_file():
            raise SystemExit(f"error: {folder} is missing; run the quality stage first (it encodes {name})")
        _, read = read_embeddings(folder)
        parts.append(read.vectors if isinstance(read, MultiVectors) else read)
    return np.concatenate(parts).astype(np.float32)


def _scale_settings(work: Path) -> dict[str, Any]:
    """The encode settings the scale corpus records: the model, long-document settings and precision of the windows
    it copies (the qmsum and SciFact folders must agree on them), and what the vectors really are (``copied``): a
    text query embedded by that model searches them as it would the real windows, the scores are not an encoding of
    any text, and the lexical side's essays are unrelated to them."""
    from lengthwise.longdoc.storage.store import read_manifest

    made = {}
    for name in COPIED_FROM:
        folder = work / name / "encoded"
        if not (folder / "manifest.json").is_file():
            raise SystemExit(f"error: {folder} is missing; run the quality stage first (it encodes {name})")
        settings = read_manifest(folder)["settings"]
        made[name] = {key: settings.get(key, "fp32" if key == "precision" else None)
                      for key in ("model", "long", "precision")}  # fmt: skip
    first, *others = made.values()
    if any(other != first for other in others):
        raise SystemExit(f"error: {', '.join(COPIED_FROM)} were encoded with other settings: {made}")
    copied = {
        "vectors": "noisy copies of real window vectors, not encodings of the indexed documents' text",
        "from": [f"{name} (the quality stage's encoded windows)" for name in COPIED_FROM],
        "per_document": PER_DOC,
        "noise_sigma": NOISE,
        "seed": 0,
        "text": "the lexical side's essays (150-600 words and a code word each) are unrelated to the vectors",
    }
    return {**first, "copied": copied}


def _scale_model(settings: dict[str, Any], dim: int) -> dict[str, Any]:
    """The ``model`` record of an index (`LongIndex.build`'s): the recorded model loaded as the service loads it
    (`lengthwise.load_model`), its dimension checked against the vectors', its weights fingerprinted."""
    import lengthwise as lw
    from lengthwise.core.models import model_fingerprint

    model = lw.load_model(settings["model"], precision=settings["precision"])
    found = len(model.encode(["a"], convert_to_numpy=True)[0])
    if found != dim:
        raise SystemExit(f"error: {settings['model']} embeds in {found} dimensions, the scale vectors have {dim}")
    name = str(Path(settings["model"]).resolve()) if Path(settings["model"]).is_dir() else settings["model"]
    return {"name": name, "weights_sha256_16": model_fingerprint(model, name)["weights_sha256_16"]}


def record_scale_model(windows: int, work: Path) -> str:
    """Record the real model in a scale index built before it was recorded (``"model": "copies of real windows"``):
    its ``index.json`` and its encoded folder's ``manifest.json`` get `_scale_settings` and the model's fingerprint,
    each file replaced atomically; the vectors, engine and lexical side are untouched. The index can then be served
    and searched with text (`lengthwise serve`, `LongIndex.search`). Returns what was done; run again, nothing."""
    from lengthwise.core.results import write_json_atomic

    folder = work / f"scale-{windows}"
    index_file, manifest_file = folder / "index" / "index.json", folder / "encoded" / "manifest.json"
    if not index_file.is_file():
        raise SystemExit(f"error: {index_file} is missing; build the scale index with the scale stage")
    index = json.loads(index_file.read_text(encoding="utf-8"))
    settings = _scale_settings(work)
    if index.get("encode_settings") == settings and isinstance(index.get("model"), dict):
        return f"{index_file}: records {index['model']['name']} already"
    if index.get("encode_settings", {}).get("model") != SCALE_MODEL_UNKNOWN:
        raise SystemExit(f"error: {index_file} records the model {index.get('encode_settings', {}).get('model')!r}, "
                         "not the scale corpus's placeholder; it was not written by this stage")  # fmt: skip
    if Path(index["encoded"]).resolve() != (folder / "encoded").resolve():
        raise SystemExit(f"error: {index_file} was built from {index['encoded']}, not {folder / 'encoded'}")
    model = _scale_model(settings, int(index["dim"]))
    if manifest_file.is_file():  # the shards' own record, for a later build from them
        manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
        write_json_atomic(manifest_file, {**manifest, "settings": settings})
    write_json_atomic(index_file, {**index, "encode_settings": settings, "model": model})
    return f"{index_file}: now records {model['name']} ({model['weights_sha256_16']}) and its long-document settings"


def _scale_index(windows: int, work: Path) -> Path:
    """A dense index of `windows` window vectors, 20 per document, with the USearch int8 default, reused when built
    (and given the model's record, `record_scale_model`, when built before it was recorded).

    The vectors are the real qmsum and SciFact windows (all-MiniLM-L6-v2, `--long default`) drawn at random with
    small seeded Gaussian noise (σ = 0.02, renormalised), as search/index.py's scale corpus: isotropic random vectors
    have no neighbourhood structure, and HNSW builds over them far more slowly than over sentence embeddings. The
    index records that model and its long-document settings (`_scale_settings`, with ``copied`` saying what the
    vectors are), so text queries are embedded as the copied windows were and the index can be served."""
    from lengthwise.core.encoder import MultiVectors
    from lengthwise.facade import LongIndex
    from lengthwise.longdoc.storage.store import EmbeddingStore

    out = work / f"scale-{windows}" / "index"
    if (out / "index.json").is_file():
        print(record_scale_model(windows, work), flush=True)
        return out
    shards = work / f"scale-{windows}" / "encoded"
    source = _scale_source(work)
    settings = _scale_settings(work)
    model = _scale_model(settings, source.shape[1])  # before anything is written
    store = EmbeddingStore(shards, settings)
    done, _ = store.repair()  # whole shards are kept: a killed run writes only the blocks it had not written
    rng = np.random.default_rng(0)
    for number, first in enumerate(range(0, windows, 100_000)):
        docs = min(100_000, windows - first) // PER_DOC
        picked = source[rng.integers(0, len(source), size=docs * PER_DOC)]  # drawn for every block: the seeded
        noise = rng.normal(0, NOISE, size=picked.shape)  # stream, and so each block, is the same on every run
        ids = [f"s{first // PER_DOC + i}" for i in range(docs)]
        if ids[-1] in done:
            continue
        vectors = picked + noise
        vectors = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)
        store.write("w0-", ids, MultiVectors(vectors, np.arange(docs + 1, dtype=np.int64) * PER_DOC), number=number)
    LongIndex.build_windows(shards, out, extra={"model": model})  # resumes its staged build from its last save
    return out


def _lexical_build(index: Path, docs: int, granularity: str = "window") -> None:
    """The lexical side of the scale index, BM25 over its windows, whole documents or both, in `_lexical_folder` (run
    in its own process: its peak memory is the build's)."""
    from lengthwise.search.lexical.bm25 import LexicalIndex

    texts = _scale_texts(docs)
    spans = []
    for text in texts:  # 20 even character spans per document
        edges = np.linspace(0, len(text), PER_DOC + 1).astype(np.int64)
        spans.append(np.stack([edges[:-1], edges[1:]], axis=1))
    built = LexicalIndex.build(texts, spans, _lexical_folder(index, granularity), granularity=granularity)
    if granularity == "window":  # the index's own lexical side: it belongs to the generation served
        built.record(generation=json.loads((index / "index.json").read_text(encoding="utf-8"))["generation"])


def _lexical_complete(folder: Path, granularity: str) -> bool:
    """Whether the lexical side in `folder` was built to the end (both granularities: its whole-document side too,
    built after the window side)."""
    from lengthwise.search.lexical.bm25 import DOCUMENT_SIDE, SETTINGS_FILE

    inner = folder / DOCUMENT_SIDE if granularity == "both" else folder
    return (folder / SETTINGS_FILE).is_file() and (inner / SETTINGS_FILE).is_file()


def _scale_key(windows: int, granularity: str, fusion: str = "convex") -> str:
    """The scale section's key of a run: the window count, suffixed with the granularity when it is not ``window``
    (convex fusion, the keys of the figures taken before issue 49), or with the granularity and ``default`` for the
    library's default fusion (`scale_fusion`)."""
    if fusion != "convex":
        return f"{windows}-{granularity}-{fusion}"
    return str(windows) if granularity == "window" else f"{windows}-{granularity}-granularity"


def stage_scale(args: argparse.Namespace) -> None:
    """Dense against hybrid at `args.windows` windows: the lexical side's build time, memory and bytes per document,
    query latency alone and with 8 clients, and the recall of the fused top 10 against the exact fused scan; the
    lexical side of `args.granularity`, fused by `args.fusion` (`scale_fusion`)."""
    from lengthwise.core.fusion import Mode
    from lengthwise.core.scoring import WindowScoring
    from lengthwise.facade import LongIndex
    from lengthwise.search.lexical.bm25 import open_lexical
    from lengthwise.search.searcher import Searcher

    fusion, docs = getattr(args, "fusion", "convex"), args.windows // PER_DOC
    key = _scale_key(args.windows, args.granularity, fusion)
    if getattr(args, "label", "current") != "current":  # a re-run recorded beside the figures under the plain key
        key = f"{key}-{args.label}"
    folder, lexical_folder, builds = _scale_builds(args, key)
    if args.build_only:  # the builds' figures now; a later run reuses both sides and keeps them
        out = _section("scale")
        _write("scale", {**{k: v for k, v in out.items() if k != "environment"}, key: builds})
        print(builds, flush=True)
        return
    load_before = _load()
    index, lexical = LongIndex.open(folder), open_lexical(lexical_folder)
    vectors, query_texts = _scale_queries(index, docs, args.queries)
    settings = scale_fusion(fusion)
    searcher = Searcher(index.windows, lexical, index.queries, WindowScoring(), "no text")
    asked = list(range(args.queries))
    runs: dict[tuple[str, int], list[dict[str, float]]] = {}
    for _, clients, mode in itertools.product(range(args.repeats), (1, 8), (Mode.DENSE, Mode.HYBRID)):  # alternated

        def search(n: int, mode: Mode = mode) -> Any:
            return searcher.rank(vectors[n : n + 1], query_texts[n : n + 1], 10, mode, settings)

        runs.setdefault((mode.value, clients), []).append(_timed(search, asked, clients))
        print(mode.value, clients, runs[mode.value, clients][-1], flush=True)
    rows: dict[str, Any] = {}  # per mode and client count: the median over the repeats of each figure
    for (mode_name, clients), timed in runs.items():
        rows.setdefault(mode_name, {})[f"clients_{clients}"] = {
            key: round(statistics.median(run[key] for run in timed), 2) for key in timed[0]
        }
    ratios = {
        f"hybrid_over_dense_p50_clients_{c}": round(
            rows["hybrid"][f"clients_{c}"]["p50_ms"] / rows["dense"][f"clients_{c}"]["p50_ms"], 2
        )
        for c in (1, 8)
    }
    checked = asked[: args.recall_queries]
    exact = _exact_fused_batched(searcher, settings, vectors[checked], [query_texts[n] for n in checked], 10)
    recall = _against_exact(searcher, settings, vectors, query_texts, exact)
    size, bm25 = disk_bytes(lexical_folder), sum(disk_bytes(p) for p in lexical_folder.rglob("bm25") if p.is_dir())
    section = {**builds,
               "lexical_bytes_per_doc": round(size / docs), "bm25_bytes_per_doc": round(bm25 / docs),
               "queries": args.queries, "repeats": args.repeats, "latency": rows, **ratios,
               "recall_at_10_vs_exact_fused": recall["recall_at_10_vs_exact_fused"],
               "recall_queries": len(checked), "load": [load_before, _load()]}  # fmt: skip
    if fusion != "convex":  # the sections recorded before issue 49 keep their fields
        section = {**section, "fusion": settings.to_dict(), "first_hit_agrees": recall["first_hit_agrees"]}
    print(section, flush=True)
    out = _section("scale")
    _write("scale", {**{k: v for k, v in out.items() if k != "environment"}, key: section})


def _scale_builds(args: argparse.Namespace, key: str) -> tuple[Path, Path, dict[str, Any]]:
    """The scale index and its lexical side of `args.granularity` (each built unless there), and the builds' figures
    for the section `key`: a side reused keeps the figures of the run that built it (this key's, else those of the
    other keys of the same index and granularity)."""
    load_before, docs = _load(), args.windows // PER_DOC
    earlier = _section("scale")
    same_index = [earlier.get(k, {}) for k in (key, str(args.windows))]
    same_side = [earlier.get(k, {}) for k in (key, _scale_key(args.windows, args.granularity))]
    reused = (args.work / f"scale-{args.windows}" / "index" / "index.json").is_file()
    started = time.perf_counter()
    folder = _scale_index(args.windows, args.work)
    dense_built: float | None = time.perf_counter() - started
    if reused:  # the dense build's time is the run's that built it (kept), not this reuse's
        dense_built = next((e["dense_build_s"] for e in same_index if e.get("dense_build_s") is not None), None)
    started = time.perf_counter()
    lexical_folder = _lexical_folder(folder, args.granularity)
    lexical_reused = _lexical_complete(lexical_folder, args.granularity)
    if not lexical_reused:
        code = f"import sys; from benchmarks.search.hybrid import scale as b; " \
               f"from pathlib import Path; " \
               f"b._lexical_build(Path({str(folder)!r}), {docs}, {args.granularity!r})"  # fmt: skip
        # the child's own peak (kB): VmHWM, not ru_maxrss, which also counts this process's memory at the fork
        peak = "; print(next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM:')))"
        done = subprocess.run([sys.executable, "-c", code + peak], capture_output=True, text=True, check=True)
        peak_mb: int | None = round(int(done.stdout.strip().splitlines()[-1]) / 1024)
        lexical_built: float | None = time.perf_counter() - started
    else:  # as for the dense side: the figures of the run that built it
        built = next((e for e in same_side if e.get("lexical_build_s") is not None), {})
        peak_mb, lexical_built = built.get("lexical_peak_rss_mb"), built.get("lexical_build_s")
    builds = {"windows": args.windows, "documents": docs, "granularity": args.granularity,
              "dense_build_s": round(dense_built) if dense_built is not None else None, "dense_reused": reused,
              "lexical_build_s": round(lexical_built) if lexical_built is not None else None,
              "lexical_reused": lexical_reused, "lexical_peak_rss_mb": peak_mb,
              "build_load": next((e.get("build_load") for e in same_side if e.get("build_load")), None)
              if reused and lexical_reused else [load_before, _load()]}  # fmt: skip
    return folder, lexical_folder, builds


def scale_fusion(fusion: str = "convex") -> Any:
    """The fusion the scale stages measure (``--fusion``) and their batched exact scan reproduces
    (`_exact_fused_batched`). ``convex``: convex at lexical weight 0.1 over window BM25, the default when the 1M and
    10M figures were taken (their keys: the window count, ``-document-granularity``); every document's fused score
    is its own, so the exact scan fuses the whole corpus. ``default``: the library's default since issue 49,
    `FusionSettings()` (z-score at lexical weight 0.3 over each query's proposals; with ``--granularity both`` the
    index default, dense + document BM25 + window BM25 at 0.7 / 0.15 / 0.15); it normalises over the proposed
    documents, so the exact scan fuses the union of each side's exact best (`lengthwise.search.fusion.fuse_exact`, as
    `lengthwise.search.exact.exact_ranked`), not the whole corpus."""
    from lengthwise.core.fusion import Fusion
    from lengthwise.search.types import FusionSettings

    if fusion == "default":
        return FusionSettings()
    if fusion != "convex":
        raise SystemExit(f"error: --fusion {fusion}: use convex or default")
    return FusionSettings(Fusion.CONVEX, 0.1)


def _scale_queries(windows: Any, docs: int, count: int) -> tuple[np.ndarray, list[str]]:
    """The scale stages' queries: each a vector near one window of a random document (σ = 0.02) and 5 words of that
    document's text (seeded: every stage and run asks the same queries)."""
    texts = _scale_texts(docs)
    rng = np.random.default_rng(2)
    picks = rng.integers(0, docs, size=count)
    vectors = np.asarray(windows.vectors[picks * PER_DOC + rng.integers(0, PER_DOC, size=count)])
    vectors = vectors + rng.normal(0, 0.02, size=vectors.shape).astype(np.float32)
    return vectors, _five_words([texts[d] for d in picks], rng)


def stage_scale_depth(args: argparse.Namespace) -> None:
    """Why the fused top 10 at `args.windows` windows misses documents of the exact fused scan, and what the proposal
    depth buys back: for each depth in `args.depths`, the recall of the top 10 against the exact scan, how often
    the first hit agrees, the share of missed documents whose exact fused score is within 1 % of the 10th found, the
    fused score the index's top 10 keeps (sum of their exact fused scores ÷ the exact top 10's), and the p50 / p99
    of a query alone. The queries are the scale stage's first `args.recall_queries`."""
    from lengthwise.core.fusion import Mode
    from lengthwise.core.scoring import WindowScoring
    from lengthwise.facade import LongIndex
    from lengthwise.search.lexical.bm25 import open_lexical
    from lengthwise.search.searcher import Searcher

    fusion = getattr(args, "fusion", "convex")
    key = _scale_key(args.windows, args.granularity, fusion)
    folder = args.work / f"scale-{args.windows}" / "index"
    index = LongIndex.open(folder)
    searcher = Searcher(index.windows, open_lexical(_lexical_folder(folder, args.granularity)), index.queries,
                        WindowScoring(), "no text")  # fmt: skip
    vectors, texts = _scale_queries(index, args.windows // PER_DOC, args.queries)
    asked, load_before = list(range(args.recall_queries)), _load()
    exact = _exact_fused_batched(searcher, scale_fusion(fusion), vectors[asked], texts[: len(asked)], 10)
    rows = {}
    for depth in args.depths:
        settings = replace(scale_fusion(fusion), depth=depth)

        def search(n: int, settings: Any = settings) -> Any:
            return searcher.rank(vectors[n : n + 1], texts[n : n + 1], 10, Mode.HYBRID, settings)

        timed = _timed(search, asked, 1)
        rows[str(depth)] = {**_against_exact(searcher, settings, vectors, texts, exact), "latency_clients_1": timed}
        print(depth, rows[str(depth)], flush=True)
    out = _section("scale_depth")
    section = {"windows": args.windows, "granularity": args.granularity, "queries": len(asked), "depths": rows,
               "load": [load_before, _load()]}  # fmt: skip
    _write("scale_depth", {**{k: v for k, v in out.items() if k != "environment"}, key: section})
