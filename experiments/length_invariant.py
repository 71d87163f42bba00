"""Study 7 — length-invariant fine-tuning: does tying each elongated text to the starting model's original take the
STS-B attack's JSD to its permutation null, and what does it cost in quality?

Arms, all from all-MiniLM-L6-v2 on study 1's seeded pair mix (`length_attack.write_pairs`), each with the
length-robust recipe's schedule (40 steps × 16 pairs, lr 5e-5, warm-up 0.1, N = 256, m random up to the window):

- ``none`` — the model as it is (evaluated here too, so every arm has per-pair values to pair with);
- ``invariant-w1`` / ``invariant-w4`` — ``--method length-invariant`` with ``invariance_weight`` 1 and 4;
- ``invariant-w1-c4`` — weight 1 plus the pairwise consistency term (every pair of the batch) at weight 4;
- ``self-w1-c4`` / ``self-c4`` — the same with the student's own originals as the reference (no teacher), and
  consistency alone; ``self-w1`` — self-reference distillation alone;
- ``mix-w1-c4`` / ``mix-w4-c4`` — distillation to the frozen teacher (weight 1 or 4), consistency against the
  student's own originals (weight 4): the teacher arms kept quality, the self-referenced consistency term reached
  the null, so each term takes the reference that did its job;
- ``retain-w1-r1`` / ``retain-w1-c4-r1`` — teacher distillation (and teacher consistency) plus retention: each
  plain text held at the teacher's embedding too, so the space the elongated texts are pulled to does not move
  away under the contrastive term (the teacher arms' shift was the gap between the teacher's plain cosines and
  the student's);
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
from _common import SHARED, default_model, hardware, lengthwise_cli, read_json, set_threads
from length_attack import write_pairs, write_same_topic
from length_robust import QUALITY_STS, _attack, _write, scifact_ndcg, sts_pairs

ARMS: dict[str, dict[str, Any]] = {
    "invariant-w1": {"invariance_weight": 1.0},
    "invariant-w4": {"invariance_weight": 4.0},
    "invariant-w1-c4": {"invariance_weight": 1.0, "consistency_weight": 4.0},
    "self-w1-c4": {"invariance_weight": 1.0, "consistency_weight": 4.0, "invariance_reference": "self"},
    "self-c4": {"invariance_weight": 0.0, "consistency_weight": 4.0, "invariance_reference": "self"},
    "self-w1": {"invariance_weight": 1.0, "invariance_reference": "self"},
    "mix-w1-c4": {"invariance_weight": 1.0, "consistency_weight": 4.0, "consistency_reference": "self"},
    "mix-w4-c4": {"invariance_weight": 4.0, "consistency_weight": 4.0, "consistency_reference": "self"},
    "retain-w1-r1": {"invariance_weight": 1.0, "retention_weight": 1.0},
    "retain-w1-c4-r1": {"invariance_weight": 1.0, "consistency_weight": 4.0, "retention_weight": 1.0},
    "self-w1-c4-r1": {
        "invariance_weight": 1.0,
        "consistency_weight": 4.0,
        "invariance_reference": "self",
        "retention_weight": 1.0,
    },
}
REPO = Path(__file__).resolve().parents[1]


def _settings(arm: str, args: argparse.Namespace, pairs: Path) -> dict[str, Any]:
    from lengthwise.training.recipes import SCHEDULE

    return {"method": "length-invariant", "data": str(pairs), **SCHEDULE, **ARMS[arm], "seed": args.seed,
            "logging_steps": 5, "save_total_limit": None}  # fmt: skip


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
    """The quick evaluation; with ``--full`` also the first64x8 attack on SciFact same-topic pairs, the m = 100
    attack on two pair sets nobody here trained or tuned on (SICK test, Twitter URL test: news headlines) and
    SciFact nDCG@10 (full corpus, per query). Each part is saved as soon as it is done."""
    folder = args.out / (arm if arm == "none" else f"{arm}-s{args.seed}")
    model = args.model if arm == "none" else read_json(folder / "train_record.json")["model_dir"]
    if args.checkpoint:  # a checkpoint of the run, part-way: its own folder beside the run's
        model = str(folder / "run" / "checkpoints" / f"checkpoint-{args.checkpoint}")
        folder = folder.with_name(f"{folder.name}-step{args.checkpoint}")
    path = folder / "record.json"
    record: dict[str, Any] = read_json(path) if path.exists() else {"arm": arm, "model": model}
    parts: dict[str, Any] = {
        "stsb_attack": lambda: _attack(model, SHARED / "stsb" / "original" / "sts-test.csv.gz",
                                       folder / "audit_stsb_m100", "stsb"),
        "sts_pairs": lambda: sts_pairs(model),
    }  # fmt: skip
    if args.full:
        parts |= {
            "first64x8": lambda: _attack(model, _same_topic(args), folder / "audit_first64x8", "first64x8"),
            "sick_attack": lambda: _sampled_attack(model, SHARED / "sick" / "SICK_test_annotated.txt.gz",
                                                   folder / "audit_sick_m100"),
            "twitter_attack": lambda: _sampled_attack(model, SHARED / "twitter_url_corpus" / "test.jsonl.gz",
                                                      folder / "audit_twitter_m100"),
            "scifact": lambda: scifact_ndcg(model),
        }  # fmt: skip
    for name, compute in parts.items():
        if name not in record:
            started = time.perf_counter()
            record[name] = compute()
            record.setdefault("wall_s", {})[name] = round(time.perf_counter() - started, 1)
            _write(path, record)


def _sampled_attack(model: str, pairs: Path, out: Path, max_pairs: int = 1000) -> dict[str, Any]:
    """The m = 100 attack (the ``stsb`` preset) on a seeded sample of `max_pairs` pairs of a held-out set (seed 0:
    the same sample for every arm), with the 1,000-swap permutation null."""
    wall = lengthwise_cli(
        ["audit", "-m", model, "--pairs", str(pairs), "--preset", "stsb", "--max-pairs", str(max_pairs), "--seed", "0",
         "--no-curve", "--no-shuffle", "--null-permutations", "1000", "--out", str(out)],
        out.with_suffix(".log"),
    )  # fmt: skip
    audit = read_json(out / "audit.json")
    keep = ("n", "mean_before", "mean_after", "mean_shift", "frac_increased", "js_distance", "js_null")
    return {**{key: audit["attack"][key] for key in keep}, "before": audit["similarities"]["before"],
            "after": audit["similarities"]["after"], "wall_s": round(wall, 1)}  # fmt: skip


def _same_topic(args: argparse.Namespace) -> Path:
    """Every distinct same-topic SciFact pair, as study 1 writes them."""
    path = args.out / "same_topic.jsonl"
    if not path.exists():
        write_same_topic(args.out, 0, 0)
    return path


def _attack_row(attack: dict[str, Any]) -> dict[str, Any]:
    import numpy as np

    before, after = np.array(attack["before"]), np.array(attack["after"])
    low, high = before <= np.quantile(before, 0.25), before >= np.quantile(before, 0.75)
    return {"mean_shift": attack["mean_shift"], "frac_increased": attack["frac_increased"],
            "jsd": attack["js_distance"], "null_q95": attack["js_null"]["q95"], "p": attack["js_null"]["p_value"],
            "low_quartile_shift": float((after - before)[low].mean()),
            "high_quartile_shift": float((after - before)[high].mean())}  # fmt: skip


def _summary(record: dict[str, Any], none: dict[str, Any] | None) -> dict[str, Any]:
    """One arm's figures; with `none`, paired 95 % intervals of arm − none (`length_robust_report`'s helpers)."""
    import numpy as np
    from length_robust_report import _attack_diffs, _interval, _spearman, _sts_avg_diff

    sts = record["sts_pairs"]
    row: dict[str, Any] = {**_attack_row(record["stsb_attack"]), "stsb": sts["STS-B"]["spearman"],
                           "sts12_16_avg": float(np.mean([sts[t]["spearman"] for t in QUALITY_STS]))}  # fmt: skip
    for name in ("first64x8", "sick_attack", "twitter_attack"):
        if name in record:
            row[name] = _attack_row(record[name])
    if "scifact" in record:
        row["scifact_ndcg@10"] = record["scifact"]["ndcg@10"]
    if none is None:
        return row
    vs: dict[str, Any] = {"stsb_attack": _attack_diffs(record["stsb_attack"], none["stsb_attack"])}
    base = none["sts_pairs"]
    gold = np.asarray(sts["STS-B"]["gold"])
    vs["stsb"] = _interval((np.asarray(sts["STS-B"]["cosines"]), np.asarray(base["STS-B"]["cosines"]), gold),
                           lambda f, b, g: _spearman(f, g) - _spearman(b, g))  # fmt: skip
    vs["sts12_16_avg"] = _sts_avg_diff(sts, base)
    if "scifact" in record and "scifact" in none:
        queries = sorted(none["scifact"]["per_query"])
        mine = np.asarray([record["scifact"]["per_query"][q] for q in queries]) * 100
        theirs = np.asarray([none["scifact"]["per_query"][q] for q in queries]) * 100
        vs["scifact_ndcg@10"] = _interval((mine, theirs), lambda x, y: float(np.mean(x) - np.mean(y)))
    row["vs_none"] = vs
    return row


def report(args: argparse.Namespace) -> None:
    import numpy as np

    from lengthwise.core.results import write_json_atomic

    none_path = args.out / "none" / "record.json"
    none = read_json(none_path) if none_path.exists() else None
    rows = {"none": _summary(none, None)} if none and "sts_pairs" in none else {}
    arm_seed = re.compile(rf"({'|'.join(map(re.escape, ARMS))})-s(\d+)(-step\d+)?")
    for folder in sorted(p for p in args.out.iterdir() if arm_seed.fullmatch(p.name)):
        record = read_json(folder / "record.json") if (folder / "record.json").exists() else {}
        if "sts_pairs" not in record or "stsb_attack" not in record:
            continue
        train = read_json(folder.with_name(folder.name.split("-step")[0]) / "train_record.json")
        rows[folder.name] = {**_summary(record, none if "none" in rows else None), "settings": ARMS[train["arm"]],
                             "train_wall_s": train["wall_s"], "train_cpu_s": train["cpu_s"],
                             "train_load_after": train["load_after"]}  # fmt: skip
    committed = REPO / "docs" / "results" / "length_invariant.json"
    if committed.exists():  # arms evaluated on another machine: kept from the committed record, not recomputed
        for name, row in read_json(committed)["arms"].items():
            rows.setdefault(name, row)
    rows = dict(sorted(rows.items(), key=lambda item: (item[0] != "none", item[0])))
    seeds: dict[str, Any] = {}
    for arm in ARMS:
        runs = [row for name, row in rows.items()
                if (m := arm_seed.fullmatch(name)) and m.group(1) == arm and not m.group(3)]  # fmt: skip
        if len(runs) > 1:
            seeds[arm] = {key: {"mean": float(np.mean([r[key] for r in runs])), "min": min(r[key] for r in runs),
                                "max": max(r[key] for r in runs), "n": len(runs)}
                          for key in ("jsd", "p", "mean_shift", "stsb", "sts12_16_avg")}  # fmt: skip
    study1 = read_json(REPO / "docs" / "results" / "length_robust.json")["fixes"]
    earlier = {fix: study1[fix]["headline"] for fix in ("recipe", "laser-self") if fix in study1}
    write_json_atomic(REPO / "docs" / "results" / "length_invariant.json",
                      {"arms": rows, "seed_spread": seeds, "study1": earlier})  # fmt: skip
    (args.out / "table.md").write_text(_table(rows), encoding="utf-8")
    _plot(rows, args.out, REPO / "docs" / "img" / "length_invariant.png")
    print(_table(rows))
    for name, row in rows.items():
        quartiles = f"{row['low_quartile_shift']:+.4f}/{row['high_quartile_shift']:+.4f}"
        print(f"{name:<22} jsd {row['jsd']:.4f} (q95 {row['null_q95']:.4f}, p {row['p']:.3f})  shift "
              f"{row['mean_shift']:+.4f}  risen {row['frac_increased']:.3f}  low/high q {quartiles}  "
              f"STS-B {row['stsb']:.2f}  STS12-16 {row['sts12_16_avg']:.2f}")  # fmt: skip


def _plot(rows: dict[str, dict[str, Any]], out: Path, path: Path) -> None:
    """Left: each arm's STS-B m = 100 JSD above its null q95 against its STS-B change (one point per arm and seed).
    Right: the attack's mean shift by decile of the original similarity, for the arms evaluated here (per pair)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    base = rows["none"]["stsb"]
    for name, row in rows.items():
        if "-step" in name:
            continue
        recipe = name.startswith("self-w1-c4-r1")
        color = "tab:green" if recipe else "tab:red" if name == "none" else "tab:gray"
        left.scatter(row["stsb"] - base, row["jsd"] - row["null_q95"], s=40 if recipe else 22, color=color, zorder=3)
        left.annotate(name, (row["stsb"] - base, row["jsd"] - row["null_q95"]), fontsize=6, xytext=(3, 2),
                      textcoords="offset points")  # fmt: skip
    left.axhline(0, color="black", lw=0.8)
    left.axvline(-0.5, color="black", lw=0.8, ls=":")
    left.set(xlabel="STS-B change vs none (points; dotted: −0.5)", ylabel="JSD − null q95 (below 0: within the null)",
             title="STS-B m = 100 attack: distribution vs quality")  # fmt: skip
    colors = {"none": "tab:red", "retain-w1-r1-s42": "tab:orange", "mix-w1-c4-s42": "tab:purple",
              "self-w1-c4-r1-s42": "tab:green"}  # fmt: skip
    for name, color in colors.items():
        record = out / name / "record.json"
        if not record.exists():
            continue
        attack = read_json(record)["stsb_attack"]
        before, after = np.asarray(attack["before"]), np.asarray(attack["after"])
        edges = np.quantile(before, np.linspace(0, 1, 11))
        bins = np.clip(np.searchsorted(edges, before, side="right") - 1, 0, 9)
        shift = [float((after - before)[bins == b].mean()) for b in range(10)]
        right.plot(range(1, 11), shift, marker="o", ms=3, label=name, color=color)
    right.axhline(0, color="black", lw=0.8)
    right.set(xlabel="decile of the original cosine (1 = least similar)", ylabel="mean cosine shift",
              title="where the attack moves pairs (seed 42)")  # fmt: skip
    right.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=130)
    plt.close(fig)


