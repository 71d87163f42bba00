"""`POST /v1/embeddings` (OpenAI's schema) against `POST /embed` on one running `lengthwise serve`: the throughput of
one-text requests at 32 concurrent clients, the two endpoints taking turns (A B B A …) on the same server, so the
ratio is within one run. Issue 65's goal: `/v1/embeddings` ≥ 0.8× `/embed`.

    # the real all-MiniLM-L6-v2 over a few QMSum meetings (built here), QMSum's queries as the texts
    python -m benchmarks.serve.embeddings_api --out docs/results/bench_embeddings_api.json
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks.encode.longdoc_throughput import _minilm
from benchmarks.serve.serve import start_server
from lengthwise.core.results import environment, write_json_atomic

DATA = Path(__file__).resolve().parents[2] / "data" / "qmsum"


def _texts() -> list[str]:
    with gzip.open(DATA / "queries.jsonl.gz", "rt", encoding="utf-8") as lines:
        return [json.loads(line)["text"] for line in lines if line.strip()]


def _index(work: Path, documents: int) -> Path:
    """`documents` QMSum meetings encoded by the real MiniLM (the default settings) and indexed with their text."""
    import lengthwise as lw

    with gzip.open(DATA / "corpus.jsonl.gz", "rt", encoding="utf-8") as lines:
        rows = [line for line, _ in zip(lines, range(documents), strict=False)]
    (work / "corpus.jsonl").write_text("".join(rows), encoding="utf-8")
    lw.encode(work / "corpus.jsonl", work / "emb", model=_minilm())
    lw.LongIndex.build(work / "emb", work / "idx")
    return work / "idx"


async def _round(url: str, path: str, texts: list[str], clients: int, requests: int) -> dict[str, Any]:
    """`requests` one-text requests from `clients` concurrent clients: throughput, p50, errors."""
    queue: asyncio.Queue[int] = asyncio.Queue()
    for n in range(requests):
        queue.put_nowait(n)
    latencies: list[float] = []
    errors = 0

    async def client(session: httpx.AsyncClient) -> None:
        nonlocal errors
        while not queue.empty():
            n = queue.get_nowait()
            text = texts[n % len(texts)]
            body = {"queries": [text]} if path == "/embed" else {"input": [text], "model": "m"}
            began = time.perf_counter()
            answer = await session.post(path, json=body)
            latencies.append(time.perf_counter() - began)
            errors += answer.status_code != 200

    async with httpx.AsyncClient(base_url=url, timeout=120) as session:
        started = time.perf_counter()
        await asyncio.gather(*(client(session) for _ in range(clients)))
        wall = time.perf_counter() - started
    return {"throughput_rps": requests / wall, "p50_ms": 1e3 * statistics.median(latencies), "errors": errors}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("index", type=Path, nargs="?", help="a built index (default: a few QMSum meetings, built here)")
    parser.add_argument("--documents", type=int, default=20)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--requests", type=int, default=1_000, help="requests per round")
    parser.add_argument("--rounds", type=int, default=6, help="rounds of both endpoints, A B, B A, …")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="lw-bench-embeddings-") as scratch:
        folder = args.index or _index(Path(scratch), args.documents)
        process, url = start_server(folder, [], Path(scratch) / "server.log")
        try:
            texts = _texts()
            asyncio.run(_round(url, "/embed", texts, args.clients, 200))  # warm-up
            arms: dict[str, list[dict[str, Any]]] = {"/embed": [], "/v1/embeddings": []}
            for n in range(args.rounds):
                for path in list(arms) if n % 2 == 0 else list(arms)[::-1]:
                    arms[path].append(asyncio.run(_round(url, path, texts, args.clients, args.requests)))
                print(n, {path: round(rounds[-1]["throughput_rps"], 1) for path, rounds in arms.items()}, flush=True)
        finally:
            process.terminate()
            process.wait(timeout=60)
    median = {path: statistics.median(r["throughput_rps"] for r in rounds) for path, rounds in arms.items()}
    payload = {
        "benchmark": "POST /v1/embeddings against POST /embed, one-text requests, one server, endpoints in turn",
        "throughput_rps": median,
        "v1_over_embed": median["/v1/embeddings"] / median["/embed"],
        "errors": sum(r["errors"] for rounds in arms.values() for r in rounds),
        "rounds": arms,
        "settings": {"clients": args.clients, "requests": args.requests, "rounds": args.rounds,
                     "index": str(args.index) if args.index else f"{args.documents} QMSum meetings, all-MiniLM-L6-v2"},
        "load_average": {"before": load_before, "after": os.getloadavg()},
        "environment": environment(),
    }  # fmt: skip
    print(json.dumps({k: payload[k] for k in ("throughput_rps", "v1_over_embed", "errors")}))
    if args.out is not None:
        write_json_atomic(args.out, payload)


if __name__ == "__main__":
    main()
