"""The report stage of `length_robust.py`: paired intervals against ``none``, the table, the plot, the model card.

Every difference to the unchanged model is a paired bootstrap 95 % interval (`scipy.stats.bootstrap`,
``paired=True``, percentile method, 2,000 resamples, seed 0) over the same pairs (attacks, STS) or queries
(SciFact). The STS12–16 average is resampled over the union of its five tasks' pairs, each resample scoring every
task on its own rows and averaging the five Spearmans.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ORDER = ("none", "tempscale", "recipe", "copy-concat", "laser-self", "hicl")
QUALITY_STS = ("STS12", "STS13", "STS14", "STS15", "STS16")
RESAMPLES = 2000


def _interval(arrays: Sequence[np.ndarray], statistic: Callable[..., float]) -> dict[str, float]:
    from lengthwise.core.stats import paired_bootstrap

    point, low, high = paired_bootstrap(arrays, statistic, resamples=RESAMPLES, vectorized=False)
    return {"diff": point, "low": low, "high": high}


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    from scipy.stats import spearmanr

    return 100.0 * float(spearmanr(x, y)[0])


def _jsd(before: np.ndarray, after: np.ndarray) -> float:
    from lengthwise.audit.config import HistogramSpec
    from lengthwise.audit.pairs.shift import js_distance

    return js_distance(before, after, HistogramSpec(bins=100))


def _attack_diffs(fix: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    b_f, a_f = np.asarray(fix["before"]), np.asarray(fix["after"])
    b_b, a_b = np.asarray(base["before"]), np.asarray(base["after"])
    return {
        "mean_shift": _interval((a_f - b_f, a_b - b_b), lambda x, y: float(np.mean(x) - np.mean(y))),
        "frac_increased": _interval((a_f - b_f, a_b - b_b), lambda x, y: float(np.mean(x > 0) - np.mean(y > 0))),
        "js_distance": _interval((b_f, a_f, b_b, a_b), lambda w, x, y, z: _jsd(w, x) - _jsd(y, z)),
    }


def _sts_avg_diff(fix: dict[str, Any], base: dict[str, Any]) -> dict[str, float]:
    task = np.concatenate([np.full(len(fix[name]["gold"]), i) for i, name in enumerate(QUALITY_STS)])
    gold = np.concatenate([np.asarray(fix[name]["gold"]) for name in QUALITY_STS])
    cos_f = np.concatenate([np.asarray(fix[name]["cosines"]) for name in QUALITY_STS])
    cos_b = np.concatenate([np.asarray(base[name]["cosines"]) for name in QUALITY_STS])

    def statistic(t: np.ndarray, g: np.ndarray, f: np.ndarray, b: np.ndarray) -> float:
        ids = range(len(QUALITY_STS))
        return float(np.mean([_spearman(f[t == i], g[t == i]) - _spearman(b[t == i], g[t == i]) for i in ids]))

    return _interval((task, gold, cos_f, cos_b), statistic)


def differences(fix: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    """Paired intervals of every measure of `fix` minus `base` (the unchanged model)."""
    out: dict[str, Any] = {
        "stsb_attack": _attack_diffs(fix["stsb_attack"], base["stsb_attack"]),
        "first64x8": _attack_diffs(fix["first64x8"], base["first64x8"]),
    }
    f_sts, b_sts = fix["sts"], base["sts"]
    gold = np.asarray(f_sts["STS-B"]["gold"])
    out["stsb"] = _interval(
        (np.asarray(f_sts["STS-B"]["cosines"]), np.asarray(b_sts["STS-B"]["cosines"]), gold),
        lambda f, b, g: _spearman(f, g) - _spearman(b, g),
    )
    out["sts12_16_avg"] = _sts_avg_diff(f_sts, b_sts)
    queries = sorted(base["scifact"]["per_query"])
    f_q = np.asarray([fix["scifact"]["per_query"][q] for q in queries]) * 100
    b_q = np.asarray([base["scifact"]["per_query"][q] for q in queries]) * 100
    out["scifact_ndcg@10"] = _interval((f_q, b_q), lambda x, y: float(np.mean(x) - np.mean(y)))
    return out


def headline(record: dict[str, Any]) -> dict[str, Any]:
    """The point values of one fix (no per-pair arrays)."""
    sts = record["sts"]
    strip = ("before", "after")
    probe = record["probe"]["probe"]
    return {
        "stsb_attack": {k: v for k, v in record["stsb_attack"].items() if k not in strip},
        "first64x8": {k: v for k, v in record["first64x8"].items() if k not in strip},
        "probe_ridge_r2x100": probe.get("ridge_r2x100_mean"),
        "probe_ridge_r2x100_std": probe.get("ridge_r2x100_std"),
        "probe_ols_r2x100": probe.get("r2x100_mean"),
        "stsb": sts["STS-B"]["spearman"],
        "sts": {name: sts[name]["spearman"] for name in QUALITY_STS},
        "sts12_16_avg": float(np.mean([sts[name]["spearman"] for name in QUALITY_STS])),
        "scifact_ndcg@10": record["scifact"]["ndcg@10"],
        "model": record["model"],
        "eval_wall_s": record.get("wall_s", {}),
    }


def _ci(entry: dict[str, float], digits: int) -> str:
    return f"{entry['diff']:+.{digits}f} [{entry['low']:+.{digits}f}, {entry['high']:+.{digits}f}]"


def _minutes(seconds: float | None) -> str:
    return "—" if not seconds else f"{seconds / 60:.1f} min"


def table(rows: dict[str, dict[str, Any]]) -> str:
    """Two markdown tables: robustness and quality, each fix's value and its paired interval against none."""
    lines = [
        "| fix | training wall time | STS-B m=100: mean shift (Δ vs none [95 % CI]) | risen "
        "| JSD (null 95 %; p; Δ [95 % CI]) | first64x8 JSD (Δ [95 % CI]) | probe R²×100 ridge |",
        "|---|---|---|---|---|---|---|",
    ]
    for fix, row in rows.items():
        h, d = row["headline"], row.get("diff")
        a, f = h["stsb_attack"], h["first64x8"]
        null, nan = a.get("js_null") or {}, float("nan")
        shift = f"{a['mean_shift']:+.4f}" + (f" ({_ci(d['stsb_attack']['mean_shift'], 4)})" if d else "")
        first = f"{f['js_distance']:.3f}" + (f" ({_ci(d['first64x8']['js_distance'], 3)})" if d else "")
        jsd = f"; Δ {_ci(d['stsb_attack']['js_distance'], 3)}" if d else ""
        lines.append(
            f"| {fix} | {_minutes(row.get('train_wall_s'))} | {shift} | {100 * a['frac_increased']:.1f} % "
            f"| {a['js_distance']:.3f} ({null.get('q95', nan):.3f}; p = {null.get('p_value', nan):.3f}){jsd} "
            f"| {first} | {h['probe_ridge_r2x100']:.1f} ± {h['probe_ridge_r2x100_std']:.1f} |"
        )
    lines += [
        "",
        "| fix | STS-B test (Δ [95 % CI]) | STS12–16 avg (Δ [95 % CI]) | SciFact nDCG@10 (Δ [95 % CI]) |",
        "|---|---|---|---|",
    ]
    for fix, row in rows.items():
        h, d = row["headline"], row.get("diff")

        def cell(value: float, key: str) -> str:
            return f"{value:.2f}" + (f" ({_ci(d[key], 2)})" if d else "")  # noqa: B023 - used at once

        lines.append(
            f"| {fix} | {cell(h['stsb'], 'stsb')} | {cell(h['sts12_16_avg'], 'sts12_16_avg')} "
            f"| {cell(h['scifact_ndcg@10'], 'scifact_ndcg@10')} |"
        )
    return "\n".join(lines)


