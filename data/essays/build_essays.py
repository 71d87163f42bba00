"""Rebuild the essay haystack (data/essays/*.txt.gz) from the Project Gutenberg files named in README.md.

    python data/essays/build_essays.py RAW_DIR     # RAW_DIR holds 2944.txt, 2945.txt, 205.txt, ... as fetched

One paragraph per line; Gutenberg header, footer and licence, headings, indented blocks (verse, contents,
tables) and note markers removed. gzip with mtime 0, so the same inputs give the same bytes.
"""

import gzip
import io
import re
import sys
from pathlib import Path

RAW = sys.argv[1].rstrip("/") + "/"
HERE = Path(__file__).resolve().parent
CFG = [
    dict(src="2944.txt", out="emerson-essays-first-series.txt"),
    dict(src="2945.txt", out="emerson-essays-second-series.txt"),
    dict(src="205.txt", out="thoreau-walden-and-civil-disobedience.txt"),
    dict(src="575.txt", out="bacon-essays-or-counsels-civil-and-moral.txt"),
    dict(src="3020.txt", out="hazlitt-table-talk.txt", skips=[(r"^NOTES to ESSAY", r"^ESSAY [IVXL]+\.")]),
    dict(src="386.txt", out="stevenson-virginibus-puerisque.txt", end=r"^FOOTNOTES\s*$"),
    dict(
        src="10343.txt",
        out="lamb-essays-of-elia.txt",
        enc="latin-1",
        start=r"^\(_From the 1st Edition, 1823_\)",
        end=r"^APPENDIX\s*$",
        end_after=r"^THE SOUTH-SEA HOUSE",
    ),
]


def load(c):
    b = Path(RAW + c["src"]).read_bytes()
    t = b.decode(c.get("enc", "utf-8-sig"))
    t = t.replace("\r\n", "\n").replace("\r", "\n")
    return t.split("\n")


def cut(lines, c):
    s = next(i for i, line in enumerate(lines) if re.match(r"^\*\*\* ?START OF", line))
    # START marker may wrap over 2 lines
    while not lines[s].rstrip().endswith("***"):
        s += 1
    e = next(i for i, line in enumerate(lines) if re.match(r"^\*\*\* ?END OF", line))
    L = lines[s + 1 : e]
    if "start" in c:
        i = next(i for i, line in enumerate(L) if re.match(c["start"], line))
        L = L[i + 1 :]
    if "end" in c:
        base = 0
        if "end_after" in c:
            base = next(i for i, line in enumerate(L) if re.match(c["end_after"], line))
        j = next(i for i, line in enumerate(L) if i > base and re.match(c["end"], line))
        L = L[:j]
    for a, b in c.get("skips", []):
        out = []
        skipping = False
        for line in L:
            if not skipping and re.match(a, line):
                skipping = True
                continue
            if skipping and re.match(b, line):
                skipping = False
            if not skipping:
                out.append(line)
        L = out
    return L


def blocks(L):
    cur = []
    for line in L:
        if line.strip() == "":
            if cur:
                yield cur
                cur = []
        else:
            cur.append(line)
    if cur:
        yield cur


TERM = re.compile(r'[.?!:;"\'”’)\]—-]$')


def is_heading(p):
    w = p.split()
    if len(w) <= 15:
        if not re.search(r"[a-z]", p):
            return True
        if not TERM.search(p):
            return True
        if re.match(r"^\(.*\)$", p):
            return True
    return bool(re.match(r"^(CHAPTER|ESSAY|BOOK|PART|VOLUME)\b", p) and len(w) <= 15)


stats = {}
for c in CFG:
    L = cut(load(c), c)
    paras = []
    infn = False
    dropped = 0
    for b in blocks(L):
        first = b[0].strip()
        if infn:
            if b[-1].rstrip().endswith("]"):
                infn = False
            continue
        if first.startswith("[Footnote"):
            if not b[-1].rstrip().endswith("]"):
                infn = True
            continue
        if first.startswith("[Illustration") or re.match(r"^(Produced by|E-text prepared|Transcribed from)", first):
            continue
        if all(re.match(r"^\s", line) for line in b):  # indented: verse, TOC, block quotes
            dropped += 1
            continue
        p = " ".join(line.strip() for line in b)
        p = re.sub(r"\[(\d+|[A-Z])\]|\{\d+\}|\(\d+\)", "", p)
        p = p.replace("_", "")
        p = re.sub(r"\s+", " ", p).strip()
        if not p or is_heading(p) or re.search(r"Project Gutenberg", p, re.I) or p == "[This essay was not finished]":
            continue
        paras.append(p)
    txt = "\n".join(paras) + "\n"
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0, compresslevel=9) as out:
        out.write(txt.encode("utf-8"))
    (HERE / (c["out"] + ".gz")).write_bytes(buffer.getvalue())
    stats[c["out"]] = len(txt.split())
    print(c["out"], len(paras), "paras", len(txt.split()), "words", "indented-dropped", dropped)
print("TOTAL", sum(stats.values()))
