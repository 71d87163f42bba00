#!/usr/bin/env python3
"""Check that every figure the docs quote equals the value in the results file that made it.

A figure quoted in prose carries an HTML comment right after it (invisible on GitHub and on the site) naming the
results file, the value's path inside it and how it is printed:

    STS-B test drops to 81.67<!-- figure: bench_precision.json:quality.rows.int8.stsb fmt=.2f -->

A table is traced by one comment right above it. ``rows:`` gives one path per body row (``-`` for a row that is
not traced; ``PATH cols=3,4`` for a row traced in those columns only; ``FILE:PATH`` for a row from another results
file), ``col N:`` the figures of the Nth cell (counted from 1), with ``{row}`` standing for the row's path; a cell
holding several numbers lists one spec per number, separated by ``;`` (``-`` for a number that is not traced, which
the doc must then say). A number with a prose marker of its own is left out of its cell's count:

    <!-- figure-table: bench_precision.json
    rows: robustness.rows.fp32 ; robustness.rows.int8
    col 2: {row}.mean_shift fmt=+.4f
    col 4: {row}.js_distance fmt=.3f ; {row}.js_null.q95 fmt=.3f ; {row}.js_null.p_value fmt=.3f
    -->
    | precision | mean shift | share risen | JSD (null q95; p) |
    ...

A spec is ``PATH [option=value ...]``; a prose marker puts ``FILE:`` before the path (a table's spec may, to read
another results file).

- FILE is a path from the repository root, or a bare name in ``docs/results/``.
- PATH is dot-separated keys; a key holding a dot, a space or a comma is quoted (``rows."int8, x86 engine"``); a
  number indexes a list; ``*`` takes every key or item (``bf16_*`` every key so named), and then ``of=`` says
  what to quote (``ci95_low`` / ``ci95_high``: the paired bootstrap interval of the mean, with ``minus=``).
- ``fmt=`` a Python format spec (``.2f``, ``+.2f``, ``,.0f``, ``.1e``; default ``g``); ``scale=`` a factor
  applied last (``100`` for a share quoted in %, ``-1`` for a drop quoted as a positive number); ``of=`` one of
  min, max, mean, median, sum, count over the values a ``*`` path gives; ``minus=`` / ``per=`` a second path in
  the same file (or ``FILE:PATH`` in another) to subtract / divide by, for a difference or ratio the JSON does
  not hold (one value, or as many as the first path gives, taken pairwise): ``of((value - minus) / per) * scale``.

A prose figure is the last number before its marker on the line (after the previous marker, if any); a unit or
``**`` may sit between them. ``−`` (U+2212) and ``-`` are the same sign, and ``1.3e-3`` equals ``1.3e-03``.

    python scripts/docs_figures.py             # check (the default): exit 1 and one line per drifted figure
    python scripts/docs_figures.py --write     # rewrite every traced figure from its results file
    python scripts/docs_figures.py --find bench_precision.json 1.32   # which paths print as 1.32?

``tests/test_docs_figures.py`` runs the check, so a hand-edited figure or a moved JSON key fails the suite.
"""

from __future__ import annotations

import argparse
import fnmatch
import functools
import json
import math
import re
import statistics
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path("docs") / "results"
DOCS = ("README.md", "docs/**/*.md", "benchmarks/README.md", "experiments/README.md")
MARKER = re.compile(r"<!-- figure: (?P<body>[^|\n]*?) -->")
TABLE = re.compile(r"<!-- figure-table: (?P<body>.*?)-->", re.DOTALL)
NUMBER = re.compile(r"(?<![\w.])[+\-−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:e[+\-−]?\d+)?")
TOKEN = re.compile(r'(?:"[^"]*"|[^\s"])+')
SEGMENT = re.compile(r'"([^"]*)"|([^."]+)')
FENCE = re.compile(r"^\s*(```|~~~)")
OPTIONS = ("fmt", "scale", "of", "minus", "per")
MAX_GAP = 12  # characters (a unit, bold marks) allowed between a prose figure and its marker


