"""The Milvus backend at scale (issue 50's 1M-window goal): bench_hybrid's scale index (--windows windows, 20 per
document, with BM25 at both granularities) loaded into an embedded Milvus Lite, beside the local index in one run:
load and build time, bytes on disk and resident memory per window, recall@10 against the exact scan (dense, and
hybrid with the exact fused scan) and p50 latency of one query at a time.

    python -m benchmarks.search.hybrid scale --windows 1000000 --granularity both --fusion default   # the local index
    nice -n 5 python -m benchmarks.search.milvus_scale --windows 1000000 --queries 50

Steps, each written to docs/results/bench_milvus.json (section ``scale-<windows>``) as it ends, so a run stopped
part-way resumes after its last finished step (``--again`` runs every step again):

1. ``milvus_load``: the local index (its served generation, linked, with the ``lexical-both`` side bench_hybrid
   built beside it) loaded into Milvus Lite at --out (resumed where a stopped load left off; the seconds of each
   attempt are kept).
2. ``queries``: the scale stage's seeded queries (a vector near one window of a random document and 5 words of its
   text), each searched alone on one search thread through both indexes, and ranked by the exact scan; then the
   engine's floor: its smallest search (10 nearest windows, ids alone) timed on its own.
3. ``local_build``: the local index built again from bench_hybrid's encoded shards (dense side: `build_windows`,
   the USearch int8 default; lexical side: BM25 at both granularities), timed as the load was, in --out.

The machine's load average is kept beside each step. Only the embedded engine runs here: no server or cluster.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._measure import disk_bytes, recall
from benchmarks.search.milvus_sets import _timed  # the same measures as on whole corpora

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results" / "bench_milvus.json"


def _rss_mb() -> dict[str, float]:
    """Resident memory (MB) of this process (Milvus Lite runs in it) and of its children, if any."""
    import psutil

    me = psutil.Process()
    children = me.children(recursive=True)
    return {"this_process_mb": round(me.memory_info().rss / 2**20, 1),
            "children_mb": round(sum(c.memory_info().rss for c in children) / 2**20, 1),
            "children": sorted({c.name() for c in children})}  # fmt: skip


def _linked_index(source: Path, out: Path) -> Path:
    """A copy of the scale index `source` made of hard links (nothing is written into the source's files), serving
    the ``lexical-both`` side bench_hybrid built beside it: what `index build --granularity both` would have made."""
    from lengthwise.search.lexical.bm25 import DOCUMENT_SIDE, LexicalIndex
    from lengthwise.search.local.files import served_files

    copy = out / "index"
    if (copy / "index.json").is_file():
        return copy
    staged = out / "index.linking"
    shutil.rmtree(staged, ignore_errors=True)
    shutil.copytree(source, staged, ignore=shutil.ignore_patterns("lexical", "readers.lock"), copy_function=os.link)
    (served_files(staged) / "readers.lock").touch()  # its own, not the source's: readers hold the copy
    shutil.copytree(source / "lexical-both", served_files(staged) / "lexical", copy_function=os.link)
    generation = json.loads((staged / "index.json").read_text(encoding="utf-8"))["generation"]
    for side in (served_files(staged) / "lexical", served_files(staged) / "lexical" / DOCUMENT_SIDE):
        LexicalIndex.open(side).record(generation=generation)  # its lexical.json replaced, not written into
    staged.rename(copy)
    return copy


def step_load(local: Any, args: argparse.Namespace, before: dict[str, Any]) -> dict[str, Any]:
    from lengthwise.search.milvus.load import load_into_milvus

    attempts = list(before.get("attempts_s", []))
    marks = {"last": time.perf_counter()}

    def progress(done: int, total: int) -> None:
        if time.perf_counter() - marks["last"] > 60:
            marks["last"] = time.perf_counter()
            print(f"  {done:,} / {total:,} windows ({time.strftime('%H:%M:%S')}, load {os.getloadavg()[0]:.2f})",
                  flush=True)  # fmt: skip

    rss_before, start = _rss_mb(), time.perf_counter()
    engine = load_into_milvus(local, str(args.out / "milvus.db"), "scale", batch=args.batch, on_progress=progress)
    attempts.append(time.perf_counter() - start)
    windows = int(local.offsets[-1])
    return {"attempts_s": attempts, "milvus_load_s": sum(attempts), "batch": args.batch,
            "milvus_bytes_per_window": disk_bytes(args.out / "milvus.db") / windows,
            "local_bytes_per_window": disk_bytes(args.out / "index") / windows,
            "rss_before_load": rss_before, "rss_after_load": (after := _rss_mb()),
            "rss_growth_mb": after["this_process_mb"] - rss_before["this_process_mb"],
            "engine": repr(engine)}  # fmt: skip


def step_queries(local: Any, args: argparse.Namespace) -> dict[str, Any]:
    from benchmarks.search.hybrid._common import _exact_fused_batched
    from benchmarks.search.hybrid.scale import PER_DOC, _scale_queries
    from lengthwise.facade import MilvusIndex

    start = time.perf_counter()
    engine = MilvusIndex.open(str(args.out / "milvus.db"), "scale")  # a fresh engine process loads the collections
    open_s = time.perf_counter() - start
    engine.model = local.model
    vectors, texts = _scale_queries(local, args.windows // PER_DOC, args.queries)
    vectors = vectors.astype(np.float32)
    result: dict[str, Any] = {"queries": len(texts), "fusion": local.fusion.to_dict(), "open_s": open_s}
    start = time.perf_counter()
    exact = {"dense": [[d for d, _ in row] for row in local.exact_vectors(vectors, 10, scoring=local.scoring)],
             "hybrid": [[d for d, _ in row] for row in _exact_fused_batched(
                 local.searcher, local.fusion, vectors, texts, 10)]}  # fmt: skip
    result["exact_scan_s"] = time.perf_counter() - start
    for mode in ("dense", "hybrid"):
        _timed(engine.search, vectors[:2], texts[:2], mode)  # first touches (connections, caches) are not timed
        _timed(local.search, vectors, texts, mode)  # the local index's memory maps read in (the engine holds its
        # collection in memory once loaded): a server's steady state, not the first read of each page from disk
        found, milvus_ms = _timed(engine.search, vectors, texts, mode)
        near, local_ms = _timed(local.search, vectors, texts, mode)
        result[mode] = {
            "milvus_recall_at_10_vs_exact": recall(found, exact[mode]),
            "local_recall_at_10_vs_exact": recall(near, exact[mode]),
            "same_top10_ids_as_local": float(np.mean([a == b for a, b in zip(found, near, strict=True)])),
            "milvus_p50_ms": statistics.median(milvus_ms),
            "local_p50_ms": statistics.median(local_ms),
            "milvus_over_local_p50": statistics.median(milvus_ms) / statistics.median(local_ms),
        }
        print(mode, json.dumps(result[mode]), flush=True)
    result["engine_floor"] = _engine_floor(engine, vectors)
    result["engine_calls"] = {mode: _engine_calls(engine, vectors, texts, mode) for mode in ("dense", "hybrid")}
    result["engine_two_at_once"] = _two_at_once(engine, vectors)
    result["rss_after_queries"] = _rss_mb()
    return result


def _call_kind(kwargs: dict[str, Any]) -> str:
    """A name for one search the backend makes: which field, on the windows or the whole-document collection, and
    whether filtered to given rows (``among``: the exact scoring of proposals)."""
    from lengthwise.search.milvus.store import DOCUMENTS

    side = "documents_" if str(kwargs.get("collection", "")).endswith(DOCUMENTS) else ""
    return f"{side}{kwargs.get('anns_field')}_{'among' if 'filter' in kwargs else 'top'}"


def _engine_calls(engine: Any, vectors: np.ndarray, texts: list[str], mode: str) -> dict[str, Any]:
    """The engine's searches in one query of `mode`, by kind (`_call_kind`): how many a query makes and the p50 of
    one, over the queries after the first two, each searched alone (`client.search` wrapped: what the engine and
    the client's call take, not the Python around them)."""
    spent: dict[str, list[float]] = {}
    search = engine.client.search

    def timed(collection: str, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        found = search(collection, *args, **kwargs)
        spent.setdefault(_call_kind({"collection": collection, **kwargs}), []).append(
            1000 * (time.perf_counter() - start)
        )
        return found

    engine.client.search = timed
    try:
        for n in range(len(texts)):
            if n == 2:
                spent.clear()
            engine.search([texts[n]], k=10, mode=mode, vectors=vectors[n : n + 1], search_threads=1)
    finally:
        engine.client.search = search
    counted = max(1, len(texts) - 2)
    return {kind: {"per_query": len(times) / counted, "p50_ms": statistics.median(times)}
            for kind, times in sorted(spent.items())}  # fmt: skip


def _two_at_once(engine: Any, vectors: np.ndarray) -> dict[str, Any]:
    """The engine's smallest search (as `_engine_floor`) sent by two threads at once, against the same two one after
    the other: whether the engine answers two searches side by side (then a query's independent searches could be
    sent together) or one at a time."""
    import itertools
    from concurrent.futures import ThreadPoolExecutor

    units = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    together, apart = [], []
    with ThreadPoolExecutor(2) as pool:
        for first, second in itertools.pairwise(units):
            start = time.perf_counter()
            list(pool.map(lambda unit: _smallest_search(engine, unit), [first, second]))
            together.append(1000 * (time.perf_counter() - start))
            start = time.perf_counter()
            _smallest_search(engine, first)
            _smallest_search(engine, second)
            apart.append(1000 * (time.perf_counter() - start))
    return {"pairs": len(together), "two_at_once_p50_ms": statistics.median(together),
            "one_after_the_other_p50_ms": statistics.median(apart)}  # fmt: skip


def _smallest_search(engine: Any, unit: np.ndarray) -> None:
    """The engine's smallest search: the 10 nearest windows of `unit`, their ids alone (`ef` 64 on HNSW, `nprobe` 64
    on IVF_FLAT)."""
    engine.client.search(engine.collection, [unit.tolist()], anns_field="dense", limit=10, output_fields=["id"],
                         search_params={"metric_type": "IP", "params": {"ef": 64, "nprobe": 64}})  # fmt: skip


def _engine_floor(engine: Any, vectors: np.ndarray) -> dict[str, Any]:
    """What the engine itself takes for the smallest search: the 10 nearest windows, their ids alone, one query at
    a time (p50 of each query vector once, after one untimed search). No lengthwise code runs in it: below this no
    query through the engine can go."""
    units = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    def nearest(unit: np.ndarray) -> float:
        start = time.perf_counter()
        _smallest_search(engine, unit)
        return 1000 * (time.perf_counter() - start)

    nearest(units[0])
    times = [nearest(unit) for unit in units]
    return {"what": "client.search, limit 10, ef 64 (HNSW) or nprobe 64 (IVF_FLAT), output_fields ['id'], one query "
            "vector a call",
            "searches": len(times), "p50_ms": statistics.median(times), "min_ms": min(times)}  # fmt: skip


def _run_summary(queries: dict[str, Any]) -> dict[str, Any]:
    """One queries run's p50s and ratios, with its time, load and commit (`queries_runs`)."""
    import subprocess

    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    changed = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "src"], capture_output=True, text=True)
    dirty = " with uncommitted changes in src" if changed.stdout.strip() else ""
    return {**{f"{mode}_{what}": queries[mode][what] for mode in ("dense", "hybrid")
               for what in ("milvus_p50_ms", "local_p50_ms", "milvus_over_local_p50")},
            "engine_floor_p50_ms": queries["engine_floor"]["p50_ms"], "open_s": queries["open_s"],
            "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "loadavg_before": queries["loadavg_before"],
            "commit": commit.stdout.strip() + dirty}  # fmt: skip


def step_local_build(args: argparse.Namespace) -> dict[str, Any]:
    from benchmarks.search.hybrid.scale import PER_DOC, _lexical_build, _scale_model, _scale_settings
    from lengthwise.facade import LongIndex

    encoded = Path(json.loads((args.source / "index.json").read_text(encoding="utf-8"))["encoded"])
    if not (encoded / "manifest.json").is_file():
        raise SystemExit(
            f"error: {encoded} (the scale index's encoded shards) is gone; run python -m benchmarks.search.hybrid scale"
        )
    out = args.out / "local-build"
    shutil.rmtree(out, ignore_errors=True)
    settings = _scale_settings(args.work)
    model = _scale_model(settings, int(json.loads((args.source / "index.json").read_text())["dim"]))
    start = time.perf_counter()
    LongIndex.build_windows(encoded, out / "index", extra={"model": model})
    dense_s, start = time.perf_counter() - start, time.perf_counter()
    _lexical_build(out / "index", args.windows // PER_DOC, "both")
    lexical_s = time.perf_counter() - start
    result = {"dense_build_s": dense_s, "lexical_build_s": lexical_s, "local_build_s": dense_s + lexical_s,
              "encoded": str(encoded)}  # fmt: skip
    shutil.rmtree(out, ignore_errors=True)  # 2 GB at 1M windows, the same as the index the load read
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--windows", type=int, default=1_000_000, help="bench_hybrid's scale index of this size")
    parser.add_argument("--work", type=Path, default=Path("/tmp/lengthwise-bench-hybrid"), help="bench_hybrid's")
    parser.add_argument("--out", type=Path, default=None, help="default: /tmp/bench_milvus_scale-<windows>")
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--batch", type=int, default=None, help="windows per insert (default: the load's own)")
    parser.add_argument("--steps", nargs="+", default=["milvus_load", "queries", "local_build"],
                        choices=["milvus_load", "queries", "local_build"])  # fmt: skip
    parser.add_argument("--again", action="store_true", help="run finished steps again")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from importlib.metadata import version

    import lengthwise as lw
    from lengthwise.core.results import write_json_atomic

    args.source = args.work / f"scale-{args.windows}" / "index"
    if not (args.source / "lexical-both" / "document").is_dir():
        raise SystemExit(f"error: {args.source} has no lexical-both side; run python -m benchmarks.search.hybrid "
                         f"scale --windows {args.windows} --granularity both --fusion default first")  # fmt: skip
    args.out = args.out or Path(f"/tmp/bench_milvus_scale-{args.windows}")
    args.out.mkdir(parents=True, exist_ok=True)
    from lengthwise.search.milvus.load import BATCH
    from lengthwise.search.milvus.store import engine_kind

    args.batch = args.batch or BATCH
    kind = engine_kind(str(args.out / "milvus.db"))  # Milvus Lite 3.x's figures keep the section they always had
    key = f"scale-{args.windows}" + ("" if kind == "lite-python" else f"-{kind}")
    command = "python -m benchmarks.search.milvus_scale " + " ".join(sys.argv[1:])
    made = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
    section = made.get(key, {})
    local = lw.LongIndex.open(_linked_index(args.source, args.out), load_model=lw.load_model)
    section.update({"windows": int(local.offsets[-1]), "documents": len(local.doc_ids), "command": command,
                    "granularity": local.lexical.settings["granularity"],
                    "versions": {p: version(p) for p in ("pymilvus", "milvus-lite", "usearch")},
                    "vectors": "bench_hybrid's scale corpus: noisy copies of real all-MiniLM-L6-v2 windows",
                    "machine": "2 CPU cores, shared with other jobs: the load beside each step"})  # fmt: skip
    runs = {
        "milvus_load": lambda: step_load(local, args, section.get("milvus_load", {})),
        "queries": lambda: step_queries(local, args),
        "local_build": lambda: step_local_build(args),
    }
    for step in args.steps:
        if step in section and section[step].get("done") and not args.again:
            print(f"{step}: done before ({RESULTS}); --again runs it again", flush=True)
            continue
        print(f"{step}: start {time.strftime('%H:%M:%S')}, load {os.getloadavg()}", flush=True)
        before = os.getloadavg()
        figures = runs[step]()
        section[step] = {**figures, "done": True, "loadavg_before": before, "loadavg_after": os.getloadavg(),
                         "date": time.strftime("%Y-%m-%d")}  # fmt: skip
        if step == "queries":  # each run's p50s kept: on this shared VM the local index's own p50 moves run to run
            section.setdefault("queries_runs", []).append(_run_summary(section[step]))
        made = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
        made[key] = section
        write_json_atomic(RESULTS, made)
        print(step, json.dumps(section[step]), flush=True)
    if "milvus_load" in section and (args.out / "milvus.db").exists():  # measured again: a file on Milvus Lite 2.x,
        # which `_bytes` read as 0 before session 51
        windows = section["windows"]
        section["milvus_load"]["milvus_bytes_per_window"] = disk_bytes(args.out / "milvus.db") / windows
    if {"milvus_load", "local_build"} <= section.keys():
        load, local = section["milvus_load"]["milvus_load_s"], section["local_build"]["local_build_s"]
        section["milvus_load_over_local_build"] = load / local
        section["milvus_end_to_end_over_local_build"] = (load + local) / local  # `index build --backend milvus`
    if "engine_floor" in section.get("queries", {}):  # the engine's smallest search over the local dense query
        floor, dense = section["queries"]["engine_floor"], section["queries"]["dense"]
        section["engine_floor_over_local_dense_p50"] = floor["p50_ms"] / dense["local_p50_ms"]
    if "milvus_load_over_local_build" in section or "engine_floor_over_local_dense_p50" in section:
        made = json.loads(RESULTS.read_text())
        made[key] = section
        write_json_atomic(RESULTS, made)


if __name__ == "__main__":
    main()
