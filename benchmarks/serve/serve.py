r"""`lengthwise serve` under concurrent load: 1, 8 and 32 clients against a served index, beside the in-process
`LongIndex.search` on the same queries, so the HTTP overhead is a ratio.

For each concurrency: p50/p99 latency of one-query requests, throughput, errors (must be 0), the server's RSS
(current and peak), the CPU its process tree used (``server_cpu_busy``: cores kept busy; ``server_cpu_ms_per_query``)
and the benchmark client's own share (``client_cpu_busy``): on a machine the two share, they say whether the cores
were full. The in-process figure is one query per call, sequential, measured first (before the server
starts, so the two never share the CPU). The issue's goals (issue 36) are checked and printed:

- p50 at 8 clients ≤ 2 × the in-process p50;
- throughput at 32 clients ≥ 4 × one client's (the batcher embeds concurrent queries together);
- zero errors.

    # the 1M-window index (search/hybrid/scale.py's scale index; benchmarks/README.md has the run), 10,000 requests each
    nice -n 5 python -m benchmarks.serve.serve /tmp/lengthwise-bench-hybrid/scale-1000000/index \
        --queries data/qmsum/queries.jsonl.gz --mode hybrid --requests 10000 --out docs/results/bench_serve.json
    # a smoke run on a tiny index built here (random 2-layer BERT, 200 documents): does it work?
    python -m benchmarks.serve.serve --tiny --requests 50
    # servers compared in one run (issue 48.3): the default search threads against one (the design before), each
    # started afresh in turn, A B B A …, on the same index and queries
    python -m benchmarks.serve.serve INDEX --clients 32 --search-threads default,1 --rounds 4 \
        --out docs/results/bench_serve_search_threads.json
    # the queries embedded in bf16 on an fp32 index, against fp32 (the default) and an earlier commit's server
    python -m benchmarks.serve.serve INDEX --precision default,bf16 --reference /tmp/before/src \
        --reference-index OLD_INDEX --rounds 4 --out docs/results/bench_serve_precision.json
    # the token stage (issue 64): the default server against one with --tokens, alternated
    python -m benchmarks.serve.serve /tmp/lengthwise-bench-hybrid/qmsum/index-default --queries \
        data/qmsum/queries.jsonl.gz --mode hybrid --clients 1,32 --requests 300 --rounds 2 \
        --tokens /tmp/lengthwise-bench-hybrid/qmsum/tokens-auto --out docs/results/bench_serve_tokens.json
    # this checkout's server against an earlier commit's (a git worktree), in turn on this machine (issue 48.3)
    git worktree add /tmp/before d3262f9
    python -m benchmarks.serve.serve INDEX --clients 1,8,32 --requests 1000 --reference /tmp/before/src \
        --reference-index OLD_INDEX --rounds 4 --out docs/results/bench_serve_versus_before.json

Queries: ``--queries FILE.jsonl`` or ``FILE.jsonl.gz`` (``text`` per line), else sentences cut from the indexed
documents' own text (the lexical side), else a fixed list. The report records what was measured (windows, model, the
mode searched, torch's threads) and the load average: numbers from a busy machine are marked as such.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import random
import re
import select
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
FALLBACK = ["the river and the old bridge", "who wrote the report", "how long does the winter last",
            "where was the mineral found", "the market in autumn", "the village school"]  # fmt: skip
WORDS = ("river mill valley winter school museum market honey church stone lake railway bridge harbour orchard quarry "
         "bakery mayor bells wheat barley tools settlers summer autumn apples")  # fmt: skip


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def _queries(index: Any, path: Path | None, count: int, seed: int) -> list[str]:
    if path is not None:  # JSONL, gzipped or not (a BEIR queries file: data/qmsum/queries.jsonl.gz)
        opener: Any = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as lines:
            return [json.loads(line)["text"] for line in lines if line.strip()]
    rng = random.Random(seed)
    found: list[str] = []
    if index.lexical is not None:
        documents = len(index.doc_ids)
        for _ in range(count * 3):
            words = index.lexical.text(rng.randrange(documents)).split()
            if len(words) >= 4:
                start = rng.randrange(max(1, len(words) - 8))
                found.append(" ".join(words[start : start + rng.randint(3, 8)]))
            if len(found) >= count:
                break
    return found or FALLBACK


def in_process(folder: Path, queries: list[str], requests: int, settings: dict[str, Any]) -> dict[str, Any]:
    """`LongIndex.search`, one query per call, sequential: the latency the service is compared with."""
    import lengthwise as lw

    index = lw.LongIndex.open(folder)
    for query in queries[:5]:  # warm: the model, the engine's pages, the lexical side
        index.search([query], **settings)
    latencies = []
    started = time.perf_counter()
    for n in range(requests):
        t0 = time.perf_counter()
        index.search([queries[n % len(queries)]], **settings)
        latencies.append(time.perf_counter() - t0)
    wall = time.perf_counter() - started
    return {"requests": requests, "p50_ms": 1e3 * statistics.median(latencies),
            "p99_ms": 1e3 * _percentile(latencies, 0.99), "throughput_qps": requests / wall}  # fmt: skip


def start_server(
    folder: Path, extra: list[str], log: Path, threads: int | None = None, source: Path | None = None
) -> tuple[subprocess.Popen[str], str]:
    """`lengthwise serve FOLDER --port 0` (with `threads` torch threads per worker: ``OMP_NUM_THREADS``; `source`: the
    ``src`` folder of another checkout whose lengthwise serves instead of this one), and its URL once it answers."""
    env = {**os.environ, "HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", "1")}
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
    if source is not None:  # first on the path: before this checkout's editable install
        env["PYTHONPATH"] = os.pathsep.join([str(source), *filter(None, [os.environ.get("PYTHONPATH")])])
    command = [sys.executable, "-m", "lengthwise.cli", "serve", str(folder), "--port", "0", *extra]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log.open("w"), text=True, env=env)
    assert process.stdout is not None
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and process.poll() is None:
        readable = select.select([process.stdout], [], [], 0.5)[0]
        if readable and (found := re.search(r" at (http://\S+) ", process.stdout.readline())):
            return process, found.group(1)
    process.kill()
    raise SystemExit(f"the server did not start: {log.read_text()}")


def _tree(pid: int) -> list[int]:
    """`pid` and its descendants (the worker processes of `serve --workers N`)."""
    out, todo = [], [pid]
    while todo:
        current = todo.pop()
        out.append(current)
        for task in Path(f"/proc/{current}/task").glob("*/children"):
            todo += [int(child) for child in task.read_text().split()]
    return out


def _cpu_s(pid: int) -> float:
    """CPU seconds (user and system, every thread) the server's process tree has used so far."""
    ticks = 0
    for member in _tree(pid):
        try:
            fields = Path(f"/proc/{member}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # a process that just ended
            continue
        ticks += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of proc(5))
    return ticks / os.sysconf("SC_CLK_TCK")


