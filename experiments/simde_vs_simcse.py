"""Study 4 — SimDE vs SimCSE on 20 Newsgroups (SimDE paper, Table 2): few-shot and full-set classification.

1. all-MiniLM-L6-v2 is trained with `simcse` and with `simde` on a seeded sample of the 20 Newsgroups *train*
   posts (unlabelled texts; `lengthwise.training.run_training`, same data, seed, steps, N and pooling).
2. The untrained start and both models are frozen and scored on a seeded stratified sample of the test posts:
   logistic regression on k examples per class (k = 5 as the paper, 10 repeats) and on the whole train sample
   (`lengthwise.evaluation.evaluate_classification`, what `lengthwise eval --task classification` runs).

    nice -n 5 python experiments/simde_vs_simcse.py                          # default scale
    nice -n 5 python experiments/simde_vs_simcse.py --steps 500 --batch-size 32 --max-test 2000   # larger

SimDE uses CLS pooling (METHODS §3), but the start was trained for mean pooling and its CLS vector is a poor
document embedding, so a few steps with CLS mostly measure how fast an objective repairs the pooling switch. Both
poolings are run by default (`--poolings mean,cls`), SimCSE with the same pooling as SimDE each time, so that the
two differ by objective only. The start is scored with its own mean pooling.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import SHARED, start_study, train_record

PAPER = {  # SimDE Table 2, 20News, BERT-base backbones; few-shot = 5 per class, 10 repeats
    "few_shot_5": {
        "SimCSE": {"accuracy": 42.63, "macro_f1": 41.42},
        "SimDE_bert": {"accuracy": 55.79, "macro_f1": 55.43},
    },
    "full": {"SimCSE": {"accuracy": 74.02, "macro_f1": 72.57}, "SimDE_bert": {"accuracy": 76.89, "macro_f1": 74.85}},
}


def classify(model_path: str, train: Any, test: Any, shots: tuple[int, ...], repeats: int, seed: int) -> dict[str, Any]:
    """Frozen-embedding logistic regression: full train sample and k-shot runs (scores × 100)."""
    from lengthwise.core.encoder import as_encoder
    from lengthwise.core.models import load_plain_model
    from lengthwise.evaluation import ClassificationConfig, evaluate_classification

    start = time.perf_counter()
    config = ClassificationConfig(classifiers=("logreg",), full=True, few_shot=shots, repeats=repeats, seed=seed)
    result = evaluate_classification(as_encoder(load_plain_model(model_path)), train, test, config, batch_size=16)
    runs = {run["setting"]: run["scores"] for run in result.to_dict()["runs"]}
    return {
        "runs": runs,
        "n_train": result.n_train,
        "n_test": result.n_test,
        "wall_s": round(time.perf_counter() - start, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("experiments/runs/simde_vs_simcse"))
    parser.add_argument("--model", default=None, help="starting model (default: the offline all-MiniLM-L6-v2)")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--lr", type=float, default=3e-5)
    parser.add_argument("--poolings", default="mean,cls", help="one pair of runs per pooling")
    parser.add_argument("--few-shot", default="5", help="k per class, comma-separated (paper: 5)")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--max-train", type=int, default=400, help="stratified train sample for the classifier")
    parser.add_argument("--max-test", type=int, default=400, help="stratified test sample")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument(
        "--mlm-weight",
        type=float,
        default=0.0,
        help="SimDE's auxiliary MLM weight (the library default is the paper's 0.1; the recorded study ran without)",
    )
    args, model, summary = start_study(parser, argv, "simde_vs_simcse")
    from lengthwise.evaluation import read_classification
    from lengthwise.training.config import config_from_mapping

    data = SHARED / "20newsgroups"
    train_all, test_all = read_classification(data)
    train, test = (
        train_all.stratified_sample(args.max_train, args.seed),
        test_all.stratified_sample(args.max_test, args.seed),
    )
    shots = tuple(int(k) for k in args.few_shot.split(","))
    runs: dict[str, Any] = {}
    summary.payload = {"data": str(data), "paper": PAPER, "runs": runs}
    runs["start"] = {
        "pooling": "mean (model's own)",
        "classification": classify(model, train, test, shots, args.repeats, args.seed),
    }
    summary.write()
    for pooling, method in [(p, m) for p in args.poolings.split(",") for m in ("simcse", "simde")]:
        name = f"{method}_{pooling}"
        config = config_from_mapping(dict(
            method=method, data=str(data / "train.jsonl.gz"), out=str(args.out / name), model=model,
            max_steps=args.steps, batch_size=args.batch_size, max_length=args.max_length, lr=args.lr, seed=args.seed,
            pooling=pooling, max_examples=args.steps * args.batch_size, save_steps=10**6, logging_steps=1,
            **({"mlm_weight": args.mlm_weight} if method == "simde" else {}),
        ))  # fmt: skip
        runs[name] = {"train": train_record(config)}
        summary.write()
        runs[name]["classification"] = classify(
            runs[name]["train"]["model_dir"], train, test, shots, args.repeats, args.seed
        )
        summary.write()
        print(name, runs[name]["classification"]["runs"], flush=True)
    summary.write()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
