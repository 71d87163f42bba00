#!/usr/bin/env python3
"""Rebuild the small real-data slices in tests/data/ from the project's shared data (../shared/data).

Each slice keeps its source's exact format (bytes of the kept lines unchanged), so the readers meet real
files in a clean clone that has no shared data beside it. Deterministic: the same sources give the same
bytes (gzip with mtime 0). See tests/data/README.md for sources and licences.

    python tests/data/make_slices.py                       # ../shared/data (or $LENGTHWISE_DATA)
    python tests/data/make_slices.py --shared /path/to/shared/data
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
from pathlib import Path

HERE = Path(__file__).resolve().parent
STSB_EVERY = 7  # every 7th STS-B test row: all genres, and some rows with the 2 extra source columns
STS16_LINES = 150  # first lines of each STS16 subset (input and gold, line-aligned; blank gold = unscored)
SCIFACT_QUERIES = 25  # first test queries in qrels order, their relevant documents ...
SCIFACT_OTHER_DOCS = 175  # ... and the first documents of the corpus as distractors
TEXT_LINES = 200  # first lines of wiki1m and of SNLI dev


def _lines(path: Path) -> list[bytes]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as handle:
        return handle.read().splitlines(keepends=True)


def _write(path: Path, lines: list[bytes]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = b"".join(lines)
    path.write_bytes(gzip.compress(data, compresslevel=9, mtime=0) if path.suffix == ".gz" else data)
    print(f"{path.relative_to(HERE)}: {len(lines)} lines")


def make(shared: Path) -> None:
    stsb = _lines(shared / "stsb/original/sts-test.csv.gz")
    _write(HERE / "stsb/sts-test.csv.gz", stsb[::STSB_EVERY])

    source = shared / "sts12-16/senteval_tokenized/STS16-en-test"
    for gold in sorted(source.glob("STS.gs.*.txt.gz")):
        pair = gold.with_name(gold.name.replace("STS.gs.", "STS.input."))
        _write(HERE / "sts16" / gold.name, _lines(gold)[:STS16_LINES])
        _write(HERE / "sts16" / pair.name, _lines(pair)[:STS16_LINES])

    qrels = _lines(shared / "scifact/qrels/test.tsv")
    header, rows = qrels[0], qrels[1:]
    queries: list[str] = []
    for row in rows:
        query = row.split(b"\t")[0].decode()
        if query not in queries:
            queries.append(query)
    queries = queries[:SCIFACT_QUERIES]
    kept_rows = [row for row in rows if row.split(b"\t")[0].decode() in queries]
    wanted = {row.split(b"\t")[1].decode() for row in kept_rows}
    corpus = _lines(shared / "scifact/corpus.jsonl.gz")
    docs = [line for i, line in enumerate(corpus) if i < SCIFACT_OTHER_DOCS or json.loads(line)["_id"] in wanted]
    _write(HERE / "scifact/corpus.jsonl.gz", docs)
    query_lines = [line for line in _lines(shared / "scifact/queries.jsonl.gz") if json.loads(line)["_id"] in queries]
    _write(HERE / "scifact/queries.jsonl.gz", query_lines)
    _write(HERE / "scifact/qrels/test.tsv", [header, *kept_rows])

    _write(
        HERE / "wiki1m/wiki1m_for_simcse.head200.txt.gz",
        _lines(next((shared / "wiki1m_simcse_head").glob("*.gz")))[:TEXT_LINES],
    )
    _write(HERE / "snli/dev.head200.jsonl.gz", _lines(shared / "snli_senteval/dev.jsonl.gz")[:TEXT_LINES])


def main() -> None:
    default = Path(os.environ.get("LENGTHWISE_DATA", HERE.parents[2] / "shared" / "data"))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shared", type=Path, default=default, help=f"the shared data folder (default {default})")
    args = parser.parse_args()
    if not (args.shared / "MANIFEST.md").is_file():
        parser.error(f"{args.shared} holds no MANIFEST.md; pass --shared PATH/TO/shared/data")
    make(args.shared)


if __name__ == "__main__":
    main()
