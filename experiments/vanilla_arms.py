"""Issue 37, part 2 — the objectives trained from one vanilla encoder, on the same texts, steps and seeds.

Every arm starts from the MLM-only encoder of ``experiments/vanilla.py`` (``--model``, default
``experiments/runs/vanilla/model``) and trains with `lengthwise.train` on the same seeded sample of documents, with
the same steps, batch, window, learning rate, pooling and seeds; only the objective differs:

- ``simcse``, ``laser-self``, ``hicl`` read each document as one text;
- ``laser-intra``, ``simde`` read the same documents and split them into sentences themselves;
- ``copy-concat`` and ``length-invariant`` are pair objectives: by default they get each document paired with
  itself (``texts.jsonl`` → ``pairs.jsonl``), so that they too see nothing but these texts and differ from SimCSE
  only by their views and losses. The length-attack paper trains copy-and-concat on supervised pairs (QQP);
  ``--pairs FILE`` gives both pair arms such pairs instead (then they no longer share the data of the others).

Pooling is mean for every arm (the vanilla model's own; SimDE's default would be CLS), so arms differ by objective
alone. ``length-invariant`` takes the recipe's method settings (``--recipe length-invariant``: self reference,
invariance weight 1, batch consistency 4) without its retention term: retention holds each plain embedding at the
*starting* model's, which here is the MLM-only encoder the contrastive objectives are meant to move away from (study
7's ``self-w1-c4`` arm, the recipe before retention was added). Stages, one process each, each resumable, each
writing ``OUT/<arm>/seed<S>/record.json`` atomically::

    python experiments/vanilla_arms.py data                       # OUT/texts.jsonl (+ pairs.jsonl), once
    python experiments/vanilla_arms.py train simcse --seed 1      # resumes from the run's checkpoints
    python experiments/vanilla_arms.py eval simcse --seed 1       # every measure below; a part already recorded
    python experiments/vanilla_arms.py eval start                 # the vanilla encoder itself
    python experiments/vanilla_arms.py report [--check]           # intervals vs SimCSE, claims (vanilla_arms_report)
    python experiments/vanilla_arms.py plan                       # every command of the study, in order
    python experiments/vanilla_arms.py run-all --wait             # every missing stage in order (run_vanilla_arms.sh)

``eval`` records, each part kept with its per-item values for paired intervals and skipped when already there:

- ``sts``: STS-B test, STS12–16 (study 1's ``length_robust.sts_pairs``) and SICK-R test, Spearman × 100 with the
  per-pair cosines and golds;
- ``stsb_attack``: the STS-B test attack at m = 100 with its 1,000-swap JSD null (``lengthwise audit --preset
  stsb``), the per-pair cosines before and after;
- ``first_k``: the first-k ("semantic-altered") curve of METHODS §1 on every distinct same-topic SciFact abstract pair
  (study 1's ``same_topic.jsonl``): both sides cut to their first k tokens (special tokens included), k in {16, 32,
  64, 128, 256} up to the model's window N (the arms train at N = 256; k > N is skipped, as the audit does), and the
  full window; per-pair cosines for each k and the audit's per-k summary (mean, median, std, JSD to the full
  window). Computed in-process with the model's tokenizer and `lengthwise.embed_ids`, so that per-pair values are
  kept (the audit's ``first_k_curve`` keeps the summary only; the tests check both agree);
- ``long_sts``: a long-text probe — the STS-B test pairs shuffled with seed ``--long-sts-seed`` and cut into groups
  of ``--long-sts-group`` (default 10; the remainder dropped); each group's first sentences joined by a space are
  one text, its second sentences the other, gold = the mean of the group's golds. Spearman × 100 with per-pair
  cosines. Measured with the MiniLM tokenizer (the vanilla model's): at g = 10 the 137 long pairs' texts run 90–160
  tokens (5th–95th percentile, median 124, max 203), under N = 256; at g = 6 they would run 49–107 (median 73);
- ``scifact`` (only with ``--scifact``, off by default, slow on a CPU): SciFact test nDCG@10 on the full corpus with
  the window cut at the model's N, per-query values (study 1's ``length_robust.scifact_ndcg``).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
import socket
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ARMS, EVAL_PARTS, SEEDS, SHARED, STS_TASKS, hardware, read_json, set_threads

PAIR_ARMS = ("copy-concat", "length-invariant")
ARM_SETTINGS: dict[str, dict[str, Any]] = {  # method settings beyond the shared ones (see the module docstring)
    "length-invariant": {"invariance_reference": "self", "invariance_weight": 1.0, "consistency_weight": 4.0},
}
SESSION = "VANILLA_ARMS_SESSION"  # set by run-all for its children: which queue timed a training
DEFAULT_MODEL = Path("experiments/runs/vanilla/model")
DOCUMENTS = SHARED / "imdb" / "train.jsonl.gz"  # multi-sentence reviews; also in the vanilla pretraining text
FIRST_KS = (16, 32, 64, 128, 256)  # METHODS §1's k, up to the arms' window N = 256 (512 > N is skipped)
RESAMPLES = 2000  # the report's bootstrap resamples
_SENTENCE_END = re.compile(r"[.!?]\s")
SCRIPT = Path(__file__).resolve()


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
        **ARM_SETTINGS.get(arm, {}),
    }


def _resumed_step(run: Path) -> int:
    """The checkpoint step this session's training resumed from (0: it ran from the start)."""
    resumed = read_json(run / "train.json").get("resumed_from") if (run / "train.json").is_file() else None
    found = re.search(r"checkpoint-(\d+)$", str(resumed)) if resumed else None
    return int(found.group(1)) if found else 0