@functools.lru_cache(maxsize=256)
def _interval(values: tuple[float, ...]) -> tuple[float, float]:
    """The 95 % bootstrap interval of the mean of paired differences, as every lengthwise comparison computes it
    (``lengthwise.core.stats.paired_bootstrap``: 10,000 resamples, percentile, seed 0)."""
    import numpy as np

    from lengthwise.core.stats import paired_bootstrap

    _, low, high = paired_bootstrap((np.zeros(len(values)), np.asarray(values)), resamples=10_000, seed=0)
    return low, high


AGGREGATES: dict[str, Callable[[list[float]], float]] = {
    "min": min,
    "max": max,
    "mean": statistics.fmean,
    "median": statistics.median,
    "sum": math.fsum,
    "count": lambda values: float(len(values)),
    "ci95_low": lambda values: _interval(tuple(values))[0],
    "ci95_high": lambda values: _interval(tuple(values))[1],
}


@dataclass(frozen=True)
class Spec:
    """What one figure quotes: a path in a results file and how it is printed."""

    source: str
    path: str
    fmt: str = "g"
    scale: float = 1.0
    of: str | None = None
    minus: str | None = None
    per: str | None = None

    @property
    def name(self) -> str:
        return f"{self.source}:{self.path}"


@dataclass(frozen=True)
class Problem:
    """A figure that does not match its source, or a marker that cannot be read."""

    doc: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.doc}:{self.line}: {self.message}"


def parse_spec(text: str, source: str | None = None) -> Spec:
    """``[FILE:]PATH [fmt=..] [scale=..] [of=..] [minus=..] [per=..]`` → Spec; ValueError says what is wrong."""
    tokens = TOKEN.findall(text)
    if not tokens:
        raise ValueError("empty figure spec")
    path = tokens[0]
    elsewhere = re.match(r"([\w./-]+\.json):(.+)", path)
    if elsewhere:
        source, path = elsewhere.groups()
    elif source is None:
        raise ValueError(f"expected FILE:PATH first, got {text!r}")
    options: dict[str, str] = {}
    for token in tokens[1:]:
        key, sep, value = token.partition("=")
        if not sep or key not in OPTIONS:
            raise ValueError(f"unknown option {token!r} (expected {', '.join(o + '=' for o in OPTIONS)})")
        options[key] = value
    if "of" in options and options["of"] not in AGGREGATES:
        raise ValueError(f"of={options['of']}: expected one of {', '.join(AGGREGATES)}")
    scale = float(options.pop("scale", 1))
    return Spec(source=source, path=path, scale=scale, **options)


def split_path(path: str) -> list[str]:
    """``a."b.c".0.*`` → ``["a", "b.c", "0", "*"]``."""
    matches = list(SEGMENT.finditer(path))
    if not matches or ".".join(m.group(0) for m in matches) != path:
        raise ValueError(f"path {path!r}: expected keys joined by dots, a key with a dot or space in quotes")
    return [m.group(1) if m.group(1) is not None else m.group(2) for m in matches]


def lookup(data: Any, path: str) -> list[Any]:
    """Every value the path reaches (one unless it holds ``*``); KeyError names the first missing key."""
    found = [data]
    for segment in split_path(path):
        step: list[Any] = []
        for node in found:
            if segment == "*" and isinstance(node, (dict, list)):
                step.extend(node.values() if isinstance(node, dict) else node)
            elif "*" in segment and isinstance(node, dict):
                step.extend(value for key, value in node.items() if fnmatch.fnmatchcase(key, segment))
            elif isinstance(node, list) and segment.isdigit() and int(segment) < len(node):
                step.append(node[int(segment)])
            elif isinstance(node, dict) and segment in node:
                step.append(node[segment])
            else:
                raise KeyError(f"no {segment!r} in {path!r}")
        found = step
    return found


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{where!r} is {value!r}, not a number")
    return float(value)


