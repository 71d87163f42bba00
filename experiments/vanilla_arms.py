"""Issue 37, part 2 — the objectives trained from one vanilla encoder, on the same texts, steps and seeds.

Every arm starts from the MLM-only encoder of ``experiments/vanilla.py`` (``--model``, default
``experiments/runs/vanilla/model``) and trains with `lengthwise.training.run_training` on the same seeded sample of
documents, with the same steps, batch, window, learning rate, pooling and seeds; only the objective differs:

- ``simcse``, ``laser-self``, ``hicl`` read each document as one text;
- ``laser-intra``, ``simde`` read the same documents and split them into sentences themselves;
- ``copy-concat`` and ``length-invariant`` are pair objectives: by default they get each document paired with
  itself (``texts.jsonl`` → ``pairs.jsonl``), so that they too see nothing but these texts and differ from SimCSE
  only by their views and losses. The length-attack paper trains copy-and-concat on supervised pairs (QQP);
  ``--pairs FILE`` gives both pair arms such pairs instead (then they no longer share the data of the others).

Pooling is mean for every arm (the vanilla model's own; SimDE's default would be CLS), so arms differ by objective
alone. Stages, one process each, each resumable, each writing ``OUT/<arm>/seed<S>/record.json`` atomically::

    python experiments/vanilla_arms.py data                       # OUT/texts.jsonl (+ pairs.jsonl), once
    python experiments/vanilla_arms.py train simcse --seed 1      # resumes from the run's checkpoints
    python experiments/vanilla_arms.py eval simcse --seed 1       # STS-B, STS12-16, SICK-R (per-pair cosines), attack
    python experiments/vanilla_arms.py eval start                 # the vanilla encoder itself
    python experiments/vanilla_arms.py plan                       # every command of the study, in order

Evaluation reuses study 1's measures (``length_robust.sts_pairs`` for Spearman with per-pair cosines, for paired
bootstrap intervals against SimCSE; the STS-B m = 100 attack with its JSD null). Still to add for the issue: the
first-k curve, the long-text probe and the report (intervals, table in docs/results/README.md).
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import re
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import SHARED, STS_TASKS, hardware, read_json, set_threads

ARMS = ("simcse", "laser-self", "laser-intra", "copy-concat", "hicl", "simde", "length-invariant")
PAIR_ARMS = ("copy-concat", "length-invariant")
SEEDS = (1, 2, 3)
DEFAULT_MODEL = Path("experiments/runs/vanilla/model")
DOCUMENTS = SHARED / "imdb" / "train.jsonl.gz"  # multi-sentence reviews; also in the vanilla pretraining text
_SENTENCE_END = re.compile(r"[.!?]\s")


def _write(path: Path, payload: Any) -> None:
    from lengthwise.core.results import write_json_atomic

    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, payload)


def stage_data(args: argparse.Namespace) -> dict[str, Any]:
    """A seeded sample of `--texts` documents of at least two sentences (IMDB train reviews, ``<br />`` removed)."""
    from lengthwise.core.results import write_bytes_atomic

    source = Path(args.documents)
    with gzip.open(source, "rt", encoding="utf-8") if source.suffix == ".gz" else source.open() as handle:
        docs = [" ".join(json.loads(line)["text"].replace("<br />", " ").split()) for line in handle]
    docs = [doc for doc in docs if len(_SENTENCE_END.findall(doc)) >= 1]  # ≥ 2 sentences: the document arms
    picked = random.Random(args.data_seed).sample(docs, min(args.texts, len(docs)))
    texts = args.out / "texts.jsonl"
    write_bytes_atomic(texts, "".join(json.dumps({"text": t}) + "\n" for t in picked).encode("utf-8"))
    record: dict[str, Any] = {"texts": str(texts), "n_texts": len(picked), "source": str(source)}
    record["data_seed"] = args.data_seed
    if args.pairs:
        record["pairs"] = str(Path(args.pairs).resolve())
        record["pairs_note"] = "supervised pairs given by --pairs (copy-concat, length-invariant)"
    else:
        pairs = args.out / "pairs.jsonl"
        rows = "".join(json.dumps({"anchor": t, "positive": t}) + "\n" for t in picked)
        write_bytes_atomic(pairs, rows.encode("utf-8"))
        record["pairs"] = str(pairs)
        record["pairs_note"] = "each text paired with itself (the pair arms see the same texts as the others)"
    _write(args.out / "data.json", record)
    return record


def arm_settings(arm: str, seed: int, args: argparse.Namespace) -> dict[str, Any]:
    """The `TrainConfig` mapping of one arm: everything but the method (and the pair arms' file) is shared."""
    data = read_json(args.out / "data.json")
    return {
        "method": arm,
        "data": data["pairs"] if arm in PAIR_ARMS else data["texts"],
        "out": str(args.out / arm / f"seed{seed}" / "run"),
        "model": str(args.model),
        "max_steps": args.steps,
        "batch_size": args.batch_size,
        "max_length": args.max_length,
        "lr": args.lr,
        "warmup_ratio": 0.1,
        "seed": seed,
        "pooling": "mean",
        "save_steps": args.save_steps,
        "logging_steps": 5,
        "device": args.device,
    }


def stage_train(arm: str, seed: int, args: argparse.Namespace) -> None:
    from lengthwise.facade import train
    from lengthwise.training.config import config_from_mapping

    config = config_from_mapping(arm_settings(arm, seed, args))
    run = Path(config.out)
    started = time.perf_counter()
    result = train(config, resume=(run / "config.json").exists())
    log = read_json(run / "train.json")
    record = {
        "arm": arm,
        "seed": seed,
        "start": str(args.model),
        "settings": config.to_dict(),
        "model_dir": str(result.model_dir),
        "steps": result.global_step,
        "train_runtime_s": round(result.train_runtime_s, 1),
        "wall_s": round(time.perf_counter() - started, 1),
        "loss": [{"step": r["step"], "loss": r["loss"]} for r in log["log_history"] if "loss" in r],
        "hardware": hardware(),
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
    }
    _write(run.parent / "train_record.json", record)


def stage_eval(arm: str, seed: int, args: argparse.Namespace) -> None:
    from length_robust import _attack, sts_pairs

    folder = args.out / "start" if arm == "start" else args.out / arm / f"seed{seed}"
    model = str(args.model) if arm == "start" else read_json(folder / "train_record.json")["model_dir"]
    path = folder / "record.json"
    record: dict[str, Any] = read_json(path) if path.exists() else {"arm": arm, "seed": seed}
    record.update({"model": model, "hardware": hardware()})
    if "sts" not in record:
        started = time.perf_counter()
        record["sts"] = sts_pairs(model) | _sick(model)
        record["sts_wall_s"] = round(time.perf_counter() - started, 1)
        _write(path, record)
    if "stsb_attack" not in record:
        stsb = SHARED / "stsb" / "original" / "sts-test.csv.gz"
        record["stsb_attack"] = _attack(model, stsb, folder / "audit_stsb_m100", "stsb")
        _write(path, record)


def _sick(model: str) -> dict[str, Any]:
    """SICK-R test: Spearman × 100 with per-pair cosines (study 1's `sts_pairs` covers STS-B and STS12–16)."""
    from lengthwise.core.encoder import as_encoder
    from lengthwise.evaluation import evaluate_sts, read_sts
    from lengthwise.facade import load_model

    pairs = read_sts(SHARED / STS_TASKS["SICK-R"])
    result = evaluate_sts(as_encoder(load_model(model)), pairs, batch_size=64)
    assert result.cosines is not None
    return {
        "SICK-R": {
            "spearman": result.scores["spearman"],
            "cosines": [round(float(x), 6) for x in result.cosines],
            "gold": [pair.score for pair in pairs.pairs],
        }
    }


def plan(args: argparse.Namespace) -> list[str]:
    """Every command of the study in order (data, the start's evaluation, then train and eval per arm and seed)."""
    script = "python experiments/vanilla_arms.py"
    common = f"--out {args.out} --model {args.model}"
    lines = [f"{script} data {common}", f"{script} eval start {common}"]
    for seed in SEEDS:
        for arm in ARMS:
            lines += [f"{script} {stage} {arm} --seed {seed} {common}" for stage in ("train", "eval")]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("stage", choices=("data", "train", "eval", "plan"))
    parser.add_argument("arm", nargs="?", choices=(*ARMS, "start"))
    parser.add_argument("--out", type=Path, default=Path("experiments/runs/vanilla_arms"))
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL, help="the vanilla encoder (vanilla.py's model)")
    parser.add_argument("--seed", type=int, default=1, help="the arm's training seed (the study runs 1, 2, 3)")
    parser.add_argument("--documents", default=str(DOCUMENTS), help="JSONL with 'text' (the shared texts' source)")
    parser.add_argument("--texts", type=int, default=4000, help="documents in the shared sample")
    parser.add_argument("--data-seed", type=int, default=42, help="seed of the shared sample (one for every arm)")
    parser.add_argument("--pairs", default=None, help="supervised pairs for the pair arms (default: self-pairs)")
    parser.add_argument("--steps", type=int, default=250)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--save-steps", type=int, default=25)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    set_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.stage == "plan":
        print("\n".join(plan(args)))
        return 0
    if args.stage == "data":
        print(json.dumps(stage_data(args)))
        return 0
    if args.arm is None or (args.stage == "train" and args.arm == "start"):
        parser.error(f"{args.stage} needs an arm: one of {', '.join(ARMS)}" + (" or start" * (args.stage == "eval")))
    if not (args.out / "data.json").exists():
        stage_data(args)
    if args.stage == "train":
        stage_train(args.arm, args.seed, args)
    else:
        stage_eval(args.arm, args.seed, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
