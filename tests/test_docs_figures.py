"""A figure lives once: every figure the docs trace equals the value in its results file (scripts/docs_figures.py),
and a figure edited by hand, a moved JSON key or a missing results file fails."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("docs_figures", ROOT / "scripts" / "docs_figures.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


figures = _script()


@pytest.fixture
def results(tmp_path: Path) -> Path:
    """A repository root with one results file."""
    folder = tmp_path / "docs" / "results"
    folder.mkdir(parents=True)
    data = {
        "speed": {"rows": [{"tokens": 128, "ratio": 1.3151}, {"tokens": 512, "ratio": 1.2529}]},
        "quality": {"fp32": {"stsb": 82.0325}, "int8": {"stsb": 81.6711}, "int8, x86": {"stsb": 81.68}},
        "share": 0.5396,
    }
    (folder / "bench.json").write_text(json.dumps(data), encoding="utf-8")
    return tmp_path


def _problems(text: str, root: Path) -> list[str]:
    return [problem.message for problem in figures.check_text(text, "doc.md", root)[1]]


def test_every_traced_figure_in_the_docs_matches_its_results_file() -> None:
    problems, total = figures.check(figures.doc_paths())
    assert not problems, "\n".join(map(str, problems)) + "\n(fix: python scripts/docs_figures.py --write)"
    assert total >= 400, f"only {total} traced figures: markers were lost, or the marker pattern no longer matches"


def test_the_int8_speed_up_is_quoted_once() -> None:
    marker = "1.25<!-- figure: bench_precision.json:speed_26nov.rows.*.speedup_by_arm.int8 of=min"
    quoted = [p for p in figures.doc_paths() if marker in p.read_text(encoding="utf-8")]
    assert [p.relative_to(ROOT).as_posix() for p in quoted] == ["docs/benchmarks.md"]
    for stale in ("1.3-1.4x", "1.3–1.4×", "1.25–1.48×", "1.2–1.3×"):
        assert all(stale not in p.read_text(encoding="utf-8") for p in figures.doc_paths()), stale


def test_a_matching_figure_passes_in_prose_and_in_a_table(results: Path) -> None:
    text = (
        "int8 keeps 81.67<!-- figure: bench.json:quality.int8.stsb fmt=.2f --> (−0.36<!-- figure: "
        "bench.json:quality.int8.stsb minus=quality.fp32.stsb fmt=+.2f -->), **1.25–1.32×**"
        "<!-- figure: bench.json:speed.rows.*.ratio of=max fmt=.2f -->; 54.0 %<!-- figure: bench.json:share "
        'scale=100 fmt=.1f -->; x86: 81.68<!-- figure: bench.json:quality."int8, x86".stsb fmt=.2f -->\n\n'
        "<!-- figure-table: bench.json\nrows: speed.rows.0 ; - ; speed.rows.1 cols=2\n"
        "col 1: {row}.tokens fmt=,d\ncol 2: {row}.ratio fmt=.2f\n-->\n"
        "| tokens | ratio |\n| --- | --- |\n| 128 | 1.32× |\n| 999 | n/a |\n| 9,999 | 1.25× |\n"
    )
    new, problems, seen = figures.check_text(text, "doc.md", results)
    assert problems == [] and new == text
    assert seen == 5 + 3


def test_a_figure_edited_by_hand_fails_and_write_restores_it(results: Path) -> None:
    text = "int8 keeps 81.70<!-- figure: bench.json:quality.int8.stsb fmt=.2f --> on STS-B."
    assert _problems(text, results) == ["81.70 but bench.json:quality.int8.stsb gives 81.67"]
    new, _, _ = figures.check_text(text, "doc.md", results, write=True)
    assert new == text.replace("81.70", "81.67")
    minus = "a drop of −0.40<!-- figure: bench.json:quality.int8.stsb minus=quality.fp32.stsb fmt=+.2f -->"
    assert figures.check_text(minus, "doc.md", results, write=True)[0] == minus.replace("−0.40", "−0.36")


def test_a_table_cell_edited_by_hand_fails(results: Path) -> None:
    table = (
        "<!-- figure-table: bench.json\nrows: speed.rows.0 ; speed.rows.1\ncol 2: {row}.ratio fmt=.2f\n-->\n"
        "| tokens | ratio |\n| --- | --- |\n| 128 | 1.32× |\n| 512 | 1.35× |\n"
    )
    assert _problems(table, results) == ["cell 2: 1.35 but bench.json:speed.rows.1.ratio gives 1.25"]
    assert figures.check_text(table, "doc.md", results, write=True)[0] == table.replace("1.35×", "1.25×")
    extra_row = table.replace("| 512 | 1.35× |\n", "| 512 | 1.35× |\n| 1024 | 1.10× |\n")
    assert _problems(extra_row, results) == ["the table below has 3 body rows, the comment names 2"]
    two_numbers = table.replace("| 1.32× |", "| 1.32× (1.30×) |")
    assert _problems(two_numbers, results) == [
        "cell 2 holds 2 numbers, the comment gives 1 specs",
        "cell 2: 1.35 but bench.json:speed.rows.1.ratio gives 1.25",
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1.3<!-- figure: gone.json:speed fmt=.1f -->", "gone.json:speed: no such results file"),
        ("1.3<!-- figure: bench.json:speed.rows.7.ratio -->", "bench.json:speed.rows.7.ratio: no '7' in"),
        ("1.3<!-- figure: bench.json:speed.rows.*.ratio -->", "gives 2 values; say of="),
        ("1.3<!-- figure: bench.json:speed.rows.0.ratio colour=red -->", "unknown option 'colour=red'"),
        ("fast<!-- figure: bench.json:speed.rows.0.ratio fmt=.2f -->", "no figure right before the marker"),
        ("`1.32<!-- figure: bench.json:speed.rows.0.ratio fmt=.2f -->`", "inside inline code would be shown as text"),
        ("1.32<!-- figure: bench.json speed -->", "expected FILE:PATH first"),
        ("1.32<!-- figure: bench.json:speed | fmt=.2f -->", "a figure marker that does not parse"),
        ("see [the run](results/missing.json)", "names docs/results/missing.json, which does not exist"),
    ],
)
def test_a_marker_that_cannot_be_traced_fails(results: Path, text: str, message: str) -> None:
    doc = results / "doc.md"
    doc.write_text(text, encoding="utf-8")
    problems, _ = figures.check([doc], results)
    assert len(problems) == 1 and message in problems[0].message, problems


def test_a_code_block_shows_the_syntax_and_quotes_nothing(results: Path) -> None:
    example = (
        "```markdown\n7.77<!-- figure: bench.json:speed.rows.0.ratio fmt=.2f -->\n"
        "<!-- figure-table: bench.json\nrows: speed.rows.0\ncol 2: {row}.ratio fmt=.2f\n-->\n"
        "| a | b |\n|---|---|\n| 1 | 9.99 |\n```\n"
    )
    new, problems, seen = figures.check_text(example, "doc.md", results, write=True)
    assert (new, problems, seen) == (example, [], 0)


def test_signs_thousands_and_exponents_compare_as_numbers(results: Path) -> None:
    drop = "−0.36<!-- figure: bench.json:quality.int8.stsb minus=quality.fp32.stsb fmt=+.2f -->"
    assert _problems(drop, results) == []
    assert _problems("8,203<!-- figure: bench.json:quality.fp32.stsb scale=100 fmt=,.0f -->", results) == []
    assert _problems("1.3e-3<!-- figure: bench.json:speed.rows.0.ratio scale=0.001 fmt=.1e -->", results) == []
    assert _problems("w128<!-- figure: bench.json:speed.rows.0.tokens fmt=d -->", results) == [
        "no figure right before the marker for bench.json:speed.rows.0.tokens"
    ]


def test_find_prints_the_markers_for_a_figure(results: Path) -> None:
    assert figures.find("bench.json", "1.32", results) == ["<!-- figure: bench.json:speed.rows.0.ratio fmt=.2f -->"]
    assert figures.find("bench.json", "54.0", results) == ["<!-- figure: bench.json:share fmt=.1f scale=100 -->"]
