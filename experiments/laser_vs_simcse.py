"""Study 2 — LA(SER)³ vs SimCSE (self-reference) and vs COCO-DR PT-unsup (intra-reference): SciFact and STS-B.

1. Self-reference: all-MiniLM-L6-v2 trained with `simcse` and with `laser-self` on a seeded sample of the wiki1m head.
2. Intra-reference: trained with `coco-dr` and with `laser-intra` on SciFact abstracts (multi-sentence documents;
   the paper uses MS MARCO passages, not available offline — training on the evaluation corpus is unsupervised
   but in-domain, which the paper's zero-shot setting is not).
3. Every model and the untrained start: SciFact test nDCG@10 (`lengthwise.evaluation.evaluate_retrieval`) on a
   corpus of every judged abstract plus a seeded random sample of the others (`--corpus-sample`; 0 = all 5,183),
   and STS-B test Spearman.

    nice -n 5 python experiments/laser_vs_simcse.py                  # default scale
    nice -n 5 python experiments/laser_vs_simcse.py --steps 500 --batch-size 64 --corpus-sample 0   # larger

Pooling: CLS for all four trainings by default (`--pooling`), since MiniLM's own mean pooling already solves the
self-reference task (SimCSE loss ≈ 1e-5 from step 1); the start is scored with its own mean pooling.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import SHARED, start_study, sts_suite, train_record

WIKI = "wiki1m_simcse_head/wiki1m_for_simcse.head11914.txt.gz"
PAPER = {  # laser3 Table 2 (MiniLM-L6, unsupervised) SciFact nDCG@10, and Table 5 STS-B (BERT-base)
    "scifact_ndcg10_wiki_self_ref": {"simcse": 0.2174, "laser-self": 0.3525},
    "scifact_ndcg10_msmarco_intra_ref": {"coco-dr": 0.4056, "laser-intra": 0.4076},
    "stsb_bert_base": {"simcse": 76.85, "laser-cls": 76.19, "laser-mean": 75.61},
}


def corpus_sample(data: Any, size: int, seed: int) -> Any:
    """Every judged document plus seeded random others, `size` in all (0 = the whole corpus)."""
    import numpy as np

    if not size or size >= len(data.doc_ids):
        return data
    judged = {doc for docs in data.qrels.values() for doc in docs}
    others = [i for i, doc in enumerate(data.doc_ids) if doc not in judged]
    extra = np.random.default_rng(seed).choice(len(others), size=max(0, size - len(judged)), replace=False)
    keep = sorted([i for i, doc in enumerate(data.doc_ids) if doc in judged] + [others[j] for j in extra])
    return replace(
        data,
        doc_ids=tuple(data.doc_ids[i] for i in keep),
        doc_texts=tuple(data.doc_texts[i] for i in keep),
        source=f"{data.source}, corpus sample {len(keep)} (all judged + random, seed {seed})",
    )


def score(model_path: str, data: Any) -> dict[str, Any]:
    """SciFact nDCG@10 (× 100) on the (sampled) corpus and STS-B test Spearman."""
    from lengthwise.core.encoder import as_encoder
    from lengthwise.core.models import load_plain_model
    from lengthwise.evaluation import evaluate_retrieval

    start = time.perf_counter()
    result = evaluate_retrieval(as_encoder(load_plain_model(model_path)), data, batch_size=16)
    return {
        "scifact": {k: result.scores[k] for k in ("ndcg@10", "recall@100")},
        "sts": sts_suite(model_path, ["STS-B"]),
        "wall_s": round(time.perf_counter() - start, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("experiments/runs/laser_vs_simcse"))
    parser.add_argument("--model", default=None, help="starting model (default: the offline all-MiniLM-L6-v2)")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-length", type=int, default=256, help="N (paper: 256)")
    parser.add_argument("--lr", type=float, default=3e-5)
    parser.add_argument("--pooling", default="cls")
    parser.add_argument("--corpus-sample", type=int, default=1000, help="SciFact corpus size for retrieval (0 = all)")
    parser.add_argument("--settings", default="self,intra", help="self (wiki1m) and/or intra (SciFact docs)")
    parser.add_argument("--seed", type=int, default=42)
    args, model, summary = start_study(parser, argv, "laser_vs_simcse")
    from lengthwise.evaluation import read_beir
    from lengthwise.training import TrainConfig

    data = corpus_sample(read_beir(SHARED / "scifact"), args.corpus_sample, args.seed)
    runs: dict[str, Any] = {}
    summary.payload = {"eval_data": data.source, "paper": PAPER, "runs": runs}
    runs["start"] = {"pooling": "mean (model's own)", **score(model, data)}
    summary.write()
    jobs = {"self": (WIKI, ("simcse", "laser-self")), "intra": ("scifact", ("coco-dr", "laser-intra"))}
    for setting in args.settings.split(","):
        source, methods = jobs[setting]
        for method in methods:
            config = TrainConfig(
                method=method, data=str(SHARED / source), out=str(args.out / method), model=model,
                max_steps=args.steps, batch_size=args.batch_size, max_length=args.max_length, lr=args.lr,
                seed=args.seed, pooling=args.pooling, max_examples=args.steps * args.batch_size * 2,
                save_steps=10**6, logging_steps=1,
            )  # fmt: skip
            runs[method] = {"setting": setting, "train": train_record(config)}
            summary.write()
            runs[method].update(score(runs[method]["train"]["model_dir"], data))
            summary.write()
            print(method, runs[method]["scifact"], runs[method]["sts"]["spearman"], flush=True)
    summary.write()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
