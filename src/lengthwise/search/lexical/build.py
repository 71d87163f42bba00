"""The lexical side of an index built from the corpus file: the corpus checked against the encode, cut into the
index's windows by the method that encoded it, and indexed (`LexicalIndex`, `BothGranularities`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from lengthwise.core.corpus import corpus_digests, texts_sha256
from lengthwise.core.errors import LongDocError, SettingError
from lengthwise.core.fusion import LEXICAL_GRANULARITY
from lengthwise.search.lexical.bm25 import (
    K1,
    LANGUAGE,
    LEXICAL,
    SETTINGS_FILE,
    B,
    BothGranularities,
    LexicalIndex,
    _granularity,
)
from lengthwise.search.lexical.texts import from_corpus
from lengthwise.search.local.generations import GENERATION
from lengthwise.search.types import Granularity

if TYPE_CHECKING:
    from lengthwise.search.local.windows import LocalWindows
    from lengthwise.search.protocols import WindowCut

__all__ = ["build_text_side", "check_corpus_digest"]


def _window_cut(window_cut: WindowCut, counts: np.ndarray) -> tuple[Callable[[int, str], np.ndarray], str]:
    """How a document's text is cut into its window rows (`window_cut`, the method's), checked against the index, and
    the key naming that cut. A text that cuts into another number of windows than the index holds (`counts`) is not
    the text that was encoded."""

    def cut(doc: int, text: str) -> np.ndarray:
        spans = window_cut(text)
        if len(spans) != counts[doc]:
            raise LongDocError(
                None,
                None,
                f"document #{doc} cuts into {len(spans)} windows and the index holds {counts[doc]}: its "
                "text is not the one that was encoded; pass the corpus the index was encoded "
                "from",
            )
        return spans

    return cut, window_cut.key


def check_corpus_digest(
    text: str | os.PathLike[str] | None,
    recorded_path: str | None,
    recorded: str | None,
    granularity: str,
    *,
    out: str | os.PathLike[str] | None = None,
) -> Path | None:
    """The corpus to index lexically, checked before any model load: `text` if given, else the path `encode`
    recorded; it must exist and, where the encode folder recorded a digest of its (id, text) pairs, match it. None
    (a dense-only index) only when `text` is not given and the recorded file is gone, and `out` (the index being
    replaced) holds no lexical side that the build would drop.

    Raises:
        LongDocError: `text` does not exist, or its documents are not the ones encoded.
        SettingError: On ``text`` (not given): the recorded corpus changed since it was encoded (its digest differs),
            or it is gone and `out` holds a lexical side.
    """
    _granularity(granularity)
    corpus = Path(text) if text is not None else (Path(recorded_path) if recorded_path else None)
    if corpus is None or not corpus.is_file():
        if text is not None:
            raise LongDocError(
                None, None, f"{text}: no such corpus file; pass the corpus.jsonl the index was encoded from"
            )
        if out is not None and _holds_text(Path(out)):
            raise SettingError("text", None, f"not given, and {recorded_path or 'no corpus'} (the corpus the folder "
                               f"was encoded from) is gone: a dense-only build would drop the lexical side of {out}; "
                               "pass that corpus, or build into a new folder")  # fmt: skip
        return None
    if recorded is not None and texts_sha256(corpus_digests(corpus)) != recorded:
        if text is None:
            raise SettingError("text", None, f"not given, and {corpus} (the corpus the folder was encoded from) has "
                               "changed since: its digest of (id, text) pairs differs from the encode folder's; pass "
                               "the corpus as it was encoded, or encode this one")  # fmt: skip
        raise LongDocError(
            None,
            None,
            f"{corpus}: its documents are not the ones encoded (ids or text differ from the encode "
            "folder's digest); pass the corpus the folder was encoded from, or encode "
            "this one",
        )
    return corpus


def _holds_text(out: Path) -> bool:
    """Whether the index at `out` (if any) serves a lexical side."""
    from lengthwise.search.local.files import served_files

    try:
        files = served_files(out)
    except LongDocError:  # no index there, or one of an earlier layout (its lexical side beside index.json)
        files = out
    return (files / LEXICAL / SETTINGS_FILE).is_file()


def build_text_side(
    windows: LocalWindows,
    window_cut: WindowCut,
    corpus: str | os.PathLike[str],
    *,
    recorded: str | None = None,
    granularity: Granularity | str = LEXICAL_GRANULARITY,
    on_progress: Callable[[int, int], None] | None = None,
) -> LexicalIndex | BothGranularities:
    """Index the text of a `LongIndex`'s documents beside it (``windows.files / "lexical"``), read from the corpus
    file as the build goes (`lengthwise.search.lexical.texts`): its memory is one shard of text, the
    vocabulary and a few numbers per document, not the corpus.

    Args:
        windows: The dense side (`LocalWindows`): its document ids, window offsets and folder.
        window_cut: How the corpus was cut into windows when it was encoded (the method's `WindowCut`): each
            window's character spans become the hits' passages.
        corpus: The corpus file (JSONL or text, gzipped or not) the index was encoded from, in any order.
        recorded: The encode folder's digest of every (id, text) (`lengthwise.core.corpus.TEXTS`),
            checked when given.
        granularity: What BM25 ranks: ``both`` (the default: whole documents and windows, `BothGranularities`),
            ``window`` or ``document``.
        on_progress: Called with (documents done, documents).
    """
    granularity = _granularity(granularity)
    counts = np.diff(windows.offsets)
    source = from_corpus(Path(corpus), windows.doc_ids, counts, recorded, *_window_cut(window_cut, counts))
    return LexicalIndex._build(source, Path(windows.files or windows.folder) / LEXICAL, granularity=granularity,
                               language=LANGUAGE, k1=K1, b=B, on_progress=on_progress,
                               generation=windows.settings.get(GENERATION))  # fmt: skip
