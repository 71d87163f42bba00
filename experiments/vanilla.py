"""Issue 37, part 1 — a vanilla (MLM-only) BERT pretrained here from scratch, the start for the objectives' claims.

No vanilla encoder can be downloaded here, and the papers' objectives start from one, so this script pretrains a
small BERT with masked language modelling from random weights: the all-MiniLM-L6-v2 tokenizer (its WordPiece
vocabulary, 30,522 ids) and the transformers stack — `BertConfig` / `BertForMaskedLM`,
`DataCollatorForLanguageModeling` (15 %: 80 % [MASK], 10 % random, 10 % kept) and the `Trainer` (checkpoints every
``--save-steps``, a restarted run resumes from the last one). Nothing of the MLM is written here.

    python experiments/vanilla.py measure --out experiments/runs/vanilla_measure      # s/step of candidate sizes
    OMP_NUM_THREADS=1 nohup nice -n 15 python experiments/vanilla.py pretrain --out experiments/runs/vanilla \\
        > experiments/runs/vanilla.log 2>&1 &                                         # the CPU preset, resumable
    python experiments/vanilla.py pretrain --device cuda --preset cuda --out runs/vanilla_gpu   # a GPU machine
    python experiments/vanilla.py check experiments/runs/vanilla/model               # loads offline, mean pooling

Data: open text only, never an evaluation set's text. By default the essays of ``data/essays``, the wiki1m head,
the IMDB *train* reviews and the 20 Newsgroups *train* posts (their header block dropped). Flickr8k captions are
not used by default: most STS14 ``images`` sentences and about half of the STS-B test ``images`` sentences are
Flickr8k captions (measured: 2,594 of 2,696 and 224 of 482 exact matches after lower-casing), so pretraining on
them would put evaluation text in the model. Each document is tokenized without special tokens, documents are
joined by [SEP] and the stream is cut into packed blocks of ``[CLS] … [SEP]`` of ``--seq-len`` tokens (the
papers' claims are about long inputs, hence 256 rather than the usual 128). About 1 % of the documents (by a hash
of source and index, whatever the seed) are held out; the held-out loss is computed on ``--eval-blocks`` blocks
masked once with a fixed seed, so its curve is comparable from step to step. Training masks are drawn by the
collator seeded from the run seed and the batch's ids, so a resumed run trains exactly as the uninterrupted one.

Writes ``OUT/summary.json`` (atomically, at every log and at the end): settings, the data list (each source file
with its sha256, documents and tokens), the model size, the train and held-out MLM loss curves, time per step,
hardware and environment. ``OUT/model`` is the final model: a plain transformers checkpoint (``BertForMaskedLM``,
safetensors: ``AutoModel`` loads the encoder, ``AutoModelForMaskedLM`` the head too) with the tokenizer, plus the
sentence-transformers files for mean pooling, so ``SentenceTransformer(OUT/model)`` and ``lengthwise train
--model OUT/model`` load it as it is.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import math
import os
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, SHARED, default_model, hardware, set_threads

STUDY = "vanilla"
# name → (files, reader). Readers yield documents, each a list of text pieces joined without a separator.
SOURCES: dict[str, tuple[list[Path], str]] = {
    "essays": (sorted((REPO / "data" / "essays").glob("*.txt.gz")), "lines_one_doc"),
    "wiki1m_head": ([SHARED / "wiki1m_simcse_head" / "wiki1m_for_simcse.head11914.txt.gz"], "line_per_doc"),
    "imdb_train": ([SHARED / "imdb" / "train.jsonl.gz"], "jsonl"),
    "20ng_train": ([SHARED / "20newsgroups" / "train.jsonl.gz"], "jsonl_news"),
    "flickr8k_captions": ([SHARED / "flickr8k_captions" / "Flickr8k.token.txt.gz"], "captions"),
}
DEFAULT_SOURCES = "essays,wiki1m_head,imdb_train,20ng_train"  # flickr8k: evaluation text (see the docstring)
# Named sizes. "cpu" was chosen by `measure` (2-core machine shared with other jobs, load average 3-5, one thread,
# blocks of 256): s/step at batch 16 (median of 3) — 128x2x2x512 10.7 s, 128x4x2x512 9.9 s, 256x4x4x1024 14.8 s
# (277 tokens/s); at batch 32 256x4x4x1024 took 31.0 s. The output layer over the 30,522-id vocabulary at every
# position is most of the cost, so the 4x smaller encoders are only 1.4x faster per token: 256x4x4x1024 (BERT-mini's
# shape, 11.2 M parameters, 3.3 M outside the embeddings), batch 16, 480 steps ≈ 2 h (2.0 M tokens seen).
# "cuda" is a larger model for a GPU machine (about 13 passes over the default data). "tiny" is for the tests.
PRESETS: dict[str, dict[str, Any]] = {
    "cpu": dict(hidden=256, layers=4, heads=4, intermediate=1024, seq_len=256, batch_size=16, max_steps=480,
                lr=5e-4, warmup_steps=48, save_steps=20, eval_steps=40, logging_steps=5, eval_blocks=64),
    "cuda": dict(hidden=512, layers=8, heads=8, intermediate=2048, seq_len=512, batch_size=128, max_steps=3000,
                 lr=5e-4, warmup_steps=300, save_steps=250, eval_steps=250, logging_steps=25, eval_blocks=512),
    "tiny": dict(hidden=32, layers=2, heads=2, intermediate=64, seq_len=32, batch_size=4, max_steps=6,
                 lr=1e-3, warmup_steps=0, save_steps=3, eval_steps=3, logging_steps=1, eval_blocks=4),
}  # fmt: skip
HELD_OUT_PER_MILLE = 10  # documents held out for the MLM loss curve


# ---------------------------------------------------------------------------------------------------- data


def _open(path: Path) -> Any:
    return gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else path.open(encoding="utf-8")


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_documents(path: Path, reader: str) -> Iterator[list[str]]:
    """The documents of one file, each a list of text pieces (paragraphs, lines) of one running text."""
    with _open(path) as handle:
        if reader == "lines_one_doc":  # a book, one paragraph per line
            yield [line.strip() for line in handle if line.strip()]
        elif reader == "line_per_doc":
            yield from ([line.strip()] for line in handle if line.strip())
        elif reader == "blank_line_docs":  # a plain-text file given by path: documents split by blank lines
            piece: list[str] = []
            for line in handle:
                if line.strip():
                    piece.append(line.strip())
                elif piece:
                    yield piece
                    piece = []
            if piece:
                yield piece
        elif reader in ("jsonl", "jsonl_news"):
            for line in handle:
                text = json.loads(line)["text"]
                if reader == "jsonl_news":  # Usenet header block (From:, Organization:, Lines:, …) dropped
                    head, _, body = text.partition("\n\n")
                    subject = [row[9:] for row in head.splitlines() if row.startswith("Subject: ")]
                    text = "\n".join([*subject, body])
                pieces = [row.strip() for row in text.splitlines() if row.strip()]
                if pieces:
                    yield pieces
        elif reader == "captions":
            for line in handle:
                caption = line.rstrip("\n").split("\t", 1)[-1].split("  ", 1)[-1].strip()
                if caption:
                    yield [caption]
        else:
            raise ValueError(f"unknown reader {reader!r}")


def resolve_sources(spec: str) -> dict[str, tuple[list[Path], str]]:
    """``--sources``: names of `SOURCES` or paths of plain-text files (documents split by blank lines)."""
    chosen: dict[str, tuple[list[Path], str]] = {}
    for item in (part.strip() for part in spec.split(",") if part.strip()):
        if item in SOURCES:
            chosen[item] = SOURCES[item]
        elif Path(item).is_file():
            chosen[Path(item).name] = ([Path(item).resolve()], "blank_line_docs")
        else:
            raise SystemExit(f"--sources: {item!r} is neither one of {sorted(SOURCES)} nor a file")
    for name, (files, _) in chosen.items():
        missing = [str(path) for path in files if not path.is_file()]
        if missing or not files:
            raise SystemExit(f"source {name}: missing {missing or 'every file'}")
    return chosen


def held_out(source: str, index: int) -> bool:
    """Whether document `index` of `source` is held out (a hash, so the split does not depend on the seed)."""
    key = hashlib.sha1(f"{source}:{index}".encode()).digest()
    return int.from_bytes(key[:4], "big") % 1000 < HELD_OUT_PER_MILLE


def build_blocks(tokenizer: Any, sources: dict[str, tuple[list[Path], str]], seq_len: int) -> dict[str, Any]:
    """Tokenize every document, pack the train and held-out streams into blocks; (arrays, data record)."""
    import numpy as np

    body = seq_len - 2
    streams: dict[str, list[int]] = {"train": [], "held_out": []}
    record: list[dict[str, Any]] = []
    for name, (files, reader) in sources.items():
        for path in files:
            docs = tokens = held_docs = held_tokens = 0
            for index, pieces in enumerate(read_documents(path, reader)):
                ids = [i for row in tokenizer(pieces, add_special_tokens=False)["input_ids"] for i in row]
                if not ids:
                    continue
                split = "held_out" if held_out(f"{name}/{path.name}", index) else "train"
                streams[split].extend([*ids, tokenizer.sep_token_id])  # documents joined by [SEP]
                docs, tokens = docs + 1, tokens + len(ids)
                if split == "held_out":
                    held_docs, held_tokens = held_docs + 1, held_tokens + len(ids)
            record.append({
                "source": name, "file": _display(path), "sha256": sha256(path), "bytes": path.stat().st_size,
                "documents": docs, "tokens": tokens, "held_out_documents": held_docs, "held_out_tokens": held_tokens,
            })  # fmt: skip
            print(f"data: {name}/{path.name}: {docs} docs, {tokens} tokens", flush=True)
    arrays = {}
    for split, stream in streams.items():
        n = len(stream) // body
        ids = np.asarray(stream[: n * body], dtype=np.int32).reshape(n, body)
        cls = np.full((n, 1), tokenizer.cls_token_id, dtype=np.int32)
        sep = np.full((n, 1), tokenizer.sep_token_id, dtype=np.int32)
        arrays[split] = np.concatenate([cls, ids, sep], axis=1)
    totals = {
        "tokens": sum(row["tokens"] for row in record),
        "train_tokens": sum(row["tokens"] - row["held_out_tokens"] for row in record),
        "held_out_tokens": sum(row["held_out_tokens"] for row in record),
        "train_blocks": int(arrays["train"].shape[0]),
        "held_out_blocks": int(arrays["held_out"].shape[0]),
        "seq_len": seq_len,
        "packing": "documents tokenized without special tokens, joined by [SEP], cut into [CLS] + body + [SEP]",
    }
    return {"arrays": arrays, "files": record, "totals": totals}


def _display(path: Path) -> str:
    for root, label in ((REPO, ""), (SHARED, "../shared/data/")):
        try:
            return label + str(path.resolve().relative_to(root.resolve()))
        except ValueError:
            continue
    return str(path)


def load_or_build_data(out: Path, tokenizer: Any, sources: dict[str, tuple[list[Path], str]], seq_len: int) -> Any:
    """The packed blocks, cached in OUT/data (rebuilt when the sources' hashes or the block length change)."""
    import numpy as np

    cache = out / "data"
    key = {
        "seq_len": seq_len,
        "sources": {name: [sha256(p) for p in files] for name, (files, _) in sources.items()},
        "vocab_sha256": hashlib.sha256(json.dumps(sorted(tokenizer.get_vocab().items())).encode()).hexdigest(),
    }
    meta = cache / "data.json"
    if meta.exists():
        stored = json.loads(meta.read_text(encoding="utf-8"))
        if stored.get("key") == key:
            arrays = {split: np.load(cache / f"{split}.npy") for split in ("train", "held_out")}
            return {"arrays": arrays, "files": stored["files"], "totals": stored["totals"]}
    built = build_blocks(tokenizer, sources, seq_len)
    cache.mkdir(parents=True, exist_ok=True)
    for split, array in built["arrays"].items():
        np.save(cache / f"{split}.npy", array)
    from lengthwise.core.results import write_json_atomic

    write_json_atomic(meta, {"key": key, "files": built["files"], "totals": built["totals"]})
    return built


class Blocks:
    """A map-style dataset of packed blocks: ``{"input_ids": [...]}`` (masked by the collator)."""

    def __init__(self, array: Any):
        self.array = array

    def __len__(self) -> int:
        return int(self.array.shape[0])

    def __getitem__(self, index: int) -> dict[str, Any]:
        return {"input_ids": self.array[index].tolist()}


class FixedMasks:
    """The held-out blocks, masked once by the same collator with a fixed seed, so every evaluation scores the same
    masked positions and the curve moves with the model only."""

    def __init__(self, array: Any, collator_cls: Any, tokenizer: Any, seed: int):
        masker = collator_cls(tokenizer=tokenizer, mlm_probability=0.15, seed=seed)
        batch = masker([{"input_ids": row.tolist()} for row in array])
        self.rows = [
            {"input_ids": batch["input_ids"][i], "labels": batch["labels"][i]} for i in range(len(batch["input_ids"]))
        ]

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return self.rows[index]


def make_collator(collator_cls: Any, tokenizer: Any, seed: int) -> Any:
    """The MLM collator, seeded per batch from the run seed and the batch's ids; already-masked rows (with labels,
    the held-out set) are only stacked.

    A batch's masks depend on its content and the seed alone, not on the global RNG: on resume the Trainer restores
    the RNG only after it has collated the first resumed batch, so masks drawn from the global RNG would differ from
    the uninterrupted run's; these do not, and a resumed run is the run that was not killed.
    """
    import zlib

    import numpy as np
    import torch

    def collate(rows: list[dict[str, Any]]) -> dict[str, Any]:
        if "labels" in rows[0]:
            return {key: torch.stack([row[key] for row in rows]) for key in ("input_ids", "labels")}
        ids = np.asarray([row["input_ids"] for row in rows], dtype=np.int32)
        batch_seed = (seed * 1_000_003 + zlib.crc32(ids.tobytes())) % 2**63
        return collator_cls(tokenizer=tokenizer, mlm_probability=0.15, seed=batch_seed)(rows)

    return collate


# ---------------------------------------------------------------------------------------------------- model


def bert_config(settings: dict[str, Any], tokenizer: Any) -> Any:
    from transformers import BertConfig

    return BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=settings["hidden"],
        num_hidden_layers=settings["layers"],
        num_attention_heads=settings["heads"],
        intermediate_size=settings["intermediate"],
        max_position_embeddings=max(512, settings["seq_len"]),
        pad_token_id=tokenizer.pad_token_id,
    )