def value_of(spec: Spec, load: Callable[[str], Any]) -> float:
    """The number a spec quotes, before formatting; ``load(name)`` reads a results file."""
    values = _numbers(load(spec.source), spec.path)
    for other, operation in ((spec.minus, lambda a, b: a - b), (spec.per, lambda a, b: a / b)):
        if other is not None:
            elsewhere = re.match(r"([\w./-]+\.json):(.+)", other)
            source, path = elsewhere.groups() if elsewhere else (spec.source, other)
            others = _numbers(load(source), path)
            if len(others) not in {1, len(values)}:
                raise ValueError(f"{path!r} gives {len(others)} values, {spec.path!r} {len(values)}")
            others = others * len(values) if len(others) == 1 else others
            values = [operation(a, b) for a, b in zip(values, others, strict=True)]
    if spec.of is not None:
        return AGGREGATES[spec.of](values) * spec.scale
    if len(values) != 1:
        raise ValueError(f"{spec.path!r} gives {len(values)} values; say of=min/max/mean/median/sum/count")
    return values[0] * spec.scale


def _numbers(data: Any, path: str) -> list[float]:
    return [_number(value, path) for value in lookup(data, path)]


def _normal(text: str) -> str:
    text = text.replace("−", "-").replace(",", "").removeprefix("+")
    return re.sub(r"e([+-]?)0*(\d)", lambda m: f"e{m.group(1).replace('+', '')}{m.group(2)}", text)


class Sources:
    """The results files, each read once."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.cache: dict[str, Any] = {}

    def load(self, source: str) -> Any:
        """One results file's content: ``source`` from the repository root, or a bare name in docs/results/."""
        if source not in self.cache:
            path = self.root / source if "/" in source else self.root / RESULTS / source
            self.cache[source] = json.loads(path.read_text(encoding="utf-8"))
        return self.cache[source]

    def text(self, spec: Spec) -> str:
        """The text the doc must show for ``spec``; FileNotFoundError, KeyError or ValueError if it cannot."""
        value = value_of(spec, self.load)
        return format(int(value) if spec.fmt.endswith("d") and value.is_integer() else value, spec.fmt)


def _compare(got: str, spec: Spec, sources: Sources) -> tuple[str | None, str]:
    """(the replacement for ``got``, or None when it matches or cannot be known; the problem, or "")."""
    try:
        want = sources.text(spec)
    except FileNotFoundError:
        return None, f"{spec.name}: no such results file (a bare name is looked up in {RESULTS})"
    except (KeyError, ValueError) as error:
        return None, f"{spec.name}: {error.args[0]}"
    if _normal(got) == _normal(want):
        return None, ""
    return (want.replace("-", "−") if "−" in got else want), f"{got} but {spec.name} gives {want}"


def _fenced(lines: list[str]) -> list[bool]:
    inside, flags = False, []
    for line in lines:
        if FENCE.match(line):
            inside = not inside
        flags.append(inside)
    return flags


def _open_ticks(lines: list[str], fenced: list[bool]) -> list[int]:
    """Per line, the backticks still open from the lines above in its paragraph (odd: inside a code span)."""
    carried, counts = 0, []
    for line, inside in zip(lines, fenced, strict=True):
        counts.append(carried)
        reset = inside or not line.strip() or line.startswith("|")
        carried = 0 if reset else (carried + line.count("`")) % 2
    return counts


