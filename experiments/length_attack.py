"""Study 1 — length attack (length-attack paper, Table 1): copy-and-concat vs plain pairs, mean and CLS pooling.

1. A seeded mix of short positive pairs from the shared data (MRPC train paraphrases, Twitter URL paraphrases,
   SNLI dev entailment, Flickr8k caption pairs; equal shares) is written to OUT/pairs.jsonl.
2. all-MiniLM-L6-v2 is trained on it four times with `lengthwise.training.run_training`: `pairs` (the default InfoNCE)
   and `copy-concat` (ours, N = 512 as in the paper), each with mean and with CLS pooling.
3. Attack: `lengthwise audit --preset first64x8` (first 64 tokens vs 8 copies = 512 tokens) on every same-topic
   SciFact document pair (two abstracts relevant to one claim; written to OUT/same_topic.jsonl from
   `lengthwise.core.data.read_pairs`), for the untrained start and the four models. JSD of the cosine distributions.
4. Length probe: `lengthwise audit --docs corpus --probe --max-length 512` on a seeded SciFact corpus sample:
   5-fold CV R² × 100 of a linear regression embedding → token length (least squares as the paper; ridge too).

    nice -n 5 python experiments/length_attack.py                       # default scale (≈ 30 min, idle 2 cores)
    nice -n 5 python experiments/length_attack.py --steps 200 --batch-size 64 --probe-docs 2000   # larger

Writes OUT/summary.json after every finished step (a cut-short run keeps what it finished).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import SHARED, lengthwise_cli, read_json, start_study

SOURCES = {
    "mrpc_train": "mrpc/msr_paraphrase_train.txt.gz",
    "twitter_url": "twitter_url_corpus/test.jsonl.gz",
    "snli_dev_entailment": "snli_senteval/dev.jsonl.gz",
    "flickr8k_captions": "flickr8k_captions/captions_by_image.jsonl.gz",
}
PAPER = {  # length-attack Table 1, 1 epoch (QQP → ArguAna, from a vanilla encoder)
    "mean": {"default_jsd": 0.67, "ours_jsd": 0.068, "default_r2": 99.47, "ours_r2": 98.87},
    "cls": {"default_jsd": 0.52, "ours_jsd": 0.127, "default_r2": 92.57, "ours_r2": 86.47},
}


def write_pairs(out: Path, n: int, seed: int) -> dict[str, Any]:
    """A seeded mix of `n` positive pairs, an equal share per source, shuffled, as JSONL anchor/positive."""
    from lengthwise.training.data import read_training_data

    share = -(-n // len(SOURCES))
    rows: list[tuple[str, str, str]] = []
    counts = {}
    for name, rel in SOURCES.items():
        data = read_training_data(SHARED / rel, max_examples=share, seed=seed)
        rows += [(name, a, b) for a, b in data.pairs]
        counts[name] = len(data.pairs)
    random.Random(seed).shuffle(rows)
    rows = rows[:n]
    path = out / "pairs.jsonl"
    path.write_text("".join(json.dumps({"anchor": a, "positive": b, "source": s}) + "\n" for s, a, b in rows))
    return {"file": str(path), "n_pairs": len(rows), "drawn_per_source": counts, "seed": seed}


def write_same_topic(out: Path, max_pairs: int, seed: int) -> dict[str, Any]:
    """SciFact same-topic document pairs (both relevant to one claim) as JSONL text1/text2."""
    from lengthwise.core.data import read_pairs

    pairs = [p for p in read_pairs(SHARED / "scifact", max_pairs=100_000, seed=seed).pairs if p.kind == "same_topic"]
    if max_pairs and len(pairs) > max_pairs:
        pairs = random.Random(seed).sample(pairs, max_pairs)
    path = out / "same_topic.jsonl"
    path.write_text("".join(json.dumps({"text1": p.text1, "text2": p.text2}) + "\n" for p in pairs))
    return {"file": str(path), "n_pairs": len(pairs), "source": str(SHARED / "scifact")}


def jsd_noise_floor(before: Any, bins: int, seed: int, repeats: int = 50) -> float:
    """Mean JSD between the `before` cosines and bootstrap resamples of themselves: what sampling alone gives."""
    import numpy as np

    from lengthwise.audit.config import HistogramSpec
    from lengthwise.audit.pairs.shift import js_distance

    rng = np.random.default_rng(seed)
    values = np.asarray(before)
    draws = [
        js_distance(values, rng.choice(values, size=len(values)), HistogramSpec(bins=bins)) for _ in range(repeats)
    ]
    return float(np.mean(draws))


def attack(model: str, pairs: Path, out: Path, batch_size: int) -> dict[str, Any]:
    """first64x8 attack; JSD at the audit's 100 bins and at 20 bins (less sparse for a few hundred pairs)."""
    import numpy as np

    from lengthwise.audit.config import HistogramSpec
    from lengthwise.audit.pairs.shift import js_distance, js_distance_null

    wall = lengthwise_cli(
        ["audit", "--model", model, "--pairs", str(pairs), "--preset", "first64x8", "--no-curve", "--no-shuffle",
         "--batch-size", str(batch_size), "--out", str(out)],
        out.with_suffix(".log"),
    )  # fmt: skip
    audit = read_json(out / "audit.json")
    before, after = (np.asarray(audit["similarities"][k]) for k in ("before", "after"))
    return {
        **{k: audit["attack"][k] for k in ("n", "mean_before", "mean_after", "mean_shift", "frac_increased")},
        "jsd": audit["attack"]["js_distance"],
        "jsd_20_bins": js_distance(before, after, HistogramSpec(bins=20)),
        "jsd_noise_floor": jsd_noise_floor(before, 100, 0),
        "jsd_20_bins_noise_floor": jsd_noise_floor(before, 20, 0),
        "jsd_null": audit["attack"]["js_null"],  # the audit's paired permutation null (level, 95 %, p-value)
        "jsd_20_bins_null": js_distance_null(before, after, HistogramSpec(bins=20)).to_dict(),
        "wall_s": round(wall, 1),
    }


