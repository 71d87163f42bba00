"""Where an index is served: the local folder (`LongIndex`) or Milvus (`lengthwise.search.milvus.index`,
embedded as a Milvus Lite database or a server's URL), chosen by one `Backend` (``--backend``, ``--uri``, ``--name``).

The commands that build, search, serve or evaluate an index open it here, so the choice and its refusals live in one
place: a Milvus backend without a URI, a URI given to the local backend, a Milvus Lite path that is not a ``.db``
file, a local index folder given to the Milvus backend.

Example:
    >>> served = Backend("milvus", "out/milvus.db", "scifact")                  # doctest: +SKIP
    >>> build_index("out/encoded", "out/index", served)    # the local index, then loaded into Milvus  # doctest: +SKIP
    >>> open_index(served).search("what causes scurvy?", k=10)                   # doctest: +SKIP
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lengthwise.core.errors import SettingError
from lengthwise.core.fusion import LEXICAL_GRANULARITY
from lengthwise.search.types import Engine, Granularity, Quantize

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

    from lengthwise.core.models import ModelLoader
    from lengthwise.search.local.files import Progress
    from lengthwise.search.protocols import SearchIndex, WindowMethod

__all__ = ["BACKENDS", "DEFAULT_NAME", "Backend", "build_index", "open_index"]

BACKENDS = ("local", "milvus")
DEFAULT_NAME = "lengthwise"  # the name an index is served under by default (`milvus.store.served_collection`)
URI_HELP = "a Milvus Lite database path (out/milvus.db, made when new) or a Milvus server's URL (http://host:19530)"


@dataclass(frozen=True)
class Backend:
    """Where an index lives: ``local`` (a folder written by `lengthwise index build`) or ``milvus`` at `uri`, served
    under `name`.

    Args:
        kind: ``local`` or ``milvus``.
        uri: Milvus only: a Milvus Lite database path ending in ``.db`` (made when new; one process at a time opens
            it) or a server's URL (``http://host:19530``: Milvus standalone or a cluster, the same client code).
        name: Milvus only: the name the index is served under.

    Raises:
        SettingError: On ``backend`` (unknown), ``uri`` (missing for milvus, given for local, a path not ending in
            ``.db``) or ``name`` (given for local).
    """

    kind: str = "local"
    uri: str | None = None
    name: str = DEFAULT_NAME

    def __post_init__(self) -> None:
        if self.kind not in BACKENDS:
            raise SettingError("backend", self.kind, f"use {' or '.join(BACKENDS)}")
        if self.kind == "local":
            if self.uri is not None:
                raise SettingError("uri", self.uri, "is where a Milvus index is; add --backend milvus, or leave it out")
            if self.name != DEFAULT_NAME:
                raise SettingError("name", self.name, "names an index in Milvus; add --backend milvus, or leave it out")
            return
        if not self.uri:
            raise SettingError("uri", None, f"--backend milvus needs the Milvus to use: {URI_HELP}")
        if not self.embedded and not self.uri.startswith(("http://", "https://", "tcp://", "unix:")):
            raise SettingError("uri", self.uri, f"not a Milvus address; give {URI_HELP}")
        if self.embedded and not self.uri.endswith(".db"):
            raise SettingError("uri", self.uri, "a Milvus Lite database's path ends in .db; give e.g. out/milvus.db, "
                               "or a Milvus server's URL (http://host:19530)")  # fmt: skip

    @property
    def embedded(self) -> bool:
        """Whether the index is in a Milvus Lite database (opened by one process at a time), not on a server."""
        return self.kind == "milvus" and "://" not in str(self.uri)

    @property
    def where(self) -> str:
        """The served index in one word: ``milvus:URI#NAME`` (the record of an evaluation names it so)."""
        return f"milvus:{self.uri}#{self.name}"