def _check_prose(lines: list[str], sources: Sources, write: bool) -> Iterator[tuple[int, str]]:
    fenced = _fenced(lines)
    ticks = _open_ticks(lines, fenced)
    for index, line in enumerate(lines):
        if "<!-- figure:" not in line or fenced[index]:
            continue  # a code block shows the syntax, it quotes nothing
        pieces, start = [], 0
        for match in MARKER.finditer(line):
            before = line[start : match.start()]
            code = (ticks[index] + line[: match.start()].count("`")) % 2 == 1
            fixed, problem = _check_marker(before, match.group("body"), sources, code)
            if problem:
                yield index, problem
            pieces.append((fixed if write and fixed is not None else before) + match.group(0))
            start = match.end()
        if line.count("<!-- figure:") != len(pieces):
            yield index, "a figure marker that does not parse: `<!-- figure: FILE:PATH [options] -->` on one line"
        lines[index] = "".join(pieces) + line[start:]


def _check_marker(before: str, body: str, sources: Sources, code: bool) -> tuple[str | None, str]:
    """(the text before the marker with its figure rewritten, or None; the problem, or "")."""
    if code:
        return None, "a figure marker inside inline code would be shown as text; quote the figure in prose"
    try:
        spec = parse_spec(body)
    except ValueError as error:
        return None, str(error)
    numbers = list(NUMBER.finditer(before))
    if not numbers or len(before) - numbers[-1].end() > MAX_GAP:
        return None, f"no figure right before the marker for {spec.name}"
    got = numbers[-1]
    fixed, problem = _compare(got.group(), spec, sources)
    return (None if fixed is None else before[: got.start()] + fixed + before[got.end() :]), problem


@dataclass(frozen=True)
class Row:
    """One traced row: its path, the columns traced in it (None: every ``col N:``), its own results file if any."""

    path: str
    only: frozenset[int] | None = None
    source: str | None = None


@dataclass
class TableSpec:
    """A ``<!-- figure-table: -->`` comment: the row paths and, per cell, the specs of its figures."""

    rows: list[Row | None]
    columns: dict[int, list[str]]
    source: str

    def traced(self) -> int:
        """How many figures the table traces."""
        return sum(
            sum(spec != "-" for spec in specs)
            for row in self.rows
            if row is not None
            for column, specs in self.columns.items()
            if row.only is None or column in row.only
        )


def parse_row(text: str) -> Row | None:
    """``-`` → None; ``[FILE:]PATH [cols=N,M]`` → a Row (from another results file; in those columns only)."""
    tokens = TOKEN.findall(text)
    if tokens == ["-"]:
        return None
    if not tokens or any(not t.startswith("cols=") for t in tokens[1:]) or len(tokens) > 2:
        raise ValueError(f"a row is `-` or `[FILE:]PATH [cols=N,M]`, got {text.strip()!r}")
    only = frozenset(int(c) for c in tokens[1][5:].split(",")) if len(tokens) == 2 else None
    elsewhere = re.match(r"([\w./-]+\.json):(.+)", tokens[0])
    return Row(elsewhere.group(2), only, elsewhere.group(1)) if elsewhere else Row(tokens[0], only)


def parse_table(body: str) -> TableSpec:
    """The comment's text → TableSpec; ValueError says what is wrong."""
    head, *lines = body.strip().split("\n")
    source, rows, columns = head.strip(), [], {}
    for line in filter(None, (line.strip() for line in lines)):
        key, sep, value = line.partition(":")
        if not sep:
            raise ValueError(f"expected `rows: …` or `col N: …`, got {line!r}")
        if key == "rows":
            rows.extend(parse_row(row) for row in value.split(";"))
        elif re.fullmatch(r"col \d+", key):
            columns[int(key.split()[1])] = [part.strip() for part in value.split(";")]
        else:
            raise ValueError(f"expected `rows: …` or `col N: …`, got {line!r}")
    if not source.endswith(".json") or " " in source or not rows or not columns:
        raise ValueError("a figure table names its results file, then `rows:` and at least one `col N:`")
    return TableSpec(rows, columns, source)


def _tables(text: str) -> Iterator[re.Match[str]]:
    """The ``<!-- figure-table: -->`` comments of a text, outside code blocks."""
    fenced = _fenced(text.split("\n"))
    yield from (match for match in TABLE.finditer(text) if not fenced[text.count("\n", 0, match.start())])


