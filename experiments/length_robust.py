"""Study 1 at scale — which fix makes all-MiniLM-L6-v2 length-robust on a CPU, and what does it cost in quality?

Six "fixes", all starting from all-MiniLM-L6-v2, measured on the same axes:

- ``none`` — the model as it is;
- ``tempscale`` — attention temperature t baked into the weights (t tuned on SciFact *train*, see study 5);
- ``recipe`` — ``lengthwise train --recipe length-robust``: copy-and-concat batches mixed with plain-pair batches;
- ``copy-concat`` — copy-and-concat alone (every batch elongated), as many elongated batches as the recipe;
- ``laser-self`` — SimCSE + LA(SER)³ self-reference on wiki1m sentences;
- ``hicl`` — SimCSE + HiCL on wiki1m sentences.

Robustness: the STS-B test attack at m = 100 (`lengthwise audit --preset stsb`: mean shift, share risen, JSD and
its permutation null), the first64x8 attack on every same-topic SciFact pair, and the length probe (ridge R² × 100
on 400 SciFact abstracts at N = 512). Quality: STS-B test, the STS12–16 average (Spearman × 100) and SciFact
nDCG@10 (full corpus). Every difference to ``none`` comes with a paired 95 % bootstrap interval
(`scipy.stats.bootstrap`, ``paired=True``) over the pairs or queries.

Each stage is its own process, so stages can run side by side (one torch thread each) and a killed stage is
simply run again; each writes OUT/<fix>/record.json atomically::

    python experiments/length_robust.py train recipe        # trains (pair mix written once to OUT/pairs.jsonl)
    python experiments/length_robust.py eval recipe         # all six measures → OUT/recipe/record.json
    python experiments/length_robust.py report              # intervals, table (markdown), plot, model card
"""

from __future__ import annotations

import argparse
import gzip
import os
import random
import shutil
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import SHARED, STS_TASKS, default_model, hardware, lengthwise_cli, read_json, set_threads
from length_attack import write_pairs, write_same_topic  # study 1's writers: the same pair mix (larger), pairs

FIXES = ("none", "tempscale", "recipe", "copy-concat", "laser-self", "hicl")
TEMPSCALE_T = 0.876393  # tuned on SciFact train (docs/results/tempscale_tune_scifact_minilm.json)
QUALITY_STS = ("STS12", "STS13", "STS14", "STS15", "STS16")
PAPER = {  # length-attack paper Table 1 (QQP → ArguAna, mean pooling, 1 epoch from a vanilla encoder)
    "default_jsd": 0.67,
    "copy_concat_jsd": 0.068,
    "default_r2": 99.47,
    "copy_concat_r2": 98.87,
}


def write_texts(out: Path, n: int, seed: int) -> dict[str, Any]:
    """A seeded sample of `n` wiki1m sentences (SimCSE's unsupervised data) for laser-self and hicl."""
    path = out / "wiki.txt"
    source = SHARED / "wiki1m_simcse_head" / "wiki1m_for_simcse.head11914.txt.gz"
    with gzip.open(source, "rt", encoding="utf-8") as handle:
        lines = [line.strip() for line in handle]
    lines = [line for line in lines if line]
    picked = random.Random(seed).sample(lines, min(n, len(lines)))
    path.write_text("".join(line + "\n" for line in picked))
    return {"file": str(path), "n_texts": len(picked), "source": "wiki1m (first 12k lines)", "seed": seed}


def dev_attack_pairs(n: int, seed: int) -> Any:
    """A seeded sample of STS-B dev pairs for the attack-shift check during training."""
    from lengthwise.evaluation import read_sts

    return read_sts(SHARED / "stsb" / "original" / "sts-dev.csv.gz").sample(n, seed)


def train_settings(fix: str, args: argparse.Namespace, pairs: str, texts: str) -> dict[str, Any]:
    """The `TrainConfig` mapping of a trained fix; the recipe's own settings come from the recipe."""
    common = {"seed": args.seed, "save_steps": 20, "logging_steps": 5, "save_total_limit": None}
    if fix == "recipe":
        return {"recipe": "length-robust", "data": pairs, **common}
    if fix == "copy-concat":  # as many elongated batches as the recipe, all elongated
        from lengthwise.training.recipes import RECIPES

        recipe = RECIPES["length-robust"].settings
        steps = round(recipe["max_steps"] * recipe["copy_concat_share"])
        keep = ("elongate", "lr", "warmup_ratio", "batch_size", "max_length")
        return {"method": "copy-concat", "data": pairs, "max_steps": steps, **{k: recipe[k] for k in keep}, **common}
    base = {"data": texts, "batch_size": 16, "max_length": 256, "lr": 5e-5, "warmup_ratio": 0.1, **common}
    if fix == "laser-self":
        return {"method": "laser-self", "max_steps": args.text_steps, **base}
    if fix == "hicl":
        return {"method": "hicl", "max_steps": args.text_steps, **base}
    raise SystemExit(f"{fix} is not trained; trained fixes: recipe, copy-concat, laser-self, hicl")


