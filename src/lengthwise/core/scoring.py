"""`WindowScoring`: how a document kept as several window vectors scores against a query (METHODS §5).

A light module (no torch), so settings that carry a scoring can be imported by the command line cheaply; the
maths is `lengthwise.core.encoder.multi_vector_scores`.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["WindowScoring"]


@dataclass(frozen=True)
class WindowScoring:
    """How a multi-vector document scores against a query from the cosines of its windows (METHODS §5).

    ``score = (1 - fuse_mean) * window_score + fuse_mean * cos(query, mean of the document's unit windows)``,
    where ``window_score`` is the max over the windows (`top_k` = 1) or the mean of the `top_k` best (all of them
    when the document has fewer). The fused term is the chunk-mean document score, computed from the same windows.
    """

    top_k: int = 1
    fuse_mean: float = 0.0

    def __post_init__(self) -> None:
        if self.top_k < 1:
            raise ValueError(f"top_k={self.top_k}: must be ≥ 1")
        if not 0.0 <= self.fuse_mean <= 1.0:
            raise ValueError(f"fuse_mean={self.fuse_mean}: must be in [0, 1]")

    @classmethod
    def of(cls, value: WindowScoring | int) -> WindowScoring:
        """`value` as a `WindowScoring`; a plain int is a `top_k`."""
        return value if isinstance(value, WindowScoring) else cls(top_k=int(value))
