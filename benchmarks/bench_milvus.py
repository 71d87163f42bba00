"""SciFact sample through the Milvus backend (embedded Milvus Lite): its top-10 against the exact scan, dense and
hybrid, beside the local index's (docs/engines.md; docs/results/engines_milvus_scifact.json).

    python benchmarks/bench_milvus.py 300 30     # the first 300 documents, the first 30 queries

BENCH_OUT (default /tmp/bench_milvus) holds the sample, its encoding and both indexes; SCIFACT the BEIR folder.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np


def _lines(path: Path) -> list[dict]:
    with gzip.open(path, "rt") as handle:
        return [json.loads(line) for line in handle]


def _recall(found: list, exact: list) -> float:
    return float(np.mean([len({h.id for h in r} & {d for d, _ in e}) / max(1, len(e))
                          for r, e in zip(found, exact, strict=True)]))  # fmt: skip


def main(docs: int, asked: int) -> dict:
    import lengthwise as lw
    from lengthwise.longdoc.search._milvus_load import load_into_milvus
    from lengthwise.longdoc.search.hybrid import Mode

    out = Path(os.environ.get("BENCH_OUT", "/tmp/bench_milvus"))
    data = Path(os.environ.get("SCIFACT", "../shared/data/scifact"))
    out.mkdir(parents=True, exist_ok=True)
    load0 = os.getloadavg()
    rows = _lines(data / "corpus.jsonl.gz")[:docs]
    texts = (json.dumps({"_id": r["_id"], "text": (r.get("title", "") + " " + r["text"]).strip()}) for r in rows)
    (out / "corpus.jsonl").write_text("".join(line + "\n" for line in texts))
    queries = [row["text"] for row in _lines(data / "queries.jsonl.gz")][:asked]
    start = time.time()
    if not (out / "emb" / "manifest.json").exists():
        subprocess.run([sys.executable, "-m", "lengthwise.cli", "encode", "-d", str(out / "corpus.jsonl"), "-o",
                        str(out / "emb"), "--long", "multi-vector", "--window", "64", "--stride", "32"],
                       check=True)  # fmt: skip
    result: dict = {"documents": docs, "queries": asked, "encode_s": time.time() - start}
    start = time.time()
    local = lw.LongIndex.build(out / "emb", out / "idx")
    result.update(windows=int(local.offsets[-1]), local_build_s=time.time() - start)
    shutil.rmtree(out / "milvus.db", ignore_errors=True)
    start = time.time()
    engine = load_into_milvus(local, str(out / "milvus.db"), "scifact")
    result["milvus_load_s"] = time.time() - start
    vectors = np.asarray(local.embed_queries(queries), dtype=np.float32)
    for mode in ("dense", "hybrid"):
        exact = local.ranked_with_exact(queries, 10, Mode(mode))["exact"]
        start = time.time()
        found = engine.search(queries, k=10, mode=mode, vectors=vectors, search_threads=1)
        milvus_s, start = time.time() - start, time.time()
        near = local.search(queries, k=10, mode=mode, vectors=vectors, search_threads=1)
        local_s = time.time() - start
        pairs = list(zip(found, near, strict=True))
        result[mode] = {
            "milvus_recall_at_10_vs_exact": _recall(found, exact),
            "local_recall_at_10_vs_exact": _recall(near, exact),
            "same_top10_ids_as_local": float(np.mean([[h.id for h in a] == [h.id for h in b] for a, b in pairs])),
            "max_score_gap_same_id": max(
                abs(a.score - b.score) for ra, rb in pairs for a, b in zip(ra, rb, strict=True) if a.id == b.id
            ),
            "milvus_ms_per_query": 1000 * milvus_s / asked,
            "local_ms_per_query": 1000 * local_s / asked,
        }
    result["loadavg_before"], result["loadavg_after"] = load0, os.getloadavg()
    return result


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    made = main(int(sys.argv[1]), int(sys.argv[2]))
    print(json.dumps(made, indent=1))
