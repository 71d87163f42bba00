"""The token encode's time against the window encode's on the same documents (issue 64's goal: ≤ 1.5×).

Both through the product, alternated in one process, each from a fresh folder: `lengthwise.encode` with the default
long-document setting (32-token windows, stride 16) and `encode_tokens` with the default codec; the first
``--docs`` QMSum meetings, ``--repeats`` times each; medians and their ratio, with the load average.

    python -m benchmarks.encode.tokens                 # writes docs/results/token_encode.json
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks._measure import command_line

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results" / "token_encode.json"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=ROOT / "data" / "qmsum" / "corpus.jsonl.gz")
    parser.add_argument("--docs", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--model", default="sentence-transformers/all-MiniLM-L6-v2")
    parser.add_argument("--out", type=Path, default=RESULTS, help="the results file (default: %(default)s)")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    torch.set_num_threads(args.threads)
    import lengthwise as lw
    from lengthwise.core.results import environment, write_json_atomic
    from lengthwise.longdoc.storage.tokens import encode_tokens

    work = Path(tempfile.mkdtemp(prefix="lengthwise-token-encode-"))
    with gzip.open(args.corpus, "rt", encoding="utf-8") as handle:
        lines = [line for line in handle if line.strip()][: args.docs]
    corpus = work / "corpus.jsonl"
    corpus.write_text("".join(lines), encoding="utf-8")
    runs = {
        "windows": lambda out: lw.encode(corpus, out, args.model, threads=args.threads),
        "tokens": lambda out: encode_tokens(corpus, out, args.model, threads=args.threads),
    }
    spent: dict[str, list[float]] = {name: [] for name in runs}
    load = [round(os.getloadavg()[0], 2)]
    for repeat in range(args.repeats):
        for name, run in runs.items():
            out = work / f"{name}-{repeat}"
            started = time.perf_counter()
            run(out)
            spent[name].append(round(time.perf_counter() - started, 2))
            print(f"{name}: {spent[name][-1]:.1f} s", flush=True)
            shutil.rmtree(out)
        load.append(round(os.getloadavg()[0], 2))
    medians = {name: statistics.median(values) for name, values in spent.items()}
    ratio = round(medians["tokens"] / medians["windows"], 3)
    write_json_atomic(args.out, {"documents": len(lines), "seconds": spent, "median_seconds": medians,
                                "ratio_tokens_to_windows": ratio, "threads": args.threads, "load": load,
                                "model": args.model, "environment": environment(),
                                "command": command_line("benchmarks.encode.tokens", argv)})  # fmt: skip
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