def _rss_mb(pid: int) -> dict[str, float]:
    """Resident memory of the server's process tree, now and at its peak (the sum of each process's peak)."""
    total = {"VmRSS": 0.0, "VmHWM": 0.0}
    for member in _tree(pid):
        try:
            status = Path(f"/proc/{member}/status").read_text()
        except OSError:  # a process that just ended
            continue
        for name in total:
            total[name] += float(re.search(rf"{name}:\s+(\d+) kB", status).group(1)) / 1024  # type: ignore[union-attr]
    return {"rss_mb": round(total["VmRSS"], 1), "peak_rss_mb": round(total["VmHWM"], 1)}


async def load(url: str, clients: int, queries: list[str], requests: int, settings: dict[str, Any],
               headers: dict[str, str]) -> dict[str, Any]:  # fmt: skip
    """`clients` concurrent clients, each sending one-query requests back to back, `requests` in all."""
    import httpx

    latencies: list[float] = []
    errors: list[str] = []
    sent = iter(range(requests))
    cpu = time.process_time()

    async def client(session: httpx.AsyncClient) -> None:
        for n in sent:
            t0 = time.perf_counter()
            try:
                response = await session.post("/search", json={"queries": [queries[n % len(queries)]], **settings})
                if response.status_code != 200 or len(response.json()["results"]) != 1:
                    errors.append(f"{response.status_code}: {response.text[:200]}")
            except httpx.HTTPError as error:
                errors.append(repr(error))
            latencies.append(time.perf_counter() - t0)

    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits, headers=headers) as session:
        await session.post("/search", json={"queries": [queries[0]], **settings})  # the connection pool warmed
        info = (await session.get("/info")).json()
        before = info["batches"]
        started = time.perf_counter()
        await asyncio.gather(*(client(session) for _ in range(clients)))
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        after = (await session.get("/info")).json()["batches"]
    batches = after["run"] - before["run"]
    return {"clients": clients, "requests": requests, "errors": len(errors), "first_errors": errors[:3],
            "p50_ms": 1e3 * statistics.median(latencies), "p99_ms": 1e3 * _percentile(latencies, 0.99),
            "throughput_qps": requests / wall,
            # the benchmark's own CPU (httpx, JSON), on the cores the server has: a share of the wall time
            "client_cpu_busy": round(cpu / wall, 2),
            "queries_per_batch": round((after["queries"] - before["queries"]) / max(1, batches), 2),
            "search_threads": info.get("batching", {}).get("search_threads", 1),
            "query_precision": info.get("query_precision"),  # what the server embeds queries at (None: before it said)
            # the share of the wall time the worker's search threads (the index; summed over them, so above 1 when
            # several search at once) and its model thread (the query encoder, pipelined with it) were busy
            "worker_busy": round((after["busy_s"]["search"] - before["busy_s"]["search"]) / wall, 2),
            "model_busy": round((after["busy_s"]["model"] - before["busy_s"]["model"]) / wall, 2)}  # fmt: skip