def stage_train(fix: str, args: argparse.Namespace) -> None:
    from lengthwise.audit.pairs.evaluator import LengthAttackEvaluator
    from lengthwise.facade import train
    from lengthwise.training.config import config_from_mapping

    pairs = args.out / "pairs.jsonl"
    if not pairs.exists():
        write_pairs(args.out, args.pairs, args.seed)
    texts = args.out / "wiki.txt"
    if not texts.exists():
        write_texts(args.out, args.texts, args.seed)
    run = args.out / fix / "run"
    values = {**train_settings(fix, args, str(pairs), str(texts)), "out": str(run), "model": args.model}
    values["eval_steps"] = args.eval_steps
    if args.max_steps:
        values["max_steps"] = args.max_steps
    config = config_from_mapping(values)
    evaluator = LengthAttackEvaluator(dev_attack_pairs(args.dev_pairs, args.seed), 100, name="dev_attack")
    started = time.perf_counter()
    result = train(config, resume=(run / "config.json").exists(), evaluator=evaluator)
    record = {
        "fix": fix,
        "settings": config.to_dict(),
        "model_dir": str(result.model_dir),
        "steps": result.global_step,
        "train_runtime_s": round(result.train_runtime_s, 1),
        "wall_s": round(time.perf_counter() - started, 1),
        "hardware": hardware(),
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
    }
    _write(args.out / fix / "train_record.json", record)


def _write(path: Path, payload: Any) -> None:
    from lengthwise.core.results import write_json_atomic

    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, payload)


def _model_for(fix: str, args: argparse.Namespace) -> str:
    if fix == "none":
        return args.model
    if fix == "tempscale":
        baked = args.out / "tempscale" / "model"
        if not (baked / "config.json").exists():
            shutil.rmtree(baked, ignore_errors=True)
            lengthwise_cli(
                ["tempscale", "bake", "-m", args.model, "--t", str(TEMPSCALE_T), "-o", str(baked)],
                args.out / "tempscale" / "bake.log",
            )
        return str(baked)
    record = read_json(args.out / fix / "train_record.json")
    return str(record["model_dir"])


def _attack(model: str, pairs: Path, out: Path, preset: str) -> dict[str, Any]:
    wall = lengthwise_cli(
        ["audit", "-m", model, "--pairs", str(pairs), "--preset", preset, "--no-curve", "--no-shuffle",
         "--null-permutations", "1000", "--out", str(out)],
        out.with_suffix(".log"),
    )  # fmt: skip
    audit = read_json(out / "audit.json")
    keep = ("n", "mean_before", "mean_after", "mean_shift", "frac_increased", "js_distance", "js_null")
    return {
        **{key: audit["attack"][key] for key in keep},
        "before": audit["similarities"]["before"],
        "after": audit["similarities"]["after"],
        "wall_s": round(wall, 1),
    }


def _same_topic(args: argparse.Namespace) -> Path:
    """Every distinct same-topic SciFact pair, written once by study 1's writer."""
    path = args.out / "same_topic.jsonl"
    if not path.exists():
        write_same_topic(args.out, 0, 0)
    return path


def _probe(model: str, out: Path, docs: int, seed: int) -> dict[str, Any]:
    """Length probe on SciFact abstracts at N = 512; the pair attack beside it is a 2-pair placeholder on the
    embedded probe set (short texts, so that m = 2 fits the window)."""
    wall = lengthwise_cli(
        ["audit", "-m", model, "--max-pairs", "2", "--elongate", "2", "--no-curve",
         "--no-shuffle", "--null-permutations", "0", "--docs", str(SHARED / "scifact" / "corpus.jsonl.gz"), "--probe",
         "--max-docs", str(docs), "--max-length", "512", "--seed", str(seed), "--out", str(out)],
        out.with_suffix(".log"),
    )  # fmt: skip
    return {"probe": read_json(out / "audit.json")["diagnostics"]["probe"], "wall_s": round(wall, 1)}


