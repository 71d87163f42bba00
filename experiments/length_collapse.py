"""Study 6 — length collapse and the attention filter rate σ_a (length-collapse paper, Figs. 1–3), two ways.

1. Controlled: the same long IMDB reviews (≥ 510 content tokens under every model's tokenizer) cut to their
   first k tokens, k ∈ {32, 64, 128, 256, 512}. Topic and source are fixed; only length changes. Per k:
   the mean pairwise cosine and mean distance to the centroid of the embeddings (`--collapse`) and σ_a
   per layer (`--attention-all-layers`).
2. Natural: a seeded sample of IMDB test reviews by length bin (64 content tokens wide), N = 512 — what
   `lengthwise audit --docs … --collapse --attention` reports for a real collection, where length and
   content vary together.

Every number comes from the public `lengthwise audit` command (`--docs-first-k` for the cut); this script
only picks documents and collects `audit.json` sections into OUT/summary.json. Default models: the offline
all-MiniLM-L6-v2 and, when `offline-models.sh --mpnet` has assembled it, all-mpnet-base-v2. No training.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import SHARED, lengthwise_cli, read_json, start_study, study_models

PAPER = (
    "length-collapse paper: longer texts' embeddings crowd together (higher mean pairwise cosine, Fig. 1) and "
    "σ_a falls with length (a stronger low-pass filter, Thm. 3 / Fig. 3), on ANCE, GIST, BGE and E5"
)


def _reviews() -> list[str]:
    with gzip.open(SHARED / "imdb" / "test.jsonl.gz", "rt", encoding="utf-8") as handle:
        return [json.loads(line)["text"] for line in handle]


def write_long_docs(out: Path, models: dict[str, str], count: int, seed: int) -> dict[str, Any]:
    """`count` seeded IMDB test reviews with ≥ 510 content tokens under every model's tokenizer."""
    from transformers import AutoTokenizer

    texts = _reviews()
    tokenizers = [AutoTokenizer.from_pretrained(path) for path in models.values()]
    long = [
        text
        for text in texts
        if len(text) > 1500  # cheap pre-filter: 510 tokens need well over 1,500 characters
        and all(len(tok(text, add_special_tokens=False)["input_ids"]) >= 510 for tok in tokenizers)
    ]
    chosen = sorted(random.Random(seed).sample(range(len(long)), min(count, len(long))))
    path = out / "long_reviews.jsonl"
    path.write_text("".join(json.dumps({"text": long[i]}) + "\n" for i in chosen), encoding="utf-8")
    return {"file": str(path), "n_docs": len(chosen), "eligible": len(long), "source": "imdb/test.jsonl.gz"}


def _audit(model: str, docs: Path, out: Path, extra: list[str], args: argparse.Namespace) -> dict[str, Any]:
    """`lengthwise audit --docs DOCS --collapse --attention-all-layers EXTRA` (2-pair placeholder attack)."""
    wall = lengthwise_cli(
        ["audit", "--model", model, "--max-pairs", "2", "--elongate", "2", "--no-curve", "--no-shuffle",
         "--null-permutations", "0", "--docs", str(docs), "--collapse", "--attention-all-layers",
         "--max-length", "512", "--batch-size", str(args.batch_size), "--seed", str(args.seed), "--out", str(out),
         *extra],
        out.parent / f"{out.name}.log",  # not with_suffix: "t0.9" has a dot
    )  # fmt: skip
    diagnostics = read_json(out / "audit.json")["diagnostics"]
    return {"collapse": diagnostics["collapse"]["by_bin"], "attention": diagnostics["attention"],
            "tokens": diagnostics["tokens"], "wall_s": round(wall, 1)}  # fmt: skip


def controlled(model: str, docs: Path, out: Path, args: argparse.Namespace) -> list[dict[str, Any]]:
    """One audit per k on the same documents cut to k tokens (specials included): one bin each."""
    rows = []
    for k in (int(x) for x in args.ks.split(",")):
        result = _audit(model, docs, out / f"k{k}", ["--docs-first-k", str(k), "--attention-per-bin", "0"], args)
        (collapse,), (sigma,) = result["collapse"], result["attention"]["by_bin"]
        rows.append({"k": k, "n": collapse["n"], "mean_cosine": collapse["mean_cosine"],
                     "centroid_distance": collapse["mean_distance_to_centroid"],
                     "sigma_mean": sigma["sigma_mean"], "sigma_std": sigma["sigma_std"],
                     "sigma_per_layer": sigma["per_layer_mean"], "wall_s": result["wall_s"]})  # fmt: skip
        print(f"  k={k}: cosine {collapse['mean_cosine']:.3f}, σ_a {sigma['sigma_mean']:.3f}", flush=True)
    return rows


def natural(model: str, out: Path, args: argparse.Namespace) -> dict[str, Any]:
    """IMDB test reviews by length bin, N = 512."""
    extra = ["--max-docs", str(args.natural_docs), "--attention-per-bin", str(args.attention_per_bin),
             "--bin-width", "64"]  # fmt: skip
    return _audit(model, SHARED / "imdb" / "test.jsonl.gz", out / "natural", extra, args)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("experiments/runs/length_collapse"))
    parser.add_argument("--models", default=None, help="name=path,… (default: MiniLM, plus MPNet if installed)")
    parser.add_argument("--model", default=None, help=argparse.SUPPRESS)  # open_study's field; see --models
    parser.add_argument("--long-docs", type=int, default=64, help="long reviews in the controlled part")
    parser.add_argument("--ks", default="32,64,128,256,512", help="cut lengths k (tokens, specials included)")
    parser.add_argument("--natural-docs", type=int, default=300, help="IMDB test reviews in the natural part")
    parser.add_argument("--attention-per-bin", type=int, default=20, help="σ_a documents per bin (natural part)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    args, _, summary = start_study(parser, argv, "length_collapse")
    models = study_models(args.models)
    docs = write_long_docs(args.out, models, args.long_docs, args.seed)
    summary.payload = {"paper": PAPER, "controlled_docs": docs, "models": {}, "training": "none (inference only)"}
    for name, path in models.items():
        print(f"{name}", flush=True)
        entry: dict[str, Any] = {"path": path}
        summary.payload["models"][name] = entry
        entry["controlled"] = controlled(path, Path(docs["file"]), args.out / name, args)
        summary.write()
        entry["natural"] = natural(path, args.out / name, args)
        summary.write()
    summary.write()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