def tiny_index(work: Path, documents: int = 200) -> Path:
    """A tiny index for smoke runs: the random 2-layer BERT, `documents` synthetic texts, FAISS, no quantization."""
    import lengthwise as lw
    from lengthwise.longdoc import LongDocConfig
    from lengthwise.testing import tiny_bert

    tiny_bert(work / "hf", work / "st", max_positions=128, max_seq_length=64)
    rng = random.Random(0)
    words = WORDS.split()

    def text() -> str:
        return ". ".join(" ".join(rng.choices(words, k=rng.randint(6, 14))) for _ in range(rng.randint(2, 12)))

    rows = [{"_id": f"doc{i}", "text": text()} for i in range(documents)]
    (work / "corpus.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    long = LongDocConfig(strategy="multi-vector", window=24, stride=12)
    lw.encode(work / "corpus.jsonl", work / "emb", model=str(work / "st"), long=long)
    lw.LongIndex.build(work / "emb", work / "idx", quantize="none", engine="faiss")
    return work / "idx"


def _goals(local: dict[str, Any], levels: list[dict[str, Any]]) -> dict[str, Any]:
    by = {level["clients"]: level for level in levels}
    goals: dict[str, Any] = {"zero_errors": all(level["errors"] == 0 for level in levels)}
    if 8 in by:
        goals["p50_8_over_in_process"] = round(by[8]["p50_ms"] / local["p50_ms"], 2)
        goals["p50_8_within_2x"] = goals["p50_8_over_in_process"] <= 2.0
    if 1 in by and 32 in by:
        goals["throughput_32_over_1"] = round(by[32]["throughput_qps"] / by[1]["throughput_qps"], 2)
        goals["throughput_32_at_least_4x"] = goals["throughput_32_over_1"] >= 4.0
    return goals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("index", type=Path, nargs="?", help="a folder written by `lengthwise index build`")
    parser.add_argument("--tiny", action="store_true", help="build a tiny index here and serve that (smoke run)")
    parser.add_argument("--clients", default="1,8,32", help="concurrencies, comma-separated")
    parser.add_argument("--requests", type=int, default=10_000, help="requests per concurrency")
    parser.add_argument("--local-requests", type=int, default=None, help="in-process calls (default: --requests)")
    parser.add_argument("--queries", type=Path, default=None, help="JSONL of queries (text)")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--mode", default=None, help="dense, lexical or hybrid (default: the index's)")
    parser.add_argument("--passages", type=int, default=0)
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="serve --workers N (each loads the model and the "
        "index; worker busy and queries per batch are then one worker's, from its /info)",
    )
    parser.add_argument(
        "--server-threads",
        type=int,
        default=None,
        help="OMP_NUM_THREADS for the server only (default: "
        "inherited); the in-process baseline keeps this process's threads",
    )
    parser.add_argument("--max-batch", type=int, default=64)
    parser.add_argument("--batch-wait-ms", type=float, default=2.0)
    parser.add_argument("--api-key-file", type=Path, default=None, help="serve with this API key (and send it)")
    parser.add_argument(
        "--search-threads",
        default=None,
        help="serve --search-threads N; several, comma-separated "
        "(`default`: the flag left out), compare servers in one run: each started afresh in turn",
    )
    parser.add_argument("--precision", default=None, help="serve --precision P (the queries' precision); several, "
                        "comma-separated (`default`: the flag left out), compare servers in one run; with "
                        "--search-threads, a server for each pair (issue 48: bf16 queries)")  # fmt: skip
    parser.add_argument("--reference", type=Path, default=None, help="the src folder of another checkout (an "
                        "earlier commit, in a git worktree): its server is one more arm, `reference`, started in turn "
                        "with the others, so the two versions are compared in one run")  # fmt: skip
    parser.add_argument("--reference-index", type=Path, default=None, help="the index folder the reference serves "
                        "(one of the layout it reads; default: INDEX)")  # fmt: skip
    parser.add_argument("--rounds", type=int, default=1, help="with several --search-threads: rounds of all of "
                        "them, in the order A B, then B A, …")  # fmt: skip
    parser.add_argument(
        "--tokens",
        type=Path,
        default=None,
        help="a token folder: also serve with --tokens it (at each --search-threads), arms beside the default "
        "server's, alternated over --rounds",
    )
    parser.add_argument("--token-depths", default=None, help="with --tokens: a token server at each --token-depth "
                        "too, comma-separated (`default`: the flag left out), e.g. default,30")  # fmt: skip
    parser.add_argument("--out", type=Path, default=None, help="write the figures here as JSON")
    args = parser.parse_args()
    if (args.index is None) == (not args.tiny):
        parser.error("give an INDEX folder or --tiny")
    settings = {"k": args.k, "passages": args.passages, **({"mode": args.mode} if args.mode else {})}
    with tempfile.TemporaryDirectory(prefix="bench-serve-") as scratch:
        folder = tiny_index(Path(scratch)) if args.tiny else args.index
        report = run(folder, args, settings, Path(scratch))
    print(json.dumps(report, indent=2))
    if args.out is not None:
        from benchmarks._measure import command_line
        from lengthwise.core.results import environment, write_json_atomic

        write_json_atomic(args.out, {**report, "command": command_line("benchmarks.serve.serve"),
                                     "environment": environment()})  # fmt: skip


def _described(index: Any, mode: str | None) -> dict[str, Any]:
    """What was measured: the index's size and model, the mode searched (the index's default resolved: hybrid only
    while its lexical side is there), and the threads the search may use."""
    import torch

    return {"windows": index.settings["windows"], "documents": index.settings["documents"],
            "model": index.settings.get("model"), "copied": index.settings["encode_settings"].get("copied"),
            "mode": index.search_mode(mode).value, "torch_threads": torch.get_num_threads(),
            "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS")}  # fmt: skip