def plot(rows: dict[str, dict[str, Any]], path: Path) -> Path:
    """Robustness (STS-B attack mean shift, left = robust) against quality, one point per fix, wall time shown."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharex=True)
    for axis, key, label in (
        (axes[0], "sts12_16_avg", "STS12–16 average (Spearman ×100)"),
        (axes[1], "scifact_ndcg@10", "SciFact nDCG@10 ×100"),
    ):
        for fix, row in rows.items():
            h = row["headline"]
            x, y = h["stsb_attack"]["mean_shift"], h[key]
            axis.scatter([x], [y], s=40)
            trained = row.get("train_wall_s")
            tag = f"{fix}\n{_minutes(trained) if trained else 'no training'}"
            axis.annotate(tag, (x, y), fontsize=8, xytext=(4, 4), textcoords="offset points")
        axis.axvline(0.0, color="grey", lw=0.8, ls=":")
        axis.set_xlabel("STS-B test attack m=100: mean similarity shift (0 = length-robust)")
        axis.set_ylabel(label)
    fig.suptitle("Fixes from all-MiniLM-L6-v2: length robustness against quality (2-core CPU)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def report(out: Path) -> dict[str, Any]:
    """Read OUT/<fix>/record.json of every evaluated fix; write OUT/report.json, OUT/table.md, OUT/robust.png."""
    from lengthwise.core.results import write_json_atomic

    parts = ("stsb_attack", "first64x8", "probe", "sts", "scifact")
    records = {fix: out / fix / "record.json" for fix in ORDER}
    loaded = {fix: json.loads(path.read_text()) for fix, path in records.items() if path.exists()}
    complete = {fix: record for fix, record in loaded.items() if all(key in record for key in parts)}
    if "none" not in complete:
        raise SystemExit("report: the unchanged model ('none') has not been evaluated yet")
    rows: dict[str, dict[str, Any]] = {}
    for fix, record in complete.items():
        trained = out / fix / "train_record.json"
        train = json.loads(trained.read_text()) if trained.exists() else None
        rows[fix] = {
            "headline": headline(record),
            "diff": None if fix == "none" else differences(record, complete["none"]),
            "train_wall_s": train["wall_s"] if train else None,
            "train": None if train is None else {k: train[k] for k in ("settings", "steps", "wall_s", "command")},
        }
    markdown = table(rows)
    (out / "table.md").write_text(markdown + "\n", encoding="utf-8")
    plot(rows, out / "robust.png")
    payload = {"bootstrap": {"method": "percentile", "resamples": RESAMPLES, "confidence": 0.95, "paired": True},
               "fixes": rows}  # fmt: skip
    write_json_atomic(out / "report.json", payload)
    if "recipe" in rows:  # the recipe model's card states what was measured, beside how it was made
        from lengthwise.training._card import write_card_section

        model_dir = Path(rows["recipe"]["headline"]["model"])
        note = (
            "## Measured (lengthwise study 1 at scale)\n\nEach fix starts from all-MiniLM-L6-v2; differences to the "
            "unchanged model (`none`) are paired 95 % bootstrap intervals (scipy.stats.bootstrap, paired=True). "
            "Commands, seeds and wall times: docs/results/README.md, study 1 at scale.\n\n" + markdown
        )
        write_card_section(model_dir, "measured", note)
    print(markdown)
    return payload
