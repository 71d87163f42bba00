"""A ColBERT trained here from all-MiniLM-L6-v2 (issue 64, step 4), with sentence-transformers' own
`MultiVectorEncoderTrainer` and `MultiVectorMultipleNegativesRankingLoss` (in-batch negatives, MaxSim scores).

The start: all-MiniLM-L6-v2 converted by `MultiVectorEncoder` (its pooling dropped, a token-level projection to 128
dimensions appended at random, a token mask and normalisation), with ColBERT's query and document markers as
prompts (``[unused0]``, ``[unused1]``). The data, what this machine holds and no corpus the token study scores
queries of:

- SciFact's **train** queries (BEIR qrels/train.tsv: claim → the abstracts that support or refute it). The study
  scores SciFact's test queries only (disjoint from these); the abstracts are one corpus for every split, so an
  abstract a train claim cites can be in the study's sample: SciFact is in-domain for this model, said beside its
  figures.
- SNLI's dev and test entailment pairs (premise → a sentence it entails; SentEval's copy in
  ``shared/data/snli_senteval``), short general text.

Nothing from QMSum (neither its train meetings nor any other), 20 Newsgroups or the replies corpus. Resumable (the
trainer's checkpoints), one CPU thread by default; writes the model and docs/results/colbert_train.json.

    python -m benchmarks.train.colbert --out /tmp/lengthwise-colbert     # then: benchmarks.search.tokens --colbert
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import time
from pathlib import Path
from typing import Any

from benchmarks._measure import command_line

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results" / "colbert_train.json"
QUERY, DOCUMENT = "[unused0] ", "[unused1] "  # ColBERT's markers (as PyLate and Stanford ColBERT write them)


def _scifact_pairs(folder: Path) -> list[tuple[str, str]]:
    from lengthwise.evaluation.data import read_beir

    data = read_beir(folder, "train")
    texts = dict(zip(data.doc_ids, data.doc_texts, strict=True))
    queries = dict(zip(data.query_ids, data.query_texts, strict=True))
    return [(queries[q], texts[d]) for q, found in data.qrels.items() if q in queries
            for d, grade in found.items() if grade > 0 and d in texts]  # fmt: skip


def _snli_pairs(folder: Path) -> list[tuple[str, str]]:
    pairs = []
    for split in ("dev", "test"):
        with gzip.open(folder / f"{split}.jsonl.gz", "rt", encoding="utf-8") as handle:
            rows = [json.loads(line) for line in handle]
        pairs += [(r["premise"].strip(), r["hypothesis"].strip()) for r in rows if r["label"] == "entailment"]
    return pairs


def train(args: argparse.Namespace) -> dict[str, Any]:
    import torch
    from datasets import Dataset
    from sentence_transformers import MultiVectorEncoder
    from sentence_transformers.multi_vector_encoder import (
        MultiVectorEncoderTrainer,
        MultiVectorEncoderTrainingArguments,
    )
    from sentence_transformers.multi_vector_encoder.losses import MultiVectorMultipleNegativesRankingLoss

    from lengthwise.core.defaults import DEFAULT_MODEL
    from lengthwise.core.models import resolve_model_path

    torch.manual_seed(args.seed)
    scifact, snli = _scifact_pairs(args.scifact), _snli_pairs(args.snli)
    pairs = scifact + snli
    random.Random(args.seed).shuffle(pairs)
    data = Dataset.from_dict({"anchor": [a for a, _ in pairs], "positive": [p for _, p in pairs]})
    model = MultiVectorEncoder(str(resolve_model_path(DEFAULT_MODEL)), device="cpu",
                               prompts={"query": QUERY, "document": DOCUMENT})  # fmt: skip
    model[0].max_seq_length = args.max_length
    checkpoints = args.out / "checkpoints"
    training = MultiVectorEncoderTrainingArguments(
        output_dir=str(checkpoints), num_train_epochs=args.epochs, per_device_train_batch_size=args.batch,
        learning_rate=args.lr, warmup_ratio=0.1, seed=args.seed, data_seed=args.seed, logging_steps=10,
        save_strategy="steps", save_steps=args.save_steps, save_total_limit=1, report_to="none",
        batch_sampler="no_duplicates", prompts={"anchor": QUERY, "positive": DOCUMENT}, use_cpu=True,
        dataloader_num_workers=0,
    )  # fmt: skip
    trainer = MultiVectorEncoderTrainer(model=model, args=training, train_dataset=data,
                                        loss=MultiVectorMultipleNegativesRankingLoss(model))  # fmt: skip
    resume = any(checkpoints.glob("checkpoint-*"))
    started = time.perf_counter()
    trainer.train(resume_from_checkpoint=True if resume else None)
    seconds = time.perf_counter() - started
    model.save(str(args.out / "model"))
    losses = [(row["step"], round(row["loss"], 4)) for row in trainer.state.log_history if "loss" in row]
    return {"model": str(args.out / "model"), "start": DEFAULT_MODEL, "pairs": {"scifact_train": len(scifact),
            "snli_entailment": len(snli)}, "steps": trainer.state.global_step, "batch": args.batch, "lr": args.lr,
            "epochs": args.epochs, "max_length": args.max_length, "seed": args.seed, "resumed": resume,
            "seconds": round(seconds), "loss": losses}  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("/tmp/lengthwise-colbert"))
    parser.add_argument("--scifact", type=Path, default=ROOT.parent / "shared" / "data" / "scifact")
    parser.add_argument("--snli", type=Path, default=ROOT.parent / "shared" / "data" / "snli_senteval")
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--max-length", type=int, default=256, help="tokens a training text keeps")
    parser.add_argument("--save-steps", type=int, default=25)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    torch.set_num_threads(args.threads)
    from lengthwise.core.results import environment, write_json_atomic

    load = os.getloadavg()
    record = train(args)
    write_json_atomic(RESULTS, {**record, "load": [load, os.getloadavg()], "environment": environment(),
                                "command": command_line("benchmarks.train.colbert", argv)})  # fmt: skip
    print(f"wrote {RESULTS}: {record['steps']} steps in {record['seconds']} s", flush=True)


if __name__ == "__main__":
    main()