def run(folder: Path, args: argparse.Namespace, settings: dict[str, Any], scratch: Path) -> dict[str, Any]:
    import lengthwise as lw

    started = time.perf_counter()
    index = lw.LongIndex.open(folder)
    described = _described(index, args.mode)  # a mode the index cannot search refuses here, before any timing
    queries = _queries(index, args.queries, 1000, seed=0)
    del index
    print(f"{described['windows']:,} windows, mode {described['mode']}, {len(queries)} queries", file=sys.stderr)
    load_before, local_started = _load(), time.perf_counter()
    local = in_process(folder, queries, args.local_requests or args.requests, settings)
    local["seconds"] = round(time.perf_counter() - local_started)  # the model's load and the warm-up included
    print(f"in-process: p50 {local['p50_ms']:.2f} ms, p99 {local['p99_ms']:.2f} ms", file=sys.stderr)
    extra = ["--max-batch", str(args.max_batch), "--batch-wait-ms", str(args.batch_wait_ms)]
    extra += ["--workers", str(args.workers)] if args.workers > 1 else []
    headers = {}
    if args.api_key_file is not None:  # a served index behind a key: the benchmark sends it
        extra += ["--api-key-file", str(args.api_key_file)]
        headers["Authorization"] = "Bearer " + args.api_key_file.read_text(encoding="utf-8").strip()
    serve = {"folder": folder, "extra": extra, "log": scratch / "server.log", "threads": args.server_threads,
             "queries": queries, "settings": settings, "headers": headers, "requests": args.requests,
             "clients": [int(c) for c in args.clients.split(",")]}  # fmt: skip
    arms = (args.search_threads or "default").split(",")
    if args.precision is not None:  # each query precision (`default`: the flag left out), with each search threads
        chosen = [p if p == "default" else f"precision={p}" for p in args.precision.split(",")]
        arms = chosen if args.search_threads is None else [f"{t}+{p}" for t in arms for p in chosen]
    if args.tokens is not None:  # the default server against one rescoring by these tokens (issue 64), at each
        threads = (args.search_threads or "default").split(",")  # --search-threads asked, and --token-depths
        depths = ["" if d == "default" else f"depth={d}+" for d in (args.token_depths or "default").split(",")]
        arms = [*arms, *(f"{d}tokens={args.tokens}" if t == "default" else f"{t}+{d}tokens={args.tokens}"
                         for t in threads for d in depths)]  # fmt: skip
    if args.reference is not None:
        serve["reference"] = {"source": args.reference, "index": args.reference_index or folder}
        arms.append(REFERENCE)
        if args.tokens is not None:  # the earlier checkout's token stage too: both stages' ratios from one run
            arms.append(f"{REFERENCE}+tokens={args.tokens}")
    report = {"index": str(folder) if not args.tiny else "tiny (random 2-layer BERT, 200 documents)",
              "measured": described, "queries": {"file": str(args.queries) if args.queries else None,
                                                 "distinct": len(queries)},
              "settings": settings, "batching": {"max_batch": args.max_batch, "wait_ms": args.batch_wait_ms},
              "workers": args.workers, "server_threads": args.server_threads or os.environ.get("OMP_NUM_THREADS"),
              "in_process": local}  # fmt: skip
    if args.reference is not None:
        report["reference"] = {"source": str(args.reference), "commit": _commit(args.reference),
                               "index": str(serve["reference"]["index"])}  # fmt: skip
    if len(arms) == 1 and args.rounds == 1:
        levels, code = served(serve, arms[0])
        report |= {"served": levels, "goals": _goals(local, levels), "server_exit": code}
    else:
        report["compared"] = compared(serve, arms, args.rounds)
    return report | {"seconds": round(time.perf_counter() - started), "cpus": os.cpu_count(),
                     "load_average": {"before": load_before, "after": _load()}}  # fmt: skip