def stage_train(arm: str, seed: int, args: argparse.Namespace) -> None:
    import lengthwise
    from lengthwise.training.config import config_from_mapping

    config = config_from_mapping(arm_settings(arm, seed, args))
    run = Path(config.out)
    started, load_before = time.perf_counter(), round(os.getloadavg()[0], 2)
    result = lengthwise.train(config, resume=(run / "config.json").exists())
    log = read_json(run / "train.json")
    record = {
        "arm": arm,
        "seed": seed,
        "start": str(args.model),
        "settings": config.to_dict(),
        "model_dir": str(result.model_dir),
        "steps": result.global_step,
        "steps_run": result.global_step - _resumed_step(run),  # the steps train_runtime_s timed
        "train_runtime_s": round(result.train_runtime_s, 1),
        "wall_s": round(time.perf_counter() - started, 1),
        "loss": [{"step": r["step"], "loss": r["loss"]} for r in log["log_history"] if "loss" in r],
        "hardware": hardware(),
        "timing_session": os.environ.get(SESSION),  # the run-all queue that ran it: speeds compare within one
        "load": [load_before, round(os.getloadavg()[0], 2)],  # 1-minute load average before and after: other work
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
    }
    _write(run.parent / "train_record.json", record)


def eval_parts(args: argparse.Namespace) -> tuple[str, ...]:
    """The parts an `eval` record must hold to be complete (SciFact only when asked for)."""
    return (*EVAL_PARTS, "scifact") if args.scifact else EVAL_PARTS


def _folder(arm: str, seed: int, out: Path) -> Path:
    return out / "start" if arm == "start" else out / arm / f"seed{seed}"


