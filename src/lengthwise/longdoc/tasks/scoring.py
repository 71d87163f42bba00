"""LongEmbed-style scoring of the synthetic tasks: rank within a length group, Acc@1 per length, by needle depth.

Each query is ranked only against the documents of its own length group (LongEmbed's protocol); Acc@1 (= nDCG@1
with one relevant document) is reported per length, as the mean over lengths, and by needle depth. A tie at the
top counts as a fair coin: the relevant document shares the first place with t others → 1 / (t + 1).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from lengthwise.core.encoder import MultiVectorEncoder, MultiVectors, TextEncoder, multi_vector_scores
from lengthwise.core.scoring import WindowScoring
from lengthwise.longdoc.tasks.synthetic import SyntheticSet

__all__ = ["DEPTH_BINS", "SyntheticResult", "evaluate_synthetic", "score_synthetic"]

DEPTH_BINS = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)


@dataclass(frozen=True)
class SyntheticResult:
    """Acc@1 ×100 per length, their mean, by depth bin, per (length, depth bin); timings in seconds."""

    task: str
    by_length: dict[int, float]
    mean: float
    by_depth: list[dict[str, Any]]
    by_length_depth: dict[int, list[float | None]]
    n_queries: int
    timings: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "metric": "acc@1 (x100), ranked within the length group",
            "mean": self.mean,
            "by_length": {str(k): v for k, v in self.by_length.items()},
            "by_depth": self.by_depth,
            "by_length_depth": {str(k): v for k, v in self.by_length_depth.items()},
            "depth_bins": list(DEPTH_BINS),
            "n_queries": self.n_queries,
            "timings_s": self.timings,
        }


def _top1(scores: torch.Tensor, relevant: torch.Tensor) -> np.ndarray:
    """(Q, n) scores, (Q,) relevant column → (Q,) Acc@1 with ties shared."""
    own = scores.gather(1, relevant[:, None]).squeeze(1)  # (Q,)
    higher = (scores > own[:, None]).sum(dim=1)
    tied = (scores == own[:, None]).sum(dim=1)  # includes itself
    return torch.where(higher == 0, 1.0 / tied.to(torch.float64), torch.zeros_like(own, dtype=torch.float64)).numpy()


def score_synthetic(
    data: SyntheticSet,
    queries: np.ndarray,
    documents: np.ndarray | MultiVectors,
    *,
    scoring: WindowScoring | int = 1,
) -> SyntheticResult:
    """Score embeddings aligned with `data.items` (query i asks for document i) within each length group."""
    q = torch.nn.functional.normalize(torch.as_tensor(queries, dtype=torch.float32), dim=-1)
    groups = np.asarray([item.group for item in data.items])
    depths = np.asarray([item.depth for item in data.items])
    hits = np.zeros(len(data.items))
    for group in np.unique(groups):
        members = np.nonzero(groups == group)[0]
        if isinstance(documents, MultiVectors):
            rows = [np.arange(documents.offsets[i], documents.offsets[i + 1]) for i in members]
            offsets = np.concatenate([[0], np.cumsum([len(r) for r in rows])])
            subset = MultiVectors(documents.vectors[np.concatenate(rows)], offsets)
            scores = multi_vector_scores(q[members], subset, scoring)  # (G, G)
        else:
            d = torch.nn.functional.normalize(torch.as_tensor(documents[members], dtype=torch.float32), dim=-1)
            scores = q[members] @ d.T  # (G, G)
        hits[members] = _top1(scores, torch.arange(len(members)))
    by_length = {int(g): round(100 * float(hits[groups == g].mean()), 2) for g in np.unique(groups)}
    edges = np.asarray(DEPTH_BINS)
    depth_bin = np.clip(np.searchsorted(edges, depths, side="right") - 1, 0, len(edges) - 2)
    by_depth = [
        {
            "bin": f"{edges[b]:.0%}–{edges[b + 1]:.0%}",
            "count": int((depth_bin == b).sum()),
            "acc@1": round(100 * float(hits[depth_bin == b].mean()), 2) if (depth_bin == b).any() else None,
        }
        for b in range(len(edges) - 1)
    ]
    grid = {
        int(g): [
            round(100 * float(hits[(groups == g) & (depth_bin == b)].mean()), 2)
            if ((groups == g) & (depth_bin == b)).any()
            else None
            for b in range(len(edges) - 1)
        ]
        for g in np.unique(groups)
    }
    return SyntheticResult(
        task=data.task,
        by_length=by_length,
        mean=round(float(np.mean(list(by_length.values()))), 2),
        by_depth=by_depth,
        by_length_depth=grid,
        n_queries=len(data.items),
    )


def evaluate_synthetic(
    encoder: TextEncoder, data: SyntheticSet, *, batch_size: int = 32, show_progress: bool = False
) -> SyntheticResult:
    """Encode the task's documents and queries with `encoder` (multi-vector when it is one) and score them."""
    started = time.perf_counter()
    texts = [item.text for item in data.items]
    documents: np.ndarray | MultiVectors
    scoring = WindowScoring()
    if isinstance(encoder, MultiVectorEncoder) and encoder.is_multi_vector:
        documents = encoder.encode_documents_multi(texts, batch_size=batch_size, show_progress=show_progress)
        scoring = encoder.window_scoring
    else:
        documents = encoder.encode_documents(texts, batch_size=batch_size, show_progress=show_progress)
    queries = encoder.encode_queries([item.query for item in data.items], batch_size=batch_size)
    encoded = time.perf_counter()
    result = score_synthetic(data, queries, documents, scoring=scoring)
    timings = {"encode": round(encoded - started, 3), "score": round(time.perf_counter() - encoded, 3)}
    return SyntheticResult(**{**result.__dict__, "timings": timings})