REFERENCE = "reference"  # the arm of --reference: another checkout's server


def _commit(source: Path) -> str | None:
    """The commit checked out where `source` is (None outside a git checkout)."""
    found = subprocess.run(["git", "-C", str(source), "rev-parse", "HEAD"], capture_output=True, text=True)
    return found.stdout.strip() or None


def _arm_flags(arm: str) -> list[str]:
    """`serve`'s flags for one arm: ``default`` (none), ``precision=P`` (an arm of --precision), ``tokens=FOLDER``
    and ``depth=N`` (--tokens, --token-depths), a number of search threads (an arm of --search-threads), or several
    joined by ``+``."""
    if "+" in arm:
        return [flag for part in arm.split("+") for flag in _arm_flags(part)]
    if arm == "default":
        return []
    if arm.startswith("precision="):
        return ["--precision", arm.removeprefix("precision=")]
    if arm.startswith("tokens="):
        return ["--tokens", arm.removeprefix("tokens=")]
    if arm.startswith("depth="):
        return ["--token-depth", str(int(arm.removeprefix("depth=")))]
    return ["--search-threads", str(int(arm))]


def served(serve: dict[str, Any], arm: str) -> tuple[list[dict[str, Any]], int]:
    """One server (`serve`'s folder and flags, and the arm's --search-threads) started, loaded at each concurrency
    in turn, and stopped: each level's figures, and the server's exit status."""
    if arm.split("+")[0] == REFERENCE:  # another checkout's lengthwise, on its own index folder, with the flags of its
        source, folder = serve["reference"]["source"], serve["reference"]["index"]  # day (and its token stage)
        extra = serve["extra"] + _arm_flags(arm.removeprefix(REFERENCE).removeprefix("+") or "default")
    else:
        source, folder, extra = None, serve["folder"], serve["extra"] + _arm_flags(arm)
    process, url = start_server(folder, extra, serve["log"], serve["threads"], source)
    levels = []
    try:
        for clients in serve["clients"]:
            level_started, cpu = time.perf_counter(), _cpu_s(process.pid)
            level = asyncio.run(load(url, clients, serve["queries"], serve["requests"], serve["settings"],
                                     serve["headers"])) | _rss_mb(process.pid)  # fmt: skip
            wall, cpu = time.perf_counter() - level_started, _cpu_s(process.pid) - cpu
            # the server's CPU over the level (its warm-up request and two /info calls too): cores kept busy, and
            # CPU milliseconds a query (beside the client's own share, client_cpu_busy)
            level["server_cpu_busy"] = round(cpu / wall, 2)
            level["server_cpu_ms_per_query"] = round(1e3 * cpu / serve["requests"], 2)
            level["seconds"], level["load"] = round(wall), _load()
            print(f"{clients:>3} clients ({arm} search threads: {level['search_threads']}): p50 "
                  f"{level['p50_ms']:.2f} ms, p99 {level['p99_ms']:.2f} ms, {level['throughput_qps']:.1f} q/s, "
                  f"{level['queries_per_batch']} queries/batch, search threads busy {level['worker_busy']:.0%}, "
                  f"model thread {level['model_busy']:.0%}, server CPU {level['server_cpu_busy']:.2f} cores, "
                  f"{level['errors']} errors, RSS {level['rss_mb']} MB, "
                  f"load {level['load'][0]}", file=sys.stderr)  # fmt: skip
            levels.append(level)
    finally:
        process.terminate()
        code = process.wait(timeout=120)
    return levels, code


