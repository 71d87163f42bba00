"""The rule that chooses the default fusion from the quality stage's table (docs/longdoc.md, "Issue 49"; `RULE`):
the corpora of the choice, the fusion arms an index serves and how they are named, and `choose` with its
leave-one-corpus-out check. The quality, recall and table stages and the ``choose`` command read it."""

from __future__ import annotations

from typing import Any

import numpy as np

WEIGHTED = ("convex", "zscore", "minmax", "dbsf")  # the fusions with a lexical weight (each at every one of WEIGHTS)
UNWEIGHTED = ("rrf", "adaptive")
SETS = ("qmsum", "scifact", "newsgroups", "replies", "passkey", "needle")  # the corpora of the choice (docs/longdoc.md)
DEV_SETS = tuple(f"{name}-dev" for name in SETS)
RULE = ("issue 49, written in docs/longdoc.md before the run: among the fusions an index serves (one lexical "
        "granularity), an arm's regret on a corpus is the best such arm's dev score there less its own; the admissible "
        "arms lose at most 1 point on every corpus's dev split, and the default is the admissible arm with the highest "
        "dev mean (none admissible: the smallest worst regret, then the highest mean). Leave-one-corpus-out: the same "
        "rule on the other corpora's dev splits must choose an arm within 1 point of the best on the held-out "
        "corpus's test split. Amended in session 47, after the sixth corpus (20 Newsgroups replies) was added and "
        "before the all-mpnet-base-v2 check: the index now also serves both granularities of BM25 together (index "
        "build --granularity both), so the *-both arms are fusions an index serves and enter the choice")  # fmt: skip
TOLERANCE = 1.0  # points of nDCG@10 / Acc@1 a rule may lose to the best on any corpus


def arm_settings(arm: str) -> tuple[str, Any]:
    """The lexical granularity and `FusionSettings` of a fusion arm named as `_arms` names them
    (``convex-window-0.1``, ``rrf-document``, ``adaptive-window`` …)."""
    from lengthwise.core.fusion import Fusion
    from lengthwise.search.types import FusionSettings

    fusion, granularity, *weight = arm.split("-")
    return granularity, FusionSettings(Fusion(fusion), float(weight[0]) if weight else 0.5)


def served(table_row: dict[str, float]) -> list[str]:
    """The arms a default may be: the fusions an index serves (not the sides alone), over one lexical granularity
    or both (``*-both``, served since session 47)."""
    return [arm for arm in table_row if arm.split("-")[0] in WEIGHTED + UNWEIGHTED]


def _pick(table: dict[str, dict[str, float]], corpora: list[str]) -> dict[str, Any]:
    """The rule on the dev splits of `corpora`: regrets, the admissible arms, the chosen one."""
    arms = served(table[f"{corpora[0]}-dev"])
    dev = {c: table[f"{c}-dev"] for c in corpora}
    worst = {a: max(max(dev[c][b] for b in arms) - dev[c][a] for c in corpora) for a in arms}
    means = {a: float(np.mean([dev[c][a] for c in corpora])) for a in arms}
    admissible = [a for a in arms if worst[a] <= TOLERANCE + 1e-9]
    order = sorted(admissible or arms, key=lambda a: (0.0 if admissible else round(worst[a], 6), -round(means[a], 6),
                                                      a))  # fmt: skip
    return {"worst_regret": {a: round(w, 2) for a, w in worst.items()},
            "means": {a: round(m, 2) for a, m in means.items()}, "admissible": admissible,
            "chosen": order[0]}  # fmt: skip


def choose(table: dict[str, dict[str, float]]) -> dict[str, Any]:
    """The rule of docs/longdoc.md (`RULE`) applied to the dev sets present, and its leave-one-corpus-out check on
    the test splits: for each corpus held out, the arm the rule picks from the others and its loss there."""
    corpora = [s.removesuffix("-dev") for s in DEV_SETS if s in table]
    out = {"dev_sets": [f"{c}-dev" for c in corpora], **_pick(table, corpora), "held_out": {}}
    for held in [c for c in corpora if f"{c}-test" in table] if len(corpora) > 1 else []:
        pick = _pick(table, [c for c in corpora if c != held])["chosen"]
        test = table[f"{held}-test"]
        best = max(served(test), key=lambda a: (test[a], a))
        out["held_out"][held] = {"chosen": pick, "test": test[pick], "best": best, "best_test": test[best],
                                 "loss": round(test[best] - test[pick], 2)}  # fmt: skip
    return out