def sts_pairs(model: str) -> dict[str, Any]:
    """STS-B test and STS12–16: Spearman ×100 with the per-pair cosines and gold scores (for paired intervals)."""
    from lengthwise.core.encoder import as_encoder
    from lengthwise.evaluation import evaluate_sts, read_sts
    from lengthwise.facade import load_model

    encoder = as_encoder(load_model(model))
    out = {}
    for name in ("STS-B", *QUALITY_STS):
        pairs = read_sts(SHARED / STS_TASKS[name])
        result = evaluate_sts(encoder, pairs, batch_size=64)
        assert result.cosines is not None
        out[name] = {"spearman": result.scores["spearman"], "cosines": [round(float(x), 6) for x in result.cosines],
                     "gold": [pair.score for pair in pairs.pairs]}  # fmt: skip
    return out


def scifact_ndcg(model: str) -> dict[str, Any]:
    """SciFact test nDCG@10 on the full corpus, with the per-query values (for paired intervals)."""
    from lengthwise.core.encoder import as_encoder
    from lengthwise.evaluation import evaluate_retrieval, read_beir
    from lengthwise.facade import load_model

    result = evaluate_retrieval(as_encoder(load_model(model)), read_beir(SHARED / "scifact", "test"), batch_size=32)
    per_query = {qid: scores["ndcg@10"] for qid, scores in result.per_query.items()}
    return {"ndcg@10": result.scores["ndcg@10"], "per_query": per_query}


def stage_eval(fix: str, args: argparse.Namespace) -> None:
    folder = args.out / fix
    model = _model_for(fix, args)
    path = folder / "record.json"
    record: dict[str, Any] = read_json(path) if path.exists() else {"fix": fix}
    record.update({"model": model, "hardware": hardware()})
    timings: dict[str, float] = record.setdefault("wall_s", {})
    if "stsb_attack" not in record:
        stsb = SHARED / "stsb" / "original" / "sts-test.csv.gz"
        record["stsb_attack"] = _attack(model, stsb, folder / "audit_stsb_m100", "stsb")
        _write(path, record)
    if "first64x8" not in record:
        record["first64x8"] = _attack(model, _same_topic(args), folder / "audit_first64x8", "first64x8")
        _write(path, record)
    if "probe" not in record:
        record["probe"] = _probe(model, folder / "audit_probe", args.probe_docs, args.seed)
        _write(path, record)
    if "sts" not in record:
        started = time.perf_counter()
        record["sts"] = sts_pairs(model)
        timings["sts"] = round(time.perf_counter() - started, 1)
        _write(path, record)
    if "scifact" not in record:
        started = time.perf_counter()
        record["scifact"] = scifact_ndcg(model)
        timings["scifact"] = round(time.perf_counter() - started, 1)
        _write(path, record)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("stage", choices=("train", "eval", "report"))
    parser.add_argument("fix", nargs="?", choices=FIXES)
    parser.add_argument("--out", type=Path, default=Path("experiments/runs/length_robust"))
    parser.add_argument("--model", default=None, help="starting model (default: the offline all-MiniLM-L6-v2)")
    parser.add_argument("--pairs", type=int, default=8000, help="training pairs in the seeded four-source mix")
    parser.add_argument("--texts", type=int, default=8000, help="wiki1m sentences for laser-self and hicl")
    parser.add_argument("--text-steps", type=int, default=40, help="steps of laser-self and hicl")
    parser.add_argument("--dev-pairs", type=int, default=200, help="STS-B dev pairs for the attack check in training")
    parser.add_argument("--eval-steps", type=int, default=20, help="attack check every N training steps")
    parser.add_argument("--probe-docs", type=int, default=400)
    parser.add_argument("--max-steps", type=int, default=None, help="override every fix's steps (smoke runs)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    set_threads(args.threads)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    args.out.mkdir(parents=True, exist_ok=True)
    args.model = args.model or default_model()
    if args.stage == "report":
        from length_robust_report import report

        report(args.out)
        return 0
    if args.fix is None:
        parser.error(f"{args.stage} needs a fix: one of {', '.join(FIXES)}")
    if args.stage == "train":
        stage_train(args.fix, args)
    else:
        stage_eval(args.fix, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