def open_index(
    backend: Backend | None = None,
    folder: str | os.PathLike[str] | None = None,
    *,
    model: SentenceTransformer | str | os.PathLike[str] | None = None,
    load_model: ModelLoader | None = None,
    method: WindowMethod | None = None,
) -> SearchIndex:
    """The index to search: `LongIndex.open(folder)` on the local backend, `MilvusIndex.open(uri, name)` on Milvus.

    Args:
        backend: Where the index is (default: local).
        folder: The local index folder (local only).
        model: A query model to use in place of the recorded one (a loaded model, or a name to load); local only.
        load_model: How the recorded query model is loaded (`lengthwise.load_model` re-applies a saved TempScale).
        method: The long-document method that made the windows (`WindowMethod`; default: the index class's, which
            `lengthwise.facade.open_index` binds).

    Raises:
        SettingError: A local backend without a folder, a Milvus one with a folder, a Milvus Lite database that does
            not exist (searching never makes one), or Milvus asked for another query model.
        LongDocError: Nothing is served under the name at the URI.
    """
    backend = backend or Backend()
    if backend.kind == "local":
        from lengthwise.search.index import LongIndex

        if folder is None:
            raise SettingError(None, None, "no index given: give the folder `lengthwise index build` wrote, or the "
                               "index in Milvus with --backend milvus --uri U")  # fmt: skip
        return LongIndex.open(folder, model=model, load_model=load_model, method=method)
    from lengthwise.search.milvus.index import MilvusIndex

    if folder is not None:
        raise SettingError(None, folder, f"{folder} is a local index folder; with --backend milvus the index is the "
                           f"one served at --uri {backend.uri}: leave the folder out")  # fmt: skip
    if model is not None:
        raise SettingError("model", str(model), "queries of an index in Milvus use the model recorded at its build; "
                           "leave --model out")  # fmt: skip
    assert backend.uri is not None  # checked by Backend
    if backend.embedded and not Path(backend.uri).exists():
        raise SettingError("uri", backend.uri, "no such Milvus Lite database; load an index into it first with "
                           "lengthwise index build ENCODED --out INDEX --backend milvus --uri PATH.db")  # fmt: skip
    return MilvusIndex.open(backend.uri, backend.name, load_model=load_model, method=method)


def build_index(
    encoded: str | os.PathLike[str],
    out: str | os.PathLike[str],
    backend: Backend | None = None,
    *,
    quantize: Quantize | str = Quantize.INT8,
    engine: Engine | str = Engine.USEARCH,
    text: str | os.PathLike[str] | None = None,
    granularity: Granularity | str | None = None,
    on_progress: Progress = None,
    on_note: Callable[[str], None] | None = None,
    load_model: ModelLoader | None = None,
    on_load: Callable[[int, int], None] | None = None,
    method: WindowMethod | None = None,
) -> SearchIndex:
    """`lengthwise index build`: the local index of `encoded` at `out` (`LongIndex.build`, with `build`'s settings),
    then, on the Milvus backend, loaded into Milvus (`load_into_milvus`: resumable, served under the name only once
    complete). The Milvus is opened before anything is built, so a wrong URI refuses at once.

    Args:
        encoded: A folder written by `lengthwise encode`.
        out: The local index folder (both backends: Milvus is loaded from it).
        backend: Where the index is served (default: local).
        quantize, engine, text, on_progress, on_note, load_model: As `LongIndex.build` takes them.
        granularity: What BM25 ranks (None: `LongIndex.build`'s default, ``both``, on either backend: Milvus holds
            BM25 at each granularity the local index does).
        on_load: Called with (windows loaded, windows) after each batch loaded into Milvus.
        method: The long-document method that made the windows (default: the index class's).

    Returns:
        The index as served: the `LongIndex`, or the `MilvusIndex` the load opened.
    """
    from lengthwise.search.index import LongIndex

    backend = backend or Backend()
    if backend.kind == "milvus":  # refused before anything is built: a wrong granularity, build settings or URI
        from lengthwise.core.errors import enum_member
        from lengthwise.search.milvus.store import connect

        assert backend.uri is not None  # checked by Backend
        if granularity is not None:  # before the Milvus (a Milvus Lite file) is opened
            enum_member(Granularity, "granularity", granularity)
        LongIndex.check_build(encoded, out, quantize=quantize, engine=engine)
        connect(backend.uri).close()
    local = LongIndex.build(encoded, out, quantize=quantize, engine=engine, text=text,
                            granularity=granularity or LEXICAL_GRANULARITY, on_progress=on_progress, on_note=on_note,
                            load_model=load_model, method=method)  # fmt: skip
    if backend.kind == "local":
        return local
    from lengthwise.search.milvus.load import load_into_milvus

    assert backend.uri is not None
    served = load_into_milvus(local, backend.uri, backend.name, on_progress=on_load)
    served.load_model = load_model
    return served
