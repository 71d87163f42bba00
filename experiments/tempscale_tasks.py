"""Study 5, the STS and classification half: TempScale t on STS-B and 20 Newsgroups, tuned on dev, by length bin.

SciFact retrieval is `tempscale_scifact.py`. Here, for each model and each t of the grid, `lengthwise eval
--tempscale T` scores

- STS-B **dev** (the tuning split) and **test** (reported), Spearman × 100, by pair length (bins of 10 tokens);
- 20 Newsgroups (headers kept): logistic regression, MTEB style, on a stratified train sample, accuracy on a
  stratified test sample, by post length (bins of 64 tokens). The tuning split is a second, disjoint
  stratified sample of the train set scored against the first (`--task classification` on
  train-only data), so t is never picked on test.

t = 1 is the unpatched model. The tuned t is the grid point with the best dev score; its test score is set
beside t = 1's. Everything goes through the `lengthwise eval` command line; OUT/summary.json collects it.
"""

from __future__ import annotations

import argparse
import gzip
import random
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import SHARED, lengthwise_cli, read_json, start_study, study_models


def write_classification_splits(out: Path, train_n: int, dev_n: int, test_n: int, seed: int) -> dict[str, Any]:
    """20NG folders: `dev/` = two disjoint seeded train samples (train / test roles), `test/` = train + test sample."""

    def rows(name: str) -> list[str]:
        with gzip.open(SHARED / "20newsgroups" / f"{name}.jsonl.gz", "rt", encoding="utf-8") as handle:
            return handle.readlines()

    train, test = rows("train"), rows("test")
    rng = random.Random(seed)
    order = rng.sample(range(len(train)), len(train))
    fit, tune = [train[i] for i in order[:train_n]], [train[i] for i in order[train_n : train_n + dev_n]]
    scored = [test[i] for i in sorted(rng.sample(range(len(test)), test_n))]
    folders = {}
    for name, (fit_rows, score_rows) in {"dev": (fit, tune), "test": (fit, scored)}.items():
        folder = out / f"20ng_{name}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "train.jsonl").write_text("".join(fit_rows), encoding="utf-8")
        (folder / "test.jsonl").write_text("".join(score_rows), encoding="utf-8")
        folders[name] = str(folder)
    return {"folders": folders, "train": train_n, "dev": dev_n, "test": test_n, "seed": seed,
            "source": "20newsgroups/{train,test}.jsonl.gz; dev = a disjoint part of train"}  # fmt: skip


def _eval(model: str, task: str, data: str, t: float, out: Path, extra: list[str], threads_note: str) -> dict:
    wall = lengthwise_cli(
        ["eval", "--model", model, "--task", task, "--data", data, "--tempscale", str(t), "--out", str(out), *extra],
        out.parent / f"{out.name}.log",  # not with_suffix: "t0.9" has a dot
    )
    result = read_json(out / "results.json")
    return {"scores": result["scores"], "bins": result["bins"], "wall_s": round(wall, 1), "threads": threads_note}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("experiments/runs/tempscale_tasks"))
    parser.add_argument("--models", default=None, help="name=path,… (default: MiniLM, plus MPNet with --mpnet)")
    parser.add_argument("--model", default=None, help=argparse.SUPPRESS)  # open_study's field; see --models
    parser.add_argument("--mpnet", action="store_true", help="also all-mpnet-base-v2 (about 5× MiniLM's time)")
    parser.add_argument("--t", default="1.0,0.9,0.8,0.7", help="temperatures")
    parser.add_argument("--tasks", default="sts,classification")
    parser.add_argument("--train", type=int, default=600, help="20NG train posts the classifier is fitted on")
    parser.add_argument("--dev", type=int, default=400, help="20NG train posts (disjoint) scored to tune t")
    parser.add_argument("--test", type=int, default=600, help="20NG test posts scored")
    parser.add_argument("--seed", type=int, default=42)
    args, _, summary = start_study(parser, argv, "tempscale_tasks")
    grid = [float(x) for x in args.t.split(",")]
    tasks = args.tasks.split(",")
    splits = write_classification_splits(args.out, args.train, args.dev, args.test, args.seed)
    stsb = SHARED / "stsb" / "original"
    data = {
        "sts": ({"dev": str(stsb / "sts-dev.csv.gz"), "test": str(stsb / "sts-test.csv.gz")}, ["--bin-width", "10"]),
        "classification": (splits["folders"], ["--no-few-shot", "--bin-width", "64", "--all-data",
                                               "--seed", str(args.seed)]),
    }  # fmt: skip
    summary.payload = {"grid": grid, "classification_data": splits, "models": {}, "training": "none (inference)"}
    for name, path in study_models(args.models, args.mpnet).items():
        entry: dict[str, Any] = {"path": path}
        summary.payload["models"][name] = entry
        for task in tasks:
            folders, extra = data[task]
            runs: dict[str, Any] = {}
            entry[task] = {"runs": runs}
            for t in grid:
                runs[str(t)] = {
                    split: _eval(
                        path, task, folder, t, args.out / name / f"{task}_{split}_t{t}", extra, str(args.threads)
                    )
                    for split, folder in folders.items()
                }
                summary.write()
                print(f"{name} {task} t={t}: " + ", ".join(f"{s} {r['scores']}" for s, r in runs[str(t)].items()),
                      flush=True)  # fmt: skip
            metric = "spearman" if task == "sts" else "accuracy"
            best = max(grid, key=lambda t, m=metric: runs[str(t)]["dev"]["scores"][m])
            tuned, plain = runs[str(best)], runs.get("1.0")
            entry[task]["tuned"] = {"metric": metric, "t": best, "dev": tuned["dev"]["scores"][metric],
                                    "test": tuned["test"]["scores"][metric],
                                    "test_t1": plain["test"]["scores"][metric] if plain else None}  # fmt: skip
            summary.write()
    summary.write()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
