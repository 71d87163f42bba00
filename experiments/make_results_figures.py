# ruff: noqa: E501
"""Figures for docs/results/README.md from the studies' summary.json files (whatever of them exists).

    python experiments/make_results_figures.py --runs experiments/runs --img docs/img

Writes results_length_attack.png (cosine distributions before/after the first64x8 attack, per model),
results_hicl_sts.png, results_simde_20ng.png and results_length_collapse.png.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _load(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def _save(fig: Any, out: Path) -> Path:
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def length_attack(run: Path, img: Path) -> Path | None:
    """One panel per model: histograms of same-topic cosines at 64 tokens and after 8 copies (512 tokens)."""
    summary = _load(run / "summary.json")
    if not summary:
        return None
    names = [n for n, r in summary["runs"].items() if "attack" in r and (run / f"audit_{n}" / "audit.json").exists()]
    fig, axes = plt.subplots(1, len(names), figsize=(3.2 * len(names), 2.8), sharey=True, squeeze=False)
    edges = np.linspace(-0.2, 1.0, 49)
    for ax, name in zip(axes[0], names, strict=True):
        sims = json.loads((run / f"audit_{name}" / "audit.json").read_text(encoding="utf-8"))["similarities"]
        ax.hist(sims["before"], bins=edges, alpha=0.55, label="first 64 tokens")
        ax.hist(sims["after"], bins=edges, alpha=0.55, label="× 8 copies (512)")
        ax.set_title(f"{name}\nJSD {summary['runs'][name]['attack']['jsd']:.3f}", fontsize=9)
        ax.set_xlabel("cosine, same-topic SciFact pair", fontsize=8)
    axes[0][0].set_ylabel("pairs")
    axes[0][0].legend(fontsize=7)
    return _save(fig, img / "results_length_attack.png")


def grouped_bars(groups: dict[str, dict[str, float]], ylabel: str, title: str, out: Path) -> Path:
    """Bars per category (x) for each series (colour)."""
    series = list(groups)
    cats = list(next(iter(groups.values())))
    x = np.arange(len(cats))
    width = 0.8 / len(series)
    fig, ax = plt.subplots(figsize=(max(5.0, 0.9 * len(cats) + 2), 3.2))
    for i, name in enumerate(series):
        ax.bar(x + i * width - 0.4 + width / 2, [groups[name].get(c, np.nan) for c in cats], width, label=name)
    values = [v for g in groups.values() for v in g.values() if v == v]
    ax.set_ylim(min(values) - 3, max(values) + 1.5)  # differences are a few points: do not start at 0
    ax.set_xticks(x, cats, fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return _save(fig, out)


def hicl(run: Path, img: Path) -> Path | None:
    summary = _load(run / "summary.json")
    if not summary:
        return None
    groups = {name: r["sts"]["spearman"] for name, r in summary["runs"].items() if "sts" in r}
    if not groups:
        return None
    return grouped_bars(
        groups, "Spearman × 100", "STS, all-MiniLM-L6-v2 start vs SimCSE vs HiCL", img / "results_hicl_sts.png"
    )


def simde(run: Path, img: Path) -> Path | None:
    summary = _load(run / "summary.json")
    if not summary:
        return None
    groups = {
        name: {setting: s["accuracy"] for setting, s in r["classification"]["runs"].items()}
        for name, r in summary["runs"].items()
        if "classification" in r
    }
    if not groups:
        return None
    return grouped_bars(groups, "accuracy × 100", "20 Newsgroups, logistic regression", img / "results_simde_20ng.png")


def length_collapse(run: Path, img: Path) -> Path | None:
    """Mean pairwise cosine and σ_a against length: the same reviews cut to k tokens (top), IMDB by bin (bottom)."""
    summary = _load(run / "summary.json")
    if not summary or not summary["models"]:
        return None
    fig, axes = plt.subplots(2, 2, figsize=(8.0, 5.6))
    for name, entry in summary["models"].items():
        rows = entry.get("controlled", [])
        ks = [row["k"] for row in rows]
        axes[0][0].plot(ks, [row["mean_cosine"] for row in rows], marker="o", label=name)
        axes[0][1].errorbar(ks, [row["sigma_mean"] for row in rows], [row["sigma_std"] for row in rows],
                            marker="o", capsize=3, label=name)  # fmt: skip
        nat = entry.get("natural")
        if nat:
            bins = [row for row in nat["collapse"] if row["n"] >= 10 and row["mean_cosine"] is not None]
            axes[1][0].plot([row["middle"] for row in bins], [row["mean_cosine"] for row in bins],
                            marker="o", label=name)  # fmt: skip
            sig = [row for row in nat["attention"]["by_bin"] if row["n"] >= 5]
            axes[1][1].errorbar([row["middle"] for row in sig], [row["sigma_mean"] for row in sig],
                                [row["sigma_std"] for row in sig], marker="o", capsize=3, label=name)  # fmt: skip
    n_long = summary["controlled_docs"]["n_docs"]
    titles = [[f"same {n_long} reviews cut to k tokens: mean pairwise cosine", "same reviews: σ_a, last layer"],
              ["IMDB test reviews by length bin: mean pairwise cosine", "IMDB by length bin: σ_a, last layer"]]  # fmt: skip
    for i, row_axes in enumerate(axes):
        for j, ax in enumerate(row_axes):
            ax.set_title(titles[i][j], fontsize=8)
            ax.set_xlabel("k (tokens)" if i == 0 else "content tokens (bin middle)", fontsize=8)
            if i == 0:
                ax.set_xscale("log", base=2)
            ax.axvline(256, color="grey", lw=0.6, ls=":")  # MiniLM's max_seq_length / training length
    axes[0][0].legend(fontsize=7)
    return _save(fig, img / "results_length_collapse.png")


def _jsd_difference_rows(run: Path, resamples: int = 1000) -> list[str]:
    """copy-concat − pairs JSD per pooling, with a 95 % paired bootstrap interval over the attacked pairs
    (`scipy.stats.bootstrap`, percentile interval)."""
    from lengthwise.audit.config import HistogramSpec
    from lengthwise.audit.pairs.shift import js_distance
    from lengthwise.core.stats import paired_bootstrap

    def sims(name: str) -> tuple[np.ndarray, np.ndarray] | None:
        path = run / f"audit_{name}" / "audit.json"
        if not path.exists():
            return None
        data = json.loads(path.read_text(encoding="utf-8"))["similarities"]
        return np.asarray(data["before"]), np.asarray(data["after"])

    rows = [
        "",
        "| pooling | bins | JSD copy-concat − pairs | 95 % paired bootstrap (pairs resampled) |",
        "|---|---|---|---|",
    ]
    for pool in ("mean", "cls"):
        base, ours = sims(f"pairs_{pool}"), sims(f"copy-concat_{pool}")
        if base is None or ours is None:
            continue
        for bins in (100, 20):
            spec = HistogramSpec(bins=bins)

            def difference(
                b0: np.ndarray, a0: np.ndarray, b1: np.ndarray, a1: np.ndarray, spec: HistogramSpec = spec
            ) -> float:
                return js_distance(b1, a1, spec) - js_distance(b0, a0, spec)

            diff = difference(*base, *ours)
            # one resample of the attacked pairs for both models
            _, low, high = paired_bootstrap((*base, *ours), difference, resamples=resamples, vectorized=False)
            rows.append(f"| {pool} | {bins} | {diff:+.3f} | [{low:+.3f}, {high:+.3f}] |")
    return rows if len(rows) > 3 else []


def _f(value: Any, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def tables(runs: Path) -> str:
    """Markdown tables of every study that has a summary.json (ours beside the paper's numbers)."""
    lines: list[str] = []
    la = _load(runs / "length_attack" / "summary.json")
    if la:
        r, paper = la["runs"], la["paper_table1_1_epoch"]
        from length_attack import jsd_noise_floor

        lines += ["| model | steps | loss first → last | mean cos 64 → 512 | pairs risen | JSD (100 bins; floor) | JSD (20 bins; floor) "
                  "| probe R²×100 OLS | ridge |", "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
        for name, e in r.items():
            t, a, p = e.get("train", {}), e.get("attack", {}), e.get("length_probe", {}).get("probe", {})
            loss = f"{_f(t['loss_first'][0], 4)} → {_f(t['loss_last'][-1], 4)}" if t else "—"
            audit = runs / "length_attack" / f"audit_{name}" / "audit.json"
            floors = ("—", "—")
            if audit.exists():
                before = json.loads(audit.read_text(encoding="utf-8"))["similarities"]["before"]
                floors = (_f(jsd_noise_floor(before, 100, 0), 3), _f(jsd_noise_floor(before, 20, 0), 3))
            lines.append(
                f"| {name} | {t.get('steps', 0)} | {loss} | {_f(a.get('mean_before'), 3)} → {_f(a.get('mean_after'), 3)} "
                f"| {_f(100 * a['frac_increased'], 0) if a else '—'} % | {_f(a.get('jsd'), 3)}; {floors[0]} | {_f(a.get('jsd_20_bins'), 3)}; {floors[1]} "
                f"| {_f(p.get('r2x100_mean'), 1)} | {_f(p.get('ridge_r2x100_mean'), 1)} ± {_f(p.get('ridge_r2x100_std'), 1)} |"
            )
        if any("jsd_null" in e.get("attack", {}) for e in r.values()):
            lines += ["", "| model | JSD 100 bins | null level (95 %) | p | JSD 20 bins | null level (95 %) | p |",
                      "|---|---|---|---|---|---|---|"]  # fmt: skip
            for name, e in r.items():
                a = e.get("attack", {})
                if "jsd_null" not in a:
                    continue
                n100, n20 = a["jsd_null"], a["jsd_20_bins_null"]
                lines.append(f"| {name} | {_f(a['jsd'], 3)} | {_f(n100['mean'], 3)} ({_f(n100['q95'], 3)}) | {_f(n100['p_value'], 3)} "
                             f"| {_f(a['jsd_20_bins'], 3)} | {_f(n20['mean'], 3)} ({_f(n20['q95'], 3)}) | {_f(n20['p_value'], 3)} |")  # fmt: skip
        lines += _jsd_difference_rows(runs / "length_attack")
        lines += ["", "| setting | default JSD (ours / paper) | + copy-concat JSD (ours / paper) | default R² ridge (OLS) / paper "
                  "| + ours R² ridge (OLS) / paper |", "|---|---|---|---|---|"]  # fmt: skip
        for pool in ("mean", "cls"):
            d, o = r.get(f"pairs_{pool}", {}), r.get(f"copy-concat_{pool}", {})

            def jsd(e: dict[str, Any]) -> str:
                return _f(e.get("attack", {}).get("jsd"), 3)

            def r2(e: dict[str, Any]) -> str:
                p = e.get("length_probe", {}).get("probe", {})
                return f"{_f(p.get('ridge_r2x100_mean'), 1)} ({_f(p.get('r2x100_mean'), 1)})"

            q = paper[pool]
            lines.append(
                f"| {pool} pooling | {jsd(d)} / {q['default_jsd']} | {jsd(o)} / {q['ours_jsd']} "
                f"| {r2(d)} / {q['default_r2']} | {r2(o)} / {q['ours_r2']} |"
            )
        lines.append("")
    hc = _load(runs / "hicl_vs_simcse" / "summary.json")
    if hc:
        tasks = [*hc["settings"]["tasks"].split(","), "avg"]
        lines += ["| model | " + " | ".join(tasks) + " |", "|---" * (len(tasks) + 1) + "|"]
        for name, e in hc["runs"].items():
            if "sts" in e:
                lines.append(f"| {name} (ours) | " + " | ".join(_f(e["sts"]["spearman"].get(t)) for t in tasks) + " |")
        for name in ("SimCSE-BERT-base", "+ HiCL"):
            lines.append(f"| {name} (paper) | " + " | ".join(_f(hc["paper"][name].get(t)) for t in tasks) + " |")
        lines += ["", "| method | steps | s/step (N = 512) | tokens/s | loss first → last |", "|---|---|---|---|---|"]
        for name, t in hc.get("timing_512", {}).items():
            lines.append(f"| {name} | {t['steps']} | {t['s_per_step']} | {_f(t['tokens_per_s'], 0)} "
                         f"| {_f(t['loss_first'][0], 4)} → {_f(t['loss_last'][-1], 4)} |")  # fmt: skip
        lines.append("")
    sd = _load(runs / "simde_vs_simcse" / "summary.json")
    if sd:
        lines += ["| model | train loss first → last | setting | accuracy | macro-F1 |", "|---|---|---|---|---|"]
        for name, e in sd["runs"].items():
            t = e.get("train")
            loss = f"{_f(t['loss_first'][0], 4)} → {_f(t['loss_last'][-1], 4)}" if t else "—"
            for setting, sc in e.get("classification", {}).get("runs", {}).items():
                acc = _f(sc["accuracy"]) + (f" ± {_f(sc['accuracy_std'])}" if "accuracy_std" in sc else "")
                f1 = _f(sc["macro_f1"]) + (f" ± {_f(sc['macro_f1_std'])}" if "macro_f1_std" in sc else "")
                lines.append(f"| {name} | {loss} | {setting} | {acc} | {f1} |")
        lines.append("")
    ls = _load(runs / "laser_vs_simcse" / "summary.json")
    if ls:
        lines += [
            "| model | setting | loss first → last | SciFact nDCG@10 | recall@100 | STS-B |",
            "|---|---|---|---|---|---|",
        ]
        for name, e in ls["runs"].items():
            t = e.get("train")
            loss = f"{_f(t['loss_first'][0], 4)} → {_f(t['loss_last'][-1], 4)}" if t else "—"
            sci = e.get("scifact", {})
            lines.append(f"| {name} | {e.get('setting', '—')} | {loss} | {_f(sci.get('ndcg@10'))} | {_f(sci.get('recall@100'))} "
                         f"| {_f(e.get('sts', {}).get('spearman', {}).get('STS-B'))} |")  # fmt: skip
    tt = _load(runs / "tempscale_tasks" / "summary.json")
    if tt:
        for name, e in tt["models"].items():
            for task in ("sts", "classification"):
                if task not in e:
                    continue
                metric = e[task].get("tuned", {}).get("metric", "spearman" if task == "sts" else "accuracy")
                runs_t = e[task]["runs"]
                bins = [b["bin"] for b in next(iter(runs_t.values()))["test"]["bins"] if b.get("count")]
                counts = {b["bin"]: b["count"] for b in next(iter(runs_t.values()))["test"]["bins"]}
                lines += ["", f"{name}, {task} ({metric} × 100; bins: test items by token length)", "",
                          "| t | dev | test | " + " | ".join(f"{b} (n = {counts[b]})" for b in bins) + " |",
                          "|---" * (3 + len(bins)) + "|"]  # fmt: skip
                for t, r in runs_t.items():
                    by_bin = {b["bin"]: b.get(metric) for b in r["test"]["bins"]}
                    lines.append(f"| {t} | {_f(r['dev']['scores'][metric])} | {_f(r['test']['scores'][metric])} | "
                                 + " | ".join(_f(by_bin.get(b)) for b in bins) + " |")  # fmt: skip
                if "tuned" in e[task]:
                    tu = e[task]["tuned"]
                    lines.append(f"\ntuned on dev: t = {tu['t']} → test {_f(tu['test'])} (t = 1: {_f(tu['test_t1'])})")
    lc = _load(runs / "length_collapse" / "summary.json")
    if lc:
        lines += ["", "| model | k | docs | mean pairwise cosine | distance to centroid | σ_a last layer (± std) | σ_a per layer |",
                  "|---|---|---|---|---|---|---|"]  # fmt: skip
        for name, e in lc["models"].items():
            for row in e.get("controlled", []):
                layers = ", ".join(f"{v:.2f}" for v in row["sigma_per_layer"])
                lines.append(f"| {name} | {row['k']} | {row['n']} | {_f(row['mean_cosine'], 3)} | {_f(row['centroid_distance'], 3)} "
                             f"| {_f(row['sigma_mean'], 3)} ± {_f(row['sigma_std'], 3)} | {layers} |")  # fmt: skip
        lines += ["", "| model | content tokens | docs | mean pairwise cosine | σ_a docs | σ_a last layer (± std) |",
                  "|---|---|---|---|---|---|"]  # fmt: skip
        for name, e in lc["models"].items():
            nat = e.get("natural")
            if not nat:
                continue
            sigma = {row["label"]: row for row in nat["attention"]["by_bin"]}
            for row in nat["collapse"]:
                s_row = sigma.get(row["label"], {})
                lines.append(f"| {name} | {row['label']} | {row['n']} | {_f(row['mean_cosine'], 3)} | {s_row.get('n', 0)} "
                             f"| {_f(s_row.get('sigma_mean'), 3)} ± {_f(s_row.get('sigma_std'), 3)} |")  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=Path, default=Path("experiments/runs"))
    parser.add_argument("--img", type=Path, default=Path("docs/img"))
    parser.add_argument("--tables", action="store_true", help="print markdown tables instead of drawing")
    args = parser.parse_args(argv)
    if args.tables:
        print(tables(args.runs))
        return 0
    args.img.mkdir(parents=True, exist_ok=True)
    makers = ((length_attack, "length_attack"), (hicl, "hicl_vs_simcse"), (simde, "simde_vs_simcse"),
              (length_collapse, "length_collapse"))  # fmt: skip
    for make, study in makers:
        print(study, make(args.runs / study, args.img))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
