"""The hall's scoring primitives: `paired_cosine` (row i of one array against row i of another) and
`WindowScoring` (how a document kept as several window vectors scores against a query, METHODS §5).

A light module (no torch; numpy is imported on first use), so settings that carry a scoring can be imported by the
command line cheaply; the multi-vector maths is `lengthwise.core.encoder.multi_vector_scores`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from lengthwise.core.errors import SettingError

if TYPE_CHECKING:
    import numpy as np

__all__ = ["WindowScoring", "paired_cosine"]


def paired_cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine of row i of `a` with row i of `b`, in float64: (n, d), (n, d) → (n,).

    The zero-vector rule: a row where either vector is all zeros has cosine 0 (a vector with no direction is
    similar to nothing), as sentence-transformers' ``pairwise_cos_sim`` gives; any other row is its exact cosine,
    however small its norms. The audit's similarity shifts and the STS scores both use this one function.

    Raises:
        SettingError: `a` and `b` are not two 2-D arrays of one shape.

    Example:
        >>> paired_cosine(np.array([[1.0, 0.0], [0.0, 0.0]]), np.array([[1.0, 1.0], [1.0, 0.0]])).round(4).tolist()
        [0.7071, 0.0]
    """
    import numpy as np

    a64, b64 = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a64.shape != b64.shape or a64.ndim != 2:
        raise SettingError(None, None, f"paired_cosine needs two (n, d) arrays of one shape, got {a64.shape} and "
                           f"{b64.shape}")  # fmt: skip
    norms = np.linalg.norm(a64, axis=1) * np.linalg.norm(b64, axis=1)  # (n,)
    dots = np.einsum("nd,nd->n", a64, b64)  # (n,)
    return np.divide(dots, norms, out=np.zeros_like(dots), where=norms > 0)


@dataclass(frozen=True)
class WindowScoring:
    """How a multi-vector document scores against a query from the cosines of its windows (METHODS §5).

    ``score = (1 - fuse_mean) * window_score + fuse_mean * cos(query, mean of the document's unit windows)``,
    where ``window_score`` is the max over the windows (`best_windows` = 1) or the mean of the `best_windows` best
    (all of them when the document has fewer). The fused term is the chunk-mean document score, computed from the
    same windows.
    """

    best_windows: int = 1
    fuse_mean: float = 0.0

    def __post_init__(self) -> None:
        if self.best_windows < 1:
            raise SettingError("best_windows", self.best_windows, "must be ≥ 1")
        if not 0.0 <= self.fuse_mean <= 1.0:
            raise SettingError("fuse_mean", self.fuse_mean, "must be in [0, 1], e.g. 0.3")

    @classmethod
    def of(cls, value: WindowScoring | int) -> WindowScoring:
        """`value` as a `WindowScoring`; a plain int is a `best_windows`."""
        return value if isinstance(value, WindowScoring) else cls(best_windows=int(value))