def _check_tables(text: str, lines: list[str], sources: Sources, write: bool) -> Iterator[tuple[int, str]]:
    for match in _tables(text):
        after = text.count("\n", 0, match.end()) + 1  # the line below the comment
        try:
            table = parse_table(match.group("body"))
        except ValueError as error:
            yield after - 1, str(error)
            continue
        first = after + 2  # below the header and the |---| line
        body = []
        while first + len(body) < len(lines) and lines[first + len(body)].lstrip().startswith("|"):
            body.append(first + len(body))
        if not lines[after].lstrip().startswith("|") or len(body) != len(table.rows):
            yield after - 1, f"the table below has {len(body)} body rows, the comment names {len(table.rows)}"
            continue
        for index, row in zip(body, table.rows, strict=True):
            if row is not None:
                yield from ((index, p) for p in _check_row(lines, index, row, table, sources, write))


def _check_row(lines: list[str], index: int, row: Row, table: TableSpec, sources: Sources, write: bool) -> list[str]:
    cells = lines[index].split("|")
    problems = []
    for column, texts in table.columns.items():
        if row.only is not None and column not in row.only:
            continue
        if column >= len(cells) - 1:
            problems.append(f"no cell {column} in this row")
            continue
        numbers = _unmarked_numbers(cells[column])
        if len(numbers) != len(texts):
            problems.append(f"cell {column} holds {len(numbers)} numbers, the comment gives {len(texts)} specs")
            continue
        for number, spec_text in reversed(list(zip(numbers, texts, strict=True))):  # right to left: offsets stay valid
            if spec_text == "-":
                continue  # a number the comment says is not traced
            try:
                spec = parse_spec(spec_text.replace("{row}", row.path), source=row.source or table.source)
            except ValueError as error:
                problems.append(str(error))
                continue
            fixed, problem = _compare(number.group(), spec, sources)
            problems += [f"cell {column}: {problem}"] if problem else []
            if write and fixed is not None:
                cells[column] = cells[column][: number.start()] + fixed + cells[column][number.end() :]
    lines[index] = "|".join(cells)
    return problems


def _unmarked_numbers(cell: str) -> list[re.Match[str]]:
    """The numbers of a table cell, less those traced by a prose marker of their own."""
    blanked = MARKER.sub(lambda marker: " " * len(marker.group()), cell)  # same offsets, no numbers of its own
    numbers = list(NUMBER.finditer(blanked))
    claimed = set()
    for marker in MARKER.finditer(cell):
        before = [n for n in numbers if n.end() <= marker.start()]
        if before:
            claimed.add(before[-1].start())
    return [n for n in numbers if n.start() not in claimed]


def check_text(text: str, doc: str, root: Path = ROOT, write: bool = False) -> tuple[str, list[Problem], int]:
    """Check every traced figure in one markdown text → (the text, rewritten if ``write``; problems; figures)."""
    sources = Sources(root)
    lines = text.split("\n")
    found = list(_check_prose(lines, sources, write))
    found += _check_tables(text, lines, sources, write)
    problems = [Problem(doc, index + 1, message) for index, message in sorted(found)]
    return "\n".join(lines), problems, count_figures(text)


def count_figures(text: str) -> int:
    """How many figures a text traces: one per prose marker, one per spec in a traced table cell."""
    lines = text.split("\n")
    total = sum(len(MARKER.findall(line)) for line, fenced in zip(lines, _fenced(lines), strict=True) if not fenced)
    for match in _tables(text):
        try:
            table = parse_table(match.group("body"))
        except ValueError:
            continue
        total += table.traced()
    return total