def probe(model: str, pairs: Path, out: Path, docs: int, batch_size: int, seed: int) -> dict[str, Any]:
    """Length probe on SciFact abstracts at N = 512 (the pair attack here is a 2-pair placeholder)."""
    wall = lengthwise_cli(
        ["audit", "--model", model, "--pairs", str(pairs), "--max-pairs", "2", "--elongate", "2", "--no-curve",
         "--no-shuffle", "--docs", str(SHARED / "scifact" / "corpus.jsonl.gz"), "--probe", "--max-docs", str(docs),
         "--max-length", "512", "--batch-size", str(batch_size), "--seed", str(seed), "--out", str(out)],
        out.with_suffix(".log"),
    )  # fmt: skip
    result = read_json(out / "audit.json")["diagnostics"]["probe"]
    return {"probe": result, "wall_s": round(wall, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("experiments/runs/length_attack"))
    parser.add_argument("--model", default=None, help="starting model (default: the offline all-MiniLM-L6-v2)")
    parser.add_argument("--steps", type=int, default=10, help="training steps per run (one pass over the mix)")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--lr", type=float, default=1e-4, help="paper: 3e-5 over a full epoch; raised for few steps")
    parser.add_argument("--max-length", type=int, default=512, help="N for training (paper: 512)")
    parser.add_argument("--attack-pairs", type=int, default=0, help="same-topic pairs to attack (0 = all)")
    parser.add_argument("--probe-docs", type=int, default=400, help="SciFact abstracts for the length probe")
    parser.add_argument("--encode-batch", type=int, default=16)
    parser.add_argument("--poolings", default="mean,cls")
    parser.add_argument("--seed", type=int, default=42)
    args, model, summary = start_study(parser, argv, "length_attack")
    from lengthwise.training import TrainConfig, train

    pairs = write_pairs(args.out, args.steps * args.batch_size, args.seed)
    same_topic = write_same_topic(args.out, args.attack_pairs, args.seed)
    summary.payload = {"train_data": pairs, "attack_data": same_topic, "paper_table1_1_epoch": PAPER, "runs": {}}
    runs: dict[str, Any] = summary.payload["runs"]
    jobs = [("start", None, None)] + [
        (f"{method}_{pool}", method, pool) for pool in args.poolings.split(",") for method in ("pairs", "copy-concat")
    ]
    for name, method, pool in jobs:
        entry: dict[str, Any] = {"method": method, "pooling": pool or "mean (model's own)"}
        runs[name] = entry
        path = model
        if method is not None:
            run_dir = args.out / name
            shutil.rmtree(run_dir, ignore_errors=True)
            start = time.perf_counter()
            result = train(
                TrainConfig(
                    method=method, data=pairs["file"], out=str(run_dir), model=model, max_steps=args.steps,
                    batch_size=args.batch_size, max_length=args.max_length, lr=args.lr, seed=args.seed,
                    pooling=pool, save_steps=10**6, logging_steps=1,
                )
            )  # fmt: skip
            record = read_json(run_dir / "train.json")
            losses = [row["loss"] for row in record["log_history"] if "loss" in row]
            entry["train"] = {
                "steps": result.global_step, "wall_s": round(time.perf_counter() - start, 1),
                "s_per_step": round(result.train_runtime_s / max(result.global_step, 1), 2),
                "tokens_per_s": result.tokens_per_second, "loss_first": losses[:3], "loss_last": losses[-3:],
            }  # fmt: skip
            path = str(result.model_dir)
        entry["attack"] = attack(path, Path(same_topic["file"]), args.out / f"audit_{name}", args.encode_batch)
        summary.write()
        entry["length_probe"] = probe(
            path, Path(same_topic["file"]), args.out / f"probe_{name}", args.probe_docs, args.encode_batch, args.seed
        )
        summary.write()
        print(f"{name}: JSD {entry['attack']['jsd']:.3f}", flush=True)
    summary.write()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