def compared(serve: dict[str, Any], arms: list[str], rounds: int) -> dict[str, Any]:
    """Servers with each of `arms`' search threads, started afresh in turn for `rounds` rounds (A B, B A, …, so a
    drift of the machine's load falls on both): every round's levels per arm, the median throughput and p50 per
    arm and concurrency, and each arm's median throughput over the first arm's."""
    runs: dict[str, list[dict[str, Any]]] = {arm: [] for arm in arms}
    for number in range(rounds):
        for arm in arms if number % 2 == 0 else arms[::-1]:
            levels, code = served(serve, arm)
            runs[arm].append({"round": number, "levels": levels, "server_exit": code})
    summary: dict[str, Any] = {}
    for arm, done in runs.items():
        summary[arm] = {
            str(clients): {
                "search_threads": done[0]["levels"][n]["search_threads"],
                "throughput_qps": statistics.median(run["levels"][n]["throughput_qps"] for run in done),
                "p50_ms": statistics.median(run["levels"][n]["p50_ms"] for run in done),
                "errors": sum(run["levels"][n]["errors"] for run in done),
            }
            for n, clients in enumerate(serve["clients"])
        }
        for clients, row in summary[arm].items():
            row["over_first"] = round(row["throughput_qps"] / summary[arms[0]][clients]["throughput_qps"], 3)
    return {"arms": arms, "rounds": rounds, "runs": runs, "median": summary}  # fmt: skip


if __name__ == "__main__":
    main()