def cited_results(text: str) -> Iterator[tuple[int, str]]:
    """(line, ``NAME.json``) for each ``docs/results/NAME.json`` named outside code blocks and ``--out``."""
    lines = text.split("\n")
    for number, (line, fenced) in enumerate(zip(lines, _fenced(lines), strict=True), start=1):
        for match in re.finditer(r"(?:docs/)?results/(\w+|\{[\w,]+\})(\w*)\.json", "" if fenced else line):
            if "--out" in line[max(0, match.start() - 40) : match.start()]:
                continue  # where a command writes, not a file the doc quotes
            head, tail = match.group(1), match.group(2)
            names = head.strip("{}").split(",") if head.startswith("{") else [head]
            yield from ((number, f"{name}{tail}.json") for name in names)


def doc_paths(root: Path = ROOT) -> list[Path]:
    """The markdown files whose figures are checked."""
    found: set[Path] = set()
    for pattern in DOCS:
        found.update(p for p in root.glob(pattern) if p.is_file())
    return sorted(found)


def check(paths: Iterable[Path], root: Path = ROOT, write: bool = False) -> tuple[list[Problem], int]:
    """Check (or rewrite) the traced figures of the given docs, and that each results file they name exists."""
    problems: list[Problem] = []
    total = 0
    for path in paths:
        doc = str(path.relative_to(root))
        text = path.read_text(encoding="utf-8")
        new, found, seen = check_text(text, doc, root, write)
        total += seen
        problems.extend(found)
        if write and new != text:
            path.write_text(new, encoding="utf-8")
        for line, name in cited_results(text):
            if not (root / RESULTS / name).is_file():
                problems.append(Problem(doc, line, f"names {RESULTS / name}, which does not exist"))
    return problems, total


def find(source: str, figure: str, root: Path = ROOT) -> list[str]:
    """Prose markers whose value prints as ``figure`` (scale 1, 100, -1 or -100; the figure's decimals)."""
    data = json.loads((root / RESULTS / source if "/" not in source else root / source).read_text("utf-8"))
    decimals = len(figure.split(".")[1]) if "." in figure else 0
    hits = []
    for path, value in _leaves(data, ""):
        for scale in (1, 100, -1, -100):
            fmt = next((f for f in (f".{decimals}f", f"+.{decimals}f") if _match(value * scale, f, figure)), None)
            if fmt is not None:
                hits.append(f"<!-- figure: {source}:{path} fmt={fmt}{f' scale={scale}' if scale != 1 else ''} -->")
                break
    return hits


def _match(value: float, fmt: str, figure: str) -> bool:
    return _normal(format(value, fmt)) == _normal(figure)


def _leaves(node: Any, prefix: str) -> Iterator[tuple[str, float]]:
    if isinstance(node, dict):
        items: Iterable[tuple[str, Any]] = ((f'"{k}"' if re.search(r'[.\s,"]', k) else k, v) for k, v in node.items())
    elif isinstance(node, list):
        items = ((str(i), v) for i, v in enumerate(node))
    else:
        if isinstance(node, (int, float)) and not isinstance(node, bool):
            yield prefix, float(node)
        return
    for key, value in items:
        yield from _leaves(value, f"{prefix}.{key}" if prefix else key)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("docs", nargs="*", type=Path, help="markdown files (default: README.md and docs/)")
    parser.add_argument("--write", action="store_true", help="rewrite each traced figure from its results file")
    parser.add_argument("--find", nargs=2, metavar=("FILE", "FIGURE"), help="print markers whose value prints so")
    args = parser.parse_args(argv)
    if args.find:
        hits = find(*args.find)
        print("\n".join(hits) if hits else f"no value in {args.find[0]} prints as {args.find[1]}")
        return 0 if hits else 1
    paths = [p.resolve() for p in args.docs] or doc_paths()
    problems, total = check(paths, write=args.write)
    for problem in problems:
        print(problem, file=sys.stderr)
    print(f"{'rewrote' if args.write else 'checked'} {total} figures in {len(paths)} files; {len(problems)} problems")
    return 1 if problems and not args.write else 0


if __name__ == "__main__":
    raise SystemExit(main())
