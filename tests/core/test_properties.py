"""Property-based tests (hypothesis): the readers raise nothing but `DataFormatError` on any input, and the token
operations keep their invariants ([CLS]/[SEP] once, copies never partial, windows cover every token)."""

from __future__ import annotations

import gzip
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from lengthwise.audit.documents.corpus import read_docs
from lengthwise.core.data import read_pairs
from lengthwise.core.errors import DataFormatError
from lengthwise.core.tokens import SpecialTokens, elongate, elongation_factor, first_k, segments, windows

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
CLS, SEP = 101, 102
SPECIALS = SpecialTokens((CLS,), (SEP,))

# text that looks like data files: cells, tabs, commas, quotes, newlines, CRs, zero-width and odd characters
_CHARS = st.sampled_from([*"ab c\t,\"'\n\r{}[]:0.5-", "\u200b", "\ufeff", "é", "\x00", "💡"])
TEXTY = st.text(_CHARS, max_size=300)
ids_strategy = st.lists(st.integers(min_value=1000, max_value=1100), min_size=1, max_size=80)


def _write(folder: Path, name: str, data: bytes) -> Path:
    path = folder / name
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    return path


@SETTINGS
@given(
    name=st.sampled_from(["p.tsv", "p.csv", "p.txt", "p.jsonl", "p.tsv.gz", "p.csv.gz"]),
    content=st.one_of(TEXTY.map(lambda s: s.encode("utf-8")), st.binary(max_size=300)),
)
def test_pairs_reader_raises_only_data_format_errors(name: str, content: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = _write(Path(folder), name, content)
        try:
            pairs = read_pairs(path)
        except DataFormatError as error:
            assert str(error).startswith(str(path))  # every message names the file
            return
        for pair in pairs.pairs:  # what is read is usable: visible, stripped text
            assert pair.text1 and pair.text1 == pair.text1.strip() and pair.text2 == pair.text2.strip()


@SETTINGS
@given(rows=st.lists(st.dictionaries(st.sampled_from(["text1", "text2", "score", "kind", "text", "group"]),
                                     st.one_of(TEXTY, st.integers(), st.none(), st.floats(allow_nan=False))),
                     max_size=8))  # fmt: skip
def test_jsonl_pairs_and_grouped_documents(rows: list[dict]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = _write(Path(folder), "p.jsonl", "\n".join(json.dumps(r) for r in rows).encode())
        try:
            pairs = read_pairs(path, max_pairs=10)
        except DataFormatError:
            return
        assert len(pairs) >= 1


@SETTINGS
@given(content=st.one_of(TEXTY.map(lambda s: s.encode("utf-8")), st.binary(max_size=300)), gz=st.booleans())
def test_documents_reader_raises_only_data_format_errors(content: bytes, gz: bool) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = _write(Path(folder), "docs.jsonl.gz" if gz else "docs.txt", content)
        try:
            docs = read_docs(path)
        except DataFormatError as error:
            assert str(error).startswith(str(path))
            return
        assert all(text.strip() == text and text for text in docs.texts)
        assert len(docs.origins) == len(docs.texts)


@SETTINGS
@given(
    n_docs=st.integers(min_value=0, max_value=12),
    judgements=st.lists(
        st.tuples(st.integers(0, 4), st.integers(0, 13), st.integers(-1, 2)), max_size=30
    ),  # (query, document, relevance); documents ≥ n_docs do not exist
    groups=st.one_of(st.none(), st.lists(st.integers(0, 3), min_size=12, max_size=12)),
    seed=st.integers(0, 5),
)
@example(
    n_docs=2, judgements=[(0, 0, 1), (0, 1, 1), (1, 0, 1), (1, 1, 1)], groups=None, seed=0
)  # two queries, one pair
def test_beir_reader_ends_never_repeats_and_keeps_groups_apart(
    n_docs: int, judgements: list[tuple[int, int, int]], groups: list[int] | None, seed: int
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        docs = [{"_id": f"d{i}", "text": f"doc {i}", **({"group": groups[i]} if groups else {})} for i in range(n_docs)]
        (root / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
        (root / "qrels").mkdir()
        qrels = "".join(f"q{q}\td{d}\t{r}\n" for q, d, r in judgements)
        (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + qrels, encoding="utf-8")
        try:
            pairs = read_pairs(root, seed=seed)
        except DataFormatError:
            return
        keys = [frozenset((p.text1, p.text2)) for p in pairs.pairs]
        assert len(keys) == len(set(keys))  # no pair twice, same-topic or random
        assert all(p.text1 != p.text2 for p in pairs.pairs)
        randoms = [p for p in pairs.pairs if p.kind == "random"]
        assert len(randoms) <= len(pairs) - len(randoms)  # as many random pairs as same-group ones, at most
        if groups:
            group_of = {f"doc {i}": groups[i] for i in range(n_docs)}
            assert all(group_of[p.text1] != group_of[p.text2] for p in randoms)
            assert all(group_of[p.text1] == group_of[p.text2] for p in pairs.pairs if p.kind == "same_group")


@SETTINGS
@given(ids=ids_strategy, m=st.integers(1, 500), max_content=st.integers(1, 300))
def test_elongation_wraps_once_and_never_cuts_a_copy(ids: list[int], m: int, max_content: int) -> None:
    out = elongate(ids, m, max_content)
    wrapped = SPECIALS.wrap(out)
    assert wrapped[0] == CLS and wrapped[-1] == SEP
    assert wrapped.count(CLS) == 1 and wrapped.count(SEP) == 1  # [CLS]/[SEP] once, whatever m
    assert len(out) <= max_content
    n = len(ids)
    if n >= max_content:
        assert out == ids[:max_content]  # a text too long for the window: one (truncated) copy, as encode does
    else:
        copies, rest = divmod(len(out), n)
        assert rest == 0 and out == ids * copies and 1 <= copies <= m  # whole copies only
        assert copies == min(m, max_content // n)


@SETTINGS
@given(n=st.integers(1, 400), max_content=st.integers(1, 300), seed=st.integers(0, 3))
def test_random_elongation_factor_stays_in_its_range(n: int, max_content: int, seed: int) -> None:
    import random

    from lengthwise.core.tokens import Elongation

    m = elongation_factor(n, max_content, Elongation("random"), random.Random(seed))
    assert 1 <= m <= max(1, max_content // n)


@SETTINGS
@given(
    n=st.integers(1, 600),
    size=st.integers(1, 80),
    overlap=st.integers(0, 79),
    cuts=st.one_of(st.none(), st.lists(st.integers(1, 600), max_size=20)),
)
def test_windows_cover_every_token(n: int, size: int, overlap: int, cuts: list[int] | None) -> None:
    stride = max(1, size - min(overlap, size - 1))
    spans = windows(n, size, stride, cuts)
    covered = [False] * n
    for start, end in spans:
        assert 0 <= start < end <= n and end - start <= size
        covered[start:end] = [True] * (end - start)
    assert all(covered)
    assert spans[0][0] == 0 and spans[-1][1] == n


@SETTINGS
@given(ids=ids_strategy, length=st.integers(1, 50), k=st.integers(1, 100))
def test_segments_and_first_k(ids: list[int], length: int, k: int) -> None:
    parts = segments(ids, length)
    assert [token for part in parts for token in part] == ids
    assert len(parts) == 1 + (len(ids) - 1) // length and all(len(p) == length for p in parts[:-1])
    assert first_k(ids, k) == ids[:k]


@pytest.fixture(scope="module")
def tokenizer(minilm_path: str):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(minilm_path)


def test_kept_text_matches_truncation_on_many_texts(tokenizer) -> None:
    """Property over hypothesis-drawn texts: the kept part tokenizes to exactly the first max_content tokens."""
    from lengthwise.core.tokens import kept_text

    @SETTINGS
    @given(words=st.lists(st.sampled_from(["alpha", "beta", "unbelievable", "x", "3.5", "naïve", "dog,"]), min_size=1,
                          max_size=60), budget=st.integers(1, 40))  # fmt: skip
    def check(words: list[str], budget: int) -> None:
        text = " ".join(words)
        expected = tokenizer(text, add_special_tokens=False, truncation=True, max_length=budget)["input_ids"]
        assert tokenizer(kept_text(tokenizer, text, budget), add_special_tokens=False)["input_ids"] == expected

    check()
