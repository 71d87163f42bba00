#!/usr/bin/env python3
"""List the longest function bodies (docstring excluded) under a folder.

python scripts/function_sizes.py src/lengthwise/cli --most 10
python scripts/function_sizes.py src/lengthwise/cli --max 40    # exit 1 over 40 lines (scripts/test.sh runs it)
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path


def body_lengths(folder: Path) -> list[tuple[int, str]]:
    """(lines, "file:function") for every function under `folder`, longest first."""
    found = []
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
                body = node.body
                first = body[0]
                if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and len(body) > 1:
                    body = body[1:]
                end = body[-1].end_lineno or body[-1].lineno
                found.append((end - body[0].lineno + 1, f"{path.relative_to(folder)}:{node.name}"))
    return sorted(found, reverse=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--most", type=int, default=10, help="how many to list")
    parser.add_argument("--max", type=int, default=None, help="fail when a body is longer than this")
    args = parser.parse_args()
    lengths = body_lengths(args.folder)
    for lines, where in lengths[: args.most]:
        print(f"{lines:4d}  {where}")
    if args.max is not None and lengths and lengths[0][0] > args.max:
        print(f"FAILED: {sum(n > args.max for n, _ in lengths)} function(s) over {args.max} lines")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
