"""Benchmark: the search stage of one index, per mode, the queries already embedded: what a code change on the path
from `LongIndex.search` to the ranked hits costs or saves (issue 63 moved that path into `lengthwise.search`).

One run times one checkout of lengthwise, the one Python imports; `--compare OTHER_SRC` runs the same measurement
again in child processes with ``PYTHONPATH=OTHER_SRC`` (another checkout's ``src``), alternating the two `--rounds`
times, so both arms share one machine state. Each arm: every query searched alone (k = 10, one search thread),
`--repeats` passes, the median and p99 per query; the hits of both arms are compared id for id.

    python -m benchmarks.search.search_path INDEX --queries 40 --repeats 5
    python -m benchmarks.search.search_path INDEX --compare /path/to/old/src --rounds 3 --out docs/results/x.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._measure import command_line, p50_ms, p99_ms

MODES = ("dense", "lexical", "hybrid")
WORDS = ["meeting", "budget", "report", "project", "team", "design", "market", "plan", "review", "data", "user",
         "product", "schedule", "cost", "question", "decision"]  # fmt: skip


def _queries(count: int) -> list[str]:
    rng = np.random.default_rng(0)
    return [" ".join(rng.choice(WORDS, size=3, replace=False)) for _ in range(count)]


def measure(index_folder: Path, count: int, repeats: int) -> dict[str, Any]:
    """Per mode, p50 / p99 ms of one query's search (its vector given), and the hits' ids."""
    import lengthwise as lw

    index = lw.LongIndex.open(index_folder)
    texts = _queries(count)
    vectors = np.asarray(index.embed_queries(texts), dtype=np.float32)
    out: dict[str, Any] = {"lengthwise": str(Path(lw.__file__).parent)}
    for mode in MODES:

        def one(n: int, mode: str = mode) -> Any:
            q = n % count
            return index.search(texts[q], k=10, mode=mode, vectors=vectors[q : q + 1], search_threads=1)

        for n in range(count):  # warm
            one(n)
        times = count * repeats
        hits = [[hit.id for hit in one(n)[0]] for n in range(count)]
        out[mode] = {"p50_ms": p50_ms(one, times), "p99_ms": p99_ms(one, times), "hits": hits}
    return out


def _child(src: str | None, args: argparse.Namespace) -> dict[str, Any]:
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = src
    run = subprocess.run([sys.executable, "-m", "benchmarks.search.search_path", str(args.index), "--queries",
                          str(args.queries), "--repeats", str(args.repeats), "--json"],
                         env=env, capture_output=True, text=True, check=True)  # fmt: skip
    return json.loads(run.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("index", type=Path, help="an index folder (lengthwise index build)")
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--compare", help="another checkout's src folder: measured in alternation with this one")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, help="write the comparison here (JSON)")
    parser.add_argument("--json", action="store_true", help="print one arm's measurement as JSON (the children)")
    args = parser.parse_args()
    if args.json or not args.compare:
        print(json.dumps(measure(args.index, args.queries, args.repeats)))
        return
    arms: dict[str, list[dict[str, Any]]] = {"this": [], "other": []}
    for _ in range(args.rounds):
        arms["this"].append(_child(None, args))
        arms["other"].append(_child(args.compare, args))
    result: dict[str, Any] = {
        "command": command_line("benchmarks.search.search_path"),
        "index": str(args.index), "queries": args.queries, "repeats": args.repeats, "rounds": args.rounds,
        "load_average": os.getloadavg(),
        "arms": {name: runs[0]["lengthwise"] for name, runs in arms.items()},
    }  # fmt: skip
    for mode in MODES:
        row = {name: statistics.median(run[mode]["p50_ms"] for run in runs) for name, runs in arms.items()}
        row |= {f"{name}_p99": statistics.median(run[mode]["p99_ms"] for run in runs) for name, runs in arms.items()}
        row["ratio_this_over_other"] = row["this"] / row["other"]
        row["same_hits"] = all(a[mode]["hits"] == b[mode]["hits"] for a, b in zip(*arms.values(), strict=True))
        result[mode] = row
    print(json.dumps({k: v for k, v in result.items()}, indent=1))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