def stage_eval(arm: str, seed: int, args: argparse.Namespace) -> None:
    from length_robust import _attack, scifact_ndcg, sts_pairs

    folder = _folder(arm, seed, args.out)
    model = str(args.model) if arm == "start" else read_json(folder / "train_record.json")["model_dir"]
    path = folder / "record.json"
    record: dict[str, Any] = read_json(path) if path.exists() else {"arm": arm, "seed": seed}
    record.update({"model": model, "hardware": hardware()})
    timings: dict[str, float] = record.setdefault("wall_s", {})

    def done(part: str, started: float) -> None:
        timings[part] = round(time.perf_counter() - started, 1)
        _write(path, record)

    if "sts" not in record:
        started = time.perf_counter()
        record["sts"] = sts_pairs(model) | _sick(model)
        done("sts", started)
    if "stsb_attack" not in record:
        started = time.perf_counter()
        stsb = SHARED / STS_TASKS["STS-B"]
        record["stsb_attack"] = _attack(model, stsb, folder / "audit_stsb_m100", "stsb")
        done("stsb_attack", started)
    if "first_k" not in record:
        started = time.perf_counter()
        record["first_k"] = first_k_curve(model, same_topic_pairs(args.out))
        done("first_k", started)
    if "long_sts" not in record:
        started = time.perf_counter()
        record["long_sts"] = long_sts(model, args.long_sts_group, args.long_sts_seed)
        done("long_sts", started)
    if args.scifact and "scifact" not in record:
        started = time.perf_counter()
        record["scifact"] = scifact_ndcg(model)  # the model's own window N cuts each abstract
        done("scifact", started)


def _sick(model: str) -> dict[str, Any]:
    """SICK-R test: Spearman × 100 with per-pair cosines (study 1's `sts_pairs` covers STS-B and STS12–16)."""
    import lengthwise
    from lengthwise.core.encoder import as_encoder
    from lengthwise.evaluation import evaluate_sts, read_sts

    pairs = read_sts(SHARED / STS_TASKS["SICK-R"])
    result = evaluate_sts(as_encoder(lengthwise.load_model(model)), pairs, batch_size=64)
    assert result.cosines is not None
    return {
        "SICK-R": {
            "spearman": result.scores["spearman"],
            "cosines": [round(float(x), 6) for x in result.cosines],
            "gold": [pair.score for pair in pairs.pairs],
        }
    }


# ---------------------------------------------------------------------------------------------- first-k curve


def same_topic_pairs(out: Path) -> Path:
    """Every distinct same-topic SciFact abstract pair (study 1's writer), written once to OUT/same_topic.jsonl."""
    from length_attack import write_same_topic

    path = out / "same_topic.jsonl"
    if not path.exists():
        write_same_topic(out, 0, 0)
    return path


