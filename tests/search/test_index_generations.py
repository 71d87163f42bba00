"""Issue 47.1, 47.2 and 47.6: an index opened keeps answering from one generation, whatever builds of the same folder
run beside it; a reader racing builds gets whole answers of one generation; a folder named like a build's staging
that lengthwise did not make is never removed."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from lengthwise.cli import app
from lengthwise.longdoc.config import LongDocError

from .conftest import encode_windows, haystack_rows

pytest.importorskip("bm25s")
pytest.importorskip("faiss")

QUERIES = ["the old mill by the river", "bread and honey at the market"]


def _other_rows() -> list[dict[str, str]]:
    """The same ids as `haystack_rows`, other texts (other window counts): an index of them with an old index's
    ids would give the old ids the new texts."""
    rows = haystack_rows(30)
    return [{"_id": row["_id"], "text": other["text"]} for row, other in zip(rows[:24], reversed(rows), strict=False)]


@pytest.fixture(scope="module")
def encodes(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two encodes by the tiny BERT: the haystack documents, and the same ids with other texts."""
    first = encode_windows(tmp_path_factory.mktemp("first"), haystack_rows(), tiny_model_dir)
    return first, encode_windows(tmp_path_factory.mktemp("second"), _other_rows(), tiny_model_dir)


def _answers(index, mode: str) -> list[list[tuple]]:  # type: ignore[no-untyped-def]
    """Each query's hits, with their passages' spans and text: what a reader is given."""
    found = index.search(QUERIES, k=4, mode=mode, passages=1)
    return [[(hit.id, round(hit.score, 5), tuple(map(repr, hit.passages))) for hit in row] for row in found]


def _build(encoded: Path, out: Path, model=None) -> None:  # type: ignore[no-untyped-def]
    import lengthwise as lw

    loader = None if model is None else (lambda *_, **__: model)
    lw.LongIndex.build(encoded, out, quantize="none", engine="faiss", load_model=loader)


def test_an_open_index_answers_from_its_generation_after_a_rebuild(encodes: tuple[Path, Path], tmp_path: Path) -> None:
    """Before, the lexical side was opened on first use by path: after a rebuild from another encode, an index
    opened before gave its old ids the new corpus's text, or a raw IndexError."""
    import lengthwise as lw

    first, second = encodes
    out = tmp_path / "idx"
    _build(first, out)
    before = lw.LongIndex.open(out)
    expected = {mode: _answers(before, mode) for mode in ("lexical", "hybrid")}
    old = lw.LongIndex.open(out)  # its lexical side not opened yet
    _build(second, out)
    assert {mode: _answers(old, mode) for mode in ("lexical", "hybrid")} == expected
    new = {mode: _answers(lw.LongIndex.open(out), mode) for mode in ("lexical", "hybrid")}
    assert new != expected and all(new[mode] != expected[mode] for mode in new)


def test_a_reader_whose_generation_is_gone_is_told_in_one_line(encodes: tuple[Path, Path], tmp_path: Path) -> None:
    """Where nothing holds the old generation (no ``flock``, or its hold released), it is removed by the next build:
    the index opened before refuses in one line, never mixes. Tuning it would record into a generation no longer
    served: refused too."""
    import lengthwise as lw

    first, second = encodes
    out = tmp_path / "idx"
    _build(first, out)
    old = lw.LongIndex.open(out)
    old.hold.release()
    _build(second, out)
    tuned = lw.LongIndex.open(out)
    assert tuned.lexical is not None
    _build(first, out)
    assert not old.files.exists()  # removed: nothing held it
    assert tuned.files.exists()  # held: kept, and still answering
    gone = r"idx was rebuilt since it was opened \(its generation .* is gone\); open it again"
    with pytest.raises(LongDocError, match=gone):
        old.search(QUERIES, mode="lexical")
    assert tuned.search(QUERIES, mode="lexical")
    with pytest.raises(LongDocError, match="was rebuilt since it was opened"):
        tuned.lexical.record(mode="dense")
    del tuned
    _build(second, out)  # nothing holds the earlier generations any more
    assert len([path for path in out.iterdir() if path.name.startswith("generation-")]) == 1


def test_a_reader_racing_builds_gets_whole_answers_of_one_generation(
    encodes: tuple[Path, Path], tmp_path: Path, tiny_model
) -> None:  # type: ignore[no-untyped-def]
    """Before, open + search beside repeated swaps gave wrong results, raw IndexErrors, "no index.json" and mmap
    errors: the swap renamed the index aside, then the new one in, while readers opened ten files by path."""
    import lengthwise as lw

    first, second = encodes
    out, expected = tmp_path / "idx", []
    for encoded in encodes:
        _build(encoded, tmp_path / encoded.parent.name)
        index = lw.LongIndex.open(tmp_path / encoded.parent.name)
        query = np.ones((1, index.vectors.shape[1]), dtype=np.float32)
        expected.append((_answers(index, "lexical"), index.search_vectors(query, k=4)))
    _build(first, out, tiny_model)
    stop, builds = threading.Event(), []

    def rebuild() -> None:
        while not stop.is_set():
            _build(second if len(builds) % 2 == 0 else first, out, tiny_model)
            builds.append(1)

    builder = threading.Thread(target=rebuild)
    builder.start()
    seen, refused, deadline = [], [], time.monotonic() + 4
    try:
        while time.monotonic() < deadline or len(builds) < 4:
            try:
                index = lw.LongIndex.open(out)
                seen.append((_answers(index, "lexical"), index.search_vectors(query, k=4)))
            except LongDocError as error:
                assert "open it again" in str(error), error
                refused.append(error)
    finally:
        stop.set()
        builder.join()
    assert all(answer in expected for answer in seen), "an answer of no generation, or of two mixed"
    assert len(seen) > 10 * len(refused) and {expected.index(answer) for answer in seen} == {0, 1}


@pytest.mark.parametrize("name", [".idx-building", ".idx-replaced"])
def test_a_users_folder_named_like_the_staging_survives_a_build(
    encodes: tuple[Path, Path], tmp_path: Path, name: str
) -> None:
    """Issue 47.6: `.IDX-building` or `.IDX-replaced` beside `--out IDX` was removed with everything in it. The
    build's staging folder carries lengthwise's marker: a folder of that name without it is refused in one line,
    and `.IDX-replaced` is no name a build uses any more."""
    first, _ = encodes
    mine = tmp_path / name
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    args = ["index", "build", str(first), "--out", str(tmp_path / "idx"), "--quantize", "none", "--engine", "faiss"]
    run = CliRunner().invoke(app, args)
    if name == ".idx-building":
        assert run.exit_code == 2 and len(run.output.strip().splitlines()) == 1, run.output
        assert f"{mine} is in the way of the build's staging folder and lengthwise did not make it" in run.output
    else:
        assert run.exit_code == 0, run.output
    assert (mine / "notes.txt").read_text() == "mine"
