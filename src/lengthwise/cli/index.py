"""`lengthwise index build` and `lengthwise search`: the windows `lengthwise encode` wrote, indexed on FAISS or
USearch, and searched by document with exact rescoring (`lengthwise.LongIndex`). Flags → one call → printed hits.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from lengthwise.cli.app import command_group
from lengthwise.cli.console import console, say
from lengthwise.cli.console import fail as _fail
from lengthwise.cli.options import quiet_loading, setting_message

app = command_group("Index the window vectors of `lengthwise encode` for document search (FAISS or USearch).")

__all__ = ["app", "search"]


@app.command()
def build(
    encoded: Annotated[Path, typer.Argument(help="A folder written by `lengthwise encode`.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="The index folder (new, or an earlier index: replaced).")],
    quantize: Annotated[str, typer.Option("--quantize", help="Candidate vectors: int8, ubinary or none.")] = "int8",
    engine: Annotated[str, typer.Option("--engine", help="usearch (HNSW) or faiss (IVF).")] = "usearch",
) -> None:
    """Index every window of ENCODED; documents are then found by their windows and rescored exactly in fp32."""
    from rich.progress import Progress

    from lengthwise.core.models import ModelLoadError
    from lengthwise.pipelines import LongIndex

    try:
        with Progress(console=console, transient=True) as progress:
            task = progress.add_task("indexing windows", total=None)

            def advance(done: int, total: int) -> None:
                progress.update(task, completed=done, total=total)

            index = LongIndex.build(encoded, out, quantize=quantize, engine=engine, on_progress=advance)
    except (ValueError, ModelLoadError) as err:  # SettingError, LongDocError
        _fail(setting_message(err))
    except KeyboardInterrupt:
        say("interrupted: run the same command again to resume the build where it was last saved")
        raise typer.Exit(code=130) from None
    made = index.windows.settings
    console.print(f"indexed {made['windows']} windows ({made['distinct']} distinct) of {made['documents']} documents "
                  f"into {out} ({made['engine']}, {made['quantize']})", highlight=False, soft_wrap=True)  # fmt: skip


def _queries(query: str | None, queries: Path | None) -> list[tuple[str, str]]:
    """(id, text) pairs from --query or a JSONL --queries file (``_id``, ``text``)."""
    if (query is None) == (queries is None):
        raise ValueError("give one of --query TEXT or --queries FILE.jsonl")
    if query is not None:
        return [("q", query)]
    assert queries is not None
    from lengthwise.core._textio import checked_text, jsonl_objects

    if not queries.is_file():
        raise ValueError(f"--queries {queries}: no such file; pass a JSONL file with _id and text")
    return [(str(row.get("_id", row.get("id", n))), checked_text(queries, n, row.get("text"), "'text'"))
            for n, row in jsonl_objects(queries, "a JSON object with _id and text")]  # fmt: skip


def search(
    index: Annotated[Path, typer.Argument(help="A folder written by `lengthwise index build`.")],
    query: Annotated[str | None, typer.Option("--query", "-q", help="One query text.")] = None,
    queries: Annotated[Path | None, typer.Option("--queries", help="JSONL file of queries (_id, text).")] = None,
    k: Annotated[int, typer.Option("--k", help="Documents per query.", min=1)] = 10,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line: query_id and hits.")] = False,
    windows: Annotated[
        int | None,
        typer.Option("--windows", help="Candidate windows per query (default 1,000; 4,000 on ubinary).", min=1),
    ] = None,
    probes: Annotated[
        int | None,
        typer.Option("--probes", help="FAISS lists probed (default: a quarter) or USearch expansion (64).", min=1),
    ] = None,
) -> None:
    """Search INDEX: queries embedded with the settings recorded in the index, documents best first."""
    from lengthwise.core.models import ModelLoadError
    from lengthwise.longdoc.index import hits_json
    from lengthwise.pipelines import LongIndex

    quiet_loading()

    try:
        asked = _queries(query, queries)
        results = LongIndex.open(index).search([text for _, text in asked], k, windows=windows, probes=probes)
    except (ValueError, ModelLoadError) as err:
        _fail(setting_message(err))
    for (query_id, _), hits in zip(asked, results, strict=True):
        if as_json:
            print(hits_json(query_id, hits))
            continue
        console.print(f"{query_id}:", highlight=False)
        for rank, (doc_id, score) in enumerate(hits, 1):
            console.print(f"  {rank:>3}  {score:.4f}  {json.dumps(doc_id)}", highlight=False, markup=False)