def _ci(entry: dict[str, float] | None, digits: int) -> str:
    if not entry:
        return ""
    return f" ({entry['diff']:+.{digits}f} [{entry['low']:+.{digits}f}, {entry['high']:+.{digits}f}])"


def _table(rows: dict[str, dict[str, Any]]) -> str:
    """Markdown: one row per arm and seed; Δ vs none with its paired 95 % interval in brackets."""
    head = ("| arm | train wall / CPU min (load) | STS-B m=100 shift | risen | low / high quartile shift | "
            "JSD (null q95; p) | STS-B | STS12–16 avg |")  # fmt: skip
    lines = [head, "|" + "---|" * 8]
    for name, row in rows.items():
        vs = row.get("vs_none", {})
        attack = vs.get("stsb_attack", {})
        cost = (f"{row['train_wall_s'] / 60:.1f} / {row['train_cpu_s'] / 60:.1f} ({row['train_load_after'][0]:.1f})"
                if "train_wall_s" in row else "—")  # fmt: skip
        lines.append(
            f"| {name} | {cost} | {row['mean_shift']:+.4f}{_ci(attack.get('mean_shift'), 4)} | "
            f"{row['frac_increased']:.3f} | {row['low_quartile_shift']:+.3f} / {row['high_quartile_shift']:+.3f} | "
            f"{row['jsd']:.3f} ({row['null_q95']:.3f}; {row['p']:.3f}) | {row['stsb']:.2f}{_ci(vs.get('stsb'), 2)} | "
            f"{row['sts12_16_avg']:.2f}{_ci(vs.get('sts12_16_avg'), 2)} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("stage", choices=("train", "eval", "report"))
    parser.add_argument("arm", nargs="?", choices=("none", *ARMS))
    parser.add_argument("--out", type=Path, default=Path("experiments/runs/length_invariant"))
    parser.add_argument("--model", default=None, help="starting model (default: the offline all-MiniLM-L6-v2)")
    parser.add_argument("--pairs", type=int, default=8000, help="training pairs in study 1's seeded four-source mix")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--full", action="store_true", help="eval: also first64x8, SICK, Twitter URL and SciFact")
    parser.add_argument("--checkpoint", type=int, default=None, help="eval: the run's checkpoint at this step")
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
