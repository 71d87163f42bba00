"""Plots of per-length-bin tables: one metric per figure, one line per run, the item count under each bin.

Rows that carry ``<metric>_std`` (few-shot runs: the spread over repeats) get a shaded ±1 std band.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lengthwise.evaluation.schema import EvalRecord

__all__ = ["PLOT_NAMES", "plot_bins", "write_plots"]

PLOT_NAMES = frozenset(
    {
        "sts_bins.png",
        "retrieval_query_bins.png",
        "retrieval_document_bins.png",
        "classification_accuracy_bins.png",
        "classification_macro_f1_bins.png",
    }
)  # every file name `write_plots` may write


def plot_bins(
    series: Mapping[str, Sequence[Mapping[str, Any]]],
    metric: str,
    path: str | Path,
    *,
    title: str,
    ylabel: str | None = None,
) -> Path:
    """Line plot of `metric` per bin for each named series of bin rows (``{"bin", "count", metric}``); PNG.

    A series whose rows hold ``f"{metric}_std"`` is drawn with a ±1 std band around its line.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    first = next(iter(series.values()))
    labels = [f"{row['bin']}\nn={row['count']}" for row in first]
    fig, ax = plt.subplots(figsize=(6.4, 3.6), dpi=100)
    for name, rows in series.items():
        values = [_number(row.get(metric)) for row in rows]
        (line,) = ax.plot(range(len(rows)), values, marker="o", label=name)
        spread = [_number(row.get(f"{metric}_std")) for row in rows]
        if not all(math.isnan(s) for s in spread):
            low = [v - s for v, s in zip(values, spread, strict=True)]
            high = [v + s for v, s in zip(values, spread, strict=True)]
            ax.fill_between(range(len(rows)), low, high, color=line.get_color(), alpha=0.15, linewidth=0)
    ax.set_xticks(range(len(labels)), labels, fontsize=8)
    ax.set_xlabel("token length bin (tokens without specials)")
    ax.set_ylabel(ylabel or metric)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    if len(series) > 1:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def _number(value: object) -> float:
    return float("nan") if value is None else float(value)  # type: ignore[arg-type]


def _data_name(record: EvalRecord) -> str:
    """A short name for titles: the data folder (or file) name."""
    source = Path(str(record["data"]["source"]).split(" (")[0])
    return source.parent.name if source.name.startswith(("test.", "train.")) else source.name


def write_plots(record: EvalRecord, out: str | Path) -> list[Path]:
    """The PNG plots of one `lengthwise eval` record (``results.json``), written into folder `out`."""
    out = Path(out)
    name = _data_name(record)
    written: list[Path] = []
    if record["task"] == "sts":
        rows = record["result"]["bins"]["rows"]
        if rows:
            title = f"STS by length — {name}"
            written.append(plot_bins({"Spearman": rows}, "spearman", out / "sts_bins.png", title=title))
    elif record["task"] == "retrieval":
        tables = record["result"]["bins"]
        queries, documents = tables["queries"]["rows"], tables["documents"]["rows"]
        if queries:
            ndcg = next(key for key in record["result"]["scores"] if key.startswith("ndcg@"))
            title = f"{ndcg} by query length — {name}"
            written.append(plot_bins({ndcg: queries}, ndcg, out / "retrieval_query_bins.png", title=title))
            recall = [key for key in documents[0] if key.startswith("recall@")] if documents else []
            if recall:
                series = {
                    key: [{"bin": r["bin"], "count": r["count"], "value": r.get(key)} for r in documents]
                    for key in recall
                }
                written.append(
                    plot_bins(
                        series,
                        "value",
                        out / "retrieval_document_bins.png",
                        title=f"relevant documents found, by document length — {name}",
                        ylabel="% of relevant documents",
                    )
                )
    else:
        runs = {
            f"{run['classifier']} {run['setting']}": run["bins"] for run in record["result"]["runs"] if run.get("bins")
        }
        for metric in ("accuracy", "macro_f1"):
            if runs:
                title = f"{metric} by length — {name}"
                written.append(plot_bins(runs, metric, out / f"classification_{metric}_bins.png", title=title))
    return written
