"""`lengthwise index build` and `lengthwise search`: the windows `lengthwise encode` wrote, indexed on FAISS or
USearch, and searched by document with exact rescoring (`lengthwise.LongIndex`). Flags → one call → printed hits.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from lengthwise.cli.app import command_group
from lengthwise.cli.console import console, say
from lengthwise.cli.console import fail as _fail
from lengthwise.cli.options import (
    BackendOption,
    NameOption,
    QueryPrecisionOption,
    TokenAroundOption,
    TokenDepthOption,
    TokensOption,
    TokenWeightOption,
    UriOption,
    quiet_loading,
    served,
    setting_message,
)
from lengthwise.core.fusion import LEXICAL_GRANULARITY, TUNED_WEIGHTS
from lengthwise.search.backend import DEFAULT_NAME
from lengthwise.search.types import TokenChoice

if TYPE_CHECKING:
    from lengthwise.search.types import IndexSettings

app = command_group("Index the window vectors of `lengthwise encode` for document search (FAISS or USearch).")

__all__ = ["app", "search"]


@app.command()
def build(
    encoded: Annotated[Path, typer.Argument(help="A folder written by `lengthwise encode`.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="The index folder (new, or an earlier index: replaced).")],
    quantize: Annotated[str, typer.Option("--quantize", help="Candidate vectors: int8, ubinary or none.")] = "int8",
    engine: Annotated[str, typer.Option("--engine", help="usearch (HNSW) or faiss (IVF).")] = "usearch",
    text: Annotated[
        Path | None,
        typer.Option("--text", help="The corpus ENCODED was made from (default: the path encode recorded)."),
    ] = None,
    granularity: Annotated[
        str | None,
        typer.Option(
            "--granularity",
            help="What BM25 ranks: window (a document scores its best), document or both "
            f"(default: {LEXICAL_GRANULARITY}, on either backend).",
        ),
    ] = None,
    backend: BackendOption = "local",
    uri: UriOption = None,
    name: NameOption = DEFAULT_NAME,
) -> None:
    """Index every window of ENCODED, and the documents' text beside them (BM25, passages): documents are then found
    by their windows (rescored exactly in fp32), by BM25, or by both fused. With --backend milvus, the index built
    at OUT is then loaded into Milvus at --uri and served there as --name."""
    from lengthwise.core.errors import LengthwiseError
    from lengthwise.facade import build_index, load_model

    quiet_loading()  # the query model is loaded to fingerprint it: transformers' weight bar says nothing here
    try:
        where = served(backend, uri, name)
        with _progress(uri) as (advance, loaded):
            index = build_index(encoded, out, where, quantize=quantize, engine=engine, text=text,
                                granularity=granularity, on_progress=advance, on_note=say, load_model=load_model,
                                on_load=loaded)  # fmt: skip
    except LengthwiseError as err:  # SettingError, LongDocError, DataFormatError, ModelLoadError
        _fail(setting_message(err))
    except KeyboardInterrupt:
        say("interrupted: run the same command again to resume the build where it was last saved")
        raise typer.Exit(code=130) from None
    _print_built(index.settings, out, where)


@contextmanager
def _progress(uri: Path | str | None) -> Iterator[tuple[Callable[[int, int], None], Callable[[int, int], None]]]:
    """A build's two callbacks (its own stages; the Milvus load): rich's bars on a terminal, else lines
    (`lengthwise.core.progress`): one every 30 s (LENGTHWISE_PROGRESS_INTERVAL) a stage, and its last."""
    if not console.is_terminal:
        yield from _progress_lines()
        return
    from rich.progress import Progress

    with Progress(console=console, transient=True) as progress:
        tasks = {"index": progress.add_task("indexing windows", total=None)}

        def advance(done: int, total: int, stage: str = "index") -> None:
            if stage not in tasks:
                tasks[stage] = progress.add_task(f"loading windows into Milvus ({uri})", total=total)
            progress.update(tasks[stage], completed=done, total=total)

        yield advance, lambda done, total: advance(done, total, "load")


def _progress_lines() -> Iterator[tuple[Callable[[int, int], None], Callable[[int, int], None]]]:
    """`_progress` off a terminal: each stage's lines, the last one ``done`` (``stopped`` when the build raised)."""
    from lengthwise.core.progress import ProgressStages, progress_interval

    interval = progress_interval()  # a wrong LENGTHWISE_PROGRESS_INTERVAL is refused before the build starts
    build = ProgressStages("indexing windows", "distinct windows", interval=interval)
    load = ProgressStages("loading windows into Milvus", "windows", interval=interval)

    def loaded(done: int, total: int) -> None:
        build.close()  # the build is over when the load starts
        load(done, total)

    try:
        yield build, loaded
    except BaseException:
        build.close(stopped=True)
        load.close(stopped=True)
        raise
    build.close()
    load.close()


