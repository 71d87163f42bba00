"""Print the markdown tables of docs/longdoc.md from the benchmark results in docs/results/longdoc_*.json.

python experiments/longdoc_tables.py
"""

from __future__ import annotations

import json
from pathlib import Path

RESULTS = Path("docs/results")


def _synthetic(path: Path) -> None:
    if not path.is_file():
        return
    payload = json.loads(path.read_text())
    for task, entry in payload["tasks"].items():
        results = entry["results"]
        lengths = list(next(iter(results.values()))["by_length"])
        print(f"\n**{task}** ({path.name})\n")
        print("| strategy | " + " | ".join(lengths) + " | mean |")
        print("|---|" + "---:|" * (len(lengths) + 1))
        for name, result in results.items():
            cells = " | ".join(f"{result['by_length'][k]:.1f}" for k in lengths)
            print(f"| {name} | {cells} | **{result['mean']:.1f}** |")
        print("\nby needle depth (all lengths):\n")
        bins = [row["bin"] for row in next(iter(results.values()))["by_depth"]]
        print("| strategy | " + " | ".join(bins) + " |")
        print("|---|" + "---:|" * len(bins))
        for name, result in results.items():
            print(f"| {name} | " + " | ".join(f"{row['acc@1']:.1f}" for row in result["by_depth"]) + " |")


def _scifact(path: Path) -> None:
    if not path.is_file():
        return
    payload = json.loads(path.read_text())
    print(
        f"\n**SciFact** ({payload.get('data', {}).get('source', '')}); full abstract: "
        f"{payload['reference']['label']} = {payload['reference']['ndcg@10']:.2f}\n"
    )
    print("| window | strategy | nDCG@10 | gap recovered |")
    print("|---:|---|---:|---:|")
    for window, entry in payload["windows"].items():
        for name, score in entry["ndcg@10"].items():
            share = entry["gap_recovered"].get(name)
            print(f"| {window} | {name} | {score:.2f} | {'–' if share is None else f'{100 * share:.0f} %'} |")


def main() -> None:
    for name in ("longdoc_synthetic.json", "longdoc_synthetic_overlap.json", "longdoc_synthetic_late.json"):
        _synthetic(RESULTS / name)
    _scifact(RESULTS / "longdoc_scifact.json")
    for name in ("longdoc_throughput.json", "longdoc_memory.json"):
        path = RESULTS / name
        if path.is_file():
            payload = json.loads(path.read_text())
            summary = {k: v for k, v in payload.items() if k not in ("environment", "settings")}
            print(f"\n{name}: {json.dumps(summary)[:600]}")


if __name__ == "__main__":
    main()
