#!/usr/bin/env python3
"""Compare two ``audit.json`` files field by field, ignoring when and how long (``meta.created``, ``meta.seconds``).

Every other difference is printed: a changed value, a field only in the new file (added), or only in the old
one (removed). Floats are compared exactly unless ``--tolerance`` says otherwise. Differences listed with
``--explained PREFIX`` (a dotted field path, e.g. ``attack.js_null``) are printed as explained and do not fail.

    python scripts/compare_audit.py /tmp/audit-before/audit.json /tmp/audit-after/audit.json \\
        --explained attack.js_null --explained word_shuffle.js_null

Exit status: 0 when the files agree apart from the ignored and the explained fields, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

IGNORED = ("meta.created", "meta.seconds")


def differences(old: Any, new: Any, path: str = "", tolerance: float = 0.0) -> Iterator[tuple[str, str, Any, Any]]:
    """(kind, path, old, new) for each difference: kind is "changed", "added" or "removed"."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(old.keys() | new.keys()):
            where = f"{path}.{key}" if path else str(key)
            if key not in new:
                yield "removed", where, old[key], None
            elif key not in old:
                yield "added", where, None, new[key]
            else:
                yield from differences(old[key], new[key], where, tolerance)
    elif isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for index, (a, b) in enumerate(zip(old, new, strict=True)):
            yield from differences(a, b, f"{path}[{index}]", tolerance)
    elif isinstance(old, float) and isinstance(new, float) and tolerance > 0:
        if not math.isclose(old, new, rel_tol=tolerance, abs_tol=tolerance):
            yield "changed", path, old, new
    elif old != new or type(old) is not type(new):
        yield "changed", path, old, new


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 90 else text[:87] + "..."


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--explained", action="append", default=[], help="a field path (prefix) expected to differ")
    parser.add_argument("--tolerance", type=float, default=0.0, help="relative/absolute tolerance for floats")
    args = parser.parse_args()
    old, new = (json.loads((p / "audit.json" if p.is_dir() else p).read_text("utf-8")) for p in (args.old, args.new))
    unexplained = 0
    for kind, where, a, b in differences(old, new, tolerance=args.tolerance):
        if where.startswith(IGNORED):
            continue
        explained = any(where == p or where.startswith((p + ".", p + "[")) for p in args.explained)
        unexplained += not explained
        mark = "explained" if explained else "DIFFERENT"
        print(f"{mark:>9}  {kind:<7}  {where}: {_short(a)} → {_short(b)}")
    print(f"{unexplained or 'no'} unexplained difference(s)")
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
