"""Hybrid long-document search: dense windows, BM25 and their fusion, measured through the product's own path.

The command line, run from the repository root: ``python -m benchmarks.search.hybrid STAGE`` with a stage of
`STAGES` or the commands ``engine-run`` (one engine of ``engines``, in its own process), ``choose`` (the rule applied
again to the recorded table, written back), ``scale-model`` and ``table``. Every stage writes its section of
docs/results/bench_hybrid.json; benchmarks/README.md describes each.

    nice -n 5 python -m benchmarks.search.hybrid quality --threads 1
    nice -n 5 python -m benchmarks.search.hybrid quality --threads 2 --model DIR/all-mpnet-base-v2 --sets qmsum,scifact
    nice -n 5 python -m benchmarks.search.hybrid engines --docs 100000
    nice -n 5 python -m benchmarks.search.hybrid scale --windows 1000000
    nice -n 5 python -m benchmarks.search.hybrid scale --windows 1000000 --granularity both --fusion default
    nice -n 5 python -m benchmarks.search.hybrid scale-model --windows 1000000
    nice -n 5 python -m benchmarks.search.hybrid text-side --docs 50000 --label after
    nice -n 5 python -m benchmarks.search.hybrid window-query --docs 335000
    nice -n 5 python -m benchmarks.search.hybrid tuned
    nice -n 5 python -m benchmarks.search.hybrid duplicated --docs 200
    nice -n 5 python -m benchmarks.search.hybrid aggregations --dev-per-length 20
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from benchmarks.search.hybrid._common import DEFAULT_MODEL, ROOT, _read, _write
from benchmarks.search.hybrid._rule import RULE, SETS, choose
from benchmarks.search.hybrid.duplicated import stage_duplicated
from benchmarks.search.hybrid.engines import _engine_run, stage_engines
from benchmarks.search.hybrid.quality import stage_aggregations, stage_quality, stage_tuned
from benchmarks.search.hybrid.recall import stage_recall
from benchmarks.search.hybrid.scale import record_scale_model, stage_scale, stage_scale_depth
from benchmarks.search.hybrid.table import markdown_table
from benchmarks.search.hybrid.text_side import stage_text_side, stage_window_query

STAGES = {"quality": stage_quality, "engines": stage_engines, "recall": stage_recall, "scale": stage_scale,
          "scale-depth": stage_scale_depth,
          "text-side": stage_text_side, "window-query": stage_window_query, "tuned": stage_tuned,
          "duplicated": stage_duplicated, "aggregations": stage_aggregations}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("stage", choices=[*STAGES, "engine-run", "choose", "scale-model", "table"])
    parser.add_argument("engine", nargs="?", default="bm25s")
    parser.add_argument("--work", type=Path, default=Path("/tmp/lengthwise-bench-hybrid"))
    parser.add_argument("--qmsum", type=Path, default=ROOT / "data" / "qmsum")
    parser.add_argument("--newsgroups", type=Path, default=ROOT / "data" / "newsgroups")
    parser.add_argument("--replies", type=Path, default=ROOT / "data" / "replies")
    parser.add_argument("--scifact", type=Path, default=ROOT.parent / "shared" / "data" / "scifact")
    parser.add_argument("--model", default=DEFAULT_MODEL,
                        help="quality: another model checks the default on a second model family")  # fmt: skip
    parser.add_argument("--synthetic-work", type=Path, default=Path("/tmp/lengthwise-bench-hybrid-n50"),
                        help="aggregations: the quality run's work folder of the passkey and needle sets")  # fmt: skip
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--per-length", type=int, default=10)
    parser.add_argument("--dev-per-length", type=int, default=4)
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--windows", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3, help="scale: alternated repeats of each mode (medians)")
    parser.add_argument("--recall-queries", type=int, default=100)
    parser.add_argument("--depths", default="100,200,400,1000", type=lambda v: [int(d) for d in v.split(",")],
                        help="scale-depth: the proposal depths (documents each side proposes) to compare")  # fmt: skip
    parser.add_argument("--granularity", choices=["window", "document", "both"], default="window",
                        help="scale: the lexical side's granularity (document, both: in lexical-document, "
                        "lexical-both)")  # fmt: skip
    parser.add_argument("--fusion", choices=["convex", "default"], default="convex",
                        help="scale: convex at weight 0.1 (the figures before issue 49) or the library's default "
                        "fusion (z-score over the proposals)")  # fmt: skip
    parser.add_argument("--build-only", action="store_true",
                        help="scale: build both sides, record their figures; time queries in a later run")  # fmt: skip
    parser.add_argument("--label", default="current",
                        help="text-side: the code measured (e.g. before / after); scale: a suffix of the section's "
                        "key, to record a re-run beside the figures of the plain key")  # fmt: skip
    parser.add_argument("--orders", default="same,shuffled", type=lambda v: v.split(","),
                        help="text-side: the corpus file in the index's order (same), shuffled, or both")  # fmt: skip
    parser.add_argument("--sets", default=",".join(SETS), type=lambda v: v.split(","))
    parser.add_argument("--section", default="quality",
                        help="table: the results section (quality, or quality_models.all-mpnet-base-v2)")  # fmt: skip
    args = parser.parse_args()
    if args.stage in STAGES:
        STAGES[args.stage](args)
    elif args.stage == "table":
        print(markdown_table(args.section))
    elif args.stage == "scale-model":
        print(record_scale_model(args.windows, args.work))
    elif args.stage == "engine-run":
        print(json.dumps(_engine_run(args.engine, args.docs, args.work)))
    else:  # the rule applied again to the recorded table (after an amendment of the rule), written back
        quality = _read()["quality"]
        quality = {**{k: v for k, v in quality.items() if k != "environment"}, "rule": RULE}
        _write("quality", {**quality, "choice": choose(quality["table"])})
        print(json.dumps(quality["choice"] if "choice" in quality else choose(quality["table"]), indent=1))


if __name__ == "__main__":
    main()
