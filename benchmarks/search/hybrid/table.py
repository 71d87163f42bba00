"""The ``table`` command of the hybrid benchmark: the quality study's table as docs/longdoc.md quotes it, with the
figure-table comment that traces every cell to the results file."""

from __future__ import annotations

from benchmarks.search.hybrid._common import _read
from benchmarks.search.hybrid._rule import SETS, choose


def _key(name: str) -> str:
    """A results-file path key as scripts/docs_figures.py reads it: quoted when it holds a dot."""
    return f'"{name}"' if "." in name or "-" in name else name


def markdown_table(section: str = "quality") -> str:
    """The study's table as docs/longdoc.md quotes it, with the figure-table comment that traces every cell to the
    results file: every arm's dev and test score on every corpus (`section`: ``quality``, all-MiniLM-L6-v2, or
    ``quality_models.all-mpnet-base-v2``), the dev mean and worst dev regret the rule reads (fusions an index serves
    only: the sides alone and ``*-both`` have none), the chosen arm in bold."""
    results = _read()
    node = results
    for key in section.split(".", 1) if section != "quality" else [section]:
        node = node[key]
    data, path = node["table"], ".".join(_key(k) for k in section.split(".", 1)) if section != "quality" else section
    chosen = choose(data)
    corpora = [s for s in SETS if f"{s}-test" in data and f"{s}-dev" in data]
    first = data[f"{corpora[0]}-test"]
    arms = ["dense", "bm25-document", "bm25-window", *[a for a in first if a not in ("dense", "bm25-document",
                                                                                        "bm25-window")]]  # fmt: skip
    traced = ",".join(str(n) for n in range(2, 2 + 2 * len(corpora)))
    rows = [f"{_key(a)}" + ("" if a in chosen["means"] else f" cols={traced}") for a in arms]
    cols = [f"col {2 + 2 * n + k}: {path}.table.{_key(f'{c}-{split}')}.{{row}} fmt=.2f"
            for n, c in enumerate(corpora) for k, split in enumerate(("dev", "test"))]  # fmt: skip
    last = 2 + 2 * len(corpora)
    rule = f"{path}.{'choice' if section == 'quality' else 'chosen_here'}"  # choose(table) as the stage wrote it
    cols += [f"col {last}: {rule}.means.{{row}} fmt=.2f", f"col {last + 1}: {rule}.worst_regret.{{row}} fmt=.2f"]
    comment = ["<!-- figure-table: bench_hybrid.json", "rows: " + " ; ".join(rows), *cols, "-->"]
    head = "| arm | " + " | ".join(f"{c} dev | {c} test" for c in corpora) + " | dev mean | worst dev regret |"
    lines = [*comment, head, "|" + " --- |" * (2 * len(corpora) + 3)]
    for arm in arms:
        cells = [f"{data[f'{c}-{split}'][arm]:.2f}" for c in corpora for split in ("dev", "test")]
        mean, worst = chosen["means"].get(arm), chosen["worst_regret"].get(arm)
        cells += ["–" if mean is None else f"{mean:.2f}", "–" if worst is None else f"{worst:.2f}"]
        name = f"**{arm}** (chosen)" if arm == chosen["chosen"] else arm
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
