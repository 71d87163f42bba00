"""Study 7 — length-invariant fine-tuning: does tying each elongated text to the starting model's original take the
STS-B attack's JSD to its permutation null, and what does it cost in quality?

Arms, all from all-MiniLM-L6-v2 on study 1's seeded pair mix (`length_attack.write_pairs`), each with the
length-robust recipe's schedule (40 steps × 16 pairs, lr 5e-5, warm-up 0.1, N = 256, m random up to the window):

- ``none`` — the model as it is (evaluated here too, so every arm has per-pair values to pair with);
- ``invariant-w1`` / ``invariant-w4`` — ``--method length-invariant`` with ``invariance_weight`` 1 and 4;
- ``invariant-w1-c4`` — weight 1 plus the pairwise consistency term (every pair of the batch) at weight 4;
- ``self-w1-c4`` / ``self-c4`` — the same with the student's own originals as the reference (no teacher), and
  consistency alone;
- ``recipe`` and ``laser-self`` — study 1 at scale's arms, trained and evaluated by `length_robust.py` (their
  figures are read from docs/results/length_robust.json).

The quick evaluation (``eval``): the STS-B test attack at m = 100 with its 1,000-swap permutation null (the audit's
``stsb`` preset), the low/high similarity-quartile shifts, STS-B test and the STS12–16 average. Each stage is its
own process and writes ``OUT/<arm>-s<seed>/`` atomically, so a killed stage is simply run again::

    python experiments/length_invariant.py train invariant-w1 --seed 42
    python experiments/length_invariant.py eval invariant-w1 --seed 42
    python experiments/length_invariant.py report           # → docs/results/length_invariant.json + a table
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import SHARED, STS_TASKS, default_model, hardware, read_json, set_threads
from length_attack import write_pairs
from length_robust import QUALITY_STS, _attack, _write

ARMS: dict[str, dict[str, float]] = {
    "invariant-w1": {"invariance_weight": 1.0},
    "invariant-w4": {"invariance_weight": 4.0},
    "invariant-w1-c4": {"invariance_weight": 1.0, "consistency_weight": 4.0},
    "self-w1-c4": {"invariance_weight": 1.0, "consistency_weight": 4.0, "invariance_reference": "self"},
    "self-c4": {"invariance_weight": 0.0, "consistency_weight": 4.0, "invariance_reference": "self"},
}
REPO = Path(__file__).resolve().parents[1]


def _settings(arm: str, args: argparse.Namespace, pairs: Path) -> dict[str, Any]:
    from lengthwise.training.recipes import RECIPES

    recipe = RECIPES["length-robust"].settings
    keep = ("elongate", "lr", "warmup_ratio", "batch_size", "max_length", "max_steps")
    return {"method": "length-invariant", "data": str(pairs), **{k: recipe[k] for k in keep}, **ARMS[arm],
            "seed": args.seed, "save_steps": 20, "logging_steps": 5, "save_total_limit": None}  # fmt: skip


def stage_train(arm: str, args: argparse.Namespace) -> None:
    from lengthwise.facade import train
    from lengthwise.training.config import config_from_mapping

    pairs = args.out / "pairs.jsonl"
    if not pairs.exists():
        write_pairs(args.out, args.pairs, 42)  # one pair mix for every seed: the seed varies the training only
    run = args.out / f"{arm}-s{args.seed}" / "run"
    config = config_from_mapping({**_settings(arm, args, pairs), "out": str(run), "model": args.model})
    started, cpu = time.perf_counter(), time.process_time()
    result = train(config, resume=(run / "config.json").exists())
    _write(args.out / f"{arm}-s{args.seed}" / "train_record.json", {
        "arm": arm, "seed": args.seed, "settings": config.to_dict(), "model_dir": str(result.model_dir),
        "steps": result.global_step, "wall_s": round(time.perf_counter() - started, 1),
        "cpu_s": round(time.process_time() - cpu, 1), "load_after": os.getloadavg(), "hardware": hardware(),
    })  # fmt: skip


def stage_eval(arm: str, args: argparse.Namespace) -> None:
    from lengthwise.core.encoder import as_encoder
    from lengthwise.evaluation import evaluate_sts, read_sts
    from lengthwise.facade import load_model

    folder = args.out / (arm if arm == "none" else f"{arm}-s{args.seed}")
    model = args.model if arm == "none" else read_json(folder / "train_record.json")["model_dir"]
    path = folder / "record.json"
    record: dict[str, Any] = read_json(path) if path.exists() else {"arm": arm, "model": model}
    if "stsb_attack" not in record:
        stsb = SHARED / "stsb" / "original" / "sts-test.csv.gz"
        record["stsb_attack"] = _attack(model, stsb, folder / "audit_stsb_m100", "stsb")
        _write(path, record)
    if "sts" not in record:
        encoder = as_encoder(load_model(model))
        scores = {}
        for name in ("STS-B", *QUALITY_STS):
            scores[name] = evaluate_sts(encoder, read_sts(SHARED / STS_TASKS[name]), batch_size=64).scores["spearman"]
        record["sts"] = scores
        _write(path, record)


def _summary(record: dict[str, Any], none: dict[str, Any] | None) -> dict[str, Any]:
    import numpy as np

    from lengthwise.core.stats import paired_bootstrap

    attack = record["stsb_attack"]
    before, after = np.array(attack["before"]), np.array(attack["after"])
    quartile = before <= np.quantile(before, 0.25), before >= np.quantile(before, 0.75)
    row = {"mean_shift": attack["mean_shift"], "frac_increased": attack["frac_increased"],
           "jsd": attack["js_distance"], "null_q95": attack["js_null"]["q95"], "p": attack["js_null"]["p_value"],
           "low_quartile_shift": float((after - before)[quartile[0]].mean()),
           "high_quartile_shift": float((after - before)[quartile[1]].mean()),
           "stsb": record["sts"]["STS-B"],
           "sts12_16_avg": float(np.mean([record["sts"][t] for t in QUALITY_STS]))}  # fmt: skip
    if none is not None:
        base = none["stsb_attack"]
        shift_none = np.array(base["after"]) - np.array(base["before"])
        row["mean_shift_vs_none"] = paired_bootstrap((shift_none, after - before))
    return row


def report(args: argparse.Namespace) -> None:
    from lengthwise.core.results import write_json_atomic

    none = read_json(args.out / "none" / "record.json") if (args.out / "none" / "record.json").exists() else None
    rows = {"none": _summary(none, None)} if none else {}
    arm_seed = re.compile(rf"({'|'.join(map(re.escape, ARMS))})-s\d+")
    for folder in sorted(p for p in args.out.iterdir() if arm_seed.fullmatch(p.name)):
        if (folder / "record.json").exists():
            record = read_json(folder / "record.json")
            train = read_json(folder / "train_record.json")
            rows[folder.name] = {
                **_summary(record, none),
                "train_wall_s": train["wall_s"],
                "train_cpu_s": train["cpu_s"],
            }
    study1 = read_json(REPO / "docs" / "results" / "length_robust.json")["fixes"]
    earlier = {fix: study1[fix]["headline"] for fix in ("recipe", "laser-self") if fix in study1}
    write_json_atomic(REPO / "docs" / "results" / "length_invariant.json", {"arms": rows, "study1": earlier})
    for name, row in rows.items():
        print(name, {k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("stage", choices=("train", "eval", "report"))
    parser.add_argument("arm", nargs="?", choices=("none", *ARMS))
    parser.add_argument("--out", type=Path, default=Path("experiments/runs/length_invariant"))
    parser.add_argument("--model", default=None, help="starting model (default: the offline all-MiniLM-L6-v2)")
    parser.add_argument("--pairs", type=int, default=8000, help="training pairs in study 1's seeded four-source mix")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    set_threads(args.threads)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    args.out.mkdir(parents=True, exist_ok=True)
    args.model = args.model or default_model()
    if args.stage == "report":
        report(args)
        return 0
    if args.arm is None or (args.stage == "train" and args.arm == "none"):
        parser.error(
            f"{args.stage} needs an arm: one of {', '.join(ARMS)}" + (" or none" if args.stage == "eval" else "")
        )
    (stage_train if args.stage == "train" else stage_eval)(args.arm, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
