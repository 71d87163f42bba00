"""benchmarks/encode/longdoc_synthetic.py: its documented command makes the sets its results files hold."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", ["longdoc_synthetic.json", "longdoc_synthetic_overlap.json"])
def test_the_benchmarks_default_generator_is_the_one_its_results_files_were_made_with(name: str) -> None:
    """The files were made by LongEmbed's layout (the simple style: one stretch of haystack a length, needles over it);
    the realistic generator, the product's default since, gives other sets. A file whose tasks record no style
    predates the realistic one."""
    bench = importlib.import_module("benchmarks.encode.longdoc_synthetic")  # run from the repository root
    recorded = json.loads((ROOT / "docs" / "results" / name).read_text(encoding="utf-8"))
    styles = {task["meta"].get("style", "simple") for task in recorded["tasks"].values()}
    args = bench.parse_args(["--threads", "1"])
    assert styles == {args.style}
    assert bench.parse_args(["--style", "realistic"]).style == "realistic"