def load_tokenizer() -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(default_model())


def parameters(model: Any) -> dict[str, int]:
    total = sum(p.numel() for p in model.parameters())
    embeddings = sum(p.numel() for n, p in model.named_parameters() if ".embeddings." in n)
    return {"total": total, "embeddings": embeddings, "non_embedding": total - embeddings}


# ---------------------------------------------------------------------------------------------------- measure


def measure(args: argparse.Namespace) -> int:
    """Time a few full training steps (forward, backward, AdamW) of each candidate size on random blocks."""
    import torch
    from transformers import BertForMaskedLM, DataCollatorForLanguageModeling

    from lengthwise.core.results import environment, write_json_atomic

    tokenizer = load_tokenizer()
    masker = DataCollatorForLanguageModeling(tokenizer=tokenizer, mlm_probability=0.15, seed=args.seed)
    generator = torch.Generator().manual_seed(args.seed)
    rows: list[dict[str, Any]] = []
    for spec in args.candidates.split(","):
        hidden, layers, heads, intermediate = (int(x) for x in spec.split("x"))
        settings = dict(hidden=hidden, layers=layers, heads=heads, intermediate=intermediate, seq_len=args.seq_len)
        torch.manual_seed(args.seed)
        model = BertForMaskedLM(bert_config(settings, tokenizer)).train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        ids = torch.randint(1000, len(tokenizer), (args.batch_size, args.seq_len), generator=generator)
        batch = masker([{"input_ids": row.tolist()} for row in ids])
        times = []
        for step in range(args.warmup + args.steps):
            start = time.perf_counter()
            loss = model(**batch).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            if step >= args.warmup:
                times.append(time.perf_counter() - start)
        s_per_step = sorted(times)[len(times) // 2]  # the median: robust to another job's burst
        steps = int(args.budget_hours * 3600 / s_per_step)
        row = {
            "candidate": spec, **settings, "batch_size": args.batch_size, "parameters": parameters(model),
            "s_per_step_median": round(s_per_step, 3), "s_per_step_all": [round(t, 3) for t in times],
            "tokens_per_s": round(args.batch_size * args.seq_len / s_per_step, 1),
            f"steps_in_{args.budget_hours:g}h": steps,
            f"tokens_in_{args.budget_hours:g}h": steps * args.batch_size * args.seq_len,
            "load_average_1_5_15": [round(x, 2) for x in os.getloadavg()],
        }  # fmt: skip
        rows.append(row)
        print(json.dumps(row), flush=True)
        del model, optimizer
    record = {
        "study": f"{STUDY}/measure",
        "settings": _settings(args),
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "hardware": hardware(),
        "environment": environment(),
        "candidates": rows,
    }
    write_json_atomic(args.out / "measure.json", record)
    return 0


# ---------------------------------------------------------------------------------------------------- pretrain


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    return {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k != "func"}


def resolved_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The preset, with every flag given on the command line on top."""
    settings = dict(PRESETS[args.preset])
    for key in settings:
        value = getattr(args, key, None)
        if value is not None:
            settings[key] = value
    return settings


def pretrain(args: argparse.Namespace) -> int:
    """Pretrain (or resume) into OUT: checkpoints, summary.json, and at the end OUT/model."""
    import torch
    from transformers import (
        BertForMaskedLM,
        DataCollatorForLanguageModeling,
        Trainer,
        TrainerCallback,
        TrainingArguments,
    )
    from transformers.trainer_utils import get_last_checkpoint

    from lengthwise.core.results import environment, write_json_atomic

    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA device")
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    settings = resolved_settings(args)
    run_key = {"settings": settings, "sources": args.sources, "seed": args.seed, "device": args.device}
    key_path = out / "run.json"
    checkpoints = out / "checkpoints"
    last = get_last_checkpoint(str(checkpoints)) if checkpoints.is_dir() else None
    if last and not args.fresh:
        stored = json.loads(key_path.read_text(encoding="utf-8")) if key_path.exists() else None
        if stored != run_key:
            raise SystemExit(
                f"{out} holds a run with other settings ({stored}); resume with the same flags, or pass --fresh"
            )
        print(f"resuming from {last}", flush=True)
    elif last and args.fresh:
        shutil.rmtree(checkpoints)
        last = None
    write_json_atomic(key_path, run_key)

    tokenizer = load_tokenizer()
    sources = resolve_sources(args.sources)
    data = load_or_build_data(out, tokenizer, sources, settings["seq_len"])
    if not len(data["arrays"]["held_out"]) or not len(data["arrays"]["train"]):
        raise SystemExit(f"too little text for blocks of {settings['seq_len']}: {data['totals']}")
    train_set = Blocks(data["arrays"]["train"])
    eval_array = data["arrays"]["held_out"][: settings["eval_blocks"]]
    eval_set = FixedMasks(eval_array, DataCollatorForLanguageModeling, tokenizer, seed=args.seed)
    print(json.dumps(data["totals"]), flush=True)

    torch.manual_seed(args.seed)
    config = bert_config(settings, tokenizer)
    model = BertForMaskedLM(config)
    cuda = args.device == "cuda"
    training_args = TrainingArguments(
        output_dir=str(checkpoints),
        max_steps=settings["max_steps"],
        per_device_train_batch_size=settings["batch_size"],
        per_device_eval_batch_size=settings["batch_size"],
        learning_rate=settings["lr"],
        lr_scheduler_type="linear",
        warmup_steps=settings["warmup_steps"],
        weight_decay=0.01,
        adam_beta2=0.98,
        adam_epsilon=1e-6,
        max_grad_norm=1.0,
        logging_steps=settings["logging_steps"],
        eval_strategy="steps",
        eval_steps=settings["eval_steps"],
        save_strategy="steps",
        save_steps=settings["save_steps"],
        save_total_limit=2,
        seed=args.seed,
        data_seed=args.seed,
        use_cpu=not cuda,
        bf16=cuda and torch.cuda.is_bf16_supported(),
        dataloader_num_workers=0,
        remove_unused_columns=False,
        report_to="none",
        disable_tqdm=True,
    )
    started = time.perf_counter()
    initial: dict[str, Any] = {}
    base = {
        "study": STUDY,
        "starting_checkpoint": "none: random initialisation (seeded), masked language modelling from scratch",
        "settings": _settings(args) | {"resolved": settings},
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "tokenizer": f"all-MiniLM-L6-v2's WordPiece tokenizer ({default_model()}), vocabulary {len(tokenizer)}",
        "model_config": config.to_dict(),
        "parameters": parameters(model),
        "data": {"files": data["files"], **data["totals"], "held_out_rule": f"sha1(source/file:index) % 1000 < "
                 f"{HELD_OUT_PER_MILLE}", "eval_blocks": len(eval_set), "eval_masking": f"fixed, seed {args.seed}"},
        "environment": environment(),
    }  # fmt: skip

    def write(trainer_state: Any, status: str, extra: dict[str, Any] | None = None) -> None:
        history = list(trainer_state.log_history)
        train_curve = [
            {"step": r["step"], "loss": r["loss"], "lr": r.get("learning_rate")} for r in history if "loss" in r
        ]
        eval_curve = [{"step": 0, "loss": initial["eval_loss"]}] if initial else []
        eval_curve += [{"step": r["step"], "loss": r["eval_loss"]} for r in history if "eval_loss" in r]
        write_json_atomic(
            out / "summary.json",
            {
                **base,
                "status": status,
                "global_step": trainer_state.global_step,
                "max_steps": settings["max_steps"],
                "hardware": hardware(),
                "wall_time_this_process_s": round(time.perf_counter() - started, 1),
                "curves": {"train_mlm_loss": train_curve, "held_out_mlm_loss": eval_curve},
                **(extra or {}),
            },
        )

    class Record(TrainerCallback):
        """Rewrites summary.json whenever the trainer logs (so a killed run keeps its curve)."""

        def on_log(self, _args: Any, state: Any, _control: Any, **kwargs: Any) -> None:
            write(state, "running")

    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=train_set,
        eval_dataset=eval_set,
        data_collator=make_collator(DataCollatorForLanguageModeling, tokenizer, args.seed),
        callbacks=[Record()],
    )
    initial_path = out / "initial_eval.json"  # the held-out loss of the random model: the curve's step 0
    if last is None or not initial_path.exists():
        write_json_atomic(initial_path, trainer.evaluate())
    initial.update(json.loads(initial_path.read_text(encoding="utf-8")))
    result = trainer.train(resume_from_checkpoint=last)
    final_eval = trainer.evaluate()
    model_dir = save_model(trainer.model, tokenizer, out / "model", settings["seq_len"])
    write(
        trainer.state,
        "done",
        {
            "final_held_out_mlm_loss": final_eval["eval_loss"],
            "final_held_out_perplexity": math.exp(min(final_eval["eval_loss"], 50.0)),
            "train_runtime_this_process_s": round(result.metrics.get("train_runtime", 0.0), 1),
            "model_dir": str(model_dir),
        },
    )
    print(f"done: {model_dir}; held-out MLM loss {final_eval['eval_loss']:.4f}", flush=True)
    return 0


def save_model(model: Any, tokenizer: Any, path: Path, seq_len: int) -> Path:
    """A plain transformers checkpoint (safetensors) + tokenizer, plus sentence-transformers' mean-pooling files."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(path), safe_serialization=True)
    tokenizer.save_pretrained(str(path))
    # The sentence-transformers files, written by sentence-transformers itself into a scratch folder, then copied
    # without its weights (those would be the bare encoder's; the checkpoint here keeps the MLM head too).
    scratch = path.parent / (path.name + ".st-tmp")
    shutil.rmtree(scratch, ignore_errors=True)
    encoder = Transformer(str(path), max_seq_length=seq_len)
    pooling = Pooling(encoder.get_embedding_dimension(), pooling_mode="mean")
    SentenceTransformer(modules=[encoder, pooling], device="cpu").save(str(scratch))
    for item in scratch.iterdir():
        if item.is_dir():
            shutil.copytree(item, path / item.name, dirs_exist_ok=True)
        elif item.name in ("modules.json", "sentence_bert_config.json", "config_sentence_transformers.json"):
            shutil.copy2(item, path / item.name)
    shutil.rmtree(scratch)
    return path


def check(args: argparse.Namespace) -> int:
    """Load OUT/model offline as a SentenceTransformer (mean pooling) and as a masked LM; encode two texts."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModelForMaskedLM

    model = SentenceTransformer(str(args.model), device="cpu", local_files_only=True)
    pooling = [m for m in model if type(m).__name__ == "Pooling"]
    if not pooling or pooling[0].pooling_mode != "mean":
        raise SystemExit(f"{args.model}: no mean pooling ({list(model)})")
    vectors = model.encode(["A man is playing a guitar.", "The essay is about truth."])
    AutoModelForMaskedLM.from_pretrained(str(args.model), local_files_only=True)
    print(json.dumps({"model": str(args.model), "shape": list(vectors.shape), "pooling": "mean", "ok": True}))
    return 0


# ---------------------------------------------------------------------------------------------------- CLI


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    m = sub.add_parser("measure", help="time training steps of candidate sizes at the current thread count")
    m.add_argument("--out", type=Path, default=Path("experiments/runs/vanilla_measure"))
    m.add_argument("--candidates", default="256x4x4x1024,256x6x4x1024,384x4x6x1536", help="HxLxAxI, comma-separated")
    m.add_argument("--seq-len", type=int, default=256)
    m.add_argument("--batch-size", type=int, default=32)
    m.add_argument("--steps", type=int, default=4, help="timed steps per candidate (after --warmup)")
    m.add_argument("--warmup", type=int, default=1)
    m.add_argument("--budget-hours", type=float, default=2.0)
    m.add_argument("--seed", type=int, default=42)
    m.add_argument("--threads", type=int, default=1)
    m.set_defaults(func=measure)

    p = sub.add_parser("pretrain", help="pretrain (resuming from OUT/checkpoints when there is one)")
    p.add_argument("--out", type=Path, default=Path("experiments/runs/vanilla"))
    p.add_argument("--preset", choices=sorted(PRESETS), default=None, help="default: cpu, or cuda with --device cuda")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--sources", default=DEFAULT_SOURCES, help=f"names of {sorted(SOURCES)} or text-file paths")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--threads", type=int, default=1, help="torch threads (one is fastest on the shared CPU)")
    p.add_argument("--fresh", action="store_true", help="discard OUT's checkpoints instead of resuming")
    overrides = "hidden layers heads intermediate seq_len batch_size max_steps lr warmup_steps save_steps eval_steps"
    for key in (overrides + " logging_steps eval_blocks").split():
        kind = float if key == "lr" else int
        p.add_argument("--" + key.replace("_", "-"), type=kind, default=None, help="overrides the preset")
    p.set_defaults(func=pretrain)

    c = sub.add_parser("check", help="load a pretrained model offline with sentence-transformers")
    c.add_argument("model", type=Path)
    c.add_argument("--threads", type=int, default=1)
    c.set_defaults(func=check)

    args = parser.parse_args(argv)
    if getattr(args, "preset", "unset") is None:
        args.preset = "cuda" if args.device == "cuda" else "cpu"
    set_threads(args.threads)
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
