"""The hall's scoring primitives: one `paired_cosine` (the audit and the STS evaluation both use it)."""

from __future__ import annotations

import numpy as np
import pytest

from lengthwise.core.errors import SettingError
from lengthwise.core.scoring import WindowScoring, paired_cosine


def test_paired_cosine_known_values() -> None:
    a = np.asarray([[1.0, 0.0], [1.0, 1.0], [2.0, 0.0]])
    b = np.asarray([[0.0, 3.0], [2.0, 2.0], [-1.0, 0.0]])
    assert paired_cosine(a, b) == pytest.approx([0.0, 1.0, -1.0])
    assert paired_cosine(a.astype(np.float32), b.astype(np.float32)).dtype == np.float64


def test_paired_cosine_zero_vector_rule() -> None:
    """A row with an all-zero vector on either side scores 0; a tiny but non-zero vector keeps its exact cosine."""
    a = np.asarray([[0.0, 0.0], [1.0, 0.0], [0.0, 0.0], [1e-100, 1e-100]])
    b = np.asarray([[1.0, 0.0], [0.0, 0.0], [0.0, 0.0], [3.0, 3.0]])
    with np.errstate(all="raise"):  # no division by zero, no nan
        cosine = paired_cosine(a, b)
    assert cosine[:3].tolist() == [0.0, 0.0, 0.0]
    assert cosine[3] == pytest.approx(1.0)


def test_paired_cosine_refuses_arrays_of_two_shapes() -> None:
    a = np.ones((3, 2))
    with pytest.raises(SettingError, match="one shape"):
        paired_cosine(a, a[:2])
    with pytest.raises(SettingError, match="one shape"):
        paired_cosine(a[0], a[0])


def test_window_scoring_checks_its_settings() -> None:
    assert WindowScoring.of(3) == WindowScoring(best_windows=3)
    with pytest.raises(ValueError):
        WindowScoring(best_windows=0)