def _print_built(made: IndexSettings, out: Path, where: Any) -> None:
    """The one line a build ends with: what was indexed, where, and where it is served."""
    served_at = f"; served from {where.uri} as {where.name}" if where.kind == "milvus" else ""
    console.print(f"indexed {made['windows']} windows ({made['distinct']} distinct) of {made['documents']} documents "
                  f"into {out} ({made['engine']}, {made['quantize']}){served_at}", highlight=False,
                  soft_wrap=True)  # fmt: skip


def _queries(query: str | None, queries: Path | None) -> list[tuple[str, str]]:
    """(id, text) pairs from --query or a JSONL --queries file (``_id``, ``text``); a `SettingError` on ``queries``
    (shown as --queries) otherwise."""
    from lengthwise.core.errors import SettingError

    if (query is None) == (queries is None):
        raise SettingError(None, None, "give one of --query TEXT or --queries FILE.jsonl")
    if query is not None:
        return [("q", query)]
    assert queries is not None
    from lengthwise.core._textio import checked_text, jsonl_objects, row_id

    if not queries.is_file():
        problem = "not a regular file" if queries.exists() else "no such file"
        raise SettingError("queries", queries, f"{problem}; pass a JSONL file with _id and text")
    asked, lines = [], dict[str, int]()
    for n, row in jsonl_objects(queries, "a JSON object with _id and text"):
        query_id = row_id(queries, n, row, n, "query")
        if query_id in lines:  # two answers under one id could not be told apart
            raise SettingError("queries", queries, f"line {n}: duplicate _id {query_id!r} (first at line "
                               f"{lines[query_id]}); give every query its own id")  # fmt: skip
        lines[query_id] = n
        asked.append((query_id, checked_text(queries, n, row.get("text"), "'text'")))
    if not asked:
        raise SettingError("queries", queries, "holds no queries; pass a JSONL file with one _id and text per line")
    return asked


def search(
    index: Annotated[
        Path | None, typer.Argument(help="A folder written by `lengthwise index build` (none with --backend milvus).")
    ] = None,
    query: Annotated[str | None, typer.Option("--query", "-q", help="One query text.")] = None,
    queries: Annotated[Path | None, typer.Option("--queries", help="JSONL file of queries (_id, text).")] = None,
    k: Annotated[int, typer.Option("--top-k", help="Documents per query.", min=1)] = 10,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line: query_id and hits.")] = False,
    candidates: Annotated[
        int | None,
        typer.Option("--candidates", help="Candidate windows per query (default 1,000; 4,000 on ubinary).", min=1),
    ] = None,
    probes: Annotated[
        int | None,
        typer.Option("--probes", help="FAISS lists probed (default: a quarter) or USearch expansion (64).", min=1),
    ] = None,
    mode: Annotated[
        str | None,
        typer.Option("--mode", help="dense, lexical (BM25) or hybrid (default: hybrid when the index holds text)."),
    ] = None,
    passages: Annotated[
        int,
        typer.Option(
            "--passages",
            min=0,
            help="Best windows shown with each hit (with --tokens, also the span where its "
            "best-matched tokens gather).",
        ),
    ] = 0,
    depth: Annotated[
        int | None,
        typer.Option("--depth", help="Hybrid: documents each side proposes (default 100; deeper: more exact).", min=1),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option("--model", "-m", help="Query with this model instead of the recorded one (same weights)."),
    ] = None,
    precision: QueryPrecisionOption = None,
    backend: BackendOption = "local",
    uri: UriOption = None,
    name: NameOption = DEFAULT_NAME,
    tokens: TokensOption = None,
    token_weight: TokenWeightOption = None,
    token_around: TokenAroundOption = None,
    token_depth: TokenDepthOption = None,
) -> None:
    """Search INDEX (or the index served in Milvus: --backend milvus --uri U): queries embedded with the settings
    recorded in the index, documents best first."""
    from lengthwise.core.errors import LengthwiseError
    from lengthwise.facade import load_model, open_index

    quiet_loading()

    try:
        asked = _queries(query, queries)
        opened = open_index(served(backend, uri, name), index, model=model, load_model=load_model)
        if precision is not None:  # the queries at another precision than the documents'
            opened.set_query_precision(precision)
        TokenChoice(tokens, token_weight, token_around, token_depth).apply(opened)  # the token stage, when asked for
        results = opened.search([text for _, text in asked], k, mode=mode, passages=passages, candidates=candidates,
                                probes=probes, depth=depth)  # fmt: skip
    except LengthwiseError as err:
        _fail(setting_message(err))
    for (query_id, _), hits in zip(asked, results, strict=True):
        if as_json:
            print(json.dumps({"query_id": query_id, "hits": [hit.to_dict() for hit in hits]}, ensure_ascii=False))
            continue
        _print_hits(query_id, hits)


