"""Issue 62's careless-user sweep, the input and message items: `index tune` on qrels that judge nothing relevant or a
pair twice, and on weights that are none or outside [0, 1]. Each must end in one line naming the file or the flag and
the fix (exit 2), and leave the index untuned."""

from __future__ import annotations

from pathlib import Path

from reliability_cases import Case, Context
from reliability_cases.index_corpus import _beir, _rows, _untuned
from reliability_cases.longdoc import _indexed


def _judged(qrels: str):
    """An index, and its corpus as BEIR with the ``dev`` qrels `qrels` (rows after the header)."""

    def setup(tmp: Path, context: Context) -> None:
        _indexed(tmp, context)
        rows = _rows(tmp)
        _beir(tmp, rows, [row["_id"] for row in rows])
        (tmp / "beir" / "qrels" / "dev.tsv").write_text("query-id\tcorpus-id\tscore\n" + qrels, encoding="utf-8")

    return setup


def _tunable(tmp: Path, context: Context) -> None:
    _judged("".join(f"q{n}\td{n}\t1\n" for n in range(6)))(tmp, context)


_TUNE = ["index", "tune", "{tmp}/i", "--data", "{tmp}/beir", "--split", "dev"]
CASES: list[Case] = [
    Case("index-tune-qrels-judge-nothing-relevant", "62.2", _TUNE, 2,
         "dev.tsv: judges no document relevant; nothing to tune on",
         _judged("".join(f"q{n}\td{n}\t0\n" for n in range(6))), _untuned),
    Case("index-tune-qrels-pair-judged-twice", "62.2", _TUNE, 2,
         "dev.tsv:4: query 'q0' and document 'd0' judged 0 here and 1 at line 2; keep one line per pair",
         _judged("q0\td0\t1\nq1\td1\t1\nq0\td0\t0\n"), _untuned),
    Case("index-tune-weight-above-one", "62.9", [*_TUNE, "--weights", "0.3,1.5"], 2,
         "--weights 0.3, 1.5: 1.5 is not a lexical weight; give weights in [0, 1]", _tunable, _untuned),
    Case("index-tune-no-weights", "62.9", [*_TUNE, "--weights", ""], 2,
         "--weights '': no lexical weight to try", _tunable, _untuned),
]  # fmt: skip