def special_ids(tokenizer: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The ids the tokenizer puts before and after one text (e.g. [CLS] / [SEP]), found as the audit finds them: a
    probe encoded with and without special tokens."""
    full = list(tokenizer("length", add_special_tokens=True)["input_ids"])
    bare = list(tokenizer("length", add_special_tokens=False)["input_ids"])
    for start in range(len(full) - len(bare) + 1):
        if full[start : start + len(bare)] == bare:
            return tuple(full[:start]), tuple(full[start + len(bare) :])
    raise ValueError(f"cannot find the content tokens inside {full}")


def first_k_curve(model_path: str, pairs_path: Path, ks: tuple[int, ...] = FIRST_KS) -> dict[str, Any]:
    """Per-pair cosines with both sides cut to their first k tokens (special tokens included) for each k ≤ N, and
    with the whole window N ("full", what the audit's attack calls before); the audit's per-k summary beside them."""
    import numpy as np

    import lengthwise

    model = lengthwise.load_model(model_path)
    pairs = lengthwise.read_pairs(pairs_path)
    tokenizer = model.tokenizer
    window = int(model.max_seq_length)
    prefix, suffix = special_ids(tokenizer)
    specials = len(prefix) + len(suffix)
    budget = window - specials

    def content(texts: list[str]) -> list[list[int]]:
        encoded = tokenizer(texts, add_special_tokens=False, truncation=True, max_length=budget)
        return [list(ids) for ids in encoded["input_ids"]]

    sides = (content([p.text1 for p in pairs.pairs]), content([p.text2 for p in pairs.pairs]))
    bank: dict[tuple[int, ...], int] = {}  # each distinct sequence embedded once

    def rows(cut: int) -> tuple[list[int], list[int]]:
        def one(ids: list[int]) -> int:
            return bank.setdefault((*prefix, *ids[:cut], *suffix), len(bank))

        return [one(ids) for ids in sides[0]], [one(ids) for ids in sides[1]]

    kept = [k for k in ks if k <= window]
    plan = {"full": rows(budget), **{str(k): rows(k - specials) for k in kept}}
    vectors = lengthwise.embed_ids(model, [list(seq) for seq in bank], batch_size=32)
    vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    cosines = {name: np.sum(vectors[a] * vectors[b], axis=1) for name, (a, b) in plan.items()}
    full = cosines["full"]
    summary = [
        {"k": k, "mean": float(cosines[str(k)].mean()), "median": float(np.median(cosines[str(k)])),
         "std": float(cosines[str(k)].std()), "js_distance_vs_full": lengthwise.js_distance(full, cosines[str(k)])}
        for k in kept
    ]  # fmt: skip
    lengths = np.asarray([len(ids) for ids in sides[0] + sides[1]])
    at_budget = int((lengths >= budget).sum())  # texts the window cuts (or that just fill it)
    return {
        "pairs": str(pairs_path),
        "pairs_sha256": pairs.sha256,
        "n": len(pairs),
        "window": window,
        "ks": kept,
        "skipped_ks": [k for k in ks if k > window],
        "content_tokens": {"median": float(np.median(lengths)), "max": int(lengths.max()), "at_budget": at_budget},
        "summary": summary,
        "cosines": {name: [round(float(x), 6) for x in values] for name, values in cosines.items()},
    }


# ------------------------------------------------------------------------------------------------- long STS


def long_sts_groups(n: int, group: int, seed: int) -> list[list[int]]:
    """Indices 0..n-1 shuffled with `seed` and cut into consecutive groups of `group` (the remainder dropped)."""
    if group < 1:
        raise ValueError(f"long STS: a group needs at least one pair, got {group}")
    order = list(range(n))
    random.Random(seed).shuffle(order)
    return [order[i : i + group] for i in range(0, n - group + 1, group)]


def long_sts_pairs(pairs: Any, group: int, seed: int) -> list[dict[str, Any]]:
    """One long pair per group of STS pairs (``TextPair``s with a gold ``score``): text1 = the group's first
    sentences joined by a space, text2 = their partners in the same order, gold = the mean of the group's golds."""
    out = []
    for members in long_sts_groups(len(pairs), group, seed):
        chosen = [pairs[i] for i in members]
        out.append({
            "text1": " ".join(p.text1 for p in chosen),
            "text2": " ".join(p.text2 for p in chosen),
            "score": sum(float(p.score) for p in chosen) / len(chosen),
            "members": members,
        })  # fmt: skip
    return out


def long_sts(model_path: str, group: int, seed: int) -> dict[str, Any]:
    """The long-text probe: Spearman × 100 of the long STS-B pairs with per-pair cosines, and their token lengths."""
    import numpy as np

    import lengthwise
    from lengthwise.core.encoder import as_encoder
    from lengthwise.evaluation import evaluate_sts, read_sts

    source = SHARED / STS_TASKS["STS-B"]
    rows = long_sts_pairs(read_sts(source).pairs, group, seed)
    pair_set = lengthwise.PairSet(
        tuple(lengthwise.TextPair(r["text1"], r["text2"], score=r["score"]) for r in rows), str(source), "long-sts"
    )
    model = lengthwise.load_model(model_path)
    result = evaluate_sts(as_encoder(model), pair_set, batch_size=32)
    assert result.cosines is not None
    texts = [r["text1"] for r in rows] + [r["text2"] for r in rows]
    lengths = np.asarray([len(ids) for ids in model.tokenizer(texts, add_special_tokens=True)["input_ids"]])
    window = int(model.max_seq_length)
    return {
        "source": str(source),
        "group": group,
        "seed": seed,
        "n": len(rows),
        "pairs_sha256": pair_set.sha256,
        "spearman": result.scores["spearman"],
        "cosines": [round(float(x), 6) for x in result.cosines],
        "gold": [r["score"] for r in rows],
        "tokens": {"median": float(np.median(lengths)), "p95": float(np.percentile(lengths, 95)),
                   "max": int(lengths.max()), "over_window": int((lengths > window).sum()), "window": window},
    }  # fmt: skip


# --------------------------------------------------------------------------------------- plan, queue, report


def _defaults() -> dict[str, Any]:
    return {action.dest: action.default for action in build_parser()._actions}


def shared_flags(args: argparse.Namespace) -> list[str]:
    """``--out``, ``--model`` and every setting that differs from its default, so each stage sees the same study."""
    flags = ["--out", str(args.out), "--model", str(args.model)]
    defaults = _defaults()
    for name in ("documents", "texts", "data_seed", "pairs", "steps", "batch_size", "max_length", "lr",
                 "save_steps", "device", "threads", "long_sts_group", "long_sts_seed"):  # fmt: skip
        value = getattr(args, name)
        if value != defaults[name]:
            flags += ["--" + name.replace("_", "-"), str(value)]
    if args.scifact:
        flags.append("--scifact")
    return flags


def steps(args: argparse.Namespace) -> list[tuple[str, str | None, int | None]]:
    """(stage, arm, seed) of the whole study in order: data, the start's evaluation, then train and eval per arm,
    seed by seed (a partial study has every arm at its first seeds), then the report."""
    arms = [a for a in ARMS if a in _chosen(getattr(args, "arms", None), ARMS)]
    seeds = [s for s in SEEDS if str(s) in _chosen(getattr(args, "seeds", None), [str(s) for s in SEEDS])]
    order: list[tuple[str, str | None, int | None]] = [("data", None, None), ("eval", "start", None)]
    for seed in seeds:
        for arm in arms:
            order += [("train", arm, seed), ("eval", arm, seed)]
    return [*order, ("report", None, None)]


def _chosen(spec: str | None, known: Sequence[str]) -> list[str]:
    """A comma-separated subset of `known` (all of it when not given); an unknown name is an error."""
    if not spec:
        return list(known)
    names = [name.strip() for name in spec.split(",") if name.strip()]
    unknown = [name for name in names if name not in known]
    if unknown:
        raise SystemExit(f"unknown: {', '.join(unknown)}; choose from {', '.join(known)}")
    return names


def command(stage: str, arm: str | None, seed: int | None, args: argparse.Namespace) -> list[str]:
    words = [stage, *([arm] if arm else []), *(["--seed", str(seed)] if seed is not None else [])]
    if stage == "report":  # where the report goes travels with it (a smoke run must not write docs/results)
        words += ["--results", str(args.results)] if getattr(args, "results", None) else []
        words += ["--resamples", str(args.resamples)] if getattr(args, "resamples", RESAMPLES) != RESAMPLES else []
    return [*words, *shared_flags(args)]


def plan(args: argparse.Namespace) -> list[str]:
    """Every command of the study in order (data, the start's evaluation, train and eval per arm and seed, report)."""
    if not hasattr(args, "scifact"):  # a bare namespace (tests): the defaults
        args = argparse.Namespace(**{**_defaults(), **vars(args)})
    script = "python experiments/vanilla_arms.py"
    return [" ".join([script, *command(*step, args)]) for step in steps(args)]


def is_done(stage: str, arm: str | None, seed: int | None, args: argparse.Namespace) -> bool:
    """Whether a stage's output is complete (the queue skips it): data.json, train_record.json, or a record with
    every eval part. The report is always written again."""
    if stage == "data":
        return (args.out / "data.json").exists()
    if stage == "report" or arm is None:
        return False
    folder = _folder(arm, seed or 0, args.out)
    if stage == "train":
        return (folder / "train_record.json").exists()
    if stage == "eval":
        path = folder / "record.json"
        return path.exists() and all(part in read_json(path) for part in eval_parts(args))
    return False


def model_ready(model: Path) -> str | None:
    """None when the start model can be used, else why not (still pretraining, or not there)."""
    summary = model.parent / "summary.json"
    if summary.exists():
        status = read_json(summary).get("status")
        if status != "done":
            return f"{summary}: status {status!r} (pretraining not finished)"
    if not (model / "modules.json").exists():
        return f"{model}: no sentence-transformers model there yet"
    return None


def run_all(args: argparse.Namespace) -> int:
    """Run every stage that is not done, in the plan's order, one child process at a time; a failed training skips
    its evaluation and the queue goes on; returns 1 if any stage failed. A killed queue is simply started again."""
    import subprocess

    while (why := model_ready(args.model)) is not None:
        if not args.wait:
            print(f"run-all: {why}; start with --wait to wait for it", flush=True)
            return 1
        print(f"run-all: waiting ({why}); next look in {args.wait_s} s", flush=True)
        time.sleep(args.wait_s)
    os.environ.setdefault(SESSION, f"{socket.gethostname()}-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}")
    failed: list[str] = []
    for stage, arm, seed in steps(args):
        name = " ".join(str(x) for x in (stage, arm, seed) if x is not None)
        if stage == "eval" and arm != "start" and any(f.startswith(f"train {arm} {seed}") for f in failed):
            print(f"run-all: skip {name} (its training failed)", flush=True)
            continue
        if is_done(stage, arm, seed, args):
            print(f"run-all: done already: {name}", flush=True)
            continue
        argv = [sys.executable, str(SCRIPT), *command(stage, arm, seed, args)]
        print(f"run-all: {time.strftime('%Y-%m-%d %H:%M:%S')} start {name}: {' '.join(argv[1:])}", flush=True)
        started = time.perf_counter()
        code = subprocess.call(argv)
        print(f"run-all: {name} exit {code} after {time.perf_counter() - started:.0f} s", flush=True)
        if code != 0:
            failed.append(name)
    print(f"run-all: finished; failed: {', '.join(failed) or 'none'}", flush=True)
    return 1 if failed else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("stage", choices=("data", "train", "eval", "report", "plan", "run-all"))
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
    parser.add_argument("--long-sts-group", type=int, default=10, help="STS-B test pairs per long pair")
    parser.add_argument("--long-sts-seed", type=int, default=0, help="seed of the long pairs' grouping")
    parser.add_argument("--scifact", action="store_true", help="eval also SciFact nDCG@10 (slow on a CPU)")
    parser.add_argument("--check", action="store_true", help="report: only list missing arm/seed records")
    parser.add_argument("--results", type=Path, default=None, help="report: folder for vanilla_arms.json/.md "
                        "(default docs/results)")  # fmt: skip
    parser.add_argument("--resamples", type=int, default=RESAMPLES, help="report: bootstrap resamples")
    parser.add_argument("--arms", default=None, help="plan/run-all: only these arms (comma-separated; default all)")
    parser.add_argument("--seeds", default=None, help="plan/run-all: only these seeds (comma-separated; default 1,2,3)")
    parser.add_argument("--wait", action="store_true", help="run-all: wait until the start model is pretrained")
    parser.add_argument("--wait-s", type=int, default=300, help="run-all: seconds between looks at the model")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    set_threads(args.threads)
    if args.stage == "plan":
        print("# eval = sts (STS-B, STS12-16, SICK-R), stsb_attack (m=100 + null), first_k (SciFact same-topic), "
              "long_sts" + (", scifact" if args.scifact else " (+ scifact with --scifact)"))  # fmt: skip
        print("\n".join(plan(args)))
        return 0
    if args.stage == "report":
        from vanilla_arms_report import report

        return report(args.out, results=args.results, resamples=args.resamples, check=args.check,
                      parts=eval_parts(args))  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    if args.stage == "run-all":
        return run_all(args)
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