def _print_hits(query_id: str, hits: list) -> None:
    """The hits of one query as text: rank, score, id, and each passage's span and text on its own line (the token
    stage's `matched` passage marked ``tokens``)."""
    print(f"{query_id}:")
    for rank, hit in enumerate(hits, 1):
        print(f"  {rank:>3}  {hit.score:.4f}  {json.dumps(hit.id, ensure_ascii=False)}")
        for passage, mark in [*((p, "") for p in hit.passages), *([(hit.matched, "tokens ")] if hit.matched else [])]:
            print(
                f"         {mark}[{passage.start}:{passage.end}] {passage.score:.4f}  {' '.join(passage.text.split())}"
            )


@app.command()
def tune(
    index: Annotated[Path, typer.Argument(help="A folder written by `lengthwise index build` (with its text).")],
    data: Annotated[Path, typer.Option("--data", "-d", help="The indexed corpus as a BEIR folder with qrels.")],
    split: Annotated[str, typer.Option("--split", help="The qrels split tuned on (not the test split).")] = "dev",
    weights: Annotated[
        str, typer.Option("--weights", help="Lexical weights of the convex fusion tried, comma-separated.")
    ] = ",".join(f"{w:g}" for w in TUNED_WEIGHTS),
    tokens: TokensOption = None,
    token_around: TokenAroundOption = None,
) -> None:
    """Choose INDEX's search mode and fusion (dense, lexical, RRF, convex at each weight) by nDCG@10 on a dev split,
    and record it in the index: `lengthwise search` then uses it by default. With --tokens, the best fusion
    rescored by the token stage at each weight too; the winning weight is what `search --tokens` then takes."""
    from lengthwise.core.errors import LengthwiseError
    from lengthwise.pipelines import tune_hybrid

    quiet_loading()
    try:
        chosen = [float(w) for w in weights.split(",") if w.strip()]
    except ValueError:
        _fail(f"--weights {weights}: give numbers in [0, 1], comma-separated, e.g. 0.3,0.5")
    if not chosen:  # the library refuses it too, but an empty list reads as no value after the flag
        _fail(f"--weights {weights!r}: no lexical weight to try; give one or more in [0, 1], e.g. 0.3,0.5")
    try:
        result = tune_hybrid(index, data, split=split, weights=chosen, tokens=TokenChoice(tokens, around=token_around),
                             on_eval=lambda arm, score: say(f"{arm:>12}  nDCG@10 {score:.2f}"))  # fmt: skip
    except LengthwiseError as err:
        _fail(setting_message(err))
    fusion = result["fusion"]
    rescored = f", rescored by the tokens at {result['tokens']['weight']:g}" if result.get("tokens") else ""
    print(f"chosen: {result['mode']}" + (f" ({fusion['fusion']}, lexical weight {fusion['weight']:g}{rescored})"
                                         if result["mode"] == "hybrid" else "") + f"; recorded in {index}")  # fmt: skip
